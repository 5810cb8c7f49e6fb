"""The platform floor: what your files may use of it, in one place.

src/model.py, src/data.py and src/step.py are yours; train.py gathers them into a Task
and hands it to the floor, which never imports them. The floor's packages, each with
its own docstring: config (options), data (finding, reading and splitting data),
run (the loop around your step), outputs (checkpoints and the run record), storage
(the platforms' storage), backend (the framework: devices, batches, training).
"""

from src.scaffold.config import Config
from src.scaffold.data.readers import Reader, augment, reader
from src.scaffold.data.splits import Split, array_split
from src.scaffold.task import DataShape, Monitor, Task, image_input, model

__all__ = [
    "Config",
    "DataShape",
    "Monitor",
    "Reader",
    "Split",
    "Task",
    "array_split",
    "augment",
    "image_input",
    "model",
    "reader",
]
