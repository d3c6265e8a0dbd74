"""BITMAP index building without Spark: roaring-rs bytes and key grouping."""
import math

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

from lance_ops.format.bitmap_build import bitmap_file_table, partial_bitmaps
from lance_ops.format.indexremap import decode_row_addr_map
from lance_ops.format.roaring import serialize_sorted


@pytest.mark.parametrize("seed", range(6))
def test_serialization_reads_back_in_croaring(seed):
    rng = np.random.default_rng(seed)
    parts = [rng.choice(65536, size=n, replace=False) + (hi << 16)
             for hi, n in zip(rng.choice(300, 4, replace=False), (1, 4096, 4097, rng.integers(1, 65536)))]
    values = np.unique(np.concatenate(parts).astype(np.uint32))
    raw = serialize_sorted(values)
    assert int.from_bytes(raw[:4], "little") == 12346  # no run containers, as roaring-rs writes
    assert np.array_equal(np.array(BitMap.deserialize(raw).to_array(), dtype=np.uint32), values)
    # array containers up to 4096 values, bitmap containers (8 KiB) above
    n = int.from_bytes(raw[4:8], "little")
    cards = np.frombuffer(raw[8:8 + 4 * n], "<u2")[1::2].astype(int) + 1
    offs = np.frombuffer(raw[8 + 4 * n:8 + 8 * n], "<u4")
    sizes = np.diff(np.append(offs, len(raw)))
    assert list(sizes) == [8192 if c > 4096 else 2 * c for c in cards]


def test_keys_grouped_and_ordered_as_pylance():
    vals = pa.array([1.0, -0.0, float("nan"), None, 0.0, float("-nan"), 1.0, None, -2.5], pa.float64())
    ids = np.arange(len(vals), dtype=np.uint64) | (np.uint64(3) << np.uint64(32))  # fragment 3
    half = 5
    parts = [partial_bitmaps(vals.slice(0, half), ids[:half]), partial_bitmaps(vals.slice(half), ids[half:])]
    t = bitmap_file_table(parts, pa.float64())
    keys = t.column("keys").to_pylist()
    assert keys[0] is None and keys[1:3] == [-2.5, -0.0] and math.copysign(1, keys[2]) < 0
    assert keys[3] == 0.0 and math.copysign(1, keys[3]) > 0 and keys[4] == 1.0 and math.isnan(keys[5])
    rows = {repr(k): sorted(decode_row_addr_map(b)[3]) for k, b in zip(keys, t.column("bitmaps").to_pylist())}
    assert rows == {"None": [3, 7], "-2.5": [8], "-0.0": [1], "0.0": [4], "1.0": [0, 6], "nan": [2, 5]}
    assert t.schema.metadata == {b"lance:index_stats": b'{"num_bitmaps":6}'}


def test_row_id_bitmaps_unite_across_tasks():
    ids = np.array([5, 1 << 33, 7, (1 << 33) + 1], dtype=np.uint64)
    vals = pa.array(["b", "a", "b", "a"])
    t = bitmap_file_table([partial_bitmaps(vals.slice(0, 2), ids[:2]), partial_bitmaps(vals.slice(2), ids[2:])],
                          pa.string())
    assert t.column("keys").to_pylist() == ["a", "b"]
    maps = [decode_row_addr_map(b) for b in t.column("bitmaps").to_pylist()]
    assert [{k: list(v) for k, v in m.items()} for m in maps] == [{2: [0, 1]}, {0: [5, 7]}]


def test_btree_exact_filters_follow_spark_semantics():
    """The rows a BTREE page read keeps for a conjunct: float32 values compare
    as doubles (0.1f > 0.1), NaN is above every number, -0.0 = 0.0, NULL
    matches nothing but IS NULL."""
    import numpy as np

    from lance_ops.format.pruning import Conjunct, btree_ids
    from lance_ops.format.zones import Zone

    vals = pa.array([None, -0.0, 0.0, 0.1, float("nan")], pa.float32())

    class Pages:
        arrow_type = pa.float32()
        zones = [Zone(0, 0, 5, None, float("nan"), 1, 0)]

        def read_ids(self, pages, keep=None):
            ids = np.arange(5, dtype=np.uint64) << np.uint64(32)  # row i in fragment i
            return ids if keep is None else ids[keep(vals).to_numpy(zero_copy_only=False)]

    def frags(op, v):
        return [int(i >> 32) for i in btree_ids(Pages(), Conjunct("f", op, v), True)]

    assert frags(">", 0.1) == [3, 4]  # float(0.1f) > 0.1, NaN above all
    assert frags("<", 0.0) == [] and frags("<=", 0.0) == [1, 2]
    assert frags("=", 0.0) == [1, 2] and frags("isnull", None) == [0]
    assert frags("=", float("nan")) == [0, 1, 2, 3, 4]  # (NaN literal: the whole page)


def test_btree_range_holding_every_page_is_not_read():
    """A range conjunct every BTREE page lies inside prunes nothing: it is
    not read (a merge's source key range over the whole table costs a pass
    over the index otherwise); a range cutting a page, or leaving a page
    out, is read and narrows as before."""
    import numpy as np

    from lance_ops.format.proto import table_pb2
    from lance_ops.format.pruning import ColumnIndex, Conjunct, btree_ids, plan
    from lance_ops.format.zones import Zone

    vals = pa.array(np.arange(20, dtype=np.int64))
    reads = []

    class Pages:
        arrow_type = pa.int64()
        zones = [Zone(0, 0, 10, 0, 9, 0, 0), Zone(1, 10, 20, 10, 19, 0, 0)]

        def read_ids(self, pages, keep=None):
            reads.append([z.fragment_id for z in pages])  # (a page: its number)
            ids = (np.arange(20, dtype=np.uint64) // np.uint64(5)) << np.uint64(32)  # 5 rows a fragment
            return ids if keep is None else ids[keep(vals).to_numpy(zero_copy_only=False)]

    assert btree_ids(Pages(), Conjunct("id", ">=", 0), False) is None and reads == []
    assert btree_ids(Pages(), Conjunct("id", "<=", 19), False) is None and reads == []
    assert sorted(set(int(i >> 32) for i in btree_ids(Pages(), Conjunct("id", ">=", 1), False))) == [0, 1, 2, 3]
    assert sorted(set(int(i >> 32) for i in btree_ids(Pages(), Conjunct("id", ">", 9), False))) == [2, 3]
    assert reads == [[0, 1], [1]]

    frags = [table_pb2.DataFragment(id=i, physical_rows=5) for i in range(4)]
    ix = ColumnIndex("id_idx", "id", pa.int64(), {0, 1, 2, 3}, btree=Pages())
    got = plan(frags, [ix], [Conjunct("id", ">=", 0), Conjunct("id", "<=", 19), Conjunct("id", "in", [3, 16])])
    assert sorted(got.ranges) == [0, 3] and sorted(got.skipped) == [1, 2]
