"""DataFrames over a table version, and what Spark SQL expressions reference.

Internal jobs read a pinned version through the ``lance`` data source with only
the columns they need (:func:`scan_frame`); which columns that is comes from
Spark's own analysis of the user's expressions (:func:`referenced_columns`),
so a ``delete("x > 5")`` reads ``x`` and the row address, nothing else. The
analysis also surfaces bad SQL as Spark's AnalysisException / ParseException
before any data is touched.
"""
from __future__ import annotations

import re
from typing import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..format.scan import ROW_ADDR, ROW_CREATED, ROW_ID, ROW_UPDATED
from ..txn.log import Snapshot
from .datasource import DEFAULT_ROWS_PER_PARTITION, register
from .types import spark_schema

#: Tasks per core a scan aims for (a few large tasks beat many small ones: each
#: Python task has a fixed cost).
TASKS_PER_CORE = 2


def total_cores(spark) -> int:
    """Task slots of the cluster: N of a ``local[N]`` master, otherwise
    executors x cores (falling back to the default parallelism)."""
    sc = spark.sparkContext
    master = sc.master or ""
    if master.startswith("local"):
        inner = master[len("local"):].strip("[]").split(",")[0]
        if inner in ("", "*"):
            import os

            return os.cpu_count() or 1
        try:
            return max(1, int(inner))
        except ValueError:
            pass
    conf = sc.getConf()
    try:
        return int(conf.get("spark.executor.instances")) * int(conf.get("spark.executor.cores", "1"))
    except (TypeError, ValueError):
        return max(1, int(sc.defaultParallelism))


def rows_per_partition(spark, live_rows: int) -> int:
    cores = total_cores(spark)
    if live_rows <= 0:
        return DEFAULT_ROWS_PER_PARTITION
    per = -(-live_rows // max(1, cores * TASKS_PER_CORE))
    return int(min(max(per, 64 * 1024), 4 * DEFAULT_ROWS_PER_PARTITION))


def fragment_groups(fragments, rows_per_group: int) -> list[list[bytes]]:
    """Every fragment, serialized, in order, in groups of about
    ``rows_per_group`` physical rows: the inputs of executor tasks that work on
    whole fragments outside a scan."""
    groups: list[list[bytes]] = []
    current: list[bytes] = []
    rows = 0
    for frag in fragments:
        current.append(frag.SerializeToString())
        rows += frag.physical_rows
        if rows >= rows_per_group:
            groups.append(current)
            current, rows = [], 0
    if current:
        groups.append(current)
    return groups


def as_column(e) -> Column:
    """A Spark SQL string or a Column as a Column."""
    if isinstance(e, Column):
        return e
    if isinstance(e, str):
        return F.expr(e)
    raise TypeError(f"expected a Spark SQL string or a Column, got {type(e).__name__}")


def describe(e) -> str:
    """Readable text of a condition / expression (for history())."""
    if e is None:
        return "true"
    if isinstance(e, str):
        return e
    try:
        return e._jc.toString()
    except Exception:
        return str(e)


def empty_frame(spark, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def referenced_columns(frame: DataFrame, exprs: Iterable) -> list[str]:
    """Top-level columns of ``frame`` that ``exprs`` reference (in frame order).

    Analyzes ``frame.select(*exprs)`` -- raising Spark's own error for bad SQL --
    and asks Catalyst for the attributes the projection references. Falls back
    to every column where the JVM plan is not reachable (e.g. Spark Connect).
    """
    cols = [as_column(e) for e in exprs]
    if not cols:
        return []
    projected = frame.select(*cols)
    try:
        plan = projected._jdf.queryExecution().analyzed()
        it = plan.references().toSeq().iterator()
        names = set()
        while it.hasNext():
            names.add(it.next().name())
    except Exception:
        return list(frame.columns)
    return [c for c in frame.columns if c in names]


_SHUFFLE_OR_SORT = re.compile(r"\b(Exchange|Sort|SortMergeJoin|ShuffledHashJoin|CartesianProduct)\b")


def keeps_scan_partitions(df: DataFrame) -> bool:
    """True when ``df`` computes each output partition from one scan partition,
    rows in scan order -- no shuffle or sort on the way (broadcast joins are
    fine: the scan side streams through). Jobs that change a fragment in the
    task that scanned it depend on this; otherwise they must shuffle by
    fragment. Unknown (no JVM plan at hand): False."""
    try:
        # The executed plan: shuffles and sorts are added when preparing it.
        plan = df._jdf.queryExecution().executedPlan().toString()
    except Exception:
        return False
    return not _SHUFFLE_OR_SORT.search(plan)


def check_condition(frame: DataFrame, condition) -> None:
    """Analyze ``condition`` as a filter over ``frame``: Spark raises its own
    error for bad SQL or a non-boolean condition, before any work is done."""
    if condition is not None:
        frame.where(as_column(condition))


def referenced_attributes(frame: DataFrame, exprs: Iterable) -> set[int] | None:
    """Expression ids of the attributes ``exprs`` reference when analyzed over
    ``frame`` (None where the JVM plan is not reachable). Raises Spark's own
    error for bad SQL."""
    cols = [as_column(e) for e in exprs]
    if not cols:
        return set()
    projected = frame.select(*cols)
    try:
        it = projected._jdf.queryExecution().analyzed().references().toSeq().iterator()
        out = set()
        while it.hasNext():
            out.add(it.next().exprId().id())
        return out
    except Exception:
        return None


def output_attributes(frame: DataFrame) -> dict[int, str]:
    """exprId -> column name of a frame's output attributes."""
    it = frame._jdf.queryExecution().analyzed().output().iterator()
    out = {}
    while it.hasNext():
        a = it.next()
        out[a.exprId().id()] = a.name()
    return out


def scan_frame(spark, snapshot: Snapshot, columns: list[str] | None, metadata=(ROW_ADDR,), split_fragments: bool = True,
               fragment_ids=None, skip_report: str | None = None, arrow_eval: str | None = None) -> DataFrame:
    """The table at ``snapshot``'s version: ``columns`` (None = all) plus
    metadata columns, through the ``lance`` data source. With
    ``split_fragments=False`` each fragment is read whole by one task, in order
    (jobs that change fragments in the scan's own tasks rely on it).
    ``fragment_ids`` reads only those fragments. ``skip_report``: a file where
    the scan's planning writes what it reads after data skipping (see
    :func:`skip_report`)."""
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
    if fragment_ids is not None:
        reader = reader.option("fragmentIds", ",".join(str(i) for i in sorted(set(fragment_ids))))
    cols = snapshot.schema.names if columns is None else list(columns)
    # An explicit schema pins the column set (and skips a schema() round trip).
    reader = reader.schema(spark_schema(snapshot.schema, cols, metadata))
    for k, v in store.storage_options.items():
        reader = reader.option(f"storage.{k}", v)
    return reader.load(store.uri)


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
    for k, v in ctx.store.storage_options.items():
        reader = reader.option(f"storage.{k}", v)
    return reader.load(ctx.store.uri)


def table_spark_schema(snapshot: Snapshot, metadata=()) -> T.StructType:
    return spark_schema(snapshot.schema, None, metadata)


__all__ = [
    "as_column", "describe", "empty_frame", "referenced_columns", "scan_frame", "staged_frame", "table_spark_schema",
    "ROW_ADDR", "ROW_ID", "ROW_CREATED", "ROW_UPDATED",
]
