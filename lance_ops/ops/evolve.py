"""Data evolution: add or recompute columns without rewriting the table.

``addColumns`` writes, per fragment, one data file holding only the new
columns and commits a ``Merge`` (complete fragment list + new schema), as
pylance's ``add_columns`` does; every row of a fragment that got a file has
``_row_last_updated_at_version`` = the new version. Three sources of values:

* ``{"z": "x * 2"}`` -- Spark SQL expressions over existing columns;
* ``fn, readColumns=[...], outputSchema="z long"`` -- an Arrow batch function
  run on executors over just the read columns;
* ``df, on="id" | "_rowid" | "_rowaddr"`` -- columns computed elsewhere in
  Spark, joined by key (unmatched rows get nulls; a key matching a row twice is
  an error).

``rewriteColumns({"y": "y * 2"}, condition)`` writes, per fragment with a
changed row, a data file holding just those columns (rows the condition does
not match keep their old values), tombstones the replaced field ids in the old
files with -2, and commits an ``Update`` in REWRITE_COLUMNS mode -- what
pylance's ``merge_insert(...).write_mode("rewrite_columns")`` commits -- so row
ids and addresses stay, and only changed rows get the new last-updated version.
"""
from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import pyarrow as pa
from pyroaring import BitMap
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ArrowEvalFallback, InvalidArgumentError, LanceOpsError, SchemaMismatchError
from ..format import rowids
from ..format.messages import copy_message
from ..format.scan import METADATA_COLUMNS, ROW_ADDR, ROW_ID
from ..format.schema import Field
from ..spark.arrowtasks import (
    arrow_column_transform,
    arrow_rewrite_transform,
    arrow_values,
    log_evaluation,
    one_wave,
)
from ..spark.columnfiles import (
    CHANGED,
    ColumnFileContext,
    aligned_column_files,
    function_column_files,
    grouped_column_files,
    parse_results,
)
from ..spark.constraints import specs_for, with_checks
from ..spark.errors import executor_errors
from ..spark.fanout import run_pair_tasks
from ..spark.frames import (
    as_column,
    check_condition,
    checked_columns,
    describe,
    fragment_groups,
    keeps_scan_partitions,
    referenced_columns,
    rows_per_partition,
    scan_frame,
    total_cores,
)
from ..spark.journal import journaled
from ..spark.rowchanges import RESULT_SCHEMA
from ..spark.types import spark_arrow_schema, spark_schema
from ..txn.log import Snapshot
from ..txn.operations import REWRITE_COLUMNS, Merge, Update
from ..txn.pipeline import StagedCommit
from .columns import schema_with_new_fields
from .common import guarded
from .dml import analysis_frame, fragments_matching, has_index_on
from .update import analyzed_assignments, assignment_columns, check_assignments

FRAGMENT_KEY = "_fragment"
log = logging.getLogger("lance_ops")


