"""Train the model of src/model.py on your data with the step of src/step.py: the boot file
OpenI, ModelArts and the launch scripts run, on a CPU, a GPU or an NPU, alone or as one rank.

The recipe: the options (config.yaml, then the flags); your three files gathered into one
Task; the framework's backend; the run. Your code meets the platform floor (src/scaffold/)
here and nowhere else.
"""

import sys

from src.scaffold.run.start import begin

# First: Python 3.8 or newer (one line if not), and what the framework needs before it loads.
begin("train.py")

from src.scaffold import Task  # noqa: E402
from src.scaffold.backend import ProjectConfig  # noqa: E402 (this framework's options)
from src.scaffold.config import parse_config  # noqa: E402
from src.scaffold.run.ending import leave, main  # noqa: E402
from src.scaffold.run.runner import run  # noqa: E402


def train(argv: list) -> None:
    cfg = parse_config(argv, ProjectConfig)
    # Imported here, inside main(): an error in them, or no framework, is one line.
    from src import data, model, step  # yours
    from src.scaffold.backend import core  # this framework's Backend and checkpoints

    task = Task.gather(model, data, step)
    run(task, cfg, core)


if __name__ == "__main__":
    # A mistake is one line and exit 2 (--debug: the traceback); a stop exits 128 + its number.
    leave(main(train, sys.argv[1:]))
