"""Text from a model of text (predict.py --prompt), without a model to train: the tokenizers a
checkpoint records, and the loop that writes a token at a time from a causal model's scores."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from src.scaffold.data.tokens import ByteTokenizer, CharTokenizer, recorded
from src.scaffold.errors import CheckpointError, ConfigError
from src.scaffold.infer.generate import generate

VOCABULARY = tuple("abcdef ")


def options(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"max_new_tokens": 6, "temperature": 0.0, "top_k": None, **given})


def successor(batch: np.ndarray) -> np.ndarray:
    """A causal model's scores: at each position, the id after that position's own id."""
    size = len(VOCABULARY)
    scores = np.full((*batch.shape, size), -5.0, dtype=np.float32)
    rows, positions = np.indices(batch.shape)
    scores[rows, positions, (batch + 1) % size] = 5.0
    return scores


def test_tokenizers_round_trip_and_are_found_again_from_their_description() -> None:
    text = "naïve 模型"
    assert ByteTokenizer().decode(ByteTokenizer().encode(text)) == text
    chars = CharTokenizer(VOCABULARY)
    assert chars.decode(chars.encode("bad cafe")) == "bad cafe"
    assert recorded(chars.describe(), "x") == chars
    assert recorded(ByteTokenizer().describe(), "x") == ByteTokenizer()
    with pytest.raises(ConfigError, match="the text holds 'z', not among the 7 characters"):
        chars.encode("zebec")
    with pytest.raises(CheckpointError, match="records no tokenizer: --prompt needs a model"):
        recorded(None, "--checkpoint lenet_epoch1.pt")


def test_each_token_is_read_at_the_last_position_of_the_window() -> None:
    # The likeliest (temperature 0): each id is the one after the last, from the prompt's end;
    # prompts of different lengths side by side, and one longer than the block of 4 (its last 4).
    prompts = ["ab", "f", "abcde"]
    rows = list(generate(successor, CharTokenizer(VOCABULARY), prompts, 4, options(), seed=0))
    assert [row["text"] for row in rows] == ["cdef a", " abcde", "f abcd"]


def test_sampling_follows_the_seed_and_top_k() -> None:
    chars = CharTokenizer(VOCABULARY)

    def flat(batch: np.ndarray) -> np.ndarray:  # every id as likely: the draws are the seed's
        return np.zeros((*batch.shape, len(VOCABULARY)), dtype=np.float32)

    drawn = [
        next(generate(flat, chars, ["a"], 4, options(temperature=1.0, max_new_tokens=50), seed))
        for seed in (0, 0, 1)
    ]
    assert drawn[0] == drawn[1] != drawn[2]
    assert len(set(drawn[0]["text"])) > 1
    # top_k 1 keeps only the likeliest, at any temperature.
    likeliest = options(temperature=5.0, top_k=1)
    assert next(generate(successor, chars, ["a"], 4, likeliest, seed=3))["text"] == "bcdef "