# ---------------------------------------------------------------- addColumns
def add_columns(spark, snapshot: Snapshot, source, *, read_columns=None, output_schema=None, on=None):
    """``prepare(snapshot) -> StagedCommit`` of addColumns; names are checked
    and SQL analyzed here, before any data is written."""
    snapshot.new_data_file_version("addColumns")
    if isinstance(source, dict):
        plan = _ExpressionColumns(source)
    elif isinstance(source, DataFrame):
        plan = _JoinedColumns(source, on)
    elif isinstance(source, (str, T.StructType)):
        plan = _NullColumns(spark, source)
    elif callable(source):
        plan = _UdfColumns(source, read_columns, output_schema)
    else:
        raise InvalidArgumentError(
            "addColumns takes a dict of SQL expressions, an Arrow batch function, a DataFrame, or a schema "
            "(StructType or DDL string) of null-filled columns"
        )
    new_fields = plan.new_fields(spark, snapshot)
    params = {"columns": ", ".join(f.name for f in new_fields), "source": plan.describe()}

    def prepare(snap: Snapshot) -> StagedCommit:
        schema = schema_with_new_fields(snap, new_fields)
        added = [f for f in schema.fields if f.name in {n.name for n in new_fields}]
        ctx = ColumnFileContext(
            store=snap.store, schema=snap.schema, fields=added, file_version=snap.data_format_version,
            fragments={f.id: f.SerializeToString() for f in snap.fragments},
            unique_rows=isinstance(plan, _JoinedColumns),
        )
        results = plan.run(spark, snap, ctx)
        missing = sorted({f.id for f in snap.fragments} - set(results))
        if missing:
            raise LanceOpsError(f"addColumns produced no column file for fragment(s) {missing}")
        fragments = []
        for frag in snap.fragments:
            new = copy_message(frag)
            new.files.append(results[frag.id][0])
            fragments.append(new)
        op = Merge(fragments, schema)
        files = [results[f.id][0] for f in snap.fragments]
        metrics = {
            "numAddedColumns": len(added),
            "numAddedFiles": len(files),
            "numUpdatedFragments": len(files),
            "bytesWritten": sum(df.file_size_bytes for df in files),
        }
        if getattr(plan, "evaluation", None):
            metrics["evaluation"] = plan.evaluation
            log_evaluation("addColumns", snap, plan.evaluation)
        return StagedCommit(op, metrics, params)

    return prepare


def _check_new_names(snapshot: Snapshot, names: list[str]) -> None:
    if not names:
        raise InvalidArgumentError("addColumns needs at least one new column")
    seen = set()
    for n in names:
        if n in METADATA_COLUMNS or n.startswith("_row"):
            raise SchemaMismatchError(f"column name {n!r} is reserved for Lance metadata")
        if snapshot.schema.has(n):
            raise SchemaMismatchError(f"column {n!r} already exists")
        if n in seen:
            raise SchemaMismatchError(f"column {n!r} is given twice")
        seen.add(n)


def _as_nullable(fields: list[T.StructField]) -> list[T.StructField]:
    # New columns are nullable: deleted rows of existing fragments hold nulls.
    return [T.StructField(f.name, f.dataType, True, f.metadata) for f in fields]


class _ExpressionColumns:
    def __init__(self, exprs: dict):
        if not exprs:
            raise InvalidArgumentError("addColumns needs at least one new column")
        self.exprs = exprs

    def describe(self) -> str:
        return ", ".join(f"{k} = {describe(v)}" for k, v in self.exprs.items())

    def new_fields(self, spark, snap: Snapshot) -> list[T.StructField]:
        _check_new_names(snap, list(self.exprs))
        frame = analysis_frame(spark, snap).select(*[as_column(v).alias(k) for k, v in self.exprs.items()])
        self.new_fields_cache = _as_nullable(frame.schema.fields)
        return self.new_fields_cache

    def run(self, spark, snap: Snapshot, ctx: ColumnFileContext):
        columns = [as_column(v).alias(k) for k, v in self.exprs.items()]
        av = arrow_values(spark, snap, analysis_frame(spark, snap).select(*columns), False, list(self.exprs))
        if av is not None:
            # Arrow evaluates the expressions in the tasks that write the
            # column files: the rows never go through the JVM.
            try:
                arrow_in = spark_arrow_schema(spark_schema(snap.schema, av.columns, av.metadata))
                target = spark_arrow_schema(T.StructType(self.new_fields_cache))
                ctx.transform = arrow_column_transform(av, target)
                task = function_column_files(ctx, arrow_in.names, av.columns, av.metadata, arrow_in,
                                             snap.stable_row_ids)
                groups = _fragment_wave(spark, snap.fragments)
                results = parse_results(run_pair_tasks(spark, groups, task))
                self.evaluation = "arrow"
                return results
            except ArrowEvalFallback as e:
                log.info("addColumns %s v%s: %s; evaluating on Spark", snap.store.root, snap.version, e)
                ctx.transform = None
        self.evaluation = "spark"
        refs = referenced_columns(analysis_frame(spark, snap), list(self.exprs.values()))
        data_cols = [c for c in refs if c in snap.schema.names]
        meta = [ROW_ADDR] + [c for c in refs if c not in data_cols and c != ROW_ADDR]
        frame = scan_frame(spark, snap, data_cols, meta, split_fragments=False)
        out = frame.select(ROW_ADDR, *[as_column(v).alias(k) for k, v in self.exprs.items()])
        return _column_files(spark, out, ctx)


