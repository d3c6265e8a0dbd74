"""Faults at commit time on S3 (moto behind a fault-injecting proxy of our
own, tests/servers/fault_proxy.py): a manifest PUT applied by the store
whose answer is lost, transport errors, throttling and delays on every kind
of request -- for every operation, through Spark and without it, on the
conditional-put store and the external stores. Every acknowledged change is
in the table exactly once, unknown outcomes are raised as such and resolve,
no version names a missing file, and pylance reads every version."""
from __future__ import annotations

import lance
import pytest
from pyspark.sql import functions as F

from lance_ops import LanceTable
from lance_ops.storage import commit as handlers
from lance_ops.txn.table import Table
from tests.objectstores import workload as wl

LOST = [["s3.MANIFEST", "lost"]]


def pylance_reads_every_version(uri, opts) -> dict[int, list[dict]]:
    """Every version read whole by pylance (a missing data or deletion file
    fails here), rows sorted by id."""
    out = {}
    ds = lance.dataset(uri, storage_options=opts)
    for v in ds.versions():
        t = lance.dataset(uri, storage_options=opts, version=v["version"]).to_table()
        out[v["version"]] = sorted(t.to_pylist(), key=lambda r: (r.get("id", 0), str(r)))
    return out


def rows(t: LanceTable) -> list[dict]:
    return sorted((r.asDict() for r in t.toDF().collect()), key=lambda r: (r["id"], str(r)))


@pytest.mark.parametrize("fault", ["lost", pytest.param("applied500", marks=pytest.mark.slow)])
def test_every_operation_survives_a_lost_manifest_answer(spark, faults, tmp_path, fault):
    """Each operation's manifest PUT is applied and its answer lost (or
    answered 500): the operation reports success, made exactly one new
    version (compaction: its reservation and its rewrite), and the table
    holds the change once -- before, an append was stored twice and a
    delete or update re-ran over its own committed version, removing files
    that version names."""
    opts = faults.options()
    uri = f"s3://lance-ops/lost-{fault}-{tmp_path.name}.lance"
    t = LanceTable.create(spark, uri, spark.range(0, 30, numPartitions=3).select("id", (F.col("id") % 4).alias("x")),
                          storage_options=opts)
    model = {i: {"id": i, "x": i % 4} for i in range(30)}

    def step(name, run, change=None, versions=1):
        """Run one operation with its manifest answer lost; ``change(model)``
        is what it must have done to the rows."""
        nonlocal model
        before = Table(uri, opts).version
        faults.set_faults(script=[["s3.MANIFEST", fault]])
        info = run()
        report = faults.faults()
        assert report["injected"].get(f"s3.MANIFEST {fault}") == 1, (name, report)
        after = Table(uri, opts).version
        assert after == before + versions, (name, before, after)
        if hasattr(info, "rebases"):
            assert (info.rebases, info.reruns) == (0, 0), (name, info)
        if change is not None:
            model = change(model)
        got = rows(LanceTable(spark, uri, storage_options=opts))
        assert got == sorted(model.values(), key=lambda r: r["id"]), name

    def upsert(rows_):
        return lambda m: {**m, **{r["id"]: r for r in rows_}}

    step("append", lambda: t.append(spark.range(30, 40).select("id", (F.col("id") % 4).alias("x"))),
         upsert([{"id": i, "x": i % 4} for i in range(30, 40)]))
    step("delete", lambda: t.delete("x = 3"), lambda m: {k: v for k, v in m.items() if v["x"] != 3})
    step("update", lambda: t.update("id < 10", {"x": "x + 100"}),
         lambda m: {**m, **{k: {"id": k, "x": v["x"] + 100} for k, v in m.items() if k < 10}})
    src = spark.range(35, 45).select("id", F.lit(7).cast("long").alias("x"))
    step("merge", lambda: t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(),
         upsert([{"id": i, "x": 7} for i in range(35, 45)]))
    step("addColumns", lambda: t.addColumns({"y": "x * 2"}), lambda m: {k: {**v, "y": v["x"] * 2} for k, v in m.items()})
    step("compaction", lambda: t.optimize().executeCompaction(targetRowsPerFragment=1000))  # one version
    restore_to = Table(uri, opts).version - 2  # before addColumns: no column y
    restored = {r["id"]: r for r in rows(LanceTable(spark, uri, version=restore_to, storage_options=opts))}
    step("restore", lambda: t.restoreToVersion(restore_to), lambda m: restored)
    faults.clear()
    every = pylance_reads_every_version(uri, opts)
    assert len(every) == Table(uri, opts).version


