"""PyTorch's side of a run: this process's place and device (distributed), mixed precision,
the batches (loader) and the Backend (core)."""

from src.scaffold.config import Config as ProjectConfig

__all__ = ["ProjectConfig"]
