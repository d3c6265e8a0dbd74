"""``python artifacts_client.py sc://... BASE OUT.json``: against a Connect
server whose Python workers cannot import lance_ops, check that they cannot,
ship lance_ops with :func:`lance_ops.spark.session.ship_to`
(``spark.addArtifacts(zip, pyfile=True)``), and run operations whose work
happens in executor tasks. Used by test_artifacts.py."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main(url: str, base: str, out: str) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()

    def probe(batches):  # (nested: pickled by value, needs nothing of ours on the worker)
        import importlib.util
        import sys

        import pyarrow as pa

        for _ in batches:
            spec = importlib.util.find_spec("lance_ops")
            yield pa.record_batch({"origin": [None if spec is None else str(spec.origin)],
                                   "no_site": [bool(sys.flags.no_site)]})

    def where() -> dict:
        return spark.range(0, 1, 1, 1).mapInArrow(probe, "origin string, no_site boolean").collect()[0].asDict()

    result = {"before": where()}
    try:
        from lance_ops import LanceTable
        from lance_ops.spark.session import ship_to

        result["zip"] = ship_to(spark, base)
        result["after"] = where()
        p = os.path.join(base, "t.lance")
        t = LanceTable.create(spark, p, spark.range(0, 120, 1, 3).selectExpr("id", "id * 2 AS x"),
                              maxRowsPerFragment=20)
        steps = [["create", t.version]]
        steps.append(["delete", t.delete("id % 5 = 0").version])
        steps.append(["addColumns fn", t.addColumns(
            lambda b: pa.RecordBatch.from_arrays([pc.add(b.column("x"), 1)], names=["z"]),
            readColumns=["x"], outputSchema="z long").version])
        steps.append(["compaction", t.optimize().executeCompaction(targetRowsPerFragment=1000).first().metrics.version])
        result["steps"] = steps
        result["rows"] = sorted([list(r) for r in t.toDF().collect()])
        # Filter pushdown switched off and on after ship_to registered the
        # source: reads still plan (the planner worker's conf decides).
        counts = []
        for on in ("false", "true"):
            spark.conf.set("spark.sql.python.filterPushdown.enabled", on)
            counts.append(spark.read.format("lance").load(p).where("id < 50").count())
        result["pushdown_switched"] = counts
    finally:
        spark.stop()
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
