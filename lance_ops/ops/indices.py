"""Scalar indices: ``createIndex`` (ZONEMAP, BLOOMFILTER, BITMAP, BTREE), ``dropIndex``, ``listIndices``,
``optimize().executeIndexUpdate()``.

A zone map is computed per fragment in executors (a ``mapInArrow`` over the
fragments' metadata: each task reads just the indexed column of its
fragments and returns one small Arrow IPC blob of zone statistics per
fragment); the driver writes ``_indices/<uuid>/zonemap.lance`` with pylance
14's schema and metadata and commits a ``CreateIndex`` transaction through
the pipeline, so pylance lists it, plans scalar index queries with it and
extends it (``optimize_indices``).

Zones hold 8192 live rows each, as pylance 14 cuts them: ``zone_start`` is
the physical offset of the zone's first live row, ``zone_length`` the span to
its last; rows deleted when the index is built are in no statistics.
Float min/max follow pylance's total order (max NaN when the zone holds a
NaN, -0.0 below +0.0) so pylance's own search over our files is right.

A BITMAP (one roaring bitmap of row ids or addresses per distinct value,
:mod:`lance_ops.format.bitmap_build`) is O(rows), so it never passes through
the driver: executor tasks make partial bitmaps per fragment, ONE executor
task merges them and writes ``bitmap_page_lookup.lance`` (bit for bit
pylance 14's), and only its size comes back. A BTREE
(:mod:`lance_ops.format.btree_build`) is built the same way: tasks read
(value, row address) pairs, ONE task sorts them all and writes
``page_data.lance`` and ``page_lookup.lance``.
"""
from __future__ import annotations

import json
import time
import uuid as uuid_mod

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import any_pb2
from pyroaring import BitMap

from ..errors import InvalidArgumentError
from ..format import bloom
from ..format.bitmap_build import BITMAP_FILE
from ..format.proto import table_pb2
from ..format.pruning import prunable_type
from ..format.zones import (
    BITMAP,
    BLOOMFILTER,
    BLOOMFILTER_FILE,
    BTREE,
    TYPE_NAMES,
    ZONEMAP,
    ZONEMAP_FILE,
    covered_fragments,
    index_kind,
)
from ..spark.errors import executor_errors, executor_task
from ..txn.log import Snapshot
from ..txn.operations import CreateIndex
from ..txn.pipeline import StagedCommit

ROWS_PER_ZONE = 8192
#: ZoneMapIndexDetails as pylance 14 writes it for 8192 rows per zone.
ZONEMAP_DETAILS = any_pb2.Any(type_url="/lance.table.ZoneMapIndexDetails", value=b"\x08\x80@\x10\x00\x18\x01")
INDEX_FILE_VERSION = "2.2"
ZONE_SCHEMA_TAIL = [
    pa.field("null_count", pa.uint32(), False),
    pa.field("nan_count", pa.uint32(), False),
    pa.field("fragment_id", pa.uint64(), False),
    pa.field("zone_start", pa.uint64(), False),
    pa.field("zone_length", pa.uint64(), False),
]


def zone_schema(value_type: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("min", value_type), pa.field("max", value_type), *ZONE_SCHEMA_TAIL],
                     metadata={"rows_per_zone": str(ROWS_PER_ZONE)})


def _float_bounds(arr: pa.Array):
    vals = arr.drop_null().to_numpy(zero_copy_only=False)
    nan = np.isnan(vals)
    nans = int(nan.sum())
    finite = vals[~nan]
    if len(vals) == 0:
        return None, None, 0
    if len(finite) == 0:
        return float("nan"), float("nan"), nans
    lo, hi = float(finite.min()), float(finite.max())
    zeros = finite[finite == 0]
    if lo == 0 and np.signbit(zeros).any():
        lo = -0.0
    if hi == 0:
        hi = 0.0 if (~np.signbit(zeros)).any() else -0.0
    if nans:
        hi = float("nan")
    return lo, hi, nans


def zone_stats(values: pa.Array, fragment_id: int, start: int) -> dict:
    """One zone's row of ``zonemap.lance`` (min/max as Arrow scalars' python
    values of the column type)."""
    nulls = values.null_count
    if pa.types.is_floating(values.type):
        lo, hi, nans = _float_bounds(values)
    else:
        nans = 0
        if nulls == len(values):
            lo = hi = None
        else:
            mm = pc.min_max(values)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return {"min": lo, "max": hi, "null_count": nulls, "nan_count": nans, "fragment_id": fragment_id,
            "zone_start": start, "zone_length": len(values)}


