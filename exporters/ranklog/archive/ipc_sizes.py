"""What an Arrow IPC stream will take once read, from its messages' metadata, before reading it.

An IPC stream may compress its buffers (the agent sends lz4): a 4 MB body can declare a gigabyte
of strings, which the reader allocates while it decompresses one batch — before anything could
count it. The metadata says it first: each record batch's ``length`` (rows) and its ``buffers``
(offset and length in the message body); a compressed buffer starts with its uncompressed length
(int64, -1 when that buffer was left uncompressed). This module walks the stream's messages with
pyarrow's ``MessageReader`` (no buffer is decompressed) and reads those fields from the FlatBuffer
metadata (Arrow's ``Message.fbs``/``Schema.fbs``: Message.header_type 1, header 2; RecordBatch
length 0, buffers 2, compression 3; DictionaryBatch data 1), so the memory budget can refuse the
body first (:mod:`.ingest_budget`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3
_U32, _I32, _U16, _I64 = struct.Struct("<I"), struct.Struct("<i"), struct.Struct("<H"), struct.Struct("<q")
_BUFFER = struct.Struct("<qq")


class NotIpc(ValueError):
    """The metadata does not read as Arrow's (the reader then answers for the body)."""


@dataclass(frozen=True)
class Declared:
    rows: int  # records in the stream's record batches
    inflated: int  # bytes its compressed buffers decompress to


class _Table:
    """One FlatBuffer table: its fields by id."""

    def __init__(self, data: bytes, position: int) -> None:
        self.data, self.position = data, position
        vtable = position - _I32.unpack_from(data, position)[0]
        size = _U16.unpack_from(data, vtable)[0]
        self.offsets = [_U16.unpack_from(data, vtable + 4 + 2 * i)[0] for i in range((size - 4) // 2)]

    def _at(self, field: int) -> int | None:
        if field >= len(self.offsets) or not self.offsets[field]:
            return None
        return self.position + self.offsets[field]

    def scalar(self, field: int, kind: struct.Struct, default: int = 0) -> int:
        at = self._at(field)
        return default if at is None else kind.unpack_from(self.data, at)[0]

    def table(self, field: int) -> _Table | None:
        at = self._at(field)
        return None if at is None else _Table(self.data, at + _U32.unpack_from(self.data, at)[0])

    def structs(self, field: int, kind: struct.Struct) -> list[tuple]:
        at = self._at(field)
        if at is None:
            return []
        start = at + _U32.unpack_from(self.data, at)[0]
        count = _U32.unpack_from(self.data, start)[0]
        return [kind.unpack_from(self.data, start + 4 + i * kind.size) for i in range(count)]


def _batch(batch: _Table, body: memoryview) -> tuple[int, int]:
    rows = batch.scalar(0, _I64)
    if batch.table(3) is None:  # no compression: the buffers are the body's bytes as they are
        return rows, 0
    inflated = 0
    for offset, length in batch.structs(2, _BUFFER):
        if length >= 8:
            declared = _I64.unpack_from(body, offset)[0]
            if declared > 0:
                inflated += declared
    return rows, inflated


def declared(data: bytes) -> Declared:
    """Rows and decompressed bytes the stream in `data` declares; NotIpc when it cannot be read so."""
    import pyarrow as pa

    rows = inflated = 0
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(data))
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            if message is None:
                break
            metadata = message.metadata.to_pybytes()
            root = _Table(metadata, _U32.unpack_from(metadata, 0)[0])
            kind = root.scalar(1, struct.Struct("<B"))
            header = root.table(2)
            if header is None or kind not in (_DICTIONARY_BATCH, _RECORD_BATCH):
                continue
            batch = header if kind == _RECORD_BATCH else header.table(1)
            if batch is None:
                continue
            body = memoryview(message.body) if message.body is not None else memoryview(b"")
            batch_rows, batch_inflated = _batch(batch, body)
            rows += batch_rows if kind == _RECORD_BATCH else 0
            inflated += batch_inflated
    except (pa.ArrowException, OSError, struct.error, IndexError) as exc:
        raise NotIpc(str(exc)) from None
    return Declared(rows, inflated)
