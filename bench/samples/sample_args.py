"""The options bench_train.py gives each sample loop: where the digits are, the target
accuracy and the training settings it shares with the generated train.py."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def parse(doc: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument(
        "--project",
        type=Path,
        default=Path(os.environ.get("PROJECT", ".")),
        help="a generated project (the MindSpore sample trains its LeNet5)",
    )
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()
