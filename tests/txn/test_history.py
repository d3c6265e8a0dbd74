"""history() of versions pylance writes, on the Spark-free core: Delta's
DESCRIBE HISTORY -- operation in Delta's words, the Lance transaction type in
``lanceOperation``, read versions, Delta's parameter names -- for compaction's
ReserveFragments + Rewrite, add/drop columns, index, config, restore. (The
versions our Spark operations write, and the DataFrame LanceTable.history()
makes of these rows: tests/spark/test_history.py.)"""
import lance
import pyarrow as pa

from lance_ops import Table


def entries(path):
    """version -> (operation, readVersion, parameters, lanceOperation), oldest first."""
    rows = Table(path).history()
    assert [r["version"] for r in rows] == sorted((r["version"] for r in rows), reverse=True)
    return {r["version"]: (r["operation"], r["readVersion"], r["operationParameters"], r["lanceOperation"])
            for r in reversed(rows)}


def test_history_of_pylance_written_versions(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": range(20), "x": range(20)}), p, max_rows_per_file=5, enable_stable_row_ids=True)
    lance.dataset(p).delete("id = 1")
    lance.dataset(p).add_columns({"y": "x * 2"})
    lance.dataset(p).drop_columns(["y"])
    lance.dataset(p).optimize.compact_files(target_rows_per_fragment=100)
    lance.dataset(p).create_scalar_index("id", "BTREE")
    lance.dataset(p).update_config({"k": "v"})
    lance.dataset(p, version=2).restore()

    h = entries(p)
    assert {v: (op, lop) for v, (op, _, _, lop) in h.items()} == {
        1: ("WRITE", "Overwrite"), 2: ("DELETE", "Delete"), 3: ("ADD COLUMNS", "Merge"),
        4: ("DROP COLUMNS", "Project"), 5: ("RESERVE FRAGMENTS", "ReserveFragments"), 6: ("OPTIMIZE", "Rewrite"),
        7: ("CREATE INDEX", "CreateIndex"), 8: ("SET TBLPROPERTIES", "UpdateConfig"), 9: ("RESTORE", "Restore"),
    }
    assert {v: rv for v, (_, rv, _, _) in h.items()} == {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 4, 7: 6, 8: 7, 9: 8}
    assert h[1][2]["mode"] == "Overwrite"
    assert h[2][2]["predicate"] == '["id = 1"]'  # Delta's JSON list of predicates
    assert h[3][2] == {"addedColumns": "y"} and h[4][2] == {"droppedColumns": "y"}
    assert h[5][2] == {"numFragments": "1"}
    assert h[6][2] == {"numGroups": "1", "oldFragments": "0,1,2,3"}
    assert h[7][2]["indices"] == "id_idx"
    assert h[9][2] == {"version": "2"}
    assert {r["writer"] for r in Table(p).history()} == {f"lance {lance.__version__}"}
    assert [r["version"] for r in Table(p, version=4).history(limit=2)] == [4, 3]
