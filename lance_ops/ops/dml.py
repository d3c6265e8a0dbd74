"""Driver side of row-level changes (delete, update, merge): run the change
pipeline of :mod:`lance_ops.spark.rowchanges` for one snapshot and collect
what it wrote (metadata only); the operation modules turn that into a staged
transaction."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..format.scan import METADATA_COLUMNS, ROW_ADDR
from ..spark.background import in_background
from ..spark.errors import executor_errors
from ..spark.frames import empty_frame, keeps_scan_partitions, table_spark_schema, total_cores
from ..spark.journal import journaled
from ..spark.rowchanges import (
    FRAGMENT_KEY,
    RESULT_SCHEMA,
    ChangeContext,
    ChangeSet,
    aligned_changes,
    changed_rows_schema,
    fragment_changes,
    matched_source_ids,
    merge_inserts,
    write_changes,
)
from ..txn.log import Snapshot


def analysis_frame(spark, snapshot: Snapshot) -> DataFrame:
    """An empty frame with the table's columns and metadata columns, for
    analyzing user expressions without reading data."""
    return empty_frame(spark, table_spark_schema(snapshot, METADATA_COLUMNS))


def change_context(spark, snapshot: Snapshot, assigned: list[str], **kw) -> ChangeContext:
    return ChangeContext(
        store=snapshot.store,
        schema=snapshot.schema,
        table_spark=table_spark_schema(snapshot),
        read_version=snapshot.version,
        stable_row_ids=snapshot.stable_row_ids,
        file_version=snapshot.data_format_version,
        fragments={f.id: f.SerializeToString() for f in snapshot.fragments},
        assigned=assigned,
        **kw,
    )


def run_aligned_changes(spark, requests: DataFrame, ctx: ChangeContext) -> ChangeSet:
    """One stage, no shuffle: ``requests`` come straight from a scan with
    ``split_fragments=False``, so each task sees whole fragments and changes
    them itself. When the plan shuffles or sorts on the way (a condition with a
    subquery can plan a shuffle join), fragments are regrouped instead.
    Returns metadata only."""
    if not keeps_scan_partitions(requests):
        return run_grouped_changes(spark, requests, ctx, None)
    with journaled(ctx.store, bool(ctx.checks)) as token, executor_errors():
        ctx.journal = token
        rows = requests.mapInArrow(aligned_changes(ctx), RESULT_SCHEMA).collect()
    return ChangeSet.from_rows([(r[0], bytes(r[1])) for r in rows])


def run_merge_aligned(spark, target: DataFrame, candidates, ctx: ChangeContext,
                      source_rows: int, check_plan: bool = True, one_task: bool = False) -> ChangeSet | None:
    """A merge without a shuffle (broadcast strategy, the target scanned with
    ``split_fragments=False``): each scan task changes the fragments it read
    (:func:`~lance_ops.spark.rowchanges.aligned_changes`) and reports the
    source rows it saw matched; then, only if fewer source rows were matched
    than the source has, one job over the insert ``candidates`` (a callable
    building the frame, None without insert clauses) writes those no task
    matched (:func:`~lance_ops.spark.rowchanges.merge_inserts`). Both
    jobs share one write journal: a constraint failing in the second removes
    the first's files too. None when the target's plan does not keep its scan
    partitions (the caller then shuffles by fragment); ``check_plan=False``:
    the caller knows it does (its tasks still refuse a fragment seen out of
    order, and the driver one changed by two tasks).

    ``one_task``: the target scan is one task (a small merge into a few
    fragments, the CDC pattern): the candidates then follow the target's
    requests into that same task (a union read by one task: ``coalesce(1)``
    merges partitions without a shuffle), which writes the inserts once it
    has seen every matched pair -- one job where there were two."""
    if check_plan and not keeps_scan_partitions(target):
        return None
    with journaled(ctx.store, bool(ctx.checks)) as token, executor_errors():
        ctx.journal = token
        if one_task and candidates is not None:
            together = target.unionByName(candidates()).coalesce(1)
            rows = together.mapInArrow(aligned_changes(ctx, matched_ids=True, inserts=True), RESULT_SCHEMA).collect()
            return ChangeSet.from_rows([(r[0], bytes(r[1])) for r in rows])
        # (the candidates' frame is analyzed -- JVM round trips, no job -- while the scan job runs)
        building = in_background(spark, candidates) if candidates is not None else None
        rows = [(r[0], bytes(r[1])) for r in target.mapInArrow(aligned_changes(ctx, matched_ids=True), RESULT_SCHEMA).collect()]
        matched = matched_source_ids(rows)
        frame = building.result() if building is not None else None
        if frame is not None and len(matched) < source_rows:
            inserted = frame.mapInArrow(merge_inserts(ctx, matched.tobytes()), RESULT_SCHEMA).collect()
            rows += [(r[0], bytes(r[1])) for r in inserted]
        return ChangeSet.from_rows(rows)


def run_grouped_changes(spark, requests: DataFrame, ctx: ChangeContext, key) -> ChangeSet:
    """For requests that went through a join: shuffle them by fragment (``key``;
    negative keys carry merge inserts) into as many tasks as the cluster has
    slots -- an explicit repartition, so adaptive execution does not collapse
    the small shuffle into one task -- then change and write."""
    tasks = max(1, total_cores(spark) * 2)
    key = F.shiftright(F.col(ROW_ADDR), 32) if key is None else key
    with journaled(ctx.store, bool(ctx.checks)) as token, executor_errors():
        ctx.journal = token  # (set before the UDFs are built: they pickle ctx)
        keyed = requests.withColumn(FRAGMENT_KEY, key).repartition(tasks, FRAGMENT_KEY)
        grouped = keyed.groupBy(FRAGMENT_KEY).applyInArrow(fragment_changes(ctx), changed_rows_schema(ctx.table_spark))
        rows = grouped.mapInArrow(write_changes(ctx), RESULT_SCHEMA).collect()
    return ChangeSet.from_rows([(r[0], bytes(r[1])) for r in rows])


def has_index_on(snapshot: Snapshot, columns) -> bool:
    """True if a single-column index of ``snapshot`` is on one of ``columns``
    (top-level): data skipping may then prune a condition on them."""
    ids = {snapshot.schema.field(c).id for c in columns if c in snapshot.schema.names}
    return any(len(ix.fields) == 1 and ix.fields[0] in ids for ix in snapshot.indices)


def fragments_matching(spark, snapshot: Snapshot, condition, data_cols: list[str], meta: list[str]):
    """(ids of the fragments holding a live row ``condition`` matches, scan
    metrics of finding them): one job over just the condition's columns and
    the zones data skipping keeps, returning one small integer per matching
    fragment. Jobs that must rewrite whole fragments (rewriteColumns) then
    read only those."""
    from ..spark.frames import SkipReport, as_column, scan_frame

    with SkipReport(snapshot) as report:
        frame = scan_frame(spark, snapshot, data_cols, meta, skip_report=report.path)
        frag = F.shiftright(F.col(ROW_ADDR), 32).alias("f")
        with executor_errors():
            ids = sorted(r[0] for r in frame.where(as_column(condition)).select(frag).distinct().collect())
        return ids, report.metrics()
