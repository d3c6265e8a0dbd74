"""Delta Lake's Python API usage, run on Lance tables.

Each test is a usage example of ``delta.tables.DeltaTable`` as Delta's
documentation and API docs show it, with only these renames:

* ``DeltaTable`` -> ``LanceTable``, ``format("delta")`` -> ``format("lance")``;
* a first ``df.write...save(path)`` says ``mode("append")`` (Spark cannot
  write a Python data source in its default ErrorIfExists mode);
* table versions count from 1 (a Lance table's first version), not 0;
* the retention check conf is ``spark.lance_ops.vacuum.retentionDurationCheck.enabled``.

It asserts what Delta documents: the same rows, the same result shapes
(DataFrames with Delta's columns), the same history words, the same errors
for bad arguments. The remaining differences are listed, with their reasons,
in docs/guide/delta.md.
"""
from __future__ import annotations

import datetime
import threading
import time

import lance
import pytest
from pyspark.sql import Row
from pyspark.sql.functions import col, expr, lit
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from lance_ops import LanceTable
from lance_ops.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)

RETENTION_CHECK = "spark.lance_ops.vacuum.retentionDurationCheck.enabled"


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "delta_compat.lance")


def write(spark, path, rows, mode="append"):
    spark.createDataFrame(rows, ["key", "value"]).coalesce(1).write.format("lance").mode(mode).save(path)


def answer(df):
    return sorted(tuple(r) for r in df.collect())


# ------------------------------------------------------------- reading
def test_forPath_toDF_and_a_handle_that_follows_the_table(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3)])
    dt = LanceTable.forPath(spark, path)
    assert answer(dt.toDF()) == [("a", 1), ("b", 2), ("c", 3)]
    assert answer(dt.toDF().alias("myTable").select("myTable.key", "myTable.value")) == answer(dt.toDF())
    # another writer replaces the rows: the handle reads and writes the latest (a DeltaTable does)
    write(spark, path, [("x", 10), ("y", 20)], mode="overwrite")
    assert answer(dt.toDF()) == [("x", 10), ("y", 20)]
    dt.delete("key = 'x'")
    assert answer(dt.toDF()) == [("y", 20)]
    assert dt.history(1).select("operation", "readVersion").first() == Row(operation="DELETE", readVersion=2)
    # time travel stays where it was opened (Delta: versionAsOf)
    assert answer(spark.read.format("lance").option("versionAsOf", 1).load(path)) == [("a", 1), ("b", 2), ("c", 3)]
    assert LanceTable.isLanceTable(spark, path) and not LanceTable.isLanceTable(spark, path + "-nothing")


