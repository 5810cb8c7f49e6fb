"""Scalars and text for TensorBoard without TensorBoard: its event files, written by hand."""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path


def _crc32c_of(crc: int) -> int:
    for _ in range(8):
        crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc


TABLE = [_crc32c_of(byte) for byte in range(256)]


def _masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC-32C (Castagnoli) of data."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _framed(record: bytes) -> bytes:
    """One TFRecord: length, its CRC, the record, its CRC."""
    length = struct.pack("<Q", len(record))
    head = length + struct.pack("<I", _masked_crc(length))
    return head + record + struct.pack("<I", _masked_crc(record))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(step: int, body: bytes) -> bytes:
    head = _varint(1 << 3 | 1) + struct.pack("<d", time.time())
    return head + _varint(2 << 3 | 0) + _varint(step) + body


class EventWriter:
    """Appends scalar summaries to one event file in ``directory``."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        # Kept open: a run logging every step pays for a write, not an open and a close.
        self.stream = (directory / name).open("ab")
        self._write(_event(0, _field(3, b"brain.Event:2")))

    def _write(self, record: bytes) -> None:
        self.stream.write(_framed(record))
        # Whole records reach the file at once: TensorBoard (and an upload) may read it now.
        self.stream.flush()

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """One event at ``step`` with a value per tag (val/accuracy, train/loss ...)."""
        summary = b"".join(
            _field(1, _field(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value))
            for tag, value in values.items()
        )
        self._write(_event(step, _field(5, summary)))

    def text(self, step: int, tag: str, markdown: str) -> None:
        """Markdown under ``tag`` in TensorBoard's Text tab (the run's hyperparameters)."""
        plugin = _field(1, _field(1, b"text"))  # SummaryMetadata.plugin_data.plugin_name
        # TensorProto: dtype DT_STRING (7), a scalar shape (empty), one string_val.
        tensor = _varint(1 << 3 | 0) + _varint(7) + _field(2, b"") + _field(8, markdown.encode())
        value = _field(1, tag.encode()) + _field(9, plugin) + _field(8, tensor)
        self._write(_event(step, _field(5, _field(1, value))))

    def close(self) -> None:
        self.stream.close()


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _step_of(event: bytes) -> int:
    """An Event message's step (field 2), 0 when it has none (the file_version event)."""
    at = 0
    while at < len(event):
        key, at = _read_varint(event, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(event, at)
            if number == 2:
                return value
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            length, at = _read_varint(event, at)
            at += length
    return 0


def _records(data: bytes) -> list[bytes]:
    """The whole records of an event file (a last one cut short by a kill is left out)."""
    records, at = [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at : at + 8])
        end = at + 12 + length + 4
        if end > len(data):
            break
        records.append(data[at + 12 : end - 4])
        at = end
    return records


def truncate(directory: Path, step: int) -> None:
    """Drop what earlier attempts wrote after a resumed run's ``step``: each step shown once."""
    for path in sorted(directory.glob("events.out.tfevents.*")):
        kept = [r for r in _records(path.read_bytes()) if _step_of(r) <= step]
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(b"".join(_framed(record) for record in kept))
        os.replace(tmp, path)
