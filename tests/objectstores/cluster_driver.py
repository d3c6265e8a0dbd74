"""The driver of the Spark standalone cluster test, run in its own process
(the test process already holds a local Spark session).

    python -m tests.objectstores.cluster_driver MASTER_URL TABLE_URI...

Storage options come from ``LANCE_OPS_TEST_STORAGE`` (JSON). For each table:
create, delete, merge, addColumns(fn), compaction. Prints one JSON line with
the driver's pid, the executors' (pid, host) seen by tasks, and each table's
final version.
"""
from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc


def plus_one(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch({"z": pc.add(batch.column("x"), 1)})


def main(master: str, uris: list[str]) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from lance_ops import LanceTable

    options = json.loads(os.environ["LANCE_OPS_TEST_STORAGE"])
    spark = (
        SparkSession.builder.master(master).appName("lance_ops-cluster-test")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.cores.max", "2").config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .getOrCreate()
    )
    try:
        def who(batches):
            import socket

            for _ in batches:
                pass
            yield pa.record_batch({"pid": [os.getpid()], "host": [socket.gethostname()]})

        seen = spark.range(0, 8, numPartitions=8).mapInArrow(who, "pid long, host string").collect()
        out = {"driver_pid": os.getpid(), "executors": sorted({(r.pid, r.host) for r in seen}), "versions": {}}
        for uri in uris:
            opts = options if uri.startswith(("s3", "s3+ddb")) else None
            df = spark.range(0, 30, numPartitions=2).select("id", (F.col("id") % 5).alias("x"))
            t = LanceTable.create(spark, uri, df, storage_options=opts)
            t.delete("id % 4 = 0")
            src = spark.range(25, 35, numPartitions=2).select("id", F.lit(100).cast("long").alias("x"))
            t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
            t.addColumns(plus_one, readColumns=["x"], outputSchema="z long")
            t.optimize().executeCompaction(targetRowsPerFragment=1000)
            out["versions"][uri] = t.version
        print(json.dumps(out), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
