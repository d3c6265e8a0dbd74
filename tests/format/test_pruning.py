"""The skip planner alone (no Spark): Spark's null/NaN/±0.0 semantics on zone
statistics, zone tiling, coverage."""
import math

import pyarrow as pa

from lance_ops.format.proto import table_pb2
from lance_ops.format.pruning import ColumnIndex, Conjunct, normalize, plan, zone_may_match
from lance_ops.format.zones import UNKNOWN, Zone

NAN = float("nan")


def z(lo, hi, nulls=0, nans=0):
    return Zone(0, 0, 10, lo, hi, nulls, nans)


def test_float_semantics():
    f = True
    # NaN is the largest value and equals itself (Spark)
    assert zone_may_match(z(1.0, NAN, nans=1), Conjunct("x", ">", 1e9), f)
    assert not zone_may_match(z(1.0, 2.0), Conjunct("x", ">", 1e9), f)
    assert zone_may_match(z(1.0, NAN, nans=1), Conjunct("x", "=", NAN), f)
    assert not zone_may_match(z(1.0, 2.0), Conjunct("x", "=", NAN), f)
    assert not zone_may_match(z(NAN, NAN, nans=5), Conjunct("x", ">", NAN), f)
    assert zone_may_match(z(NAN, NAN, nans=5), Conjunct("x", ">=", NAN), f)
    # -0.0 = 0.0
    assert zone_may_match(z(-0.0, -0.0), Conjunct("x", "=", 0.0), f)
    assert zone_may_match(z(0.0, 0.0), Conjunct("x", "=", -0.0), f)
    assert not zone_may_match(z(-0.0, 0.0), Conjunct("x", "<", 0.0), f)
    assert not zone_may_match(z(0.0, 0.0), Conjunct("x", ">", -0.0), f)
    # a NaN min (total order) is unknown: never prunes < comparisons wrongly
    assert zone_may_match(z(NAN, 3.0, nans=1), Conjunct("x", "<", -100.0), f)
    assert zone_may_match(z(-math.inf, -math.inf), Conjunct("x", "<=", -math.inf), f)


def test_nulls_and_literals():
    assert zone_may_match(z(None, None, nulls=10), Conjunct("x", "isnull"), False)
    assert not zone_may_match(z(None, None, nulls=10), Conjunct("x", "notnull"), False)
    assert not zone_may_match(z(None, None, nulls=10), Conjunct("x", "=", 1), False)
    assert not zone_may_match(z(1, 5), Conjunct("x", "isnull"), False)
    assert not zone_may_match(z(1, 5), Conjunct("x", "=", None), False)  # x = NULL matches nothing
    assert zone_may_match(z(1, 5), Conjunct("x", "in", (None, 9, 3)), False)
    assert not zone_may_match(z(1, 5), Conjunct("x", "in", (None, 9)), False)
    assert zone_may_match(z(UNKNOWN, UNKNOWN), Conjunct("x", "=", 1), False)
    assert zone_may_match(z("abc", "abd"), Conjunct("s", ">", "abcz"), False)
    assert not zone_may_match(z("abc", "abd"), Conjunct("s", ">", "abd"), False)


def test_literals_outside_the_domain_do_not_prune():
    types = {"i": pa.int64(), "s": pa.string(), "d": pa.decimal128(5, 2)}
    got = normalize([Conjunct("i", "=", "x"), Conjunct("s", "=", 3), Conjunct("d", "=", 1), Conjunct("i", ">", 2)],
                    types)
    assert got == [Conjunct("i", ">", 2)]


def _frag(i, rows):
    return table_pb2.DataFragment(id=i, physical_rows=rows)


def test_plan_tiles_zones_and_scans_uncovered_fragments():
    zones = {0: [Zone(0, 5, 100, 0, 99), Zone(0, 100, 200, 100, 199), Zone(0, 210, 250, 200, 240)],
             1: [Zone(1, 0, 100, 1000, 2000)]}
    ix = ColumnIndex("i_idx", "i", pa.int64(), {0, 1}, zones)
    frags = [_frag(0, 300), _frag(1, 100), _frag(2, 50)]
    p = plan(frags, [ix], [Conjunct("i", ">=", 150)])
    # zone 1 runs to the next zone's start, the last zone to the end, the first from 0
    assert p.ranges == {0: [(100, 300)], 1: [(0, 100)], 2: [(0, 50)]}
    p = plan(frags, [ix], [Conjunct("i", "<", 50)])
    assert p.ranges == {0: [(0, 100)], 2: [(0, 50)]} and p.skipped == [1]
    p = plan(frags, [ix], [Conjunct("i", ">", 10), Conjunct("i", "<", 120)])
    assert p.ranges[0] == [(0, 210)]
    assert p.metrics() == {"numFragmentsScanned": 2, "numFragmentsSkipped": 1, "numRowsScanned": 260}