def test_a_lost_answer_of_the_conditional_write_probe_keeps_commits_working(faults, tmp_path, monkeypatch):
    """The probe's first create applied, its answer lost (the retry is
    refused: the object exists): before, read as "this store ignores
    conditions", cached for the process -- every later commit refused."""
    monkeypatch.setattr(handlers, "_CONDITION_PROBES", {})
    opts = faults.options()
    uri = f"s3://lance-ops/probe-{tmp_path.name}.lance"
    faults.set_faults(script=LOST)  # the first conditional PUT is the probe's
    t = wl.create(uri, opts, rows=2)
    assert faults.faults()["injected"] == {"s3.MANIFEST lost": 1}
    assert list(handlers._CONDITION_PROBES.values()) == [True]
    wl.append(t, 1, [0])
    assert Table(uri, opts).version == 2


@pytest.mark.parametrize("kind,script", [
    ("conditional", [["s3.MANIFEST", "lost"]]),
    ("dynamodb", [["ddb.PutItem", "lost"]]),  # the claim applied, its answer lost
    ("dynamodb", [["s3.COPY", "lost"]]),  # the copy to the final name
    ("dynamodb", [["ddb.PutItem", "none"], ["ddb.PutItem", "applied500"]]),  # the flip applied, answered 500
])
def test_lost_answers_at_each_commit_step_commit_once(faults, postgres, tmp_path, kind, script):
    from tests.objectstores.conftest import store_location

    class Through:  # store_location's moto, reached through the proxy
        def options(self, **extra):
            return faults.options(**extra)

    uri, opts = store_location(kind, Through(), postgres, tmp_path, "steps")
    t = wl.create(uri, opts, rows=2)
    faults.set_faults(script=script)
    wl.append(t, 1, [0])
    injected = faults.faults()["injected"]
    faults.clear()
    assert injected, "no fault was injected"
    assert Table(uri, opts).version == 2
    got = sorted((r["writer"], r["seq"]) for r in lance.dataset(uri, storage_options=opts).to_table().to_pylist())
    assert got == [(-1, 0), (-1, 1), (1, 0)]


#: Random faults on every request kind; the manifest PUT (and DynamoDB's
#: claim) lose their answer often.
RATES = {
    "*": {"error": 0.03, "reset": 0.02, "delay": 0.02, "lost": 0.02},
    "s3.MANIFEST": {"lost": 0.25, "applied500": 0.08, "error": 0.05, "reset": 0.03},
    "ddb.PutItem": {"lost": 0.2, "applied500": 0.05, "error": 0.05},
    "s3.COPY": {"lost": 0.1, "error": 0.05},
}


def spark_writer(spark, uri, opts, log: list) -> None:
    """Delete, update, merge and compaction of the rows of writer -1 (the
    rows the table was created with), each recorded with its outcome."""
    from lance_ops.errors import CommitOutcomeUnknownError, LanceOpsError

    ops = [
        ("delete", lambda t: t.delete("writer = -1 AND seq % 5 = 0")),
        ("update", lambda t: t.update("writer = -1 AND seq % 5 = 1", {"seq": "seq + 1000"})),
        ("merge", lambda t: t.merge(spark.range(50, 56).selectExpr("CAST(-1 AS BIGINT) AS writer", "id AS seq"),
                                    "t.writer = s.writer AND t.seq = s.seq").whenNotMatchedInsertAll().execute()),
        ("compaction", lambda t: t.optimize().executeCompaction(targetRowsPerFragment=10_000)),
    ]
    for name, op in ops:
        rec = {"kind": name, "ok": False, "error": None}
        try:
            op(LanceTable(spark, uri, storage_options=opts))
            rec["ok"] = True
        except CommitOutcomeUnknownError as e:
            rec.update(error=type(e).__name__, uuid=e.transaction_uuid, version=e.version)
        except LanceOpsError as e:
            rec.update(error=type(e).__name__, message=str(e)[:300])
        except Exception as e:  # noqa: BLE001 - a foreign error escaping lance_ops: reported
            rec.update(error=type(e).__name__, message=str(e)[:500], unexpected=True)
        log.append(rec)


