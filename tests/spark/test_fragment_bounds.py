"""Fragment key bounds remembered by the driver (lance_ops/format/fragbounds.py):
a merge's target scan records the key bounds of the fragments it reads whole;
later merges, deletes and reads on a table without an index on the key skip
the fragments those bounds rule out -- with the same rows as pylance, and never
on bounds of another state of a fragment (a new deletion file is a new key)."""
from __future__ import annotations

import lance
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from lance_ops.format import fragbounds

pytestmark = pytest.mark.spark


def table(path, fragments=40, rows=5):
    n = fragments * rows
    lance.write_dataset(pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int64())}), path,
                        max_rows_per_file=rows, enable_stable_row_ids=True)
    return path


def merge(spark, t, keys, v):
    src = spark.createDataFrame([(k, v) for k in keys], "id long, v long")
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    return t.lastCommit().metrics


def test_merges_then_skip_the_fragments_their_keys_rule_out(spark, tmp_path):
    p = table(str(tmp_path / "t.lance"))
    t = LanceTable(spark, p)
    first = merge(spark, t, [12, 13], 100)
    assert first["numFragmentsScanned"] == 40  # no index: every fragment read (and its bounds kept)
    second = merge(spark, t, [101, 157, 500], 200)  # 500: an insert
    assert second["numFragmentsScanned"] <= 4, second  # 2 key fragments + the one the first merge wrote (unknown yet)
    got = sorted((r["id"], r["v"]) for r in lance.dataset(p).to_table().to_pylist())
    want = {i: i for i in range(200)} | {12: 100, 13: 100, 101: 200, 157: 200, 500: 200}
    assert got == sorted(want.items())
    # a delete and a read by key skip too (the bounds serve any scan of this process)
    t.delete("id = 77")
    assert t.lastCommit().metrics["numFragmentsScanned"] < 10  # its own + the merges' new or changed ones
    assert [r.v for r in t.toDF().where("id = 157").collect()] == [200]
    # fragments whose deletion file changed (the merged ones) are new states: read again, not pruned blindly
    third = merge(spark, t, [12], 300)
    assert third["numFragmentsScanned"] >= 1
    assert lance.dataset(p).to_table(filter="id = 12")["v"].to_pylist() == [300]


def test_time_travel_never_prunes_on_a_later_state(spark, tmp_path):
    """Bounds over a fragment's live rows after a delete are narrower than its
    rows at the version before: that version's scan must not use them."""
    p = table(str(tmp_path / "t.lance"), fragments=4, rows=5)
    t = LanceTable(spark, p)
    t.delete("id = 4")  # fragment 0 keeps 0..3
    merge(spark, t, [0], 50)  # reads fragment 0 whole at the later state: bounds [0, 3] recorded... for it
    before = LanceTable(spark, p, version=1)
    assert [r.id for r in before.toDF().where("id = 4").collect()] == [4]
    assert sorted(r.id for r in before.toDF().where("id >= 4 AND id <= 4").collect()) == [4]


def test_the_conf_turns_recording_off(spark, tmp_path):
    p = table(str(tmp_path / "t.lance"), fragments=10)
    spark.conf.set("spark.lance_ops.merge.fragmentBounds.enabled", "false")
    try:
        before = len(fragbounds._CACHE)
        merge(spark, LanceTable(spark, p), [3], 9)
        assert len(fragbounds._CACHE) == before
    finally:
        spark.conf.unset("spark.lance_ops.merge.fragmentBounds.enabled")
