"""The run: its order from start to exit (runner), each step's and epoch's end (epochs), the
learning rate of every step (schedule), progress lines, and the start-up host check."""
