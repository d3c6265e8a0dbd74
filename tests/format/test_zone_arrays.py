"""Zone maps judged as columns (:mod:`lance_ops.format.zonearrays`) agree
zone by zone with the per-zone definition (``pruning.zone_may_match``), for
generated statistics of every prunable type and generated conjuncts: NaN
bounds and counts, +-0.0, infinities, all-null and inconsistent zones,
integers against float literals and beyond their range, floats against
integers no double holds, strings with NULs and surrogates, dates,
timestamps (ns truncated to us), booleans, IN lists short and long. Row
ranges agree with the per-zone tiling; planning allocates nothing per zone."""
import datetime
import math
import random

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format import bloom
from lance_ops.format.proto import table_pb2
from lance_ops.format.pruning import (
    OPS,
    ColumnIndex,
    Conjunct,
    _merge,
    _tile,
    bloom_may_match,
    normalize,
    plan,
    zone_may_match,
)
from lance_ops.format.zonearrays import ZoneArrays, fragment_ranges, may_match
from lance_ops.format.zones import Zone, bloomfilter_zones, zone_arrays, zonemap_zones

NAN, INF = float("nan"), float("inf")
I64 = 2**63
D0 = datetime.date(1970, 1, 1)
T0 = datetime.datetime(2024, 3, 1, 12, 0, 0)

#: type -> (pool of statistics values, extra literals)
POOLS = {
    pa.int64(): ([-I64, -I64 + 1, -5, -1, 0, 1, 2, 3, 7, 100, 2**53, 2**53 + 1, I64 - 1],
                 [2.5, -0.5, 3.0, 1e19, -1e19, INF, -INF, NAN, float(2**53), 2**64, -(2**64), I64]),
    pa.int32(): ([-2**31, -5, 0, 1, 2, 3, 7, 2**31 - 1], [2.5, -0.5, 2**31, -2**31 - 1, 1e10, NAN, INF]),
    pa.uint64(): ([0, 1, 2, 5, I64, 2**64 - 1], [-1, 2**64, 1.5, -0.5, 1.8e19, NAN]),
    pa.float64(): ([-INF, -1e300, -2.5, -1.0, -0.0, 0.0, 1.0, 2.5, 1e300, INF, NAN, float(2**53)],
                   [0, 1, -3, 2**53 + 1, -(2**53 + 1), 10**400, -(10**400), 3.0000000000000004]),
    pa.float32(): ([-INF, -2.5, -0.0, 0.0, 0.1, 1.0, INF, NAN], [0.1, 1, 0, 2**30 + 1]),
    pa.string(): (["", "a", "ab", "abc", "abd", "b", "é", "z", "\x00", "a\x00", "日本", "\U0001f600"],
                  ["a\ud800", "\uffff", "abcz", "aa"]),
    pa.large_string(): (["", "a", "b", "bb", "c"], ["ba"]),
    pa.date32(): ([D0 + datetime.timedelta(days=d) for d in (-800, -1, 0, 1, 19000, 20000)],
                  [D0 + datetime.timedelta(days=d) for d in (-2, 5, 19500)] + [T0]),
    pa.timestamp("us", "UTC"): ([T0 + datetime.timedelta(seconds=s) for s in (-10**9, -1, 0, 1, 3600)],
                                [T0 + datetime.timedelta(microseconds=m) for m in (1, -1, 999_999)]),
    pa.timestamp("ns"): ([-1500, -1000, -1, 0, 999, 1000, 1_000_000_001],
                         [datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=m)
                          for m in (-2, -1, 0, 1, 1000, 1_000_000)]),
    pa.bool_(): ([False, True], []),
}


def _stat_array(values, t):
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.array(values, pa.int64()).cast(t)
    return pa.array(values, t)


