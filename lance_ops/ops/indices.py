"""Scalar indices: ``createIndex`` (ZONEMAP), ``dropIndex``, ``listIndices``,
``optimize().executeIndexUpdate()``.

A zone map is computed per fragment in executors (a ``mapInArrow`` over the
fragments' metadata: each task reads just the indexed column of its
fragments and returns one small Arrow IPC blob of zone statistics per
fragment); the driver writes ``_indices/<uuid>/zonemap.lance`` with pylance
14's schema and metadata and commits a ``CreateIndex`` transaction through
the pipeline, so pylance lists it, plans scalar index queries with it and
extends it (``optimize_indices``).

Zones tile each fragment's *physical* rows, 8192 per zone: ``zone_start`` is
the zone's first offset, ``zone_length`` its span. Rows deleted when the index
is built are inside the stats (pylance leaves them out): bounds stay bounds,
just a little wider, and counts are upper bounds -- pruning only needs that.
Float min/max follow pylance's total order (max NaN when the zone holds a
NaN, -0.0 below +0.0) so pylance's own search over our files is right.
"""
from __future__ import annotations

import time
import uuid as uuid_mod

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import any_pb2
from pyroaring import BitMap

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..format.proto import table_pb2
from ..format.zones import TYPE_NAMES, ZONEMAP, ZONEMAP_FILE, covered_fragments, index_kind
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
    from ..format.scan import FragmentScan, scan_fragment

    t = schema.field(column).arrow_type()
    rows = []
    chunks, pending, start = [], 0, 0
    scan = FragmentScan(frag, [column], (), include_deleted=True)

    def flush():
        nonlocal chunks, pending, start
        if pending:
            arr = pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]
            rows.append(zone_stats(arr, frag.id, start))
            start += pending
            chunks, pending = [], 0

    for batch in scan_fragment(store, schema, scan):
        col = batch.column(column)
        off = 0
        while off < len(col):
            take = min(ROWS_PER_ZONE - pending, len(col) - off)
            chunks.append(col.slice(off, take))
            pending += take
            off += take
            if pending == ROWS_PER_ZONE:
                flush()
    flush()
    return pa.Table.from_pylist(rows, schema=zone_schema(t))


def compute_zones(spark, snap: Snapshot, column: str, fragments) -> pa.Table:
    """Zone maps of ``fragments``, computed in executors (one task per group
    of fragments); only the statistics come back."""
    from ..spark.frames import total_cores

    vtype = snap.schema.field(column).arrow_type()
    frags = [f for f in fragments if f.physical_rows]
    if not frags:
        return zone_schema(vtype).empty_table()
    store, schema = snap.store, snap.schema
    blobs = spark.createDataFrame([(f.SerializeToString(),) for f in frags], "fragment binary")
    blobs = blobs.repartition(max(1, min(len(frags), total_cores(spark) * 2)))

    @executor_task
    def task(batches):
        for b in batches:
            out = []
            for raw in b.column(0).to_pylist():
                z = fragment_zones(store, schema, column, table_pb2.DataFragment.FromString(raw))
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, z.schema) as w:
                    w.write_table(z)
                out.append(sink.getvalue().to_pybytes())
            yield pa.RecordBatch.from_pydict({"zones": pa.array(out, pa.binary())})

    with executor_errors():
        rows = blobs.mapInArrow(task, "zones binary").collect()
    tables = [pa.ipc.open_stream(bytes(r[0])).read_all() for r in rows]
    out = pa.concat_tables(tables) if tables else zone_schema(vtype).empty_table()
    return out.sort_by([("fragment_id", "ascending"), ("zone_start", "ascending")])


def write_zonemap(store, directory: str, zones: pa.Table) -> int:
    import lance.file as lf

    rel = f"{directory}/{ZONEMAP_FILE}"
    staging = store.codec_staging()
    uri = staging.writer_uri(rel)
    schema = zones.schema
    w = lf.LanceFileWriter(uri, schema, version=INDEX_FILE_VERSION, storage_options=store.codec_options or None)
    for b in zones.to_batches():
        w.write_batch(b)
    w.close()
    staging.finish_write(rel, uri)
    return store.size(rel)


