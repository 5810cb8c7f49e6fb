"""Train LeNet on MNIST: on a CPU, a CUDA GPU or an Ascend NPU, alone or under torchrun."""

from __future__ import annotations

import logging
import sys

from src import distributed
from src.config import parse_config
from src.errors import TrainError
from src.trainer import train


def main(argv: list[str] | None = None) -> int:
    """Run training; a mistake in the user's input is one line on stderr and exit status 2."""
    try:
        cfg = parse_config(argv)
        ctx = distributed.setup(cfg.device_target)
        try:
            # Only rank 0 reports progress; the others speak up for warnings.
            logging.basicConfig(
                level=logging.INFO if ctx.is_main else logging.WARNING,
                format="%(asctime)s %(message)s",
                stream=sys.stdout,
            )
            if cfg.ignored_args:
                logging.info("ignoring arguments for other tools: %s", " ".join(cfg.ignored_args))
            metrics = train(cfg, ctx)
            logging.info("test accuracy %.4f; output in %s", metrics["accuracy"], cfg.output_dir)
        finally:
            distributed.cleanup()
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
