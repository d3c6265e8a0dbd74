"""Build a BTREE scalar index's two files as pylance 14 writes them.

``page_data.lance`` holds every live row's ``(values, ids)`` -- the row
*address* also on tables with stable row ids -- sorted by value: nulls
first, then ascending (floats in total order: -0.0 before +0.0, NaN last;
strings by their UTF-8 bytes). ``page_lookup.lance`` has one row per page of
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
    """One batch's (value, row address) rows, unsorted."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return pa.table([values.cast(key_type), pa.array(np.asarray(ids, dtype=np.uint64), pa.uint64())],
                    schema=pairs_schema(key_type))


def sort_order(values: pa.Array, ids: np.ndarray) -> np.ndarray:
    """Positions of the rows in page_data order: nulls first, then values
    ascending (floats by total order), ties by id."""
    mask = values.is_null().to_numpy(zero_copy_only=False)
    ids = np.asarray(ids, dtype=np.uint64)
    if pa.types.is_floating(values.type):
        bits = values.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False).view(np.int64)
        # IEEE-754 bits to a signed total order; one NaN bit pattern sorts
        # like every other NaN (pylance's NaNs are all last)
        total = bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
        nan = np.isnan(bits.view(np.float64))
        total = np.where(nan, np.int64(np.iinfo(np.int64).max), total)
        return np.lexsort((ids, total, ~mask))
    rank = pc.rank(values, sort_keys="ascending", null_placement="at_start", tiebreaker="dense")
    return np.lexsort((ids, rank.to_numpy().astype(np.int64)))


def btree_tables(parts: list[pa.Table], key_type: pa.DataType,
                 batch_size: int = BTREE_BATCH_SIZE) -> tuple[pa.Table, pa.Table]:
    """(page_data, page_lookup) of every task's :func:`pairs` rows."""
    schema = pairs_schema(key_type)
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table(), lookup_schema(key_type, batch_size).empty_table()
    t = pa.concat_tables([p.cast(schema) for p in parts]).combine_chunks()
    values, ids = t.column("values").combine_chunks(), t.column("ids").to_numpy()
    order = pa.array(sort_order(values, ids))
    data = pa.table([values.take(order), pa.array(ids).take(order)], schema=schema)
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
