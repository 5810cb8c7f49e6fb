"""Model files for inference (export.py): the checkpoint's model written in a format an
inference runtime loads, checked as it is written (the file's outputs on real test samples
against the framework's own), with a JSON sidecar of what the file needs to be fed: the
input's name, shape and dtype, the normalisation, the class names, the versions.

The formats are the framework's (src/scaffold/backend/export.py): PyTorch onnx and
torchscript; MindSpore MINDIR, ONNX and, on an Ascend device, AIR.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from src.scaffold.backend.api import Backend, Framework
from src.scaffold.config import Config
from src.scaffold.data import finder
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.splits import Splits
from src.scaffold.errors import ConfigError, TrainError
from src.scaffold.infer.recorded import Recorded, locate
from src.scaffold.outputs.checkpoints import usual_mode
from src.scaffold.run.runner import backend_of
from src.scaffold.task import Task

log = logging.getLogger("export")
DESCRIPTION = "Write a run's checkpoint as a model file for inference (train.py's options apply)."
# Real test samples each exported file is checked on.
SAMPLES = 16
# How far an exported model's outputs may be from the framework's, relative to the largest
# output (at least 1). Both compute in float32 (eps 1.2e-7) the same function; a runtime
# may order a convolution's or a matrix product's sums otherwise, or fold BatchNorm into
# the convolution before it (onnxruntime's graph optimiser does), which moves each output
# by a few units in the last place per layer: 1e-6 relative and below in practice (the
# measured figure is in the sidecar). 1e-4 keeps a hundredfold margin over that, and an
# export that computes something else (weights not loaded, a layer lost, another layout)
# misses by 1e-2 and more.
TOLERANCE = 1e-4
ONNX_NEEDS = "onnx and onnxruntime (pip install -r requirements-export.txt)"


class ExportError(TrainError):
    """The exported file does not compute what the checkpoint does, or cannot be written."""


class Exporter(Protocol):
    """A framework's src/scaffold/backend/export.py."""

    FORMATS: dict[str, str]  # format name -> file suffix

    def unavailable(self, fmt: str, backend: Backend) -> str | None: ...

    def write(
        self, backend: Backend, fmt: str, path: Path, sample: np.ndarray
    ) -> dict[str, Any]: ...

    def reference(self, backend: Backend, inputs: np.ndarray) -> np.ndarray: ...

    def load(self, path: Path, fmt: str) -> Callable[[np.ndarray], np.ndarray] | None: ...


def options(parser: argparse.ArgumentParser) -> None:
    """export.py's own arguments, besides train.py's options."""
    parser.add_argument("--format", required=True, help="the model file's format")
    parser.add_argument(
        "--checkpoint",
        help="best (default; the newest while the run still trains) or last of the run, or a path",
    )
    parser.add_argument(
        "--output", type=Path, help="the model file (default: export/<checkpoint><suffix>)"
    )
    parser.add_argument(
        "--batch", type=int, default=1, help="the batch the file's input shape declares"
    )


def chosen_format(given: str, formats: dict[str, str]) -> str:
    """``given`` as the framework names it (onnx, MINDIR ...), whatever its case."""
    for name in formats:
        if name.lower() == given.lower():
            return name
    raise ConfigError(f"--format {given!r} is not one of {', '.join(formats)}")


def export(
    task: Task,
    cfg: Config,
    framework: Framework,
    exporter: Exporter,
    args: argparse.Namespace,
) -> Path:
    """Write checkpoint args.checkpoint of the run in cfg's train_url as args.format, check
    it, and write its sidecar; return the model file's path."""
    fmt = chosen_format(args.format, exporter.FORMATS)
    if args.batch < 1:
        raise ConfigError(f"--batch {args.batch}: give 1 or more")
    if fmt.lower() == "onnx":
        _require_onnxruntime(fmt)
    found = locate(cfg.named(), cfg.places(), framework, args.checkpoint)
    for line in found.first():
        print(line, file=sys.stderr, flush=True)
    recorded, cfg = found.recorded, cfg.with_options(**found.changes)
    path = args.output or Path("export") / f"{recorded.path.stem}{exporter.FORMATS[fmt]}"
    if path.suffix.lower() != exporter.FORMATS[fmt]:
        raise ConfigError(f"--output {path}: a {fmt} file ends in {exporter.FORMATS[fmt]}")
    backend = backend_of(framework, cfg, task)
    try:
        why = exporter.unavailable(fmt, backend)
        if why:
            raise ConfigError(why)
        backend.prepare(recorded.data_shape, recorded.mean, recorded.std, recorded.path)
        source = cfg.source(found.where.data)
        smoke = cfg.smoke_sizes(backend.world_size)
        splits = finder.splits(cfg.data, source, task.readers, backend.input_shape, smoke)
        raw = _samples(splits, recorded)
        inputs = Normalise(recorded.mean, recorded.std, len(recorded.shape))(raw)
        path.parent.mkdir(parents=True, exist_ok=True)
        sample = np.repeat(inputs[:1], args.batch, axis=0)
        details = {"batch": args.batch, **exporter.write(backend, fmt, path, sample)}
        try:
            parity = _check(exporter, backend, fmt, path, inputs, details)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        usual_mode(path)
    finally:
        backend.close()
    sidecar = sidecar_of(path)
    content = _sidecar(recorded, fmt, path, args.batch, details, parity)
    sidecar.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    checked = parity.get("max_abs_diff")
    how = (
        f"outputs within {checked:.1e} of the checkpoint's on {parity['samples']} test samples "
        f"(tolerance {TOLERANCE:g} x {parity['scale']:.3g})"
        if checked is not None
        else parity["why"]
    )
    print(f"wrote {path} and {sidecar.name}: {how}", flush=True)
    found.said()
    return path


