"""optimize().executeCompaction(): merge small fragments, drop deleted rows.

Planning (driver, metadata only) follows pylance 14's ``compact_files``:

1. walk fragments in manifest order; a fragment is a candidate to *compact
   itself* when ``materializeDeletions`` and its deleted fraction is strictly
   above ``materializeDeletionsThreshold``, or to *compact with neighbours*
   when it has fewer physical rows than ``targetRowsPerFragment``;
2. consecutive candidates form a bin; a non-candidate ends it, and so does a
   change in the set of indices covering the fragments;
3. a bin of a single compact-with-neighbours fragment is dropped (nothing
   to gain);
4. bins are cut by live rows: fragments are taken until the group holds the
   target, and cut there if what is left also reaches it.

Each group is rewritten by one Spark task, streaming: its fragments are read
in order (deleted rows dropped, the current schema's columns only, so dropped
columns and tombstoned data disappear), each row keeping its stable row id and
both lineage versions, into new fragments of at most ``maxRowsPerFragment``
rows (pylance 14's default file size; it does not cut output at the target).
Then two commits, as pylance makes them: ``ReserveFragments`` for the new
fragment ids, and a ``Rewrite`` whose read version is the planned version.

Indices: pylance 14's index files address rows by row address (even with
stable row ids: pylance remaps them on compaction). lance_ops cannot rewrite
pylance's index files, so it *narrows* each index instead: the rewritten
fragments leave the index's fragment bitmap and the new fragments read as
unindexed (scanned), which keeps every query correct; fragments the compaction
did not touch stay indexed. Re-create the index to cover the new fragments
(``metrics["indicesNarrowed"]`` says how many indices lost coverage).

A concurrent delete / update / compaction of some group's fragments does not
fail the job: the other groups commit and the affected ones are re-planned on
the new version (up to ``conflictRetries`` times).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from pyroaring import BitMap

from ..errors import CommitConflictError, InvalidArgumentError
from ..format.features import check_writable
from ..format.proto import table_pb2
from ..format.scan import live_rows
from ..results import CommitInfo
from ..spark.errors import executor_errors
from ..spark.progress import spark_job
from ..spark.rewrite import RewriteContext, rewrite_group
from ..txn.commit import commit
from ..txn.log import Snapshot, open_snapshot
from ..txn.operations import ReserveFragments, Rewrite, RewriteGroup, Transaction
from .common import DEFAULT_CONFLICT_RETRIES, properties, with_conflict_retries

log = logging.getLogger("lance_ops")

#: pylance's default ``max_rows_per_file``: output fragments hold at most this.
DEFAULT_MAX_ROWS_PER_FRAGMENT = 1024 * 1024


@dataclass
class CompactionOptions:
    target_rows_per_fragment: int = 1024 * 1024
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT
    #: Like pylance's max_source_fragments: groups are taken in table order
    #: while their total stays within the limit.
    max_source_fragments: int | None = None

    def check(self) -> None:
        if self.target_rows_per_fragment <= 0 or self.max_rows_per_fragment <= 0:
            raise InvalidArgumentError("targetRowsPerFragment and maxRowsPerFragment must be positive")
        if self.materialize_deletions_threshold < 0:
            raise InvalidArgumentError("materializeDeletionsThreshold must be >= 0")


# ---------------------------------------------------------------- planning
def _index_coverage(snapshot: Snapshot) -> dict[int, frozenset]:
    """fragment id -> uuids of the indices whose bitmap covers it."""
    cover: dict[int, set] = {}
    for idx in snapshot.indices:
        if not idx.fragment_bitmap:
            continue
        for fid in BitMap.deserialize(idx.fragment_bitmap):
            cover.setdefault(fid, set()).add(bytes(idx.uuid.uuid))
    return {k: frozenset(v) for k, v in cover.items()}


def plan_compaction(snapshot: Snapshot, opts: CompactionOptions) -> list[list[table_pb2.DataFragment]]:
    """Groups of fragments to rewrite together (empty: nothing to do)."""
    target = opts.target_rows_per_fragment
    coverage = _index_coverage(snapshot)
    bins: list[list[tuple[table_pb2.DataFragment, str]]] = []
    current: list[tuple[table_pb2.DataFragment, str]] = []
    current_cover = None
    for frag in snapshot.fragments:
        phys = frag.physical_rows
        deleted = frag.deletion_file.num_deleted_rows if frag.HasField("deletion_file") else 0
        reason = None
        if opts.materialize_deletions and phys and deleted / phys > opts.materialize_deletions_threshold:
            reason = "deletions"
        elif phys < target:
            reason = "small"
        cover = coverage.get(frag.id, frozenset())
        if reason is None or (current and cover != current_cover):
            if current:
                bins.append(current)
            current = []
        if reason is not None:
            current.append((frag, reason))
            current_cover = cover
    if current:
        bins.append(current)

    groups: list[list[table_pb2.DataFragment]] = []
    for b in bins:
        if len(b) == 1 and b[0][1] == "small":
            continue
        frags = [f for f, _ in b]
        lives = [live_rows(f) for f in frags]
        cur: list[table_pb2.DataFragment] = []
        total = 0
        for i, f in enumerate(frags):
            cur.append(f)
            total += lives[i]
            if total >= target and sum(lives[i + 1 :]) >= target:
                groups.append(cur)
                cur, total = [], 0
        if cur:
            groups.append(cur)
    reasons = {f.id: r for b in bins for f, r in b}
    groups = [g for g in groups if not (len(g) == 1 and reasons[g[0].id] == "small")]
    if opts.max_source_fragments is not None:
        kept, used = [], 0
        for g in groups:
            if used + len(g) > opts.max_source_fragments:
                continue
            kept.append(g)
            used += len(g)
        groups = kept
    return groups


# ---------------------------------------------------------------- execution
class OptimizeBuilder:
    """``t.optimize()``: Delta's builder; ``executeCompaction(...)`` runs it."""

    def __init__(self, table):
        self._table = table

    def executeCompaction(
        self,
        targetRowsPerFragment: int = 1024 * 1024,
        materializeDeletions: bool = True,
        materializeDeletionsThreshold: float = 0.1,
        maxRowsPerFragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
        maxSourceFragments: int | None = None,
    ) -> CommitInfo:
        t = self._table
        t._writable()
        opts = CompactionOptions(
            targetRowsPerFragment, materializeDeletions, materializeDeletionsThreshold,
            maxRowsPerFragment, maxSourceFragments,
        )
        opts.check()
        return t._moved(compact(t._spark, t._store, t._snapshot, opts, t.conflictRetries))