def test_write_from_another_thread(spark, path):
    """``df.write.format(...).save()`` from a worker thread (a notebook's
    background job, a thread pool), where the session is not active."""
    errors = []

    def job(k):
        try:
            write(spark, path + f"-{k}", [("t", k)])
            errors.append(None)
        except Exception as e:  # pragma: no cover - the failure reported below
            errors.append(e)

    threads = [threading.Thread(target=job, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [None, None]
    assert answer(LanceTable.forPath(spark, path + "-1").toDF()) == [("t", 1)]


# -------------------------------------------------------------- delete
def test_delete(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    dt = LanceTable.forPath(spark, path)
    dt.delete("key = 'a'")  # predicate as a SQL string
    assert answer(dt.toDF()) == [("b", 2), ("c", 3), ("d", 4)]
    dt.delete(col("key") == lit("b"))  # predicate as a Column
    assert answer(dt.toDF()) == [("c", 3), ("d", 4)]
    dt.delete()  # everything
    assert answer(dt.toDF()) == []
    with pytest.raises(TypeError):
        dt.delete(condition=1)
    last = dt.history(1).first()
    assert (last.operation, last.operationParameters["predicate"]) == ("DELETE", "[]")


# -------------------------------------------------------------- update
def test_update(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    dt = LanceTable.forPath(spark, path)
    dt.update("key = 'a' or key = 'b'", {"value": "1"})
    assert answer(dt.toDF()) == [("a", 1), ("b", 1), ("c", 3), ("d", 4)]
    dt.update(expr("key = 'a' or key = 'b'"), {"value": expr("0")})
    assert answer(dt.toDF()) == [("a", 0), ("b", 0), ("c", 3), ("d", 4)]
    dt.update(set={"value": "200"})
    assert answer(dt.toDF()) == [("a", 200), ("b", 200), ("c", 200), ("d", 200)]
    version = dt.version
    # bad arguments fail when the method is called, with Delta's error types
    with pytest.raises(ValueError, match="cannot be None"):
        dt.update({"value": "200"})
    with pytest.raises(ValueError, match="cannot be None"):
        dt.update(condition="a")
    with pytest.raises(TypeError, match="must be a dict"):
        dt.update(set=1)
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        dt.update(1, {})
    with pytest.raises(TypeError, match="Values of dict in .* must contain only"):
        dt.update(set={"value": 1})
    with pytest.raises(TypeError, match="Keys of dict in .* must contain only"):
        dt.update(set={1: ""})
    assert dt.version == version
    # an update matching nothing changes nothing: no new version
    dt.update("key = 'zzz'", {"value": "0"})
    assert dt.version == version and dt.lastCommit().version is None


# --------------------------------------------------------------- merge
def test_merge_with_aliases_as_the_docs_write_it(spark, path):
    spark.createDataFrame([("2024-01-01", 1, "old", 1), ("2024-01-01", 2, "old", 5)],
                          ["date", "eventId", "data", "count"]).write.format("lance").mode("append").save(path)
    updatesDF = spark.createDataFrame([("2024-01-02", 2, "new"), ("2024-01-02", 3, "new")], ["date", "eventId", "data"])
    deltaTable = LanceTable.forPath(spark, path)
    result = deltaTable.alias("events").merge(
        source=updatesDF.alias("updates"),
        condition="events.eventId = updates.eventId",
    ).whenMatchedUpdate(set={
        "data": "updates.data",
        "count": "events.count + 1",
    }).whenNotMatchedInsert(values={
        "date": "updates.date",
        "eventId": "updates.eventId",
        "data": "updates.data",
        "count": "1",
    }).execute()
    assert answer(deltaTable.toDF()) == [("2024-01-01", 1, "old", 1), ("2024-01-01", 2, "new", 6),
                                         ("2024-01-02", 3, "new", 1)]
    # Delta's result: one row of counts
    assert result.columns == ["num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows"]
    assert tuple(result.first()) == (2, 1, 0, 1)
    # the same with Spark SQL functions
    result = deltaTable.alias("events").merge(
        source=updatesDF.alias("updates"),
        condition=expr("events.eventId = updates.eventId"),
    ).whenMatchedUpdate(set={
        "data": col("updates.data"),
        "count": col("events.count") + 1,
    }).whenNotMatchedInsert(values={
        "date": col("updates.date"),
        "eventId": col("updates.eventId"),
        "data": col("updates.data"),
        "count": lit("1"),
    }).execute()
    assert tuple(result.first()) == (2, 2, 0, 0)
    assert sorted(r["count"] for r in deltaTable.toDF().collect()) == [1, 2, 7]
    last = deltaTable.history(1).first()
    assert (last.operation, last.lanceOperation) == ("MERGE", "Update")
    assert last.operationParameters["predicate"] == '["(events.eventId = updates.eventId)"]' or \
        "events.eventId" in last.operationParameters["predicate"]
    assert last.operationMetrics["numTargetRowsUpdated"] == "2" and last.operationMetrics["numSourceRows"] == "2"


def test_merge_clauses_unqualified_and_qualified_keys(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    source = spark.createDataFrame([("a", -1), ("b", 0), ("e", -5), ("f", -6)], ["k", "v"])
    dt = LanceTable.forPath(spark, path)

    def reset():
        write(spark, path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)], mode="overwrite")

    # names without qualifiers, every clause kind
    dt.merge(source, "key = k") \
        .whenMatchedUpdate(set={"value": "v + 0"}) \
        .whenNotMatchedInsert(values={"key": "k", "value": "v + 0"}) \
        .whenNotMatchedBySourceUpdate(set={"value": "value + 0"}) \
        .execute()
    assert answer(dt.toDF()) == [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)]
    reset()
    dt.merge(source, expr("key = k")) \
        .whenMatchedDelete(condition="key = 'a'") \
        .whenMatchedUpdate(condition="key = 'a'", set={"value": "5"}) \
        .whenMatchedDelete(condition="key = 'b'") \
        .whenMatchedUpdate(set={"value": "6"}) \
        .execute()
    assert answer(dt.toDF()) == [("c", 3), ("d", 4)]
    # qualified keys in `values`, as Delta accepts them
    reset()
    dt.alias("t") \
        .merge(source.toDF("key", "value").alias("s"), expr("t.key = s.key")) \
        .whenNotMatchedInsert(condition="s.key = 'e'", values={"t.key": "s.key", "t.value": "5"}) \
        .whenNotMatchedInsertAll() \
        .execute()
    assert answer(dt.toDF()) == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5), ("f", -6)]
    reset()
    dt.alias("t").merge(source.toDF("key", "value").alias("s"), "s.key = t.key") \
        .whenMatchedUpdateAll("s.key = 'a'") \
        .whenNotMatchedInsertAll("s.key = 'e'") \
        .whenNotMatchedBySourceDelete(condition="t.key = 'd'") \
        .execute()
    assert answer(dt.toDF()) == [("a", -1), ("b", 2), ("c", 3), ("e", -5)]


