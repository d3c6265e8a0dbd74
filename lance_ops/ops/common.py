"""Shared plumbing of the Spark-backed operations.

Each operation module builds a ``prepare(snapshot) -> StagedCommit`` (Spark
work; data and deletion files written, nothing visible) and hands it to the
handle's staged-commit pipeline (:meth:`lance_ops.txn.table.Table.execute`),
which commits, rebases, re-runs and cleans up. :func:`labelled` runs each
attempt's Spark jobs under a job description naming the operation, the table
and the version it reads.
"""
from __future__ import annotations

from typing import Callable

from ..spark.frames import inspection_metric, recording_inspection
from ..spark.progress import spark_job
from ..txn.log import Snapshot
from ..txn.pipeline import StagedCommit


def labelled(spark, name: str, uri: str, prepare: Callable[[Snapshot], StagedCommit | None], step: str = ""):
    """``prepare`` with its Spark jobs labelled ``lance_ops {name} {uri}
    v{version}`` (and the attempt number on re-runs)."""
    attempts = [0]

    def run(snap: Snapshot | None) -> StagedCommit | None:
        attempts[0] += 1
        label = ", ".join(x for x in (step, f"attempt {attempts[0]}" if attempts[0] > 1 else "") if x)
        with spark_job(spark, name, uri, snap.version if snap is not None else None, label):
            with recording_inspection() as seen:
                staged = prepare(snap)
        return _report_inspection(staged, inspection_metric(seen))

    return run


def _report_inspection(staged: StagedCommit | None, how: str | None) -> StagedCommit | None:
    """Say in the metrics when a plan-dependent decision (column pruning,
    changes in the scan's tasks) was not taken from Catalyst's plan objects:
    ``planInspection`` "explain" (EXPLAIN text, Spark Connect) or "none" (the
    general path: every column read / a shuffle by fragment). Classic
    sessions ("jvm") add nothing."""
    if staged is None or how in (None, "jvm"):
        return staged
    staged.metrics["planInspection"] = how
    after = staged.flow.metrics_after
    if after is not None:
        def metrics_after(result):
            out = after(result)
            out["planInspection"] = how
            return out

        staged.flow.metrics_after = metrics_after
    return staged


def guarded(staged: StagedCommit | None, snap: Snapshot | None) -> StagedCommit | None:
    """``staged`` with a pre-commit check that the table's CHECK constraints
    are still the ones its tasks enforced (read from ``snap``)."""
    from ..txn.constraints import constraints_of, unchanged_constraints

    if staged is not None and snap is not None:
        staged.checks.append(unchanged_constraints(constraints_of(snap.manifest.config)))
    return staged
