"""Delete / update / merge under concurrent commits: rebase, re-run, or fail
as the conflict rules say -- and nothing is lost in any interleaving tried."""
import os
import subprocess
import sys

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from lance_ops.errors import CommitConflictError
from lance_ops.format.deletion import BITMAP
from tests.helpers import commits_during, read_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "t.lance")
    ids = np.arange(400)
    lance.write_dataset(
        pa.table({"id": ids, "v": ids * 10, "s": [f"s{i}" for i in ids]}),
        p, max_rows_per_file=100, enable_stable_row_ids=True,
    )
    return p


def live_ids(p):
    return sorted(lance.dataset(p).to_table(columns=["id"])["id"].to_pylist())


def test_a_handle_follows_the_table(spark, path):
    """A handle reads the latest version at every call: another writer's
    commits (even an overwrite) never make it stale (Delta's DeltaTable)."""
    t, pinned = LanceTable(spark, path), LanceTable(spark, path, version=1)
    lance.write_dataset(pa.table({"id": [1, 2], "v": [1, 2], "s": ["x", "y"]}), path, mode="overwrite")
    assert (t.version, t.count(), pinned.version, pinned.count()) == (2, 2, 1, 400)
    assert sorted(r.id for r in t.toDF().collect()) == [1, 2] and t.schema.names == ["id", "v", "s"]
    info = t.delete("id = 1")  # no conflict: it starts from version 2
    assert (info.readVersion, info.version, info.retries) == (2, 3, 0)
    assert live_ids(path) == [2] and pinned.toDF().count() == 400


def test_disjoint_deletes_in_one_fragment_rebase(spark, path):
    a, b = LanceTable(spark, path), LanceTable(spark, path)
    with commits_during(lambda: a.delete("id = 5")):  # v2 lands while b's delete runs
        info = b.delete("id = 7 or id = 8")
    assert (info.version, info.readVersion, info.rebases, info.reruns, info.retries) == (3, 1, 1, 0, 1)
    assert live_ids(path) == [i for i in range(400) if i not in (5, 7, 8)]
    frag = read_manifest(path).manifest.fragments[0]
    # the rebase wrote a merged bitmap named with the latest version, as pylance does
    assert frag.deletion_file.file_type == BITMAP and frag.deletion_file.read_version == 2
    assert frag.deletion_file.num_deleted_rows == 3
    txn = read_manifest(path).transaction()
    assert txn.read_version == 2  # rebased Delete carries the latest version


def test_delete_racing_update_of_same_rows_reruns(spark, path):
    a, b = LanceTable(spark, path), LanceTable(spark, path)
    with commits_during(lambda: a.update("id < 10", {"v": "-v"})):
        info = b.delete("id < 5")  # the rows it saw were moved by the update
    assert (info.rebases, info.reruns) == (0, 1)  # same rows: re-run once on v2
    rows = {r["id"]: r["v"] for r in lance.dataset(path).to_table().to_pylist()}
    assert all(i not in rows for i in range(5))
    assert [rows[i] for i in range(5, 10)] == [-50, -60, -70, -80, -90]
    assert len(rows) == 395


def test_update_vs_update_disjoint_rows_same_fragment(spark, path):
    a, b = LanceTable(spark, path), LanceTable(spark, path)
    with commits_during(lambda: a.update("id = 1", {"v": "1000"})):
        info = b.update("id = 2", {"v": "2000"})
    assert info.version == 3
    t = lance.dataset(path).to_table(with_row_id=True, columns=["id", "v", "_row_last_updated_at_version"])
    rows = {r["id"]: r for r in t.to_pylist()}
    assert (rows[1]["v"], rows[1]["_row_last_updated_at_version"], rows[1]["_rowid"]) == (1000, 2, 1)
    assert (rows[2]["v"], rows[2]["_row_last_updated_at_version"], rows[2]["_rowid"]) == (2000, 3, 2)
    assert len(rows) == 400


def test_delete_vs_concurrent_compaction_reruns(spark, path):
    b = LanceTable(spark, path)
    with commits_during(lambda: lance.dataset(path).optimize.compact_files(target_rows_per_fragment=1000)):
        info = b.delete("id % 2 = 0")
    assert (info.rebases, info.reruns, info.version) == (0, 1, 4)  # rewritten fragments: re-run on v3
    assert live_ids(path) == list(range(1, 400, 2))
    ds = lance.dataset(path)
    assert sorted(ds.to_table(with_row_id=True)["_rowid"].to_pylist()) == list(range(1, 400, 2))


def test_delete_and_append_interleave(spark, path):
    b = LanceTable(spark, path)
    with commits_during(lambda: lance.write_dataset(pa.table({"id": [1000], "v": [1], "s": ["x"]}), path, mode="append")):
        info = b.delete("id < 3")
    assert (info.rebases, info.reruns, info.version) == (1, 0, 3)
    assert live_ids(path) == list(range(3, 400)) + [1000]


def test_merge_vs_concurrent_delete(spark, path):
    b = LanceTable(spark, path)
    src = spark.createDataFrame([(10, 1, "m"), (11, 1, "m"), (5000, 1, "m")], "id long, v long, s string")
    with commits_during(lambda: lance.dataset(path).delete("id = 10")):
        b.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    info = b.lastCommit()
    assert (info.rebases, info.reruns) == (0, 1)  # row 10 was deleted under it: re-run
    rows = {r["id"]: r["s"] for r in lance.dataset(path).to_table().to_pylist()}
    # Re-run on the new version: 10 is gone, so it is inserted again (Delta semantics).
    assert rows[10] == "m" and rows[11] == "m" and rows[5000] == "m" and len(rows) == 401


def test_delete_vs_concurrent_overwrite_is_incompatible(spark, path):
    b = LanceTable(spark, path)
    overwrite = lambda: lance.write_dataset(pa.table({"id": [1], "v": [1], "s": ["x"]}), path, mode="overwrite")  # noqa: E731
    with pytest.raises(CommitConflictError) as e, commits_during(overwrite):
        b.delete("id < 3")
    assert not e.value.retryable
    assert lance.dataset(path).version == 2 and live_ids(path) == [1]


def test_retries_exhausted(spark, path, monkeypatch):
    b = LanceTable(spark, path)
    b.conflictRetries = 0
    with pytest.raises(CommitConflictError, match="conflictRetries=0"), \
            commits_during(lambda: lance.dataset(path).update({"v": "0"}, where="id < 5")):
        b.delete("id < 3")
    assert lance.dataset(path).version == 2


DELETER = """
import sys
from lance_ops import LanceTable, local_session
spark = local_session("deleter", conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
path, start = sys.argv[1], int(sys.argv[2])
for k in range(6):
    LanceTable(spark, path).delete(f"id = {start + 2 * k}")
spark.stop()
"""


def test_two_processes_deleting_disjoint_rows_of_one_fragment(spark, path, tmp_path, processes):
    script = tmp_path / "deleter.py"
    script.write_text(DELETER)
    # (a classic session of its own: not the Connect mode pyspark records in
    # this process's environment when the test session is a Connect one)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_REMOTE")}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.Popen([sys.executable, str(script), path, "1"], env=env, cwd=ROOT)
    try:
        for k in range(6):
            LanceTable(spark, path).delete(f"id = {2 * k}")
    finally:
        assert proc.wait(timeout=600) == 0
    # ids 0..11 deleted by the two processes, all in fragment 0
    assert live_ids(path) == list(range(12, 400))
    versions = [v["version"] for v in lance.dataset(path).versions()]
    assert versions == list(range(1, 14))
