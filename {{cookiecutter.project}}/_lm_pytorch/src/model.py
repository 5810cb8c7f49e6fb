"""Your model: a small decoder-only transformer (GPT), written plainly: token and position
embeddings, pre-norm blocks of causal self-attention (PyTorch's fused scaled_dot_product_attention)
and an MLP, and an output layer tied to the token embeddings. Its sizes are config.yaml's
model_args (layers, heads, width, dropout); its block (the tokens it sees) is the data's."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from src.scaffold import DataShape, model

# PyTorch's fused attention (flash and memory-efficient kernels on GPUs and NPUs), from torch 2.0;
# before it (the CUDA 11.6 image's torch 1.13) the same arithmetic written out, as nanoGPT does.
FUSED = getattr(F, "scaled_dot_product_attention", None)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float):
    """softmax(q k^T / sqrt(d)) v, each position attending to itself and those before it."""
    if FUSED is not None:
        return FUSED(q, k, v, dropout_p=dropout, is_causal=True)
    time = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    future = torch.ones(time, time, dtype=torch.bool, device=q.device).triu(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return F.dropout(weights, dropout) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"model gpt: width {width} is not a multiple of heads {heads}")
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.dropout = heads, dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = (
            part.view(batch, time, self.heads, width // self.heads).transpose(1, 2)
            for part in self.qkv(x).split(width, dim=2)
        )
        y = causal_attention(q, k, v, self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(batch, time, width))


class Block(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads, dropout)
        # GELU by tanh, as GPT-2's (and the MindSpore project's, whose ONNX export has no Erf).
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width),
            nn.GELU(approximate="tanh"),
            nn.Linear(4 * width, width),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


RESIDUAL = ("proj.weight", "mlp.2.weight")  # the layers that add into the residual stream


class GPT(nn.Module):
    def __init__(
        self, vocabulary: int, block: int, layers: int, heads: int, width: int, dropout: float
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Embedding(block, width)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        residual = 0.02 / math.sqrt(2 * layers)  # GPT-2's init: residual outputs scaled by depth
        for name, param in self.named_parameters():
            if param.dim() == 2:
                nn.init.normal_(param, 0.0, residual if name.endswith(RESIDUAL) else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(param)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Scores over the vocabulary (N, T, V) for ids (N, T), T up to the block."""
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tokens(ids) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        # Tied: the token embeddings score the vocabulary (one matrix in and out).
        return F.linear(self.norm(x), self.tokens.weight)


# The layer --pretrained leaves out for another vocabulary: the embeddings, which score it too.
# blocks: each of them a shard of its own with shard: full (config.yaml).
@model("gpt", input_shape=(128,), head="tokens", ids=True, blocks="blocks")
def gpt(
    shape: DataShape, layers: int = 4, heads: int = 4, width: int = 128, dropout: float = 0.0
) -> nn.Module:
    if len(shape.input) != 1:
        raise ValueError(
            f"model gpt takes token ids (T,); the data's samples have shape {shape.input}: "
            "give it text (data.format text)"
        )
    (block,) = shape.input
    return GPT(shape.num_classes, block, layers, heads, width, dropout)
