"""What the checks follow: your files and config.yaml, as train.py gathers them (the model
config.yaml chooses, its checkpoints' names, the metric it monitors)."""

from __future__ import annotations

from src import data, model, step
from src.scaffold import Monitor, Task
from src.scaffold.backend import ProjectConfig
from src.scaffold.config import parse_config

CONFIG = parse_config([], ProjectConfig)
TASK = Task.gather(model, data, step, Monitor(CONFIG.monitor.metric, CONFIG.monitor.mode))
MODEL = TASK.model(CONFIG.model)
