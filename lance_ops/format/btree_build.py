"""Build a BTREE scalar index's two files as pylance 14 writes them.

``page_data.lance`` holds every live row's ``(values, ids)`` -- the row
*address* also on tables with stable row ids -- sorted by value: nulls
first, then ascending (floats in total order: -0.0 before +0.0, NaN last;
strings by their UTF-8 bytes). Tasks sort each fragment's rows; the one
writing task merges the sorted runs. ``page_lookup.lance`` has one row per page of
``batch_size`` (4096) sorted rows: the page's first and last value (``min`` /
``max`` -- a page starting with nulls has a null ``min``), its null count and
index, with schema metadata ``batch_size`` and ``range_partitioned``.

pylance sorts with an unstable sort, so the order of the ids among rows of
equal value is arbitrary there; here it is ascending. Everything else --
the values column, every page's bounds, the lookup file -- is what pylance
writes for the same rows (tests compare them).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .zones import BTREE_DATA_FILE, BTREE_LOOKUP_FILE

#: Rows per page (pylance 14's default ``batch_size``).
BTREE_BATCH_SIZE = 4096


def pairs_schema(key_type: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("values", key_type), pa.field("ids", pa.uint64(), nullable=False)])


def lookup_schema(key_type: pa.DataType, batch_size: int = BTREE_BATCH_SIZE) -> pa.Schema:
    return pa.schema(
        [pa.field("min", key_type), pa.field("max", key_type), pa.field("null_count", pa.uint32(), nullable=False),
         pa.field("page_idx", pa.uint32(), nullable=False)],
        metadata={"batch_size": str(batch_size), "range_partitioned": "false"},
    )


def pairs(values: pa.Array, ids: np.ndarray, key_type: pa.DataType) -> pa.Table:
    """One fragment's (value, row address) rows -- given in address order --
    sorted as in page_data (:func:`sort_order`): the writing task then only
    merges sorted runs."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t = pa.table([values.cast(key_type), pa.array(np.asarray(ids, dtype=np.uint64), pa.uint64())],
                 schema=pairs_schema(key_type))
    return t.take(pa.array(sort_order(t.column("values").combine_chunks())))


def sort_order(values: pa.Array) -> np.ndarray:
    """Positions of the rows in page_data order -- nulls first, then values
    ascending (floats by total order: -0.0 before +0.0, every NaN last) --
    by a *stable* sort: rows of equal value keep their input order (callers
    pass rows in address order, or runs already sorted so, in address
    order). numpy's stable sort (timsort) merges presorted runs in near
    linear time."""
    mask = values.is_null().to_numpy(zero_copy_only=False)
    nulls = np.flatnonzero(mask)
    rest = values.filter(pa.array(~mask)) if len(nulls) else values
    if pa.types.is_floating(rest.type):
        bits = rest.cast(pa.float64()).to_numpy(zero_copy_only=False).view(np.int64)
        # IEEE-754 bits to a signed total order; every NaN sorts last
        key = bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
        key[np.isnan(bits.view(np.float64))] = np.iinfo(np.int64).max
        order = np.argsort(key, kind="stable")
    elif pa.types.is_integer(rest.type) or pa.types.is_temporal(rest.type):
        order = np.argsort(rest.to_numpy(zero_copy_only=False), kind="stable")
    else:  # (strings, booleans, decimals: Arrow's sort is stable too)
        order = pc.sort_indices(rest).to_numpy()
    return np.concatenate([nulls, np.flatnonzero(~mask)[order]]) if len(nulls) else order


def btree_tables(parts: list[pa.Table], key_type: pa.DataType,
                 batch_size: int = BTREE_BATCH_SIZE) -> tuple[pa.Table, pa.Table]:
    """(page_data, page_lookup) of every task's :func:`pairs` rows."""
    schema = pairs_schema(key_type)
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table(), lookup_schema(key_type, batch_size).empty_table()
    # runs in address order (a part is one fragment's rows), then merged
    parts.sort(key=lambda p: pc.min(p.column("ids")).as_py())
    t = pa.concat_tables([p.cast(schema) for p in parts]).combine_chunks()
    data = t.take(pa.array(sort_order(t.column("values").combine_chunks())))
    n = data.num_rows
    starts = np.arange(0, n, batch_size)
    ends = np.minimum(starts + batch_size, n) - 1
    nulls = data.column("values").is_null().to_numpy(zero_copy_only=False)
    null_counts = np.add.reduceat(nulls.astype(np.uint32), starts) if n else np.empty(0, np.uint32)
    sorted_values = data.column("values")
    lookup = pa.table(
        [sorted_values.take(pa.array(starts)), sorted_values.take(pa.array(ends)),
         pa.array(null_counts, pa.uint32()), pa.array(np.arange(len(starts)), pa.uint32())],
        schema=lookup_schema(key_type, batch_size),
    )
    return data, lookup


__all__ = ["BTREE_DATA_FILE", "BTREE_LOOKUP_FILE", "BTREE_BATCH_SIZE", "pairs", "pairs_schema", "sort_order",
           "btree_tables", "lookup_schema"]
