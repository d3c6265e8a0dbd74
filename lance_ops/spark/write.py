"""Writing Spark data as Lance fragments: plan (driver), task (executor), commit.

* :func:`plan_write` (driver) decides the target Lance schema -- the table's
  own schema when appending (the incoming Spark schema must match it by name
  and type), or a new schema from the DataFrame when creating / overwriting
  with a different schema -- and everything an executor needs, in a small
  picklable :class:`WritePlan`.
* :func:`write_task` (executor) streams a partition's Arrow batches into data
  files and returns the serialized fragments (metadata only).
* :func:`staged_write` (driver) stages one Append or Overwrite transaction for
  the commit pipeline (:mod:`lance_ops.txn.pipeline`).

Used by ``LanceTable.create/append/overwrite`` (through ``mapInArrow``) and by
the ``lance`` data source's writer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import types as T

from ..errors import InvalidArgumentError, SchemaMismatchError, TableExistsError
from ..format.naming import (
    DATA_DIR,
    DELETIONS_DIR,
    INDICES_DIR,
    STAGING_DIR,
    TRANSACTIONS_DIR,
    TREE_DIR,
    VERSIONS_DIR,
)
from ..format.proto import table_pb2
from ..format.schema import Schema
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT, write_fragments
from ..storage.objectstore import ObjectStore
from ..txn.commit import CheckContext, NewTable
from ..txn.log import Snapshot
from ..txn.operations import Append, Overwrite
from ..txn.pipeline import StagedCommit
from .errors import executor_task
from .types import comparable, lance_schema_for_spark, spark_schema

MODES = ("create", "append", "overwrite")
#: Output schema of write tasks run through mapInArrow.
FRAGMENT_COLUMN = "fragment"
FRAGMENTS_SCHEMA = T.StructType([T.StructField(FRAGMENT_COLUMN, T.BinaryType(), False)])


@dataclass
class WritePlan:
    store: ObjectStore
    mode: str
    schema: Schema  # target Lance schema
    read_version: int  # 0 when the table does not exist yet
    exists: bool
    file_version: str
    max_rows_per_fragment: int
    stable_row_ids: bool
    #: Columns of the incoming data, in order (names only).
    input_columns: list[str]
    #: Table CHECK constraints the task enforces (their check columns are in
    #: the incoming rows: :mod:`.constraints`).
    checks: list = field(default_factory=list)
    #: Nullable table columns the data leaves out (``allowMissingColumns``):
    #: the new fragments have no data file for them (they read as NULL).
    missing: list[str] = field(default_factory=list)
    #: Journal token (:mod:`.journal`): finished tasks record their files.
    journal: str | None = None
    #: The constraints as Arrow-evaluable trees (check column -> tree), when
    #: every one is in the subset proven equal to Spark (:mod:`lance_ops.arrow_eval`):
    #: the tasks evaluate them on the batches; None: Spark computes the check
    #: columns in the projection feeding the tasks.
    arrow_checks: dict | None = None
    #: Arrow types of the columns an append leaves out (NULL for the checks).
    missing_types: dict | None = None


def plan_write(
    store: ObjectStore,
    incoming: T.StructType,
    mode: str,
    *,
    snapshot: Snapshot | None = None,
    stable_row_ids: bool = True,
    max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
    data_format: str | None = None,
    allow_missing: bool = False,
) -> WritePlan:
    """The write's target schema and what executors need; ``snapshot`` is the
    table's current version (None: no table at ``store`` yet)."""
    if mode not in MODES:
        raise InvalidArgumentError(f"write mode must be one of {MODES}, got {mode!r}")
    if max_rows_per_fragment <= 0:
        raise InvalidArgumentError("maxRowsPerFragment must be positive")
    if snapshot is not None and mode == "create":
        raise TableExistsError(f"a Lance table already exists at {store.root} (version {snapshot.version})")
    if snapshot is None and mode == "append":
        mode = "create"  # appending to a missing table creates it (as Delta does)
    if snapshot is None:
        refuse_foreign_directory(store)
        schema = lance_schema_for_spark(incoming)
        return WritePlan(
            store, mode, schema, 0, False, data_format or "2.2", max_rows_per_fragment, stable_row_ids,
            incoming.fieldNames(),
        )
    from ..format.features import check_writable

    check_writable(snapshot.manifest, f"at {store.root}")
    snapshot.new_data_file_version(mode)
    table_spark = spark_schema(snapshot.schema)
    missing: list[str] = []
    if mode == "append":
        missing = check_append_schema(table_spark, incoming, allow_missing)
        schema = snapshot.schema
        if missing:
            schema = schema.project([n for n in schema.names if n not in missing])
    elif _same_columns(table_spark, incoming):
        schema = snapshot.schema  # keep stored types (uint, large_string ...) and ids
    else:
        schema = lance_schema_for_spark(incoming)
    return WritePlan(
        store, mode, schema, snapshot.version, True, snapshot.data_format_version,
        max_rows_per_fragment, snapshot.stable_row_ids, incoming.fieldNames(), missing=missing,
    )