def test_merge_bad_arguments_fail_at_the_call(spark, path):
    write(spark, path, [("a", 1)])
    source = spark.createDataFrame([("a", -1)], ["k", "v"])
    dt = LanceTable.forPath(spark, path)
    m = dt.merge(source, "key = k")
    with pytest.raises(TypeError, match="must be DataFrame"):
        dt.merge(1, "key = k")
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        dt.merge(source, 1)
    with pytest.raises(ValueError, match="cannot be None"):
        m.whenMatchedUpdate({"value": "v"})
    with pytest.raises(ValueError, match="cannot be None"):
        m.whenMatchedUpdate(condition="key = 'a'")
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        m.whenMatchedUpdate(1, {"value": "v"})
    with pytest.raises(TypeError, match="must be a dict"):
        m.whenMatchedUpdate("k = 'a'", 1)
    with pytest.raises(TypeError, match="Values of dict in .* must contain only"):
        m.whenMatchedUpdate(set={"value": 1})
    with pytest.raises(TypeError, match="Keys of dict in .* must contain only"):
        m.whenNotMatchedInsert(values={1: "value"})
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        m.whenMatchedDelete(1)
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        m.whenNotMatchedBySourceDelete(1)
    with pytest.raises(ValueError, match="cannot be None"):
        m.whenNotMatchedBySourceUpdate(condition="key = 'a'")
    assert dt.version == 1


def test_merge_schema_evolution(spark, path):
    """withSchemaEvolution(): a source column the target lacks is added; a
    target column the source lacks is NULL in inserted rows and unchanged in
    updated ones."""
    spark.createDataFrame([(1, "a", 10), (2, "b", 20)], ["id", "name", "age"]) \
        .write.format("lance").mode("append").save(path)
    dt = LanceTable.forPath(spark, path)
    source = spark.createDataFrame([(2, "B", "x"), (3, "C", "y")], ["id", "name", "city"])  # no `age`
    result = dt.alias("t").merge(source.alias("s"), "t.id = s.id") \
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute()
    assert tuple(result.first()) == (2, 1, 0, 1)
    assert dt.toDF().columns == ["id", "name", "age", "city"]
    assert answer(dt.toDF()) == [(1, "a", 10, None), (2, "B", 20, "x"), (3, "C", None, "y")]
    # a NOT NULL target column the source lacks cannot be NULL in inserted rows
    strict = LanceTable.create(spark).location(path + "-strict").addColumn("id", "bigint") \
        .addColumn("age", "bigint", nullable=False).execute()
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        strict.alias("t").merge(source.alias("s"), "t.id = s.id").whenNotMatchedInsertAll() \
            .withSchemaEvolution().execute()


# ------------------------------------------------------------- history
def test_history(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3)])
    write(spark, path, [("a", 3), ("b", 2), ("c", 1)], mode="overwrite")
    dt = LanceTable.forPath(spark, path)
    assert [r.operation for r in dt.history().select("operation").collect()] == ["WRITE", "WRITE"]
    assert dt.history(1).select("operationParameters.mode").first()[0] == "Overwrite"
    assert {"version", "timestamp", "operation", "operationParameters", "readVersion", "isolationLevel",
            "isBlindAppend", "operationMetrics", "userMetadata", "engineInfo"} <= set(dt.history().columns)
    # the Lance transaction behind each version, in a column of its own
    assert [r.lanceOperation for r in dt.history().collect()] == ["Overwrite", "Overwrite"]


