"""delete(condition): deletion vectors only -- no data file is rewritten.

Spark evaluates the condition over just the columns it references (plus the
row address); per touched fragment an executor unions the matched offsets into
the deletion vector and writes the new deletion file; fragments left without
live rows are dropped (``deleted_fragment_ids``). A delete matching nothing commits
nothing (its CommitInfo has ``version`` None and ``numDeletedRows`` 0), as
Delta's -- pylance commits an empty Delete.

Metrics carry Delta's DELETE names (``numDeletedRows``, ``numRemovedFiles``:
data files of fragments left without rows, ``numDeletionVectorsAdded``: the
deletion files written, ``numAddedFiles``: 0 -- no data file is rewritten,
``numCopiedRows``: 0) and Lance's fragment counts.
"""
from __future__ import annotations

import json
import logging

from pyspark.sql import functions as F

from ..errors import ArrowEvalFallback
from ..format.scan import ROW_ADDR
from ..spark.arrowtasks import (
    arrow_condition,
    arrow_delete_task,
    arrow_update_task,
    arrow_values,
    fragment_tasks,
    log_evaluation,
    run_arrow_changes,
    scanned_metrics,
)
from ..spark.frames import (
    SkipReport,
    as_column,
    check_condition,
    describe,
    referenced_columns,
    scan_frame,
)
from ..spark.journal import journaled
from ..spark.rowchanges import ACTION, DELETE
from ..txn.log import Snapshot
from ..txn.operations import Delete
from ..txn.pipeline import StagedCommit
from .dml import analysis_frame, change_context, run_aligned_changes

log = logging.getLogger("lance_ops")


def delete(spark, snapshot: Snapshot, condition):
    """``prepare(snapshot) -> StagedCommit`` of a delete; bad SQL raises
    Spark's own error here, before any work."""
    predicate = describe(condition)
    params = {"predicate": json.dumps([predicate] if condition is not None else [])}
    #: the analysis frame checked here -> its filter by the condition: a
    #: first attempt over the same columns reuses that analysis
    checked = {}
    if condition is not None:
        frame = analysis_frame(spark, snapshot)
        checked[id(frame)] = (frame, check_condition(frame, condition))

    def prepare(snap: Snapshot) -> StagedCommit:
        if condition is None:
            ids = [f.id for f in snap.fragments]
            rows = snap.num_rows()
            op = Delete([], ids, predicate)
            metrics = {"numDeletedRows": rows, "numRemovedFiles": sum(len(f.files) for f in snap.fragments),
                       "numAddedFiles": 0, "numCopiedRows": 0, "numDeletionVectorsAdded": 0,
                       "numRemovedFragments": len(ids), "numUpdatedFragments": 0, "bytesWritten": 0,
                       "numFragmentsScanned": 0, "numFragmentsSkipped": len(ids), "numRowsScanned": 0}
            return StagedCommit(op, metrics, params, empty=not ids)
        # Arrow path 1: the condition from Spark's analyzed plan (classic
        # sessions; any expression in the arrow_eval.catalyst subset).
        frame = analysis_frame(spark, snap)
        hit = checked.get(id(frame))
        filtered = hit[1] if hit is not None and hit[0] is frame else frame.where(as_column(condition))
        analyzed = arrow_values(spark, snap, filtered, True, [])
        if analyzed is not None:
            try:
                ctx = change_context(spark, snap, assigned=[])
                groups = fragment_tasks(spark, snap, analyzed)
                with journaled(snap.store) as token:
                    ctx.journal = token  # (set before the task closure pickles ctx)
                    changes = run_arrow_changes(spark, groups, arrow_update_task(ctx, analyzed))
                log_evaluation("delete", snap, "arrow")
                return _staged(snap, changes, predicate, params, scanned_metrics(snap, groups), "arrow")
            except ArrowEvalFallback as e:
                log.info("delete %s v%s: %s; evaluating on Spark", snap.store.root, snap.version, e)
        # (the columns the condition reads: only the paths below need them)
        refs = referenced_columns(analysis_frame(spark, snap), [condition])
        data_cols = [c for c in refs if c in snap.schema.names]
        meta = [ROW_ADDR] + [c for c in refs if c not in data_cols and c != ROW_ADDR]
        # Arrow path 2: the conjuncts Spark pushes into the scan (also from
        # Spark Connect).
        arrow = arrow_condition(spark, snap, condition, data_cols, meta) if analyzed is None else None
        log_evaluation("delete", snap, "arrow" if arrow is not None else "spark")
        if arrow is not None:
            # Arrow evaluates the whole condition in the tasks: one stage,
            # no row crosses into the JVM.
            ctx = change_context(spark, snap, assigned=[])
            groups = fragment_tasks(spark, snap, arrow)
            with journaled(snap.store) as token:  # (a failing task: no file of the others stays)
                ctx.journal = token
                changes = run_arrow_changes(spark, groups, arrow_delete_task(ctx, arrow))
            return _staged(snap, changes, predicate, params, scanned_metrics(snap, groups), "arrow")
        with SkipReport(snap) as report:
            frame = scan_frame(spark, snap, data_cols, meta, split_fragments=False, skip_report=report.path)
            requests = frame.where(as_column(condition)).select(ROW_ADDR, F.lit(DELETE).alias(ACTION))
            ctx = change_context(spark, snap, assigned=[])
            changes = run_aligned_changes(spark, requests, ctx)
            scanned = report.metrics()
        return _staged(snap, changes, predicate, params, scanned, "spark")

    return prepare


def _staged(snap: Snapshot, changes, predicate: str, params: dict, scanned: dict, evaluation: str) -> StagedCommit:
    updated = changes.updated_fragments(snap)
    removed = sorted(changes.removed)
    op = Delete(updated, removed, predicate, affected_rows=changes.affected)
    gone = set(removed)
    metrics = {
        "numDeletedRows": changes.deleted_rows,
        "numRemovedFiles": sum(len(f.files) for f in snap.fragments if f.id in gone),
        "numAddedFiles": 0,
        "numCopiedRows": 0,
        "numDeletionVectorsAdded": len(updated),
        "numRemovedFragments": len(removed),
        "numUpdatedFragments": len(updated),
        "bytesWritten": changes.deletion_bytes(snap.store),
        **scanned,
        "evaluation": evaluation,
    }
    return StagedCommit(op, metrics, params, empty=not updated and not removed)
