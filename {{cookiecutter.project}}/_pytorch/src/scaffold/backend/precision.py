"""Mixed precision: which dtype autocast uses on this device, and the gradient scaler.

On by default on accelerators, off on the CPU (where --amp true gives bfloat16
autocast, which the tests exercise). bfloat16 where the device supports it: it
needs no loss scaling. float16 otherwise (older GPUs, Ascend NPUs), with a
GradScaler so that small gradients do not underflow.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ContextManager

import torch


@dataclass(frozen=True)
class Precision:
    """None: full float32. Else autocast to ``dtype``, with a scaler for float16."""

    device: torch.device
    dtype: torch.dtype | None = None

    @property
    def name(self) -> str:
        return "float32" if self.dtype is None else str(self.dtype).replace("torch.", "")

    def autocast(self) -> ContextManager[Any]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def scaler(self) -> Any | None:
        """A GradScaler for float16 (torch.amp's where it exists, else the device's own)."""
        if self.dtype != torch.float16:
            return None
        if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
            return torch.amp.GradScaler(self.device.type)
        module = torch.npu if self.device.type == "npu" else torch.cuda
        return module.amp.GradScaler()


def _bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu"


def choose(setting: str, device: torch.device) -> Precision:
    """The precision for --amp auto|true|false on ``device``."""
    enabled = setting == "true" or (setting == "auto" and device.type != "cpu")
    if not enabled:
        return Precision(device)
    return Precision(device, torch.bfloat16 if _bf16_supported(device) else torch.float16)
