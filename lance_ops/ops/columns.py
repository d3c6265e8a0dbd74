"""Column operations that change only the schema (and helpers shared with
the data-evolution operations)."""
from __future__ import annotations

from pyspark.sql import types as T

from ..errors import SchemaMismatchError
from ..format.scan import is_reserved_name
from ..format.schema import Schema, field_from_arrow
from ..spark.types import arrow_schema_for_spark
from ..txn.commit import commit
from ..txn.log import Snapshot
from ..txn.operations import Merge, Transaction


def next_field_id(snapshot: Snapshot) -> int:
    """1 + the highest field id in the schema or in any data file (ids of
    dropped columns whose data is still on disk stay reserved, as in pylance)."""
    top = snapshot.schema.max_id()
    for frag in snapshot.fragments:
        for df in frag.files:
            if len(df.fields):
                top = max(top, max(df.fields))
    return top + 1


def schema_with_new_fields(snapshot: Snapshot, new_fields: list[T.StructField]) -> Schema:
    """The snapshot's schema plus nullable new top-level fields with fresh ids."""
    for f in new_fields:
        if snapshot.schema.has(f.name):
            raise SchemaMismatchError(f"column {f.name!r} already exists")
        if is_reserved_name(f.name):
            raise SchemaMismatchError(f"column name {f.name!r} is reserved for Lance metadata")
    arrow = arrow_schema_for_spark(T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in new_fields]))
    schema = snapshot.schema.copy()
    for af in arrow:
        schema.fields.append(field_from_arrow(af))
    schema.assign_ids(next_field_id(snapshot))
    return schema


def add_null_columns(snapshot: Snapshot, new_fields: list[T.StructField], properties=None):
    """Commit a schema-only Merge adding all-null columns (no data written:
    a column no data file holds reads as null), as pylance's schema-only
    add_columns does. Returns the commit result."""
    schema = schema_with_new_fields(snapshot, new_fields)
    op = Merge(list(snapshot.fragments), schema)
    return commit(snapshot.store, Transaction(snapshot.version, op, properties=dict(properties or {})))
