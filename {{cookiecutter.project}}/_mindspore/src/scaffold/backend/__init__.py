"""MindSpore's side of a run: the device and process group (context), this framework's
options, the batches (loader), the training loop (train_loop) and the Backend (core)."""

from src.scaffold.backend.options import MSConfig as ProjectConfig

__all__ = ["ProjectConfig"]
