"""Run ``scenario.run`` through a Spark Connect session: ``python client.py
sc://127.0.0.1:PORT BASE OUT.json``. Used by test_connect.py with the
project's own Python (pyspark's Connect client) and with the thin-client
environment (pyspark-client, no JVM)."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main(url: str, base: str, out: str) -> None:
    import pyspark
    from pyspark.sql import SparkSession

    from tests.connect import scenario

    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        from lance_ops.spark import jvm

        assert jvm.is_connect(spark), type(spark)
        result = scenario.run(spark, base)
        result["client"] = {"pyspark": pyspark.__version__, "java": bool(__import__("shutil").which("java"))}
    finally:
        spark.stop()
    with open(out, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:4])