def sidecar_of(path: Path) -> Path:
    """A model file's sidecar: its name with .json added (model.onnx.json)."""
    return path.with_name(path.name + ".json")


def _require_onnxruntime(fmt: str) -> None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError as err:
        raise ConfigError(f"--format {fmt} needs {ONNX_NEEDS}") from err


def _samples(splits: Splits, recorded: Recorded) -> np.ndarray:
    """Up to SAMPLES raw inputs of the run's test split, read as the run read them."""
    test = splits.test if len(splits.test) else splits.val
    if tuple(test.shape) != recorded.shape:
        raise ExportError(
            f"the data's samples are {test.shape}, the checkpoint's model takes {recorded.shape}"
        )
    return np.stack([test.load(i) for i in range(min(SAMPLES, len(test)))])


def _check(
    exporter: Exporter,
    backend: Backend,
    fmt: str,
    path: Path,
    inputs: np.ndarray,
    details: dict[str, Any],
) -> dict[str, Any]:
    """The exported file loaded back and run on ``inputs``, against the framework's model."""
    run = onnx_runner(path) if fmt.lower() == "onnx" else exporter.load(path, fmt)
    if run is None:
        return {"samples": 0, "why": details.get("unchecked", "not loadable here")}
    expected = exporter.reference(backend, inputs)
    # A file of a fixed batch runs the samples that many at a time.
    step = len(inputs) if details.get("dynamic_batch") else int(details["batch"])
    if step > len(inputs):  # a batch larger than the samples: them again, to fill it
        inputs = np.resize(inputs, (step, *inputs.shape[1:]))
    chunks = [inputs[i : i + step] for i in range(0, len(inputs) - step + 1, step)]
    got = np.concatenate([run(chunk) for chunk in chunks]).reshape(-1, *expected.shape[1:])
    expected = expected[: len(got)]
    diff = float(np.abs(got.astype(np.float64) - expected).max())
    scale = max(1.0, float(np.abs(expected).max()))
    if not diff <= TOLERANCE * scale:
        raise ExportError(
            f"{path} does not compute what the checkpoint does: its outputs differ by {diff:.3g} "
            f"(tolerance {TOLERANCE:g} x {scale:.3g}); the file is removed"
        )
    return {"samples": len(got), "max_abs_diff": diff, "tolerance": TOLERANCE, "scale": scale}


def onnx_runner(path: Path) -> Callable[[np.ndarray], np.ndarray]:
    """An ONNX file run by onnxruntime on the CPU."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda batch: np.asarray(session.run(None, {name: batch})[0])


def _versions(fmt: str) -> dict[str, str]:
    """What wrote and checked the file: Python, the framework, onnx and onnxruntime."""
    from importlib.metadata import PackageNotFoundError, version

    from src.scaffold.backend import FRAMEWORK

    found = {"python": platform.python_version()}
    for name in (FRAMEWORK, *(("onnx", "onnxruntime") if fmt.lower() == "onnx" else ())):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _sidecar(
    recorded: Recorded,
    fmt: str,
    path: Path,
    batch: int,
    details: dict[str, Any],
    parity: dict[str, Any],
) -> dict[str, Any]:
    """What feeding the file takes, and where it came from."""
    images = recorded.images
    return {
        "file": path.name,
        "format": fmt,
        "model_name": recorded.model_name,
        "checkpoint": str(recorded.path),
        "epoch": recorded.epoch,
        "input": {
            "name": details.get("input_name", "input"),
            "shape": [batch, *recorded.shape],
            "dynamic_batch": bool(details.get("dynamic_batch")),
            "dtype": "float32",
            "layout": "NCHW" if images else "ND",
        },
        "output": {
            "name": details.get("output_name", "output"),
            "shape": [batch, recorded.num_classes],
            "meaning": "the value" if recorded.numeric else "class scores (softmax: probabilities)",
        },
        "preprocess": {
            "image_mode": ("L" if recorded.shape[0] == 1 else "RGB") if images else None,
            "resize": list(recorded.resize) if recorded.resize else None,
            "features": list(recorded.features),
            "scale": 255.0 if images else 1.0,
            "mean": list(recorded.mean),
            "std": list(recorded.std),
            "formula": "(x / scale - mean / scale) / (std / scale), per channel or feature",
        },
        "classes": list(recorded.names()) if not recorded.numeric else [],
        "opset": details.get("opset"),
        "versions": _versions(fmt),
        "parity": parity,
    }
