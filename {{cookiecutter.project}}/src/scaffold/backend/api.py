"""What a framework provides to the shared training scaffold, and what it is given.

Each framework's src/scaffold/backend/core.py has ``create(cfg, task) -> Backend``: device
and communication set up; ``setup(splits, schedule)`` then builds the Task's model for the
data's shape and the optimizer of the Task's step, whose learning rate follows the
schedule. Everything else (storage, data, resume, checkpoints kept, the epoch log line,
the run record, uploads, signals) is src/scaffold/run/'s, written once for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from src.scaffold.backend.schedule import Schedule
from src.scaffold.config import DataOptions
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import Splits
from src.scaffold.task import DataShape, Task


class EpochEnd(Protocol):
    """What a backend calls while it trains (src/scaffold/run/epochs.py); after an epoch,
    ``stopping`` on any rank (rank 0 decides) ends the training on every rank."""

    stopping: bool

    def step(self, step: int, loss: Callable[[], float], lr: Callable[[], float]) -> None:
        """After every training step (1-based over the run): readers of its loss and lr."""
        ...

    def __call__(self, epoch: int, train_loss: float, seconds: float) -> None:
        """After each epoch: its mean train loss over the ranks and the seconds it took."""
        ...


class Backend(Protocol):
    """A framework's side of a run: one per process."""

    name: str  # "pytorch" or "mindspore"
    rank: int
    world_size: int
    device: str  # for the record and the log: cpu, cuda:0, Ascend:3 ...
    placement: str  # this process's place in the job: "rank 1 of 4 on device 1 (cpu)"
    unseen: str | None  # auto chose the CPU in an accelerator's image: the warning to log
    suffix: str  # the checkpoint file ending: .pt or .ckpt
    # True for a process that only coordinates (MindSpore's msrun scheduler): it
    # neither stages data nor trains.
    scheduler_only: bool
    accumulate: int  # batches a step's gradients sum over (1 where the loop has no option)

    def describe(self) -> dict[str, Any]:
        """Settings worth recording (amp, loop, sink mode ...)."""
        ...

    # The input shape the chosen model declares (@model), for a smoke run without data.
    input_shape: tuple[int, ...]
    # What src/step.py's metrics returned for the samples setup() tried the model on.
    sample_metrics: dict[str, Any]

    def ahead(self) -> None:
        """What training will need, begun in the background while the data is read (a run
        calls it; evaluation, prediction and export do not)."""
        ...

    def setup(self, splits: Splits, schedule: Schedule) -> None:
        """Build the model for the data's shape (splits.info), and the optimizer whose
        learning rate follows ``schedule``; take the splits onto the device (in memory) or
        open loaders over them (streaming)."""
        ...

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        """Train epochs first..last (1-based), calling on_epoch_end after each on every rank."""
        ...

    def evaluate(self, split: str) -> dict[str, float]:
        """The mean of each metric the Task's step returns, on the "val" or "test" split."""
        ...

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """Write model and optimizer state with meta (epoch, seed; model_name, classes, data
        shape and normalisation), atomically."""
        ...

    def restore(self, path: Path, what: str = "--resume") -> dict[str, int]:
        """Load what save wrote; return its meta. CheckpointError if it does not fit, naming
        the option ``what`` that gave the path."""
        ...

    def prepare(
        self, shape: DataShape, mean: tuple[float, ...], std: tuple[float, ...], path: Path
    ) -> None:
        """For predict.py and export.py: the model of the checkpoint at ``path`` built for
        ``shape`` with its weights (no optimizer), in eval mode. CheckpointError if they do
        not fit."""
        ...

    def infer(self, inputs: np.ndarray) -> np.ndarray:
        """The prepared model's outputs (N, outputs) as float32 for a batch of raw inputs
        (uint8 images, float32 rows), normalised as training did, on the run's device."""
        ...

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        """Load model weights only, leaving layers in ``skip`` initialised."""
        ...

    def weights_digest(self) -> str:
        """A short hash of the model's parameters: equal on every rank of a healthy job (not
        its buffers: BatchNorm's running statistics come from each rank's own batches)."""
        ...

    def close(self) -> None:
        """Leave the process group, if any."""
        ...


@dataclass(frozen=True)
class TrainOptions:
    """What a backend reads of the options, by their names (Config.pick fills it): the
    model, the device and precision, the seed, the batch and the optimizer's step, the
    data's loading; and src/step.py's optimizer's own options (Step.optimizer_args)."""

    model: str | None
    device_target: str
    amp: str
    seed: int
    batch_size: int
    lr: float
    accumulate: int
    clip_grad_norm: float | None
    checkpoint_every: int | None
    data: DataOptions
    optimizer: dict[str, Any]


class Framework(Protocol):
    """A framework's src/scaffold/backend/core.py, as the entry scripts hand it over."""

    CHECKPOINT_SUFFIX: str
    # The options its backend reads: TrainOptions or a subclass of the framework's own.
    OPTIONS: type[TrainOptions]
    create: Callable[[Any, Task], Backend]

    def read_meta(self, path: Path, what: str = "--checkpoint") -> dict[str, Any]:
        """What a checkpoint records besides its weights: epoch, seed, model, data."""
        ...
