"""The run: its order from start to exit (runner), each step's and epoch's end (epochs),
progress lines, and the start-up host check."""
