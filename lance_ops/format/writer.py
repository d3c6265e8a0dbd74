"""Writing rows as new fragments (executor side, no Spark).

:func:`write_fragments` streams Arrow batches into data files of at most
``max_rows_per_fragment`` rows each and returns the new fragments (ids 0:
assigned at commit, no row ids: assigned at commit, as pylance's Append and
Overwrite transactions carry them). Incoming batches are conformed to the table's
Arrow schema (column order by name, types cast safely: an overflow or a null in
a non-nullable column is an error, never a silent change).
"""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import SchemaMismatchError
from .datafile import DataFileWriter
from .proto import table_pb2
from .rowids import encode_row_ids, encode_versions, sorted_runs
from .schema import Field, Schema

DEFAULT_MAX_ROWS_PER_FRAGMENT = 1024 * 1024


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``target``'s column order, names and types."""
    if batch.schema.equals(target, check_metadata=False):
        return batch
    names = batch.schema.names
    missing = [f.name for f in target if f.name not in names]
    if missing:
        raise SchemaMismatchError(f"data is missing column(s) {missing}")
    arrays = []
    for f in target:
        col = batch.column(names.index(f.name))
        if col.type != f.type:
            try:
                col = col.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatchError(f"column {f.name!r}: cannot store {col.type} values as {f.type}: {e}") from e
        if not f.nullable and col.null_count:
            raise SchemaMismatchError(f"column {f.name!r} is not nullable but the data has nulls")
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


class FragmentSink:
    """Streams rows into new fragments of at most ``max_rows`` rows.

    Rows *moved* by an update keep their stable row id and created-at version:
    pass ``row_ids`` / ``created`` with their batches and the fragment records
    them (``inline_row_ids``, one compact segment per increasing run, and the
    created-at versions of those rows) as pylance's REWRITE_ROWS transactions
    do; the commit gives the rows of fresh inserts new ids. A sink is either
    for moved rows or for fresh rows, never both.
    """

    def __init__(self, store, fields: Iterable[Field] | Schema, file_version: str,
                 max_rows: int = DEFAULT_MAX_ROWS_PER_FRAGMENT, schema_metadata=None, scattered_ids: bool = False):
        if isinstance(fields, Schema):
            schema_metadata = fields.metadata if schema_metadata is None else schema_metadata
            fields = fields.fields
        self.store = store
        self.fields = list(fields)
        self.file_version = file_version
        self.max_rows = max_rows
        self.schema_metadata = schema_metadata
        self.target = pa.schema([f.to_arrow() for f in self.fields])
        self._writer: DataFileWriter | None = None
        self._ids: list[np.ndarray] = []
        self._created: list[np.ndarray] = []
        self._updated: list[np.ndarray] = []
        self.carries_ids: bool | None = None
        #: Moved rows arrive in no row id order (a Z-order rewrite): their ids
        #: are stored as one array segment (4 bytes a row when they span
        #: under 2^32) instead of one segment per increasing run.
        self.scattered_ids = scattered_ids

    def write(self, batch: pa.RecordBatch, row_ids=None, created=None, updated=None) -> Iterator[table_pb2.DataFragment]:
        """Write a batch; yields fragments that filled up. ``updated`` (last-updated
        versions) is carried only by rewrites that change no value (compaction)."""
        carries = row_ids is not None
        if self.carries_ids is None:
            self.carries_ids = carries
        elif self.carries_ids != carries:
            raise ValueError("a FragmentSink holds either moved rows (with row ids) or fresh rows")
        batch = conform_batch(batch, self.target)
        offset = 0
        try:
            while offset < batch.num_rows:
                if self._writer is None:
                    self._writer = DataFileWriter(self.store, self.fields, self.file_version, self.schema_metadata)
                room = self.max_rows - self._writer.num_rows
                part = batch.slice(offset, room)
                self._writer.write(part)
                if carries:
                    self._ids.append(np.asarray(row_ids[offset : offset + part.num_rows], dtype=np.uint64))
                    if created is not None:
                        self._created.append(np.asarray(created[offset : offset + part.num_rows], dtype=np.uint64))
                    if updated is not None:
                        self._updated.append(np.asarray(updated[offset : offset + part.num_rows], dtype=np.uint64))
                offset += part.num_rows
                if self._writer.num_rows >= self.max_rows:
                    yield self._fragment()
        except BaseException:
            self.abort()
            raise

    def finish(self) -> Iterator[table_pb2.DataFragment]:
        if self._writer is not None and self._writer.num_rows:
            yield self._fragment()
        self._writer = None

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    def _fragment(self) -> table_pb2.DataFragment:
        writer, self._writer = self._writer, None
        n = writer.num_rows
        frag = table_pb2.DataFragment(id=0, files=[writer.finish()], physical_rows=n)
        if self.carries_ids:
            ids = np.concatenate(self._ids) if self._ids else np.empty(0, np.uint64)
            frag.inline_row_ids = encode_row_ids([ids] if self.scattered_ids else sorted_runs(ids))
            if self._created:
                frag.inline_created_at_versions = encode_versions(np.concatenate(self._created))
            if self._updated:
                frag.inline_last_updated_at_versions = encode_versions(np.concatenate(self._updated))
        self._ids, self._created, self._updated = [], [], []
        return frag


def write_fragments(
    store,
    fields: Iterable[Field] | Schema,
    batches: Iterable[pa.RecordBatch],
    file_version: str,
    max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
    schema_metadata=None,
) -> Iterator[table_pb2.DataFragment]:
    """Yield new fragments holding ``batches`` (one data file each)."""
    sink = FragmentSink(store, fields, file_version, max_rows_per_fragment, schema_metadata)
    try:
        for batch in batches:
            yield from sink.write(batch)
        yield from sink.finish()
    except BaseException:
        sink.abort()
        raise
