"""One run of every kind of public operation, written against the public API
only, so the same code runs on a classic session (in the test process) and
on a Spark Connect session (``client.py``, in a process of its own: a
Connect session switches the whole Python process to Connect mode, so it
cannot share the test process with the classic ``spark`` fixture).

Returns a JSON-able record: each step's CommitInfo, the rows read back
through Spark, the history, and the class / message of the errors raised in
executors -- compared across the two modes and with pylance by
``test_connect.py``."""
from __future__ import annotations

import os
import time

_clock = [0.0]


def _lap() -> float:
    now = time.monotonic()
    took, _clock[0] = now - _clock[0], now
    return round(took, 3)


def _info(step: str, info) -> dict:
    return {"step": step, "seconds": _lap(), "version": info.version, "readVersion": info.readVersion,
            "operation": info.operation, "metrics": dict(info.metrics)}


def _rows(df) -> list:
    return sorted([[None if v is None else (v if isinstance(v, (int, float, str)) else str(v)) for v in r]
                   for r in df.collect()], key=repr)


def _error(fn) -> dict:
    try:
        fn()
    except Exception as e:  # the class and message are what the test compares
        return {"class": type(e).__name__, "module": type(e).__module__, "message": str(e),
                "fields": {k: getattr(e, k) for k in ("constraint", "expression") if hasattr(e, k)}}
    return {"class": None}


def run(spark, base: str) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from lance_ops import LanceTable

    p = os.path.join(base, "t.lance")
    out: dict = {"steps": [], "errors": {}}
    steps = out["steps"]

    df = spark.range(0, 200, 1, 2).selectExpr("id", "id * 2 AS x", "cast(id % 7 AS string) AS s")
    _lap()
    t = LanceTable.create(spark, p, df, stableRowIds=True, maxRowsPerFragment=60)
    steps.append({"step": "create", "version": t.version, "seconds": _lap()})
    steps.append(_info("append", t.append(spark.range(200, 260, 1, 1).selectExpr("id", "id * 2 AS x", "'a' AS s"))))
    spark.range(260, 280, 1, 1).selectExpr("id", "id * 2 AS x", "'w' AS s").write.format("lance").mode("append").save(p)
    t = LanceTable(spark, p)
    steps.append({"step": "write.format(lance)", "version": t.version, "seconds": _lap()})
    out["read"] = _rows(spark.read.format("lance").load(p).where("x > 500"))
    out["filteredRead"] = _filtered_read(spark, t, os.path.join(base, "scan-trace"))
    _lap()
    steps.append(_info("delete", t.delete("x % 10 = 4")))
    steps.append(_info("delete column", t.delete(F.col("id") > 270)))
    steps.append(_info("update", t.update("id < 20", {"x": "x + 1000", "s": F.lit("u")})))
    src = spark.range(250, 300, 1, 1).selectExpr("id", "id * 3 AS x", "'m' AS s")
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    steps.append(_info("merge", t.lastCommit()))
    steps.append(_info("addColumns expr", t.addColumns({"y": "x * 2"})))
    steps.append(_info("addColumns fn", t.addColumns(
        lambda b: pa.RecordBatch.from_arrays([pc.add(b.column("x"), 1)], names=["z"]),
        readColumns=["x"], outputSchema="z long")))
    steps.append(_info("rewriteColumns", t.rewriteColumns({"y": "y + 1"}, "id < 50")))
    out["beforeCompaction"] = _rows(t.toDF(withRowId=True))
    _lap()
    t.optimize().executeCompaction(targetRowsPerFragment=1000)
    steps.append(_info("compaction", t.lastCommit()))
    out["afterCompaction"] = _rows(t.toDF(withRowId=True, withLineage=True))
    t.restoreToVersion(t.version - 2)
    steps.append(_info("restore", t.lastCommit()))
    steps.append(_info("addConstraint", t.addConstraint("x_nonneg", "x >= 0")))
    # Errors raised inside executor tasks come back as lance_ops errors.
    out["errors"]["constraint"] = _error(lambda: t.append(spark.range(900, 901, 1, 1).selectExpr(
        "id", "-id AS x", "'bad' AS s", "0L AS y", "0L AS z")))
    out["errors"]["udf"] = _error(lambda: t.addColumns(
        lambda b: pa.RecordBatch.from_arrays([pa.array([1], pa.int64())], names=["w"]),
        readColumns=["x"], outputSchema="w long"))
    out["errors"]["sql"] = _error(lambda: t.delete("no_such_column > 1"))
    _lap()
    removed = t.vacuumFiles(retentionHours=0, enforceRetentionDuration=False)
    out["vacuumed"] = len(removed)
    steps.append({"step": "vacuum", "version": t.version, "seconds": _lap()})
    out["cancel"] = cancel_by_tag(spark, os.path.join(base, "cancel"))
    out["final"] = _rows(t.toDF())
    out["count"] = t.count()
    out["version"] = t.version
    out["history"] = [[r["version"], r["operation"], r["readVersion"]] for r in t.history().collect()]
    return out


