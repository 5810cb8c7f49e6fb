"""What a framework's core.py gives the shared scaffold: ``create(cfg, task) -> Backend``; the
rest of a run (storage, data, resume, logs, records, uploads) is src/scaffold/run/'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import DataOptions
from src.scaffold.config.sections import LoraOptions, ShardOptions
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import Splits
from src.scaffold.task import DataShape, ModelSpec, Task


class EpochEnd(Protocol):
    """What a backend calls while it trains (run/epochs.py); ``stopping``: rank 0 ends it."""

    stopping: bool

    def step(self, step: int, loss: Callable[[], float], lr: Callable[[], float]) -> None:
        """After every training step (1-based over the run): readers of its loss and lr."""

    def __call__(self, epoch: int, train_loss: float, seconds: float) -> None:
        """After each epoch: its mean train loss over the ranks and the seconds it took."""


class Backend(Protocol):
    """A framework's side of a run: one per process."""

    name: str  # "pytorch" or "mindspore"
    rank: int
    world_size: int
    device: str  # for the record and the log: cpu, cuda:0, Ascend:3 ...
    placement: str  # this process's place in the job: "rank 1 of 4 on device 1 (cpu)"
    unseen: str | None  # auto chose the CPU in an accelerator's image: the warning to log
    suffix: str  # the checkpoint file ending: .pt or .ckpt
    scheduler_only: bool  # only coordinates (msrun's scheduler): stages no data, does not train
    accumulate: int  # batches a step's gradients sum over (1 where the loop has no option)
    inside_epochs: bool  # resumes from a checkpoint taken inside an epoch
    collective: bool  # split over the ranks: each evaluates and saves with the others
    input_shape: tuple[int, ...]  # the chosen model's declared input (@model), for a smoke run
    spec: ModelSpec  # the model trained: src/model.py's chosen one, or init_from's
    sample_metrics: dict[str, Any]  # src/step.py's metrics on the samples setup() tried

    def describe(self) -> dict[str, Any]:
        """Settings worth recording (amp, loop, sink mode ...)."""

    def ahead(self) -> None:
        """What training will need, begun in the background while the data is read."""

    def setup(self, splits: Splits, schedule: Schedule) -> None:
        """Model and optimizer (lr by ``schedule``) for splits.info; the splits' data or loaders."""

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        """Train epochs first..last (1-based), calling on_epoch_end after each on every rank."""

    def evaluate(self, split: str) -> dict[str, float]:
        """The mean of each metric the Task's step returns, on the "val" or "test" split."""

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """Write model and optimizer state with meta, atomically."""

    def restore(self, path: Path, what: str = "--resume") -> dict[str, int]:
        """Load what save wrote; return its meta. CheckpointError naming ``what`` if unfit."""

    def prepare(
        self, shape: DataShape, mean: tuple[float, ...], std: tuple[float, ...], path: Path
    ) -> None:
        """The checkpoint's model (no optimizer) for ``shape``, in eval mode: predict, export."""

    def infer(self, inputs: np.ndarray) -> np.ndarray:
        """The prepared model's float32 outputs (N, outputs) for raw inputs, normalised."""

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        """Load model weights only, leaving layers in ``skip`` initialised."""

    def agree(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is on one (collective; ``flag`` where not)."""

    def weights_digest(self) -> str:
        """A short hash of the model's parameters (not buffers): equal on every rank."""

    def close(self) -> None:
        """Leave the process group, if any."""


@dataclass(frozen=True)
class TrainOptions:
    """The options a backend reads, by name (Config.pick); optimizer: Step.optimizer_args."""

    model: str | None
    model_args: dict[str, Any]
    device_target: str
    amp: str
    seed: int
    batch_size: int
    lr: float
    accumulate: int
    clip_grad_norm: float | None
    checkpoint_every: int | None
    data: DataOptions
    shard: ShardOptions
    init_from: Path | None
    lora: LoraOptions
    optimizer: dict[str, Any]


class Framework(Protocol):
    """A framework's src/scaffold/backend/core.py, as the entry scripts hand it over."""

    CHECKPOINT_SUFFIX: str
    OPTIONS: type[TrainOptions]  # TrainOptions or the framework's own subclass
    create: Callable[[Any, Task], Backend]

    def read_meta(self, path: Path, what: str = "--checkpoint") -> dict[str, Any]:
        """What a checkpoint records besides its weights: epoch, seed, model, data."""
