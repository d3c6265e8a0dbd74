"""Column operations that change only the schema: ``dropColumns`` and
``renameColumn`` (``Project`` transactions: field ids stay, no data is written;
dropped columns' data stays on disk until compaction rewrites the fragment and
vacuum removes unreferenced files), plus schema helpers shared with the
data-evolution operations (new field ids)."""
from __future__ import annotations

from typing import Callable

from pyspark.sql import types as T

from ..errors import InvalidArgumentError, SchemaMismatchError
from ..format.scan import is_reserved_name
from ..format.schema import Schema, field_from_arrow
from ..spark.types import arrow_schema_for_spark
from ..txn.log import Snapshot
from ..txn.operations import Project
from ..txn.pipeline import StagedCommit


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


# ------------------------------------------------------ drop / rename (Project)
def _split_path(path: str) -> list[str]:
    parts = path.split(".")
    if not all(parts):
        raise InvalidArgumentError(f"invalid column path {path!r}")
    return parts


def _find(schema: Schema, path: str):
    """(parent children list, index) of the field at a dotted path."""
    siblings = schema.fields
    parts = _split_path(path)
    for depth, name in enumerate(parts):
        for i, f in enumerate(siblings):
            if f.name == name:
                if depth == len(parts) - 1:
                    return siblings, i
                if f.logical_type != "struct":
                    raise SchemaMismatchError(f"{'.'.join(parts[:depth + 1])!r} is not a struct")
                siblings = f.children
                break
        else:
            raise SchemaMismatchError(f"no column {path!r}")
    raise SchemaMismatchError(f"no column {path!r}")


def drop_columns_schema(snapshot: Snapshot, columns: list[str]) -> Schema:
    if isinstance(columns, str):
        columns = [columns]
    if not columns:
        raise InvalidArgumentError("dropColumns needs at least one column")
    schema = snapshot.schema.copy()
    for c in columns:
        siblings, i = _find(schema, c)
        if siblings is not schema.fields and len(siblings) == 1:
            raise SchemaMismatchError(f"cannot drop {c!r}: it is the only field of its struct (drop the struct)")
        del siblings[i]
    if not schema.fields:
        raise SchemaMismatchError("cannot drop every column of a table")
    return schema


def rename_column_schema(snapshot: Snapshot, old: str, new: str) -> Schema:
    if not new or "." in new:
        raise InvalidArgumentError(f"invalid new column name {new!r} (a plain name, without dots)")
    if is_reserved_name(new):
        raise SchemaMismatchError(f"column name {new!r} is reserved for Lance metadata")
    schema = snapshot.schema.copy()
    siblings, i = _find(schema, old)
    if any(f.name == new for f in siblings):
        raise SchemaMismatchError(f"cannot rename {old!r} to {new!r}: a column with that name exists")
    siblings[i].name = new  # the field id stays: data files keep serving it
    return schema


def project(snapshot: Snapshot, schema_of: Callable[[Snapshot], Schema], params: dict):
    """``prepare(snapshot) -> StagedCommit`` of a metadata-only ``Project``
    (schema change, no data written); the new schema is validated here."""
    schema_of(snapshot)

    def prepare(snap: Snapshot) -> StagedCommit:
        return StagedCommit(Project(schema_of(snap)), {}, params)

    return prepare