def fragment_zones(store, schema, column: str, frag) -> pa.Table:
    """Zone statistics of one fragment's ``column`` (all physical rows)."""
    return fragment_zones_of(store, schema, [column], frag)[column]


def bloom_schema() -> pa.Schema:
    """``bloomfilter.lance`` as pylance 14 writes it (schema and metadata)."""
    return pa.schema([
        pa.field("fragment_id", pa.uint64(), False),
        pa.field("zone_start", pa.uint64(), False),
        pa.field("zone_length", pa.uint64(), False),
        pa.field("has_null", pa.bool_(), False),
        pa.field("bloom_filter_data", pa.binary(), False),
    ], metadata={"bloomfilter_item": str(bloom.DEFAULT_ITEMS), "null_bitmap": "1",
                 "bloomfilter_probability": str(bloom.DEFAULT_PROBABILITY)})


def bloom_stats(values: pa.Array, fragment_id: int, start: int) -> dict:
    """One zone's row of ``bloomfilter.lance``: the SBBF of its non-null
    values (bit for bit pylance's, :mod:`lance_ops.format.bloom`)."""
    return {"fragment_id": fragment_id, "zone_start": start, "zone_length": len(values),
            "has_null": values.null_count > 0, "bloom_filter_data": bloom.build(bloom.hashes(values))}


def fragment_zones_of(store, schema, columns: list[str], frag, kind: str = "ZONEMAP") -> dict[str, pa.Table]:
    """Zone statistics (``kind`` ZONEMAP) or bloom filters (BLOOMFILTER) of
    one fragment's ``columns``, one scan for all of them. Zones are cut as
    pylance 14 cuts them: every 8192 *live* rows, ``zone_start`` the physical
    offset of the first, ``zone_length`` the physical span to the last (rows
    deleted in between count in the span, not in the statistics), so on a
    table with deletions too our files equal pylance's."""
    from ..format.scan import ROW_ADDR, FragmentScan, scan_fragment

    stats = bloom_stats if kind == "BLOOMFILTER" else zone_stats
    nulls: dict[str, list] = {c: [] for c in columns}
    rows: dict[str, list] = {c: [] for c in columns}
    chunks: dict[str, list] = {c: [] for c in columns}
    offsets: list = []
    pending = 0

    def flush():
        nonlocal pending
        if pending:
            offs = np.concatenate(offsets) if len(offsets) > 1 else offsets[0]
            first, last = int(offs[0]), int(offs[-1])
            for c in columns:
                arr = pa.concat_arrays(chunks[c]) if len(chunks[c]) > 1 else chunks[c][0]
                row = stats(arr, frag.id, first)
                row["zone_length"] = last - first + 1
                rows[c].append(row)
                if kind == "BLOOMFILTER" and arr.null_count:
                    nulls[c].append(offs[arr.is_null().to_numpy(zero_copy_only=False)])
                chunks[c] = []
            offsets.clear()
            pending = 0

    scan = FragmentScan(frag, list(columns), [ROW_ADDR])
    for batch in scan_fragment(store, schema, scan):
        addrs = batch.column(ROW_ADDR).to_numpy() & np.uint64(0xFFFFFFFF)
        off, n = 0, batch.num_rows
        while off < n:
            take = min(ROWS_PER_ZONE - pending, n - off)
            for c in columns:
                chunks[c].append(batch.column(c).slice(off, take))
            offsets.append(addrs[off:off + take])
            pending += take
            off += take
            if pending == ROWS_PER_ZONE:
                flush()
    flush()
    if kind == "BLOOMFILTER":
        # pylance also keeps the row addresses of the (live) null rows: its
        # IS NULL search answers from them (global buffer "null_bitmap")
        out = {}
        for c in columns:
            offs = BitMap(np.concatenate(nulls[c]).astype(np.uint32)) if nulls[c] else BitMap()
            meta = dict(bloom_schema().metadata)
            meta[b"null_offsets"] = offs.serialize()
            out[c] = pa.Table.from_pylist(rows[c], schema=bloom_schema().with_metadata(meta))
        return out
    return {c: pa.Table.from_pylist(rows[c], schema=zone_schema(schema.field(c).arrow_type())) for c in columns}


