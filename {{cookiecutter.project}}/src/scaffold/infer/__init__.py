"""Using what a run trained: eval.py's, predict.py's and export.py's work."""