def check_run(uri, opts, writers: dict, spark_log: list | None, initial: int) -> dict:
    """The invariants of a fault run (faults off): returns a summary."""
    t = Table(uri, opts)
    recs = [r for _rc, rs, _err in writers.values() for r in rs] + (spark_log or [])
    unexpected = [r for r in recs if r.get("unexpected")]
    assert not unexpected, unexpected
    for _w, (rc, _rs, err) in writers.items():
        assert rc == 0, err[-3000:]
    # unknown outcomes resolve, to a version holding that very transaction or to none
    resolved = {}
    for r in recs:
        if r["error"] == "CommitOutcomeUnknownError":
            resolved[r["uuid"]] = t.resolveCommit(r["uuid"], r["version"])
            assert resolved[r["uuid"]] == t.resolveCommit(r["uuid"])
    landed = lambda r: r["ok"] or (r["error"] == "CommitOutcomeUnknownError" and resolved[r["uuid"]] is not None)  # noqa: E731
    # every version reads whole in pylance (no version names a missing file)
    every = pylance_reads_every_version(uri, opts)
    assert sorted(every) == list(range(1, t.version + 1))
    final = [(r["writer"], r["seq"]) for r in every[t.version]]
    # appends: each landed one exactly once, the others not at all
    for w, (_rc, rs, _err) in writers.items():
        expected = sorted((w, r["i"]) for r in rs if r["kind"] == "append" and landed(r))
        assert sorted(k for k in final if k[0] == w) == expected, (w, rs)
    # the rows of writer -1, as the Spark operations that landed left them
    seqs = set(range(initial))
    for r in spark_log or []:
        if not landed(r):
            continue
        if r["kind"] == "delete":
            seqs = {s for s in seqs if not (s < 1000 and s % 5 == 0)}
        elif r["kind"] == "update":
            seqs = {s + 1000 if s < 1000 and s % 5 == 1 else s for s in seqs}
        elif r["kind"] == "merge":
            seqs |= set(range(50, 56))
    assert sorted(s for w, s in final if w == -1) == sorted(seqs)
    assert len(final) == len(set(final))
    outcomes: dict = {}
    for r in recs:
        key = "ok" if r["ok"] else r["error"]
        outcomes[key] = outcomes.get(key, 0) + 1
    return {"versions": t.version, "outcomes": outcomes, "unknown_landed": sum(v is not None for v in resolved.values())}


def fault_run(spark, faults, postgres, tmp_path, kind: str, seed: int, writers: int = 3, commits: int = 8,
              with_spark: bool = True) -> dict:
    import threading

    from tests.objectstores.conftest import run_writers, store_location

    class Through:
        def options(self, **extra):
            return faults.options(**extra)

    uri, opts = store_location(kind, Through(), postgres, tmp_path, f"random-{seed}")
    initial = 20
    wl.create(uri, opts, rows=initial)
    faults.set_faults(seed=seed, rates=RATES)
    extra = ["--appends-only"] + (["--store-faults", str(seed)] if kind in ("sqlite", "postgres") else [])
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(run_writers(uri, opts, [(w, commits, extra) for w in
                                                                           range(1, writers + 1)], timeout=400)))
    th.start()
    spark_log: list = []
    if with_spark:
        spark_writer(spark, uri, opts, spark_log)
    th.join()
    injected = faults.faults()["injected"]
    faults.clear()
    summary = check_run(uri, opts, out, spark_log if with_spark else None, initial)
    summary["faults"] = sum(injected.values())
    assert summary["faults"] > 0, injected
    if kind in ("conditional", "dynamodb"):  # (the SQLite / PostgreSQL claims fail inside the writers)
        assert any(k.startswith(("s3.MANIFEST", "ddb.PutItem")) for k in injected), injected
    print(f"fault run {kind} seed {seed}: {summary}")
    return summary


@pytest.mark.parametrize("kind,with_spark", [("conditional", True), ("dynamodb", False), ("sqlite", False),
                                             ("postgres", False)])
def test_random_faults_with_concurrent_writers(spark, faults, postgres, tmp_path, kind, with_spark, processes):
    """Three writer processes (appends, property updates) and, on the
    stores pylance also commits to, the Spark operations of this process,
    all through the faulty proxy (and, with SQLite / PostgreSQL, a manifest
    store that fails before or after applying requests)."""
    fault_run(spark, faults, postgres, tmp_path, kind, seed=11, commits=6, with_spark=with_spark)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["conditional", "dynamodb", "sqlite", "postgres"])
def test_random_faults_many_seeds(spark, faults, postgres, tmp_path, kind, seed, processes):
    fault_run(spark, faults, postgres, tmp_path, kind, seed=100 + seed, writers=4, commits=12)
