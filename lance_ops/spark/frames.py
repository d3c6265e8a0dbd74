"""DataFrames over a table version, and what Spark SQL expressions reference.

Internal jobs read a pinned version through the ``lance`` data source with only
the columns they need (:func:`scan_frame`); which columns that is comes from
Spark's own analysis of the user's expressions (:func:`referenced_columns`),
so a ``delete("x > 5")`` reads ``x`` and the row address, nothing else. The
analysis also surfaces bad SQL as Spark's AnalysisException / ParseException
before any data is touched.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..format.scan import METADATA_COLUMNS, ROW_ADDR, ROW_CREATED, ROW_ID, ROW_UPDATED
from ..txn.log import Snapshot
from . import jvm, plans
from .credentials import reader_options, reader_storage_options
from .datasource import DEFAULT_ROWS_PER_PARTITION, key_filter_option, register
from .types import spark_schema

#: Tasks per core a scan aims for (a few large tasks beat many small ones: each
#: Python task has a fixed cost).
TASKS_PER_CORE = 2


def total_cores(spark) -> int:
    """Task slots of the cluster (:func:`lance_ops.spark.jvm.total_cores`),
    asked once per session: the master and executor confs are fixed when a
    session starts, and reading them costs JVM round trips (a copy of the
    whole SparkConf) on every operation otherwise."""
    cached = getattr(spark, "_lance_ops_cores", None)
    if cached is not None:
        return cached
    cores = jvm.total_cores(spark)
    try:
        spark._lance_ops_cores = cores
    except Exception:
        pass
    return cores


def rows_per_partition(spark, live_rows: int) -> int:
    cores = total_cores(spark)
    if live_rows <= 0:
        return DEFAULT_ROWS_PER_PARTITION
    per = -(-live_rows // max(1, cores * TASKS_PER_CORE))
    return int(min(max(per, 64 * 1024), 4 * DEFAULT_ROWS_PER_PARTITION))


def group_by_rows(items, rows_of, rows_per_group: int) -> list[list]:
    """``items`` in order, in groups of about ``rows_per_group`` rows
    (``rows_of(item)`` each): the inputs of executor tasks."""
    groups: list[list] = []
    current: list = []
    rows = 0
    for item in items:
        current.append(item)
        rows += rows_of(item)
        if rows >= rows_per_group:
            groups.append(current)
            current, rows = [], 0
    if current:
        groups.append(current)
    return groups


def fragment_groups(fragments, rows_per_group: int) -> list[list[bytes]]:
    """Every fragment, serialized, in order, in groups of about
    ``rows_per_group`` physical rows: the inputs of executor tasks that work on
    whole fragments outside a scan."""
    return [[f.SerializeToString() for f in g]
            for g in group_by_rows(fragments, lambda f: f.physical_rows, rows_per_group)]


def as_column(e) -> Column:
    """A Spark SQL string or a Column as a Column."""
    if isinstance(e, Column):
        return e
    if isinstance(e, str):
        return F.expr(e)
    raise TypeError(f"expected a Spark SQL string or a Column, got {type(e).__name__}")


def select_exprs(frame: DataFrame, exprs: list) -> DataFrame:
    """``frame.select(exprs)`` (SQL strings or Columns): one ``selectExpr``
    when all are strings -- Spark parses them in one call, where each Column
    built from SQL costs round trips of its own (:mod:`.sqltext`)."""
    if all(isinstance(e, str) for e in exprs):
        return frame.selectExpr(*exprs)
    return frame.select(*[as_column(e) for e in exprs])


def describe(e) -> str:
    """Readable text of a condition / expression (for history())."""
    if e is None:
        return "true"
    if isinstance(e, str):
        return e
    return jvm.column_text(e)


#: Empty frames by (session, schema): operations analyze their SQL over an
#: empty frame of the table's schema several times per call; a DataFrame is
#: immutable, so one per schema serves them all (bounded: the least recently
#: made go first).
_EMPTY: dict = {}
_EMPTY_MAX = 64
_EMPTY_LOCK = threading.Lock()


def empty_frame(spark, schema: T.StructType) -> DataFrame:
    key = (id(spark), schema.json())
    with _EMPTY_LOCK:
        df = _EMPTY.get(key)
    if df is not None and df.sparkSession is spark:
        return df
    df = spark.createDataFrame([], schema)
    with _EMPTY_LOCK:
        _EMPTY[key] = df
        while len(_EMPTY) > _EMPTY_MAX:
            _EMPTY.pop(next(iter(_EMPTY)))
    return df


#: How the last plan inspection of this thread was decided: "jvm" (Catalyst's
#: plan objects, classic sessions), "explain" (EXPLAIN text, Connect) or
#: "none" (could not tell: the general path was taken). Operations report it
#: as ``planInspection`` in their metrics.
_inspection = threading.local()


def _record(how: str) -> None:
    seen = getattr(_inspection, "seen", None)
    if seen is not None:
        seen.add(how)


#: Public name for operations that reuse an earlier inspection's answer (a
#: merge analyzed when built) and must report how it was decided again.
record_inspection = _record


@contextlib.contextmanager
def recording_inspection():
    """Collect how the plan inspections inside the block were decided; yields
    a set ("jvm" / "explain" / "none")."""
    prev = getattr(_inspection, "seen", None)
    _inspection.seen = set()
    try:
        yield _inspection.seen
    finally:
        if prev is not None:
            prev |= _inspection.seen
        _inspection.seen = prev


def inspection_metric(seen: set) -> str | None:
    """The worst of the recorded ways ("none" > "explain" > "jvm")."""
    for how in ("none", "explain", "jvm"):
        if how in seen:
            return how
    return None


def referenced_columns(frame: DataFrame, exprs: Iterable) -> list[str]:
    """Top-level columns of ``frame`` that ``exprs`` reference (in frame order).

    Analyzes ``frame.select(*exprs)`` -- raising Spark's own error for bad SQL --
    and asks Catalyst for the attributes the projection references (classic
    sessions), or reads them from the analyzed plan's EXPLAIN text (Spark
    Connect). Falls back to every column where neither can tell.
    """
    cols = [as_column(e) for e in exprs]
    if not cols:
        return []
    projected = frame.select(*cols)
    if jvm.is_connect(frame.sparkSession):
        _ = projected.schema  # analysis errors surface here, as Spark's own
        try:
            found = plans.project_references(plans.explain_sections(projected).get("Analyzed Logical Plan", ""),
                                             frame.columns)
        except Exception:
            found = None
        if found is None:
            _record("none")
            return list(frame.columns)
        _record("explain")
        return [c for c in frame.columns if c in set(found)]
    try:
        refs = jvm.analyzed_references(projected)
    except Exception:
        refs = None
    if refs is None:
        _record("none")
        return list(frame.columns)
    _record("jvm")
    names = {n for _, n in refs}
    return [c for c in frame.columns if c in names]


def checked_columns(spark, snapshot: Snapshot, specs) -> list[str]:
    """Table columns the CHECK constraints ``specs``
    (:class:`lance_ops.spark.constraints.ConstraintSpec`) reference (all
    columns where Spark's plan cannot tell), so scans that feed a check read
    them."""
    if not specs:
        return []
    frame = empty_frame(spark, table_spark_schema(snapshot, METADATA_COLUMNS))
    refs = referenced_columns(frame, [s.expression for s in specs])
    return [c for c in refs if c in snapshot.schema.names]


def keeps_scan_partitions(df: DataFrame) -> bool:
    """True when ``df`` computes each output partition from one scan partition,
    rows in scan order -- no shuffle or sort on the way (broadcast joins are
    fine: the scan side streams through). Jobs that change a fragment in the
    task that scanned it depend on this; otherwise they must shuffle by
    fragment. Read from the executed plan (classic) or the EXPLAIN physical
    plan (Connect: the same text). Unknown: False (the general path)."""
    try:
        if jvm.is_connect(df.sparkSession):
            plan = plans.explain_sections(df).get("Physical Plan")
            how = "explain"
        else:
            # The executed plan: shuffles and sorts are added when preparing it.
            plan = jvm.executed_plan(df)
            how = "jvm"
    except Exception:
        plan = None
    if not plan:
        _record("none")
        return False
    _record(how)
    return plans.keeps_partitions(plan)


def check_condition(frame: DataFrame, condition) -> DataFrame | None:
    """Analyze ``condition`` as a filter over ``frame``: Spark raises its own
    error for bad SQL or a non-boolean condition, before any work is done.
    Returns the filtered frame (its analyzed plan holds the condition)."""
    if condition is None:
        return None
    filtered = frame.where(as_column(condition))
    if jvm.is_connect(frame.sparkSession):
        _ = filtered.schema  # (lazy in Connect until asked; classic analyzes in where)
    return filtered


def referenced_attributes(frame: DataFrame, exprs: Iterable) -> set[int] | None:
    """Expression ids of the attributes ``exprs`` reference when analyzed over
    ``frame`` (None where the JVM plan is not reachable, e.g. Spark Connect:
    expression ids of separately analyzed Connect plans do not line up).
    Raises Spark's own error for bad SQL."""
    cols = list(exprs)
    if not cols:
        return set()
    projected = select_exprs(frame, cols)
    try:
        refs = jvm.analyzed_references(projected)
    except Exception:
        refs = None
    if refs is None:
        _ = projected.schema
        _record("none")
        return None
    _record("jvm")
    return {i for i, _ in refs}


def referenced_alias_columns(frame: DataFrame, exprs: Iterable, alias: str, target: DataFrame) -> set[str] | None:
    """Columns of ``target`` (a frame aliased ``alias`` inside ``frame``)
    that ``exprs`` reference when analyzed over ``frame``: Catalyst's
    expression ids on a classic session; under Connect both come from one
    EXPLAIN text (ids of separately analyzed Connect plans do not line up).
    None: cannot tell (the caller reads every column)."""
    cols = list(exprs)
    if not cols:
        return set()
    if not jvm.is_connect(frame.sparkSession):
        ids = referenced_attributes(frame, cols)
        if ids is None:
            return None
        out = output_attributes(target)
        return {out[i] for i in ids if i in out}
    projected = select_exprs(frame, cols)
    _ = projected.schema
    try:
        analyzed = plans.explain_sections(projected).get("Analyzed Logical Plan", "")
        ids = plans.project_reference_ids(analyzed)
        out = plans.aliased_relation_output(analyzed, alias)
    except Exception:
        ids = out = None
    if ids is None or out is None:
        _record("none")
        return None
    _record("explain")
    return {out[i] for i in ids if i in out}


def output_attributes(frame: DataFrame) -> dict[int, str]:
    """exprId -> column name of a frame's output attributes ({} without a
    JVM plan)."""
    try:
        return jvm.analyzed_output(frame) or {}
    except Exception:
        return {}


def scan_frame(spark, snapshot: Snapshot, columns: list[str] | None, metadata=(ROW_ADDR,), split_fragments: bool = True,
               fragment_ids=None, skip_report: str | None = None, arrow_eval: str | None = None,
               key_filter=None) -> DataFrame:
    """The table at ``snapshot``'s version: ``columns`` (None = all) plus
    metadata columns, through the ``lance`` data source. With
    ``split_fragments=False`` each fragment is read whole by one task, in order
    (jobs that change fragments in the scan's own tasks rely on it).
    ``fragment_ids`` reads only those fragments. ``skip_report``: a file where
    the scan's planning writes what it reads after data skipping (see
    :func:`skip_report`). ``key_filter``: (column, filter bytes, ...) -- the
    scan's tasks return only rows whose ``column`` the bloom filter
    (:mod:`lance_ops.format.keyfilter`) may hold (a merge's target)."""
    register(spark)
    store = snapshot.store
    rows = snapshot.num_rows()
    if fragment_ids is not None:
        wanted = set(fragment_ids)
        rows = sum(f.physical_rows for f in snapshot.fragments if f.id in wanted)
    reader = (
        spark.read.format("lance")
        .option("version", str(snapshot.version))
        .option("rowsPerPartition", str(rows_per_partition(spark, rows)))
        .option("metadataColumns", ",".join(metadata))
        .option("splitFragments", str(split_fragments).lower())
    )
    if skip_report:
        reader = reader.option("skipReport", skip_report)
    if arrow_eval:
        reader = reader.option("arrowEval", arrow_eval)
    if key_filter is not None:
        reader = reader.option("keyFilter", key_filter_option(key_filter[0], key_filter[1]))
    if fragment_ids is not None:
        reader = reader.option("fragmentIds", ",".join(str(i) for i in sorted(set(fragment_ids))))
    cols = snapshot.schema.names if columns is None else list(columns)
    # An explicit schema pins the column set (and skips a schema() round trip).
    reader = reader.schema(spark_schema(snapshot.schema, cols, metadata))
    reader = reader.options(**reader_options(spark, store))
    return reader.load(store.uri)


def planned_scan_frame(spark, snapshot: Snapshot, columns: list[str], metadata=(ROW_ADDR,), filters=(),
                       split_fragments: bool = True, skip_report: str | None = None,
                       key_filter=None, record_bounds: tuple[list[str], str] | None = None) -> tuple[DataFrame, int]:
    """(:func:`scan_frame`'s read, its number of tasks), planned here in the driver: the ``lance``
    data source's reader gets ``filters`` (``pyspark.sql.datasource``
    filters, as Spark would push them: data skipping prunes by them, the
    tasks drop rows by them early) and its partitions become the tasks of
    ``spark.range(n).mapInArrow`` (:mod:`.fanout`'s way). Why: Spark plans
    a Python data source's read in a Python worker process (~0.08 s a scan
    here, most of a selective job); an internal job that knows its filters
    in the driver needs none of it. Spark filters nothing after this scan:
    the caller's own plan must not need these filters for correctness. Same
    partitions as the data source (``split_fragments=False``: whole
    fragments, in order)."""
    from .datasource import LanceScanReaderWithPushdown, ReadOptions
    from .fanout import task_frame

    store = snapshot.store
    opts = ReadOptions(path=store.uri, version=str(snapshot.version), columns=list(columns),
                       metadata=list(metadata), storage_options=reader_storage_options(spark, store),
                       rows_per_partition=rows_per_partition(spark, snapshot.num_rows()),
                       split_fragments=split_fragments, skip_report=skip_report,
                       key_filter=key_filter_option(key_filter[0], key_filter[1]) if key_filter else None)
    schema = spark_schema(snapshot.schema, list(columns), list(metadata))
    reader = LanceScanReaderWithPushdown(opts, snapshot.version, schema, store.root, snapshot=snapshot)
    reader.record_bounds = record_bounds  # ((columns, directory): fragment key bounds, see format/fragbounds)
    for _ in reader.pushFilters(list(filters)):
        pass
    parts = [p for p in reader.partitions() if p.pieces]
    if not parts:
        return empty_frame(spark, schema), 0
    return task_frame(spark, parts, lambda part: reader.read(part), schema), len(parts)


class SkipReport:
    """A place for a scan to report what it read (a temporary file on the
    driver, written when Spark plans the scan: with filter pushdown on,
    after data skipping). Use as a context manager; :meth:`metrics` gives
    ``numFragmentsScanned``, ``numFragmentsSkipped``, ``numRowsScanned`` --
    counted from the snapshot when the scan was not planned (no job ran, or
    planning happened elsewhere, e.g. a Spark Connect server)."""

    def __init__(self, snapshot: Snapshot):
        import os
        import tempfile

        self.snapshot = snapshot
        fd, self.path = tempfile.mkstemp(prefix="lance_ops-scan-", suffix=".json")
        os.close(fd)
        os.unlink(self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        import os

        try:
            os.unlink(self.path)
        except OSError:
            pass

    def metrics(self) -> dict:
        from .datasource import read_skip_report

        rec = read_skip_report(self.path)
        if rec is None:
            frags = [f for f in self.snapshot.fragments if f.physical_rows]
            return {"numFragmentsScanned": len(frags), "numFragmentsSkipped": 0,
                    "numRowsScanned": sum(f.physical_rows for f in frags)}
        return {k: rec[k] for k in ("numFragmentsScanned", "numFragmentsSkipped", "numRowsScanned")}


def staged_frame(spark, ctx, columns: list[str] | None = None, metadata=(), only_written: bool = True) -> DataFrame:
    """The rows of a change that is not committed yet, inside a pre-commit
    check (``ctx``: :class:`lance_ops.txn.commit.CheckContext`): the staged
    manifest is published under ``_staging/`` for the executors, and
    ``only_written`` reads just the fragments the change writes (new or with
    new data files) -- what a data-quality gate validates."""
    register(spark)
    staged = ctx.staged
    reader = (
        spark.read.format("lance")
        .option("stagedManifest", ctx.published_manifest())
        .option("rowsPerPartition", str(rows_per_partition(spark, staged.num_rows())))
        .option("metadataColumns", ",".join(metadata))
    )
    if only_written:
        reader = reader.option("fragmentIds", ",".join(str(i) for i in ctx.new_fragment_ids()))
    cols = staged.schema.names if columns is None else list(columns)
    reader = reader.schema(spark_schema(staged.schema, cols, metadata))
    reader = reader.options(**reader_options(spark, ctx.store))
    return reader.load(ctx.store.uri)


def table_spark_schema(snapshot: Snapshot, metadata=()) -> T.StructType:
    return spark_schema(snapshot.schema, None, metadata)


__all__ = [
    "as_column", "describe", "empty_frame", "referenced_columns", "scan_frame", "staged_frame", "table_spark_schema",
    "ROW_ADDR", "ROW_ID", "ROW_CREATED", "ROW_UPDATED",
]