class _NullColumns(_ExpressionColumns):
    """Typed columns that start null (``ALTER TABLE ... ADD COLUMNS (c int
    COMMENT '...')``): a StructType or a DDL string parsed by Spark; field
    metadata (Spark keeps a COMMENT as ``{"comment": ...}``) goes into the
    Lance schema. Written like any expression column: one file per fragment."""

    def __init__(self, spark, schema):
        if isinstance(schema, str):
            if not schema.strip():
                raise InvalidArgumentError("addColumns needs at least one new column")
            schema = spark.createDataFrame([], schema).schema  # Spark's DDL parser (and its errors)
        self.schema = schema
        super().__init__({
            f.name: F.lit(None).cast(f.dataType).alias(f.name, metadata=f.metadata or {}) for f in schema.fields
        })

    def describe(self) -> str:
        return "null: " + ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in self.schema.fields)


class _UdfColumns:
    def __init__(self, fn: Callable, read_columns, output_schema):
        if not read_columns:
            raise InvalidArgumentError("addColumns(fn, ...) needs readColumns=[...]")
        if output_schema is None:
            raise InvalidArgumentError('addColumns(fn, ...) needs outputSchema, e.g. "z long, w string"')
        self.fn = fn
        self.read_columns = list(read_columns)
        self.output_schema = output_schema

    def describe(self) -> str:
        return f"{getattr(self.fn, '__name__', 'fn')}({', '.join(self.read_columns)})"

    def new_fields(self, spark, snap: Snapshot) -> list[T.StructField]:
        for c in self.read_columns:
            if not snap.schema.has(c) and c not in METADATA_COLUMNS:
                raise SchemaMismatchError(f"readColumns: unknown column {c!r}")
        schema = output_struct(self.output_schema)
        _check_new_names(snap, schema.fieldNames())
        self.spark_schema = T.StructType(_as_nullable(schema.fields))
        return self.spark_schema.fields

    def run(self, spark, snap: Snapshot, ctx: ColumnFileContext):
        # No Spark SQL to evaluate: each executor task reads its fragments' input
        # columns straight from their files, calls the function and writes the
        # column files (the rows never go through the JVM).
        data_cols = [c for c in self.read_columns if snap.schema.has(c)]
        meta = [ROW_ADDR] + [c for c in self.read_columns if c in METADATA_COLUMNS and c != ROW_ADDR]
        arrow_in = spark_arrow_schema(spark_schema(snap.schema, data_cols, meta))
        ctx.transform = _checked_udf(self.fn, spark_arrow_schema(self.spark_schema))
        task = function_column_files(ctx, self.read_columns, data_cols, meta, arrow_in, snap.stable_row_ids)
        groups = fragment_groups(snap.fragments, rows_per_partition(spark, snap.num_rows()))
        return parse_results(run_pair_tasks(spark, groups, task))


def output_struct(schema) -> T.StructType:
    """``outputSchema`` of a function column (a DDL string, a StructType or a
    pyarrow schema) as a StructType."""
    if isinstance(schema, str):
        schema = T._parse_datatype_string(schema)
    if isinstance(schema, pa.Schema):
        from pyspark.sql.pandas.types import from_arrow_schema

        schema = from_arrow_schema(schema)
    if not isinstance(schema, T.StructType):
        raise InvalidArgumentError("outputSchema must be a DDL string, a StructType or a pyarrow schema")
    return schema


