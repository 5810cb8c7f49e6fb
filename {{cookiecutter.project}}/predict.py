"""Label new inputs with a run's checkpoint: ``python predict.py [--checkpoint best|last|PATH]
[--output FILE.jsonl|FILE.csv] [--top_k K] INPUT... [train.py's options]``. INPUT: image
files or folders of them, or CSV files, read as the run read its data. One row an input:
the input, the class's name and probability, the top k. A model of text continues prompts
instead: ``python predict.py --prompt TEXT [--max_new_tokens N] [--temperature T] [--top_k K]``.
"""

import sys

from src.scaffold.run.start import begin

begin("predict.py")  # Python 3.8 or newer; what the framework needs first

from src.scaffold import Task  # noqa: E402
from src.scaffold.backend import ProjectConfig  # noqa: E402 (this framework's options)
from src.scaffold.config import parse_script  # noqa: E402
from src.scaffold.infer.predict import DESCRIPTION, options, predict  # noqa: E402
from src.scaffold.run.ending import leave, main  # noqa: E402


def label(argv: list) -> None:
    cfg, args = parse_script(argv, ProjectConfig, DESCRIPTION, options)
    from src import data, model, step  # yours
    from src.scaffold.backend import core  # this framework's Backend and checkpoints

    task = Task.gather(model, data, step)
    predict(task, cfg, core, args)


if __name__ == "__main__":
    leave(main(label, sys.argv[1:]))