#: What a Lance table's directory may hold before its first version: its own
#: layout (pylance's and ours), e.g. the leftovers of a failed create.
LANCE_LAYOUT = {VERSIONS_DIR, DATA_DIR, TRANSACTIONS_DIR, DELETIONS_DIR, INDICES_DIR, STAGING_DIR, TREE_DIR, "_refs",
                "_latest.manifest",
                ".lance-reserved"}  # a namespace's marker of a declared table (namespace/directory.py)


def refuse_foreign_directory(store: ObjectStore) -> None:
    """A table is created only where nothing else lives: a non-empty
    directory that is not a Lance table (a Parquet or Delta table, someone's
    files) is refused -- as Delta refuses to create a table in a non-empty,
    non-Delta location -- before anything is written."""
    base = store.path("").rstrip("/")
    try:
        if store.fs.isfile(base):
            foreign = [base.rsplit("/", 1)[-1] + " (a file)"]
        else:
            names = {str(e).rstrip("/").rsplit("/", 1)[-1] for e in store.fs.ls(base, detail=False)}
            foreign = sorted(n for n in names if n and n not in LANCE_LAYOUT)
    except (FileNotFoundError, NotADirectoryError):
        return
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise TableExistsError(
            f"cannot create a Lance table at {store.root}: the directory is not empty and is not a Lance table "
            f"(it holds {shown}). Write to an empty location, or remove what is there first."
        )


def _same_columns(table: T.StructType, incoming: T.StructType) -> bool:
    return [(f.name, comparable(f.dataType)) for f in table.fields] == [
        (f.name, comparable(f.dataType)) for f in incoming.fields
    ]


def check_append_schema(table: T.StructType, incoming: T.StructType, allow_missing: bool = False) -> list[str]:
    """Appended data must have the table's columns (any order) with the same
    Spark types; nothing extra, nothing missing -- unless ``allow_missing``,
    when nullable columns may be left out. Returns the columns left out."""
    t = {f.name: f for f in table.fields}
    i = {f.name: f for f in incoming.fields}
    missing = [n for n in t if n not in i]
    left_out = []
    if allow_missing:
        left_out = [n for n in missing if t[n].nullable]
        missing = [n for n in missing if not t[n].nullable]
    extra = [n for n in i if n not in t]
    wrong = [
        f"{n}: table {t[n].dataType.simpleString()}, data {i[n].dataType.simpleString()}"
        for n in t
        if n in i and comparable(t[n].dataType) != comparable(i[n].dataType)
    ]
    if missing or extra or wrong:
        parts = []
        if missing:
            parts.append(f"missing {'non-nullable ' if allow_missing else ''}column(s) {missing}")
        if extra:
            parts.append(f"unknown column(s) {extra}")
        if wrong:
            parts.append("type mismatch: " + "; ".join(wrong))
        hint = "" if allow_missing or not missing else " (allowMissingColumns=True leaves out nullable columns)"
        raise SchemaMismatchError("cannot append: " + ", ".join(parts) + hint)
    return left_out


