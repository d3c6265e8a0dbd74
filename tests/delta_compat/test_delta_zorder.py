"""Delta Lake's Z-ordering usage (``OPTIMIZE ... ZORDER BY`` and
``DeltaTable.optimize().executeZOrderBy``), run on Lance tables
(``DeltaTable`` -> ``LanceTable``, ``spark.sql`` -> ``lance_ops.sql``)."""
from __future__ import annotations

import lance_ops
from lance_ops import LanceTable


def events(spark, path):
    spark.range(400).selectExpr("id", "id % 7 AS eventType", "(id * 37) % 101 AS clicks") \
        .repartition(4).write.format("lance").mode("append").save(path)


def test_execute_zorder_by(spark, tmp_path):
    path = str(tmp_path / "events.lance")
    events(spark, path)
    before = sorted(tuple(r) for r in spark.read.format("lance").load(path).collect())
    deltaTable = LanceTable.forPath(spark, path)
    result = deltaTable.optimize().executeZOrderBy("eventType")
    assert result.columns == ["path", "metrics"]
    metrics = result.head().metrics
    assert metrics.numFilesRemoved >= 1 and metrics.numFilesAdded >= 1
    assert metrics.zOrderStats is not None
    assert sorted(tuple(r) for r in deltaTable.toDF().collect()) == before
    history = deltaTable.history(1).head()
    assert history.operationParameters["zOrderBy"] == '["eventType"]'


def test_optimize_zorder_by_in_sql(spark, tmp_path):
    path = str(tmp_path / "events.lance")
    events(spark, path)
    out = lance_ops.sql(spark, f"OPTIMIZE lance.`{path}` ZORDER BY (eventType, clicks)")
    assert out.columns == ["path", "metrics"] and out.head().metrics.numFilesRemoved >= 1
    assert spark.read.format("lance").load(path).count() == 400