def compute_zones(spark, snap: Snapshot, column: str, fragments) -> pa.Table:
    """Zone maps of ``fragments``, computed in executors (one task per group
    of fragments); only the statistics come back."""
    return compute_zones_of(spark, snap, [column], fragments)[column]


def compute_zones_of(spark, snap: Snapshot, columns: list[str], fragments, kind: str = "ZONEMAP") -> dict[str, pa.Table]:
    """Zone maps (or bloom filters: ``kind``) of ``columns`` over
    ``fragments`` in ONE Spark job (one scan of the columns per fragment);
    column -> zones sorted by fragment, start."""
    from ..spark.frames import total_cores

    columns = list(dict.fromkeys(columns))
    empty = {c: (bloom_schema() if kind == "BLOOMFILTER" else zone_schema(snap.schema.field(c).arrow_type()))
             .empty_table() for c in columns}
    frags = [f for f in fragments if f.physical_rows]
    if not frags or not columns:
        return empty
    store, schema = snap.store, snap.schema
    blobs = spark.createDataFrame([(f.SerializeToString(),) for f in frags], "fragment binary")
    blobs = blobs.repartition(max(1, min(len(frags), total_cores(spark) * 2)))

    @executor_task
    def task(batches):
        for b in batches:
            out = []
            for raw in b.column(0).to_pylist():
                zones = fragment_zones_of(store, schema, columns, table_pb2.DataFragment.FromString(raw), kind)
                for z in zones.values():
                    sink = pa.BufferOutputStream()
                    with pa.ipc.new_stream(sink, z.schema) as w:
                        w.write_table(z)
                    out.append(sink.getvalue().to_pybytes())
            yield pa.RecordBatch.from_pydict({"zones": pa.array(out, pa.binary())})

    with executor_errors():
        rows = blobs.mapInArrow(task, "zones binary").collect()
    blobs_out = [pa.ipc.open_stream(bytes(r[0])).read_all() for r in rows]
    result = {}
    for i, c in enumerate(columns):  # (each fragment's tables come in column order)
        mine = blobs_out[i::len(columns)]
        null_map = {}
        if kind == "BLOOMFILTER":
            for t in mine:
                offs = BitMap.deserialize(t.schema.metadata[b"null_offsets"])
                if offs and t.num_rows:
                    null_map[int(t.column("fragment_id")[0].as_py())] = offs
            mine = [t.replace_schema_metadata(bloom_schema().metadata) for t in mine]
        t = pa.concat_tables(mine) if mine else empty[c]
        t = t.sort_by([("fragment_id", "ascending"), ("zone_start", "ascending")])
        if kind == "BLOOMFILTER":
            t = with_null_map(t, null_map)
        result[c] = t
    return result


def with_null_map(zones: pa.Table, null_map: dict) -> pa.Table:
    """Bloom filter zones carrying their null rows (fragment id -> offsets)
    in the schema metadata until :func:`write_zonemap` writes them."""
    from ..format.indexremap import encode_row_addr_map

    meta = dict(zones.schema.metadata or {})
    meta[b"null_map"] = encode_row_addr_map(dict(sorted(null_map.items())))
    return zones.replace_schema_metadata(meta)


def null_map_of(zones: pa.Table) -> dict:
    from ..format.indexremap import decode_row_addr_map

    raw = (zones.schema.metadata or {}).get(b"null_map")
    return decode_row_addr_map(raw) if raw else {}


def write_zonemap(store, directory: str, zones: pa.Table, file_name: str = ZONEMAP_FILE) -> int:
    import lance.file as lf

    rel = f"{directory}/{file_name}"
    staging = store.codec_staging()
    uri = staging.writer_uri(rel)
    meta = dict(zones.schema.metadata or {})
    null_map = meta.pop(b"null_map", None)
    zones = zones.replace_schema_metadata(meta)
    schema = zones.schema
    w = lf.LanceFileWriter(uri, schema, version=INDEX_FILE_VERSION, storage_options=store.codec_options or None)
    for b in zones.to_batches():
        w.write_batch(b)
    if meta.get(b"null_bitmap") == b"1":
        # pylance 14's bloom filter files hold the row addresses of the null
        # rows in global buffer 1 (metadata "null_bitmap"); its IS NULL
        # search answers from them
        assert w.add_global_buffer(null_map or NO_NULLS) == 1
    w.close()
    staging.finish_write(rel, uri)
    return store.size(rel)


