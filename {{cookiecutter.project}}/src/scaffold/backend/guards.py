"""Guardrails around your code: one batch through the model before training, a loss that
stops being a number, and an error raised in your files told as one line with its place.

Frameworks differ in how a batch runs; what is checked and said is the same for both.
"""

from __future__ import annotations

import math
import re
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from src.scaffold.errors import TrainError

# Your files, as their paths end: the frames of a traceback that are yours.
YOURS = ("src/model.py", "src/data.py", "src/step.py")
# What a worker process (a DataLoader's, a MindSpore pipeline's) makes of our DatasetError:
# its text quoted in a longer message, the error's line last.
QUOTED = re.compile(r"(?:\w+\.)*DatasetError: (.+)")


class ModelOutputError(TrainError):
    """Raised when one batch through the model gives outputs of another shape than the data
    needs (classes, or one value a sample); names the model, the shape and the one expected."""


class NonFiniteLoss(TrainError):
    """Raised when the training loss is not a finite number: the run stops, keeping what
    the finished epochs saved."""


def no_module(name: str, python: str, script: str = "train.py") -> str:
    """The line for a Python that lacks ``name``, which ``script`` imports (the scripts and
    the launchers' check say it alike)."""
    return (
        f"this Python ({python}) has no {name}, which {script} imports: pip install -r "
        "requirements.txt into it, or name the Python that has it with PYTHON=..."
    )


def shape_of(outputs: Any) -> tuple[int, ...] | None:
    """The shape of one tensor or array of outputs; None for a tuple, list or anything else."""
    shape = getattr(outputs, "shape", None)
    return tuple(int(side) for side in shape) if shape is not None else None


def check_outputs(model: str, outputs: Any, batch: int, classes: int, numeric: bool) -> None:
    """Outputs of one batch of ``batch`` samples must be (batch, classes), or for a numeric
    target (batch, 1) or (batch,); one line naming what the model returned otherwise."""
    expected = f"({batch}, {classes})"
    shape = shape_of(outputs)
    if shape is None:
        kind = type(outputs).__name__
        raise ModelOutputError(
            f"model {model} returns a {kind}, not one tensor: it must return {expected}, "
            f"{'one value' if numeric else 'a score for each class'} a sample"
        )
    fits = shape == (batch, classes) or (numeric and shape == (batch,))
    if not fits:
        what = "values" if numeric else "classes"
        raise ModelOutputError(
            f"model {model} returns {shape} for a batch of {batch} samples; the data has "
            f"{classes} {what}: it must return {expected} (its last layer gives "
            f"shape.num_classes outputs)"
        )


def build(spec: Any, shape: Any) -> Any:
    """The model ``spec`` (a ModelSpec) builds for the data's ``shape`` (a DataShape); an
    error in its function is one line naming the model, the data and where it happened."""
    try:
        return spec.build(shape)
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


def try_batch(model: str, forward: Callable[[], Any], shape: tuple[int, ...]) -> Any:
    """``forward()`` (the model on one batch of ``shape``); an error it raises is one line
    naming the model, the batch's shape and, where it happened in your files, the place."""
    try:
        return forward()
    except TrainError:
        raise
    except Exception as err:
        raise _failed(f"model {model} fails on a batch of shape {shape}", err) from err


def _failed(what: str, err: Exception) -> ModelOutputError:
    """``what``, where it happened in your files, and the error's first line."""
    place = your_frame(err.__traceback__)
    where = f" at {place}" if place else ""
    first = next((line for line in str(err).splitlines() if line.strip()), "")
    return ModelOutputError(f"{what}{where}: {type(err).__name__}: {' '.join(first.split())}")


def try_metrics(metrics: Callable[[], Any]) -> dict[str, Any]:
    """src/step.py's ``metrics()`` on the batch the model was tried on: what it returns must
    be a mapping of names; an error in it is one line with its place."""
    try:
        scores = metrics()
    except TrainError:
        raise
    except Exception as err:
        raise _failed("src/step.py's metrics fails on the model's outputs", err) from err
    if not isinstance(scores, dict) or not scores:
        raise ModelOutputError(
            f"src/step.py's metrics returns {type(scores).__name__}: it must return a dict of "
            "per-batch sums by name ({'loss': ..., 'accuracy': ...})"
        )
    return scores


def check_loss(value: float, epoch: int, step: int, lr: float) -> None:
    """Stop the run, with one line saying what to try, when the loss is not a number."""
    if math.isfinite(value):
        return
    raise NonFiniteLoss(
        f"the training loss is {value} at epoch {epoch}, step {step}, learning rate {lr:.3g}: "
        "try a lower --lr (or warmup: --schedule_warmup_epochs 1), and check the data for "
        "values far out of range; the checkpoints of the finished epochs are kept"
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
    quoted = [QUOTED.search(line) for line in str(err).splitlines()]
    found = [match.group(1).strip() for match in quoted if match]
    return found[-1] if found else None


def one_line(err: BaseException) -> str | None:
    """The one line for an error that is not a bug of the floor: a DatasetError a worker
    process quoted, or an error raised in your files (with the place); None otherwise."""
    quoted = unquoted(err)
    if quoted is not None:
        return quoted
    place = your_frame(err.__traceback__)
    if place is not None:
        text = " ".join(str(err).split()) or type(err).__name__
        return f"{place}: {type(err).__name__}: {text}"
    return None
