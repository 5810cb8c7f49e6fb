"""Guardrails around your code, for both frameworks: a batch through the model before training,
a loss that is not a number, and errors in your files told as one line with their place."""

from __future__ import annotations

import inspect
import math
import re
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from src.scaffold.errors import ConfigError, TrainError

YOURS = ("src/model.py", "src/data.py", "src/step.py")  # a traceback's frames that are yours
# A DatasetError as a worker process (a DataLoader's, a MindSpore pipeline's) quotes it.
QUOTED = re.compile(r"(?:\w+\.)*DatasetError: (.+)")


class ModelOutputError(TrainError):
    """The model cannot be built, fails on a batch, or gives outputs of another shape."""


class NonFiniteLoss(TrainError):
    """The training loss is not a finite number: the run stops, keeping finished epochs."""


def no_module(name: str, python: str, script: str = "train.py") -> str:
    """The line for a Python that lacks ``name``, which ``script`` imports."""
    return (
        f"this Python ({python}) has no {name}, which {script} imports: pip install -r "
        "requirements.txt into it, or name the Python that has it with PYTHON=..."
    )


def check_outputs(
    model: str, outputs: Any, labels: tuple[int, ...], classes: int, numeric: bool
) -> None:
    """Outputs for labels of shape ``labels``: (batch, classes) for a class a sample, or (batch,)
    for a numeric target; for labels of other shapes, batch first (the loss says the rest)."""
    batch = labels[0]
    expected = f"({batch}, {classes})" if len(labels) == 1 else f"({batch}, ...)"
    shape = getattr(outputs, "shape", None)
    if shape is None:
        raise ModelOutputError(
            f"model {model} returns a {type(outputs).__name__}, not one tensor: it must return "
            f"{expected}, {'one value' if numeric else 'a score for each class'} a sample"
        )
    shape = tuple(int(side) for side in shape)
    if len(labels) > 1:
        if shape[:1] != (batch,):
            raise ModelOutputError(
                f"model {model} returns {shape} for a batch of {batch} samples (labels "
                f"{labels}): its first axis must be the batch"
            )
    elif shape != (batch, classes) and not (numeric and shape == (batch,)):
        raise ModelOutputError(
            f"model {model} returns {shape} for a batch of {batch} samples; the data has "
            f"{classes} {'values' if numeric else 'classes'}: it must return {expected} (its "
            "last layer gives shape.num_classes outputs)"
        )


def try_loss(loss: Callable[[], Any]) -> None:
    """src/step.py's loss on the batch the model was tried on: one finite number."""
    value = _guarded(loss, "src/step.py's loss fails on the model's outputs")
    if not _one_number(value):
        raise ModelOutputError(
            f"src/step.py's loss returns shape {tuple(getattr(value, 'shape', ()))}: it must "
            "return one number, the batch's mean loss (reduce it: .mean())"
        )
    number = float(value.item() if hasattr(value, "item") else value)
    if not math.isfinite(number):
        raise ModelOutputError(
            f"src/step.py's loss is {number} on the first samples, before any training: check "
            "the loss for a log of 0 or a division by 0, and the model's initial weights"
        )


def _one_number(value: Any) -> bool:
    return math.prod(tuple(getattr(value, "shape", ()))) == 1


def build(spec: Any, shape: Any, args: dict[str, Any]) -> Any:
    """The model ``spec`` (a ModelSpec) builds for ``shape`` (a DataShape) with ``args`` (the
    config's model_args, its function's own parameters); errors: one line."""
    takes = list(inspect.signature(spec.build).parameters)[1:]
    if unknown := [name for name in args if name not in takes]:
        raise ConfigError(
            f"model_args {', '.join(unknown)}: model {spec.name} ({spec.where}) takes "
            f"{', '.join(takes) or 'no parameters besides the data shape'}"
        )
    try:
        return spec.build(shape, **args)
    except TrainError:
        raise
    except Exception as err:
        text = " ".join(str(err).split())
        if isinstance(err, ValueError) and text.startswith(f"model {spec.name} "):
            raise ModelOutputError(text) from err  # the line image_input and others give
        place = your_frame(err.__traceback__)
        where = f" at {place}" if place else ""
        raise ModelOutputError(
            f"model {spec.name} cannot be built for samples of shape {shape.input} and "
            f"{shape.num_classes} outputs{where}: {type(err).__name__}: {text}"
        ) from err


def _guarded(call: Callable[[], Any], what: str) -> Any:
    """``call()``; an error it raises: one line of ``what``, its place and its first line."""
    try:
        return call()
    except TrainError:
        raise
    except Exception as err:
        place = your_frame(err.__traceback__)
        where = f" at {place}" if place else ""
        first = next((line for line in str(err).splitlines() if line.strip()), "")
        raise ModelOutputError(
            f"{what}{where}: {type(err).__name__}: {' '.join(first.split())}"
        ) from err


def try_batch(model: str, forward: Callable[[], Any], shape: tuple[int, ...]) -> Any:
    """``forward()``: the model on one batch of ``shape``."""
    return _guarded(forward, f"model {model} fails on a batch of shape {shape}")


def try_metrics(metrics: Callable[[], Any]) -> dict[str, Any]:
    """src/step.py's ``metrics()`` on the batch the model was tried on: a dict of names."""
    scores = _guarded(metrics, "src/step.py's metrics fails on the model's outputs")
    if not isinstance(scores, dict) or not scores:
        raise ModelOutputError(
            f"src/step.py's metrics returns {type(scores).__name__}: it must return a dict of "
            "per-batch sums by name ({'loss': ..., 'accuracy': ...})"
        )
    for name, value in scores.items():
        if not _one_number(value):
            raise ModelOutputError(
                f"src/step.py's metrics returns {name} of shape {tuple(value.shape)}: each must "
                "be one number, the batch's sum (and 'count', what the sums are divided by)"
            )
    return scores


def check_loss(value: float, epoch: int, step: int, lr: float) -> None:
    """Stop the run, with one line saying what to try, when the loss is not a number."""
    if not math.isfinite(value):
        raise NonFiniteLoss(
            f"the training loss is {value} at epoch {epoch}, step {step}, learning rate "
            f"{lr:.3g}: try a lower --lr (or warmup: --schedule_warmup_epochs 1), and check the "
            "data for values far out of range; the checkpoints of the finished epochs are kept"
        )


def your_frame(tb: TracebackType | None) -> str | None:
    """'src/model.py:42 (forward)': the last frame of ``tb`` in one of your files, if any."""
    found = None
    for frame in traceback.extract_tb(tb):
        path = Path(frame.filename).as_posix()
        if any(path.endswith(name) for name in YOURS):
            found = f"{'/'.join(path.split('/')[-2:])}:{frame.lineno} ({frame.name})"
    return found


def unquoted(err: BaseException) -> str | None:
    """The line of a DatasetError that a worker process quoted in ``err``'s message."""
    found = [match.group(1).strip() for match in map(QUOTED.search, str(err).splitlines()) if match]
    return found[-1] if found else None


def one_line(err: BaseException) -> str | None:
    """The one line for a DatasetError a worker quoted, or an error raised in your files."""
    quoted, place = unquoted(err), your_frame(err.__traceback__)
    if quoted is not None or place is None:
        return quoted
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{place}: {type(err).__name__}: {text}"