def new_zonemap_index(spark, snap: Snapshot, column: str, name: str, fragments, previous: pa.Table | None = None):
    """Compute and write a zone map over ``fragments`` (plus ``previous``
    zones kept as they are); returns its IndexMetadata."""
    zones = compute_zones(spark, snap, column, fragments)
    if previous is not None and previous.num_rows:
        zones = pa.concat_tables([previous.cast(zones.schema), zones])
    return written_index(snap, column, name, fragments, zones, "ZONEMAP")


#: Global buffer 1 of pylance 14's bloomfilter.lance ("null_bitmap") when no row is null.
NO_NULLS = b"\x00\x00\x00\x00"
#: BloomFilterIndexDetails as pylance 14 writes it (no fields).
BLOOMFILTER_DETAILS = any_pb2.Any(type_url="/lance.index.pb.BloomFilterIndexDetails", value=b"")


INDEX_TYPES = ("ZONEMAP", "BLOOMFILTER", "BITMAP", "BTREE")


def written_index(snap: Snapshot, column: str, name: str, fragments, zones: pa.Table, kind: str):
    """Write ``zones`` (ZONEMAP or BLOOMFILTER rows) as a new index on
    ``column`` covering ``fragments``; its IndexMetadata."""
    file_name, details = (BLOOMFILTER_FILE, BLOOMFILTER_DETAILS) if kind == "BLOOMFILTER" else (
        ZONEMAP_FILE, ZONEMAP_DETAILS)
    uid = uuid_mod.uuid4()
    size = write_zonemap(snap.store, f"_indices/{uid}", zones, file_name)
    covered = BitMap(int(f) for f in pc.unique(zones.column("fragment_id")).to_pylist())
    covered |= BitMap(f.id for f in fragments)
    return index_metadata(snap, column, name, uid, covered, details, [(file_name, size)])


def index_metadata(snap: Snapshot, column: str, name: str, uid: uuid_mod.UUID, covered: BitMap,
                   details: any_pb2.Any, files: list[tuple[str, int]], index_version: int = 0):
    """The IndexMetadata of a new index ``name`` on ``column`` (files written
    under ``_indices/<uid>``) covering the fragment ids ``covered``."""
    meta = table_pb2.IndexMetadata(
        name=name, fields=[snap.schema.field(column).id], dataset_version=snap.version,
        fragment_bitmap=covered.serialize(), index_version=index_version, created_at=int(time.time() * 1000),
    )
    meta.uuid.uuid = uid.bytes
    meta.index_details.CopyFrom(details)
    meta.files.extend(table_pb2.IndexFile(path=p, size_bytes=s) for p, s in files)
    return meta


#: BitmapIndexDetails as pylance 14 writes it (no fields).
BITMAP_DETAILS = any_pb2.Any(type_url="/lance.table.BitmapIndexDetails", value=b"")


def new_bitmap_index(spark, snap: Snapshot, column: str, name: str, fragments):
    """Build a BITMAP on ``column`` over ``fragments`` (executors write its
    file); its IndexMetadata, covering ``fragments``."""
    uid = uuid_mod.uuid4()
    size = build_bitmap_file(spark, snap, column, list(fragments), f"_indices/{uid}")
    return index_metadata(snap, column, name, uid, BitMap(f.id for f in fragments), BITMAP_DETAILS,
                          [(BITMAP_FILE, size)])


def build_bitmap_file(spark, snap: Snapshot, column: str, fragments, directory: str) -> int:
    """``directory``/bitmap_page_lookup.lance for ``column`` over the live
    rows of ``fragments`` (:func:`build_in_one_job`); returns its size."""
    from ..format.bitmap_build import bitmap_file_table, empty_partial, partial_bitmaps

    key_type, store = snap.schema.field(column).arrow_type(), snap.store  # (what the tasks pickle)

    def write(parts: list[pa.Table]) -> int:
        return write_zonemap(store, directory, bitmap_file_table(parts, key_type), BITMAP_FILE)

    return int(build_in_one_job(
        spark, snap, column, fragments, by_row_id=snap.stable_row_ids,
        partial=lambda values, ids: partial_bitmaps(values, ids), empty=lambda: empty_partial(key_type),
        write=write))


