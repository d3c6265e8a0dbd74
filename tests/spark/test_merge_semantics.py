"""Merge, measured against Delta's semantics.

1. Scoping, as Delta resolves clauses: MATCHED clauses see target and source,
   NOT MATCHED (insert) clauses the source only, NOT MATCHED BY SOURCE clauses
   the target only. A reference out of scope is Spark's own analysis error,
   for strings and Columns, whatever the strategy, before any job runs; only
   the last clause of a kind may omit its condition.
2. A seeded random differential against delta-rs (deltalake 1.6.6): the same
   merge / update / delete sequence on a Delta table and on a Lance table,
   compared row by row after every step. delta-rs' own deviations from Delta
   are written down in :data:`DELTA_RS_DEVIATIONS` and kept out of the
   generated statements (or compared as such).
"""
from __future__ import annotations

import random

import lance
import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from lance_ops import LanceTable
from lance_ops.errors import DuplicateMatchError, InvalidArgumentError
from lance_ops.ops.merge import DEFAULT_BROADCAST_SOURCE_ROWS
from tests.conftest import CONNECT_MODE

BROADCAST_CONF = "spark.lance_ops.merge.broadcastSourceRows"
SCHEMA = "id long, v long, w string"


@pytest.fixture(params=["broadcast", "shuffle"])
def strategy(request, spark):
    spark.conf.set(BROADCAST_CONF, str(DEFAULT_BROADCAST_SOURCE_ROWS if request.param == "broadcast" else 0))
    yield request.param
    spark.conf.unset(BROADCAST_CONF)


@pytest.fixture
def table(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3], "v": [10, 20, 30], "w": ["a", "b", None]}), p,
                        enable_stable_row_ids=True)
    return p


def src(spark, rows):
    return spark.createDataFrame(rows, SCHEMA)


# ------------------------------------------------------------------ scoping
@pytest.mark.parametrize("as_column", [False, True])
def test_by_source_clause_naming_a_source_column_is_refused(spark, table, strategy, as_column):
    t = LanceTable(spark, table)
    s = src(spark, [(1, 5, "x")])
    v = F.expr("s.v") if as_column else "s.v"
    with pytest.raises(AnalysisException, match="(?i)unresolved|cannot be resolved"):
        t.merge(s, "t.id = s.id").whenNotMatchedBySourceUpdate(set={"v": v}).execute()
    cond = F.expr("s.v IS NULL") if as_column else "s.v IS NULL"
    with pytest.raises(AnalysisException):
        t.merge(s, "t.id = s.id").whenNotMatchedBySourceDelete(cond).execute()
    assert lance.dataset(table).version == 1


@pytest.mark.parametrize("as_column", [False, True])
def test_insert_clause_naming_a_target_column_is_refused(spark, table, strategy, as_column):
    t = LanceTable(spark, table)
    v = F.expr("t.v") if as_column else "t.v"
    with pytest.raises(AnalysisException):
        t.merge(src(spark, [(9, 5, "x")]), "t.id = s.id").whenNotMatchedInsert(
            values={"id": "s.id", "v": v, "w": "s.w"}).execute()
    assert lance.dataset(table).version == 1


def test_bad_sql_is_raised_while_the_source_statistics_job_runs(spark, table):
    """The clauses are analyzed while the source's statistics job runs on a
    second thread: a clause Spark cannot analyze fails the merge at once --
    the statistics job (here: a source whose key takes 60 s per row to
    compute) is cancelled, not awaited -- and no version is written."""
    import time

    from lance_ops.spark import jvm

    @F.udf("long")
    def slow(x):
        import time as _t

        _t.sleep(60)
        return x

    t = LanceTable(spark, table)
    s = src(spark, [(1, 5, "x")]).withColumn("id", slow("id"))
    began = time.monotonic()
    with pytest.raises(AnalysisException, match="(?i)unresolved|cannot be resolved"):
        t.merge(s, "t.id = s.id").whenMatchedUpdate(set={"v": "s.no_such_column"}).execute()
    assert time.monotonic() - began < 45  # (the statistics job alone takes 60 s)
    assert lance.dataset(table).version == 1
    if not jvm.is_connect(spark):
        deadline = time.monotonic() + 30
        while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not spark.sparkContext.statusTracker().getActiveJobsIds()


