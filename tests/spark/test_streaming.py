"""Structured Streaming with the lance sink and source: micro-batches commit
once each (a batch Spark replays after a restart is skipped), complete mode
overwrites, pylance reads what the stream wrote; the source delivers
appended rows version by version, exactly once, nothing for versions that
change no rows, and Delta's errors (or skips) for versions that change rows."""
from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pytest

from lance_ops import LanceTable, Table


def json_files(d, batches):
    os.makedirs(d, exist_ok=True)
    for i, rows in enumerate(batches):
        with open(os.path.join(d, f"part-{i:03d}.json"), "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))


def finish(q):
    """Wait for an availableNow query; its failure stays in q.exception()."""
    try:
        q.awaitTermination(300)
    except Exception:  # noqa: BLE001 - the test looks at q.exception()
        pass
    return q


def run_sink(spark, src, uri, ck, mode="append", agg=False):
    df = spark.readStream.format("json").schema("id long, v string").option("maxFilesPerTrigger", 1).load(src)
    if agg:
        df = df.groupBy("v").count()
    q = (df.writeStream.format("lance").option("checkpointLocation", ck).outputMode(mode)
         .trigger(availableNow=True).start(uri))
    finish(q)
    assert q.exception() is None, q.exception()
    return q


def test_sink_commits_each_micro_batch_once(spark, tmp_path):
    src, uri, ck = str(tmp_path / "src"), str(tmp_path / "t.lance"), str(tmp_path / "ck")
    json_files(src, [[{"id": 3 * b + i, "v": f"b{b}"} for i in range(3)] for b in range(3)])
    q = run_sink(spark, src, uri, ck)
    t = Table(uri)
    assert t.version == 3  # one commit per batch (the first creates the table)
    got = sorted(lance.dataset(uri).to_table().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": i, "v": f"b{i // 3}"} for i in range(9)]
    h = t.history()
    assert [r["operationParameters"]["epochId"] for r in h] == ["2", "1", "0"]
    assert {r["operationParameters"]["queryId"] for r in h} == {q.id}
    assert {r["operationParameters"]["outputMode"] for r in h} == {"append"}
    assert t.txnVersion(f"stream-{q.id}") == 2

    # A restart after a crash between the commit of batch 2 and its entry in
    # the checkpoint's commit log: Spark runs batch 2 again; it is skipped.
    for name in ("2", ".2.crc"):
        os.remove(os.path.join(ck, "commits", name))
    run_sink(spark, src, uri, ck)
    assert Table(uri).version == 3
    assert sorted(r["id"] for r in lance.dataset(uri).to_table().to_pylist()) == list(range(9))
    assert not [f for f in os.listdir(os.path.join(uri, "data")) if f not in
                {os.path.basename(d.path) for fr in lance.dataset(uri).get_fragments() for d in fr.data_files()}]
    # new input continues the same query
    with open(os.path.join(src, "part-010.json"), "w") as f:
        f.write(json.dumps({"id": 100, "v": "late"}) + "\n")
    run_sink(spark, src, uri, ck)
    assert sorted(r["id"] for r in lance.dataset(uri).to_table().to_pylist()) == list(range(9)) + [100]


def test_sink_complete_mode_overwrites_each_batch(spark, tmp_path):
    src, uri, ck = str(tmp_path / "src"), str(tmp_path / "t.lance"), str(tmp_path / "ck")
    json_files(src, [[{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], [{"id": 3, "v": "a"}]])
    run_sink(spark, src, uri, ck, mode="complete", agg=True)
    assert Table(uri).history()[0]["operation"] in ("Overwrite", "CREATE OR REPLACE TABLE AS SELECT", "WRITE")
    got = sorted((r["v"], r["count"]) for r in lance.dataset(uri).to_table().to_pylist())
    assert got == [("a", 2), ("b", 1)]


def read_stream(spark, uri, name, **options):
    reader = spark.readStream.format("lance")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = reader.load(uri).writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    return finish(q)


def test_source_delivers_appends_once_and_skips_rewrites(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": pa.array([0, 1, 2], pa.int64()), "twice": pa.array([0, 2, 4], pa.int64())}), uri)
    t = LanceTable(spark, uri)
    t.append(spark.range(3, 6).selectExpr("id", "id * 2 AS twice"))
    ck, out = str(tmp_path / "ck"), str(tmp_path / "out")
    seen: list[int] = []

    def run(name, **opts):
        """One run of the same query (same checkpoint); returns it and the
        rows this run delivered."""
        reader = spark.readStream.format("lance")
        for k, v in opts.items():
            reader = reader.option(k, v)
        q = (reader.load(uri).writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
             .trigger(availableNow=True).start())
        finish(q)
        everything = sorted(r.id for r in spark.read.parquet(out).collect()) if os.path.exists(out) else []
        new = list(everything)
        for x in seen:
            new.remove(x)
        seen[:] = everything
        spark.catalog.clearCache()
        return q, sorted(new)

    q, got = run("src1")
    assert q.exception() is None, q.exception()
    assert got == list(range(6))  # the table as it was when the query started
    # compaction, a property and an index change no rows: nothing delivered; an append is
    t.optimize().executeCompaction(targetRowsPerFragment=100)
    t.setProperties({"k": "v"})
    t.addColumns({"thrice": "id * 3"})  # new columns for the same rows
    t.append(spark.range(6, 8).selectExpr("id", "id * 3 AS thrice"), allowMissingColumns=True)
    info = t.backfill({"twice": "id * 2"})  # fills the new fragment's missing column file: rows unchanged
    assert info.operation == "DataReplacement" and info.version is not None
    q, got = run("src2")
    assert q.exception() is None, q.exception()
    assert got == [6, 7]
    # a delete is an error unless the stream says to skip it, as Delta's
    t.delete("id = 0")
    t.append(spark.range(8, 9).selectExpr("id", "id * 2 AS twice", "id * 3 AS thrice"))
    q, got = run("src3")
    assert q.exception() is not None and "skipChangeCommits" in str(q.exception()) and got == []
    q, got = run("src4", ignoreDeletes="true")
    assert q.exception() is None, q.exception()
    assert got == [8]


def test_source_starting_version_and_read_limits(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [0]}), uri)
    for start in (1, 3, 6):
        lance.write_dataset(pa.table({"id": list(range(start, start + (2 if start < 6 else 1)))}), uri, mode="append")
    # versions: 1 {0}, 2 {1,2}, 3 {3,4}, 4 {6}
    q = read_stream(spark, uri, "from3", startingVersion=3, maxFilesPerTrigger=1)
    assert q.exception() is None, q.exception()
    assert sorted(r.id for r in spark.table("from3").collect()) == [3, 4, 6]
    batches = [p for p in q.recentProgress if p.numInputRows]
    assert [p.numInputRows for p in batches] == [2, 1]  # one fragment per trigger
    q = read_stream(spark, uri, "latest", startingVersion="latest")
    assert q.exception() is None and spark.table("latest").count() == 0
    with pytest.raises(Exception, match="startingVersion 9"):
        q = read_stream(spark, uri, "bad", startingVersion=9)
        raise q.exception()


def test_source_streams_the_change_feed(spark, tmp_path):
    """readChangeFeed on a stream: the table as it was as inserts, then each
    version's Delta change rows -- deletes and updates too -- the same rows as
    the batch change feed of those versions."""
    uri = str(tmp_path / "t.lance")
    t = LanceTable.create(spark, uri, spark.range(0, 6).selectExpr("id", "id * 10 AS v"))
    ck, out = str(tmp_path / "ck"), str(tmp_path / "out")

    def run():
        q = (spark.readStream.format("lance").option("readChangeFeed", "true").load(uri)
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
             .trigger(availableNow=True).start())
        finish(q)
        assert q.exception() is None, q.exception()
        return sorted((r.id, r.v, r._change_type, r._commit_version) for r in spark.read.parquet(out).collect())

    assert run() == [(i, i * 10, "insert", 1) for i in range(6)]
    t.delete("id = 0")
    t.update("id = 1", {"v": "v + 1"})
    t.append(spark.range(6, 7).selectExpr("id", "id * 10 AS v"))
    t.optimize().executeCompaction(targetRowsPerFragment=100)
    got = run()
    batch = sorted((r.id, r.v, r._change_type, r._commit_version)
                   for r in spark.read.format("lance").option("readChangeFeed", "true")
                   .option("startingVersion", 2).load(uri).collect())
    assert got == sorted([(i, i * 10, "insert", 1) for i in range(6)] + batch)
    assert (0, 0, "delete", 2) in batch and (1, 11, "update_postimage", 3) in batch and (6, 60, "insert", 4) in batch


def test_idempotent_writes_through_the_api(spark, tmp_path):
    """txnAppId / txnVersion on append, the data source writer, merge (as a
    foreachBatch would use it), update, delete and backfill: each repeat of a
    (app id, version) already committed is skipped -- nothing committed, no
    file left -- and the watermark is the table config pylance sees."""
    uri = str(tmp_path / "t.lance")
    t = LanceTable.create(spark, uri, spark.range(0, 4).selectExpr("id", "id AS v"))
    rows = spark.range(10, 12).selectExpr("id", "id AS v")
    assert t.append(rows, txnAppId="job", txnVersion=1).version == 2
    again = t.append(rows, txnAppId="job", txnVersion=1)
    assert again.version is None and "skipped" in again.skipped
    for _ in range(2):
        spark.range(20, 21).selectExpr("id", "id AS v").write.format("lance").mode("append") \
            .option("txnAppId", "job").option("txnVersion", 2).save(uri)
    src = spark.range(0, 2).selectExpr("id", "id + 100 AS v")
    for _ in range(2):  # a foreachBatch body run twice for batch 3
        t.merge(src, "t.id = s.id").whenMatchedUpdateAll().execute(txnAppId="job", txnVersion=3)
    assert t.update("id = 3", {"v": "v + 1"}, txnAppId="job", txnVersion=4).version is not None
    assert t.update("id = 3", {"v": "v + 1"}, txnAppId="job", txnVersion=4).skipped
    assert t.delete("id = 2", txnAppId="job", txnVersion=5).version is not None
    assert t.delete("id = 11", txnAppId="job", txnVersion=5).skipped  # (not run: the version is taken)
    got = sorted((r["id"], r["v"]) for r in lance.dataset(uri).to_table().to_pylist())
    assert got == [(0, 100), (1, 101), (3, 4), (10, 10), (11, 11), (20, 20)]
    assert lance.dataset(uri).config()["lance_ops.txn.job"] == "5"
    assert Table(uri).version == 6  # create + 5 writes, none twice
    data = os.path.join(uri, "data")
    referenced = {os.path.basename(d.path) for v in range(1, 7)
                  for f in lance.dataset(uri, version=v).get_fragments() for d in f.data_files()}
    assert set(os.listdir(data)) == referenced  # the skipped writes' files are gone
