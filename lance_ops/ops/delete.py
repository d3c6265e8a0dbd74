"""delete(condition): deletion vectors only -- no data file is rewritten.

The condition is evaluated over just the columns it references (the path --
Arrow in the tasks, or Spark -- is :mod:`.rowplan`'s choice); per touched
fragment an executor unions the matched offsets into the deletion vector and
writes the new deletion file; fragments left without live rows are dropped
(``deleted_fragment_ids``). A delete matching nothing commits nothing (its
CommitInfo has ``version`` None and ``numDeletedRows`` 0), as Delta's --
pylance commits an empty Delete. Metrics: Delta's DELETE names
(:func:`.rowplan.staged_delete`) and Lance's fragment counts.
"""
from __future__ import annotations

import json

from ..spark.frames import as_column, check_condition, describe
from ..txn.log import Snapshot
from ..txn.operations import Delete
from ..txn.pipeline import StagedCommit
from .dml import analysis_frame
from .rowplan import RowChange, choose, run, staged_delete


def delete(spark, snapshot: Snapshot, condition):
    """``prepare(snapshot) -> StagedCommit`` of a delete; bad SQL raises
    Spark's own error here, before any work."""
    predicate = describe(condition)
    params = {"predicate": json.dumps([predicate] if condition is not None else [])}
    change = RowChange(condition)
    #: the analysis frame checked here -> the condition applied to it: the
    #: first attempt reuses that analysis
    checked = {}
    if condition is not None:
        frame = analysis_frame(spark, snapshot)
        checked[id(frame)] = (frame, check_condition(frame, condition))

    def prepare(snap: Snapshot) -> StagedCommit:
        if condition is None:
            return _delete_all(snap, predicate, params)
        frame = analysis_frame(spark, snap)
        hit = checked.get(id(frame))
        filtered = hit[1] if hit is not None and hit[0] is frame else frame.where(as_column(condition))
        changes, scanned, plan = run(spark, snap, change, choose(spark, snap, change, filtered))
        return staged_delete(snap, changes, predicate, params, scanned, plan.evaluation)

    return prepare


def _delete_all(snap: Snapshot, predicate: str, params: dict) -> StagedCommit:
    """Every fragment dropped: metadata only, no job."""
    ids = [f.id for f in snap.fragments]
    metrics = {"numDeletedRows": snap.num_rows(), "numRemovedFiles": sum(len(f.files) for f in snap.fragments),
               "numAddedFiles": 0, "numCopiedRows": 0, "numDeletionVectorsAdded": 0,
               "numRemovedFragments": len(ids), "numUpdatedFragments": 0, "bytesWritten": 0,
               "numFragmentsScanned": 0, "numFragmentsSkipped": len(ids), "numRowsScanned": 0}
    return StagedCommit(Delete([], ids, predicate), metrics, params, empty=not ids)
