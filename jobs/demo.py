"""End-to-end demo: create a Lance table with Spark, append, read, time travel,
delete, update, merge, add a column, compact, read the change feed, keep a
feature column filled with a backfill, block a bad append with a CHECK
constraint, print the history. Usage: python jobs/demo.py [TABLE_DIR]  (default ./demo-data)

Runs on a local Spark (local[2]); the table it writes is a regular Lance table
that pylance and LanceDB read as well.
"""
from __future__ import annotations

import os
import shutil
import sys

from lance_ops import LanceTable, local_session, log_to_stderr
from lance_ops.errors import ConstraintViolationError


def main(root: str) -> None:
    path = os.path.join(root, "events.lance")
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(root, exist_ok=True)
    log_to_stderr("INFO")  # progress lines: one per Spark stage
    spark = local_session("lance_ops-demo")

    events = spark.range(0, 100_000).selectExpr(
        "id",
        "id % 7 as user_id",
        "cast(rand(1) * 100 as double) as score",
        "concat('event-', cast(id as string)) as name",
    )
    t = LanceTable.create(spark, path, events, maxRowsPerFragment=25_000)
    print(f"created {path}: version {t.version}, {t.count()} rows, {t.detail().first()['numFragments']} fragments")

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

    info = t.delete("score < 5")
    print(f"delete score < 5: {info.metrics['numDeletedRows']} rows (version {info.version})")
    info = t.update("user_id = 3", {"score": "score * 2"})
    print(f"update user 3: {info.metrics['numUpdatedRows']} rows (version {info.version})")

    updates = spark.range(109_990, 110_010).selectExpr(
        "id", "id % 7 as user_id", "cast(50.0 as double) as score", "concat('merged-', cast(id as string)) as name"
    )
    merged = t.merge(updates, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().first()
    print(f"merge: {merged.num_updated_rows} updated, {merged.num_inserted_rows} inserted")

    info = t.addColumns({"score_band": "cast(score / 10 as int)"})
    print(f"addColumns score_band: version {info.version}, {info.metrics['bytesWritten']:,} bytes written (that column only)")

    compacted = t.optimize().executeCompaction(targetRowsPerFragment=60_000).first().metrics
    print(f"compaction: {compacted.numFragmentsRemoved} fragments -> {compacted.numFragmentsAdded}")

    # (addColumns stamps every row as updated, as pylance's add_columns does: stop before it)
    changed = t.changes(startVersion=2, endVersion=5).groupBy("_change_type").count().orderBy("_change_type").collect()
    print("change feed of versions 3..5:", {r["_change_type"]: r["count"] for r in changed})
    print(f"vacuum (dry run, keep nothing older than now): {t.vacuum(retentionHours=0, dryRun=True, enforceRetentionDuration=False).count()} files")

    # A feature column that stays filled: ingestion appends without it (the new
    # fragments have no file for score_band), backfill computes only those rows.
    hourly = spark.range(110_010, 115_000).selectExpr(
        "id", "id % 7 as user_id", "cast(rand(3) * 100 as double) as score", "concat('event-', cast(id as string)) as name"
    )
    t.append(hourly, allowMissingColumns=True)
    status = t.featureStatus("score_band")
    print(f"appended 4,990 rows without score_band: {status['fragmentsMissing']} fragment(s) lack it, pending={status['pending']}")
    info = t.backfill({"score_band": "cast(score / 10 as int)"})
    print(f"backfill score_band: {info.metrics['numBackfilledRows']} rows in {info.metrics['numUpdatedFragments']} "
          f"fragment(s), watermark lance_ops.feature.score_band.version = {info.metrics['watermark']}; "
          f"rows still null: {t.toDF().where('score_band IS NULL').count()}")

    # A CHECK constraint stops bad data before it is committed.
    t.addConstraint("score_non_negative", "score >= 0")
    bad = spark.createDataFrame([(200_000, 1, -1.0, "bad-event", 0)], t.toDF().schema)
    before = t.refresh().version
    try:
        t.append(bad)
    except ConstraintViolationError as e:
        print(f"blocked bad append: {e.constraint} ({e.expression}) violated by {e.row}; "
              f"version still {t.refresh().version} (was {before})")
    else:
        raise SystemExit("the bad append was not blocked")

    print("history:")
    t.history().select("version", "timestamp", "operation", "readVersion", "operationMetrics").show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "./demo-data")
