"""optimize().executeCompaction(): merge small fragments, drop deleted rows.

Planning (driver, metadata only) follows pylance 14's ``compact_files``
(:mod:`lance_ops.txn.compaction`).

Each group is rewritten by one Spark task, streaming: its fragments are read
in order (deleted rows dropped, the current schema's columns only, so dropped
columns and tombstoned data disappear), each row keeping its stable row id and
both lineage versions, into new fragments of at most ``maxRowsPerFragment``
rows (pylance 14's default file size; it does not cut output at the target).
Then ONE commit: a ``Rewrite`` whose read version is the planned version and
whose new fragments take their ids in that same commit, numbered from the
high-water mark ``max_fragment_id`` of the version it is built on (pylance
commits a ``ReserveFragments`` version first; a table's history then shows
one version per OPTIMIZE, as Delta's does). Should a concurrent commit take
those ids before ours lands, the rebase numbers them again (and rewrites the
index files that hold them) -- :func:`lance_ops.txn.pipeline.renumber`.
pylance reads the result and keeps numbering after it (tests/spark/test_compaction.py).

Indices follow pylance 14's compaction (:mod:`lance_ops.format.indexremap`):
BTREE indices (and BITMAP ones without stable row ids) address rows by row
address, so once the new fragment ids are known a Spark task per index
writes a remapped copy of its files (moved rows' new addresses, deleted rows
dropped) and the Rewrite names it (``rewritten_indices``); BITMAP indices with
stable row ids address rows by row id and just follow the rows; other index
types (vector, FTS) are narrowed (stable row ids) or left alone (without), so
the new fragments are scanned -- as pylance does. Zone maps and bloom filters
(on one column) do better than pylance: a Spark job computes the zones of the
new fragments (every indexed column in one scan per kind) and the Rewrite
names a rebuilt index (old zones of untouched fragments + the new ones), so
the compacted table stays pruned (:func:`.indices.rebuild_zonemaps`).
``metrics["numIndicesRemapped"]`` / ``["numIndicesRebuilt"]`` /
``["numIndicesNarrowed"]`` count them.

A concurrent delete / update / compaction of some group's fragments does not
fail the job: the other groups commit and the affected ones are re-planned on
the new version (up to ``conflictRetries`` times).
"""

from __future__ import annotations

import json
import logging
import time

import pyarrow as pa

from ..format.naming import index_dir
from ..format.proto import table_pb2
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from ..spark.fanout import run_tasks
from ..spark.frames import describe
from ..spark.rewrite import RewriteContext, rewrite_group
from ..txn.compaction import CompactionOptions, group_metrics, plan_compaction
from ..txn.log import Snapshot
from ..txn.pipeline import StagedCommit
from . import args
from .remap import index_metrics, remap_indices, staged_rewrite  # noqa: F401 (remap_indices: also this module's name for it)

log = logging.getLogger("lance_ops")

#: What each compaction task returns: its group number and new fragments.
_GROUP_RESULT = pa.schema([("i", pa.int32()), ("frags", pa.list_(pa.binary()))])


class OptimizeBuilder:
    """``t.optimize()``: Delta's builder. ``where(predicate)`` limits it to the
    fragments holding rows that match; ``executeCompaction(...)`` runs it and
    returns Delta's OPTIMIZE result (one row: ``path``, ``metrics``); the
    CommitInfo is ``t.lastCommit()``."""

    def __init__(self, table):
        self._table = table
        self._where = None
        self._considered = 0

    def where(self, partitionFilter) -> "OptimizeBuilder":
        """Compact only fragments that hold a live row matching the predicate
        (Spark SQL string or Column; Delta takes a partition filter -- Lance
        tables have no partitions, so any predicate over the table's columns
        selects fragments, evaluated by a Spark job at execute time)."""
        self._where = args.condition(partitionFilter, "'partitionFilter' in where", required=True)
        return self

    def executeCompaction(
        self,
        targetRowsPerFragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
        materializeDeletions: bool = True,
        materializeDeletionsThreshold: float = 0.1,
        maxRowsPerFragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
        maxSourceFragments: int | None = None,
        commitProperties: dict | None = None,
    ):
        """Compact; returns Delta's OPTIMIZE result DataFrame (``metrics.version``
        null: nothing to do). ``t.lastCommit()`` is the CommitInfo."""
        from .shapes import optimize_frame

        t = self._table
        started = time.time()
        t._writable()
        snap = t.snapshot
        snap.new_data_file_version("compaction")
        self._considered = sum(len(f.files) for f in snap.fragments)
        opts = CompactionOptions(
            targetRowsPerFragment, materializeDeletions, materializeDeletionsThreshold,
            maxRowsPerFragment, maxSourceFragments,
        )
        opts.check()
        if self._where is not None:
            from ..spark.frames import check_condition
            from .dml import analysis_frame

            check_condition(analysis_frame(t._spark, snap), self._where)  # bad SQL: Spark's error, now
        info = t._run("compaction", compact(t._spark, opts, self._where), commitProperties, start=snap,
                      operation="OPTIMIZE")
        for k in ("numRemovedFragments", "numAddedFragments", "numRemovedFiles", "numAddedFiles", "numAddedBytes",
                  "numRemovedBytes", "numDeletionVectorsRemoved", "numRowsRewritten", "numIndicesRemapped",
                  "numIndicesNarrowed", "numIndicesRebuilt"):
            info.metrics.setdefault(k, 0)  # (nothing to compact: zeros)
        info.operation = info.operation or "Rewrite"
        return optimize_frame(t._spark, t.uri, info, self._considered, started, time.time())

    def executeZOrderBy(self, *columns, targetRowsPerFragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
                        commitProperties: dict | None = None):
        """Delta's ``OPTIMIZE ... ZORDER BY``: rewrite the table's rows in
        Z-order of ``columns`` (names, or one list of names) so zone maps skip
        on each of them, into fragments of about ``targetRowsPerFragment``
        rows; returns Delta's result DataFrame (``path``,
        ``metrics``), the CommitInfo in ``lastCommit``. See
        :mod:`lance_ops.ops.zorder`."""
        from .zorder import execute_zorder

        return execute_zorder(self._table, columns, targetRowsPerFragment, commitProperties)

    def executeIndexUpdate(self, commitProperties: dict | None = None):
        """Extend zone maps and bloom filters to the fragments they do not cover (pylance's
        ``optimize_indices``); a CommitInfo with ``version`` None when every
        index is up to date."""
        from .indices import update_indices

        t = self._table
        t._writable()
        snap = t.snapshot
        info = t._run("indexUpdate", update_indices(t._spark, snap), commitProperties, start=snap,
                      operation="OPTIMIZE INDICES")
        info.metrics.setdefault("numUpdatedIndices", 0)
        return info


