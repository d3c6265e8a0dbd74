"""Keeping scalar indices valid across compaction, as pylance 14 does.

Compaction moves rows to new fragments. What an index needs then depends on
how its files address rows (checked against pylance 14.0.2's own
compaction):

=====================  ===================  ===========================
index type             stable row ids       no stable row ids
=====================  ===================  ===========================
BTREE                  remap (row addresses) remap
BITMAP                 extend (row ids)      remap
ZONEMAP, BLOOMFILTER   narrow                keep (stale bitmap)
anything else          narrow                keep (stale bitmap)
=====================  ===================  ===========================

* **remap**: rewrite the index files with every moved row's old address
  replaced by its new one (rows compaction dropped -- deleted ones -- leave
  the index) into a new index directory; the Rewrite transaction names it
  (``RewrittenIndex``) and the fragment bitmap swaps each group's old ids for
  its new ones;
* **extend**: the files address rows by stable row id, which compaction
  keeps: same files, the bitmap swaps old ids for new ones;
* **narrow**: the bitmap loses the old ids and does not gain the new ones, so
  the new fragments are scanned;
* **keep**: the bitmap is left alone; its old ids name fragments that no
  longer exist, so the new fragments are scanned (pylance leaves zone maps so).

The BTREE layout (pylance 14, index version 1): ``page_data.lance`` holds
``(values, ids)`` sorted by value (nulls first), ``page_lookup.lance`` one row
per page of ``batch_size`` rows (schema metadata) with the page's first and
last value (``min`` / ``max``), its null count and index. BITMAP:
``bitmap_page_lookup.lance`` holds ``(keys, bitmaps)``, each bitmap a
serialized row address tree map (u32 count, then per fragment: u32 fragment
id, u32 byte length, a portable 32-bit roaring bitmap; length 0 = the whole
fragment).
"""
from __future__ import annotations

import struct
import uuid as uuid_mod
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from ..errors import CorruptTableError
from .basepaths import index_location
from .deletion import read_deletion_vector
from .proto import table_pb2

BTREE = "BTreeIndexDetails"
BITMAP = "BitmapIndexDetails"

REMAP, EXTEND, NARROW, KEEP = "remap", "extend", "narrow", "keep"


def index_kind(index: table_pb2.IndexMetadata) -> str:
    """The index type, from its details' type URL ("BTreeIndexDetails", ...)."""
    return index.index_details.type_url.rsplit(".", 1)[-1] if index.HasField("index_details") else ""


def compaction_rule(index: table_pb2.IndexMetadata, stable_row_ids: bool) -> str:
    """What compaction does to ``index`` (the table in the module docstring)."""
    kind = index_kind(index)
    if kind == BTREE:
        return REMAP
    if kind == BITMAP:
        return EXTEND if stable_row_ids else REMAP
    return NARROW if stable_row_ids else KEEP