# -------------------------------------------------------------- detail
def test_detail(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3)])
    detail = LanceTable.forPath(spark, path).detail()
    assert detail.select("format").collect() == [Row(format="lance")]
    row = detail.first()
    assert (row.numFiles, row.location, row.partitionColumns, row.properties) == (1, LanceTable.forPath(spark, path).uri,
                                                                                 [], {})
    assert row.sizeInBytes > 0 and row.createdAt <= row.lastModified
    # Lance's own columns after Delta's
    assert (row.numRows, row.numDeletedRows, row.numFragments, row.version) == (3, 0, 1, 1)


# -------------------------------------------------------------- vacuum
def test_vacuum(spark, path):
    write(spark, path, [("a", 1), ("b", 2), ("c", 3)])
    write(spark, path, [("d", 4)], mode="overwrite")
    dt = LanceTable.forPath(spark, path)
    assert dt.vacuum().count() == 0  # default retention (7 days): nothing is old enough
    assert dt.vacuum(1000).count() == 0  # hours as an integer
    with pytest.raises(InvalidArgumentError):
        dt.vacuum(0.0)  # the retention check refuses, as Delta's
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        removed = [r.path for r in dt.vacuum(0.0).collect()]
    finally:
        spark.conf.set(RETENTION_CHECK, "true")
    assert any("/data/" in p for p in removed)  # the first version's data file
    assert answer(dt.toDF()) == [("d", 4)] and lance.dataset(path).count_rows() == 1


# ------------------------------------------------------------- restore
def test_restore_to_version_and_timestamp(spark, path):
    write(spark, path, [("a", 1)])
    first = LanceTable.forPath(spark, path).history(1).first().timestamp
    time.sleep(0.01)
    write(spark, path, [("b", 2)])
    write(spark, path, [("c", 3)])
    dt = LanceTable.forPath(spark, path)
    result = dt.restoreToVersion(1)
    assert result.columns == ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                              "num_restored_files", "removed_files_size", "restored_files_size"]
    assert tuple(result.first())[1:4] == (1, 2, 0)
    assert answer(dt.toDF()) == [("a", 1)]
    assert dt.history(1).first().operation == "RESTORE"
    # restore to the state at a timestamp: the latest version committed at or before it
    stamp = dt.history().where("version = 3").first().timestamp
    dt.restoreToTimestamp(stamp.strftime("%Y-%m-%d %H:%M:%S.%f"))
    assert answer(dt.toDF()) == [("a", 1), ("b", 2), ("c", 3)]
    with pytest.raises(ValueError, match="before the earliest version"):
        dt.restoreToTimestamp((first - datetime.timedelta(days=1)).strftime("%Y-%m-%d"))
    with pytest.raises(ValueError, match="after the latest version"):
        dt.restoreToTimestamp("2999-01-01")
    with pytest.raises(ValueError):
        dt.restoreToVersion(1.5)


# ------------------------------------------------------------ optimize
def test_optimize(spark, path):
    for k in range(4):
        write(spark, path, [(f"k{k}", k)])
    dt = LanceTable.forPath(spark, path)
    result = dt.optimize().where("value >= 2").executeCompaction()
    assert result.columns == ["path", "metrics"]
    m = result.first().metrics
    assert (m.numFilesAdded, m.numFilesRemoved, m.filesAdded.totalFiles, m.filesRemoved.totalFiles) == (1, 2, 1, 2)
    assert m.filesAdded.totalSize == m.filesAdded.min == m.filesAdded.max > 0
    result = dt.optimize().executeCompaction()
    assert result.first().metrics.numFilesRemoved == 3 and len(lance.dataset(path).get_fragments()) == 1
    assert answer(dt.toDF()) == [("k0", 0), ("k1", 1), ("k2", 2), ("k3", 3)]
    history = dt.history().collect()
    assert [r.operation for r in history[:2]] == ["OPTIMIZE", "OPTIMIZE"]  # one version each
    assert history[0].operationMetrics["numRemovedFiles"] == "3"
    assert history[1].operationParameters["predicate"] == '["value >= 2"]'


