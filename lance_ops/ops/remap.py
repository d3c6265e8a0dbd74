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
