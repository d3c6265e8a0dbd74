"""Executor side of compaction: rewrite one group of fragments.

Streams the group's fragments in order (deleted rows dropped, the table's
current columns only) into new fragments; every row keeps its stable row id
and both lineage versions. Returns the new fragments' metadata (ids are
assigned by the driver when it commits the Rewrite).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..format.datafile import WholeFileLayout
from ..format.proto import table_pb2
from ..format.scan import (
    ROW_CREATED,
    ROW_ID,
    ROW_UPDATED,
    FragmentScan,
    scan_fragment,
    scan_whole_fragment,
    scan_whole_fragments,
)
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


#: Fragments whose data files hold at most this many bytes are read ahead on
#: threads (whole, in order): opening a data file and decoding it run in
#: pylance's native code without the GIL, and a group of thousands of tiny
#: fragments (the streaming / CDC pattern) otherwise pays each file's open and
#: read one after the other. Bigger fragments (or of unknown size) stream
#: batch by batch.
READ_AHEAD_FRAGMENT_BYTES = 2 * 1024 * 1024
#: Consecutive small fragments are read ahead in chunks of at most this many
#: fragments and bytes, one thread task each, whose rows come back as one
#: table (:func:`~lance_ops.format.scan.scan_whole_fragments`): a future, a
#: table and three metadata columns per 25-row fragment cost more Python
#: (under the GIL) than the codec's read of it.
READ_AHEAD_CHUNK = 64
READ_AHEAD_CHUNK_BYTES = 4 * 1024 * 1024
#: At most this many chunks in flight, on this many threads.
READ_AHEAD_WINDOW = 8
READ_AHEAD_THREADS = 4


def _file_bytes(frag: table_pb2.DataFragment) -> int:
    """Bytes of the fragment's data files (0: some size is not recorded)."""
    sizes = [df.file_size_bytes for df in frag.files]
    return sum(sizes) if sizes and all(sizes) else 0


def _group_batches(ctx: RewriteContext, fragments: list[bytes]):
    """The batches of the group's fragments, in order (deleted rows dropped,
    the current columns plus the row id / lineage columns when the table has
    stable row ids); runs of small fragments read ahead on threads, a chunk
    at a time."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    names = ctx.schema.names
    meta = [ROW_ID, ROW_CREATED, ROW_UPDATED] if ctx.stable_row_ids else []
    layout = WholeFileLayout.of(ctx.schema, ctx.file_version)

    def scan(frag):
        return FragmentScan(frag, names, meta, stable_row_ids=ctx.stable_row_ids)

    def batches(frag):
        whole = None if layout is None else scan_whole_fragment(ctx.store, layout, scan(frag))
        return whole if whole is not None else scan_fragment(ctx.store, ctx.schema, scan(frag))

    def chunk_batches(chunk):
        table = None if layout is None else scan_whole_fragments(ctx.store, layout, chunk, meta, ctx.stable_row_ids)
        if table is None:  # (some fragment needs the general reader)
            return [b for f in chunk for b in batches(f)]
        return table.to_batches() if table.num_rows else []

    frags = deque(table_pb2.DataFragment.FromString(raw) for raw in fragments)
    with ThreadPoolExecutor(READ_AHEAD_THREADS, thread_name_prefix="lance_ops-read-ahead") as pool:
        ahead: deque = deque()  # (fragment | None, future of a chunk's batches | None: streamed in its turn)
        try:
            while frags or ahead:
                while frags and len(ahead) < READ_AHEAD_WINDOW:
                    chunk, size = [], 0
                    while frags and len(chunk) < READ_AHEAD_CHUNK:
                        n = _file_bytes(frags[0])
                        if not 0 < n <= READ_AHEAD_FRAGMENT_BYTES or (chunk and size + n > READ_AHEAD_CHUNK_BYTES):
                            break
                        chunk.append(frags.popleft())
                        size += n
                    if chunk:
                        ahead.append((None, pool.submit(chunk_batches, chunk)))
                    else:  # a big fragment: streamed in its turn
                        ahead.append((frags.popleft(), None))
                frag, future = ahead.popleft()
                yield from (future.result() if future is not None else batches(frag))
        finally:
            for _, future in ahead:
                if future is not None:
                    future.cancel()


#: Batches smaller than this are gathered into one before the writer sees
#: them: a group of thousands of 25-row fragments otherwise costs a codec
#: write call (and the row id bookkeeping) per fragment.
WRITE_BATCH_ROWS = 64 * 1024


def _gathered(batches) -> Iterator[pa.RecordBatch]:
    """``batches`` with runs of small ones combined into batches of about
    ``WRITE_BATCH_ROWS`` rows (order kept)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if batch.num_rows < WRITE_BATCH_ROWS:
            pending.append(batch)
            rows += batch.num_rows
            if rows < WRITE_BATCH_ROWS:
                continue
            batch = None
        if pending:
            yield from pa.Table.from_batches(pending).combine_chunks().to_batches()
            pending, rows = [], 0
        if batch is not None:
            yield batch
    if pending:
        yield from pa.Table.from_batches(pending).combine_chunks().to_batches()


@executor_task
def rewrite_group(ctx: RewriteContext, fragments: list[bytes]) -> list[bytes]:
    names = ctx.schema.names
    sink = FragmentSink(ctx.store, ctx.schema, ctx.file_version, ctx.max_rows_per_fragment)
    out: list[bytes] = []
    try:
        for batch in _gathered(_group_batches(ctx, fragments)):
            data = batch.select(names)
            if ctx.stable_row_ids:
                cols = {m: batch.column(m).to_numpy().astype(np.uint64) for m in (ROW_ID, ROW_CREATED, ROW_UPDATED)}
                written = sink.write(data, cols[ROW_ID], cols[ROW_CREATED], cols[ROW_UPDATED])
            else:
                written = sink.write(data)
            out.extend(f.SerializeToString() for f in written)
        out.extend(f.SerializeToString() for f in sink.finish())
    except BaseException:
        sink.abort()
        raise
    return out
