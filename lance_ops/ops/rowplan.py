"""Row-level changes (delete, update) as a plan value: which way the SQL is
evaluated, why, and what it reads -- then one executor, and one place that
builds each transaction and its metrics.

Three evaluation paths, chosen by :func:`choose` in this order:

* ``arrow-analyzed``: Spark's analyzed plan of the condition and the new
  values, decoded into :mod:`lance_ops.arrow_eval` trees (classic sessions:
  the plan object is reachable); executor tasks read the referenced columns
  of the fragments data skipping keeps, evaluate with Arrow and write;
* ``arrow-pushed`` (delete only): the conjuncts Spark pushes into the lance
  scan, when they are the whole condition (also from Spark Connect, which
  offers the plan as text only);
* ``spark``: a scan of the referenced columns filtered by Spark, whose rows
  go to the change tasks (anything Spark can evaluate; CHECK constraints of
  an update are evaluated there too).

An ANSI error row met by an Arrow task (:class:`ArrowEvalFallback`) makes the
operation run again on the Spark path, which raises Spark's own error.
``RowChangePlan.reason`` records why a path was taken (the progress line and
the ``evaluation`` metric show the path).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

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
from ..spark.constraints import specs_for, with_checks
from ..spark.errors import executor_errors
from ..spark.frames import (
    SkipReport,
    as_column,
    checked_columns,
    referenced_columns,
    scan_frame,
    table_spark_schema,
)
from ..spark.journal import journaled
from ..spark.rowchanges import ACTION, DELETE, UPDATE
from ..txn.log import Snapshot
from ..txn.operations import REWRITE_ROWS, Delete, Update
from ..txn.pipeline import StagedCommit
from .common import guarded
from .dml import analysis_frame, change_context, run_aligned_changes

log = logging.getLogger("lance_ops")

ARROW_ANALYZED, ARROW_PUSHED, SPARK = "arrow-analyzed", "arrow-pushed", "spark"


@dataclass
class RowChange:
    """What to change: rows where ``condition`` holds (None: every row) get
    deleted (``assignments`` None) or the new values."""

    condition: object
    assignments: dict | None = None

    @property
    def kind(self) -> str:
        return "delete" if self.assignments is None else "update"


@dataclass
class RowChangePlan:
    """How one attempt evaluates a :class:`RowChange` on one version."""

    path: str
    reason: str
    #: the Arrow view (ArrowValues / ArrowCondition); None on the Spark path
    arrow: object = None
    #: CHECK constraints an update enforces (Spark path)
    specs: list = field(default_factory=list)

    @property
    def evaluation(self) -> str:
        return "spark" if self.path == SPARK else "arrow"


def assignment_columns(snapshot: Snapshot, assignments: dict) -> list:
    """New values as Columns cast to their column's type (Spark's rules and errors)."""
    types = {f.name: f.dataType for f in table_spark_schema(snapshot).fields}
    return [as_column(v).cast(types[c]).alias(c) for c, v in assignments.items()]


def analyzed_assignments(spark, snap: Snapshot, condition, assignments: dict, specs, filtered=None):
    """The Arrow path's view of ``[condition,] new values`` (update,
    rewriteColumns; a delete has no values: ``filtered`` is its checked
    frame), or None: Spark evaluates. Tables with CHECK constraints (Spark
    SQL too) always take the Spark path, which enforces them."""
    if specs:
        return None
    if filtered is not None:
        return arrow_values(spark, snap, filtered, True, [])
    cols = ([as_column(condition).alias("__condition")] if condition is not None else []) \
        + assignment_columns(snap, assignments)
    return arrow_values(spark, snap, analysis_frame(spark, snap).select(*cols), condition is not None,
                        list(assignments))


def choose(spark, snap: Snapshot, change: RowChange, filtered=None, arrow_ok: bool = True) -> RowChangePlan:
    """The evaluation path of ``change`` on ``snap`` (see the module
    docstring). ``filtered``: a delete's condition already applied to the
    analysis frame (its analysis is reused); ``arrow_ok=False``: the Spark
    path (after an ANSI error row)."""
    specs = specs_for(snap) if change.assignments is not None else []
    if not arrow_ok:
        return RowChangePlan(SPARK, "an Arrow task met a row where Spark raises (ANSI)", specs=specs)
    if specs:
        return RowChangePlan(SPARK, "the table has CHECK constraints, evaluated in Spark", specs=specs)
    if change.assignments is None and filtered is None:
        filtered = analysis_frame(spark, snap).where(as_column(change.condition))
    analyzed = analyzed_assignments(spark, snap, change.condition, change.assignments or {}, specs, filtered)
    if analyzed is not None:
        return RowChangePlan(ARROW_ANALYZED, "Spark's analyzed plan is in the Arrow subset", analyzed)
    if change.assignments is None:
        data_cols, meta = _read_columns(spark, snap, change, [])
        pushed = arrow_condition(spark, snap, change.condition, data_cols, meta)
        if pushed is not None:
            return RowChangePlan(ARROW_PUSHED, "the conjuncts pushed into the scan are the whole condition", pushed)
    return RowChangePlan(SPARK, "outside the Arrow subset (or no analyzed plan, or arrowEval off)", specs=specs)


def run(spark, snap: Snapshot, change: RowChange, plan: RowChangePlan):
    """Execute ``plan``: (ChangeSet, scan metrics, the plan that ran). An
    ANSI error row in an Arrow task re-plans on the Spark path."""
    log_evaluation(change.kind, snap, plan.evaluation)
    if plan.path != SPARK:
        assigned = list(change.assignments or {})
        ctx = change_context(spark, snap, assigned=assigned)
        groups = fragment_tasks(spark, snap, plan.arrow)
        task = arrow_delete_task(ctx, plan.arrow) if plan.path == ARROW_PUSHED else arrow_update_task(ctx, plan.arrow)
        try:
            with journaled(snap.store) as token, executor_errors():
                ctx.journal = token  # (set before the task closure pickles ctx)
                changes = run_arrow_changes(spark, groups, task)
            return changes, scanned_metrics(snap, groups), plan
        except ArrowEvalFallback as e:
            log.info("%s %s v%s: %s; evaluating on Spark", change.kind, snap.store.root, snap.version, e)
            return run(spark, snap, change, choose(spark, snap, change, arrow_ok=False))
    data_cols, meta = _read_columns(spark, snap, change, plan.specs)
    with SkipReport(snap) as report:
        frame = scan_frame(spark, snap, data_cols, meta, split_fragments=False, skip_report=report.path)
        if change.condition is not None:
            frame = frame.where(as_column(change.condition))
        if change.assignments is None:
            requests = frame.select(ROW_ADDR, F.lit(DELETE).alias(ACTION))
        else:
            values = assignment_columns(snap, change.assignments)
            if plan.specs:  # the checks see the rows as they will be written
                frame = with_checks(frame.withColumns(dict(zip(change.assignments, values))), plan.specs)
                values = [F.col(f"`{c}`") for c in change.assignments] + [F.col(s.column) for s in plan.specs]
            requests = frame.select(ROW_ADDR, F.lit(UPDATE).alias(ACTION), *values)
        ctx = change_context(spark, snap, assigned=list(change.assignments or {}), checks=plan.specs)
        changes = run_aligned_changes(spark, requests, ctx)
        return changes, report.metrics(), plan


def _read_columns(spark, snap: Snapshot, change: RowChange, specs) -> tuple[list[str], list[str]]:
    """(data columns, metadata columns) the Spark scan reads: what the
    condition and values reference, and the constraints' inputs."""
    exprs = ([change.condition] if change.condition is not None else []) + list((change.assignments or {}).values())
    refs = referenced_columns(analysis_frame(spark, snap), exprs)
    checked = checked_columns(spark, snap, specs) if specs else set()
    data_cols = [c for c in snap.schema.names if c in refs or c in checked]
    return data_cols, [ROW_ADDR] + [c for c in refs if c not in data_cols and c != ROW_ADDR]


# ------------------------------------------------------- transactions
def staged_delete(snap: Snapshot, changes, predicate: str, params: dict, scanned: dict, evaluation: str) -> StagedCommit:
    """The Delete of ``changes`` and Delta's DELETE metrics."""
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


def staged_update(snap: Snapshot, changes, assignments: dict, params: dict, scanned: dict,
                  evaluation: str) -> StagedCommit:
    """The Update (REWRITE_ROWS) of ``changes`` and Delta's UPDATE metrics."""
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
