"""The Connect path of plan inspection (EXPLAIN text, lance_ops.spark.plans)
agrees with the classic one (Catalyst's plan objects, lance_ops.spark.jvm)
on the same frames -- checked on the classic session, where both exist."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from lance_ops.spark import jvm, plans
from lance_ops.spark.frames import as_column

EXPRS = [
    ["x > 5"], ["x + y > 5", "s"], ["y * 2"], ["id IS NULL OR s = 'a'"], ["upper(s)", "x"],
    ["CASE WHEN x > 1 THEN y ELSE 0 END"], ["1"], ["coalesce(x, 0) AS x"], ["named_struct('a', x).a"],
    ["`we ird` + 1"], ["x_y + 1"],
]


@pytest.mark.parametrize("exprs", EXPRS, ids=[str(e) for e in EXPRS])
def test_referenced_columns_explain_matches_catalyst(spark, exprs):
    frame = spark.createDataFrame([], "id long, x long, y long, s string, x_y long, `we ird` long")
    projected = frame.select(*[as_column(e) for e in exprs])
    catalyst = sorted({n for _, n in jvm.analyzed_references(projected)})
    text = plans.project_references(plans.explain_sections(projected)["Analyzed Logical Plan"], frame.columns)
    assert text is not None and sorted(text) == catalyst


def test_keeps_partitions_explain_matches_executed_plan(spark):
    base = spark.range(0, 10, 1, 2).selectExpr("id", "id * 2 AS x")
    other = spark.range(0, 5).selectExpr("id AS k", "id AS v")
    frames = [
        base.where("x > 3"),
        base.join(F.broadcast(other), base.id == other.k, "left"),
        base.repartition(3),
        base.orderBy("x"),
        base.groupBy("x").count(),
    ]
    got = [plans.keeps_partitions(plans.explain_sections(f)["Physical Plan"]) for f in frames]
    want = [plans.keeps_partitions(jvm.executed_plan(f)) for f in frames]
    assert got == want == [True, True, False, False, False]


def test_unreadable_plan_text_means_unknown():
    assert plans.project_references("a: int\nAggregate [x#1], [x#1]\n", ["x"]) is None
    assert plans.project_references("a: int\nProject [a#1, ... 30 more fields]\n", ["a"]) is None


MERGE_EXPRS = [
    ["t.id = s.id"], ["t.id = s.id", "t.x + s.x"], ["t.id = s.id AND t.y > 0", "s.y"], ["s.x + 1"],
    ["t.id = s.id", "coalesce(t.s, s.s)"],
]


@pytest.mark.parametrize("exprs", MERGE_EXPRS, ids=[str(e) for e in MERGE_EXPRS])
def test_merge_target_columns_explain_matches_catalyst(spark, exprs):
    """What a merge reads of the target (expression ids of the aliased
    target inside the join): the EXPLAIN text gives Catalyst's answer."""
    from lance_ops.spark.frames import output_attributes, referenced_attributes

    t = spark.createDataFrame([], "id long, x long, y long, s string").alias("t")
    s = spark.createDataFrame([], "id long, x long, y long, s string").alias("s")
    joined = t.join(s, as_column("t.id = s.id"), "fullouter")
    ids = referenced_attributes(joined, exprs)
    out = output_attributes(t)
    catalyst = {out[i] for i in ids if i in out}
    analyzed = plans.explain_sections(joined.select(*[as_column(e) for e in exprs]))["Analyzed Logical Plan"]
    text_ids, text_out = plans.project_reference_ids(analyzed), plans.aliased_relation_output(analyzed, "t")
    assert text_ids is not None and text_out is not None
    assert {text_out[i] for i in text_ids if i in text_out} == catalyst


def test_explain_text_is_captured_per_thread(spark, capsys):
    """Two threads explaining at once (a merge explains its source on a
    second thread while the first explains its clauses, under Spark Connect)
    each get their own plan's text, and a third thread's prints still reach
    stdout."""
    import threading

    frames = {name: spark.createDataFrame([], f"{name} long").selectExpr(f"{name} + 1 AS {name}_out")
              for name in ("alpha_col", "beta_col")}
    wrong: list[str] = []
    stop = threading.Event()

    def explain_many(name):
        for _ in range(15):
            text = plans.explain_sections(frames[name]).get("Analyzed Logical Plan", "")
            other = next(n for n in frames if n != name)
            if f"{name}_out" not in text or other in text:
                wrong.append(name)

    def chatter():
        while not stop.is_set():
            print("chatter-line")
            stop.wait(0.001)

    talker = threading.Thread(target=chatter)
    talker.start()
    threads = [threading.Thread(target=explain_many, args=(n,)) for n in frames]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    talker.join()
    assert not wrong
    out = capsys.readouterr().out
    assert "chatter-line" in out and "Analyzed Logical Plan" not in out