def build_btree_files(spark, snap: Snapshot, column: str, fragments, directory: str) -> list[tuple[str, int]]:
    """``directory``/page_data.lance and page_lookup.lance for ``column`` over
    the live rows of ``fragments`` (:func:`build_in_one_job`: the sort of
    every (value, row address) runs in the one writing task, as pylance's
    build sorts on one machine); returns (file, size) of each."""
    from ..format.btree_build import BTREE_DATA_FILE, BTREE_LOOKUP_FILE, btree_tables, pairs, pairs_schema

    key_type, store = snap.schema.field(column).arrow_type(), snap.store  # (what the tasks pickle)

    def write(parts: list[pa.Table]) -> list:
        data, lookup = btree_tables(parts, key_type)
        return [[name, write_zonemap(store, directory, t, name)]
                for name, t in ((BTREE_DATA_FILE, data), (BTREE_LOOKUP_FILE, lookup))]

    files = build_in_one_job(
        spark, snap, column, fragments, by_row_id=False,  # (addresses also with stable row ids)
        partial=lambda values, ids: pairs(values, ids, key_type), empty=lambda: pairs_schema(key_type).empty_table(),
        write=write)
    return [(name, int(size)) for name, size in files]


def build_in_one_job(spark, snap: Snapshot, column: str, fragments, *, by_row_id: bool, partial, empty, write):
    """An index file built from ``column`` over the live rows of
    ``fragments`` in ONE Spark job: tasks turn each fragment's values and
    row ids (``by_row_id``) or addresses into ``partial(values, ids)``
    tables (Arrow IPC), then ONE task gathers them and calls ``write(parts)``
    (an index file is one file: never through the driver); returns what
    ``write`` returned (JSON-able: file sizes, never rows)."""
    from ..format.scan import ROW_ADDR, ROW_ID, FragmentScan, scan_fragment
    from ..spark.frames import total_cores

    store, schema = snap.store, snap.schema
    stable = snap.stable_row_ids
    meta = ROW_ID if by_row_id else ROW_ADDR
    frags = [f for f in fragments if f.physical_rows]
    if not frags:  # nothing to read: the (empty) file is written here
        return write([])

    @executor_task
    def partials(batches):
        for b in batches:
            out = []
            for raw in b.column(0).to_pylist():
                frag = table_pb2.DataFragment.FromString(raw)
                scan = FragmentScan(frag, [column], [meta], stable_row_ids=stable)
                parts = [partial(rb.column(column), rb.column(meta).to_numpy())
                         for rb in scan_fragment(store, schema, scan)]
                t = pa.concat_tables(parts) if parts else empty()
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, t.schema) as w:
                    w.write_table(t)
                out.append(sink.getvalue().to_pybytes())
            yield pa.RecordBatch.from_pydict({"part": pa.array(out, pa.binary())})

    @executor_task
    def gather_and_write(batches):
        parts = [pa.ipc.open_stream(raw).read_all() for b in batches for raw in b.column(0).to_pylist()]
        yield pa.RecordBatch.from_pydict({"result": [json.dumps(write(parts))]})

    blobs = spark.createDataFrame([(f.SerializeToString(),) for f in frags], "fragment binary")
    blobs = blobs.repartition(max(1, min(len(frags), total_cores(spark) * 2)))
    with executor_errors():
        rows = (blobs.mapInArrow(partials, "part binary").repartition(1)
                .mapInArrow(gather_and_write, "result string").collect())
    return json.loads(rows[0][0])


#: BTreeIndexDetails as pylance 14 writes it (no fields).
BTREE_DETAILS = any_pb2.Any(type_url="/lance.table.BTreeIndexDetails", value=b"")
#: pylance 14 gives a BTREE index_version 1 on a stable-row-id table (0
#: otherwise): its files hold row *addresses* there, and a version-0 BTREE
#: would be searched as if they were row ids (checked: pylance then finds
#: nothing).
BTREE_VERSION_STABLE_ROW_IDS = 1


def new_btree_index(spark, snap: Snapshot, column: str, name: str, fragments):
    """Build a BTREE on ``column`` over ``fragments`` (executors write its
    files); its IndexMetadata, covering ``fragments``."""
    uid = uuid_mod.uuid4()
    files = build_btree_files(spark, snap, column, list(fragments), f"_indices/{uid}")
    return index_metadata(snap, column, name, uid, BitMap(f.id for f in fragments), BTREE_DETAILS, files,
                          index_version=BTREE_VERSION_STABLE_ROW_IDS if snap.stable_row_ids else 0)


