"""Compaction planning: which fragments to rewrite together. Pure metadata
work, no Spark (the rewrite itself runs in :mod:`lance_ops.ops.compact`).

The rules follow pylance 14's ``compact_files``:

1. walk fragments in manifest order; a fragment is a candidate to *compact
   itself* when ``materializeDeletions`` and its deleted fraction is strictly
   above ``materializeDeletionsThreshold``, or to *compact with neighbours*
   when it has fewer physical rows than ``targetRowsPerFragment``;
2. consecutive candidates form a bin; a non-candidate ends it, and so does a
   change in the set of indices covering the fragments;
3. a bin of a single compact-with-neighbours fragment is dropped (nothing
   to gain);
4. bins are cut by live rows: fragments are taken until the group holds the
   target, and cut there if what is left also reaches it;
5. ``maxSourceFragments`` keeps groups in table order while their total
   stays within the limit.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyroaring import BitMap

from ..errors import InvalidArgumentError
from ..format.proto import table_pb2
from ..format.scan import live_rows
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from .log import Snapshot
from .operations import RewriteGroup


@dataclass
class CompactionOptions:
    target_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT
    #: Like pylance's max_source_fragments: groups are taken in table order
    #: while their total stays within the limit.
    max_source_fragments: int | None = None
    #: Only these fragments are candidates (``optimize().where(...)``); None: all.
    fragment_ids: frozenset | None = None

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
    return plan_groups(list(snapshot.fragments), _index_coverage(snapshot), opts)


def plan_groups(fragments, coverage: dict[int, frozenset], opts: CompactionOptions) -> list[list[table_pb2.DataFragment]]:
    """:func:`plan_compaction` over a fragment list and each fragment's index
    coverage (fragment id -> index uuids)."""
    target = opts.target_rows_per_fragment
    bins: list[list[tuple[table_pb2.DataFragment, str]]] = []
    current: list[tuple[table_pb2.DataFragment, str]] = []
    current_cover = None
    for frag in fragments:
        phys = frag.physical_rows
        deleted = frag.deletion_file.num_deleted_rows if frag.HasField("deletion_file") else 0
        reason = None
        if opts.fragment_ids is not None and frag.id not in opts.fragment_ids:
            pass  # (not selected by optimize().where: ends a bin like any non-candidate)
        elif opts.materialize_deletions and phys and deleted / phys > opts.materialize_deletions_threshold:
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


def group_metrics(groups: list[RewriteGroup]) -> dict:
    """Counts of a Rewrite's groups (what the CommitInfo, history() and the
    OPTIMIZE result show), under Delta's OPTIMIZE metric names where Delta has
    the counterpart -- files are data files; a deletion file a compaction
    materializes is a removed "deletion vector" -- and Lance's own besides
    (fragments, rows rewritten)."""
    old = [f for g in groups for f in g.old_fragments]
    new = [f for g in groups for f in g.new_fragments]
    added = sorted(int(df.file_size_bytes) for f in new for df in f.files)
    removed = [int(df.file_size_bytes) for f in old for df in f.files]
    out = {
        "numAddedFiles": len(added),
        "numRemovedFiles": len(removed),
        "numAddedBytes": sum(added),
        "numRemovedBytes": sum(removed),
        "numDeletionVectorsRemoved": sum(1 for f in old if f.HasField("deletion_file")),
        "numRemovedFragments": len(old),
        "numAddedFragments": len(new),
        "numRowsRewritten": sum(f.physical_rows for f in new),
    }
    if added:
        out.update(minFileSize=added[0], maxFileSize=added[-1], p25FileSize=_percentile(added, 0.25),
                   p50FileSize=_percentile(added, 0.5), p75FileSize=_percentile(added, 0.75))
    return out


def _percentile(ordered: list[int], q: float) -> int:
    """Nearest-rank percentile of sorted sizes."""
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]
