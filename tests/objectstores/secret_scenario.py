"""A Spark session whose every log is at DEBUG, running lance_ops operations
on an S3 table (for the test that secrets never reach a log).

    python -m tests.objectstores.secret_scenario URI PY_LOG

Storage options come from ``LANCE_OPS_TEST_STORAGE`` (JSON); Spark's JVM
logs through the log4j2 configuration the caller passes in
``PYSPARK_SUBMIT_ARGS``. Prints the final rows as one JSON line.
"""
from __future__ import annotations

import json
import logging
import os
import sys


def main(uri: str, py_log: str) -> None:
    logging.basicConfig(filename=py_log, level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    from pyspark.sql import functions as F

    from lance_ops import LanceTable
    from lance_ops.spark.jvm import set_log_level
    from lance_ops.spark.session import local_session

    opts = json.loads(os.environ["LANCE_OPS_TEST_STORAGE"])
    spark = local_session("secret-scenario", conf={"spark.sql.shuffle.partitions": "2"})
    set_log_level(spark, "DEBUG")
    df = spark.range(0, 20, numPartitions=2).select("id", (F.col("id") % 3).alias("x"))
    t = LanceTable.create(spark, uri, df, storage_options=opts)
    assert t.toDF().filter("x = 1").count() == 7
    t.delete("id < 2")
    t.update("x = 0", {"x": "x + 10"})
    src = spark.range(15, 25).select("id", F.lit(5).cast("long").alias("x"))
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    t.addColumns({"y": "x * 2"})
    out = sorted((r.asDict() for r in t.toDF().collect()), key=lambda r: r["id"])
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
