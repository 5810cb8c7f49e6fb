"""Train LeNet on MNIST with MindSpore: on a CPU, a GPU or an Ascend NPU, alone or under msrun."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace

from src import dataset, storage
from src.config import parse_config
{%- if cookiecutter.ms_train_loop == 'custom' %}
from src.custom_loop import train
{%- endif %}
from src.env import init_env
from src.errors import TrainError
{%- if cookiecutter.ms_train_loop == 'model' %}
from src.model_loop import train
{%- endif %}

# The node size this project was generated for: which rank of a node copies the data.
DEVICES_PER_NODE = {{ cookiecutter.devices_per_node }}


def main(argv: list[str] | None = None) -> int:
    """Run training; a mistake in the user's input is one line on stderr and exit status 2."""
    try:
        cfg = parse_config(argv)
        # OBS data comes to this node's cache once; outputs go there and back to OBS.
        staged = storage.stage(
            cfg.data_url, cfg.train_url, storage.Placement.from_env(DEVICES_PER_NODE)
        )
        cfg = replace(cfg, data_url=staged.data_url, train_url=staged.train_url)
        ctx = init_env(cfg)
        # Only rank 0 reports progress; the others speak up for warnings.
        logging.basicConfig(
            level=logging.INFO if ctx.is_main else logging.WARNING,
            format="%(asctime)s %(message)s",
            stream=sys.stdout,
        )
        if cfg.ignored_args:
            logging.info("ignoring arguments for other tools: %s", " ".join(cfg.ignored_args))
        data = dataset.load(cfg, ctx.group_size)
        after_epoch = staged.sync_output if ctx.is_main else lambda: None
        metrics = train(cfg, ctx, data, after_epoch)
        after_epoch()
        if ctx.is_main:
            logging.info("test accuracy %.4f; output in %s", metrics["accuracy"], cfg.output_dir)
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
