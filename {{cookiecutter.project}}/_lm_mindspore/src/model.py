"""Your model: a small decoder-only transformer (GPT), written plainly: token and position
embeddings, pre-norm blocks of causal self-attention and an MLP, and an output layer tied to
the token embeddings. Its sizes are config.yaml's model_args (layers, heads, width, dropout);
its block (the tokens it sees) is the data's (data.block_size).

Attention on an Ascend NPU is MindSpore's fused ops.flash_attention_score; on the CPU and GPUs
it is the plain masked softmax, the same function.

A model is one function, registered with @model: it takes the data's shape (DataShape:
shape.input is (block,), shape.num_classes the tokenizer's vocabulary) and returns a
mindspore.nn.Cell mapping ids (N, T) to scores (N, T, vocabulary). Another model of your own
is another such function, named in config.yaml's model:.
"""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
from mindspore import nn, ops

from src.scaffold import DataShape, model

# ops.flash_attention_score (MindSpore 2.x; Atlas A2 only) takes float16 or bfloat16 q, k, v of
# head size a multiple of 16 (at most 512). Its attn_mask is bool or uint8 where 1 (True) means
# masked out and 0 kept; with sparse_mode 2 (leftUpCausal: causal from the top-left corner,
# what a square T x T attention needs) the mask must be the compressed (2048, 2048) upper
# triangle, whatever T is. Dropout inside it needs a drop_mask made by hand: the fused path is
# taken without dropout only. https://www.mindspore.cn/docs/en/stable/api_python/ops/
# mindspore.ops.flash_attention_score.html
FUSED_MASK = 2048
CAUSAL = 2  # sparse_mode leftUpCausal
# MindSpore's float16 and float32, as the dtypes of numpy's.
HALF, SINGLE = (ms.Tensor(np.zeros(1, kind)).dtype for kind in (np.float16, np.float32))


def normal(shape: tuple[int, ...], std: float) -> ms.Tensor:
    """Initial weights drawn from normal(0, std), by numpy's generator (which the run seeds)."""
    return ms.Tensor(np.random.normal(0.0, std, shape).astype(np.float32))


class CausalSelfAttention(nn.Cell):
    def __init__(self, width: int, heads: int, block: int, dropout: float, std: float) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"model gpt: width {width} is not a multiple of heads {heads}")
        self.qkv = nn.Dense(
            width, 3 * width, weight_init=normal((3 * width, width), 0.02), bias_init="zeros"
        )
        self.proj = nn.Dense(
            width, width, weight_init=normal((width, width), std), bias_init="zeros"
        )
        self.heads, self.size = heads, width // heads
        self.scale = 1.0 / math.sqrt(self.size)
        self.dropout = nn.Dropout(p=dropout)
        self.fused = (
            ms.get_context("device_target") == "Ascend" and self.size % 16 == 0 and dropout == 0
        )
        if self.fused:
            self.mask = ms.Tensor(np.triu(np.ones((FUSED_MASK, FUSED_MASK), np.uint8), 1))
        else:  # added to the scores: -1e9 (-inf in float16) above the diagonal, 0 elsewhere
            self.mask = ms.Tensor(np.triu(np.full((block, block), -1e9, np.float32), 1))

    def construct(self, x):
        batch, time, width = x.shape
        q, k, v = ops.split(self.qkv(x), width, axis=2)
        shape = (batch, time, self.heads, self.size)
        q = q.reshape(shape).transpose(0, 2, 1, 3)  # (N, heads, T, size): BNSD
        k = k.reshape(shape).transpose(0, 2, 1, 3)
        v = v.reshape(shape).transpose(0, 2, 1, 3)
        y = self.attend_fused(q, k, v) if self.fused else self.attend(q, k, v)
        return self.proj(y.transpose(0, 2, 1, 3).reshape(batch, time, width))

    def attend(self, q, k, v):
        """Softmax attention, each position over itself and those before it."""
        time = q.shape[2]
        scores = ops.matmul(q, k.swapaxes(-1, -2)) * self.scale
        scores = scores + self.mask[:time, :time].astype(scores.dtype)
        return ops.matmul(self.dropout(ops.softmax(scores, -1)), v)

    def attend_fused(self, q, k, v):
        """The same on an Ascend NPU, by the fused kernel (float16 in, the input's type out)."""
        dtype = q.dtype
        if dtype == SINGLE:
            q, k, v = q.astype(HALF), k.astype(HALF), v.astype(HALF)
        y = ops.flash_attention_score(
            q,
            k,
            v,
            self.heads,
            attn_mask=self.mask,
            scalar_value=self.scale,
            input_layout="BNSD",
            sparse_mode=CAUSAL,
        )
        return y.astype(dtype)


class Block(nn.Cell):
    """Pre-norm: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, width: int, heads: int, block: int, dropout: float, std: float) -> None:
        super().__init__()
        # epsilon as PyTorch's default (MindSpore's is 1e-7). GELU by tanh, as GPT-2's: the exact
        # one's Erf is no operator MindSpore's ONNX export knows.
        self.norm1 = nn.LayerNorm((width,), epsilon=1e-5)
        self.norm2 = nn.LayerNorm((width,), epsilon=1e-5)
        self.attention = CausalSelfAttention(width, heads, block, dropout, std)
        self.mlp = nn.SequentialCell(
            nn.Dense(
                width, 4 * width, weight_init=normal((4 * width, width), 0.02), bias_init="zeros"
            ),
            nn.GELU(approximate=True),
            nn.Dense(
                4 * width, width, weight_init=normal((width, 4 * width), std), bias_init="zeros"
            ),
            nn.Dropout(p=dropout),
        )

    def construct(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Cell):
    def __init__(
        self, vocabulary: int, block: int, layers: int, heads: int, width: int, dropout: float
    ) -> None:
        super().__init__()
        # GPT-2's init: normal(0, 0.02), biases 0; the residual projections (attention's proj,
        # the MLP's last) scaled by 1/sqrt(2 * layers), as each block adds two to the stream.
        std = 0.02 / math.sqrt(2 * layers)
        self.tokens = nn.Embedding(
            vocabulary, width, embedding_table=normal((vocabulary, width), 0.02)
        )
        self.positions = nn.Embedding(block, width, embedding_table=normal((block, width), 0.02))
        self.blocks = nn.CellList([Block(width, heads, block, dropout, std) for _ in range(layers)])
        self.norm = nn.LayerNorm((width,), epsilon=1e-5)
        self.ids = ms.Tensor(np.arange(block, dtype=np.int32))
        self.scores = ops.MatMul(transpose_b=True)

    def construct(self, ids):
        """Scores over the vocabulary (N, T, V) for ids (N, T), T up to the block."""
        batch, time = ids.shape
        x = self.tokens(ids) + self.positions(self.ids[:time])
        for block in self.blocks:
            x = block(x)
        x = self.norm(x).reshape(batch * time, -1)
        # Tied: the token embeddings score the vocabulary (one matrix in, out).
        table = self.tokens.embedding_table
        return self.scores(x, table.astype(x.dtype)).reshape(batch, time, -1)


@model("gpt", input_shape=(128,), head="tokens", ids=True, blocks="blocks")
def gpt(
    shape: DataShape, layers: int = 4, heads: int = 4, width: int = 128, dropout: float = 0.0
) -> nn.Cell:
    if len(shape.input) != 1:
        raise ValueError(
            f"model gpt takes token ids (T,); the data's samples have shape {shape.input}: "
            "give it text (data.format text)"
        )
    (block,) = shape.input
    return GPT(shape.num_classes, block, layers, heads, width, dropout)