def _checked_udf(fn: Callable, target: pa.Schema) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """``fn`` with its output checked (a RecordBatch of as many rows, with the
    declared columns) and cast to the declared types."""

    def apply(inputs: pa.RecordBatch) -> pa.RecordBatch:
        result = fn(inputs)
        if isinstance(result, pa.Table):
            result = result.combine_chunks().to_batches()[0] if result.num_rows else pa.RecordBatch.from_pylist([], schema=target)
        if not isinstance(result, pa.RecordBatch):
            raise SchemaMismatchError(f"the addColumns function must return a pyarrow RecordBatch, got {type(result).__name__}")
        if result.num_rows != inputs.num_rows:
            raise SchemaMismatchError(f"the addColumns function returned {result.num_rows} rows for {inputs.num_rows}")
        missing = [f.name for f in target if f.name not in result.schema.names]
        if missing:
            raise SchemaMismatchError(f"the addColumns function did not return column(s) {missing}")
        cols = []
        for f in target:
            col = result.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        return pa.RecordBatch.from_arrays(cols, schema=target)

    return apply


class _JoinedColumns:
    def __init__(self, df: DataFrame, on):
        if not on or not isinstance(on, str):
            raise InvalidArgumentError('addColumns(df, on=...) needs the key column name (or "_rowid" / "_rowaddr")')
        if on not in df.columns:
            raise SchemaMismatchError(f"the DataFrame has no key column {on!r}")
        self.df, self.on = df, on

    def describe(self) -> str:
        return f"DataFrame joined on {self.on}"

    def new_fields(self, spark, snap: Snapshot) -> list[T.StructField]:
        if self.on not in METADATA_COLUMNS and not snap.schema.has(self.on):
            raise SchemaMismatchError(f"the table has no key column {self.on!r}")
        if self.on == ROW_ID and not snap.stable_row_ids:
            raise SchemaMismatchError("on='_rowid' needs a table with stable row ids (use '_rowaddr')")
        fields = [f for f in self.df.schema.fields if f.name != self.on]
        _check_new_names(snap, [f.name for f in fields])
        return _as_nullable(fields)

    def run(self, spark, snap: Snapshot, ctx: ColumnFileContext):
        key = self.on
        cols = [key] if key in snap.schema.names else []
        meta = [ROW_ADDR] + ([key] if key in METADATA_COLUMNS and key != ROW_ADDR else [])
        target = scan_frame(spark, snap, cols, meta)
        values = self.df.select(F.col(key).alias("__lance_key"), *[F.col(f"`{f.name}`") for f in ctx.fields])
        joined = target.join(values, target[key] == values["__lance_key"], "left_outer")
        out = joined.select(ROW_ADDR, *[f.name for f in ctx.fields])
        return _grouped_column_files(spark, out, ctx)


def _column_files(spark, rows: DataFrame, ctx: ColumnFileContext) -> dict:
    """Column files from (``_rowaddr``, values...) rows: in the scan's own tasks
    when the plan keeps scan partitions (one stage), else regrouped by fragment.
    Jobs that enforce constraints journal their files (removed on failure)."""
    with journaled(ctx.store, bool(ctx.checks)) as token:
        ctx.journal = token
        if keeps_scan_partitions(rows):
            return _collect(rows.mapInArrow(aligned_column_files(ctx), RESULT_SCHEMA))
        return _grouped_column_files(spark, rows, ctx)


def _grouped_column_files(spark, rows: DataFrame, ctx: ColumnFileContext) -> dict:
    tasks = max(1, total_cores(spark) * 2)
    keyed = rows.withColumn(FRAGMENT_KEY, F.shiftright(F.col(ROW_ADDR), 32)).repartition(tasks, FRAGMENT_KEY)
    return _collect(keyed.groupBy(FRAGMENT_KEY).applyInArrow(grouped_column_files(ctx), RESULT_SCHEMA))


def _collect(df: DataFrame) -> dict:
    with executor_errors():
        rows = df.collect()
    return parse_results([(r[0], bytes(r[1])) for r in rows])


