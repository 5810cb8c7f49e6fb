"""PyTorch's model files for export.py: ONNX (torch.onnx's TorchScript-based exporter) and
TorchScript (torch.jit.trace), each loaded back and checked against the model; and checkpoint,
one file of a (sharded) checkpoint's weights, which eval.py, predict.py and --pretrained read."""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from src.scaffold.backend import hf
from src.scaffold.errors import ConfigError

# hf: a directory transformers loads (init_from's model, LoRA merged); hf-adapters: LoRA's alone.
FORMATS = {
    "onnx": ".onnx",
    "torchscript": ".torchscript",
    "checkpoint": ".pt",
    "hf": ".hf",
    "hf-adapters": ".adapters",
}
OWN = ("model", "optimizer", "scaler", "sharded")  # a checkpoint's state; the rest its meta
# Opset 11: the Ascend ModelZoo's ONNX exports', which every CANN's ATC converts; a model with
# newer operators gets the opset they need (fused attention: 14).
OPSET = 11
INPUT, OUTPUT = "input", "output"


def unavailable(fmt: str, backend: Any) -> str | None:
    """Both formats are written on any device."""
    return None


def _model(backend: Any) -> torch.nn.Module:
    net = copy.deepcopy(backend.net).to("cpu", memory_format=torch.contiguous_format)
    return net.float().eval()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Standard output and error to nowhere, at the descriptors: what torch's C++ side writes
    there is dropped too (a failed try prints the whole graph)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        for fd, copy_ in zip((1, 2), saved):
            os.dup2(copy_, fd)
            os.close(copy_)


def write(backend: Any, fmt: str, path: Path, sample: np.ndarray) -> dict[str, Any]:
    """Write the model as ``fmt`` to ``path``, traced on ``sample`` (a normalised batch)."""
    if fmt == "checkpoint":
        return _checkpoint(backend, path)
    if fmt.startswith("hf"):
        if not isinstance(backend.net, hf.Pretrained):
            raise ConfigError(f"--format {fmt} writes init_from's model: this run has none")
        hf.save_pretrained(backend.net, path, adapters_only=fmt == "hf-adapters")
        return {"dynamic_batch": True, "dynamic_sequence": True}
    net, inputs = _model(backend), torch.from_numpy(sample)
    with warnings.catch_warnings(), torch.no_grad():
        # Their deprecation warnings: the new ONNX exporter writes opset 18+, older ATC rejects.
        warnings.simplefilter("ignore")
        if fmt == "onnx":
            # dynamo= came with torch 2.5's new exporter (the default from 2.9).
            new = "dynamo" in inspect.signature(torch.onnx.export).parameters
            options = {"dynamo": False} if new else {}
            options.update(input_names=[INPUT], output_names=[OUTPUT])
            axes = {INPUT: {0: "batch"}, OUTPUT: {0: "batch"}}
            # Ids in, scores a position out (a model of sequences): any length up to the run's.
            sequence = not inputs.dtype.is_floating_point and inputs.dim() == 2
            sequence = sequence and net(inputs).shape[:2] == inputs.shape
            if sequence:
                axes = {name: {0: "batch", 1: "sequence"} for name in (INPUT, OUTPUT)}
            opset = OPSET
            while True:
                try:
                    with _quiet():
                        torch.onnx.export(
                            net,
                            (inputs,),
                            str(path),
                            dynamic_axes=axes,
                            opset_version=opset,
                            **options,
                        )
                    break
                except Exception as err:  # torch.onnx's UnsupportedOperatorError, by its line
                    # An operator newer than opset 11 (fused attention: 14): the opset it names.
                    needed = re.search(r"added in version (\d+)", str(err))
                    if needed is None or int(needed[1]) <= opset:
                        raise
                    opset = int(needed[1])
            return {"opset": opset, "dynamic_batch": True, "dynamic_sequence": sequence}
        torch.jit.trace(net, inputs).save(str(path))
    return {"dynamic_batch": True}


def _checkpoint(backend: Any, path: Path) -> dict[str, Any]:
    """The prepared checkpoint's weights, whole, in one file with its meta (no optimizer)."""
    from src.scaffold.backend import saved
    from src.scaffold.outputs import checkpoints

    weights = {k: v.detach().cpu().clone() for k, v in backend.net.state_dict().items()}
    source = saved.load_state(backend.prepared, "--checkpoint")
    state = {"model": weights, **{k: v for k, v in source.items() if k not in OWN}}
    checkpoints.write(path, lambda tmp: torch.save(state, tmp), saved.nbytes(state))
    back = torch.load(path, map_location="cpu", weights_only=True)["model"]
    if back.keys() != weights.keys() or not all(torch.equal(back[k], weights[k]) for k in back):
        raise OSError(f"{path} does not read back as the weights written")
    checked = "weights equal to the checkpoint's, tensor for tensor (no optimizer state)"
    return {"unchecked": checked, "dynamic_batch": True}


@torch.no_grad()
def reference(backend: Any, inputs: np.ndarray) -> np.ndarray:
    """The model's own outputs on normalised ``inputs``, float32 on the CPU."""
    return _model(backend)(torch.from_numpy(inputs)).numpy()


def load(path: Path, fmt: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """A TorchScript file loaded back (ONNX files run in onnxruntime instead; a checkpoint's
    weights are compared as it is written)."""
    if fmt == "checkpoint":
        return None
    if fmt.startswith("hf"):
        return hf.loaded(path, fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = torch.jit.load(str(path), map_location="cpu")
    return torch.no_grad()(lambda batch: module(torch.from_numpy(batch)).numpy())
