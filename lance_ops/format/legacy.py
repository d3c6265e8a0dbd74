"""Reader of legacy (file format 0.x, "v1") Lance data files.

pylance 14 still writes them (``data_storage_version="legacy"``) but its file
codec (``lance.file``) reads only 2.x files, so lance_ops decodes them
itself. Layout (the reference docs' "Encodings" and the v1 reader):

```
[pages ...] [dictionary values ...] [page table] [schema] [metadata] [footer]
footer (16 bytes): u64 metadata position | u16 major (0) | u16 minor | b"LANC"
metadata: u32 length | lance.file.Metadata {manifest_position, batch_offsets,
          page_table_position}
schema:   u32 length | lance.table.Manifest (its fields: the file's schema,
          with dictionary value locations)
page table: i64 (position, length) for every field id in
          [first id of DataFile.fields, max id] x every batch, field-major
```

Rows are stored in batches (``batch_offsets``: cumulative row counts); each
field has one page per batch (struct fields none):

* **plain** (fixed-width types: integers, floats, dates, times, timestamps,
  durations, decimals, fixed-size binary; fixed-size lists as their flattened
  values): ``length`` values back to back at ``position``; booleans
  bit-packed. No validity: nulls were written as zeros and read back as such;
* **variable-length binary** (string, binary and their large variants):
  ``length + 1`` i64 *absolute file offsets* at ``position``, the bytes
  where they point; equal neighbouring offsets read as null when the field
  is nullable (so empty strings read as null, as pylance reads them);
* **lists**: ``length + 1`` i32 (i64 for large lists) positions into the
  child's page of the same batch; the child is read over that range;
* **dictionary**: plain keys; the values are stored once in the file, where
  the schema's ``Field.dictionary`` (offset, length) points (variable-length
  binary or plain encoded);
* **null** type: no data, ``length`` rows.

Everything is decoded with numpy/pyarrow buffers (no per-value Python). A
valid file using something outside this layout raises
:class:`UnsupportedFeatureError` naming the file; a damaged one
:class:`CorruptTableError`.
"""
from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptTableError, UnsupportedFeatureError
from .proto import file_pb2, table_pb2
from .schema import Field, Schema

MAGIC = b"LANC"
FOOTER_LEN = 16
#: Files up to this size are read whole (one request); larger ones per page.
WHOLE_FILE_BYTES = 16 * 1024 * 1024

_ADVICE = (
    "rewrite the table with a 2.x data storage version (with pylance or LanceDB, "
    "data_storage_version='2.0')"
)


class _Bytes:
    """Random access to one file's bytes through the object store."""

    def __init__(self, store, rel: str):
        self.store, self.rel = store, rel
        self.where = store.path(rel)
        try:
            self.size = store.size(rel)
        except FileNotFoundError as e:
            raise CorruptTableError("data file is missing", self.where) from e
        self._all = store.read_bytes(rel) if self.size <= WHOLE_FILE_BYTES else None

    def read(self, pos: int, n: int) -> bytes:
        if pos < 0 or n < 0 or pos + n > self.size:
            raise CorruptTableError(
                f"legacy data file: a read of {n} bytes at {pos} is outside the file ({self.size} bytes)",
                self.where,
            )
        if self._all is not None:
            return self._all[pos: pos + n]
        return self.store.read_range(self.rel, pos, n)


def _message(src: _Bytes, pos: int, msg, what: str):
    (n,) = struct.unpack("<I", src.read(pos, 4))
    try:
        msg.ParseFromString(src.read(pos + 4, n))
    except Exception as e:
        raise CorruptTableError(f"legacy data file: cannot decode its {what}: {e}", src.where) from e
    return msg


