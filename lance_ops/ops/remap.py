"""Remapping address-based indices after a rewrite moved rows.

Shared by compaction (rows keep their order: old and new addresses match by
position) and Z-order (rows reordered: matched by stable row id). One Spark
task per index writes the remapped copy of its files
(:mod:`lance_ops.format.indexremap`); the Rewrite names it.
"""
from __future__ import annotations

from ..format.proto import table_pb2
from ..format.proto.transaction_pb2 import Transaction
from ..spark.errors import executor_errors
from ..spark.rewrite import IndexRemapTask
from ..txn.log import Snapshot


def remap_indices(spark, snap: Snapshot, indices, groups, new_frags, by_row_id: bool = False) -> list:
    """Remap ``indices`` to the compaction's new row addresses: one Spark task
    per index writes its new files; returns the ``RewrittenIndex`` entries.
    ``by_row_id``: the rewrite reordered the rows (Z-order), so old and new
    addresses are matched by stable row id."""
    payload = [([f.SerializeToString() for f in old], [f.SerializeToString() for f in new])
               for old, new in zip(groups, new_frags)]
    frame = spark.createDataFrame([(i, idx.SerializeToString()) for i, idx in enumerate(indices)], "i int, idx binary")
    with executor_errors():
        rows = frame.repartition(len(indices)).mapInArrow(
            IndexRemapTask(snap.store, payload, by_row_id), "i int, meta binary"
        ).collect()
    out = []
    for r in sorted(rows, key=lambda r: r["i"]):
        old = indices[r["i"]]
        new = table_pb2.IndexMetadata.FromString(bytes(r["meta"]))
        out.append(Transaction.Rewrite.RewrittenIndex(
            old_id=old.uuid, new_id=new.uuid, new_index_details=new.index_details,
            new_index_version=new.index_version, files=new.files,
        ))
    return out


def staged_rewrite(spark, snap: Snapshot, groups, new_frags, by_row_id: bool = False):
    """The ``Rewrite`` of ``groups`` (old fragments) into ``new_frags`` (one
    list per group) with the indices handled as compaction handles them --
    REMAP indices remapped, zone maps over rewritten fragments rebuilt --
    and ``(op, to_rebuild)`` returned. One version per OPTIMIZE: the new
    fragments take the ids after this version's high-water mark in the
    Rewrite's own commit, and the index files holding them are written now:
    no Spark job runs in the commit phase (a concurrent commit taking the ids
    renumbers them, or prepares again when index files hold them:
    ``pipeline.renumber``). ``by_row_id``: the rewrite reordered rows (z-order)."""
    from pyroaring import BitMap

    from ..format.indexremap import REMAP, compaction_rule
    from ..format.messages import copy_messages
    from ..txn.operations import Rewrite, RewriteGroup
    from ..txn.pipeline import number_new_fragments
    from .indices import rebuild_zonemaps, zonemaps_to_rebuild

    op = Rewrite([RewriteGroup(copy_messages(old), new) for old, new in zip(groups, new_frags)], allow_partial=True)
    rewritten_ids = BitMap(f.id for g in groups for f in g)
    to_remap = [
        idx for idx in snap.indices
        if compaction_rule(idx, snap.stable_row_ids) == REMAP and idx.fragment_bitmap
        and BitMap.deserialize(idx.fragment_bitmap) & rewritten_ids
    ]
    to_rebuild = zonemaps_to_rebuild(snap, rewritten_ids)
    number_new_fragments(op, snap)
    rewritten = []
    if to_remap:
        rewritten += remap_indices(spark, snap, to_remap, groups, new_frags, by_row_id=by_row_id)
    if to_rebuild:
        rewritten += rebuild_zonemaps(spark, snap, to_rebuild, groups, new_frags)
    op.rewritten_indices = rewritten
    return op, to_rebuild


def index_metrics(snap: Snapshot, to_rebuild, committed) -> dict:
    """Delta's OPTIMIZE index counts of a committed ``Rewrite``: indices
    remapped, rebuilt (zone maps), and narrowed (left not covering the new
    fragments, as pylance leaves them)."""
    from pyroaring import BitMap

    from ..format.indexremap import EXTEND, compaction_rule

    old_ids = BitMap(committed.old_fragment_ids())
    remapped = {bytes(r.old_id.uuid) for r in committed.rewritten_indices}
    touched = [idx for idx in snap.indices if idx.fragment_bitmap and BitMap.deserialize(idx.fragment_bitmap) & old_ids]
    rebuilt = {bytes(i.uuid.uuid) for i in to_rebuild} & remapped
    return {
        "numIndicesRemapped": sum(1 for idx in touched if bytes(idx.uuid.uuid) in remapped - rebuilt),
        "numIndicesRebuilt": len(rebuilt),
        "numIndicesNarrowed": sum(
            1 for idx in touched
            if bytes(idx.uuid.uuid) not in remapped and compaction_rule(idx, snap.stable_row_ids) != EXTEND
        ),
    }
