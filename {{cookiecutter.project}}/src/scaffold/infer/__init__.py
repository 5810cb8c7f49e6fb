"""Using what a run trained: the checkpoint chosen and what it records (recorded), new inputs
read as the run read its data (inputs), predict.py's batches and rows (predict), and
export.py's model files, their sidecar and the check that they compute what the
checkpoint does (export)."""