#: Index types built whole over the fragments they cover (one file of every
#: row, never through the driver), by type name.
WHOLE_BUILDS = {"BITMAP": new_bitmap_index, "BTREE": new_btree_index}


def create_index(spark, snapshot: Snapshot, column, index_type: str, name: str | None):
    """``column``: a name, or a list of names -- one index each (``<col>_idx``),
    all computed in ONE Spark job (one scan of the columns) and committed in
    one ``CreateIndex``."""
    kind = str(index_type).upper()
    if kind not in INDEX_TYPES:
        raise InvalidArgumentError(f"unknown index type {index_type!r}; one of {INDEX_TYPES}")
    columns = [column] if isinstance(column, str) else list(column)
    if not columns or len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"createIndex needs one column or a list of distinct columns, got {column!r}")
    if name is not None and len(columns) > 1:
        raise InvalidArgumentError("name= names the index of ONE column; several columns get <column>_idx each")
    for c in columns:
        if c not in snapshot.schema.names:
            raise InvalidArgumentError(f"cannot index unknown column {c!r}; columns: {snapshot.schema.names}")
        if kind == "BLOOMFILTER" and not bloom.hashable(snapshot.schema.field(c).arrow_type()):
            raise InvalidArgumentError(
                f"a BLOOMFILTER cannot index column {c!r} of type {snapshot.schema.field(c).arrow_type()} "
                "(integers, floats, strings, binary, dates, times and timestamps)"
            )
        if kind in ("BITMAP", "BTREE") and not prunable_type(snapshot.schema.field(c).arrow_type()):
            raise InvalidArgumentError(
                f"a {kind} cannot index column {c!r} of type {snapshot.schema.field(c).arrow_type()} "
                "(integers, floats, booleans, strings, dates and timestamps)"
            )
    names = {c: (name or f"{c}_idx") for c in columns}

    def prepare(snap: Snapshot) -> StagedCommit:
        for c in columns:
            if c not in snap.schema.names:
                raise InvalidArgumentError(f"column {c!r} no longer exists")
        frags = list(snap.fragments)
        if kind in WHOLE_BUILDS:
            metas = [WHOLE_BUILDS[kind](spark, snap, c, names[c], frags) for c in columns]
        else:
            zones = compute_zones_of(spark, snap, columns, frags, kind)
            metas = [written_index(snap, c, names[c], frags, zones[c], kind) for c in columns]
        removed = [i for i in snap.indices if i.name in set(names.values())]
        op = CreateIndex(metas, removed)
        metrics = {"numIndexedFragments": len(covered_fragments(metas[0])), "numIndexedRows": snap.num_rows(),
                   "bytesWritten": sum(f.size_bytes for m in metas for f in m.files)}
        return StagedCommit(op, metrics, {"index": ",".join(names.values()), "column": ",".join(columns),
                                          "type": kind})

    return prepare


def drop_index(snapshot: Snapshot, name: str):
    if not any(i.name == name for i in snapshot.indices):
        raise InvalidArgumentError(f"no index named {name!r}; indices: {sorted({i.name for i in snapshot.indices})}")

    def prepare(snap: Snapshot) -> StagedCommit:
        removed = [i for i in snap.indices if i.name == name]
        if not removed:
            raise InvalidArgumentError(f"index {name!r} was dropped concurrently")
        return StagedCommit(CreateIndex([], removed), {"numRemovedIndices": len(removed)}, {"index": name})

    return prepare


def list_indices(snapshot: Snapshot) -> list[dict]:
    by_id = {f.id: f.name for f in snapshot.schema.walk()}
    return [
        {
            "name": i.name,
            "type": TYPE_NAMES.get(index_kind(i), index_kind(i) or "UNKNOWN"),
            "columns": [by_id.get(fid, str(fid)) for fid in i.fields],
            "fragmentIds": sorted(covered_fragments(i)),
            "uuid": str(uuid_mod.UUID(bytes=bytes(i.uuid.uuid))),
            "datasetVersion": i.dataset_version,
        }
        for i in snapshot.indices
    ]


