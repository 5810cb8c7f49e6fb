"""Tune the project (README: Tune it): trials of train.py searched by Optuna over the options
sweep.yaml names, each trial an ordinary run in <train_url>/sweep/<trial>/.

    python sweep.py [--trials N] [--parallel K] [--train_url DIR] [--resume auto]
                    [-- options of train.py for every trial]
"""

import sys

from src.scaffold.run.start import begin

begin("sweep.py")

from src.scaffold.sweep.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
