"""Write a run's checkpoint as a model file for inference: ``python export.py --format
{% if cookiecutter.framework == 'mindspore' %}MINDIR|ONNX|AIR{% else %}onnx|torchscript{% endif %} [--checkpoint best|last|PATH] [--output FILE] [--batch N]
[train.py's options]``. The file is checked as it is written (its outputs on real test
samples against the checkpoint's) and described by FILE's .json sidecar: input shape and
dtype, normalisation, class names, versions.
"""

import sys

from src.scaffold.run.start import begin

begin("export.py")  # Python 3.8 or newer; what the framework needs first

from src.scaffold import Task  # noqa: E402
from src.scaffold.backend import ProjectConfig  # noqa: E402 (this framework's options)
from src.scaffold.config import parse_script  # noqa: E402
from src.scaffold.infer.export import DESCRIPTION, export, options  # noqa: E402
from src.scaffold.run.ending import leave, main  # noqa: E402


def write(argv: list) -> None:
    cfg, args = parse_script(argv, ProjectConfig, DESCRIPTION, options)
    from src import data, model, step  # yours
    from src.scaffold.backend import core  # this framework's Backend and checkpoints
    from src.scaffold.backend import export as exporter  # and its model files

    task = Task.gather(model, data, step)
    export(task, cfg, core, exporter, args)


if __name__ == "__main__":
    leave(main(write, sys.argv[1:]))