class _FileMeta:
    """What one legacy file's tail says: batches, schema, page table."""

    def __init__(self, src: _Bytes, first_id: int, max_id: int):
        if src.size < FOOTER_LEN + 4:
            raise CorruptTableError("legacy data file is too short to hold a footer", src.where)
        tail = src.read(src.size - FOOTER_LEN, FOOTER_LEN)
        pos, major, minor = struct.unpack_from("<QHH", tail)
        if tail[-4:] != MAGIC:
            raise CorruptTableError("not a Lance data file (bad footer magic)", src.where)
        if major != 0:
            raise CorruptTableError(f"the file's footer says version {major}.{minor}, not a legacy file", src.where)
        self.version = (major, minor)
        md = _message(src, pos, file_pb2.Metadata(), "metadata")
        self.batch_offsets = np.asarray(md.batch_offsets, dtype=np.int64)
        if len(self.batch_offsets) and (self.batch_offsets[0] != 0 or np.any(np.diff(self.batch_offsets) < 0)):
            raise CorruptTableError("legacy data file: batch offsets are not ascending from 0", src.where)
        schema_pb = _message(src, md.manifest_position, table_pb2.Manifest(), "schema")
        self.schema = Schema.from_proto(schema_pb.fields)
        self.dictionaries = {f.id: (f.dictionary.offset, f.dictionary.length) for f in schema_pb.fields
                             if f.HasField("dictionary")}
        self.num_batches = max(0, len(self.batch_offsets) - 1)
        self.first_id = first_id
        n_ids = max_id - first_id + 1
        raw = src.read(md.page_table_position, n_ids * self.num_batches * 16) if n_ids > 0 and self.num_batches else b""
        self.pages = np.frombuffer(raw, dtype="<i8").reshape(max(n_ids, 0), self.num_batches, 2) if raw else None

    @property
    def num_rows(self) -> int:
        return int(self.batch_offsets[-1]) if len(self.batch_offsets) else 0

    def page(self, field_id: int, batch: int, where: str) -> tuple[int, int]:
        i = field_id - self.first_id
        if self.pages is None or not 0 <= i < self.pages.shape[0]:
            raise CorruptTableError(f"legacy data file has no page for field id {field_id}", where)
        pos, length = self.pages[i, batch]
        return int(pos), int(length)


_META_CACHE: "OrderedDict[tuple, _FileMeta]" = OrderedDict()
_META_LOCK = threading.Lock()


def _meta(src: _Bytes, first_id: int, max_id: int) -> _FileMeta:
    key = (src.where, first_id, max_id)
    with _META_LOCK:
        m = _META_CACHE.get(key)
        if m is not None:
            return m
    m = _FileMeta(src, first_id, max_id)
    with _META_LOCK:
        _META_CACHE[key] = m
        if len(_META_CACHE) > 1024:
            _META_CACHE.popitem(last=False)
    return m


# ---------------------------------------------------------------- decoding
def _width(t: pa.DataType) -> int | None:
    """Bytes per value of a plain-encoded type (None: not fixed width)."""
    if pa.types.is_boolean(t):
        return 0  # bit-packed
    try:
        bits = t.bit_width
    except ValueError:
        return None
    return bits // 8 if bits and bits % 8 == 0 else None