def compact(spark, store, snapshot: Snapshot, opts: CompactionOptions, conflict_retries: int = DEFAULT_CONFLICT_RETRIES) -> CommitInfo:
    totals = {"fragmentsRemoved": 0, "fragmentsAdded": 0, "filesRemoved": 0, "filesAdded": 0, "rowsRewritten": 0,
              "indicesNarrowed": 0}
    state = {"snapshot": snapshot, "version": None, "retries": 0, "read": snapshot.version}

    def attempt(i: int) -> CommitInfo:
        snap = state["snapshot"] if i == 0 else open_snapshot(store)
        check_writable(snap.manifest, f"at {store.root}")
        groups = plan_compaction(snap, opts)
        if not groups:
            return None
        result, done, dropped = _run_groups(spark, store, snap, groups, opts)
        for k, v in done.items():
            totals[k] += v
        state["version"] = result.version
        # (our own ReserveFragments commit is one of the versions in between)
        state["retries"] += max(0, result.concurrent - 1) + i
        if dropped:
            # Some groups read fragments a concurrent commit changed: re-plan them.
            raise CommitConflictError(f"{dropped} compaction group(s) changed concurrently", retryable=True)
        return None

    try:
        with_conflict_retries(attempt, conflict_retries)
    except CommitConflictError:
        if state["version"] is None:
            raise
    return CommitInfo(
        version=state["version"],
        readVersion=state["read"],
        operation="Rewrite",
        retries=state["retries"],
        metrics=totals,
    )


def _run_groups(spark, store, snap: Snapshot, groups, opts: CompactionOptions):
    ctx = RewriteContext(
        store=store, schema=snap.schema, stable_row_ids=snap.stable_row_ids,
        file_version=snap.data_format_version, max_rows_per_fragment=opts.max_rows_per_fragment,
    )
    payload = [(i, [f.SerializeToString() for f in g]) for i, g in enumerate(groups)]
    with spark_job(spark, "compaction", store.root, snap.version, f"rewrite {len(groups)} group(s)"), executor_errors():
        rows = spark.sparkContext.parallelize(payload, len(payload)).map(lambda item: (item[0], rewrite_group(ctx, item[1]))).collect()
    written = dict(rows)
    new_frags = [[table_pb2.DataFragment.FromString(b) for b in written[i]] for i in range(len(groups))]
    n_new = sum(len(g) for g in new_frags)

    # Reserve the new fragments' ids, then commit the rewrite on top of the plan.
    reserve = commit(store, Transaction(snap.version, ReserveFragments(n_new), properties=properties({"for": "compaction"})))
    next_id = reserve.snapshot.manifest.max_fragment_id - n_new + 1
    rewrite_groups = []
    for old, new in zip(groups, new_frags):
        for f in new:
            f.id = next_id
            next_id += 1
        rewrite_groups.append(RewriteGroup([_copy(f) for f in old], new))
    op = Rewrite(rewrite_groups, allow_partial=True)
    metrics = _metrics(rewrite_groups)
    params = {
        "targetRowsPerFragment": opts.target_rows_per_fragment,
        "materializeDeletions": opts.materialize_deletions,
        "materializeDeletionsThreshold": opts.materialize_deletions_threshold,
    }
    result = commit(store, Transaction(snap.version, op, properties=properties(params, metrics)))
    done = _metrics(op.groups)
    old_ids = op.old_fragment_ids()
    done["indicesNarrowed"] = sum(
        1 for idx in snap.indices if idx.fragment_bitmap and BitMap.deserialize(idx.fragment_bitmap) & BitMap(old_ids)
    )
    if done["indicesNarrowed"]:
        log.warning(
            "compaction of %s: %d index(es) no longer cover the rewritten fragments; re-create them to index "
            "the new fragments", store.root, done["indicesNarrowed"],
        )
    return result, done, len(op.dropped_groups)


def _copy(f: table_pb2.DataFragment) -> table_pb2.DataFragment:
    g = table_pb2.DataFragment()
    g.CopyFrom(f)
    return g


def _metrics(groups: list[RewriteGroup]) -> dict:
    old = [f for g in groups for f in g.old_fragments]
    new = [f for g in groups for f in g.new_fragments]
    return {
        "fragmentsRemoved": len(old),
        "fragmentsAdded": len(new),
        "filesRemoved": sum(len(f.files) + (1 if f.HasField("deletion_file") else 0) for f in old),
        "filesAdded": sum(len(f.files) for f in new),
        "rowsRewritten": sum(f.physical_rows for f in new),
    }