def _filtered_read(spark, t, trace_dir: str) -> dict:
    """``toDF(filter=...)`` with a filter Spark never pushes (``%``): the rows,
    and how many rows the scan's tasks sent to Spark (the scan trace) -- only
    the matching ones when the filter was decoded for the tasks (classic:
    the analyzed plan; Connect: its EXPLAIN text)."""
    from lance_ops.ops.read import SCAN_TRACE_CONF
    from lance_ops.spark.datasource import read_scan_trace

    spark.conf.set(SCAN_TRACE_CONF, trace_dir)
    try:
        rows = _rows(t.toDF(filter="x % 7 = 1 AND s <> 'a b'"))
    finally:
        spark.conf.unset(SCAN_TRACE_CONF)
    return {"rows": rows, "sent": sum(r["rows"] for r in read_scan_trace(trace_dir))}


def cancel_by_tag(spark, base: str) -> dict:
    """Start a slow ``addColumns(fn)`` in a thread (two fragments: the task of
    the first writes its column file, the second's UDF then waits), cancel it
    by its tag -- ``spark.interruptTag("lance_ops-addColumns")`` under Connect,
    ``lance_ops.cancel(spark, "addColumns")`` on a classic session (whose
    ``interruptTag`` only sees its own thread's tags) -- and report what the
    operation raised, the versions, the rows and what a vacuum dry run lists."""
    import threading

    import pyarrow as pa

    import lance_ops
    from lance_ops import LanceTable
    from lance_ops.spark import jvm

    p = os.path.join(base, "c.lance")
    t = LanceTable.create(spark, p, spark.range(0, 100, 1, 2).selectExpr("id", "id * 2 AS x"), maxRowsPerFragment=50)
    before = _rows(t.toDF())
    data_dir, started = os.path.join(p, "data"), os.path.join(base, "slow-task-started")
    data_files = len(os.listdir(data_dir))

    def slow(b):
        import os
        import time

        if b.num_rows and b.column("id")[0].as_py() >= 50:
            deadline = time.monotonic() + 60
            while len(os.listdir(data_dir)) <= data_files and time.monotonic() < deadline:
                time.sleep(0.1)  # (until the other task's column file is written)
            open(started, "w").close()
            time.sleep(120)
        return pa.RecordBatch.from_arrays([b.column("id")], names=["z"])

    raised: list = []

    def run():
        try:
            t.addColumns(slow, readColumns=["id"], outputSchema="z long")
        except BaseException as e:  # what the test checks
            raised.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 120
    while not os.path.exists(started) and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    at = time.monotonic()
    if jvm.is_connect(spark):
        spark.interruptTag("lance_ops-addColumns")
    else:
        lance_ops.cancel(spark, "addColumns")
    worker.join(180)
    out = {"started": os.path.exists(started), "returned": not worker.is_alive(),
           "secondsToCancel": round(time.monotonic() - at, 2)}
    e = raised[0] if raised else None
    out["error"] = None if e is None else {"class": type(e).__name__, "module": type(e).__module__,
                                           "operation": getattr(e, "operation", None),
                                           "message": str(e).replace(p, "<table>")}
    fresh = LanceTable(spark, p)
    out["version"] = fresh.version
    out["rowsKept"] = _rows(fresh.toDF()) == before
    out["orphans"] = fresh.vacuumFiles(retentionHours=0, enforceRetentionDuration=False, dryRun=True)
    return out
