"""PyTorch's model files for inference (export.py, src/scaffold/infer/export.py): ONNX, by
torch.onnx's TorchScript-based exporter, and TorchScript, by torch.jit.trace; each file is
loaded back (onnxruntime, torch.jit.load) and checked against the model."""

from __future__ import annotations

import copy
import inspect
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

FORMATS = {"onnx": ".onnx", "torchscript": ".torchscript"}
# Opset 11: what the Ascend ModelZoo's ONNX exports use and every CANN's ATC converts;
# our models' operators (convolution, pooling, BatchNorm, Gemm) are all in it.
OPSET = 11
INPUT, OUTPUT = "input", "output"


def unavailable(fmt: str, backend: Any) -> str | None:
    """Both formats are written on any device."""
    return None


def _parameters(function: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(function).parameters)


def _model(backend: Any) -> torch.nn.Module:
    """The checkpoint's model in float32 on the CPU, in plain memory layout, in eval mode."""
    net = copy.deepcopy(backend.net).to("cpu", memory_format=torch.contiguous_format)
    return net.float().eval()


def write(backend: Any, fmt: str, path: Path, sample: np.ndarray) -> dict[str, Any]:
    """Write the model as ``fmt`` to ``path``, traced on ``sample`` (a normalised batch)."""
    net, inputs = _model(backend), torch.from_numpy(sample)
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript-based exporter and tracer warn they are deprecated; the
        # torch.export-based ONNX exporter needs onnxscript and writes opset 18 and up,
        # which older ATC versions do not take.
        warnings.simplefilter("ignore")
        if fmt == "onnx":
            # dynamo= came with torch 2.5's new exporter (the default from 2.9); before it
            # the TorchScript-based one was the only one.
            legacy = {"dynamo": False} if "dynamo" in _parameters(torch.onnx.export) else {}
            torch.onnx.export(
                net,
                (inputs,),
                str(path),
                **legacy,
                opset_version=OPSET,
                input_names=[INPUT],
                output_names=[OUTPUT],
                dynamic_axes={INPUT: {0: "batch"}, OUTPUT: {0: "batch"}},
            )
            return {"opset": OPSET, "dynamic_batch": True}
        traced = torch.jit.trace(net, inputs)
        traced.save(str(path))
    return {"dynamic_batch": True}


@torch.no_grad()
def reference(backend: Any, inputs: np.ndarray) -> np.ndarray:
    """The model's own outputs on normalised ``inputs``, float32 on the CPU."""
    return _model(backend)(torch.from_numpy(inputs)).numpy()


def load(path: Path, fmt: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """A TorchScript file loaded back (ONNX files run in onnxruntime instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = torch.jit.load(str(path), map_location="cpu")

    @torch.no_grad()
    def run(batch: np.ndarray) -> np.ndarray:
        return module(torch.from_numpy(batch)).numpy()

    return run
