"""sweep.py's command line: its own options before ``--``, train.py's for every trial after."""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import NoReturn, Sequence

from src.scaffold.backend import ProjectConfig
from src.scaffold.config import ConfigError, parse_config
from src.scaffold.config.converters import integer
from src.scaffold.config.options import DEFAULT_CONFIG, options_of
from src.scaffold.errors import TrainError
from src.scaffold.sweep import place, results, space, study

PROJECT = DEFAULT_CONFIG.parent
# What the sweep decides for each trial: never among the options given to every trial.
OWN = ("--train_url", "--resume", "--monitor_metric", "--monitor_mode")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{' '.join(message.split())} (see python sweep.py --help)")


def parser() -> argparse.ArgumentParser:
    found = _Parser(
        prog="sweep.py",
        description="Trials of train.py searched by Optuna over sweep.yaml's space; "
        "after --, train.py's options for every trial.",
        allow_abbrev=False,
    )
    found.add_argument("--trials", type=integer(1), help="trials in all (default: sweep.yaml's)")
    found.add_argument(
        "--parallel", type=integer(1), default=1, help="trials side by side on this node"
    )
    found.add_argument(
        "--train_url",
        help="the output directory or obs:// URL; the sweep goes in its sweep/ (default: "
        "config.yaml's train_url, auto: the platform's, else ./output)",
    )
    found.add_argument(
        "--ranks",
        type=integer(1),
        help="processes a trial, through scripts/run_8p.sh with 2 or more (default: on "
        "accelerators the devices a trial gets, on a CPU 1)",
    )
    found.add_argument("--resume", choices=("auto",), help="auto: continue the sweep there")
    found.add_argument(
        "--sweep_config", type=Path, default=PROJECT / "sweep.yaml", help="the search space"
    )
    return found


def main(argv: Sequence[str]) -> int:
    """The sweep: 0 when its trials have ended, 2 for a mistake (one line), 128 + a signal."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    mine, every = argv[:cut], argv[cut + 1 :]
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    try:
        args = parser().parse_args(mine)
        taken = [arg for arg in every if arg.split("=", 1)[0] in OWN]
        if taken:
            raise ConfigError(
                f"{taken[0].split('=', 1)[0]} after --: the sweep sets it for each trial "
                "(--train_url and --resume go before --)"
            )
        cfg = parse_config(every, ProjectConfig)  # every trial's options, checked once
        spec = space.read(args.sweep_config, cfg.monitor, options_of(ProjectConfig))
        if args.trials is not None:
            spec = replace(spec, trials=args.trials)
        given = cfg.places()
        if args.train_url is not None:
            given = replace(given, train_url=args.train_url, given=(*given.given, "train_url"))
        where = place.place(given, (study.STUDY, *results.FILES))
        shares = study.shares(args.parallel, args.ranks)
        resume = args.resume == "auto"
        if resume:
            where.fetch((study.STUDY,))
        out = where.sweep
        new = not (out / study.STUDY).exists()
        found = study.open_study(out, spec, cfg.seed, resume=resume)
        try:
            return study.run(PROJECT, where, spec, found, shares, every)
        except ConfigError:
            if new:  # a mistake every trial would make: the new sweep's directory goes
                shutil.rmtree(out, ignore_errors=True)
            raise
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except TrainError as err:  # the platform's storage: the last upload failed
        print(f"error: {err}", file=sys.stderr)
        return 1
