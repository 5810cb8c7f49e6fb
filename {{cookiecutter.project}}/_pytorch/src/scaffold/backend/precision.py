"""Mixed precision, on by default on accelerators: bfloat16 where supported (no loss scaling),
else float16 (older GPUs, Ascend NPUs) with a GradScaler so small gradients do not underflow."""

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
        return (torch.npu if self.device.type == "npu" else torch.cuda).amp.GradScaler()


def choose(setting: str, device: torch.device) -> Precision:
    """The precision for --amp auto|true|false on ``device``."""
    enabled = setting == "true" or (setting == "auto" and device.type != "cpu")
    if not enabled:
        return Precision(device)
    bf16 = torch.cuda.is_bf16_supported() if device.type == "cuda" else device.type == "cpu"
    return Precision(device, torch.bfloat16 if bf16 else torch.float16)
