"""Every operation on an S3 table (moto on loopback) through Spark, each
version read back row for row by pylance with the same storage options;
storage options from the Spark conf; secrets never in plans, history, logs
or errors."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lance_ops import LanceTable
from lance_ops.errors import LanceOpsError, UnsupportedFeatureError
from lance_ops.storage import commit_handler
from tests.objectstores.conftest import ROOT
from tests.servers import SECRET_KEY


def rows(ds_or_uri, options, version=None):
    ds = lance.dataset(ds_or_uri, storage_options=options, version=version)
    return sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])


def ours(t: LanceTable):
    return sorted((r.asDict() for r in t.toDF().collect()), key=lambda r: r["id"])


def plus_one(batch: pa.RecordBatch) -> pa.RecordBatch:
    import pyarrow.compute as pc

    return pa.record_batch({"z": pc.add(batch.column("x"), 1)})


def test_every_operation_on_s3(spark, moto, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="lance_ops")
    uri = f"s3://lance-ops/ops-{tmp_path.name}.lance"
    opts = moto.options()
    df = spark.range(0, 40, numPartitions=2).select(F.col("id"), (F.col("id") % 7).alias("x"),
                                                    F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"))
    t = LanceTable.create(spark, uri, df, storage_options=opts)
    seen = {}

    def check():
        seen[t.version] = ours(t)
        assert rows(uri, opts) == seen[t.version], t.version

    check()
    t.append(spark.range(40, 50).select("id", (F.col("id") % 7).alias("x"), F.lit("a").alias("s")))
    check()
    t.delete("id % 10 = 3")
    check()
    t.update("x = 0", {"s": "'zero'"})
    check()
    src = spark.range(45, 55).select("id", F.lit(100).cast("long").alias("x"), F.lit("m").alias("s"))
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    check()
    t.addColumns({"y": "x * 2"})
    t.addColumns(plus_one, readColumns=["x"], outputSchema="z long")
    t.rewriteColumns({"y": "y + 1"}, "id < 5")
    check()
    t.createTag("before-compaction")
    tag_version = t.version
    t.optimize().executeCompaction(targetRowsPerFragment=1000)
    check()
    final = seen[t.version]
    assert len(final) == 55 - 5 and {r["s"] for r in final if r["x"] == 0} == {"zero"}
    assert all(r["y"] == r["x"] * 2 + (1 if r["id"] < 5 else 0) and r["z"] == r["x"] + 1 for r in final)
    assert lance.dataset(uri, storage_options=opts).tags.list()["before-compaction"]["version"] == tag_version
    # time travel (by number and by tag), restore, vacuum
    for v in (1, 3):
        assert ours(LanceTable(spark, uri, version=v, storage_options=opts)) == seen[v] == rows(uri, opts, v)
    tagged = LanceTable(spark, uri, version="before-compaction", storage_options=opts)
    assert ours(tagged) == seen[tag_version]
    t.restoreToVersion(2)
    check()
    assert seen[t.version] == seen[2]
    removed = t.vacuumFiles(retentionHours=0, enforceRetentionDuration=False)
    assert any(p.startswith("_versions/") for p in removed) and any(p.startswith("data/") for p in removed)
    assert rows(uri, opts) == seen[t.version]
    assert rows(uri, opts, tag_version) == seen[tag_version]  # the tag kept its version and files
    assert [r["operation"] for r in t.history().collect()][0] == "RESTORE"
    t.deleteTag("before-compaction")
    assert "before-compaction" not in lance.dataset(uri, storage_options=opts).tags.list()
    # no secret in history, logs or the plan of a read
    assert SECRET_KEY not in str(t.history().collect())
    assert SECRET_KEY not in caplog.text
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        t.toDF().filter("x > 1").explain(mode="extended")
    assert "lance" in plan.getvalue().lower() and SECRET_KEY not in plan.getvalue()


def test_storage_options_from_spark_conf(spark, moto, tmp_path):
    # every option, the commit store included, from the session's conf
    opts = moto.options(commit_store=f"sqlite:///{tmp_path}/conf.db")
    keys = [f"spark.lance_ops.storage.{k}" for k in opts]
    try:
        for k, v in opts.items():
            spark.conf.set(f"spark.lance_ops.storage.{k}", v)
        uri = f"s3://lance-ops/conf-{tmp_path.name}.lance"
        t = LanceTable.create(spark, uri, spark.range(5).withColumn("x", F.col("id") * 2))
        t.delete("id = 1")
        assert [r["id"] for r in rows(uri, opts)] == [0, 2, 3, 4]
        assert commit_handler(t._store).describe().startswith("ExternalStoreHandler(sqlite")
        # explicit options win over the conf
        with pytest.raises(LanceOpsError, match="ignores conditional writes"):
            LanceTable.create(spark, "s3://nocond-lance-ops/x.lance", spark.range(2),
                              storage_options={"commit_store": ""})
    finally:
        for k in keys:
            spark.conf.unset(k)


def test_store_ignoring_conditional_writes_is_refused(spark, moto, tmp_path):
    uri = f"s3://nocond-lance-ops/refused-{tmp_path.name}.lance"
    opts = moto.options()
    with pytest.raises(UnsupportedFeatureError) as err:
        LanceTable.create(spark, uri, spark.range(3), storage_options=opts)
    msg = str(err.value)
    assert "commit_store" in msg and "ignores conditional writes" in msg and SECRET_KEY not in msg
    assert not LanceTable.isLanceTable(spark, uri, storage_options=opts)
    # With an external store the same bucket works.
    opts = moto.options(commit_store=f"sqlite:///{tmp_path}/c.db")
    t = LanceTable.create(spark, uri, spark.range(3), storage_options=opts)
    t.delete("id = 0")
    assert [r["id"] for r in rows(uri, opts)] == [1, 2]


def _leaks(text: str, secret: str) -> list[str]:
    """Where ``secret`` shows in ``text``: as is, or base64-encoded at any of
    the three byte alignments (py4j logs byte arguments -- pickled tasks --
    as base64)."""
    import base64

    found = [f"plain at {text.index(secret)}"] if secret in text else []
    raw = secret.encode()
    for shift in range(3):
        pad = b"\0" * shift
        enc = base64.b64encode(pad + raw).decode()
        core = enc[(shift * 4 + 2) // 3 + 1: len(enc) - 4]  # the characters that depend only on the secret
        if core and core in text:
            found.append(f"base64 (shift {shift}) at {text.index(core)}")
    return found


def test_secrets_never_reach_spark_or_py4j_logs_at_debug(moto, tmp_path, processes):
    """Storage options holding a secret reach Spark's workers as a handle
    (a Spark artifact), never as reader options or pickled plaintext. A
    session of its own (a child process) logs everything at DEBUG -- py4j's
    commands, pyspark, botocore, and Spark's JVM through log4j -- while it
    writes, reads, deletes, updates, merges and adds a column on S3: the
    secret access key appears nowhere, plain or base64-encoded, and every
    operation reached S3 with it."""
    uri = f"s3://lance-ops/secret-{tmp_path.name}.lance"
    opts = moto.options(commit_store=f"sqlite:///{tmp_path}/c.db")
    log4j = tmp_path / "log4j2.properties"
    jvm_log, py_log = tmp_path / "jvm.log", tmp_path / "py.log"
    log4j.write_text(
        "rootLogger.level = debug\nrootLogger.appenderRef.f.ref = F\n"
        f"appender.f.type = File\nappender.f.name = F\nappender.f.fileName = {jvm_log}\n"
        "appender.f.layout.type = PatternLayout\nappender.f.layout.pattern = %p %c: %m%n\n"
    )
    env = dict(os.environ, LANCE_OPS_TEST_STORAGE=json.dumps(opts), PYTHONPATH=ROOT,
               PYSPARK_SUBMIT_ARGS=f"--driver-java-options -Dlog4j2.configurationFile=file:{log4j} pyspark-shell")
    done = subprocess.run([sys.executable, "-m", "tests.objectstores.secret_scenario", uri, str(py_log)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    logged = jvm_log.read_text(errors="replace") + py_log.read_text(errors="replace") + done.stdout + done.stderr
    assert "Command to send" in logged and "DEBUG org.apache.spark" in logged  # DEBUG was really on
    assert _leaks(logged, SECRET_KEY) == []
    assert "lance_ops-credentials-" in logged  # what travelled instead
    assert json.loads(done.stdout.strip().splitlines()[-1]) == rows(uri, opts)
