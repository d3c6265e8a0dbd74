"""Executor side of compaction: rewrite one group of fragments.

Streams the group's fragments in order (deleted rows dropped, the table's
current columns only) into new fragments; every row keeps its stable row id
and both lineage versions. Returns the new fragments' metadata (ids are
assigned by the driver from a ReserveFragments commit).
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
