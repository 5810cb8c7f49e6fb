"""Text as token ids for language models: text files and JSON Lines tokenized once per node into
a memory-mapped file every rank reads its share of (a corpus larger than memory trains), cut into
windows of ``block`` tokens, each labelled by the tokens one place on."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import IO, Iterator

import numpy as np

from src.scaffold.data.splits import Split
from src.scaffold.data.tokens import ByteTokenizer, Tokenizer
from src.scaffold.errors import DatasetError
from src.scaffold.storage.once import Once
from src.scaffold.storage.where import cache_root, stage_timeout

log = logging.getLogger(__name__)
SUFFIXES = (".txt", ".jsonl")
CHUNK_BYTES = 16 << 20  # text is read and tokenized this much at a time: memory stays flat
# A text file's lines are tokenized in pieces of this many characters, split at lines: a piece
# is encoded as a whole (merges cross its lines), the pieces in parallel.
PIECE_CHARS = 1 << 20
# Tokens written are synced to disk this often: pages not yet written cannot be given back, and
# a container's memory limit (a cgroup) counts them.
SYNC_BYTES = 64 << 20


def text_files(directory: Path) -> list[Path]:
    """The .txt and .jsonl files under ``directory``, in name order (hidden ones skipped)."""
    found = (p for p in directory.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    return sorted(p for p in found if not any(part.startswith(".") for part in p.parts))


def _lines(stream: IO[str]) -> Iterator[list[str]]:
    while lines := stream.readlines(CHUNK_BYTES):
        yield lines


def _pieces(lines: list[str]) -> list[str]:
    """Lines joined into pieces of about PIECE_CHARS: encoded in parallel, each as a whole."""
    pieces, piece, size = [], [], 0
    for line in lines:
        piece.append(line)
        size += len(line)
        if size >= PIECE_CHARS:
            pieces.append("".join(piece))
            piece, size = [], 0
    return pieces + ["".join(piece)] if piece else pieces


def _texts(path: Path, field: str) -> Iterator[list[str]]:
    """The file's text a chunk at a time: pieces of a .txt's lines; each record's ``field`` of a
    .jsonl, ended by a newline."""
    with path.open(encoding="utf-8") as stream:
        if path.suffix == ".txt":
            yield from (_pieces(lines) for lines in _lines(stream))
            return
        number = 0
        for chunk in _lines(stream):
            texts = []
            for line in chunk:
                number += 1
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as err:
                    raise DatasetError(f"{path}:{number} is not JSON: {err}") from None
                if not isinstance(record, dict) or not isinstance(record.get(field), str):
                    raise DatasetError(f"{path}:{number} has no text field {field!r}")
                texts.append(record[field] + "\n")
            yield texts


def _ids(path: Path, tokenizer: Tokenizer, field: str) -> Iterator[np.ndarray]:
    try:
        for texts in _texts(path, field):
            if isinstance(tokenizer, ByteTokenizer):  # UTF-8 bytes: no Python loop
                yield np.frombuffer("".join(texts).encode("utf-8"), np.uint8)
            elif hasattr(tokenizer, "encode_batch"):
                yield np.fromiter(
                    (i for ids in tokenizer.encode_batch(texts) for i in ids), np.int64
                )
            else:
                yield np.asarray(tokenizer.encode("".join(texts)), np.int64)
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path} is not UTF-8 text: {err}") from None


def dtype_for(size: int) -> np.dtype:
    """The smallest unsigned type that holds every id of a vocabulary of ``size``."""
    return np.dtype(np.uint8 if size <= 1 << 8 else np.uint16 if size <= 1 << 16 else np.uint32)


def _write(files: list[Path], tokenizer: Tokenizer, field: str, dest: Path) -> None:
    dtype, count, unsynced = dtype_for(tokenizer.size), 0, 0
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as out:
            for path in files:
                for ids in _ids(path, tokenizer, field):
                    unsynced += out.write(ids.astype(dtype, copy=False).tobytes())
                    count += len(ids)
                    if unsynced >= SYNC_BYTES:  # written pages, not held: a memory limit binds
                        out.flush()
                        os.fsync(out.fileno())
                        unsynced = 0
            out.flush()
            os.fsync(out.fileno())  # on disk before its name: a crash leaves no short file
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("data: %d tokens of %d file(s) prepared in %s", count, len(files), dest)


def _key(files: list[Path], tokenizer: Tokenizer, field: str) -> str:
    said = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    text = json.dumps([said, tokenizer.describe(), field], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def prepared(files: list[Path], tokenizer: Tokenizer, field: str = "text") -> np.memmap:
    """The tokens of ``files``, in order, as a read-only memory map; tokenized by one process of
    the node into the cache ($TRAIN_CACHE_DIR), the others waiting, and kept for later runs."""
    key = _key(files, tokenizer, field)
    directory = cache_root() / "tokens"
    dest = directory / f"{key}.bin"
    Once(directory, f"tokens-{key}", key).run(
        lambda: _write(files, tokenizer, field, dest), "tokenize the text", stage_timeout()
    )
    if dest.stat().st_size == 0:
        raise DatasetError(f"the text ({', '.join(p.name for p in files[:3])}) holds no tokens")
    return np.memmap(dest, dtype=dtype_for(tokenizer.size), mode="r")


def windows(
    tokens: np.ndarray, block: int, fractions: tuple[float, float], tokenizer: Tokenizer
) -> dict[str, Split]:
    """Windows of ``block`` tokens, each labelled by the next ``block`` (views of ``tokens``,
    nothing copied): train, then val and test, the last ``fractions`` of them, in text order."""
    count = (len(tokens) - 1) // block
    if count < 3:
        raise DatasetError(
            f"the text holds {len(tokens)} tokens: too few for a window of block_size {block} "
            "in each of train, val and test; give more text or a smaller data.block_size"
        )
    inputs = tokens[: count * block].reshape(count, block)
    labels = tokens[1 : count * block + 1].reshape(count, block)
    val, test = (max(1, round(count * fraction)) for fraction in fractions)
    if val + test >= count:
        raise DatasetError(f"val_fraction and test_fraction leave none of {count} windows to train")
    cuts = {"train": (0, count - val - test), "val": (count - val - test, count - test)}
    cuts["test"] = (count - test, count)
    return {
        name: Split(labels[a:b], (block,), inputs[a:b], tokenizer=tokenizer)
        for name, (a, b) in cuts.items()
    }
