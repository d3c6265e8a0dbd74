"""Executor side of compaction: rewrite one group of fragments.

Streams the group's fragments in order (deleted rows dropped, the table's
current columns only) into new fragments; every row keeps its stable row id
and both lineage versions. Returns the new fragments' metadata (ids are
assigned by the driver when it commits the Rewrite).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..format.proto import table_pb2
from ..format.scan import ROW_CREATED, ROW_ID, ROW_UPDATED, FragmentScan, scan_fragment
from ..format.schema import Schema
from ..format.writer import FragmentSink
from ..storage.objectstore import ObjectStore
from .errors import executor_task


@dataclass
class RewriteContext:
    store: ObjectStore
    schema: Schema
    stable_row_ids: bool
    file_version: str
    max_rows_per_fragment: int


class IndexRemapTask:
    """``mapInArrow`` function remapping indices after compaction: rows of
    ``(i int, idx binary)`` (index metadata) in, ``(i, meta binary)`` (the
    remapped index's metadata, files written) out.
    :mod:`lance_ops.format.indexremap` does the work."""

    def __init__(self, store: ObjectStore, groups: list[tuple[list[bytes], list[bytes]]], by_row_id: bool = False):
        self.store = store
        self.groups = groups
        #: rows were reordered (Z-order): old and new addresses are matched
        #: by stable row id, not by position
        self.by_row_id = by_row_id

    def __call__(self, batches):
        return _remap_indices(self, batches)


@executor_task
def _remap_indices(task: "IndexRemapTask", batches):
    import pyarrow as pa

    from ..format.indexremap import address_map, address_map_by_row_id, remap_index

    groups = [
        ([table_pb2.DataFragment.FromString(b) for b in old], [table_pb2.DataFragment.FromString(b) for b in new])
        for old, new in task.groups
    ]
    amap = None
    for batch in batches:
        out_i, out_meta = [], []
        for i, raw in zip(batch.column("i").to_pylist(), batch.column("idx").to_pylist()):
            if amap is None:
                amap = (address_map_by_row_id if getattr(task, "by_row_id", False) else address_map)(task.store, groups)
            new = remap_index(task.store, table_pb2.IndexMetadata.FromString(raw), amap)
            out_i.append(i)
            out_meta.append(new.SerializeToString())
        yield pa.RecordBatch.from_arrays([pa.array(out_i, pa.int32()), pa.array(out_meta, pa.binary())],
                                         names=["i", "meta"])


@executor_task
def rewrite_group(ctx: RewriteContext, fragments: list[bytes]) -> list[bytes]:
    names = ctx.schema.names
    meta = [ROW_ID, ROW_CREATED, ROW_UPDATED] if ctx.stable_row_ids else []
    sink = FragmentSink(ctx.store, ctx.schema, ctx.file_version, ctx.max_rows_per_fragment)
    out: list[bytes] = []
    try:
        for raw in fragments:
            frag = table_pb2.DataFragment.FromString(raw)
            scan = FragmentScan(frag, names, meta, stable_row_ids=ctx.stable_row_ids)
            for batch in scan_fragment(ctx.store, ctx.schema, scan):
                data = batch.select(names)
                if ctx.stable_row_ids:
                    cols = {m: batch.column(m).to_numpy().astype(np.uint64) for m in meta}
                    written = sink.write(data, cols[ROW_ID], cols[ROW_CREATED], cols[ROW_UPDATED])
                else:
                    written = sink.write(data)
                out.extend(f.SerializeToString() for f in written)
        out.extend(f.SerializeToString() for f in sink.finish())
    except BaseException:
        sink.abort()
        raise
    return out
