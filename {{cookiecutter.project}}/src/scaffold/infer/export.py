"""Model files for inference (export.py) in backend/export.py's formats, checked on real test
samples, with a JSON sidecar of what feeding the file takes."""

from __future__ import annotations

import argparse
import json
import platform
import shutil
from contextlib import suppress
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from src.scaffold.backend import FRAMEWORK
from src.scaffold.backend.api import Backend, Framework
from src.scaffold.config import Config
from src.scaffold.data import finder
from src.scaffold.data.normalise import Normalise
from src.scaffold.errors import ConfigError, TrainError
from src.scaffold.infer.recorded import CHECKPOINT_HELP, Recorded, locate
from src.scaffold.outputs.checkpoints import usual_mode
from src.scaffold.run.runner import backend_of
from src.scaffold.task import Task

DESCRIPTION = "Write a run's checkpoint as a model file for inference (train.py's options apply)."
SAMPLES = 16  # real test samples each exported file is checked on
# How far an exported model's outputs may be from the framework's, relative to the largest
# output (at least 1): a runtime that orders sums otherwise or folds BatchNorm moves them by
# about 1e-6 (the sidecar has the figure); an export that computes otherwise misses by 1e-2.
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
    parser.add_argument("--format", required=True, help="the model file's format")
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    parser.add_argument(
        "--output", type=Path, help="the model file (default: export/<checkpoint><suffix>)"
    )
    parser.add_argument(
        "--batch", type=int, default=1, help="the batch the file's input shape declares"
    )
    parser.add_argument(
        "--adapters-only",
        action="store_true",
        help="with --format hf: the LoRA adapters alone, not the merged model",
    )


def export(
    task: Task, cfg: Config, framework: Framework, exporter: Exporter, args: argparse.Namespace
) -> Path:
    """Write checkpoint args.checkpoint as args.format, check it, and write its sidecar."""
    fmt = _format(exporter, args)
    found = locate(cfg.named(), cfg.places(), framework, args.checkpoint)
    recorded, cfg = found.recorded, cfg.with_options(**found.changes)
    path = args.output or Path("export") / f"{recorded.path.stem}{exporter.FORMATS[fmt]}"
    if path.suffix != exporter.FORMATS[fmt]:  # as the frameworks read it: in lower case
        raise ConfigError(f"--output {path}: a {fmt} file ends in {exporter.FORMATS[fmt]}")
    backend = backend_of(framework, cfg, task)
    try:
        if why := exporter.unavailable(fmt, backend):
            raise ConfigError(why)
        backend.prepare(recorded.data_shape, recorded.mean, recorded.std, recorded.path)
        source = cfg.source(found.where.data)
        smoke = cfg.smoke_sizes(backend.world_size)
        splits = finder.splits(
            cfg.data, source, task.readers, backend.input_shape, smoke, backend.spec.ids
        )
        test = splits.test if len(splits.test) else splits.val
        if tuple(test.shape) != recorded.shape:
            raise ExportError(
                f"the data's samples are {test.shape}, "
                f"the checkpoint's model takes {recorded.shape}"
            )
        raw = np.stack([test.load(i) for i in range(min(SAMPLES, len(test)))])
        inputs = Normalise(recorded.mean, recorded.std, len(recorded.shape))(raw)
        path.parent.mkdir(parents=True, exist_ok=True)
        sample = np.repeat(inputs[:1], args.batch, axis=0)
        details = {"batch": args.batch, **_write(exporter, backend, fmt, path, sample, recorded)}
        try:
            parity = _check(exporter, backend, fmt, path, inputs, details)
        except BaseException:
            _remove(path)
            raise
        if path.is_file():  # a directory (hf) keeps its mode
            usual_mode(path)
    finally:
        backend.close()
    sidecar = path.with_name(path.name + ".json")  # model.onnx.json
    content = _sidecar(recorded, fmt, path, details, parity)
    sidecar.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    how = parity.get("why") or (
        f"outputs within {parity['max_abs_diff']:.1e} of the checkpoint's on {parity['samples']} "
        f"test samples (tolerance {TOLERANCE:g} x {parity['scale']:.3g})"
    )
    print(f"wrote {path} and {sidecar.name}: {how}", flush=True)
    found.said()
    return path


def _format(exporter: Exporter, args: argparse.Namespace) -> str:
    """The format as the framework names it (onnx, MINDIR ...), whatever its case; its
    arguments checked (one line each)."""
    fmt = next((name for name in exporter.FORMATS if name.lower() == args.format.lower()), "")
    if not fmt or fmt == "hf-adapters":  # that one is --format hf --adapters-only
        shown = ", ".join(name for name in exporter.FORMATS if name != "hf-adapters")
        raise ConfigError(f"--format {args.format!r} is not one of {shown}")
    if args.batch < 1:
        raise ConfigError(f"--batch {args.batch}: give 1 or more")
    if args.adapters_only:
        if fmt != "hf":
            raise ConfigError(f"--adapters-only goes with --format hf, not {fmt}")
        fmt = "hf-adapters"
    if fmt.lower() == "onnx":
        try:
            import onnxruntime  # noqa: F401
        except ImportError as err:
            raise ConfigError(f"--format {fmt} needs {ONNX_NEEDS}") from err
    return fmt