# ------------------------------------------------------- table builder
def test_table_builder(spark, tmp_path):
    loc = str(tmp_path / "built.lance")
    dt = LanceTable.create(spark) \
        .location(loc) \
        .addColumn("col1", "int", comment="foo", nullable=False) \
        .addColumn("col2", IntegerType()) \
        .property("foo", "bar") \
        .comment("comment") \
        .execute()
    assert dt.toDF().schema == StructType([StructField("col1", IntegerType(), False, {"comment": "foo"}),
                                           StructField("col2", IntegerType(), True)])
    detail = dt.detail().first()
    assert (detail.format, detail.description, detail.properties) == ("lance", "comment", {"foo": "bar"})
    assert dt.toDF().count() == 0 and lance.dataset(loc).count_rows() == 0  # pylance reads the empty table
    assert dt.history(1).first().operation == "CREATE TABLE"
    with pytest.raises(TableExistsError):
        LanceTable.create(spark).location(loc).addColumn("x", "int").execute()
    # createIfNotExists: the table is there, nothing changes
    same = LanceTable.createIfNotExists(spark).location(loc).addColumn("value2", dataType="int").execute()
    assert same.toDF().columns == ["col1", "col2"] and same.version == 1
    # replace: the new schema, an empty table
    spark.createDataFrame([(1, 2)], "col1 int, col2 int").write.format("lance").mode("append").save(loc)
    df = spark.createDataFrame([("a", 1)], ["key", "value"])
    replaced = LanceTable.replace(spark).location(loc).addColumns(df.schema).addColumn("value2", dataType="int").execute()
    assert replaced.toDF().schema == StructType([StructField("key", StringType()), StructField("value", LongType()),
                                                 StructField("value2", IntegerType())])
    assert replaced.toDF().count() == 0 and replaced.history(1).first().operation == "REPLACE TABLE"
    again = LanceTable.createOrReplace(spark).location(loc).addColumns(df.schema.fields).execute()
    assert again.toDF().columns == ["key", "value"]
    with pytest.raises(TableNotFoundError):
        LanceTable.replace(spark).location(str(tmp_path / "missing.lance")).addColumn("x", "int").execute()
    other = LanceTable.createOrReplace(spark).location(str(tmp_path / "new.lance")).addColumn("x", "int").execute()
    assert other.version == 1
    # argument checks at the call; what Lance tables do not have is refused clearly
    with pytest.raises(TypeError, match="Column name must be str"):
        LanceTable.create(spark).addColumn(1, "int")
    with pytest.raises(TypeError, match="Column data type must be str or DataType"):
        LanceTable.create(spark).addColumn("x", 1)
    with pytest.raises(TypeError, match="Schema must be StructType"):
        LanceTable.create(spark).addColumns(1)
    with pytest.raises(TypeError, match="Key and value of property must be string"):
        LanceTable.create(spark).property("k", 1)
    with pytest.raises(UnsupportedFeatureError):
        LanceTable.create(spark).addColumn("x", "int").partitionedBy("x")
    with pytest.raises(UnsupportedFeatureError):
        LanceTable.create(spark).addColumn("x", "int", generatedAlwaysAs="1")
    with pytest.raises(InvalidArgumentError, match="Namespace"):
        LanceTable.create(spark).tableName("events").addColumn("x", "int").execute()


def test_table_builder_with_a_name_and_a_location(spark, tmp_path):
    """A name with a location: without a configured Lance Namespace the name
    is one of this session (as SQL's CREATE TABLE ... LOCATION)."""
    import lance_ops

    loc = str(tmp_path / "named.lance")
    dt = LanceTable.create(spark).tableName("delta_compat_named").location(loc).addColumn("id", "bigint").execute()
    assert dt.detail().first().name == "delta_compat_named"
    lance_ops.sql(spark, "INSERT INTO delta_compat_named VALUES (1), (2)")
    assert answer(dt.toDF()) == [(1,), (2,)]


# ---------------------------------------------------------- commit info
def test_last_commit(spark, path):
    write(spark, path, [("a", 1), ("b", 2)])
    dt = LanceTable.forPath(spark, path)
    assert dt.lastCommit() is None
    dt.delete("key = 'a'")
    info = dt.lastCommit()
    assert (info.version, info.readVersion, info.operation, info.metrics["numDeletedRows"]) == (2, 1, "Delete", 1)
    assert dt.history(1).first().operationMetrics["numDeletedRows"] == "1"