def test_unqualified_names_resolve_in_the_clause_scope(spark, table, strategy):
    """``v`` alone is the source's in an insert and the target's in a BY SOURCE
    clause (ambiguous only where both are in scope), under both strategies."""
    t = LanceTable(spark, table)
    (t.merge(src(spark, [(1, 5, "x"), (9, 7, "y")]), "t.id = s.id")
     .whenNotMatchedInsert(condition="v > 6", values={"id": "id", "v": "v + 1", "w": "w"})
     .whenNotMatchedBySourceUpdate(condition="v >= 20", set={"v": "v + 100"})
     .execute())
    info = t.lastCommit()
    rows = sorted(lance.dataset(table).to_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "v": 10, "w": "a"}, {"id": 2, "v": 120, "w": "b"}, {"id": 3, "v": 130, "w": None},
                    {"id": 9, "v": 8, "w": "y"}]
    assert (info.metrics["numInsertedRows"], info.metrics["numUpdatedRows"]) == (1, 2)


def test_column_conditions_work_in_every_clause(spark, table, strategy):
    t = LanceTable(spark, table)
    result = (t.merge(src(spark, [(1, 5, "x"), (2, 0, "y")]), F.expr("t.id = s.id"))
              .whenMatchedDelete(condition=F.expr("s.v > 1"))
              .execute())
    assert t.lastCommit().metrics["numDeletedRows"] == 1 == result.first().num_deleted_rows
    assert sorted(lance.dataset(table).to_table()["id"].to_pylist()) == [2, 3]


def test_only_the_last_clause_of_a_kind_may_omit_its_condition(spark, table):
    t = LanceTable(spark, table)
    s = src(spark, [(1, 5, "x")])
    with pytest.raises(InvalidArgumentError, match="only the last MATCHED clause can omit the condition"):
        t.merge(s, "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"}).whenMatchedDelete(condition="s.v > 1").execute()
    with pytest.raises(InvalidArgumentError, match="NOT MATCHED BY SOURCE"):
        t.merge(s, "t.id = s.id").whenNotMatchedBySourceDelete().whenNotMatchedBySourceUpdate(
            condition="t.v > 1", set={"v": "0"}).execute()
    t.merge(s, "t.id = s.id").whenMatchedDelete(condition="s.v > 100").whenMatchedUpdate(set={"v": "s.v"}).execute()
    assert lance.dataset(table).version == 2


# ------------------------------------------------------------ differential
#: Where delta-rs 1.6.6 departs from Delta (as found by this test); the
#: generator avoids the first and third, and compares the second as such (the
#: delta-rs table is restored to the version Delta would have kept).
DELTA_RS_DEVIATIONS = {
    "by-source-duplicate-key": "a merge with NOT MATCHED BY SOURCE clauses and no MATCHED clause writes a "
                               "target row matched by a duplicated source key twice",
    "duplicate-match-delete": "duplicate matches hitting an unconditional DELETE that is not the only MATCHED "
                              "clause are deleted (Delta refuses: DuplicateMatchError)",
    "cross-scope-null": "a clause naming a column out of its scope reads it as NULL (Delta refuses)",
}