# ---------------------------------------------------------------- mapping
@dataclass
class AddressMap:
    """Old row address -> new row address of the rows compaction moved;
    ``fragments``: the old fragments (rows of theirs not in the map were
    dropped)."""

    old: np.ndarray  # sorted uint64
    new: np.ndarray  # uint64, aligned with ``old``
    fragments: frozenset

    def apply(self, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(new addresses, keep mask) for ``addrs``: unchanged outside the old
        fragments, mapped inside them, dropped where compaction dropped the
        row."""
        addrs = np.asarray(addrs, dtype=np.uint64)
        out = addrs.copy()
        keep = np.ones(len(addrs), dtype=bool)
        moved = np.isin(addrs >> np.uint64(32), np.fromiter(self.fragments, dtype=np.uint64, count=len(self.fragments)))
        if moved.any():
            sub = addrs[moved]
            pos = np.searchsorted(self.old, sub)
            pos_ok = np.minimum(pos, max(len(self.old) - 1, 0))
            found = (pos < len(self.old)) & (self.old[pos_ok] == sub) if len(self.old) else np.zeros(len(sub), bool)
            mapped = sub.copy()
            mapped[found] = self.new[pos_ok[found]]
            out[moved] = mapped
            keep[np.flatnonzero(moved)[~found]] = False
        return out, keep


def address_map(store, groups) -> AddressMap:
    """The rows' moves of a compaction: each group's old fragments' live rows,
    in order, land in its new fragments, in order (deleted rows dropped)."""
    olds, news, frags = [], [], set()
    for old_frags, new_frags in groups:
        parts = []
        for f in old_frags:
            frags.add(f.id)
            live = np.arange(f.physical_rows, dtype=np.uint64)
            dv = read_deletion_vector(store, f)
            if len(dv):
                live = live[~dv.mask(f.physical_rows)]
            parts.append((np.uint64(f.id) << np.uint64(32)) | live)
        old = np.concatenate(parts) if parts else np.empty(0, np.uint64)
        new = np.concatenate([
            (np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64) for f in new_frags
        ]) if new_frags else np.empty(0, np.uint64)
        if len(old) != len(new):
            raise CorruptTableError(
                f"compaction group of fragments {[f.id for f in old_frags]} has {len(old)} live rows but its new "
                f"fragments hold {len(new)}"
            )
        olds.append(old)
        news.append(new)
    old = np.concatenate(olds) if olds else np.empty(0, np.uint64)
    new = np.concatenate(news) if news else np.empty(0, np.uint64)
    order = np.argsort(old, kind="stable")
    return AddressMap(old[order], new[order], frozenset(frags))


def address_map_by_row_id(store, groups) -> AddressMap:
    """The rows' moves of a rewrite that reorders rows (a Z-order): each old
    fragment's live rows and each new fragment's rows joined by their stable
    row id (the new fragments carry the moved rows' ids)."""
    from .rowids import ROW_IDS, decode_row_ids, sequence_bytes

    old_addr, old_ids, new_addr, new_ids, frags = [], [], [], [], set()
    for old_frags, new_frags in groups:
        for f in old_frags:
            frags.add(f.id)
            live = np.arange(f.physical_rows, dtype=np.uint64)
            dv = read_deletion_vector(store, f)
            if len(dv):
                live = live[~dv.mask(f.physical_rows)]
            ids = decode_row_ids(sequence_bytes(store, f, ROW_IDS) or b"")
            old_addr.append((np.uint64(f.id) << np.uint64(32)) | live)
            old_ids.append(ids[live.astype(np.int64)])
        for f in new_frags:
            new_addr.append((np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64))
            new_ids.append(decode_row_ids(f.inline_row_ids))
    empty = np.empty(0, np.uint64)
    oa, oi = (np.concatenate(old_addr), np.concatenate(old_ids)) if old_addr else (empty, empty)
    na, ni = (np.concatenate(new_addr), np.concatenate(new_ids)) if new_addr else (empty, empty)
    o, n = np.argsort(oi, kind="stable"), np.argsort(ni, kind="stable")
    if len(oi) != len(ni) or not np.array_equal(oi[o], ni[n]):
        raise CorruptTableError(
            f"a rewrite of fragments {sorted(frags)} moved {len(oi)} live rows but its new fragments hold "
            f"{len(ni)} rows with other row ids"
        )
    old, new = oa[o], na[n]
    order = np.argsort(old, kind="stable")
    return AddressMap(old[order], new[order], frozenset(frags))


# ---------------------------------------------------------------- files
def _lf():
    import lance.file as lf

    return lf


def _read(store, rel: str) -> tuple[pa.Table, tuple[int, int]]:
    from .datafile import is_codec_failure

    lf = _lf()
    try:
        uri = store.codec_staging().reader_uri(rel)
        r = lf.LanceFileReader(uri, storage_options=store.codec_options or None)
        meta = r.metadata()
        table = r.read_all().to_table()
    except BaseException as e:  # a missing file, bad bytes, a codec panic
        if not is_codec_failure(e):
            raise
        raise CorruptTableError(f"cannot read index file: {e}", store.path(rel)) from e
    schema = meta.schema
    return table.cast(schema) if table.schema != schema else table.replace_schema_metadata(schema.metadata), (
        meta.major_version, meta.minor_version,
    )


def _write(store, rel: str, table: pa.Table, version: tuple[int, int]) -> int:
    lf = _lf()
    staging = store.codec_staging()
    uri = staging.writer_uri(rel)
    w = lf.LanceFileWriter(uri, table.schema, version=f"{version[0]}.{version[1]}",
                           storage_options=store.codec_options or None)
    for b in table.to_batches():
        w.write_batch(b)
    w.close()
    size = int(w.size_bytes or 0) if hasattr(w, "size_bytes") else 0
    staging.finish_write(rel, uri)
    return size or store.size(rel)


def remap_index(store, index: table_pb2.IndexMetadata, amap: AddressMap) -> table_pb2.IndexMetadata:
    """Write the remapped copy of ``index``'s files into a new index
    directory under ``store``'s own root; returns the new metadata (new uuid,
    files and sizes; fragment bitmap left to the manifest build)."""
    src, src_dir = index_location(store, index)
    new = table_pb2.IndexMetadata()
    new.CopyFrom(index)
    new.ClearField("base_id")
    new.uuid.uuid = uuid_mod.uuid4().bytes
    dst_dir = f"_indices/{uuid_mod.UUID(bytes=new.uuid.uuid)}"
    kind = index_kind(index)
    if kind == BTREE:
        files = _remap_btree(src, src_dir, store, dst_dir, amap)
    elif kind == BITMAP:
        files = _remap_bitmap(src, src_dir, store, dst_dir, amap)
    else:
        raise CorruptTableError(f"index {index.name!r} of type {kind or 'unknown'} cannot be remapped")
    new.ClearField("files")
    new.files.extend(table_pb2.IndexFile(path=p, size_bytes=s) for p, s in files)
    return new


def _remap_btree(src, src_dir, dst, dst_dir, amap: AddressMap) -> list[tuple[str, int]]:
    data, version = _read(src, f"{src_dir}/page_data.lance")
    lookup, lookup_version = _read(src, f"{src_dir}/page_lookup.lance")
    ids, keep = amap.apply(data.column("ids").to_numpy())
    data = data.set_column(data.schema.get_field_index("ids"), data.schema.field("ids"),
                           pa.array(ids, pa.uint64()))
    if not keep.all():
        data = data.filter(pa.array(keep))
    meta = lookup.schema.metadata or {}
    batch = int(meta.get(b"batch_size", b"4096"))
    values = data.column("values")
    starts = list(range(0, data.num_rows, batch))
    mins = [values[s].as_py() for s in starts]
    maxs = [values[min(s + batch, data.num_rows) - 1].as_py() for s in starts]
    nulls = [values.slice(s, batch).null_count for s in starts]
    schema = lookup.schema
    new_lookup = pa.table({
        "min": pa.array(mins, schema.field("min").type),
        "max": pa.array(maxs, schema.field("max").type),
        "null_count": pa.array(nulls, pa.uint32()),
        "page_idx": pa.array(range(len(starts)), pa.uint32()),
    }, schema=schema)
    return [
        ("page_data.lance", _write(dst, f"{dst_dir}/page_data.lance", data, version)),
        ("page_lookup.lance", _write(dst, f"{dst_dir}/page_lookup.lance", new_lookup, lookup_version)),
    ]


def decode_row_addr_map(data: bytes) -> dict[int, BitMap | None]:
    """fragment id -> offsets (None: the whole fragment) of a serialized row
    address tree map."""
    out: dict[int, BitMap | None] = {}
    (n,) = struct.unpack_from("<I", data, 0)
    pos = 4
    for _ in range(n):
        frag, size = struct.unpack_from("<II", data, pos)
        pos += 8
        out[frag] = BitMap.deserialize(data[pos: pos + size]) if size else None
        pos += size
    return out


def encode_row_addr_map(m: dict[int, BitMap | None], serialize=BitMap.serialize) -> bytes:
    """The inverse of :func:`decode_row_addr_map`; ``serialize`` writes one
    fragment's bitmap (an index builder passes roaring-rs' layout)."""
    out = bytearray(struct.pack("<I", len(m)))
    for frag in sorted(m):
        bm = m[frag]
        body = b"" if bm is None else serialize(bm)
        out += struct.pack("<II", frag, len(body)) + body
    return bytes(out)


def _remap_bitmap(src, src_dir, dst, dst_dir, amap: AddressMap) -> list[tuple[str, int]]:
    table, version = _read(src, f"{src_dir}/bitmap_page_lookup.lance")
    remapped = []
    for raw in table.column("bitmaps").to_pylist():
        if raw is None:
            remapped.append(None)
            continue
        m = decode_row_addr_map(raw)
        out: dict[int, BitMap | None] = {f: bm for f, bm in m.items() if f not in amap.fragments}
        addrs = []
        for f, bm in m.items():
            if f not in amap.fragments:
                continue
            if bm is None:  # the whole fragment: every row compaction kept
                lo, hi = np.uint64(f) << np.uint64(32), (np.uint64(f) + np.uint64(1)) << np.uint64(32)
                a, b = np.searchsorted(amap.old, [lo, hi])
                addrs.append(amap.old[a:b])
            else:
                addrs.append((np.uint64(f) << np.uint64(32)) | np.asarray(bm.to_array(), dtype=np.uint64))
        if addrs:
            moved, keep = amap.apply(np.concatenate(addrs))
            moved = moved[keep]
            frags = moved >> np.uint64(32)
            for f in np.unique(frags):
                offs = (moved[frags == f] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
                out[int(f)] = BitMap(offs)
        remapped.append(encode_row_addr_map(out))
    idx = table.schema.get_field_index("bitmaps")
    table = table.set_column(idx, table.schema.field("bitmaps"), pa.array(remapped, table.schema.field("bitmaps").type))
    return [("bitmap_page_lookup.lance", _write(dst, f"{dst_dir}/bitmap_page_lookup.lance", table, version))]
