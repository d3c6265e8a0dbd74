"""update(condition, set): matched rows move to new fragments with new values.

The old copies are deleted through deletion vectors (REWRITE_ROWS, as pylance's
update does). With stable row ids a moved row keeps its ``_rowid`` and
``_row_created_at_version``; its ``_row_last_updated_at_version`` becomes the
new version. Values are Spark SQL strings or Columns, evaluated with the old
row's values and cast to the column's type (Spark's rules and errors). An
update matching no row commits nothing (CommitInfo ``version`` None), as
Delta's. Metrics carry Delta's UPDATE names (``numUpdatedRows``,
``numAddedFiles``: data files of the moved rows, ``numRemovedFiles``,
``numDeletionVectorsAdded``, ``numCopiedRows``: 0) and Lance's fragment counts.
"""
from __future__ import annotations

import json
import logging

from pyspark.sql import functions as F

from ..errors import ArrowEvalFallback, InvalidArgumentError, SchemaMismatchError
from ..format.scan import METADATA_COLUMNS, ROW_ADDR
from ..spark.arrowtasks import (
    arrow_update_task,
    arrow_values,
    fragment_tasks,
    log_evaluation,
    run_arrow_changes,
    scanned_metrics,
)
from ..spark.constraints import specs_for, with_checks
from ..spark.errors import executor_errors
from ..spark.frames import (
    SkipReport,
    as_column,
    check_condition,
    checked_columns,
    describe,
    referenced_columns,
    scan_frame,
    table_spark_schema,
)
from ..spark.journal import journaled
from ..spark.rowchanges import ACTION, UPDATE
from ..txn.log import Snapshot
from ..txn.operations import REWRITE_ROWS, Update
from ..txn.pipeline import StagedCommit
from .common import guarded
from .dml import analysis_frame, change_context, run_aligned_changes

log = logging.getLogger("lance_ops")


def check_assignments(snapshot: Snapshot, assignments: dict) -> None:
    """Assignments name existing, non-metadata columns (update, rewriteColumns)."""
    if not isinstance(assignments, dict) or not assignments:
        raise InvalidArgumentError("needs a non-empty dict of column -> new value")
    names = snapshot.schema.names
    for c in assignments:
        if c in METADATA_COLUMNS:
            raise SchemaMismatchError(f"{c} is a metadata column and cannot be assigned")
        if c not in names:
            raise SchemaMismatchError(f"cannot update unknown column {c!r}; columns: {names}")


def assignment_columns(snapshot: Snapshot, assignments: dict) -> list:
    """New values as Columns cast to their column's type (Spark's rules and errors)."""
    types = {f.name: f.dataType for f in table_spark_schema(snapshot).fields}
    return [as_column(v).cast(types[c]).alias(c) for c, v in assignments.items()]


def analyzed_assignments(spark, snap: Snapshot, condition, assignments: dict, specs):
    """The Arrow path's view of ``[condition,] new values`` (update,
    rewriteColumns), or None: Spark evaluates. Tables with CHECK constraints
    (Spark SQL too) always take the Spark path, which enforces them."""
    if specs:
        return None
    cols = ([as_column(condition).alias("__condition")] if condition is not None else []) \
        + assignment_columns(snap, assignments)
    return arrow_values(spark, snap, analysis_frame(spark, snap).select(*cols), condition is not None,
                        list(assignments))


