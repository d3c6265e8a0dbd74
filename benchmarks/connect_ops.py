"""The operations the ``connect`` suite times on both kinds of session.

One representative operation per suite, written against the public API only,
so the same function runs on the run's classic session (in the benchmark
process) and on a Spark Connect session (in ``connect_client.py``, a process
of its own: a Connect session switches the whole Python process to Connect
mode). Each takes ``(spark, path, params)`` -- ``path`` a fresh copy of the
operation's base table (or the cached table itself for reads), ``params`` the
JSON-able facts of the run (dataset paths, sizes) -- and returns a small
JSON-able summary (a sum, or a commit's version and metrics) that the suite
compares across the two sides.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

DELETE = "id % 100 = 7"
UPDATE = "id % 100 = 8"
APPEND_FILTER = "id % 10 = 0"


@dataclass(frozen=True)
class Op:
    name: str
    #: The suite it stands for (its section title is in bench_connect).
    suite: str
    #: Which base table a run starts from: "read" (the cached table, read
    #: only), "table" (the shared lance_ops table), "fragments" (the
    #: compaction suite's small-fragment table).
    base: str
    run: Callable[[object, str, dict], object]


def _commit(info) -> dict:
    """The commit's facts both sides must agree on, and apart from them how a
    Connect run took its plan-dependent decisions (``planInspection``, absent
    on classic sessions)."""
    metrics = dict(info.metrics)
    how = metrics.pop("planInspection", None)
    return {"version": info.version, "readVersion": info.readVersion, "operation": info.operation,
            "metrics": metrics, "planInspection": how}


def _read(spark, path, params):
    from lance_ops import LanceTable

    return LanceTable(spark, path).toDF(columns=["id", "f0"]).where(DELETE).selectExpr("sum(f0)").collect()[0][0]


def _append(spark, path, params):
    from lance_ops import LanceTable

    return _commit(LanceTable(spark, path).append(spark.read.parquet(params["parquet"]).where(APPEND_FILTER)))


def _commit_one_row(spark, path, params):
    from lance_ops import LanceTable

    row = spark.range(-1, 0, 1, 1).selectExpr("id", *(f"CAST(0.5 AS DOUBLE) AS f{i}" for i in range(8)), "'one' AS s")
    return _commit(LanceTable(spark, path).append(row))


def _delete(spark, path, params):
    from lance_ops import LanceTable

    return _commit(LanceTable(spark, path).delete(DELETE))


def _update(spark, path, params):
    from lance_ops import LanceTable

    return _commit(LanceTable(spark, path).update(UPDATE, {"f0": "f0 + 1"}))


def _merge(spark, path, params):
    from lance_ops import LanceTable

    src = spark.read.parquet(params["merge_source"])
    t = LanceTable(spark, path)
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    return _commit(t.lastCommit())


def _add_sql(spark, path, params):
    from lance_ops import LanceTable

    return _commit(LanceTable(spark, path).addColumns({"g": "f0 * 2"}))


def _add_fn(spark, path, params):
    from lance_ops import LanceTable

    def double_f0(batch):  # (nested: pickled by value, the server's workers need no benchmarks/)
        import pyarrow as pa
        import pyarrow.compute as pc

        return pa.record_batch({"g": pc.multiply(batch.column("f0"), 2.0)})

    return _commit(LanceTable(spark, path).addColumns(double_f0, readColumns=["f0"], outputSchema="g double"))


def _rewrite(spark, path, params):
    from lance_ops import LanceTable

    return _commit(LanceTable(spark, path).rewriteColumns({"f1": "f1 * 2"}))


def _compact(spark, path, params):
    from lance_ops import LanceTable

    t = LanceTable(spark, path)
    t.optimize().executeCompaction(targetRowsPerFragment=params["compact_target"])
    return _commit(t.lastCommit())


def _sql_delete(spark, path, params):
    import lance_ops

    lance_ops.sql(spark, f"DELETE FROM lance.`{path}` WHERE {DELETE}")
    from lance_ops import LanceTable

    return {"version": LanceTable(spark, path).version}


OPS = [
    Op("filtered sum, `toDF(columns=[\"id\",\"f0\"])`", "foundation", "read", _read),
    Op("append 10% of rows", "foundation", "table", _append),
    Op("delete 1% of rows", "dml", "table", _delete),
    Op("update 1% of rows", "dml", "table", _update),
    Op("merge upsert (half new)", "dml", "table", _merge),
    Op("addColumns by SQL expression", "evolution", "table", _add_sql),
    Op("addColumns by Arrow UDF", "evolution", "table", _add_fn),
    Op("rewriteColumns", "evolution", "table", _rewrite),
    Op("compaction", "compaction", "fragments", _compact),
    Op("1-row append (commit latency through Spark)", "commits", "table", _commit_one_row),
    Op("`DELETE FROM` through lance_ops.sql", "sql", "table", _sql_delete),
]
BY_NAME = {op.name: op for op in OPS}


def warm_up(spark, path: str) -> None:
    """Create a tiny table and run each kind of operation once on a copy of
    it, untimed, so neither side pays first-use costs (Python workers,
    imports, codegen) in a timed run."""
    import shutil

    from lance_ops import LanceTable

    df = spark.range(0, 400, 1, 4).selectExpr("id", *(f"rand({i}) AS f{i}" for i in range(8)),
                                                "concat('name-', cast(id AS string)) AS s")
    base = path + ".base"
    LanceTable.create(spark, base, df, maxRowsPerFragment=50)
    params = {"parquet": None, "merge_source": None, "compact_target": 400}
    for i, op in enumerate(OPS):
        if op.run in (_append, _merge):
            continue  # (they read the run's Parquet files)
        copy = f"{path}.{i}"
        shutil.copytree(base, copy)
        op.run(spark, copy, params)
