"""history(): Delta's DESCRIBE HISTORY -- operation in Delta's words, the Lance
transaction type in ``lanceOperation``, read versions, Delta's parameter and
metric names -- for the versions our Spark operations write (DML, one version
per OPTIMIZE, restore, schema changes). Versions pylance writes are read by
the Spark-free core: tests/txn/test_history.py."""
import json

import lance

from lance_ops import LanceTable


def entries(spark, path):
    """version -> (operation, readVersion, parameters, lanceOperation), oldest first."""
    rows = LanceTable(spark, path).history().collect()
    assert [r.version for r in rows] == sorted((r.version for r in rows), reverse=True)
    return {r.version: (r.operation, r.readVersion, r.operationParameters, r.lanceOperation) for r in reversed(rows)}


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
    t.optimize().executeCompaction()
    t.setProperties({"k": "v"})

    h = entries(spark, p)
    assert h[7][0] == "ADD COLUMNS" and h[7][3] == "Merge" and h[7][2]["addedColumns"] == "z"
    assert h[8][0] == "RENAME COLUMN" and h[8][3] == "Project" and h[8][2]["renamedColumns"] == "z -> zz"
    assert (h[8][2]["oldColumnPath"], h[8][2]["newColumnPath"]) == ("z", "zz")
    # one version per OPTIMIZE (the fragment ids are reserved in the Rewrite's own commit)
    assert h[9][:2] == ("OPTIMIZE", 8) and h[9][3] == "Rewrite" and h[10][0] == "SET TBLPROPERTIES"
    assert json.loads(h[10][2]["properties"]) == {"k": "v"}
    h = {v: e for v, e in h.items() if v <= 6}
    assert {v: (op, rv, lop) for v, (op, rv, _, lop) in h.items()} == {
        1: ("CREATE TABLE AS SELECT", 0, "Overwrite"), 2: ("WRITE", 1, "Append"), 3: ("DELETE", 2, "Delete"),
        4: ("UPDATE", 3, "Update"), 5: ("MERGE", 4, "Update"), 6: ("RESTORE", 5, "Restore"),
    }
    assert h[2][2]["mode"] == "Append"
    assert h[3][2]["predicate"] == '["id = 3"]'
    assert h[4][2]["predicate"] == '["id < 2"]' and h[4][2]["set"] == "x = x + 1"
    assert h[5][2]["predicate"] == '["t.id = s.id"]'
    assert json.loads(h[5][2]["matchedPredicates"]) == [{"actionType": "updateAll"}]
    assert json.loads(h[5][2]["notMatchedPredicates"]) == [{"actionType": "insertAll"}]
    assert h[5][2]["notMatchedBySourcePredicates"] == "[]"
    assert h[6][2] == {"version": "2"}
    rows = {r.version: r for r in LanceTable(spark, p).history().collect()}
    assert rows[2].isBlindAppend and not rows[3].isBlindAppend and rows[2].isolationLevel == "WriteSerializable"
    assert rows[2].engineInfo.startswith("lance_ops ")
    metrics = rows[6].operationMetrics
    assert metrics["numRowsAfterRestore"] == "11" and metrics["numOfFilesAfterRestore"]


def test_metric_names_are_the_same_in_the_api_and_history(spark, tmp_path):
    """The CommitInfo's metrics and history's operationMetrics carry the same
    keys (Delta's names): what a job reads from one it finds in the other."""
    p = str(tmp_path / "t.lance")
    t = LanceTable.create(spark, p, spark.createDataFrame([(i, i) for i in range(20)], "id long, x long"),
                          maxRowsPerFragment=5)
    calls = [
        lambda: t.append(spark.createDataFrame([(20, 20)], "id long, x long")),
        lambda: t.delete("id = 3"),
        lambda: t.update("id = 4", {"x": "0"}),
        lambda: (t.merge(spark.createDataFrame([(5, 1), (99, 1)], "id long, x long"), "t.id = s.id")
                 .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()),
        lambda: t.optimize().executeCompaction(),
        lambda: t.restoreToVersion(1),
    ]
    expected = {
        "WRITE": {"numFiles", "numOutputRows", "numOutputBytes"},
        "DELETE": {"numDeletedRows", "numRemovedFiles", "numAddedFiles", "numCopiedRows", "numDeletionVectorsAdded"},
        "UPDATE": {"numUpdatedRows", "numAddedFiles", "numRemovedFiles", "numCopiedRows", "numDeletionVectorsAdded"},
        "MERGE": {"numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted",
                  "numTargetRowsCopied", "numOutputRows", "numTargetFilesAdded", "numTargetFilesRemoved"},
        "OPTIMIZE": {"numAddedFiles", "numRemovedFiles", "numAddedBytes", "numRemovedBytes", "minFileSize",
                     "maxFileSize", "p25FileSize", "p50FileSize", "p75FileSize", "numDeletionVectorsRemoved"},
        "RESTORE": {"tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
                    "removedFilesSize", "restoredFilesSize"},
    }
    for call in calls:
        call()
        info = t.lastCommit()
        row = t.history(1).first()
        assert row.version == info.version and row.readVersion == info.readVersion
        assert set(row.operationMetrics) == set(info.metrics), row.operation
        assert {k: str(v) for k, v in info.metrics.items()} == row.operationMetrics
        assert expected[row.operation] <= set(row.operationMetrics), row.operation


def test_operations_that_change_nothing_commit_nothing(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    t = LanceTable.create(spark, p, spark.createDataFrame([(i, i) for i in range(10)], "id long, x long"))
    info = t.delete("id > 100")
    assert (info.version, info.committed, info.metrics["numDeletedRows"], info.operation) == (None, False, 0, "Delete")
    info = t.update("id > 100", {"x": "0"})
    assert (info.version, info.metrics["numUpdatedRows"]) == (None, 0)
    r = t.merge(spark.createDataFrame([(1, 1)], "id long, x long"), "t.id = s.id").whenMatchedDelete("s.x > 5").execute()
    assert tuple(r.first()) == (0, 0, 0, 0) and t.lastCommit().version is None
    assert lance.dataset(p).version == 1 and [h.version for h in t.history().collect()] == [1]