def new_zonemap_index(spark, snap: Snapshot, column: str, name: str, fragments, previous: pa.Table | None = None):
    """Compute and write a zone map over ``fragments`` (plus ``previous``
    zones kept as they are); returns its IndexMetadata."""
    zones = compute_zones(spark, snap, column, fragments)
    if previous is not None and previous.num_rows:
        zones = pa.concat_tables([previous.cast(zones.schema), zones])
    uid = uuid_mod.uuid4()
    size = write_zonemap(snap.store, f"_indices/{uid}", zones)
    covered = BitMap(int(f) for f in pc.unique(zones.column("fragment_id")).to_pylist())
    covered |= BitMap(f.id for f in fragments)
    meta = table_pb2.IndexMetadata(
        name=name, fields=[snap.schema.field(column).id], dataset_version=snap.version,
        fragment_bitmap=covered.serialize(), index_version=0, created_at=int(time.time() * 1000),
    )
    meta.uuid.uuid = uid.bytes
    meta.index_details.CopyFrom(ZONEMAP_DETAILS)
    meta.files.append(table_pb2.IndexFile(path=ZONEMAP_FILE, size_bytes=size))
    return meta


INDEX_TYPES = ("ZONEMAP", "BLOOMFILTER", "BITMAP")


def create_index(spark, snapshot: Snapshot, column: str, index_type: str, name: str | None):
    kind = str(index_type).upper()
    if kind not in INDEX_TYPES:
        raise InvalidArgumentError(f"unknown index type {index_type!r}; one of {INDEX_TYPES}")
    if kind != "ZONEMAP":
        raise UnsupportedFeatureError(
            f"lance_ops builds ZONEMAP indices only (so far); {kind} indices that pylance builds are read and "
            "used for skipping"
        )
    if column not in snapshot.schema.names:
        raise InvalidArgumentError(f"cannot index unknown column {column!r}; columns: {snapshot.schema.names}")
    name = name or f"{column}_idx"

    def prepare(snap: Snapshot) -> StagedCommit:
        if column not in snap.schema.names:
            raise InvalidArgumentError(f"column {column!r} no longer exists")
        removed = [i for i in snap.indices if i.name == name]
        meta = new_zonemap_index(spark, snap, column, name, list(snap.fragments))
        op = CreateIndex([meta], removed)
        metrics = {"numIndexedFragments": len(covered_fragments(meta)), "numIndexedRows": snap.num_rows(),
                   "bytesWritten": meta.files[0].size_bytes}
        return StagedCommit(op, metrics, {"index": name, "column": column, "type": kind})

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
    """``optimize().executeIndexUpdate()``: every zone map that does not cover
    all live fragments is rewritten as one index with its old zones (of
    fragments that still exist) plus zones of the fragments it lacks.
    Other index types are left alone (reported in ``indicesSkipped``)."""
    from ..format.zones import _read_table

    def prepare(snap: Snapshot) -> StagedCommit | None:
        live = {f.id: f for f in snap.fragments}
        by_name: dict[str, list] = {}
        for i in snap.indices:
            by_name.setdefault(i.name, []).append(i)
        new, removed, skipped, added = [], [], [], 0
        for name, group in sorted(by_name.items()):
            if any(index_kind(i) != ZONEMAP or len(i.fields) != 1 for i in group):
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
            old = [_read_table(snap.store, i, ZONEMAP_FILE) for i in group]
            old = [t.filter(pc.is_in(t.column("fragment_id"), pa.array(sorted(covered & set(live)), pa.uint64())))
                   for t in old]
            previous = pa.concat_tables([t.replace_schema_metadata(None) for t in old]) if old else None
            meta = new_zonemap_index(spark, snap, field.name, name, missing, previous)
            meta.fragment_bitmap = (BitMap(covered & set(live)) | BitMap(f.id for f in missing)).serialize()
            new.append(meta)
            removed.extend(group)
            added += len(missing)
        if not new:
            return None
        metrics = {"numUpdatedIndices": len(new), "numAddedFragments": added, "indicesSkipped": ",".join(skipped)}
        return StagedCommit(CreateIndex(new, removed), metrics, {"indices": ",".join(i.name for i in new)})

    return prepare
