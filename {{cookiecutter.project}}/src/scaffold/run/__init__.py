"""The run: its order (runner), each step's and epoch's end (epochs), progress, host check."""
