"""Score a checkpoint of a run again: ``python eval.py [--checkpoint best|last|PATH]
[--split test|val] [train.py's options]``. The run is the one in --train_url (as train.py
finds it: ./output here, the platform's there, or obs://); its best checkpoint by the
monitored metric unless told. One line a metric; an "eval" row in its metrics.jsonl.
"""

import sys

from src.scaffold.run.start import begin

begin("eval.py")  # Python 3.8 or newer; what the framework needs first

from src.scaffold import Task  # noqa: E402
from src.scaffold.backend import ProjectConfig  # noqa: E402 (this framework's options)
from src.scaffold.config import parse_script  # noqa: E402
from src.scaffold.infer.evaluate import DESCRIPTION, evaluate, options  # noqa: E402
from src.scaffold.run.ending import leave, main  # noqa: E402


def score(argv: list) -> None:
    cfg, args = parse_script(argv, ProjectConfig, DESCRIPTION, options)
    from src import data, model, step  # yours
    from src.scaffold.backend import core  # this framework's Backend and checkpoints

    task = Task.gather(model, data, step)
    evaluate(task, cfg, core, args.checkpoint, args.split)


if __name__ == "__main__":
    leave(main(score, sys.argv[1:]))