def _zonemap(rng, t, n):
    """A zonemap.lance-like table of ``n`` zones over random fragments."""
    pool, _ = POOLS[t]
    is_float = pa.types.is_floating(t)
    rows = {k: [] for k in ("min", "max", "null_count", "nan_count", "fragment_id", "zone_start", "zone_length")}
    for _ in range(n):
        lo, hi = sorted(rng.sample(pool, 2), key=lambda v: (isinstance(v, float) and math.isnan(v), v))
        nulls, nans = rng.choice([0, 0, 3]), 0
        shape = rng.random()
        if shape < 0.1:
            lo = hi = None  # all null
            nulls = 5
        elif shape < 0.15:
            lo = None  # inconsistent
        elif shape < 0.2:
            hi = None
        elif is_float and shape < 0.35:
            nans = rng.choice([1, 4])
            hi = NAN
            if shape < 0.25:
                lo = NAN  # only NaNs
            if shape > 0.3:
                nans = 0  # (a NaN max with no count)
        elif is_float and shape < 0.4:
            nans = 2  # (a count without a NaN bound)
            if shape < 0.37:
                lo = hi = None
        elif shape < 0.5:
            lo, hi = hi, lo  # min > max: judged as stated
        rows["min"].append(lo)
        rows["max"].append(hi)
        rows["null_count"].append(nulls)
        rows["nan_count"].append(nans)
        rows["fragment_id"].append(rng.randrange(n // 3 + 1))
        rows["zone_start"].append(rng.randrange(0, 10**6, 8192))
        rows["zone_length"].append(8192)
    cols = {k: (_stat_array(v, t) if k in ("min", "max") else pa.array(v, pa.uint64())) for k, v in rows.items()}
    return pa.table(cols)


def _conjuncts(rng, t):
    pool, extra = POOLS[t]
    lits = [v for v in pool + extra]
    raw = []
    for op in OPS:
        if op in ("isnull", "notnull"):
            raw.append(Conjunct("x", op))
        elif op == "in":
            for size in (0, 1, 3, 8, 9, 14):
                raw.append(Conjunct("x", "in", tuple(rng.choice(lits + [None]) for _ in range(size))))
        else:
            raw += [Conjunct("x", op, v) for v in lits + [None]]
    return normalize(raw, {"x": t})


@pytest.mark.parametrize("t", list(POOLS), ids=str)
def test_columns_judge_as_each_zone(t):
    rng = random.Random(str(t))
    is_float = pa.types.is_floating(t)
    for _ in range(3):
        table = _zonemap(rng, t, 60)
        zs = ZoneArrays.from_zonemap(table)
        ref = sorted(zonemap_zones(table), key=lambda z: z.fragment_id)  # (stable, as the arrays)
        ref.sort(key=lambda z: (z.fragment_id, z.start))
        assert zs.fragment_id.tolist() == [z.fragment_id for z in ref]
        assert zs.start.tolist() == [z.start for z in ref]
        conj = _conjuncts(rng, t)
        assert len(conj) > 20
        for c in conj:
            want = [zone_may_match(z, c, is_float) for z in ref]
            got = may_match(zs, c, is_float).tolist()
            bad = [(z, w) for z, w, g in zip(ref, want, got) if w != g]
            assert not bad, (c, bad[:3])


def test_literals_python_cannot_compare_keep_zones():
    """(A literal of another type: ``zone_may_match`` meets a TypeError and
    keeps the zone; so do the columns.)"""
    zones = [Zone(0, 0, 10, 1, 5), Zone(1, 0, 10, None, None, 10)]
    zs = zone_arrays(zones, pa.int64())
    for c in [Conjunct("x", "=", "a"), Conjunct("x", "<", D0), Conjunct("x", "in", ("a", 1) * 5)]:
        assert may_match(zs, c, False).tolist() == [zone_may_match(z, c, False) for z in zones]


def test_nan_in_a_long_in_list_of_an_integer_column_is_dropped():
    """A NaN literal matches no integer; left in the list it broke the sort
    the bisection relies on and pruned a zone holding a listed key."""
    vals = (4, 7, 8, 16, 24, 28, 30, 36, NAN, 31, 41)
    (c,) = normalize([Conjunct("x", "in", vals)], {"x": pa.int64()})
    assert c.value == (4, 7, 8, 16, 24, 28, 30, 31, 36, 41)
    assert zone_may_match(Zone(0, 0, 10, 31, 31), c, False)


def test_ranges_tile_as_zone_by_zone():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randrange(1, 8)
        starts = sorted(rng.choice([0, 0, 100, 200, 200, 300, 450, 900]) for _ in range(n))
        zones = [Zone(3, s, s + 100, 0, 1) for s in starts]
        phys = rng.choice([0, 150, 300, 460, 1000])
        keep = np.array([rng.random() < 0.6 for _ in zones])
        zs = zone_arrays(zones, pa.int64())
        kept = {id(z) for z, k in zip(zones, keep) if k}
        want = _merge([r for z, r in _tile(zones, phys) if id(z) in kept])
        assert fragment_ranges(zs, zs.slice_of(3), keep, phys) == want, (starts, phys, keep)


def _frag(i, rows):
    return table_pb2.DataFragment(id=i, physical_rows=rows)


def test_bloom_zones_plan_as_zone_by_zone():
    """Bloom filter zones: IS NULL by their null flag, = / IN by probing the
    filters of the zones still kept; unusable filter bytes keep the zone."""
    rng = random.Random(3)
    t = pa.int64()
    zones = []
    for f in range(6):
        for s in range(0, 40000, 8192):
            values = [rng.randrange(200) for _ in range(5)]
            data = rng.choice([bloom.build(bloom.hashes(pa.array(values, t))), None, b"x" * 31])
            zones.append(Zone(f, s, s + 8192, None, None, rng.choice([0, 1]), 0, data))
    table = pa.table({"fragment_id": pa.array([z.fragment_id for z in zones], pa.uint64()),
                      "zone_start": pa.array([z.start for z in zones], pa.uint64()),
                      "zone_length": pa.array([z.end - z.start for z in zones], pa.uint64()),
                      "has_null": [z.null_count > 0 for z in zones],
                      "bloom_filter_data": pa.array([z.bloom for z in zones], pa.binary())})
    ref = bloomfilter_zones(table)
    ix = ColumnIndex("b", "x", t, set(range(5)), ZoneArrays.from_bloomfilter(table))
    frags = [_frag(f, 40000) for f in range(7)]
    for c in normalize([Conjunct("x", "=", v) for v in range(0, 200, 7)] + [Conjunct("x", "isnull")]
                       + [Conjunct("x", "in", tuple(rng.sample(range(400), 12))) for _ in range(10)]
                       + [Conjunct("x", ">", 5), Conjunct("x", "=", 5.0)], {"x": t}):
        want = {}
        for f in frags:
            mine = [z for z in ref if z.fragment_id == f.id]
            if f.id not in ix.covered or not mine:
                want[f.id] = [(0, f.physical_rows)]
                continue
            rs = _merge([r for z, r in _tile(mine, f.physical_rows)
                         if zone_may_match(z, c, False) and bloom_may_match(z, c, t)])
            if rs:
                want[f.id] = rs
        assert plan(frags, [ix], [c]).ranges == want, c


@pytest.mark.parametrize("t", [pa.int64(), pa.float64(), pa.string()], ids=str)
def test_plans_of_several_conjuncts_as_zone_by_zone(t):
    """Several conjuncts over two zone maps of one column, fragments with
    and without zones, covered or not: a fragment's ranges are the
    intersection, conjunct by conjunct, of the zone-by-zone tiling (plan()
    skips at once a fragment none of whose zones may match one of them)."""
    rng = random.Random(11)
    for trial in range(40):
        table = _zonemap(rng, t, 30)
        tables = [table, _zonemap(rng, t, 30)]
        refs = [zonemap_zones(x) for x in tables]
        frags = [_frag(f, rng.choice([0, 8192, 10**6 + 8192])) for f in range(14)]
        ixs = [ColumnIndex(f"z{k}", "x", t, set(rng.sample(range(14), 10)), ZoneArrays.from_zonemap(x))
               for k, x in enumerate(tables)][:rng.choice([1, 2])]
        conj = rng.sample(_conjuncts(rng, t), rng.choice([1, 2, 3]))
        want = {}
        for f in frags:
            current = [(0, f.physical_rows)]
            for c in conj:
                for ix, ref in zip(ixs, refs):
                    mine = sorted((z for z in ref if z.fragment_id == f.id), key=lambda z: z.start)
                    if f.id not in ix.covered or not mine:
                        continue
                    rs = _merge([r for z, r in _tile(mine, f.physical_rows)
                                 if zone_may_match(z, c, pa.types.is_floating(t))])
                    current = [r for a in current for b in rs
                               for r in [(max(a[0], b[0]), min(a[1], b[1]))] if r[0] < r[1]]
            if current:
                want[f.id] = current
        got = plan(frags, ixs, conj)
        assert got.ranges == want, (trial, conj)
        assert sorted(got.skipped) == sorted(set(range(14)) - set(want)), (trial, conj)


def _plan_peak(tmp_path, name, zones_per_fragment):
    """Traced peak (bytes) of a warm ``skip_plan`` over a ZONEMAP of 40
    fragments x ``zones_per_fragment`` zones (written as pylance lays it out)."""
    import tracemalloc
    import types
    import uuid

    import lance
    import lance.file as lf
    from pyroaring import BitMap

    from lance_ops.format.pruning import skip_plan
    from lance_ops.storage import ObjectStore
    from lance_ops.txn.log import TableLog, open_snapshot

    path = str(tmp_path / name)
    lance.write_dataset(pa.table({"id": pa.array([0], pa.int64())}), path)
    store = ObjectStore(path)
    snap = open_snapshot(store, TableLog(store).latest_version())
    per = zones_per_fragment
    n = 40 * per
    ids = np.arange(n, dtype=np.int64) * 8192  # (id ascending: the table's row number)
    table = pa.table({"min": ids, "max": ids + 8191, "null_count": pa.array(np.zeros(n), pa.uint32()),
                      "nan_count": pa.array(np.zeros(n), pa.uint32()),
                      "fragment_id": pa.array(np.repeat(np.arange(40), per), pa.uint64()),
                      "zone_start": pa.array(np.tile(np.arange(per) * 8192, 40), pa.uint64()),
                      "zone_length": pa.array(np.full(n, 8192), pa.uint64())})
    uid = uuid.uuid4()
    (tmp_path / name / "_indices" / str(uid)).mkdir(parents=True)
    with lf.LanceFileWriter(str(tmp_path / name / "_indices" / str(uid) / "zonemap.lance"), table.schema) as w:
        w.write_batch(table)
    meta = table_pb2.IndexMetadata(name="id_idx", fields=[snap.schema.fields[0].id],
                                   fragment_bitmap=BitMap(range(40)).serialize())
    meta.uuid.uuid = uid.bytes
    meta.index_details.type_url = "/lance.table.ZoneMapIndexDetails"
    fake = types.SimpleNamespace(store=store, schema=snap.schema, indices=[meta], stable_row_ids=False,
                                 fragments=[_frag(i, per * 8192) for i in range(40)])
    a = n * 8192 // 2 + n * 8192 // 7
    conj = [Conjunct("id", ">=", a), Conjunct("id", "<=", a + 10_000)]
    p = skip_plan(fake, conj)  # (warm: the index file is read and cached once)
    assert len(p.ranges) <= 2 and p.rows() <= 4 * 8192
    tracemalloc.start()
    try:
        skip_plan(fake, conj)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_planning_allocates_nothing_per_zone(tmp_path):
    """The benchmark's shapes (40 fragments of 1M and of 10M rows: 4 and 31
    zones each): the same planning memory, give or take; and beyond, at most
    a few bytes (mask entries) per added zone -- a Python object per zone
    would be tens of bytes (the per-zone planner took ~350)."""
    p4, p31, p300 = (_plan_peak(tmp_path, f"t{per}.lance", per) for per in (4, 31, 300))
    assert p31 <= 1.5 * p4, (p4, p31)
    assert (p300 - p31) / (40 * (300 - 31)) <= 8, (p31, p300)
