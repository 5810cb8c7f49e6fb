"""MindSpore's model files (infer/export.py): MINDIR, ONNX and AIR (on Ascend only, for ATC)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, Callable

import mindspore as ms
import numpy as np
from mindspore import nn

FORMATS = {"MINDIR": ".mindir", "ONNX": ".onnx", "AIR": ".air"}
DEPRECATED = "AIR is deprecated in MindSpore (r2.3 on): ONNX is the path to ATC"


def unavailable(fmt: str, backend: Any) -> str | None:
    """Why ``fmt`` cannot be written here: AIR away from an Ascend device."""
    if fmt != "AIR" or backend.target == "Ascend":
        return None
    return (
        f"--format AIR needs an Ascend device (MindSpore writes AIR only there; this is "
        f"{backend.target}): export MINDIR or ONNX here (ATC converts ONNX too), or run "
        "export.py on the Atlas server"
    )


def write(backend: Any, fmt: str, path: Path, sample: np.ndarray) -> dict[str, Any]:
    """Write the model as ``fmt`` to ``path``, its input shape ``sample``'s (fixed batch)."""
    backend.net.set_train(False)
    # mindspore.export adds the format's suffix to the name it is given.
    ms.export(backend.net, ms.Tensor(sample), file_name=str(path.with_suffix("")), file_format=fmt)
    # MINDIR and AIR inputs carry the network's own argument names (construct(self, x)).
    arguments = list(inspect.signature(backend.net.construct).parameters)
    details: dict[str, Any] = {"dynamic_batch": False, "input_name": arguments[0]}
    if fmt == "ONNX":
        import onnx

        model = onnx.load(str(path))
        details["input_name"] = model.graph.input[0].name
        details["output_name"] = model.graph.output[0].name
        details["opset"] = max(entry.version for entry in model.opset_import)
    if fmt == "AIR":
        details["unchecked"] = "an AIR file is read by ATC only: atc checks it as it converts"
        # mindspore.export's documentation, r2.3 on: "AIR格式已弃用，将被删除".
        print(f"note: {DEPRECATED}", file=sys.stderr, flush=True)
    return details


def reference(backend: Any, inputs: np.ndarray) -> np.ndarray:
    """The model's own outputs on normalised ``inputs``, float32."""
    backend.net.set_train(False)
    return np.asarray(backend.net(ms.Tensor(inputs)).asnumpy(), dtype=np.float32)


def load(path: Path, fmt: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """A MINDIR file loaded back; None for AIR, which only ATC reads."""
    if fmt != "MINDIR":
        return None
    cell = nn.GraphCell(ms.load(str(path)))
    return lambda batch: np.asarray(cell(ms.Tensor(batch)).asnumpy(), dtype=np.float32)
