"""A Spark Connect client logging everything at DEBUG (pyspark's Connect
client prints every plan it sends) while it runs lance_ops operations on an
S3 table whose storage options hold a secret.

    python secrets_client.py sc://127.0.0.1:PORT URI LOG

Storage options from ``LANCE_OPS_TEST_STORAGE`` (JSON). Prints the final rows
as one JSON line."""
import json
import logging
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main(url: str, uri: str, log: str) -> None:
    logging.basicConfig(filename=log, level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    from pyspark.sql import functions as F

    from lance_ops import LanceTable
    from lance_ops.spark.session import remote_session

    opts = json.loads(os.environ["LANCE_OPS_TEST_STORAGE"])
    spark = remote_session(url, "secrets-client")
    try:
        df = spark.range(0, 20, numPartitions=2).select("id", (F.col("id") % 3).alias("x"))
        t = LanceTable.create(spark, uri, df, storage_options=opts)
        assert t.toDF().filter("x = 1").count() == 7
        t.delete("id < 2")
        t.update("x = 0", {"x": "x + 10"})
        src = spark.range(15, 25).select("id", F.lit(5).cast("long").alias("x"))
        t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        t.addColumns({"y": "x * 2"})
        out = sorted((r.asDict() for r in t.toDF().collect()), key=lambda r: r["id"])
    finally:
        spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