def update(spark, snapshot: Snapshot, condition, assignments: dict):
    """``prepare(snapshot) -> StagedCommit`` of an update; bad SQL raises
    Spark's own error here, before any work."""
    snapshot.new_data_file_version("update")
    check_assignments(snapshot, assignments)
    predicate = describe(condition)
    exprs = ([condition] if condition is not None else []) + list(assignments.values())
    frame = analysis_frame(spark, snapshot)  # bad SQL fails here, before any work
    check_condition(frame, condition)
    frame.select(*assignment_columns(snapshot, assignments))
    params = {"predicate": json.dumps([predicate] if condition is not None else []),
              "set": ", ".join(f"{c} = {describe(v)}" for c, v in assignments.items())}

    def prepare(snap: Snapshot) -> StagedCommit:
        specs = specs_for(snap)
        arrow = analyzed_assignments(spark, snap, condition, assignments, specs)
        if arrow is not None:
            try:
                changes, scanned = _arrow_changes(spark, snap, arrow, assignments)
                log_evaluation("update", snap, "arrow")
                return _staged(snap, changes, assignments, params, scanned, "arrow")
            except ArrowEvalFallback as e:
                log.info("update %s v%s: %s; evaluating on Spark", snap.store.root, snap.version, e)
        log_evaluation("update", snap, "spark")
        changes, scanned = _spark_changes(spark, snap, specs)
        return _staged(snap, changes, assignments, params, scanned, "spark")

    def _spark_changes(spark, snap, specs):
        refs = referenced_columns(analysis_frame(spark, snap), exprs)
        checked = checked_columns(spark, snap, specs)
        data_cols = [c for c in snap.schema.names if c in refs or c in checked]
        meta = [ROW_ADDR] + [c for c in refs if c not in data_cols and c != ROW_ADDR]
        report = SkipReport(snap)
        frame = scan_frame(spark, snap, data_cols, meta, split_fragments=False, skip_report=report.path)
        if condition is not None:
            frame = frame.where(as_column(condition))
        values = assignment_columns(snap, assignments)
        if specs:  # the checks see the rows as they will be written
            frame = with_checks(frame.withColumns(dict(zip(assignments, values))), specs)
            values = [F.col(f"`{c}`") for c in assignments] + [F.col(s.column) for s in specs]
        requests = frame.select(ROW_ADDR, F.lit(UPDATE).alias(ACTION), *values)
        ctx = change_context(spark, snap, assigned=list(assignments), checks=specs)
        with report:
            changes = run_aligned_changes(spark, requests, ctx)
            scanned = report.metrics()
        return changes, scanned

    return prepare


def _arrow_changes(spark, snap: Snapshot, arrow, assignments: dict):
    """One stage: tasks read the referenced columns of the fragments (the
    ranges data skipping keeps), evaluate condition and values with Arrow and
    write the changes (``arrowtasks.arrow_update_task``)."""
    ctx = change_context(spark, snap, assigned=list(assignments))
    groups = fragment_tasks(spark, snap, arrow)
    with journaled(snap.store) as token, executor_errors():
        ctx.journal = token  # (set before the task closure pickles ctx)
        changes = run_arrow_changes(spark, groups, arrow_update_task(ctx, arrow))
    return changes, scanned_metrics(snap, groups)


def _staged(snap: Snapshot, changes, assignments: dict, params: dict, scanned: dict, evaluation: str):
    modified = [snap.schema.field(c).id for c in assignments]
    op = Update(
        removed_fragment_ids=sorted(changes.removed),
        updated_fragments=changes.updated_fragments(snap),
        new_fragments=changes.new_fragments,
        fields_modified=[],
        fields_for_preserving_frag_bitmap=modified,
        update_mode=REWRITE_ROWS,
        affected_rows=changes.affected,
        description=params,
    )
    gone = set(changes.removed)
    metrics = {
        "numUpdatedRows": changes.updated_rows,
        "numAddedFiles": sum(len(f.files) for f in op.new_fragments),
        "numRemovedFiles": sum(len(f.files) for f in snap.fragments if f.id in gone),
        "numDeletionVectorsAdded": len(op.updated_fragments),
        "numCopiedRows": 0,
        "numRemovedFragments": len(changes.removed),
        "numUpdatedFragments": len(op.updated_fragments),
        "numAddedFragments": len(op.new_fragments),
        "bytesWritten": changes.deletion_bytes(snap.store)
        + sum(df.file_size_bytes for f in op.new_fragments for df in f.files),
        **scanned,
        "evaluation": evaluation,
    }
    empty = not op.new_fragments and not op.updated_fragments and not op.removed_fragment_ids
    return guarded(StagedCommit(op, metrics, params, empty=empty), snap)
