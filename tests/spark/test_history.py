"""history(): operation names, read versions and parameters for every kind of
version -- written by pylance (compaction's ReserveFragments + Rewrite,
add/drop columns, index, config, restore) and by us (DML, restore)."""
import lance
import pyarrow as pa

from lance_ops import LanceTable


def entries(spark, path):
    """version -> (operation, readVersion, parameters), oldest first."""
    rows = LanceTable(spark, path).history().collect()
    assert [r.version for r in rows] == sorted((r.version for r in rows), reverse=True)
    return {r.version: (r.operation, r.readVersion, r.operationParameters) for r in reversed(rows)}


def test_history_of_pylance_written_versions(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": range(20), "x": range(20)}), p, max_rows_per_file=5, enable_stable_row_ids=True)
    lance.dataset(p).delete("id = 1")
    lance.dataset(p).add_columns({"y": "x * 2"})
    lance.dataset(p).drop_columns(["y"])
    lance.dataset(p).optimize.compact_files(target_rows_per_fragment=100)
    lance.dataset(p).create_scalar_index("id", "BTREE")
    lance.dataset(p).update_config({"k": "v"})
    lance.dataset(p, version=2).restore()

    h = entries(spark, p)
    assert {v: op for v, (op, _, _) in h.items()} == {
        1: "Overwrite", 2: "Delete", 3: "Merge", 4: "Project", 5: "ReserveFragments",
        6: "Rewrite", 7: "CreateIndex", 8: "UpdateConfig", 9: "Restore",
    }
    assert {v: rv for v, (_, rv, _) in h.items()} == {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 4, 7: 6, 8: 7, 9: 8}
    assert h[2][2]["predicate"] == "id = 1"
    assert h[3][2] == {"addedColumns": "y"} and h[4][2] == {"droppedColumns": "y"}
    assert h[5][2] == {"numFragments": "1"}
    assert h[6][2] == {"numGroups": "1", "oldFragments": "0,1,2,3"}
    assert h[7][2]["indices"] == "id_idx"
    assert h[9][2] == {"version": "2"}
    assert {r.writer for r in LanceTable(spark, p).history().collect()} == {f"lance {lance.__version__}"}
    assert [r.version for r in LanceTable(spark, p, version=4).history(limit=2).collect()] == [4, 3]


def test_history_of_our_versions(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    t = LanceTable.create(spark, p, spark.createDataFrame([(i, i) for i in range(10)], "id long, x long"))
    t.append(spark.createDataFrame([(10, 10)], "id long, x long"))
    t.delete("id = 3")
    t.update("id < 2", {"x": "x + 1"})
    src = spark.createDataFrame([(5, 0), (50, 0)], "id long, x long")
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    t.restoreToVersion(2)
    t.addColumns({"z": "x + 1"})
    t.renameColumn("z", "zz")

    h = entries(spark, p)
    assert h[7][0] == "Merge" and h[7][2]["addedColumns"] == "z" and h[7][2]["columns"] == "z"
    assert h[8][0] == "Project" and h[8][2]["renamedColumns"] == "z -> zz"
    h = {v: e for v, e in h.items() if v <= 6}
    assert {v: (op, rv) for v, (op, rv, _) in h.items()} == {
        1: ("Overwrite", 0), 2: ("Append", 1), 3: ("Delete", 2), 4: ("Update", 3), 5: ("Update", 4), 6: ("Restore", 5),
    }
    assert h[3][2]["predicate"] == "id = 3"
    assert h[4][2]["predicate"] == "id < 2" and h[4][2]["set"] == "x = x + 1"
    assert h[5][2]["condition"] == "t.id = s.id"
    assert h[6][2] == {"version": "2"}
    metrics = LanceTable(spark, p, version=6).history(limit=1).collect()[0].operationMetrics
    assert metrics["numRowsAfterRestore"] == "11" and metrics["numOfFilesAfterRestore"]