def fragments_matching(spark, snap: Snapshot, predicate) -> set[int]:
    """Ids of the fragments holding a live row where ``predicate`` is true (a
    Spark job over the columns it reads; only fragment ids come back)."""
    from pyspark.sql import functions as F

    from ..format.scan import ROW_ADDR
    from ..spark.frames import as_column, referenced_columns, scan_frame
    from .dml import analysis_frame

    refs = referenced_columns(analysis_frame(spark, snap), [predicate])
    data_cols = [c for c in refs if c in snap.schema.names]
    frame = scan_frame(spark, snap, data_cols, [ROW_ADDR])
    rows = frame.where(as_column(predicate)).select(F.shiftright(ROW_ADDR, 32).alias("f")).distinct().collect()
    return {int(r["f"]) for r in rows}


def compact(spark, opts: CompactionOptions, where=None):
    """``prepare(snapshot) -> StagedCommit | None`` of one compaction round:
    plan, rewrite each group in a Spark task, stage the ``Rewrite`` (its
    fragment ids assigned at commit). After a partial commit (a concurrent change to some
    groups' fragments) the pipeline prepares again on the new version."""

    def prepare(snap: Snapshot) -> StagedCommit | None:
        if where is not None:
            opts.fragment_ids = frozenset(fragments_matching(spark, snap, where))
        groups = plan_compaction(snap, opts)
        if not groups:
            return None
        ctx = RewriteContext(
            store=snap.store, schema=snap.schema, stable_row_ids=snap.stable_row_ids,
            file_version=snap.data_format_version, max_rows_per_fragment=opts.max_rows_per_fragment,
        )
        payload = [(i, [f.SerializeToString() for f in g]) for i, g in enumerate(groups)]
        rows = run_tasks(spark, payload, lambda item: [(item[0], rewrite_group(ctx, item[1]))],
                         "i int, frags array<binary>", _GROUP_RESULT)
        written = {i: [bytes(b) for b in frags] for i, frags in rows}
        new_frags = [[table_pb2.DataFragment.FromString(b) for b in written[i]] for i in range(len(groups))]
        op, to_rebuild = staged_rewrite(spark, snap, groups, new_frags)
        rewritten = op.rewritten_indices

        def committed_metrics(result) -> dict:
            committed = result.transaction.operation
            done = {**group_metrics(committed.groups), **index_metrics(snap, to_rebuild, committed)}
            if done["numIndicesNarrowed"]:
                log.warning(
                    "compaction of %s: %d index(es) do not cover the new fragments (as pylance leaves them); "
                    "queries scan those fragments", snap.store.root, done["numIndicesNarrowed"],
                )
            return done

        params = {
            "predicate": json.dumps([describe(where)] if where is not None else []),
            "zOrderBy": "[]",
            "auto": "false",
            "targetRowsPerFragment": opts.target_rows_per_fragment,
            "materializeDeletions": opts.materialize_deletions,
            "materializeDeletionsThreshold": opts.materialize_deletions_threshold,
        }
        staged = StagedCommit(
            op, {**group_metrics(op.groups), **index_metrics(snap, to_rebuild, op)}, params,
            extra_files=[index_dir(r.new_id.uuid) for r in rewritten],
            # groups a concurrent commit changed were dropped: plan them again
            rerun_after=lambda result: bool(result.transaction.operation.dropped_groups),
            metrics_after=committed_metrics,
        )
        return staged

    return prepare
