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

import pyarrow as pa

from ..errors import SchemaMismatchError
from .datafile import DataFileWriter
from .proto import table_pb2
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


def write_fragments(
    store,
    fields: Iterable[Field] | Schema,
    batches: Iterable[pa.RecordBatch],
    file_version: str,
    max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
    schema_metadata=None,
) -> Iterator[table_pb2.DataFragment]:
    """Yield new fragments holding ``batches`` (one data file each)."""
    if isinstance(fields, Schema):
        schema_metadata = fields.metadata if schema_metadata is None else schema_metadata
        fields = fields.fields
    fields = list(fields)
    target = pa.schema([f.to_arrow() for f in fields])
    writer: DataFileWriter | None = None
    try:
        for batch in batches:
            batch = conform_batch(batch, target)
            offset = 0
            while offset < batch.num_rows:
                if writer is None:
                    writer = DataFileWriter(store, fields, file_version, schema_metadata)
                room = max_rows_per_fragment - writer.num_rows
                part = batch.slice(offset, room)
                writer.write(part)
                offset += part.num_rows
                if writer.num_rows >= max_rows_per_fragment:
                    yield _fragment(writer)
                    writer = None
        if writer is not None and writer.num_rows:
            yield _fragment(writer)
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


def _fragment(writer: DataFileWriter) -> table_pb2.DataFragment:
    n = writer.num_rows
    df = writer.finish()
    return table_pb2.DataFragment(id=0, files=[df], physical_rows=n)
