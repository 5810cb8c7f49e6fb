"""The training code. Yours, at this level: model.py (the model), data.py (reading the
data) and step.py (loss, optimizer, metrics). The platform floor is scaffold/."""
