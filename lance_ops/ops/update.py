"""update(condition, set): matched rows move to new fragments with new values.

The old copies are deleted through deletion vectors (REWRITE_ROWS, as pylance's
update does). With stable row ids a moved row keeps its ``_rowid`` and
``_row_created_at_version``; its ``_row_last_updated_at_version`` becomes the
new version. Values are Spark SQL strings or Columns, evaluated with the old
row's values and cast to the column's type (Spark's rules and errors; the
evaluation path is :mod:`.rowplan`'s choice). An update matching no row
commits nothing (CommitInfo ``version`` None), as Delta's. Metrics: Delta's
UPDATE names (:func:`.rowplan.staged_update`) and Lance's fragment counts.
"""
from __future__ import annotations

import json

from ..errors import InvalidArgumentError, SchemaMismatchError
from ..format.scan import METADATA_COLUMNS
from ..spark.frames import check_condition, describe
from ..txn.log import Snapshot
from ..txn.pipeline import StagedCommit
from .dml import analysis_frame
from .rowplan import RowChange, analyzed_assignments, assignment_columns, choose, run, staged_update

__all__ = ["update", "check_assignments", "assignment_columns", "analyzed_assignments"]


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


def update(spark, snapshot: Snapshot, condition, assignments: dict):
    """``prepare(snapshot) -> StagedCommit`` of an update; bad SQL raises
    Spark's own error here, before any work."""
    snapshot.new_data_file_version("update")
    check_assignments(snapshot, assignments)
    frame = analysis_frame(spark, snapshot)  # bad SQL fails here, before any work
    check_condition(frame, condition)
    frame.select(*assignment_columns(snapshot, assignments))
    params = {"predicate": json.dumps([describe(condition)] if condition is not None else []),
              "set": ", ".join(f"{c} = {describe(v)}" for c, v in assignments.items())}
    change = RowChange(condition, dict(assignments))

    def prepare(snap: Snapshot) -> StagedCommit:
        changes, scanned, plan = run(spark, snap, change, choose(spark, snap, change))
        return staged_update(snap, changes, assignments, params, scanned, plan.evaluation)

    return prepare