MATCHED_CONDS = [None, "s.v > t.v", "t.w IS NULL", "s.w = 'a'", "t.v % 2 = 0", "s.v IS NULL", "t.id > 4"]
MATCHED_SETS = [{"v": "s.v"}, {"w": "s.w"}, {"v": "t.v + 1"}, {"v": "s.v + t.v", "w": "t.w"}, "all"]
INSERT_CONDS = [None, "s.v > 2", "s.w IS NOT NULL", "s.id % 2 = 1"]
INSERT_VALUES = ["all", {"id": "s.id", "v": "s.v * 2"}, {"id": "s.id", "w": "'new'"}]
BYSOURCE_CONDS = [None, "t.v > 5", "t.w = 'b'", "t.id % 3 = 0"]
BYSOURCE_SETS = [{"v": "t.v - 1"}, {"w": "'z'"}]
ROW_CONDS = ["v > 3", "w IS NULL", "id % 2 = 0", "v IS NULL OR v < 5", "w = 'a'", "id BETWEEN 2 AND 6"]
ROW_SETS = [{"v": "v + 1"}, {"w": "'u'"}, {"v": "id * 3", "w": "w"}]


def _clauses(rng, kinds_pool):
    """Clauses of one kind: 1-2 of them, only the last may be unconditional."""
    out = []
    n = rng.choice([1, 1, 2])
    for k in range(n):
        conds, actions = kinds_pool
        cond = rng.choice([c for c in conds if c is not None]) if k < n - 1 else rng.choice(conds)
        out.append((cond, rng.choice(actions)))
    return out


def gen_merge(rng):
    spec = {"matched": [], "not_matched": [], "by_source": []}
    kinds = rng.sample(["matched", "not_matched", "by_source"], rng.choice([1, 2, 2, 3]))
    if "matched" in kinds:
        spec["matched"] = _clauses(rng, (MATCHED_CONDS, MATCHED_SETS + ["delete"]))
    if "not_matched" in kinds:
        spec["not_matched"] = _clauses(rng, (INSERT_CONDS, INSERT_VALUES))
    if "by_source" in kinds:
        spec["by_source"] = _clauses(rng, (BYSOURCE_CONDS, BYSOURCE_SETS + ["delete"]))
    return spec


def gen_source(rng, duplicates: bool):
    keys = rng.sample(range(-1, 12), rng.randint(0, 6)) + ([None] if rng.random() < 0.2 else [])
    if duplicates and keys and keys[0] is not None:
        keys.append(keys[0])
    rows = []
    for k in keys:
        v = None if rng.random() < 0.2 else rng.randint(-3, 12)
        w = rng.choice([None, "a", "b", "c"])
        rows.append((k, v, w))
    return rows


def apply_lance(spark, path, step):
    t = LanceTable(spark, path)
    kind = step[0]
    if kind == "delete":
        return t.delete(step[1])
    if kind == "update":
        return t.update(step[1], step[2])
    _, spec, rows = step
    m = t.merge(spark.createDataFrame(rows, SCHEMA), "t.id = s.id")
    for cond, act in spec["matched"]:
        if act == "delete":
            m = m.whenMatchedDelete(cond)
        elif act == "all":
            m = m.whenMatchedUpdateAll(cond)
        else:
            m = m.whenMatchedUpdate(cond, act)
    for cond, act in spec["not_matched"]:
        m = m.whenNotMatchedInsertAll(cond) if act == "all" else m.whenNotMatchedInsert(cond, act)
    for cond, act in spec["by_source"]:
        m = m.whenNotMatchedBySourceDelete(cond) if act == "delete" else m.whenNotMatchedBySourceUpdate(cond, act)
    return m.execute()


def apply_delta(path, step):
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    kind = step[0]
    if kind == "delete":
        return dt.delete(step[1])
    if kind == "update":
        return dt.update(predicate=step[1], updates=step[2])
    _, spec, rows = step
    source = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "v": pa.array([r[1] for r in rows], pa.int64()),
                       "w": pa.array([r[2] for r in rows], pa.string())})
    m = dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
    every = {"id": "s.id", "v": "s.v", "w": "s.w"}
    for cond, act in spec["matched"]:
        if act == "delete":
            m = m.when_matched_delete(cond)
        else:
            m = m.when_matched_update(every if act == "all" else act, cond)
    for cond, act in spec["not_matched"]:
        m = m.when_not_matched_insert(every if act == "all" else act, cond)
    for cond, act in spec["by_source"]:
        m = m.when_not_matched_by_source_delete(cond) if act == "delete" else m.when_not_matched_by_source_update(act, cond)
    return m.execute()