def _write(
    exporter: Exporter,
    backend: Backend,
    fmt: str,
    path: Path,
    sample: np.ndarray,
    recorded: Recorded,
) -> dict[str, Any]:
    """The file written; the exporter's own failure (an operator the format lacks) one line."""
    try:
        return exporter.write(backend, fmt, path, sample)
    except TrainError:
        raise
    except Exception as err:
        _remove(path)
        first = next((line for line in str(err).splitlines() if line.strip()), "")
        others = ", ".join(name for name in exporter.FORMATS if name != fmt)
        raise ExportError(
            f"{FRAMEWORK} cannot write model {recorded.model_name} as {fmt}: "
            f"{type(err).__name__}: {' '.join(first.split())} (try --format {others})"
        ) from err


def _remove(path: Path) -> None:
    """A failed export's file, or directory (hf), gone."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _check(
    exporter: Exporter, backend: Backend, fmt: str, path: Path, inputs: np.ndarray, details: dict
) -> dict[str, Any]:
    """The exported file loaded back and run on ``inputs``, against the framework's model."""
    run = onnx_runner(path) if fmt.lower() == "onnx" else exporter.load(path, fmt)
    if run is None:
        return {"samples": 0, "why": details.get("unchecked", "not loadable here")}
    expected = exporter.reference(backend, inputs)
    details["output_shape"] = list(expected.shape[1:])
    # A file of a fixed batch runs the samples that many at a time.
    step = len(inputs) if details.get("dynamic_batch") else int(details["batch"])
    if step > len(inputs):  # a batch larger than the samples: them again, to fill it
        inputs = np.resize(inputs, (step, *inputs.shape[1:]))
    chunks = [inputs[i : i + step] for i in range(0, len(inputs) - step + 1, step)]
    got = np.concatenate([run(chunk) for chunk in chunks]).reshape(-1, *expected.shape[1:])
    expected, samples = expected[: len(got)], len(got)
    if details.get("dynamic_sequence"):  # and on the first half of each sequence
        half = inputs[:step, : max(1, inputs.shape[1] // 2)]
        got = np.concatenate([got.reshape(-1), run(half).reshape(-1)])
        wanted = exporter.reference(backend, half).reshape(-1)
        expected = np.concatenate([expected.reshape(-1), wanted])
    diff = float(np.abs(got.astype(np.float64) - expected).max())
    scale = max(1.0, float(np.abs(expected).max()))
    if not diff <= TOLERANCE * scale:
        raise ExportError(
            f"{path} does not compute what the checkpoint does: its outputs differ by {diff:.3g} "
            f"(tolerance {TOLERANCE:g} x {scale:.3g}); the file is removed"
        )
    return {"samples": samples, "max_abs_diff": diff, "tolerance": TOLERANCE, "scale": scale}


def onnx_runner(path: Path) -> Callable[[np.ndarray], np.ndarray]:
    """An ONNX file run by onnxruntime on the CPU."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda batch: np.asarray(session.run(None, {name: batch})[0])


def _sidecar(
    recorded: Recorded, fmt: str, path: Path, details: dict[str, Any], parity: dict[str, Any]
) -> dict[str, Any]:
    """What feeding the file takes, and where it came from."""
    images, batch = recorded.images, details["batch"]
    outputs = details.get("output_shape") or [recorded.num_classes]
    meaning = "class scores (softmax: probabilities)"
    if recorded.label_shape:
        meaning = "class scores a position (softmax: last axis)"
    if recorded.numeric:
        meaning = "the value"
    # What wrote and checked the file: Python, the framework, onnx and onnxruntime.
    versions = {"python": platform.python_version()}
    for name in (FRAMEWORK, *(("onnx", "onnxruntime") if fmt.lower() == "onnx" else ())):
        with suppress(PackageNotFoundError):
            versions[name] = version(name)
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
            "dynamic_sequence": bool(details.get("dynamic_sequence")),
            "dtype": "int64" if recorded.ids else "float32",
            "layout": "NCHW" if images else "ND",
        },
        "output": {
            "name": details.get("output_name", "output"),
            "shape": [batch, *outputs],
            "meaning": meaning,
        },
        "preprocess": {
            "image_mode": ("L" if recorded.shape[0] == 1 else "RGB") if images else None,
            "resize": list(recorded.resize) if recorded.resize else None,
            "features": list(recorded.features),
            "scale": 255.0 if images else 1.0,
            "mean": list(recorded.mean),
            "std": list(recorded.std),
            "formula": "none: integer ids as they are"
            if recorded.ids
            else "(x / scale - mean / scale) / (std / scale), per channel or feature",
        },
        "classes": list(recorded.names()) if not recorded.numeric else [],
        "opset": details.get("opset"),
        "versions": versions,
        "parity": parity,
    }
