"""The change data feed, with Delta's semantics, from what Lance keeps anyway.

Delta writes ``_change_data`` files next to every change to answer
``readChangeFeed``; a Lance table needs none. Every version of a table with
stable row ids already says, per row, where it lives (fragments and deletion
files), which row it is (``_rowid``) and when it was created and last changed
(row lineage); time travel reads any version still kept. The feed of version
``v`` is the difference between versions ``v - 1`` and ``v``:

1. *Which fragments changed* -- metadata only: a fragment of either version
   whose descriptor differs (new, removed, new deletion file, new data
   files). Untouched fragments hold no change and are never read.
2. *Which rows changed* -- per changed fragment, from its deletion vectors
   and lineage: rows live in ``v - 1`` but not in ``v`` *vanished* (deleted,
   or moved away: an update rewrites a row into a new fragment, compaction
   moves it); rows live in ``v`` but not in ``v - 1`` *appeared*; rows live in
   both whose ``_row_last_updated_at_version`` differs were changed in place
   (column rewrites, ``addColumns``, restores).
3. *Pairing by row id* -- a row that vanished from one place and appeared in
   another is the same row moved: an update (pre-image from ``v - 1``,
   post-image from ``v``) when its last-updated version differs, nothing when
   it is the same (compaction, z-order). A vanished row that appears nowhere
   was deleted; an appeared row created at ``v`` (or one that was nowhere in
   ``v - 1``, e.g. brought back by a restore) was inserted. Pairing needs the
   row ids of moved rows only: the planner works them out from metadata (the
   fragments' row id and version sequences and deletion files) for the
   versions where rows appear with an older creation version -- updates,
   merges, compactions, restores -- and hands each task the ids it needs.
4. *The rows* -- read in the tasks, only the rows that changed: a deleted row
   reads just its offsets of the old fragment version; an append reads its
   new fragments.

``_commit_version`` is ``v``, ``_commit_timestamp`` its manifest's commit
time. Columns are the end version's (matched by field id, so a renamed
column keeps its values; a column added later is NULL in older images).
Compactions produce no rows (moved rows pair with themselves, as Delta's
``dataChange=false``), nor do metadata-only commits (tags, properties,
indices, dropped or renamed columns). What lineage itself decides stays:
``addColumns`` with values and type casts give every row of the fragments
they rewrote a new last-updated version, so they appear as updates; a restore
reports what it undid as updates, deletes and inserts.

A column filled in place without a new lineage stamp (a ``DataReplacement``
backfill of rows that read NULL) is not reported: lineage is what says a row
changed.

Without stable row ids rows have no identity across versions:
UnsupportedFeatureError. A version that vacuum removed (needed as ``v`` or
``v - 1``) raises TableNotFoundError -- except the table's very first
version (a creation or a shallow clone), whose rows are all inserts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..errors import InvalidArgumentError, TableNotFoundError, UnsupportedFeatureError
from ..format.deletion import read_deletion_vector
from ..format.proto import table_pb2
from ..format.rowids import CREATED, ROW_IDS, UPDATED, decode_row_ids, decode_versions, sequence_bytes
from ..format.scan import ROW_CREATED, ROW_ID, ROW_OFFSET, ROW_UPDATED, FragmentScan, scan_fragment
from ..format.schema import Schema
from ..storage.objectstore import ObjectStore
from .log import Snapshot, TableLog, open_snapshot

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDF_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
INSERT = "insert"
DELETE = "delete"
PREIMAGE = "update_preimage"
POSTIMAGE = "update_postimage"

#: Transactions that only move rows (no row changes): skipped without
#: reading anything (the general rule would pair every moved row with itself).
MOVES_ONLY = {"Rewrite"}

_EMPTY = np.empty(0, dtype=np.uint64)


@dataclass
class ChangeItem:
    """One changed fragment of one version: what a task reads and how it
    classifies the rows. Offsets are physical offsets, sorted; ``None`` for
    ``before_offsets`` / ``after_offsets`` means every live row."""

    version: int
    micros: int
    before: bytes | None
    after: bytes | None
    before_offsets: np.ndarray | None = None
    after_offsets: np.ndarray | None = None
    #: offsets live in both versions whose last-updated version differs
    in_place: np.ndarray = field(default_factory=lambda: _EMPTY)
    #: row ids of rows that moved here / from here with new values (update)
    changed_ids: np.ndarray = field(default_factory=lambda: _EMPTY)
    #: row ids of rows that moved here / from here unchanged (not reported)
    moved_ids: np.ndarray = field(default_factory=lambda: _EMPTY)
    weight: int = 0


@dataclass
class FeedPlan:
    """What the tasks of one change feed read: ``store`` (with the base
    paths of every version read), the end version's ``schema`` and the
    items, version by version."""

    store: ObjectStore
    schema: Schema
    start: int
    end: int
    items: list[ChangeItem]


def check_range(start: int, end: int) -> None:
    if start > end:
        raise InvalidArgumentError(f"startVersion {start} is after endVersion {end}")


def _live_mask(store, frag: table_pb2.DataFragment) -> np.ndarray:
    dv = read_deletion_vector(store, frag)
    n = frag.physical_rows
    return ~dv.mask(n) if len(dv) else np.ones(n, dtype=bool)


def _same(a: table_pb2.DataFragment, b: table_pb2.DataFragment) -> bool:
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def _micros(snap: Snapshot) -> int:
    ts = snap.manifest.timestamp
    return ts.seconds * 1_000_000 + ts.nanos // 1000 if snap.manifest.HasField("timestamp") else 0


def _items_of_version(store, prev: Snapshot | None, snap: Snapshot) -> list[ChangeItem]:
    v = snap.version
    micros = _micros(snap)
    before = {f.id: f for f in prev.fragments} if prev is not None else {}
    after = {f.id: f for f in snap.fragments}
    items: list[ChangeItem] = []
    # (item, vanished offsets) / (item, appeared offsets) for the pairing
    vanished: list[tuple[ChangeItem, table_pb2.DataFragment, np.ndarray]] = []
    appeared: list[tuple[ChangeItem, table_pb2.DataFragment, np.ndarray]] = []
    for fid in sorted(set(before) | set(after)):
        f0, f1 = before.get(fid), after.get(fid)
        if f0 is not None and f1 is not None and _same(f0, f1):
            continue
        if f0 is not None and f1 is not None and f0.physical_rows != f1.physical_rows:
            # (never written by a Lance writer: judged as one removed and one new fragment)
            items += _items_of_pair(store, v, micros, f0, None, vanished, appeared)
            items += _items_of_pair(store, v, micros, None, f1, vanished, appeared)
            continue
        items += _items_of_pair(store, v, micros, f0, f1, vanished, appeared)
    _pair(store, v, vanished, appeared)
    return items


def _items_of_pair(store, v, micros, f0, f1, vanished, appeared) -> list[ChangeItem]:
    item = ChangeItem(v, micros, f0.SerializeToString() if f0 is not None else None,
                      f1.SerializeToString() if f1 is not None else None)
    live0 = _live_mask(store, f0) if f0 is not None else None
    live1 = _live_mask(store, f1) if f1 is not None else None
    if f0 is not None and f1 is not None:
        gone = np.flatnonzero(live0 & ~live1).astype(np.uint64)
        new = np.flatnonzero(live1 & ~live0).astype(np.uint64)
        both = live0 & live1
        if both.any():
            n = f0.physical_rows
            upd0 = decode_versions(sequence_bytes(store, f0, UPDATED), n)
            upd1 = decode_versions(sequence_bytes(store, f1, UPDATED), n)
            item.in_place = np.flatnonzero(both & (upd0 != upd1)).astype(np.uint64)
        item.before_offsets, item.after_offsets = gone, new
        item.weight = len(gone) + len(new) + 2 * len(item.in_place)
        if not item.weight:
            return []
        if len(gone):
            vanished.append((item, f0, gone))
        if len(new):
            appeared.append((item, f1, new))
        return [item]
    if f0 is not None:
        item.weight = int(live0.sum())
        if not item.weight:
            return []
        vanished.append((item, f0, np.flatnonzero(live0).astype(np.uint64)))
        return [item]
    item.weight = int(live1.sum())
    if not item.weight:
        return []
    appeared.append((item, f1, np.flatnonzero(live1).astype(np.uint64)))
    return [item]


def _pair(store, v: int, vanished, appeared) -> None:
    """Give each item the row ids of rows that moved between fragments in
    version ``v`` (an appeared row created before ``v`` is a moved row, or
    one a restore brought back)."""
    moved_in = []  # (item, row ids, last-updated)
    for item, frag, offsets in appeared:
        n = frag.physical_rows
        created = decode_versions(sequence_bytes(store, frag, CREATED), n)[offsets.astype(np.int64)]
        older = created < v
        if not older.any():
            continue
        ids = decode_row_ids(sequence_bytes(store, frag, ROW_IDS) or b"")[offsets.astype(np.int64)][older]
        upd = decode_versions(sequence_bytes(store, frag, UPDATED), n)[offsets.astype(np.int64)][older]
        moved_in.append((item, ids, upd))
    if not moved_in:
        return
    in_ids = np.concatenate([ids for _i, ids, _u in moved_in])
    in_upd = np.concatenate([u for _i, _ids, u in moved_in])
    moved_out = []
    for item, frag, offsets in vanished:
        n = frag.physical_rows
        ids = decode_row_ids(sequence_bytes(store, frag, ROW_IDS) or b"")[offsets.astype(np.int64)]
        upd = decode_versions(sequence_bytes(store, frag, UPDATED), n)[offsets.astype(np.int64)]
        moved_out.append((item, ids, upd))
    out_ids = np.concatenate([ids for _i, ids, _u in moved_out]) if moved_out else _EMPTY
    out_upd = np.concatenate([u for _i, _ids, u in moved_out]) if moved_out else _EMPTY
    common, i_in, i_out = np.intersect1d(in_ids, out_ids, assume_unique=True, return_indices=True)
    differs = in_upd[i_in] != out_upd[i_out]
    changed, same = np.sort(common[differs]), np.sort(common[~differs])
    for item, ids, _u in moved_in + moved_out:
        c = changed[np.isin(changed, ids)] if len(changed) else _EMPTY
        s = same[np.isin(same, ids)] if len(same) else _EMPTY
        item.changed_ids = np.union1d(item.changed_ids, c).astype(np.uint64)
        item.moved_ids = np.union1d(item.moved_ids, s).astype(np.uint64)


def plan_feed(store: ObjectStore, start: int, end: int, *, end_snapshot: Snapshot | None = None) -> FeedPlan:
    """The change feed of versions ``(start, end]`` of the table (branch) at
    ``store``: metadata only."""
    check_range(start, end)
    end_snap = end_snapshot if end_snapshot is not None and end_snapshot.version == end else open_snapshot(store, end)
    if not end_snap.stable_row_ids:
        raise UnsupportedFeatureError(
            f"the change feed needs stable row ids (version {end} of {store.root} has none): without "
            "them rows have no identity across versions. Create the table with stableRowIds=True."
        )
    bases: dict = {}
    items: list[ChangeItem] = []
    first = start + 1
    log = TableLog(store)
    prev = None
    if first <= end:
        if first > 1:
            try:
                prev = open_snapshot(store, first - 1)
            except TableNotFoundError:
                if not _starts_table(log, first):
                    raise TableNotFoundError(
                        f"version {first - 1} of {store.root} was removed (vacuum): the change feed of version "
                        f"{first} compares it with the version before"
                    ) from None
            if prev is not None:
                bases.update(prev.store.bases)
    for v in range(first, end + 1):
        snap = end_snap if v == end else open_snapshot(store, v)
        bases.update(snap.store.bases)
        txn = log.read_transaction(v, snap.file)
        if txn is None or txn.operation.name not in MOVES_ONLY:
            items += _items_of_version(store, prev, snap)
        prev = snap
    plan_store = ObjectStore(store.uri, store.storage_options)
    plan_store.bases = bases
    return FeedPlan(plan_store, end_snap.schema, start, end, items)


def _starts_table(log: TableLog, version: int) -> bool:
    """Whether ``version`` is the first version the table ever had (a
    shallow clone starts at its source's version number)."""
    versions = log.versions()
    if not versions or versions[0].version != version:
        return False
    txn = log.read_transaction(version)
    if txn is None:
        return False
    return txn.operation.name == "Clone" or (txn.operation.name == "Overwrite" and txn.read_version == 0)


# ------------------------------------------------------------------ reading
def change_rows(store, schema: Schema, item: ChangeItem, columns: list[str],
                batch_rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """The changed rows of one item (runs in the tasks): ``columns``, the
    metadata columns ``_rowid``, ``_row_created_at_version``,
    ``_row_last_updated_at_version``, ``_rowoffset`` and ``_change_type``."""
    meta = [ROW_ID, ROW_CREATED, ROW_UPDATED, ROW_OFFSET]
    for side, raw, offsets in ((0, item.before, item.before_offsets), (1, item.after, item.after_offsets)):
        if raw is None:
            continue
        frag = table_pb2.DataFragment.FromString(raw)
        if offsets is not None:
            offsets = np.union1d(offsets, item.in_place).astype(np.uint64)
            if not len(offsets):
                continue
        scan = FragmentScan(frag, columns, meta, stable_row_ids=True, offsets=offsets, batch_rows=batch_rows)
        for batch in scan_fragment(store, schema, scan):
            kinds = classify(side, item, batch)
            keep = kinds != ""
            if not keep.any():
                continue
            out = batch.append_column(CHANGE_TYPE, pa.array(kinds, pa.string()))
            yield out if keep.all() else out.filter(pa.array(keep))


def classify(side: int, item: ChangeItem, batch: pa.RecordBatch) -> np.ndarray:
    """The change type of each row of ``batch`` read from the item's fragment
    in the version before (``side`` 0) or after (1); "" = not a change."""
    ids = batch.column(ROW_ID).to_numpy()
    kinds = np.full(len(ids), DELETE if side == 0 else INSERT, dtype=object)
    moved = np.isin(ids, item.changed_ids)
    same = np.isin(ids, item.moved_ids)
    if side == 1:
        older = batch.column(ROW_CREATED).to_numpy() < item.version
        moved &= older
        same &= older
    kinds[moved] = PREIMAGE if side == 0 else POSTIMAGE
    kinds[same] = ""
    if len(item.in_place):
        kinds[np.isin(batch.column(ROW_OFFSET).to_numpy(), item.in_place)] = PREIMAGE if side == 0 else POSTIMAGE
    return kinds


__all__ = [
    "CHANGE_TYPE", "COMMIT_VERSION", "COMMIT_TIMESTAMP", "CDF_COLUMNS", "INSERT", "DELETE", "PREIMAGE", "POSTIMAGE",
    "ChangeItem", "FeedPlan", "plan_feed", "change_rows", "classify", "check_range",
]
