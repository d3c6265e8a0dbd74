"""Data skipping with zone maps and bitmap indices: pruned results equal
unpruned ones (random predicates over ints, floats with NaN and ±0.0,
strings, timestamps, nulls and deleted rows), what each job read is asserted,
and indices are shared with pylance both ways."""
import datetime
import os
import random
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from benchmarks.harness import StageCounter
from lance_ops import LanceTable
from lance_ops.spark.datasource import read_skip_report
from tests.helpers import committed

N = 24_000


def _data(seed=7):
    rng = np.random.default_rng(seed)
    ids = np.arange(N)
    f = (ids * 0.25).astype("float64")
    f[rng.random(N) < 0.03] = np.nan
    f[rng.random(N) < 0.03] = 0.0
    f[rng.random(N) < 0.03] = -0.0
    f_null = rng.random(N) < 0.05
    s = np.array([f"k{i // 97:05d}" for i in ids], dtype=object)
    s_null = (ids >= 9000) & (ids < 17200)  # a whole zone of nulls
    ts = pa.array(ids * 1_000_000 + 1_600_000_000_000_000, pa.timestamp("us", "UTC"))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "f": pa.array(f, mask=f_null),
        "s": pa.array(s, pa.string(), mask=s_null),
        "ts": ts,
    })


@pytest.fixture(scope="module")
def indexed(spark, tmp_path_factory):
    """Our table (3 fragments of 8000 rows + deletions), unindexed at v_plain,
    ZONEMAP on every column from the next versions on."""
    path = str(tmp_path_factory.mktemp("skip") / "t.lance")
    ds = lance.write_dataset(_data(), path, max_rows_per_file=8000)  # (quicker than a Spark write)
    ds.delete("id % 11 = 3 OR id BETWEEN 100 AND 5000")
    t = LanceTable(spark, path)
    plain = t.version
    t.createIndex(["id", "f", "s"], "ZONEMAP")  # (one job, one commit)
    lance.dataset(path).create_scalar_index("ts", "ZONEMAP")  # (one of pylance's in the mix)
    return path, plain, LanceTable(spark, path)


def _ids(df):
    return sorted(r[0] for r in df.select("id").collect())


def _predicates(seed, n):
    rng = random.Random(seed)
    ops = ["=", "<", "<=", ">", ">="]
    out = []
    for _ in range(n):
        col = rng.choice(["id", "f", "s", "ts"])
        kind = rng.random()
        if kind < 0.1:
            out.append(f"{col} IS NULL")
            continue
        if kind < 0.15:
            out.append(f"{col} IS NOT NULL AND id > {rng.randrange(N)}")
            continue
        if col == "id":
            a = rng.randrange(-10, N + 10)
            lit, lit2 = str(a), str(a + rng.randrange(0, 3000))
        elif col == "f":
            a = rng.choice([0.0, -0.0, "NaN", rng.uniform(-5, N / 4 + 5)])
            lit = f"double('{a}')" if a == "NaN" else repr(float(a))
            lit2 = repr(float(rng.uniform(0, N / 4)))
        elif col == "s":
            a = rng.randrange(0, N // 97 + 2)
            lit, lit2 = f"'k{a:05d}'", f"'k{a + rng.randrange(0, 40):05d}'"
        else:
            a = rng.randrange(0, N)
            base = datetime.datetime(2020, 9, 13, 12, 26, 40, tzinfo=datetime.timezone.utc)
            t1 = base + datetime.timedelta(seconds=a)
            t2 = t1 + datetime.timedelta(seconds=rng.randrange(0, 3000))
            lit = f"TIMESTAMP '{t1:%Y-%m-%d %H:%M:%S}'"
            lit2 = f"TIMESTAMP '{t2:%Y-%m-%d %H:%M:%S}'"
        if kind < 0.3:
            out.append(f"{col} BETWEEN {lit} AND {lit2}")
        elif kind < 0.4:
            out.append(f"{col} IN ({lit}, {lit2})")
        else:
            out.append(f"{col} {rng.choice(ops)} {lit}")
    return out


def test_random_predicates_pruned_equal_unpruned(spark, indexed):
    path, plain, t = indexed
    fresh = LanceTable(spark, path)
    unindexed = LanceTable(spark, path, version=plain)
    assert not unindexed.listIndices() and len(fresh.listIndices()) == 4
    preds = _predicates(13, 10)
    # the unpruned answers of every predicate in one job (no filter to push)
    flags = unindexed.toDF().select("id", *[F.expr(p).alias(f"p{i}") for i, p in enumerate(preds)]).collect()
    # the pruned answers in one job too: a union of one filtered scan per
    # predicate (each scan planned -- and pruned -- with its own pushed filters)
    scans = [fresh.toDF().where(p).select(F.lit(i).alias("q"), "id") for i, p in enumerate(preds)]
    union = scans[0]
    for sc in scans[1:]:
        union = union.unionByName(sc)
    pruned: dict = {}
    for r in union.collect():
        pruned.setdefault(r["q"], []).append(r["id"])
    for i, p in enumerate(preds):
        assert sorted(pruned.get(i, [])) == sorted(r["id"] for r in flags if r[f"p{i}"]), p


def test_delete_and_update_read_only_matching_zones(spark, indexed, tmp_path):
    path, _, _ = indexed
    copy = str(tmp_path / "c.lance")
    shutil.copytree(path, copy)
    t = LanceTable(spark, copy)
    before = lance.dataset(copy).to_table().num_rows
    info = t.delete("id BETWEEN 17000 AND 17100")
    # fragment 2 holds ids 16000..23999: its first zone (8192 rows: all of it)
    assert info.metrics["numFragmentsScanned"] == 1
    assert info.metrics["numFragmentsSkipped"] == 2
    assert info.metrics["numRowsScanned"] == 8000
    assert info.metrics["numDeletedRows"] == sum(1 for i in range(17000, 17101) if i % 11 != 3)
    assert lance.dataset(copy).to_table().num_rows == before - info.metrics["numDeletedRows"]
    info = t.update("s = 'k00010' AND f > 0", {"f": "f + 1"})
    assert info.metrics["numFragmentsSkipped"] == 2
    # a condition pushdown cannot use (a UDF-free but non-pushable form) prunes nothing
    info = t.delete("id % 100003 = 5")
    assert info.metrics["numFragmentsSkipped"] == 0
    assert info.metrics["numFragmentsScanned"] == 3
    # rewriteColumns: the matching fragment is found through the zones, then rewritten whole
    want = {r["id"]: (r["s"].upper() if r["s"] and 6000 <= r["id"] <= 6100 else r["s"])
            for r in lance.dataset(copy).to_table(columns=["id", "s"]).to_pylist()}
    info = t.rewriteColumns({"s": "upper(s)"}, "id BETWEEN 6000 AND 6100")
    got = {r["id"]: r["s"] for r in lance.dataset(copy).to_table(columns=["id", "s"]).to_pylist()}
    assert got == want
    m = info.metrics
    assert (m["numFragmentsScanned"], m["numFragmentsSkipped"], m["numUpdatedFragments"]) == (1, 2, 1)
    # Spark path: the zone, then the fragment whole; Arrow path: the fragment once
    assert m["numRowsScanned"] == (8000 if m["evaluation"] == "arrow" else 8000 + 8000)


def test_pylance_uses_our_zone_maps(spark, indexed):
    path, _, t = indexed
    ds = lance.dataset(path)
    assert {i["name"]: i["type"] for i in ds.list_indices()} == {
        "id_idx": "ZoneMap", "f_idx": "ZoneMap", "s_idx": "ZoneMap", "ts_idx": "ZoneMap"}
    for flt, sql in [("id > 20000", "id > 20000"), ("f = 0.0", "f = 0.0"), ("f > 5000.0", "f > 5000.0"),
                     ("s = 'k00100'", "s = 'k00100'"), ("s IS NULL", "s IS NULL")]:
        assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan()
        ours = _ids(t.toDF().where(sql))
        theirs = sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist())
        assert ours == theirs, flt