def write_task(plan: WritePlan, batches: Iterable[pa.RecordBatch]) -> Iterator[bytes]:
    """Executor side: write the batches as fragments (each batch checked
    against the table's constraints first), yield them serialized."""
    if plan.checks:
        batches = _arrow_checked(batches, plan) if plan.arrow_checks else _checked(batches, plan.checks)
    for frag in write_fragments(
        plan.store, plan.schema, batches, plan.file_version, plan.max_rows_per_fragment
    ):
        yield frag.SerializeToString()


def _checked(batches, checks):
    from .constraints import enforce

    for b in batches:
        enforce(b, checks)
        yield b


def _arrow_checked(batches, plan: WritePlan):
    """The constraints evaluated with Arrow on each batch (the rows as
    written; columns an append left out are NULL), then :func:`enforce`: the
    same error as the Spark-evaluated check columns give. A row where Spark
    would raise (ANSI) raises ArrowEvalFallback: the write runs again with
    Spark computing the checks."""
    from ..arrow_eval.vector import evaluate, raise_on_error_rows
    from .constraints import enforce

    for b in batches:
        table = pa.Table.from_batches([b])
        for name, t in (plan.missing_types or {}).items():
            if name not in table.column_names:
                table = table.append_column(pa.field(name, t), pa.nulls(b.num_rows, t))
        checked = b
        for spec in plan.checks:
            values, errors = evaluate(plan.arrow_checks[spec.column], table)
            raise_on_error_rows(errors, f"CHECK constraint {spec.name}")
            checked = checked.append_column(spec.column, values)
        enforce(checked, plan.checks, row_columns=b.schema.names)
        yield b


def map_in_arrow_writer(plan: WritePlan):
    """A function for ``DataFrame.mapInArrow`` returning one row per fragment."""

    @executor_task
    def run(batches):
        out = []
        for b in write_task(plan, batches):
            if plan.journal:  # recorded as each file is done: a later failure in this task removes it too
                from .journal import record

                record(plan.store, plan.journal, [f"data/{df.path}" for df in table_pb2.DataFragment.FromString(b).files])
            out.append(b)
        if out:
            yield pa.RecordBatch.from_arrays([pa.array(out, type=pa.binary())], names=[FRAGMENT_COLUMN])

    return run


def staged_write(plan: WritePlan, fragments: list[bytes], properties: dict | None = None) -> StagedCommit:
    """One Append or Overwrite of the written fragments (an Overwrite /
    create also sets the table config ``properties``)."""
    frags = [table_pb2.DataFragment.FromString(b) for b in fragments]
    if plan.mode == "append":
        op = Append(frags)
    else:
        op = Overwrite(frags, plan.schema, config_upsert_values={str(k): str(v) for k, v in (properties or {}).items()})
    rows = sum(f.physical_rows for f in frags)
    files = sum(len(f.files) for f in frags)
    size = sum(df.file_size_bytes for f in frags for df in f.files)
    metrics = {
        # Delta's WRITE metrics, then lance_ops' (the API's) names
        "numFiles": files, "numOutputRows": rows, "numOutputBytes": size,
        "numInsertedRows": rows, "numAddedFragments": len(frags), "numAddedFiles": files, "bytesWritten": size,
    }
    # Neither depends on the version it read: after a retryable conflict the
    # same files are committed on the latest version (a create is not: a
    # table that appeared meanwhile is not ours, see must_not_exist).
    params = {"mode": SAVE_MODES.get(plan.mode, plan.mode), "partitionBy": "[]"}
    return StagedCommit(op, metrics, params, reusable=plan.exists)


#: Delta's ``mode`` parameter of a WRITE (Spark's SaveMode names)
SAVE_MODES = {"append": "Append", "overwrite": "Overwrite", "create": "ErrorIfExists"}


def new_table(plan: WritePlan) -> NewTable:
    return NewTable(stable_row_ids=plan.stable_row_ids, data_format=plan.file_version)


def must_not_exist(ctx: CheckContext) -> None:
    """Check for creating writes: a table that appeared concurrently is not
    ours to overwrite or append to."""
    if ctx.base is not None:
        raise TableExistsError(f"a table was created at {ctx.store.root} concurrently (version {ctx.base.version})")
