"""The platform floor: storage, staging, launch, checkpoints and the run record.

Researchers rarely need to open these files: the model, the data and the
training step live one floor up, in src/model.py, src/data.py and src/step.py.
"""
