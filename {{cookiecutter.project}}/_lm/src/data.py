"""Your data: text as token ids. The text reader below takes the .txt and .jsonl files of the
data directory (a JSON Lines record gives its "text" field), in name order, tokenizes them once
per node into a memory-mapped file every rank reads its share of (a corpus larger than memory
trains), and cuts windows of data.block_size tokens, each labelled by the tokens one place on:
train, then the last val_fraction and data.test_fraction of the text for val and test.

The tokenizer is config.yaml's data.tokenizer: null reads UTF-8 bytes (256 ids, nothing to
download); a tokenizer.json, or a Hugging Face tokenizer directory holding one, is read by the
tokenizers library (pip install tokenizers). Each checkpoint carries it: predict.py --prompt
encodes and decodes as the run did.

For another format, write a Reader here and mark it with @reader("name"); set data: format:
name in config.yaml. Readers get config.yaml's data: section as self.options.
"""

from __future__ import annotations

from pathlib import Path

from src.scaffold import Reader, Split, prepared, reader, text_files, tokenizer_from, windows

FIELD = "text"  # the field of a JSON Lines record that holds its text


@reader("text")
class TextReader(Reader):
    looks_for = "text: .txt or .jsonl files"

    def found(self, directory: Path) -> str | None:
        files = text_files(directory)
        return f"{len(files)} text file(s) ({files[0].name} ...)" if files else None

    def read(self, directory: Path) -> dict[str, Split]:
        options = self.options
        tokenizer = tokenizer_from(options["tokenizer"], Path.cwd())
        ids = prepared(text_files(directory), tokenizer, FIELD)
        fractions = (options["val_fraction"], options["test_fraction"])
        return windows(ids, options["block_size"], fractions, tokenizer)
