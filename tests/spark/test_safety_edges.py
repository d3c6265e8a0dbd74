"""Safety edges: creating a table refuses a non-empty directory that is not a
Lance table (as Delta refuses a non-Delta location) whichever way the write
comes (create, the data source, SQL), leaving it as it was; vacuum removes
the ``_staging/`` leftovers of failed writes once older than the retention;
a session whose Python workers cannot import lance_ops fails in the driver,
naming PYSPARK_PYTHON and the interpreter, before any job."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import lance
import pytest

import lance_ops
from lance_ops import LanceTable
from lance_ops.errors import ConstraintViolationError, TableExistsError


def _listing(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def test_create_refuses_a_directory_holding_other_data(spark, tmp_path):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string")
    parquet = str(tmp_path / "events")
    df.write.parquet(parquet)
    before = _listing(parquet)
    attempts = [
        lambda: LanceTable.create(spark, parquet, df),
        lambda: LanceTable.create(spark, parquet, df, mode="overwrite"),
        lambda: df.write.format("lance").mode("append").save(parquet),
        lambda: df.write.format("lance").mode("overwrite").save(parquet),
        lambda: lance_ops.sql(spark, f"CREATE TABLE lance.`{parquet}` AS SELECT 1 AS id"),
    ]
    for attempt in attempts:
        with pytest.raises(Exception, match="not empty and is not a Lance table") as e:
            attempt()
        assert parquet in str(e.value) and "_SUCCESS" in str(e.value)
        assert _listing(parquet) == before  # nothing written
    with pytest.raises(TableExistsError):
        LanceTable.create(spark, parquet, df)
    # an empty directory, or one holding only the leftovers of an earlier failed create, is fine
    empty = tmp_path / "empty.lance"
    (empty / "_staging" / "journal").mkdir(parents=True)
    LanceTable.create(spark, str(empty), df)
    assert lance.dataset(str(empty)).count_rows() == 2


def test_vacuum_removes_staging_leftovers_of_failed_writes(spark, tmp_path):
    p = str(tmp_path / "c.lance")
    t = LanceTable.create(spark, p, spark.createDataFrame([(1, 1.0)], "id long, v double"))
    t.addConstraint("positive_v", "v > 0")
    with pytest.raises(ConstraintViolationError):  # a journaled write that fails: CLOSED stays behind
        t.append(spark.createDataFrame([(i, -1.0 if i == 7 else 1.0) for i in range(10)], "id long, v double")
                 .repartition(2))
    staged = [f for f in _listing(p) if f.startswith("_staging/")]
    assert staged and all("/journal/" in f for f in staged), staged
    assert not [x for x in t.vacuumFiles(168, dryRun=True) if x.startswith("_staging")]
    assert [f for f in _listing(p) if f.startswith("_staging/")] == staged  # younger than the retention: kept
    old = time.time() - 200 * 3600
    for f in staged:
        os.utime(os.path.join(p, f), (old, old))
    removed = t.vacuumFiles(168)
    assert sorted(x for x in removed if x.startswith("_staging/")) == sorted(staged)
    assert not os.path.exists(os.path.join(p, "_staging", "journal"))  # empty directories go too
    assert lance.dataset(p).to_table().to_pylist() == [{"id": 1, "v": 1.0}]


def test_workers_that_cannot_import_lance_ops_fail_in_the_driver(tmp_path, processes):
    """Spark's default worker interpreter is ``python3`` from PATH, which here
    has no pyarrow: the error must come from the driver, before any job."""
    system_python = "/usr/bin/python3"
    probe = subprocess.run([system_python, "-c", "import pyarrow"], capture_output=True)
    assert probe.returncode != 0, "this test needs a python3 without pyarrow (the Debian one)"
    p = str(tmp_path / "t.lance")
    import pyarrow as pa

    lance.write_dataset(pa.table({"id": [1, 2, 3]}), p)
    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = (SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')\n"
        "         .config('spark.driver.host', '127.0.0.1').config('spark.driver.bindAddress', '127.0.0.1')\n"
        "         .getOrCreate())\n"
        "from lance_ops import LanceTable\n"
        "try:\n"
        f"    LanceTable(spark, {p!r}).toDF().count()\n"
        "except Exception as e:\n"
        "    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(None)\n"
        "    print(type(e).__name__, '|', e, '| jobs:', list(jobs))\n"
        "    sys.exit(0)\n"
        "sys.exit('no error')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = system_python
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    kind, message, jobs = [x.strip() for x in r.stdout.strip().splitlines()[-1].split("|")]
    assert kind == "WorkerEnvironmentError", r.stdout
    assert "PYSPARK_PYTHON" in message and system_python in message and "pyarrow" in message
    assert jobs == "jobs: []"  # failed in the driver: no Spark job ran