# ------------------------------------------------------------ rewriteColumns
def rewrite_columns(spark, snapshot: Snapshot, exprs: dict, condition):
    """``prepare(snapshot) -> StagedCommit`` of rewriteColumns; bad SQL
    raises Spark's own error here, before any work."""
    snapshot.new_data_file_version("rewriteColumns")
    check_assignments(snapshot, exprs)
    frame = analysis_frame(spark, snapshot)  # bad SQL fails here, before any work
    check_condition(frame, condition)
    frame.select(*assignment_columns(snapshot, exprs))
    params = {"columns": ", ".join(f"{c} = {describe(v)}" for c, v in exprs.items()), "predicate": describe(condition)}

    def prepare(snap: Snapshot) -> StagedCommit:
        fields = [snap.schema.field(c) for c in exprs]
        specs = specs_for(snap)
        ctx = ColumnFileContext(
            store=snap.store, schema=snap.schema, fields=fields, file_version=snap.data_format_version,
            fragments={f.id: f.SerializeToString() for f in snap.fragments},
            fill="old", has_changed_flag=condition is not None, checks=specs,
        )
        arrow = analyzed_assignments(spark, snap, condition, exprs, specs)
        if arrow is not None:
            try:
                results, kept = _arrow_rewrite(spark, snap, ctx, arrow, list(exprs))
                log_evaluation("rewriteColumns", snap, "arrow")
                live = [f for f in snap.fragments if f.physical_rows]
                # (data skipping chose whole fragments, read once: no separate pre-pass)
                scanned = {"numFragmentsScanned": len(kept), "numFragmentsSkipped": len(live) - len(kept),
                           "numRowsScanned": 0}
                return _rewrite_staged(snap, fields, results, params, scanned, kept, "arrow")
            except ArrowEvalFallback as e:
                log.info("rewriteColumns %s v%s: %s; evaluating on Spark", snap.store.root, snap.version, e)
                ctx.transform, ctx.journal = None, None
        log_evaluation("rewriteColumns", snap, "spark")
        used = list(exprs.values()) + ([condition] if condition is not None else [])
        refs = referenced_columns(analysis_frame(spark, snap), used)
        checked = checked_columns(spark, snap, specs)
        data_cols = [c for c in snap.schema.names if c in refs or c in exprs or c in checked]
        meta = [ROW_ADDR] + [c for c in refs if c in METADATA_COLUMNS and c != ROW_ADDR]
        scanned, frag_ids = None, None
        if condition is not None and has_index_on(snap, refs):
            # data skipping: find the fragments the condition matches (reading
            # only the zones it may match), then rewrite only those
            cond_refs = referenced_columns(analysis_frame(spark, snap), [condition])
            cond_meta = [ROW_ADDR] + [c for c in cond_refs if c in METADATA_COLUMNS and c != ROW_ADDR]
            frag_ids, scanned = fragments_matching(
                spark, snap, condition, [c for c in cond_refs if c in snap.schema.names], cond_meta)
        scan = scan_frame(spark, snap, data_cols, meta, split_fragments=False, fragment_ids=frag_ids)
        values = assignment_columns(snap, exprs)
        if condition is not None:
            values = [F.when(as_column(condition), v).otherwise(F.col(f"`{c}`")).alias(c) for c, v in zip(exprs, values)]
            scan = scan.withColumn(CHANGED, F.coalesce(as_column(condition), F.lit(False)))
        rows = with_checks(scan.withColumns(dict(zip(exprs, values))), specs)
        extra = [CHANGED] if condition is not None else []
        out = rows.select(ROW_ADDR, *[F.col(f"`{c}`") for c in exprs], *extra, *[s.column for s in specs])
        results = _column_files(spark, out, ctx)
        return _rewrite_staged(snap, fields, results, params, scanned, frag_ids, "spark")

    return prepare