def test_we_prune_with_pylance_indices(spark, tmp_path):
    path = str(tmp_path / "p.lance")
    data = _data(3).drop(["ts"])
    ds = lance.write_dataset(data, path, max_rows_per_file=10_000)
    ds.delete("id < 7 OR id BETWEEN 12000 AND 12100")
    ds.create_scalar_index("id", "ZONEMAP")
    ds.create_scalar_index("f", "ZONEMAP")
    ds.create_scalar_index("s", "BITMAP")
    lance.write_dataset(data.slice(0, 500), path, mode="append")  # not covered by the indices
    trace = str(tmp_path / "skip.json")
    t = LanceTable(spark, path)
    reader = (spark.read.format("lance").option("skipReport", trace))
    for flt, frags in [("id >= 21000", 2), ("s = 'k00003'", 2), ("f > 1e9", 4), ("s IS NULL", 3)]:
        got = _ids(reader.load(path).where(flt))
        want = sorted(lance.dataset(path).to_table(filter=flt, columns=["id"]).column("id").to_pylist())
        assert got == want, flt
        assert read_skip_report(trace)["numFragmentsScanned"] == frags, flt
        os.unlink(trace)
    assert [i["type"] for i in t.listIndices()] == ["ZONEMAP", "ZONEMAP", "BITMAP"]


def test_index_update_and_drop(spark, indexed, tmp_path):
    path, _, _ = indexed
    copy = str(tmp_path / "u.lance")
    shutil.copytree(path, copy)
    t = LanceTable(spark, copy)
    t.append(spark.createDataFrame(_data(5).slice(0, 100).to_pandas()))
    new = {f.id for f in t.snapshot.fragments} - set(t.listIndices()[0]["fragmentIds"])
    assert new
    info = t.optimize().executeIndexUpdate()
    assert info.metrics["numUpdatedIndices"] == 4
    assert all(set(i["fragmentIds"]) >= new for i in t.listIndices())
    assert t.optimize().executeIndexUpdate().version is None
    ds = lance.dataset(copy)
    assert sorted(ds.to_table(filter="id < 50", columns=["id"]).column("id").to_pylist()) == _ids(
        t.toDF().where("id < 50"))
    t.dropIndex("s_idx")
    assert sorted(i["name"] for i in lance.dataset(copy).list_indices()) == ["f_idx", "id_idx", "ts_idx"]


def _table_rows(path):
    rows = lance.dataset(path).to_table(columns=["id", "f", "s", "ts"]).to_pylist()
    return [repr(r) for r in sorted(rows, key=lambda r: r["id"])]  # (repr: NaN equals NaN)


def _upserts(ids, seed=11):
    d = _data(seed)
    idx = pa.array([i % N for i in ids])
    rows = d.take(idx)
    return rows.set_column(0, "id", pa.array(ids, pa.int64())).set_column(2, "s", pa.array([f"m{i}" for i in ids]))


def test_merge_prunes_target_by_source_key_range(spark, indexed, tmp_path):
    path, _, _ = indexed
    ours, ref = str(tmp_path / "m.lance"), str(tmp_path / "r.lance")
    shutil.copytree(path, ours)
    shutil.copytree(path, ref)
    t = LanceTable(spark, ours)
    # clustered keys: updates of 17000..17300 (some deleted rows) and inserts just above the table
    src = _upserts(list(range(17000, 17300)) + list(range(N, N + 40)))
    info = committed(t, (t.merge(spark.createDataFrame(src), "t.id = s.id")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()))
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    assert _table_rows(ours) == _table_rows(ref)
    m = info.metrics
    assert (m["numUpdatedRows"], m["numInsertedRows"]) == (r["num_updated_rows"], r["num_inserted_rows"])
    # [17000, 24039] overlaps only fragment 2 (ids 16000..23999): one zone, 8000 rows
    assert (m["numFragmentsScanned"], m["numFragmentsSkipped"], m["numRowsScanned"]) == (1, 2, 8000), m
    # few keys (<= MAX_KEY_SET): the key set itself reaches the scan as IN
    assert t.table.history(1)[0]["operationParameters"]["targetKeyRange"] == "id in [17000, 24039] (340 keys)"

    # keys beyond every zone: nothing of the target is read, rows are inserted
    covered = set(next(i for i in t.listIndices() if i["name"] == "id_idx")["fragmentIds"])
    uncovered = [f.id for f in LanceTable(spark, ours).snapshot.fragments if f.id not in covered]
    src2 = _upserts(list(range(N + 100, N + 110)))
    info = committed(t, t.merge(spark.createDataFrame(src2), "(s.id = t.id)").whenNotMatchedInsertAll().execute())
    lance.dataset(ref).merge_insert("id").when_not_matched_insert_all().execute(src2)
    assert _table_rows(ours) == _table_rows(ref)
    assert info.metrics["numInsertedRows"] == 10
    # only the fragments the first merge wrote (not indexed) are read
    assert (info.metrics["numFragmentsScanned"], info.metrics["numFragmentsSkipped"]) == (len(uncovered), 3)

    # keys of two indexed fragments; the zone map rules the third out
    uncovered = [f.id for f in LanceTable(spark, ours).snapshot.fragments if f.id not in covered]
    assert len(uncovered) == 2  # (the first merge's updated and inserted rows, written by one task; the second's)
    src_sc = _upserts([5001, 8050])
    info = committed(t, t.merge(spark.createDataFrame(src_sc), "t.id = s.id").whenMatchedUpdateAll().execute())
    lance.dataset(ref).merge_insert("id").when_matched_update_all().execute(src_sc)
    assert _table_rows(ours) == _table_rows(ref)
    # the fragment the first merge wrote (ids 17000..17299 and N..N+39) the second merge read whole: its key
    # bounds, remembered by this process (format/fragbounds.py), rule it out too; the second merge's is read
    assert (info.metrics["numFragmentsScanned"], info.metrics["numFragmentsSkipped"]) == (2 + 1, 1 + 1)

    # NOT MATCHED BY SOURCE sees every target row: no pruning
    src3 = _upserts(list(range(0, 24_000, 5)))
    info = committed(t, t.merge(spark.createDataFrame(src3), "t.id = s.id").whenNotMatchedBySourceDelete().execute())
    lance.dataset(ref).merge_insert("id").when_not_matched_by_source_delete().execute(src3)
    assert _table_rows(ours) == _table_rows(ref)
    assert info.metrics["numFragmentsSkipped"] == 0
    assert "targetKeyRange" not in t.table.history(1)[0]["operationParameters"]


