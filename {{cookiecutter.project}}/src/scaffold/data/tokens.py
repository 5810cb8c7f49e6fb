"""Text as integer ids and back, for models of text. A reader gives its splits a tokenizer
(array_split(..., tokenizer=)); every checkpoint records it, so predict.py --prompt encodes a
prompt and decodes what the model writes as the run's data did, without the data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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


class JsonTokenizer:
    """A tokenizer.json (the ``tokenizers`` library, as a Hugging Face tokenizer directory holds
    it), carried whole in its description: a checkpoint decodes without the file."""

    def __init__(self, text: str, where: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigError(
                f"{where} is a tokenizer.json, read by the tokenizers library, which is not "
                "installed: pip install tokenizers"
            ) from None
        try:
            self.tokenizer = Tokenizer.from_str(text)
        except Exception as err:  # the library raises its own Exception for any bad file
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ConfigError(f"{where} does not load as a tokenizer.json: {first}") from None
        self.text = text
        self.size = self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        found = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        return [encoding.ids for encoding in found]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids if 0 <= i < self.size])

    def describe(self) -> dict[str, Any]:
        return {"kind": "tokenizer.json", "json": self.text}


Tokenizer = Any  # ByteTokenizer, CharTokenizer, JsonTokenizer: encode, decode, size, describe


def tokenizer_from(spec: str | Path | None, base: Path) -> Tokenizer:
    """data.tokenizer: null (bytes), a tokenizer.json, or a Hugging Face tokenizer directory
    (its tokenizer.json); a relative path is taken from ``base`` (the project)."""
    if spec is None or str(spec) in ("", "bytes"):
        return ByteTokenizer()
    path = Path(spec) if Path(spec).is_absolute() else base / spec
    where = f"data.tokenizer {spec}"
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise ConfigError(
                f"{where} is a directory without tokenizer.json: save a fast tokenizer there "
                "(AutoTokenizer.from_pretrained(...).save_pretrained(dir) writes one)"
            )
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file or directory ({path})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{where} cannot be read: {err}") from None
    return JsonTokenizer(text, where)


def recorded(description: dict[str, Any] | None, where: str) -> Tokenizer:
    """The tokenizer a checkpoint describes; one line if it has none (not a model of text)."""
    kind = (description or {}).get("kind")
    if kind == "bytes":
        return ByteTokenizer()
    if kind == "characters":
        return CharTokenizer(tuple(description["vocabulary"]))  # type: ignore[index]
    if kind == "tokenizer.json":
        return JsonTokenizer(description["json"], where)  # type: ignore[index]
    if kind is None:
        raise CheckpointError(
            f"{where} records no tokenizer: --prompt needs a model of text, whose reader gives "
            "its splits one (array_split(..., tokenizer=ByteTokenizer()))"
        )
    raise CheckpointError(f"{where} records a tokenizer of kind {kind!r}, unknown here")
