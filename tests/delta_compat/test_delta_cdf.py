"""Delta Lake's change data feed usage (its CDF documentation), run on Lance
tables. Renames: ``DeltaTable`` -> ``LanceTable``, ``format("delta")`` ->
``format("lance")``, ``.table(name)`` -> ``.load(path)`` (Spark 4.3 cannot
hand a catalog table to a Python data source); versions count from 1 (a
Lance table's first version), not 0. No table property enables the feed: a
Lance table with stable row ids always has it (nothing extra is written)."""
from __future__ import annotations

import datetime

import pytest

from lance_ops import LanceTable
from lance_ops.errors import UnsupportedFeatureError


@pytest.fixture
def students(spark, tmp_path):
    """Delta's walkthrough: a table written, then updated, deleted from and
    appended to -- versions 1 (create) .. 4."""
    path = str(tmp_path / "students.lance")
    spark.createDataFrame([(1, "alice", 90), (2, "bob", 80), (3, "carol", 70)], "id INT, name STRING, score INT") \
        .coalesce(1).write.format("lance").mode("append").save(path)
    dt = LanceTable.forPath(spark, path)
    dt.update(condition="id = 1", set={"score": "95"})
    dt.delete("id = 2")
    spark.createDataFrame([(4, "dave", 60)], "id INT, name STRING, score INT") \
        .write.format("lance").mode("append").save(path)
    return path


def changes(df):
    return sorted((r._commit_version, r._change_type, r.id, r.name, r.score) for r in df.collect())


def test_read_changes_in_batch_queries(spark, students):
    # version as ints or longs
    df = spark.read.format("lance").option("readChangeFeed", "true").option("startingVersion", 2) \
        .option("endingVersion", 4).load(students)
    assert df.columns == ["id", "name", "score", "_change_type", "_commit_version", "_commit_timestamp"]
    assert changes(df) == [
        (2, "update_postimage", 1, "alice", 95), (2, "update_preimage", 1, "alice", 90),
        (3, "delete", 2, "bob", 80),
        (4, "insert", 4, "dave", 60),
    ]
    # providing only the startingVersion
    only_start = spark.read.format("lance").option("readChangeFeed", "true").option("startingVersion", 1).load(students)
    assert changes(only_start)[:3] == [(1, "insert", 1, "alice", 90), (1, "insert", 2, "bob", 80),
                                       (1, "insert", 3, "carol", 70)]
    # timestamps as formatted timestamp (the commit time of version 3, in the session time zone)
    ts = {r.version: r.timestamp for r in LanceTable.forPath(spark, students).history().collect()}
    start = ts[3].strftime("%Y-%m-%d %H:%M:%S.%f")
    by_time = spark.read.format("lance").option("readChangeFeed", "true").option("startingTimestamp", start) \
        .load(students)
    assert {r._commit_version for r in by_time.collect()} <= {3, 4}
    assert {r._commit_version for r in by_time.collect()} >= {4}


def test_the_change_type_of_each_row(spark, students):
    dt = LanceTable.forPath(spark, students)
    df = dt.changes(1)  # (startVersion, latest]: the API's exclusive start
    kinds = {}
    for r in df.collect():
        kinds.setdefault(r._change_type, set()).add(r.id)
    assert kinds == {"update_preimage": {1}, "update_postimage": {1}, "delete": {2}, "insert": {4}}
    assert all(isinstance(r._commit_timestamp, datetime.datetime) for r in df.collect())


def test_a_table_without_row_identity_has_no_feed(spark, tmp_path):
    path = str(tmp_path / "plain.lance")
    LanceTable.create(spark, path, spark.range(3), stableRowIds=False)
    with pytest.raises(UnsupportedFeatureError, match="stable row ids"):
        LanceTable.forPath(spark, path).changes(0)