def update_indices(spark, snapshot: Snapshot):
    """``optimize().executeIndexUpdate()``: every zone map or bloom filter
    (:func:`buildable`) that does not cover all live fragments is rewritten as
    one index with its old zones (of fragments that still exist; a bloom
    filter's null rows too) plus zones of the fragments it lacks -- for bloom
    filters bit for bit what pylance's ``optimize_indices`` writes. A BITMAP
    or BTREE lacking fragments is rebuilt over all live ones. Other index
    types are left alone (reported in ``indicesSkipped``)."""

    def prepare(snap: Snapshot) -> StagedCommit | None:
        live = {f.id: f for f in snap.fragments}
        by_name: dict[str, list] = {}
        for i in snap.indices:
            by_name.setdefault(i.name, []).append(i)
        new, removed, skipped, added = [], [], [], 0
        for name, group in sorted(by_name.items()):
            kinds = {index_kind(i) for i in group}
            if len(kinds) == 1 and all(whole_buildable(snap, i) for i in group):
                covered = set().union(*(covered_fragments(i) for i in group))
                if set(live) - covered:
                    # a bitmap / btree is rebuilt whole over the live
                    # fragments (pylance merges the new rows into the old
                    # files: same rows, minus those deleted since)
                    column = {f.id: f.name for f in snap.schema.fields}[group[0].fields[0]]
                    build = WHOLE_BUILDS[TYPE_NAMES[kinds.pop()]]
                    new.append(build(spark, snap, column, name, list(live.values())))
                    removed.extend(group)
                    added += len(set(live) - covered)
                continue
            if len(kinds) != 1 or not all(buildable(snap, i) for i in group):
                skipped.append(name)
                continue
            covered = set().union(*(covered_fragments(i) for i in group))
            missing = [live[f] for f in sorted(set(live) - covered)]
            if not missing:
                continue
            by_id = {f.id: f for f in snap.schema.walk()}
            field = by_id.get(group[0].fields[0])
            if field is None or field.name not in snap.schema.names:
                skipped.append(name)
                continue
            kind = _kind_name(group[0])
            keep = covered & set(live)
            fresh = compute_zones_of(spark, snap, [field.name], missing, kind)[field.name]
            zones = combined_zones([kept_zones(snap, i, keep) for i in group] + [fresh])
            meta = written_index(snap, field.name, name, missing, zones, kind)
            meta.fragment_bitmap = (BitMap(covered & set(live)) | BitMap(f.id for f in missing)).serialize()
            new.append(meta)
            removed.extend(group)
            added += len(missing)
        if not new:
            return None
        metrics = {"numUpdatedIndices": len(new), "numAddedFragments": added, "indicesSkipped": ",".join(skipped)}
        return StagedCommit(CreateIndex(new, removed), metrics, {"indices": ",".join(i.name for i in new)})

    return prepare


def kept_zones(snap: Snapshot, idx, keep: set[int]) -> pa.Table:
    """The zones (ZONEMAP rows, or BLOOMFILTER rows with their null rows) of
    index ``idx`` on fragments ``keep``, in the schema new zones are written
    with."""
    from ..format.zones import BLOOMFILTER, _read_table, read_null_map

    keep_arr = pa.array(sorted(keep), pa.uint64())
    if index_kind(idx) == BLOOMFILTER:
        t = _read_table(snap.store, idx, BLOOMFILTER_FILE)
        t = t.filter(pc.is_in(t.column("fragment_id"), keep_arr)).replace_schema_metadata(None).cast(bloom_schema())
        nulls = {f: m for f, m in read_null_map(snap.store, idx).items() if f in keep}
        return with_null_map(t, nulls)
    column = {f.id: f for f in snap.schema.fields}[idx.fields[0]]
    t = _read_table(snap.store, idx, ZONEMAP_FILE).replace_schema_metadata(None)
    return t.filter(pc.is_in(t.column("fragment_id"), keep_arr)).cast(zone_schema(column.arrow_type()))


def combined_zones(parts: list[pa.Table]) -> pa.Table:
    """Zone tables concatenated (bloom filter ones with their null rows
    merged), sorted by fragment and start."""
    parts = [p for p in parts if p is not None]
    nulls: dict = {}
    for p in parts:
        nulls.update(null_map_of(p))
    bloomy = any(b"null_map" in (p.schema.metadata or {}) for p in parts)
    meta = parts[0].schema.metadata
    t = pa.concat_tables([p.replace_schema_metadata(meta) for p in parts])
    t = t.sort_by([("fragment_id", "ascending"), ("zone_start", "ascending")])
    return with_null_map(t, nulls) if bloomy else t


