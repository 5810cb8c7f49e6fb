"""Labelling new inputs with a run's checkpoint (predict.py): one row an input (its class,
probability and top k, or its value), printed or written to FILE.jsonl or FILE.csv; or, for a
model of text, a row a prompt and what the model writes after it (infer/generate.py)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator, TextIO

import numpy as np

from src.scaffold.backend.api import Framework
from src.scaffold.config import Config
from src.scaffold.data import tokens
from src.scaffold.errors import ConfigError, DatasetError
from src.scaffold.infer.generate import generate, prompts_of
from src.scaffold.infer.inputs import gather
from src.scaffold.infer.recorded import CHECKPOINT_HELP, Recorded, locate
from src.scaffold.run.runner import backend_of
from src.scaffold.task import Task

DESCRIPTION = (
    "Label images or table rows with a run's checkpoint, or continue --prompt text with a "
    "model of text (train.py's options apply)."
)
OUTPUTS = (".jsonl", ".csv")
COLUMNS = ("input", "class", "probability", "top_k")


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs", nargs="*", metavar="INPUT", help="image files or folders of them, or CSV files"
    )
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    parser.add_argument(
        "--output", type=Path, help="write the rows to FILE.jsonl or FILE.csv, not to stdout"
    )
    parser.add_argument(
        "--top_k",
        type=int,
        help="classes listed a row (default 5); with --prompt: draw from the k likeliest tokens",
    )
    parser.add_argument("--prompt", action="append", help="text to continue (a model of text)")
    parser.add_argument("--prompts", help="a file of prompts to continue, one a line")
    parser.add_argument(
        "--max_new_tokens", type=int, default=100, help="tokens written a prompt (default 100)"
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="1 (default); 0: the likeliest token"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="a line for each file skipped, not a count"
    )


def predict(task: Task, cfg: Config, framework: Framework, args: argparse.Namespace) -> int:
    """Label args.inputs with checkpoint args.checkpoint; return the rows written."""
    output: Path | None = args.output
    if output is not None and output.suffix.lower() not in OUTPUTS:
        raise ConfigError(f"--output {output}: write .jsonl or .csv")
    if args.top_k is not None and args.top_k < 1:
        raise ConfigError(f"--top_k {args.top_k}: give 1 or more")
    prompts = prompts_of(args)
    if prompts and args.inputs:
        raise ConfigError("give INPUTs to label or --prompt text to continue, not both")
    found = locate(cfg.named(), cfg.places(), framework, args.checkpoint)
    recorded, cfg = found.recorded, cfg.with_options(**found.changes)
    if recorded.num_classes < 1:
        raise ConfigError(f"--checkpoint {recorded.path} does not record its classes: train again")
    # Checked before the framework's work: the tokenizer of a prompt, or every input named.
    where = f"--checkpoint {recorded.path}"
    tokenizer = tokens.recorded(recorded.tokenizer, where) if prompts else None
    inputs = None if prompts else gather(args.inputs, recorded)
    backend = backend_of(framework, cfg, task)
    try:
        backend.prepare(recorded.data_shape, recorded.mean, recorded.std, recorded.path)
        with _Sink(output) as sink:
            if inputs is None:
                block = recorded.shape[0]
                for row in generate(backend.infer, tokenizer, prompts, block, args, cfg.seed):
                    sink.write(row)
            else:
                for names, batch in inputs.batches(cfg.batch_size):
                    for row in rows(recorded, names, backend.infer(batch), args.top_k or 5):
                        sink.write(row)
                if sink.count == 0:
                    raise DatasetError(
                        f"none of the {len(inputs.names)} input(s) could be read: "
                        + "; ".join(why for _, why in inputs.unreadable[:2])
                    )
    finally:
        backend.close()
    for line in inputs.report(args.verbose) if inputs is not None else ():
        print(line, file=sys.stderr, flush=True)
    found.said()
    return sink.count


def rows(
    recorded: Recorded, names: tuple[str, ...], outputs: np.ndarray, top_k: int
) -> Iterator[dict[str, Any]]:
    """One row an input: its class, probability (softmax) and top k; its value; or for labels
    a position, the most likely class at each."""
    if recorded.label_shape:
        classes = recorded.names()
        for name, scores in zip(names, outputs):
            best = scores.reshape(-1, scores.shape[-1]).argmax(axis=-1)
            yield {"input": name, "classes": [classes[i] for i in best]}
        return
    if recorded.numeric:
        for name, value in zip(names, outputs.reshape(len(names), -1)[:, 0]):
            yield {"input": name, "value": float(value)}
        return
    classes = recorded.names()
    scores = outputs.astype(np.float64)
    scores -= scores.max(axis=1, keepdims=True)  # exp() of the largest is 1: no overflow
    probabilities = np.exp(scores)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    # Stable: equal probabilities keep the class order, the same on every run.
    order = np.argsort(-probabilities, axis=1, kind="stable")[:, : min(top_k, len(classes))]
    for name, ranked, probs in zip(names, order, probabilities):
        top = [{"class": classes[i], "probability": round(float(probs[i]), 6)} for i in ranked]
        yield {"input": name, **top[0], "top_k": top}


class _Sink:
    """Where the rows go: stdout as tab-separated lines, or a .jsonl or .csv file written
    beside its place and renamed there at the end (a failed run leaves none)."""

    def __init__(self, output: Path | None) -> None:
        self.output = output
        self.tmp = None if output is None else output.with_name(f".{output.name}.tmp")
        self.stream: TextIO = sys.stdout
        self.table: Any = None
        self.count = 0

    def __enter__(self) -> _Sink:
        if self.output is not None and self.tmp is not None:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self.stream = self.tmp.open("w", encoding="utf-8", newline="")
            if self.output.suffix.lower() == ".csv":
                self.table = csv.writer(self.stream)
        return self

    def write(self, row: dict[str, Any]) -> None:
        self.count += 1
        if self.output is not None and self.table is None:
            self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
            return
        if "text" in row:  # a prompt's continuation: as written, or a CSV row
            if self.table is None:
                self.stream.write(f"{row['prompt']}{row['text']}\n")
                return
            if self.count == 1:
                self.table.writerow(("prompt", "text"))
            self.table.writerow((row["prompt"], row["text"]))
            return
        if "value" in row or "classes" in row:
            fields = [row["input"], row.get("value", " ".join(row.get("classes", ())))]
        else:
            top = " ".join(f"{t['class']}:{t['probability']:.4f}" for t in row["top_k"])
            fields = [row["input"], row["class"], f"{row['probability']:.6f}", top]
        if self.table is None:
            self.stream.write("\t".join(map(str, fields)) + "\n")
            return
        if self.count == 1:
            named = [key for key in ("value", "classes") if key in row]
            self.table.writerow(("input", *named) if named else COLUMNS)
        self.table.writerow(fields)

    def __exit__(self, kind: Any, *_: Any) -> None:
        if self.output is None or self.tmp is None:
            sys.stdout.flush()
            return
        self.stream.close()
        if kind is None:
            os.replace(self.tmp, self.output)
        else:
            self.tmp.unlink(missing_ok=True)