def _rewrite_staged(snap: Snapshot, fields, results: dict, params: dict, scanned, frag_ids, evaluation: str):
    op = _rewrite_op(snap, fields, results)
    files = [df for df, _ in results.values() if df is not None]
    metrics = {
        "numUpdatedRows": sum(len(bm) for df, bm in results.values() if df is not None),
        "numUpdatedFragments": len(op.updated_fragments),
        "numAddedFiles": len(files),
        "bytesWritten": sum(df.file_size_bytes for df in files),
        **_rewrite_scan_metrics(snap, scanned, frag_ids),
        "evaluation": evaluation,
    }
    return guarded(StagedCommit(op, metrics, params), snap)


def _arrow_rewrite(spark, snap: Snapshot, ctx: ColumnFileContext, arrow, assigned: list[str]) -> tuple[dict, list]:
    """One stage (returns its results and the fragment ids it read): each
    task reads the referenced and assigned columns of its fragments, computes the new values with Arrow (old ones where the
    condition is not true) and writes the column files -- the same writer
    as the Spark path."""
    wanted = set(arrow.columns) | set(assigned)
    data = [c for c in snap.schema.names if c in wanted]
    arrow_in = spark_arrow_schema(spark_schema(snap.schema, data, arrow.metadata))
    target = spark_arrow_schema(spark_schema(snap.schema, assigned, ()))
    ctx.transform = arrow_rewrite_transform(arrow, target, CHANGED)
    kept = [f for f in snap.fragments if arrow.ranges.get(f.id) and f.physical_rows]  # (whole fragments only)
    groups = _fragment_wave(spark, kept)
    with journaled(ctx.store) as token:
        ctx.journal = token
        task = function_column_files(ctx, arrow_in.names, data, arrow.metadata, arrow_in, snap.stable_row_ids)
        return parse_results(run_pair_tasks(spark, groups, task)), [f.id for f in kept]


def _fragment_wave(spark, fragments) -> list[list[bytes]]:
    """Serialized ``fragments`` in one wave of Arrow tasks, balanced by
    physical rows (:func:`one_wave`)."""
    return one_wave(spark, [f.SerializeToString() for f in fragments], [f.physical_rows for f in fragments])


def _rewrite_scan_metrics(snap: Snapshot, scanned: dict | None, frag_ids) -> dict:
    """numFragmentsScanned/Skipped, numRowsScanned of a rewriteColumns: without
    data skipping every fragment is read whole; with it, the skipping scan
    that found the matching fragments plus those fragments read whole."""
    frags = [f for f in snap.fragments if f.physical_rows]
    if scanned is None:
        return {"numFragmentsScanned": len(frags), "numFragmentsSkipped": 0,
                "numRowsScanned": sum(f.physical_rows for f in frags)}
    wanted = set(frag_ids)
    return dict(scanned, numRowsScanned=scanned["numRowsScanned"]
                + sum(f.physical_rows for f in frags if f.id in wanted))


def _rewrite_op(snap: Snapshot, fields: list[Field], results: dict) -> Update:
    """REWRITE_COLUMNS Update: replaced field ids -> -2 in the old files, the new
    file added, last-updated = new version at the changed offsets."""
    replaced = {f.id for top in fields for f in top.walk()}
    version = snap.version + 1
    updated, offsets = [], {}
    for frag in snap.fragments:
        df, changed = results.get(frag.id, (None, BitMap()))
        if df is None:
            continue
        new = copy_message(frag)
        for old in new.files:
            patched = [-2 if x in replaced else x for x in old.fields]
            if patched != list(old.fields):
                old.ClearField("fields")
                old.fields.extend(patched)
        new.files.append(df)
        if snap.stable_row_ids:
            seq = rowids.decode_versions(rowids.sequence_bytes(snap.store, frag, rowids.UPDATED), frag.physical_rows)
            if len(changed):
                seq[np.frombuffer(changed.to_array(), dtype=np.uint32).astype(np.int64)] = version
            new.inline_last_updated_at_versions = rowids.encode_versions(seq)  # (replaces an external one)
        updated.append(new)
        offsets[frag.id] = changed.serialize()
    return Update(
        updated_fragments=updated,
        fields_modified=sorted(replaced),
        update_mode=REWRITE_COLUMNS,
        updated_fragment_offsets=offsets,
    )

