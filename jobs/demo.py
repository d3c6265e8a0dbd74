"""End-to-end demo: create a Lance table with Spark, append, read, time travel,
print the history. Usage: python jobs/demo.py [TABLE_DIR]  (default ./demo-data)

Runs on a local Spark (local[2]); the table it writes is a regular Lance table
that pylance and LanceDB read as well.
"""
from __future__ import annotations

import os
import shutil
import sys

from lance_ops import LanceTable, local_session


def main(root: str) -> None:
    path = os.path.join(root, "events.lance")
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(root, exist_ok=True)
    spark = local_session("lance_ops-demo")

    events = spark.range(0, 100_000).selectExpr(
        "id",
        "id % 7 as user_id",
        "cast(rand(1) * 100 as double) as score",
        "concat('event-', cast(id as string)) as name",
    )
    t = LanceTable.create(spark, path, events, maxRowsPerFragment=25_000)
    print(f"created {path}: version {t.version}, {t.count()} rows, {t.detail()['numFragments']} fragments")

    more = spark.range(100_000, 110_000).selectExpr(
        "id", "id % 7 as user_id", "cast(rand(2) * 100 as double) as score", "concat('event-', cast(id as string)) as name"
    )
    info = t.append(more)
    print(f"appended: {info}")

    df = t.toDF(withRowId=True, withLineage=True)
    print("per-user counts at the latest version:")
    df.groupBy("user_id").count().orderBy("user_id").show()
    print("rows created by the append (lineage):", df.where("_row_created_at_version = 2").count())

    v1 = LanceTable(spark, path, version=1)
    print(f"time travel to version 1: {v1.toDF().count()} rows")

    print("history:")
    t.history().select("version", "timestamp", "operation", "readVersion", "operationMetrics").show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "./demo-data")