def test_bitmap_of_a_table_with_stable_row_ids_prunes_by_row_ids(tmp_path):
    """pylance 14's BITMAP holds row ids when row ids are stable: id 15 is row
    id 15, which as a row address would read "fragment 0" -- it lives in
    fragment 1, which must be the one kept; after a compaction that moved the
    rows (ids kept, bitmap extended) the new fragment is."""
    import lance

    from lance_ops.format.pruning import skip_plan
    from lance_ops.storage import ObjectStore
    from lance_ops.txn.log import TableLog, open_snapshot

    for stable in (True, False):
        path = str(tmp_path / f"t{stable}.lance")
        ds = lance.write_dataset(pa.table({"id": list(range(20))}), path,
                                 max_rows_per_file=10, enable_stable_row_ids=stable)
        ds.create_scalar_index("id", "BITMAP")
        store = ObjectStore(path)
        snap = open_snapshot(store, TableLog(store).latest_version())
        assert snap.stable_row_ids == stable
        p = skip_plan(snap, [Conjunct("id", "=", 15)])
        frags = [f.id for f in snap.fragments]
        # row ids or row addresses: the bitmap prunes fragment 0
        assert sorted(p.ranges) == frags[1:] and p.skipped == frags[:1]
    path = str(tmp_path / "c.lance")
    ds = lance.write_dataset(pa.table({"id": list(range(30))}), path, max_rows_per_file=10, enable_stable_row_ids=True)
    ds.create_scalar_index("id", "BITMAP")
    ds.delete("id = 3")
    lance.dataset(path).optimize.compact_files(target_rows_per_fragment=25)
    store = ObjectStore(path)
    snap = open_snapshot(store, TableLog(store).latest_version())
    for value, want in [(15, 15), (3, None), (29, 29)]:
        p = skip_plan(snap, [Conjunct("id", "=", value)])
        holding = [f.id for f in snap.fragments
                   if want is not None and want in lance.dataset(path).get_fragment(f.id).to_table().column("id").to_pylist()]
        assert sorted(p.ranges) == holding, (value, p.ranges)


def test_bloom_probe_semantics():
    """Bloom zones prune = / IN only when the set of equal values is exact:
    -0.0 = 0.0 (both probed), NaN never prunes, an integer column compared
    with a float literal is not probed, NULL in IN matches nothing."""
    from lance_ops.format import bloom
    from lance_ops.format.pruning import bloom_may_match

    def zone(values, t):
        return Zone(0, 0, len(values), UNKNOWN, UNKNOWN, 0, 0, bloom.build(bloom.hashes(pa.array(values, t))))

    f = zone([-0.0, 1.5, NAN], pa.float64())
    assert bloom_may_match(f, Conjunct("x", "=", 0.0), pa.float64())
    assert bloom_may_match(f, Conjunct("x", "=", NAN), pa.float64())
    assert not bloom_may_match(f, Conjunct("x", "=", 2.5), pa.float64())
    i = zone([1, 5, 7], pa.int32())
    assert bloom_may_match(i, Conjunct("x", "=", 5), pa.int32())
    assert not bloom_may_match(i, Conjunct("x", "=", 6), pa.int32())
    assert bloom_may_match(i, Conjunct("x", "=", 6.0), pa.int32())  # (float literal: not probed)
    assert not bloom_may_match(i, Conjunct("x", "in", (2, None, 3)), pa.int32())
    assert bloom_may_match(i, Conjunct("x", "in", (2, None, 7)), pa.int32())
    assert bloom_may_match(i, Conjunct("x", ">", 100), pa.int32())  # (only = and IN probe)
    s = zone(["a", None, "é"], pa.string())
    assert bloom_may_match(s, Conjunct("x", "=", "é"), pa.string())
    assert not bloom_may_match(s, Conjunct("x", "=", "b"), pa.string())
    assert bloom.num_bytes() == 32768


def test_long_in_lists_are_sorted_and_bisected():
    vals = [900, 3, None, 17, 55, 1000, 2, 8, 99, 4000]
    (c,) = normalize([Conjunct("x", "in", tuple(vals))], {"x": pa.int64()})
    assert c.value == tuple(sorted(v for v in vals if v is not None))
    for lo, hi in [(0, 1), (2, 2), (18, 54), (100, 899), (901, 999), (4001, 5000), (56, 98), (9, 16)]:
        want = any(lo <= v <= hi for v in vals if v is not None)
        assert zone_may_match(z(lo, hi), c, False) == want, (lo, hi)
