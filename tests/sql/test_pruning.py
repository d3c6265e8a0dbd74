"""Column pruning of queries, proven by what each scan task opened (the scan
trace written by the ``lance`` data source), not by timing; results equal
Spark's over the full table."""
import pytest

import lance_ops
from lance_ops import LanceTable
from lance_ops.spark.datasource import read_scan_trace


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("pruning")
    a, b = str(root / "a.lance"), str(root / "b.lance")
    LanceTable.create(spark, a, spark.range(200).selectExpr(
        "id", "id % 5 AS k", "id * 1.5 AS x", "concat('s', id) AS s", "named_struct('p', id, 'q', 'z') AS st"),
        maxRowsPerFragment=50)
    LanceTable.create(spark, b, spark.range(5).selectExpr("id AS k", "concat('label', id) AS label", "id * 10 AS w"))
    return a, b


@pytest.fixture
def trace(spark, tmp_path):
    d = str(tmp_path / "trace")
    spark.conf.set("spark.lance_ops.scanTrace", d)
    yield lambda: read_scan_trace(d)
    spark.conf.unset("spark.lance_ops.scanTrace")


def opened(records, path):
    """{(columns, metadata)} the tasks that scanned ``path`` opened."""
    return {(tuple(r["columns"]), tuple(r["metadata"])) for r in records if r["path"].rstrip("/").endswith(path.rsplit("/", 1)[-1])}


def same_rows(spark, ours, text):
    assert sorted(map(tuple, ours.collect())) == sorted(map(tuple, spark.sql(text).collect()))


def full_views(spark, a, b):
    LanceTable(spark, a).toDF().createOrReplaceTempView("full_a")
    LanceTable(spark, b).toDF().createOrReplaceTempView("full_b")


@pytest.mark.parametrize(
    "query, expect_a, expect_b",
    [
        ("SELECT sum(x) FROM {A} WHERE k = 2", {(("k", "x"), ())}, None),
        ("SELECT a.s, b.label FROM {A} a JOIN {B} b ON a.k = b.k WHERE a.id < 20",
         {(("id", "k", "s"), ())}, {(("k", "label"), ())}),
        ("WITH c AS (SELECT id, x FROM {A}) SELECT count(*), max(x) FROM c WHERE id > 100", {(("id", "x"), ())}, None),
        ("SELECT count(*) FROM {A}", {((), ("_rowaddr",))}, None),
        ("SELECT st.p FROM {A} WHERE st.q = 'z' AND id = 3", {(("id", "st"), ())}, None),
        ("SELECT id, _rowid FROM {A} WHERE id IN (SELECT k FROM {B} WHERE w > 10)",
         {(("id",), ("_rowid",))}, {(("k", "w"), ())}),
        ("SELECT k, (SELECT max(w) FROM {B} b WHERE b.k = a.k) AS m FROM {A} a", {(("k",), ())}, {(("k", "w"), ())}),
        ("SELECT * FROM {B}", None, {(("k", "label", "w"), ())}),
    ],
    ids=["filtered-sum", "join", "cte", "count-star", "struct-field", "metadata-and-in-subquery",
         "correlated-subquery", "star"],
)
def test_each_scan_reads_only_the_columns_the_query_uses(spark, tables, trace, query, expect_a, expect_b):
    a, b = tables
    df = lance_ops.sql(spark, query.format(A=f"lance.`{a}`", B=f"lance.`{b}`"))
    rows = df.collect()
    records = trace()
    assert records, "no scan task wrote its trace"
    if expect_a is not None:
        assert opened(records, a) == expect_a
    if expect_b is not None:
        assert opened(records, b) == expect_b
    if "_rowid" not in query:
        full_views(spark, a, b)
        expected = spark.sql(query.format(A="full_a", B="full_b")).collect()
        assert sorted(map(tuple, rows)) == sorted(map(tuple, expected))


def test_filters_are_pushed_into_the_pruned_scan(spark, tables, trace):
    a, _ = tables
    n = lance_ops.sql(spark, f"SELECT count(x) FROM lance.`{a}` WHERE k = 2 AND s LIKE 's1%'").head()[0]
    assert n == len([i for i in range(200) if i % 5 == 2 and str(i).startswith("1")])
    records = [r for r in trace() if r["rows"] or r["filters"]]
    assert records and all(tuple(r["columns"]) == ("k", "x", "s") for r in records)
    # the data source dropped non-matching rows in the executor (Spark re-checks them)
    assert all(any("EqualTo" in f for f in r["filters"]) for r in records)
    assert sum(r["rows"] for r in records) <= 40


def test_registered_names_and_time_travel_are_pruned_too(spark, tables, trace):
    a, _ = tables
    lance_ops.sql(spark, f"CREATE TABLE pruned_a USING lance LOCATION '{a}'")
    lance_ops.sql(spark, "SELECT max(x) FROM pruned_a").collect()
    lance_ops.sql(spark, "SELECT max(s) FROM pruned_a VERSION AS OF 1").collect()
    records = trace()
    assert {tuple(r["columns"]) for r in records} == {("x",), ("s",)}
    assert {r["version"] for r in records} == {1}
