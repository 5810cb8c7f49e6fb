"""Text as integer ids and back, for models of text. A reader gives its splits a tokenizer
(array_split(..., tokenizer=)); every checkpoint records it, so predict.py --prompt encodes a
prompt and decodes what the model writes as the run's data did, without the data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from src.scaffold.errors import CheckpointError, ConfigError


@dataclass(frozen=True)
class ByteTokenizer:
    """UTF-8 bytes: 256 ids, any text, nothing to download."""

    size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(int(i) for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def describe(self) -> dict[str, Any]:
        return {"kind": "bytes"}


@dataclass(frozen=True)
class CharTokenizer:
    """One id a character of ``vocabulary`` (the characters of the training text)."""

    vocabulary: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.vocabulary)

    def encode(self, text: str) -> list[int]:
        index = {char: i for i, char in enumerate(self.vocabulary)}
        unknown = sorted({char for char in text if char not in index})
        if unknown:
            raise ConfigError(
                f"the text holds {', '.join(map(repr, unknown[:5]))}, not among the "
                f"{self.size} characters the model was trained on"
            )
        return [index[char] for char in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.vocabulary[int(i)] for i in ids if 0 <= i < self.size)

    def describe(self) -> dict[str, Any]:
        return {"kind": "characters", "vocabulary": list(self.vocabulary)}


Tokenizer = Any  # ByteTokenizer, CharTokenizer: encode, decode, size, describe


def recorded(description: dict[str, Any] | None, where: str) -> Tokenizer:
    """The tokenizer a checkpoint describes; one line if it has none (not a model of text)."""
    kind = (description or {}).get("kind")
    if kind == "bytes":
        return ByteTokenizer()
    if kind == "characters":
        return CharTokenizer(tuple(description["vocabulary"]))  # type: ignore[index]
    if kind is None:
        raise CheckpointError(
            f"{where} records no tokenizer: --prompt needs a model of text, whose reader gives "
            "its splits one (array_split(..., tokenizer=ByteTokenizer()))"
        )
    raise CheckpointError(f"{where} records a tokenizer of kind {kind!r}, unknown here")