def buildable(snap: Snapshot, idx) -> bool:
    """A ZONEMAP / BLOOMFILTER on one top-level column of a type lance_ops
    computes (others -- pylance's on other types -- are left to pylance's
    rules)."""
    top = {f.id: f for f in snap.schema.fields}
    if len(idx.fields) != 1 or idx.fields[0] not in top:
        return False
    t = top[idx.fields[0]].arrow_type()
    kind = index_kind(idx)
    return (kind == ZONEMAP and prunable_type(t)) or (kind == BLOOMFILTER and bloom.hashable(t))


def whole_buildable(snap: Snapshot, idx) -> bool:
    """A BITMAP or BTREE on one top-level column of a type lance_ops builds
    them for (built whole: :data:`WHOLE_BUILDS`)."""
    top = {f.id: f for f in snap.schema.fields}
    return (index_kind(idx) in (BITMAP, BTREE) and len(idx.fields) == 1 and idx.fields[0] in top
            and prunable_type(top[idx.fields[0]].arrow_type()))


def zonemaps_to_rebuild(snap: Snapshot, rewritten_ids: BitMap) -> list:
    """Zone maps and bloom filters (:func:`buildable`) covering a fragment a
    compaction rewrites: compaction rebuilds them over its new fragments."""
    return [
        idx for idx in snap.indices
        if buildable(snap, idx) and idx.fragment_bitmap and BitMap.deserialize(idx.fragment_bitmap) & rewritten_ids
    ]


def rebuild_zonemaps(spark, snap: Snapshot, indices, groups, new_frags) -> list:
    """Compaction's zone maps: for each of ``indices`` (:func:`zonemaps_to_rebuild`)
    a new ``zonemap.lance`` = its zones of fragments the compaction left alone
    + zones of the new fragments of every group whose old fragments it all
    covered (computed in executors, one job for every column), named in the
    Rewrite as a ``RewrittenIndex``: the build then swaps each such group's
    old fragment ids for its new ones in the bitmap (pylance's rule for
    rewritten indices), so the compacted table stays indexed -- pylance
    itself leaves zone maps narrowed (stable row ids) or stale."""
    from ..format.proto.transaction_pb2 import Transaction

    old_ids = BitMap(f.id for g in groups for f in g)
    by_id = {f.id: f.name for f in snap.schema.fields}
    plans = []
    for idx in indices:
        bm = BitMap.deserialize(idx.fragment_bitmap)
        new = [f for old, news in zip(groups, new_frags) if BitMap(f.id for f in old).issubset(bm) for f in news]
        plans.append((idx, by_id[idx.fields[0]], bm - old_ids, new))
    frags = {f.id: f for _, _, _, new in plans for f in new}
    fresh: dict = {}
    for kind in ("ZONEMAP", "BLOOMFILTER"):
        columns = sorted({c for idx, c, _, new in plans if new and _kind_name(idx) == kind})
        if columns:
            fresh[kind] = compute_zones_of(spark, snap, columns, list(frags.values()), kind)
    out = []
    for idx, column, kept, new in plans:
        kind = _kind_name(idx)
        parts = [kept_zones(snap, idx, set(kept))]
        if new:
            ids = {f.id for f in new}
            mine = fresh[kind][column]
            part = mine.filter(pc.is_in(mine.column("fragment_id"), pa.array(sorted(ids), pa.uint64())))
            if kind == "BLOOMFILTER":
                part = with_null_map(part, {f: m for f, m in null_map_of(mine).items() if f in ids})
            parts.append(part)
        zones = combined_zones(parts)
        file_name, details = (BLOOMFILTER_FILE, BLOOMFILTER_DETAILS) if kind == "BLOOMFILTER" else (
            ZONEMAP_FILE, ZONEMAP_DETAILS)
        uid = uuid_mod.uuid4()
        size = write_zonemap(snap.store, f"_indices/{uid}", zones, file_name)
        out.append(Transaction.Rewrite.RewrittenIndex(
            old_id=idx.uuid, new_id=table_pb2.UUID(uuid=uid.bytes), new_index_details=details,
            new_index_version=idx.index_version, files=[table_pb2.IndexFile(path=file_name, size_bytes=size)],
        ))
    return out


def _kind_name(idx) -> str:
    return "BLOOMFILTER" if index_kind(idx) == BLOOMFILTER else "ZONEMAP"