def test_merge_prunes_by_timestamp_and_date_keys(spark, tmp_path):
    """The merge's target scan is planned in the driver, the source's key
    bounds handed to it as Spark would push them: timestamp bounds (the
    statistics job's microseconds, as UTC datetimes) and date key sets prune
    zones exactly -- the merged tables equal pylance's, and only the
    fragment holding the keys is read."""
    n = 24_000
    ids = np.arange(n)
    base = pa.table({
        "ts": pa.array(ids * 1_000_001 - 5_000_000_000, pa.timestamp("us", "UTC")),
        "d": pa.array(ids, pa.int32()).cast(pa.date32()),
        "v": pa.array(np.zeros(n)),
    })
    pick = np.arange(17_003, 17_303, 3)  # clustered, inside fragment 2 (16000..23999)
    src = pa.table({
        "ts": pa.array(np.concatenate([pick, [n + 7]]) * 1_000_001 - 5_000_000_000, pa.timestamp("us", "UTC")),
        "d": pa.array(np.concatenate([pick, [n + 7]]), pa.int32()).cast(pa.date32()),
        "v": pa.array(np.ones(len(pick) + 1)),
    })
    for key in ("ts", "d"):
        ours, ref = str(tmp_path / f"o-{key}.lance"), str(tmp_path / f"r-{key}.lance")
        lance.write_dataset(base, ours, max_rows_per_file=8000)
        lance.write_dataset(base, ref, max_rows_per_file=8000)
        t = LanceTable(spark, ours)
        t.createIndex(key, "ZONEMAP")
        s_df = spark.createDataFrame(src.to_pandas(), schema="ts timestamp, d date, v double")
        info = committed(t, t.merge(s_df, f"t.{key} = s.{key}").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        r = (lance.dataset(ref).merge_insert(key).when_matched_update_all().when_not_matched_insert_all()
             .execute(src))
        m = info.metrics
        assert (m["numUpdatedRows"], m["numInsertedRows"]) == (r["num_updated_rows"], r["num_inserted_rows"]) == (
            len(pick), 1), key
        rows = lambda p: sorted(map(repr, lance.dataset(p).to_table().to_pylist()))  # noqa: E731
        assert rows(ours) == rows(ref), key
        # one 8192-row zone of fragment 2 (the keys span 17003..17300)
        assert (m["numFragmentsScanned"], m["numFragmentsSkipped"], m["numRowsScanned"]) == (1, 2, 8000), (key, m)

    # date keys from a Parquet file: its footer's bounds prune alike (classic sessions)
    import pyarrow.parquet as pq

    from lance_ops.spark import jvm

    ours, ref = str(tmp_path / "o-dpq.lance"), str(tmp_path / "r-dpq.lance")
    lance.write_dataset(base, ours, max_rows_per_file=8000)
    lance.write_dataset(base, ref, max_rows_per_file=8000)
    t = LanceTable(spark, ours)
    t.createIndex("d", "ZONEMAP")
    pq.write_table(src, str(tmp_path / "src.parquet"))
    info = committed(t, (t.merge(spark.read.parquet(str(tmp_path / "src.parquet")), "t.d = s.d").whenMatchedUpdateAll()
            .whenNotMatchedInsertAll().execute()))
    lance.dataset(ref).merge_insert("d").when_matched_update_all().when_not_matched_insert_all().execute(src)
    rows = lambda p: sorted(map(repr, lance.dataset(p).to_table().to_pylist()))  # noqa: E731
    assert rows(ours) == rows(ref)
    m = info.metrics
    assert (m["numFragmentsScanned"], m["numFragmentsSkipped"], m["numRowsScanned"]) == (1, 2, 8000), m
    key_range = t.table.history(1)[0]["operationParameters"]["targetKeyRange"]
    assert key_range.startswith("d in [2016-07-21, 2035-09-24]"), key_range
    assert key_range.endswith("(from the source's Parquet footers)") != jvm.is_connect(spark), key_range


def test_merge_runs_few_spark_jobs(spark, indexed, tmp_path, monkeypatch):
    """A selective upsert from a Parquet file costs a fixed number of Spark
    stages, whatever the table: one broadcasting the source, one whose tasks
    scan the pruned target, join it with the source and rewrite the
    fragments they read (no shuffle) -- and, that scan being one task here,
    write the inserts in it (a bigger scan: one more stage, only when some
    source row matched nothing). The source's count and key
    bounds come from its footers (classic sessions); where they do not
    serve, one more stage computes them (count, bounds, key set / bloom
    filter together). No checkpoint of a file source, none of the matched
    rows, no separate key-set or bloom-filter job. A source that cannot be
    replayed (a nondeterministic expression) adds exactly its checkpoint."""
    import pyarrow.parquet as pq

    from lance_ops.ops.merge import FOOTER_STATS
    from lance_ops.spark import jvm

    stats_stage = 1 if jvm.is_connect(spark) else 0  # (Connect: footers are the server's files)

    path, _, _ = indexed
    ours, ref = str(tmp_path / "m.lance"), str(tmp_path / "r.lance")
    shutil.copytree(path, ours)
    shutil.copytree(path, ref)
    t = LanceTable(spark, ours)
    src = _upserts(list(range(17000, 17300, 2)) + list(range(N, N + 40)))
    pq.write_table(src, str(tmp_path / "src.parquet"))
    source = spark.read.parquet(str(tmp_path / "src.parquet"))
    _ = source.schema
    with StageCounter() as stages:
        info = committed(t, t.merge(source, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    assert _table_rows(ours) == _table_rows(ref)
    m = info.metrics
    assert (m["numUpdatedRows"], m["numInsertedRows"]) == (r["num_updated_rows"], r["num_inserted_rows"])
    assert m["numUpdatedRows"] > 100 and m["numInsertedRows"] >= 40
    assert (m["numFragmentsScanned"], m["numFragmentsSkipped"]) == (1, 2)
    _assert_stages(spark, stages, 2 + stats_stage)  # (was 10: two checkpoints, six more small jobs)

    # every source row matched: no insert job
    live = [i for i in range(17001, 17301, 2) if i % 11 != 3]  # (the fixture deleted id % 11 = 3)
    again = _upserts(live)
    pq.write_table(again, str(tmp_path / "again.parquet"))
    with StageCounter() as stages:
        info = committed(t, t.merge(spark.read.parquet(str(tmp_path / "again.parquet")), "t.id = s.id").whenMatchedUpdateAll() \
            .whenNotMatchedInsertAll().execute())
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(again)
    assert _table_rows(ours) == _table_rows(ref)
    assert (info.metrics["numUpdatedRows"], info.metrics["numInsertedRows"]) == (len(live), 0) == \
        (r["num_updated_rows"], r["num_inserted_rows"])
    _assert_stages(spark, stages, 2 + stats_stage)

    # many keys (> MAX_KEY_SET): the bloom filter comes from the same single statistics stage
    import lance_ops.ops.mergekeys as mergekeys

    monkeypatch.setattr(mergekeys, "KEY_FILTER_MIN_RATIO", 1)
    big = _upserts(list(range(0, 2 * 4200, 2)))
    pq.write_table(big, str(tmp_path / "big.parquet"))
    spark.conf.set(FOOTER_STATS, "false")  # (its range is narrow: the footers would do)
    try:
        with StageCounter() as stages:
            t.merge(spark.read.parquet(str(tmp_path / "big.parquet")), "t.id = s.id").whenMatchedUpdateAll() \
                .whenNotMatchedInsertAll().execute()
    finally:
        spark.conf.unset(FOOTER_STATS)
    lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(big)
    assert _table_rows(ours) == _table_rows(ref)
    assert "bloom filter of ~4,200 source keys" in t.table.history(1)[0]["operationParameters"]["targetKeyRange"]
    _assert_stages(spark, stages, 3)  # (statistics, broadcast, scan + rewrite + inserts)

    # a nondeterministic source (same values, but Spark cannot know): checkpointed
    # once, so the statistics, the broadcast and the inserts see the same rows
    small = _upserts([17001, N + 500])
    nondet = spark.createDataFrame(small).withColumn("f", F.when(F.rand() >= 0, F.col("f")))
    with StageCounter() as stages:
        t.merge(nondet, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(small)
    assert _table_rows(ours) == _table_rows(ref)
    _assert_stages(spark, stages, 4)


def test_merge_into_a_scan_of_several_tasks_writes_inserts_after_it(spark, tmp_path):
    """Where the target scan is several tasks (here 3 fragments of 70,000
    rows: one task each), no task sees every matched pair: the tasks report
    the source rows they matched and one more stage writes the inserts
    (none when every source row matched). Same rows as pylance."""
    n = 210_000
    base = pa.table({"id": pa.array(np.arange(n), pa.int64()), "v": pa.array(np.zeros(n), pa.float64())})
    ours, ref = str(tmp_path / "o.lance"), str(tmp_path / "r.lance")
    for p in (ours, ref):
        lance.write_dataset(base, p, max_rows_per_file=70_000)
    t = LanceTable(spark, ours)
    for keys, inserted, stages_run in (([5, 69_999, 70_000, 150_001, n + 3, n + 9], 2, 3), ([7, 140_007], 0, 2)):
        src = pa.table({"id": pa.array(keys, pa.int64()), "v": pa.array([1.0 + k for k in keys])})
        with StageCounter() as stages:
            info = committed(t, t.merge(spark.createDataFrame(src), "t.id = s.id").whenMatchedUpdateAll()
                             .whenNotMatchedInsertAll().execute())
        r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
        got = sorted(lance.dataset(ours).to_table().to_pylist(), key=lambda row: row["id"])
        assert got == sorted(lance.dataset(ref).to_table().to_pylist(), key=lambda row: row["id"])
        assert (info.metrics["numUpdatedRows"], info.metrics["numInsertedRows"]) == \
            (r["num_updated_rows"], r["num_inserted_rows"]) == (len(keys) - inserted, inserted)
        assert info.metrics["numFragmentsScanned"] >= 3
        # (the broadcast, the scan's 3 tasks[, the inserts]; the local source's keys are read with no job)
        _assert_stages(spark, stages, stages_run)


def test_local_source_statistics_equal_the_jobs_for_every_key_type(spark):
    """The statistics of a local source read in the driver -- its rows
    collected (no job) for the key types a Row holds exactly, ``toArrow``
    for timestamps -- are the statistics job's: count, bounds, key sets and
    the bloom filter, nulls, NaN, -0.0, extremes and unicode included."""
    import datetime
    import decimal

    from lance_ops.ops.mergekeys import _source_stats

    n = 300
    rng = random.Random(5)
    rows = []
    for i in range(n):
        rows.append((
            None if i % 17 == 0 else rng.choice([-(2**63), 2**63 - 1, 0, i * 7919]),
            None if i % 13 == 0 else rng.randrange(-2**31, 2**31),
            None if i % 11 == 0 else rng.choice(["", "a", "é", "日本", "\U0001f600", f"k{i}"]),
            None if i % 7 == 0 else datetime.date(1970, 1, 1) + datetime.timedelta(days=rng.randrange(-9000, 30000)),
            None if i % 5 == 0 else decimal.Decimal(rng.randrange(-10**9, 10**9)) / 100,
            None if i % 9 == 0 else rng.choice([float("nan"), -0.0, 0.0, 1.5, float("inf"), -1e300]),
            None if i % 4 == 0 else bytes([i % 256, 7]),
            None if i % 3 == 0 else datetime.datetime(2024, 3, 1, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(seconds=rng.randrange(10**8)),
        ))
    schema = "l long, i int, s string, d date, m decimal(12,2), f double, b binary, ts timestamp"
    source = spark.createDataFrame(rows, schema)
    cols = ["l", "i", "s", "d", "m", "f", "b", "ts"]
    for sets, bloom in ((cols, None), (["s"], "l")):
        local, job = (_source_stats(source, cols, sets, bloom, local=flag) for flag in (True, False))
        assert (local.rows, local.bounds) == (job.rows, job.bounds) == (n, local.bounds)
        # (as sets of reprs: each task's NaN is a key of its own in a Python set)
        assert {c: None if v is None else sorted(set(map(repr, v))) for c, v in local.key_sets.items()} == \
            {c: None if v is None else sorted(set(map(repr, v))) for c, v in job.key_sets.items()}
        if bloom is not None:
            assert local.key_filter(bloom) == job.key_filter(bloom)


def test_merge_statistics_of_a_local_source_come_from_its_arrow_data(spark, indexed, tmp_path, monkeypatch):
    """A source that is data sent with the plan (``createDataFrame`` of Arrow
    data: a ``LocalRelation``, classic and Connect alike) has its count, key
    bounds and key set computed in the driver from its key columns read as
    Arrow -- no statistics job (a stage fewer on classic sessions). Same
    merge, same pruning as with the statistics job (``LOCAL_SOURCE_ROWS`` 0
    forces it), same rows as pylance."""
    import lance_ops.ops.mergekeys as mergekeys
    from lance_ops.spark import jvm
    from lance_ops.spark.plans import explain_sections, local_relation

    path, _, _ = indexed
    live = [i for i in range(17001, 17301, 2) if i % 11 != 3] + list(range(N + 7, N + 12))
    src = _upserts(live)
    source = spark.createDataFrame(src)
    assert local_relation(explain_sections(source)["Optimized Logical Plan"])
    runs = {}
    for name, limit in (("local", mergekeys.LOCAL_SOURCE_ROWS), ("job", 0)):
        monkeypatch.setattr(mergekeys, "LOCAL_SOURCE_ROWS", limit)
        ours = str(tmp_path / f"{name}.lance")
        shutil.copytree(path, ours)
        t = LanceTable(spark, ours)
        with StageCounter() as stages:
            info = committed(t, t.merge(source, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        runs[name] = (_table_rows(ours), info.metrics, t.table.history(1)[0]["operationParameters"]["targetKeyRange"],
                      len(stages.stages))
    ref = str(tmp_path / "ref.lance")
    shutil.copytree(path, ref)
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    local, job = runs["local"], runs["job"]
    assert local[0] == job[0] == _table_rows(ref)
    m = local[1]
    assert (m["numUpdatedRows"], m["numInsertedRows"]) == (r["num_updated_rows"], r["num_inserted_rows"]) == (len(live) - 5, 5)
    assert local[2] == job[2] and "keys)" in local[2], local[2]  # (the same range and key set)
    for k in ("numFragmentsScanned", "numFragmentsSkipped", "numRowsScanned"):
        assert local[1][k] == job[1][k], k
    if not jvm.is_connect(spark):
        # no statistics stage: the local data is read in the driver, collected with no job (then: the
        # broadcast; scan + rewrite + inserts, the scan being one task)
        assert (local[3], job[3]) == (2, 3)


def _rows_any_order(path):
    return sorted(map(repr, lance.dataset(path).to_table(columns=["id", "f", "s", "ts"]).to_pylist()))


def test_merge_source_bounds_from_parquet_footers(spark, indexed, tmp_path, monkeypatch):
    """A merge whose source is a bare scan of Parquet files takes the
    source's count and key bounds from the files' footers -- no statistics
    job -- where they are exact: several files and row groups, null keys, a
    file of only null keys. The merged table equals the same merge with the
    statistics job (and pylance's, for a source without null keys), and the
    target read is the same range. Where the footers do not serve (a
    filtered or computed source, a key range too wide to spare the job's
    finer pruning, files without statistics, Spark Connect: the files are
    the server's), the statistics job runs as before."""
    import pyarrow.parquet as pq

    import lance_ops.ops.mergekeys as mergekeys
    from lance_ops.ops.merge import FOOTER_STATS
    from lance_ops.spark import jvm

    path, _, _ = indexed
    connect = jvm.is_connect(spark)
    real, calls = mergekeys._source_stats, []

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(mergekeys, "_source_stats", counted)

    def merge(source, name, footers=True):
        """(metrics, statistics jobs run, targetKeyRange, table path)"""
        p = str(tmp_path / f"{name}-{footers}.lance")
        shutil.copytree(path, p)
        spark.conf.set(FOOTER_STATS, str(footers).lower())
        calls.clear()
        try:
            t = LanceTable(spark, p)
            info = committed(t, t.merge(source, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        finally:
            spark.conf.unset(FOOTER_STATS)
        return info.metrics, len(calls), t.table.history(1)[0]["operationParameters"].get("targetKeyRange"), p

    # three files, row groups of 25 rows, null keys in two of them, one of only nulls
    d = tmp_path / "src"
    d.mkdir()
    first = _upserts(list(range(17000, 17150, 2)))
    first = first.set_column(0, "id", pa.array([None if i % 7 == 0 else v for i, v in
                                                 enumerate(first.column("id").to_pylist())], pa.int64()))
    pq.write_table(first, str(d / "a.parquet"), row_group_size=25)
    pq.write_table(_upserts(list(range(17150, 17300, 3)) + list(range(N + 1, N + 5))), str(d / "b.parquet"),
                   row_group_size=25)
    nulls = _upserts([1, 2, 3])
    pq.write_table(nulls.set_column(0, "id", pa.nulls(3, pa.int64())), str(d / "c.parquet"))
    source = spark.read.parquet(str(d))
    m_f, jobs_f, range_f, p_f = merge(source, "files")
    m_j, jobs_j, range_j, p_j = merge(source, "files", footers=False)
    assert _rows_any_order(p_f) == _rows_any_order(p_j)
    assert jobs_j == 1 and range_j == "id in [17002, 24004] (118 keys)", range_j  # (17000 is a null)
    assert m_f["numSourceRows"] == m_j["numSourceRows"] == 75 + 50 + 4 + 3
    assert (m_f["numUpdatedRows"], m_f["numInsertedRows"]) == (m_j["numUpdatedRows"], m_j["numInsertedRows"])
    keys = first.column("id").to_pylist() + list(range(17150, 17300, 3))
    gone = sum(1 for i in keys if i is not None and i % 11 == 3)
    # (null keys never match: inserted; so are keys of deleted rows)
    assert m_f["numInsertedRows"] == 4 + 11 + 3 + gone
    assert (m_f["numFragmentsScanned"], m_f["numRowsScanned"]) == (m_j["numFragmentsScanned"], m_j["numRowsScanned"])
    if connect:
        assert (jobs_f, range_f) == (1, range_j)
    else:
        # (the bloom filter of the keys: built by the target scan's tasks from the same files)
        assert (jobs_f, range_f) == (0, "id in [17002, 24004]; id in a bloom filter of <= 132 source keys built "
                                        "by the scan's tasks (from the source's Parquet footers)")

    # without null keys: pylance's merge_insert agrees
    clean = _upserts(list(range(17001, 17301, 2)) + [N + 9])
    pq.write_table(clean, str(tmp_path / "clean.parquet"), row_group_size=40)
    m, jobs, _, p = merge(spark.read.parquet(str(tmp_path / "clean.parquet")), "clean")
    ref = str(tmp_path / "clean-ref.lance")
    shutil.copytree(path, ref)
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(clean)
    assert _table_rows(p) == _table_rows(ref)
    assert (m["numUpdatedRows"], m["numInsertedRows"]) == (r["num_updated_rows"], r["num_inserted_rows"])
    assert jobs == (1 if connect else 0)

    # where the footers do not serve, the statistics job runs
    wide = _upserts([5001, 17050])  # (its range holds every fragment: the key set prunes to two)
    pq.write_table(wide, str(tmp_path / "wide.parquet"))
    pq.write_table(clean, str(tmp_path / "nostats.parquet"), write_statistics=False)
    cases = {
        "filtered": spark.read.parquet(str(tmp_path / "clean.parquet")).where("f IS NULL OR f >= 0"),
        "computed": spark.read.parquet(str(tmp_path / "clean.parquet")).selectExpr("id + 1 AS id", "f", "s", "ts"),
        "wide": spark.read.parquet(str(tmp_path / "wide.parquet")),
        "nostats": spark.read.parquet(str(tmp_path / "nostats.parquet")),
    }
    for name, src in cases.items():
        m, jobs, key_range, p = merge(src, name)
        assert jobs == 1, name
        assert "footers" not in key_range, (name, key_range)
    assert key_range is not None
    m, _, key_range, _ = merge(cases["wide"], "wide2")
    assert key_range == "id in [5001, 17050] (2 keys)"

    if connect:
        return
    # generated sources: clustered keys anywhere (also beyond the table), nulls, 1-3 files, small row
    # groups -- the merged table with the footers' bounds equals the one with the job's
    rng = random.Random(5)
    for case in range(4):
        g = tmp_path / f"gen{case}"
        g.mkdir()
        lo = rng.randrange(0, N + 500)
        keys = rng.sample(range(lo, lo + 3000), rng.randrange(3, 300))  # (distinct: no duplicate matches)
        files = rng.randrange(1, 4)
        for f in range(files):
            rows = _upserts(sorted(keys[f::files]))
            col = [None if rng.random() < 0.1 else v for v in rows.column("id").to_pylist()]
            pq.write_table(rows.set_column(0, "id", pa.array(col, pa.int64())), str(g / f"{f}.parquet"),
                           row_group_size=rng.choice([7, 50, 1000]))
        m_f, jobs_f, range_f, p_f = merge(spark.read.parquet(str(g)), f"gen{case}")
        m_j, _, _, p_j = merge(spark.read.parquet(str(g)), f"gen{case}", footers=False)
        if case == 0:
            p_j_gen0 = p_j
        assert _rows_any_order(p_f) == _rows_any_order(p_j), case
        assert {k: m_f[k] for k in ("numUpdatedRows", "numInsertedRows", "numSourceRows")} == \
            {k: m_j[k] for k in ("numUpdatedRows", "numInsertedRows", "numSourceRows")}, case
        assert jobs_f == 0 and range_f.endswith("footers)"), (case, range_f)

    # a key range too wide to spare reading, more keys than an IN list takes:
    # no statistics job either -- the scan's tasks build the bloom filter
    import lance_ops.ops.merge as merge_mod
    import lance_ops.ops.sourcefooters as sourcefooters

    monkeypatch.setattr(sourcefooters, "narrow_enough", lambda *a: False)
    monkeypatch.setattr(merge_mod, "MAX_KEY_SET", 20)
    g = tmp_path / "gen0"
    m_f, jobs_f, range_f, p_f = merge(spark.read.parquet(str(g)), "wide-bloom")
    assert jobs_f == 0 and "built by the scan's tasks" in range_f, range_f
    assert _rows_any_order(p_f) == _rows_any_order(p_j_gen0), range_f
    monkeypatch.setattr(merge_mod, "MAX_KEY_SET", 10_000)  # (a key set only the job gives: it runs)
    _, jobs_k, range_k, _ = merge(spark.read.parquet(str(g)), "wide-keys")
    assert jobs_k == 1 and "keys)" in range_k, range_k


def test_source_keys_filter_built_in_tasks_is_the_jobs(tmp_path):
    """The bloom filter a target scan task builds from the source's Parquet
    files (:mod:`lance_ops.spark.sourcekeys`) is the filter of the same keys
    the statistics job builds: bit for bit, at the same size."""
    import pyarrow.parquet as pq
    from pyspark.sql import types as T

    from lance_ops.format.keyfilter import build, filter_size, may_contain_each
    from lance_ops.ops.sourcefooters import footer_stats
    from lance_ops.spark.sourcekeys import ParquetKeys

    keys = [pa.array([None, 5, 2**40, -7], pa.int64()), pa.array(list(range(1000, 1300)), pa.int64())]
    files = []
    for k, arr in enumerate(keys):
        pq.write_table(pa.table({"ID": arr}), str(tmp_path / f"{k}.parquet"), row_group_size=50)
        files.append("file://" + str(tmp_path / f"{k}.parquet"))
    stats = footer_stats(files, {"id": T.LongType()})  # (Spark's name: matched ignoring case)
    spec = stats.key_filter("id")
    assert isinstance(spec, ParquetKeys) and spec.nbytes == filter_size(304)
    assert [f[:2] for f in spec.files] == [(str(tmp_path / f"{k}.parquet"), "ID") for k in range(2)]
    again = ParquetKeys.parse(spec.spec())
    assert again == spec
    assert again.filter_bytes() == build(pa.chunked_array(keys), filter_size(304))
    probe = pa.array([5, 2**40, -7, 1000, 1299, 4, 1300], pa.int64())
    assert may_contain_each(again.filter_bytes(), probe).to_pylist()[:5] == [True] * 5
    # a source file rewritten in place after planning (a CDC batch file reused): no filter at all
    pq.write_table(pa.table({"ID": pa.array([77, 78, 79], pa.int64())}), str(tmp_path / "1.parquet"))
    assert ParquetKeys.parse(spec.spec()).filter_bytes() is None


def test_parquet_footer_statistics(tmp_path):
    """:func:`lance_ops.ops.sourcefooters.footer_stats` answers only what the
    footers say exactly, and None for anything else."""
    import pyarrow.parquet as pq
    from pyspark.sql import types as T

    from lance_ops.ops.sourcefooters import MAX_FILES, footer_stats
    from lance_ops.spark.plans import bare_parquet_scan

    def write(name, table, **kw):
        pq.write_table(table, str(tmp_path / name), **kw)
        return (tmp_path / name).as_uri()

    a = write("a.parquet", pa.table({"ID": pa.array([5, None, 9], pa.int64()), "d": pa.array([1, 2, None], pa.date32()),
                                     "i": pa.array([1, 2, 3], pa.int32())}), row_group_size=1)
    b = write("b.parquet", pa.table({"ID": pa.array([-3, 4], pa.int64()), "d": pa.array([None, None], pa.date32()),
                                     "i": pa.array([0, 7], pa.int32())}))
    st = footer_stats([a, b], {"id": T.LongType(), "d": T.DateType(), "i": T.IntegerType()})
    assert st.rows == 5 and st.key_sets == {}
    # integer keys: the scan's tasks build their bloom filter from the files; dates: never (rebasing)
    assert [f[:2] for f in st.key_filter("id").files] == [(str(tmp_path / "a.parquet"), "ID"),
                                                          (str(tmp_path / "b.parquet"), "ID")]
    assert st.key_filter("d") is None
    assert st.bounds == {"id": (-3, 9), "d": (datetime.date(1970, 1, 2), datetime.date(1970, 1, 3)), "i": (0, 7)}
    assert footer_stats([b], {"d": T.DateType()}).bounds == {"d": (None, None)}  # (only nulls)
    assert footer_stats([a], {}).rows == 3
    assert footer_stats([a], {"i": T.LongType()}) is None  # (int32 in the file: Spark would widen it)
    assert footer_stats([a], {"id": T.StringType()}) is None
    assert footer_stats([a], {"nope": T.LongType()}) is None
    assert footer_stats([a.replace("file://", "s3://bucket")], {"id": T.LongType()}) is None
    assert footer_stats([a] * (MAX_FILES + 1), {"id": T.LongType()}) is None
    assert footer_stats([(tmp_path / "missing.parquet").as_uri()], {"id": T.LongType()}) is None
    both = write("both.parquet", pa.table({"k": [1], "K": [2]}))
    assert footer_stats([both], {"k": T.LongType()}).bounds == {"k": (1, 1)}  # (the exact name wins)
    assert footer_stats([both], {"kk": T.LongType()}) is None
    no_stats = write("n.parquet", pa.table({"k": [1, 2]}), write_statistics=False)
    assert footer_stats([no_stats], {"k": T.LongType()}) is None
    old = write("old.parquet", pa.table({"d": pa.array([datetime.date(1500, 1, 1)], pa.date32())}))
    assert footer_stats([old], {"d": T.DateType()}) is None  # (maybe rebased from the hybrid calendar)

    assert bare_parquet_scan("Relation [id#0L,s#3] parquet")
    assert bare_parquet_scan("Project [id#0L, s#3]\n+- Relation [id#0L,ts#1,f0#2,s#3] parquet")
    assert not bare_parquet_scan("Filter (id#0L > 5)\n+- Relation [id#0L,s#3] parquet")
    assert not bare_parquet_scan("Project [(id#0L + 0) AS id#9L, s#3]\n+- Relation [id#0L,s#3] parquet")
    assert not bare_parquet_scan("Relation [id#0L,s#3] json")
    assert not bare_parquet_scan("LocalRelation [id#0L]")
    assert not bare_parquet_scan("")


def _assert_stages(spark, stages: StageCounter, n: int) -> None:
    """``n`` stages ran. Under Spark Connect the progress lines come from the
    server's progress reports, sent on its own schedule: a stage that starts
    and ends between two reports is not seen -- all of an operation's stages
    can be that short (one-task stages of ~0.03 s) -- so there only "at most
    n"."""
    from lance_ops.spark import jvm

    if jvm.is_connect(spark):
        assert len(stages.stages) <= n, stages.stages
    else:
        assert len(stages.stages) == n, stages.stages


def test_compaction_rebuilds_zone_maps(spark, indexed, tmp_path):
    """Compaction rewrites every fragment (all small, fragment 0 >10% deleted):
    the zone maps are rebuilt over the new fragment (pylance's own compaction
    would leave them stale), pylance plans with them and agrees with us, and
    we prune inside the new fragment by its zones."""
    path, _, _ = indexed
    copy = str(tmp_path / "c.lance")
    shutil.copytree(path, copy)
    t = LanceTable(spark, copy)
    info = committed(t, t.optimize().executeCompaction())
    assert info.metrics["numIndicesRebuilt"] == 4 and info.metrics["numIndicesNarrowed"] == 0
    frags = [f.id for f in t.snapshot.fragments]
    assert frags == [3] and all(i["fragmentIds"] == frags for i in t.listIndices())
    ds = lance.dataset(copy)
    trace = str(tmp_path / "skip.json")
    reader = spark.read.format("lance").option("skipReport", trace)
    for flt in ["id BETWEEN 17000 AND 17100", "f > 5000.0", "s = 'k00100'", "s IS NULL", "f = 0.0"]:
        assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan(), flt
        theirs = sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist())
        assert _ids(reader.load(copy).where(flt)) == theirs, flt
    # the last filter's report: f = 0.0 may be anywhere; the id range in one zone
    _ids(reader.load(copy).where("id BETWEEN 17000 AND 17100"))
    rep = read_skip_report(trace)
    assert (rep["numFragmentsScanned"], rep["numRowsScanned"]) == (1, 8192), rep
    # the rebuilt zones are the zones pylance computes over the compacted table
    from lance_ops.format.zones import read_zonemap

    def zones(name):
        snap = LanceTable(spark, copy).snapshot
        return [repr(z) for z in read_zonemap(snap.store, next(i for i in snap.indices if i.name == name))]

    for c in ("id", "f", "s"):
        lance.dataset(copy).create_scalar_index(c, "ZONEMAP", name=f"{c}_py")
        assert zones(f"{c}_idx") == zones(f"{c}_py"), c


def test_bloom_filters_built_as_pylance_and_probed(spark, tmp_path):
    """createIndex(col, "BLOOMFILTER") writes pylance 14's bloomfilter.lance
    bit for bit (same zones, same split-block filters over xxhash64); pylance
    plans with ours and agrees; equality / IN predicates of reads and deletes
    skip the zones whose filters rule the value out."""
    import lance.file as lf

    from lance_ops.format.indexremap import decode_row_addr_map

    data = _data(5).drop(["f"])
    ours, ref = str(tmp_path / "o.lance"), str(tmp_path / "r.lance")
    lance.write_dataset(data, ours, max_rows_per_file=8000)
    # deleted rows: zones hold 8192 *live* rows, spans and filters as pylance's
    lance.dataset(ours).delete("id < 40 OR id BETWEEN 8100 AND 8200 OR id % 97 = 5")
    shutil.copytree(ours, ref)
    t = LanceTable(spark, ours)
    t.createIndex(["id", "s", "ts"], "BLOOMFILTER")
    t.createIndex("id", "ZONEMAP", name="id_zm")
    for c in ("id", "s", "ts"):
        lance.dataset(ref).create_scalar_index(c, "BLOOMFILTER")
    lance.dataset(ref).create_scalar_index("id", "ZONEMAP", name="id_zm")
    zm = {p: lf.LanceFileReader(f"{p}/_indices/{next(i['uuid'] for i in lance.dataset(p).list_indices() if i['name'] == 'id_zm')}"
                                "/zonemap.lance").read_all().to_table() for p in (ours, ref)}
    assert zm[ours].equals(zm[ref])
    t.dropIndex("id_zm")
    lance.dataset(ref).drop_index("id_zm")

    def files(path):
        ds = lance.dataset(path)
        out = {}
        for i in ds.list_indices():
            f = f"{path}/_indices/{i['uuid']}/bloomfilter.lance"
            r = lf.LanceFileReader(f)
            g = r.metadata().global_buffers[1]  # the null rows' addresses
            with open(f, "rb") as fh:
                raw = fh.read()
            nulls = decode_row_addr_map(raw[g.position:g.position + g.size])
            out[i["name"]] = (i["type"], i["fragment_ids"], r.read_all().to_table(), r.metadata().schema.metadata,
                              {k: list(v) for k, v in nulls.items()})
        return out

    assert files(ours) == files(ref)
    assert [i["type"] for i in t.listIndices()] == ["BLOOMFILTER"] * 3
    ds = lance.dataset(ours)
    trace = str(tmp_path / "skip.json")
    reader = spark.read.format("lance").option("skipReport", trace)
    ts = "TIMESTAMP '2020-09-13 12:26:40' + INTERVAL 17001 SECONDS"
    for flt, frags in [("id = 17000", 1), ("id IN (5, 17000, 99999)", 1), ("s = 'k00020'", 1),
                       ("s = 'k00100'", 0), ("s = 'nope'", 0), ("s IS NULL", 2), (f"ts = {ts}", 1), ("id > 17000", 3)]:
        got = _ids(reader.load(ours).where(flt))
        assert read_skip_report(trace)["numFragmentsScanned"] == frags, flt
        if "TIMESTAMP" not in flt:
            assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan() or ">" in flt, flt
            assert got == sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist()), flt
    assert _ids(reader.load(ours).where(f"ts = {ts}")) == [17001]
    # appended rows: executeIndexUpdate extends the bloom filters as pylance's optimize_indices does
    for p in (ours, ref):
        lance.write_dataset(_data(9).drop(["f"]).slice(0, 300), p, mode="append")
    t = LanceTable(spark, ours)
    info = t.optimize().executeIndexUpdate()
    assert info.metrics["numUpdatedIndices"] == 3
    lance.dataset(ref).optimize.optimize_indices()
    assert files(ours) == files(ref)
    info = t.delete("id IN (3, 12345)")
    # (id 3 was deleted before the filters were built -- no filter holds it -- and appended again)
    assert (info.metrics["numFragmentsScanned"], info.metrics["numFragmentsSkipped"]) == (2, 2)
    assert info.metrics["numDeletedRows"] == 2


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable-row-ids"])
def test_bitmaps_built_as_pylance_and_used(spark, tmp_path, stable):
    """createIndex(col, "BITMAP") writes pylance 14's bitmap_page_lookup.lance
    bit for bit (keys in pylance's order: null first, -0.0 before +0.0, one
    NaN key last; live rows only; row ids on a stable-row-id table, addresses
    otherwise); pylance plans with ours and agrees; our reads and deletes skip
    the fragments no matching key points to; executeIndexUpdate covers
    appended fragments."""
    import lance.file as lf

    data = _data(11).drop(["ts"])
    k = pa.array(np.arange(N) // 3000 % 5, pa.int32(), mask=np.arange(N) % 1000 == 999)
    data = data.append_column("k", k)
    ours, ref = str(tmp_path / "o.lance"), str(tmp_path / "r.lance")
    lance.write_dataset(data, ours, max_rows_per_file=8000, enable_stable_row_ids=stable)
    lance.dataset(ours).delete("id % 13 = 1 OR id BETWEEN 3000 AND 5999")
    shutil.copytree(ours, ref)
    t = LanceTable(spark, ours)
    info = t.createIndex(["k", "s", "f"], "BITMAP")
    assert info.operation == "CreateIndex" and info.metrics["numIndexedFragments"] == 3
    for c in ("k", "s", "f"):
        lance.dataset(ref).create_scalar_index(c, "BITMAP")

    def files(path):
        out = {}
        for i in lance.dataset(path).list_indices():
            r = lf.LanceFileReader(f"{path}/_indices/{i['uuid']}/bitmap_page_lookup.lance")
            tb = r.read_all().to_table()
            keys = [repr(v) for v in tb.column("keys").to_pylist()]  # (NaN == NaN as text)
            out[i["name"]] = (i["type"], i["fragment_ids"], keys, tb.column("bitmaps").to_pylist(),
                              r.metadata().schema)
        return out

    assert files(ours) == files(ref)
    assert [i["type"] for i in t.listIndices()] == ["BITMAP"] * 3
    ds = lance.dataset(ours)
    trace = str(tmp_path / "skip.json")
    reader = spark.read.format("lance").option("skipReport", trace)
    for flt, frags in [("k = 1", 1), ("k IN (1, 3)", 2), ("k IS NULL", 3), ("s = 'k00070'", 1),
                       ("s = 'k00050'", 0), ("s = 'nope'", 0), ("f = 0.0", 3), ("k = 9", 0)]:
        got = _ids(reader.load(ours).where(flt))
        assert read_skip_report(trace)["numFragmentsScanned"] == frags, flt
        assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan(), flt
        assert got == sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist()), flt
    # (k: 0, 1, 2 | 2, 3, 4, 0 | 0, 1, 2 by fragment; ids 3000-5999 deleted; s: null in fragment 1)
    # appended rows: executeIndexUpdate rebuilds the bitmaps over every fragment
    more = data.slice(0, 300)
    for p in (ours, ref):
        lance.write_dataset(more, p, mode="append")
    t = LanceTable(spark, ours)
    info = t.optimize().executeIndexUpdate()
    assert info.metrics["numUpdatedIndices"] == 3
    assert all(i["fragmentIds"] == [f.id for f in t.snapshot.fragments] for i in t.listIndices())
    got = _ids(reader.load(ours).where("k = 0"))
    assert read_skip_report(trace)["numFragmentsScanned"] == 4  # (k = 0 is in every fragment)
    assert got == sorted(lance.dataset(ours).to_table(filter="k = 0", columns=["id"]).column("id").to_pylist())
    info = t.delete("k = 3")
    assert (info.metrics["numFragmentsScanned"], info.metrics["numFragmentsSkipped"]) == (1, 3)
    lance.dataset(ref).delete("k = 3")
    assert _ids(t.toDF()) == sorted(lance.dataset(ref).to_table(columns=["id"]).column("id").to_pylist())


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable-row-ids"])
def test_we_prune_with_pylance_btrees(spark, tmp_path, stable):
    """pylance's BTREE (sorted values + row addresses in 4096-row pages, also
    with stable row ids): pages whose first/last value rule a conjunct out are
    not read, the others' addresses name the fragments to scan (= and IN: only
    the rows equal to a literal; ranges: every row of a chosen page); pruned reads
    equal unpruned ones for random predicates (deleted rows, NaN, ±0.0,
    nulls, timestamps) and pylance's answers."""
    path = str(tmp_path / "b.lance")
    lance.write_dataset(_data(17), path, max_rows_per_file=8000, enable_stable_row_ids=stable)
    lance.dataset(path).delete("id % 11 = 3 OR id BETWEEN 100 AND 5000")
    plain = LanceTable(spark, path).version
    for c in ("id", "f", "s", "ts"):
        lance.dataset(path).create_scalar_index(c, "BTREE")
    t, unindexed = LanceTable(spark, path), LanceTable(spark, path, version=plain)
    trace = str(tmp_path / "skip.json")
    reader = spark.read.format("lance").option("skipReport", trace)
    ds = lance.dataset(path)
    for flt, frags in [("id >= 21000", 1), ("id = 20000", 1), ("id IN (5, 17000)", 2), ("s = 'k00003'", 0), ("s = 'k00060'", 1),
                       ("s IS NULL", 2), ("f < -1", 0), ("id > 5", 3)]:
        got = _ids(reader.load(path).where(flt))
        assert read_skip_report(trace)["numFragmentsScanned"] == frags, flt
        assert got == sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist()), flt
    preds = _predicates(29, 16)
    flags = unindexed.toDF().select("id", *[F.expr(p).alias(f"p{i}") for i, p in enumerate(preds)]).collect()
    for i, p in enumerate(preds):
        assert _ids(t.toDF().where(p)) == sorted(r["id"] for r in flags if r[f"p{i}"]), p
    info = t.delete("id BETWEEN 20000 AND 20010")
    assert (info.metrics["numFragmentsScanned"], info.metrics["numDeletedRows"]) == (1, 10)


def test_merge_probes_a_bloom_filter_of_source_keys(spark, tmp_path):
    """More distinct source keys than an IN list takes: Spark builds a bloom
    filter of them and the target scan's tasks drop the rows it rules out
    before the join -- for integer (target int32, source int64), string
    (unicode, empty), date and timestamp keys the merged tables equal
    pylance's merge_insert; a direct read with the filter returns every key
    and few others."""
    import base64

    from lance_ops.format import keyfilter

    n = 24_000
    ids = np.arange(n)
    names = [("ü" * (i % 3)) + f"n{i}" for i in ids]
    names[1], names[5] = "", None
    base = pa.table({
        "k": pa.array(ids, pa.int32()),
        "name": pa.array(names, pa.string()),
        "d": pa.array(ids, pa.int32()).cast(pa.date32()),
        "ts": pa.array(ids * 1_000_001 - 5_000_000_000, pa.timestamp("us", "UTC")),
        "v": pa.array(np.zeros(n)),
    })
    # 4800 keys (> MAX_KEY_SET; the target has >= KEY_FILTER_MIN_RATIO rows a key), half beyond the table
    src_ids = np.arange(1, 2 * n, 10)
    src_names = [names[i] if i < n else f"new{i}" for i in src_ids]
    src = pa.table({
        "k": pa.array(src_ids, pa.int64()),
        "name": pa.array(src_names, pa.string()),
        "d": pa.array(src_ids, pa.int32()).cast(pa.date32()),
        "ts": pa.array(src_ids * 1_000_001 - 5_000_000_000, pa.timestamp("us", "UTC")),
        "v": pa.array(np.ones(len(src_ids))),
    })
    for key in ("k", "name", "d", "ts"):
        ours, ref = str(tmp_path / f"o-{key}.lance"), str(tmp_path / f"r-{key}.lance")
        lance.write_dataset(base, ours, max_rows_per_file=8000)
        lance.write_dataset(base, ref, max_rows_per_file=8000)
        t = LanceTable(spark, ours)
        s_df = spark.createDataFrame(src.to_pandas(), schema="k long, name string, d date, ts timestamp, v double")
        info = committed(t, t.merge(s_df, f"t.{key} = s.{key}").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        r = (lance.dataset(ref).merge_insert(key).when_matched_update_all().when_not_matched_insert_all()
             .execute(src.cast(base.schema)))
        assert (info.metrics["numUpdatedRows"], info.metrics["numInsertedRows"]) == (
            r["num_updated_rows"], r["num_inserted_rows"]), key
        rows = lambda p: sorted(map(repr, lance.dataset(p).to_table().to_pylist()))  # noqa: E731
        assert rows(ours) == rows(ref), key
        assert "bloom filter of ~" in t.table.history(1)[0]["operationParameters"]["targetKeyRange"], key
    # the filter in a plain read: every source key that is in the table, few others
    f = keyfilter.build(pa.array(src_ids, pa.int64()), keyfilter.filter_size(len(src_ids)))
    got = (spark.read.format("lance").option("keyFilter", f"k:{base64.b64encode(f).decode()}")
           .load(str(tmp_path / "r-d.lance")).where(f"k < {n}").select("k").collect())
    got = {r[0] for r in got}
    assert set(src_ids[src_ids < n].tolist()) <= got and len(got) < n // 10 + 300