class LegacyFileReader:
    """Reads the top-level columns ``columns`` of one legacy data file; the
    same calls as ``lance.file.LanceFileReader`` (``read_range``,
    ``take_rows``, ``metadata().schema``)."""

    def __init__(self, store, rel: str, data_file: table_pb2.DataFile, columns: Sequence[str] | None = None):
        self._src = _Bytes(store, rel)
        ids = list(data_file.fields)
        self.meta = _meta(self._src, ids[0] if ids else 0, max(ids) if ids else -1)
        self.schema = self.meta.schema
        names = self.schema.names
        self.columns = list(columns) if columns is not None else names
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise CorruptTableError(f"legacy data file has no column(s) {missing}", self._src.where)

    # ------------------------------------------------------------ interface
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([self.schema.field(c).to_arrow() for c in self.columns])

    def metadata(self):
        return _Metadata(self.schema.to_arrow())

    def num_rows(self) -> int:
        return self.meta.num_rows

    def read_range(self, start: int, count: int, batch_size: int = 65536) -> "_Results":
        end = min(start + count, self.meta.num_rows)
        return _Results(self._ranges(start, end, batch_size))

    def take_rows(self, offsets, batch_size: int = 65536) -> "_Results":
        return _Results(self._takes(np.asarray(offsets, dtype=np.int64), batch_size))

    # --------------------------------------------------------------- batches
    def _ranges(self, start: int, end: int, batch_size: int) -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        have = 0
        for b in range(self.meta.num_batches):
            lo, hi = int(self.meta.batch_offsets[b]), int(self.meta.batch_offsets[b + 1])
            s, e = max(lo, start), min(hi, end)
            if s >= e:
                continue
            pending.append(self._read_batch(b, s - lo, e - lo))
            have += e - s
            while have >= batch_size:
                out, pending, have = _split(pending, batch_size)
                yield out
        if have:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0] if len(pending) > 1 else pending[0]

    def _takes(self, offsets: np.ndarray, batch_size: int) -> Iterator[pa.RecordBatch]:
        if not len(offsets):
            return
        if np.any(offsets < 0) or np.any(offsets >= self.meta.num_rows):
            raise CorruptTableError("legacy data file: row offset out of range", self._src.where)
        batch_of = np.searchsorted(self.meta.batch_offsets, offsets, side="right") - 1
        parts = []
        for b in np.unique(batch_of):
            lo = int(self.meta.batch_offsets[b])
            sel = offsets[batch_of == b] - lo
            first, last = int(sel.min()), int(sel.max()) + 1
            batch = self._read_batch(int(b), first, last)
            parts.append(batch.take(pa.array(sel - first)))
        table = pa.Table.from_batches(parts, schema=self.arrow_schema())
        for i in range(0, table.num_rows, batch_size):
            yield table.slice(i, batch_size).combine_chunks().to_batches()[0]

    def _read_batch(self, batch: int, s: int, e: int) -> pa.RecordBatch:
        arrays = [self._read(self.schema.field(c), batch, s, e) for c in self.columns]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema())

    # ---------------------------------------------------------------- arrays
    def _unsupported(self, f: Field, what: str):
        return UnsupportedFeatureError(
            f"data file {self._src.where} is a legacy Lance file (format version "
            f"{self.meta.version[0]}.{self.meta.version[1]}) whose column {f.name!r} ({f.logical_type}) "
            f"uses {what}, which lance_ops cannot decode; {_ADVICE}"
        )

    def _read(self, f: Field, batch: int, s: int, e: int) -> pa.Array:
        """Rows [s, e) of field ``f``'s page in ``batch``."""
        t = f.arrow_type()
        n = e - s
        if pa.types.is_struct(t):
            children = [self._read(c, batch, s, e) for c in f.children]
            return pa.StructArray.from_arrays(children, fields=[c.to_arrow() for c in f.children])
        if pa.types.is_null(t):
            return pa.nulls(n)
        if pa.types.is_dictionary(t):
            keys = self._plain(f, t.index_type, batch, s, e)
            values = self._dictionary_values(f, t.value_type)
            return pa.DictionaryArray.from_arrays(keys, values)
        if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            pos, length = self.meta.page(f.id, batch, self._src.where)
            return self._binary(t, f.nullable, pos, length, s, e)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            pos, length = self.meta.page(f.id, batch, self._src.where)
            width = 4 if pa.types.is_list(t) else 8
            if e + 1 > length:
                raise CorruptTableError(f"legacy data file: list page of {f.name!r} is too short", self._src.where)
            raw = self._src.read(pos + s * width, (n + 1) * width)
            positions = np.frombuffer(raw, dtype="<i4" if width == 4 else "<i8").astype(np.int64)
            child = self._read(f.children[0], batch, int(positions[0]), int(positions[-1]))
            offsets = (positions - positions[0]).astype(np.int32 if width == 4 else np.int64)
            ctor = pa.ListArray if width == 4 else pa.LargeListArray
            return ctor.from_arrays(pa.array(offsets), child, type=t)
        if pa.types.is_fixed_size_list(t):
            size = t.list_size
            inner = t.value_type
            if _width(inner) is None:
                raise self._unsupported(f, f"a fixed-size list of {inner}")
            values = self._plain(f, inner, batch, s * size, e * size, rows=lambda length: length * size)
            return pa.FixedSizeListArray.from_arrays(values, size)
        if _width(t) is not None:
            return self._plain(f, t, batch, s, e)
        raise self._unsupported(f, f"the Arrow type {t}")

    def _plain(self, f: Field, t: pa.DataType, batch: int, s: int, e: int, rows=None) -> pa.Array:
        pos, length = self.meta.page(f.id, batch, self._src.where)
        total = rows(length) if rows else length
        if e > total:
            raise CorruptTableError(f"legacy data file: page of {f.name!r} holds {total} values, {e} needed",
                                    self._src.where)
        return self._plain_at(t, pos, s, e)

    def _plain_at(self, t: pa.DataType, pos: int, s: int, e: int) -> pa.Array:
        n = e - s
        w = _width(t)
        if w == 0:  # booleans, bit-packed
            first, last = s // 8, (e + 7) // 8
            buf = pa.py_buffer(self._src.read(pos + first, last - first))
            return pa.Array.from_buffers(pa.bool_(), n, [None, buf], offset=s - first * 8)
        buf = pa.py_buffer(self._src.read(pos + s * w, n * w))
        return pa.Array.from_buffers(t, n, [None, buf])

    def _binary(self, t: pa.DataType, nullable: bool, pos: int, length: int, s: int, e: int) -> pa.Array:
        n = e - s
        if e > length:
            raise CorruptTableError("legacy data file: binary page is too short", self._src.where)
        positions = np.frombuffer(self._src.read(pos + s * 8, (n + 1) * 8), dtype="<i8")
        start, end = int(positions[0]), int(positions[-1])
        if end < start:
            raise CorruptTableError("legacy data file: binary offsets go backwards", self._src.where)
        data = self._src.read(start, end - start) if end > start else b""
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        offsets = (positions - start).astype(np.int64 if large else np.int32)
        validity = None
        if nullable:
            empty = positions[1:] == positions[:-1]
            if empty.any():
                validity = pa.array(~empty).buffers()[1]
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])

    def _dictionary_values(self, f: Field, t: pa.DataType) -> pa.Array:
        loc = self.meta.dictionaries.get(f.id)
        if loc is None:
            raise CorruptTableError(f"legacy data file: dictionary column {f.name!r} has no values", self._src.where)
        offset, length = loc
        if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            return self._binary(t, True, offset, length, 0, length)
        if pa.types.is_integer(t):
            return self._plain_at(t, offset, 0, length)
        raise self._unsupported(f, f"dictionary values of type {t}")


class _Metadata:
    def __init__(self, schema: pa.Schema):
        self.schema = schema


class _Results:
    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches


def _split(pending: list[pa.RecordBatch], n: int) -> tuple[pa.RecordBatch, list[pa.RecordBatch], int]:
    table = pa.Table.from_batches(pending).combine_chunks()
    out = table.slice(0, n).to_batches()[0]
    rest = table.slice(n)
    rest_batches = rest.to_batches() if rest.num_rows else []
    return out, rest_batches, rest.num_rows


def legacy_file_schema(store, rel: str, data_file: table_pb2.DataFile) -> pa.Schema:
    """The Arrow schema of a legacy data file (from the schema it embeds)."""
    return LegacyFileReader(store, rel, data_file).metadata().schema


def is_legacy(data_file: table_pb2.DataFile) -> bool:
    return data_file.file_major_version == 0