def rows_of(table: pa.Table):
    key = lambda r: tuple((x is None, x) for x in (r["id"], r["v"], r["w"]))  # noqa: E731
    return sorted(table.select(["id", "v", "w"]).to_pylist(), key=key)


def delta_rows(path):
    from deltalake import DeltaTable

    return rows_of(DeltaTable(path).to_pyarrow_table())


def known_deviation(step) -> str | None:
    """The delta-rs deviation a refused step (DuplicateMatchError) may hit."""
    if step[0] != "merge":
        return None
    spec = step[1]
    if any(a == "delete" and c is None for c, a in spec["matched"]):
        return "duplicate-match-delete"
    return None


def run_differential(spark, tmp_path, seed: int, steps: int):
    from deltalake import DeltaTable, write_deltalake

    rng = random.Random(seed)
    start = pa.table({"id": pa.array([1, 2, 3, 4, 5, 6, None], pa.int64()),
                      "v": pa.array([1, 4, None, 9, 2, 7, 3], pa.int64()),
                      "w": pa.array(["a", None, "b", "c", "a", None, "b"], pa.string())})
    lpath, dpath = str(tmp_path / f"l{seed}.lance"), str(tmp_path / f"d{seed}")
    lance.write_dataset(start, lpath, enable_stable_row_ids=True)
    write_deltalake(dpath, start)
    counts = {"merge": 0, "update": 0, "delete": 0, "refused": 0}
    for i in range(steps):
        r = rng.random()
        if r < 0.55:
            spec = gen_merge(rng)
            # delta-rs writes matched target rows twice for a duplicated source
            # key when no MATCHED clause is given and a BY SOURCE clause is
            # (DELTA_RS_DEVIATIONS["by-source-duplicate-key"]): not generated
            dup_ok = bool(spec["matched"]) or not spec["by_source"]
            step = ("merge", spec, gen_source(rng, duplicates=dup_ok and rng.random() < 0.15))
        elif r < 0.8:
            step = ("update", rng.choice(ROW_CONDS), rng.choice(ROW_SETS))
        else:
            step = ("delete", rng.choice(ROW_CONDS))
        before = DeltaTable(dpath).version()
        try:
            apply_lance(spark, lpath, step)
        except DuplicateMatchError:
            counts["refused"] += 1
            try:
                apply_delta(dpath, step)
            except Exception:
                continue  # both refuse: Delta's semantics
            deviation = known_deviation(step)
            assert deviation, f"seed {seed} step {i}: lance_ops refused, delta-rs committed: {step}"
            DeltaTable(dpath).restore(before)  # put delta-rs back where Delta would have stayed
            continue
        apply_delta(dpath, step)
        counts[step[0]] += 1
        ours, theirs = rows_of(lance.dataset(lpath).to_table()), delta_rows(dpath)
        assert ours == theirs, f"seed {seed} step {i} {step}:\n  lance_ops {ours}\n  delta-rs  {theirs}"
    return counts


def test_random_sequences_match_delta(spark, tmp_path):
    if CONNECT_MODE:
        # (the Connect pass: the first 40 steps of the same sequence -- the
        # Connect paths of every kind of step, in a third of the time)
        counts = run_differential(spark, tmp_path, 1, steps=40)
        assert counts["merge"] >= 10 and counts["update"] + counts["delete"] >= 6, counts
        return
    counts = run_differential(spark, tmp_path, 1, steps=100)
    assert counts["merge"] >= 30 and counts["update"] + counts["delete"] >= 20


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 23))
def test_random_sequences_match_delta_long(spark, tmp_path, seed):
    run_differential(spark, tmp_path, seed, steps=150)
