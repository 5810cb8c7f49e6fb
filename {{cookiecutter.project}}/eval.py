"""Score a checkpoint of a run again: ``python eval.py [--checkpoint best|last|PATH]
[--split test|val] [train.py's options]``. The run is the one in --train_url (as train.py
finds it: ./output here, the platform's there, or obs://); its best checkpoint by the
monitored metric unless told. One line a metric; an "eval" row in its metrics.jsonl.
"""

import sys

if sys.version_info < (3, 8):  # noqa: UP036 (the check itself)
    sys.stderr.write("error: eval.py needs Python 3.8 or newer; this is ")
    sys.stderr.write(sys.version.split()[0] + "\n")
    sys.exit(2)
{%- if cookiecutter.framework == 'mindspore' %}

from src.scaffold.backend.sigint import take_sigint  # noqa: E402

take_sigint()
{%- endif %}

from src.scaffold import Monitor, Task  # noqa: E402
from src.scaffold.backend import ProjectConfig  # noqa: E402 (this framework's options)
from src.scaffold.config import parse_config  # noqa: E402
from src.scaffold.run.evaluate import evaluate, parse_eval  # noqa: E402
from src.scaffold.run.runner import main  # noqa: E402


def score(argv: list) -> None:
    which, split, options = parse_eval(argv)
    cfg = parse_config(options, ProjectConfig)
    from src import data, model, step  # yours
    from src.scaffold.backend.core import create  # this framework's Backend

    task = Task.gather(model, data, step, Monitor(cfg.monitor_metric, cfg.monitor_mode))
    evaluate(task, cfg, create, which, split)


if __name__ == "__main__":
    sys.exit(main(score, sys.argv[1:]))
