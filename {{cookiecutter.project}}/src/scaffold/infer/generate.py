"""Text from a model of text (predict.py --prompt): each prompt encoded by the run's tokenizer,
then one token at a time drawn from the model's scores at the last position. The model sees
windows of the run's block of ids, right-padded: a causal model's score at a position depends
on the ids up to it only, so one input shape serves every step (one compiled graph)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from src.scaffold.errors import ConfigError, DatasetError


def prompts_of(args: argparse.Namespace) -> list[str]:
    """The --prompt texts, then the lines of the --prompts file (blank ones skipped)."""
    prompts = list(args.prompt or ())
    if args.prompts is not None:
        path = Path(args.prompts)
        if not path.is_file():
            raise DatasetError(f"--prompts {path}: no such file")
        prompts += [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    if args.max_new_tokens < 1:
        raise ConfigError(f"--max_new_tokens {args.max_new_tokens}: give 1 or more")
    if args.temperature < 0:
        raise ConfigError(f"--temperature {args.temperature}: give 0 (the likeliest) or more")
    return prompts


def _draw(scores: np.ndarray, temperature: float, top_k: int | None, rng) -> int:
    """One id from a position's scores: the likeliest at temperature 0, else sampled from the
    softmax of scores / temperature over the top_k (None: all)."""
    if temperature == 0:
        return int(np.argmax(scores))
    scores = scores.astype(np.float64) / temperature
    if top_k is not None and top_k < len(scores):
        scores[scores < np.sort(scores)[-top_k]] = -np.inf
    probabilities = np.exp(scores - scores.max())
    return int(rng.choice(len(scores), p=probabilities / probabilities.sum()))


def generate(
    infer: Callable[[np.ndarray], np.ndarray],
    tokenizer,
    prompts: list[str],
    block: int,
    args: argparse.Namespace,
    seed: int,
) -> Iterator[dict[str, str]]:
    """A row a prompt: the prompt and the text the model writes after it."""
    rng = np.random.default_rng(seed)
    encoded = []
    for prompt in prompts:
        ids = tokenizer.encode(prompt)
        if not ids:
            raise ConfigError("--prompt is empty: give some text to continue")
        if len(ids) > block:
            print(
                f"WARNING: a prompt of {len(ids)} tokens is longer than the model's block of "
                f"{block}: the model sees its last {block}",
                file=sys.stderr,
                flush=True,
            )
        encoded.append(ids)
    written: list[list[int]] = [[] for _ in prompts]
    for _ in range(args.max_new_tokens):
        batch = np.zeros((len(prompts), block), dtype=np.int64)
        ends = []
        for row, (ids, new) in enumerate(zip(encoded, written)):
            window = (ids + new)[-block:]
            batch[row, : len(window)] = window
            ends.append(len(window) - 1)
        scores = infer(batch)
        for row, end in enumerate(ends):
            written[row].append(_draw(scores[row, end], args.temperature, args.top_k, rng))
    for prompt, new in zip(prompts, written):
        yield {"prompt": prompt, "text": tokenizer.decode(new)}
