"""Building a BITMAP index file (``bitmap_page_lookup.lance``) as pylance 14 does.

The file has one row per distinct value of the column: ``keys`` (the column's
Arrow type; the null key holds the null rows) and ``bitmaps`` (the rows
holding that value, a serialized row address tree map,
:func:`lance_ops.format.indexremap.encode_row_addr_map`, whose maps are
roaring-rs bytes, :mod:`.roaring`). Checked against pylance 14.0.2:

* only live rows are in it (rows deleted at build time are not);
* on a table with stable row ids the "addresses" are the rows' *ids* (the map
  key is the id's high 32 bits), otherwise row addresses (fragment id << 32 |
  offset: the map key is the fragment);
* keys are sorted: null first, floats by their total order (-0.0 and +0.0 are
  two keys, NaN is one key, last), strings by bytes;
* schema metadata ``lance:index_stats`` = ``{"num_bitmaps": <rows>}``.

Building is two steps so no single process holds a table's rows: each
executor task turns its fragments' rows into :func:`partial_bitmaps` (one
row per key and map key, the ids as a roaring bitmap), one task merges them
all into the file's table (:func:`bitmap_file_table`). No Spark here.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from .indexremap import encode_row_addr_map
from .roaring import serialize_sorted

BITMAP_FILE = "bitmap_page_lookup.lance"
#: One quiet NaN stands for every NaN (pylance keeps one NaN key).
_NAN_BITS = np.float64("nan").view(np.int64)


def _grouping_array(values: pa.Array) -> pa.Array:
    """``values`` as an array whose equal elements are the index's equal keys:
    floats by their bits (so -0.0 != +0.0), every NaN one value."""
    t = values.type
    if not pa.types.is_floating(t):
        return values
    f = values.cast(pa.float64()) if not pa.types.is_float64(t) else values
    data = f.to_numpy(zero_copy_only=False)
    bits = np.where(np.isnan(data), _NAN_BITS, data.view(np.int64))
    return pa.array(bits, pa.int64(), mask=f.is_null().to_numpy(zero_copy_only=False))


def _key_values(grouped: pa.Array, key_type: pa.DataType) -> pa.Array:
    """The keys back in the column's type from :func:`_grouping_array`'s form."""
    if not pa.types.is_floating(key_type):
        return grouped
    mask = grouped.is_null().to_numpy(zero_copy_only=False)
    floats = grouped.fill_null(0).to_numpy(zero_copy_only=False).view(np.float64)
    return pa.array(floats, pa.float64(), mask=mask).cast(key_type)


def partial_bitmaps(values: pa.Array, ids: np.ndarray) -> pa.Table:
    """Rows of one batch of a column (``values``) with their ids or
    addresses (``ids``, uint64, same length): one output row per (key, high
    32 bits of the ids) with the low 32 bits as a serialized pyroaring
    bitmap -- what an executor ships to the merging task."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if len(values) == 0:
        return empty_partial(values.type)
    enc = pc.dictionary_encode(_grouping_array(values), null_encoding="encode")
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    ids = np.asarray(ids, dtype=np.uint64)
    highs = (ids >> np.uint64(32)).astype(np.int64)
    # one group per (key, high): sort by both, keep the ids' order within
    span = int(highs.max()) + 1
    combined = codes * span + highs
    order = np.argsort(combined, kind="stable")
    combined, ids = combined[order], ids[order]
    cut = np.flatnonzero(np.diff(combined)) + 1
    starts = np.concatenate([[0], cut])
    group_codes, group_highs = np.divmod(combined[starts], span)
    lows = (ids & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    blobs = [BitMap(part).serialize() for part in np.split(lows, cut)]
    keys = _key_values(enc.dictionary, values.type).take(pa.array(group_codes))
    return pa.table({"keys": keys, "high": pa.array(group_highs, pa.uint32()), "lows": pa.array(blobs, pa.binary())})


def empty_partial(key_type: pa.DataType) -> pa.Table:
    return pa.table({"keys": pa.array([], key_type), "high": pa.array([], pa.uint32()),
                     "lows": pa.array([], pa.binary())})


def _total_order(keys: pa.Array) -> np.ndarray:
    """Sort positions of ``keys`` in pylance's order: null first, then
    ascending; floats by total order (-0.0 < +0.0 < NaN)."""
    if pa.types.is_floating(keys.type):
        mask = keys.is_null().to_numpy(zero_copy_only=False)
        bits = keys.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False).view(np.int64)
        total = bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
        return np.lexsort((total, ~mask))
    return pc.array_sort_indices(keys, order="ascending", null_placement="at_start").to_numpy()


def file_schema(key_type: pa.DataType, num_bitmaps: int) -> pa.Schema:
    return pa.schema([pa.field("keys", key_type), pa.field("bitmaps", pa.binary())],
                     metadata={"lance:index_stats": json.dumps({"num_bitmaps": num_bitmaps}, separators=(",", ":"))})


def bitmap_file_table(parts: list[pa.Table], key_type: pa.DataType) -> pa.Table:
    """The rows of ``bitmap_page_lookup.lance`` from every task's
    :func:`partial_bitmaps` (bitmaps of one key and map key are united)."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return file_schema(key_type, 0).empty_table()
    t = pa.concat_tables([p.cast(empty_partial(key_type).schema) for p in parts]).combine_chunks()
    grouped = _grouping_array(t.column("keys").combine_chunks())
    enc = pc.dictionary_encode(grouped, null_encoding="encode")
    codes = enc.indices.to_numpy(zero_copy_only=False)
    highs = t.column("high").to_numpy()
    lows = t.column("lows").to_pylist()
    maps: list[dict[int, BitMap]] = [{} for _ in range(len(enc.dictionary))]
    for code, hi, raw in zip(codes, highs, lows):
        bm = BitMap.deserialize(raw)
        m = maps[code]
        if hi in m:
            m[int(hi)] |= bm
        else:
            m[int(hi)] = bm
    keys = _key_values(enc.dictionary, key_type)
    order = _total_order(keys)
    blobs = [encode_maps(maps[i]) for i in order]
    return pa.table({"keys": keys.take(pa.array(order)), "bitmaps": pa.array(blobs, pa.binary())},
                    schema=file_schema(key_type, len(blobs)))


def _serialize_as_roaring_rs(bm: BitMap) -> bytes:
    """pylance's bytes for a bitmap (:mod:`.roaring`), not pyroaring's."""
    return serialize_sorted(np.asarray(bm.to_array(), dtype=np.uint32))


def encode_maps(m: dict[int, BitMap]) -> bytes:
    return encode_row_addr_map(m, serialize=_serialize_as_roaring_rs)


__all__ = ["BITMAP_FILE", "partial_bitmaps", "empty_partial", "bitmap_file_table", "file_schema", "encode_maps"]
