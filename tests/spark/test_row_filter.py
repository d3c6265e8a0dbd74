"""Filters evaluated inside the read tasks (lance_ops.spark.rowfilter and
the pushed-filter prefilter of the ``lance`` source): the same rows as Spark's
own filter, with the feature on and off, over edge values (ints at their
limits, NaN / +-0 / +-inf, unicode and empty strings, dates, timestamps,
nulls) and deleted rows; and fewer rows crossing into the JVM when on (the
scan trace counts what the tasks returned)."""
from __future__ import annotations

import math
import shutil

import lance
import pytest

import lance_ops
from lance_ops import LanceTable
from lance_ops.ops.read import SCAN_TRACE_CONF
from lance_ops.spark.arrowtasks import CONF
from lance_ops.spark.datasource import read_scan_trace, register

from .test_arrow_eval import COLUMNS, _error_class, gen_table

#: (condition, in the Arrow subset)
CONDITIONS = [
    ("i32 % 7 = 1", True),
    ("NOT (f64 < 1.0)", True),  # (NaN is above every double in Spark: kept)
    ("f64 = double('NaN')", False),  # (a cast from a string literal: outside the subset)
    ("f64 <=> -0.0", True),
    ("f32 < 0 AND s >= 'a'", True),
    ("i64 BETWEEN -42 AND 2147483648 OR i8 IS NULL", True),
    ("NOT (d < DATE'1970-01-01') AND b", True),
    ("ts > TIMESTAMP'1970-01-01 00:00:00'", True),
    ("i8 + 1 > 0", True),
    ("reverse(s) = 'A' OR i32 > 0", False),  # (a function outside the subset: Spark alone)
]


def _norm(rows):
    fix = lambda v: "NaN" if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
    return sorted((tuple(fix(v) for v in r) for r in rows), key=repr)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("row_filter") / "t.lance")
    lance.write_dataset(gen_table(11), path, max_rows_per_file=80, enable_stable_row_ids=True)
    lance.dataset(path).delete("rid % 5 = 0")  # deleted rows must stay deleted
    return path


def _with(spark, conf: dict, fn):
    # (restore, not unset: unset returns a conf the session was built with
    # -- filter pushdown -- to Spark's default, for every later test)
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        return fn()
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _traced(spark, tmp_path, name, fn, on: bool):
    """(fn()'s rows, rows the scan tasks sent) with the Arrow switch ``on``."""
    d = str(tmp_path / name)
    shutil.rmtree(d, ignore_errors=True)
    rows = _with(spark, {SCAN_TRACE_CONF: d, CONF: str(on).lower()}, fn)
    return rows, sum(r["rows"] for r in read_scan_trace(d))


@pytest.mark.parametrize("cond,subset", CONDITIONS)
def test_row_filter_on_off_and_spark(spark, table, tmp_path, cond, subset):
    cols = ["rid", *COLUMNS]
    t = LanceTable(spark, table)
    spark_rows = _norm(t.toDF().where(cond).select(*cols).collect())  # Spark's own filter
    assert spark_rows  # (a condition selecting nothing would prove little)
    assert all(r[0] % 5 for r in spark_rows)
    on, sent_on = _traced(spark, tmp_path, "on", lambda: t.toDF(filter=cond).select(*cols).collect(), True)
    off, sent_off = _traced(spark, tmp_path, "off", lambda: t.toDF(filter=cond).select(*cols).collect(), False)
    assert _norm(on) == _norm(off) == spark_rows
    # (off, the tasks still apply the filters Spark pushes: comparisons of a
    # column with a literal, IS NOT NULL; arithmetic is never pushed)
    if subset:
        assert sent_on == len(spark_rows) <= sent_off  # only matching rows crossed into the JVM
        if "%" in cond or "+" in cond:
            assert sent_on < sent_off
    else:
        assert sent_on == sent_off
    # lance_ops.sql: the WHERE of a single-table query reaches the scan
    q = f"SELECT x.rid FROM lance.`{table}` AS x WHERE x.rid >= 0 AND ({cond})"
    sql_on, sql_sent = _traced(spark, tmp_path, "sql", lambda: lance_ops.sql(spark, q).collect(), True)
    assert sorted(r[0] for r in sql_on) == sorted(r[0] for r in spark_rows)
    assert sql_sent == len(spark_rows) if subset else sql_sent >= len(spark_rows)


def test_row_filter_keeps_ansi_error_rows(spark, table):
    """A row where the condition raises in ANSI mode reaches Spark, which
    raises its own error -- on and off alike."""
    t = LanceTable(spark, table)
    errors = []
    for on in ("true", "false"):
        with pytest.raises(Exception) as info:
            _with(spark, {CONF: on, "spark.sql.ansi.enabled": "true"},
                  lambda: t.toDF(filter="i32 + 2147483647 > 0").collect())
        errors.append(_error_class(info.value))
    assert errors[0] == errors[1] == "ARITHMETIC_OVERFLOW"


def test_pushed_filters_prefilter_in_tasks(spark, table, tmp_path):
    """Filters Spark pushes (here on a double and a timestamp column, which
    the data source's own row filter leaves alone) drop rows in the tasks,
    exactly as Spark's filter does."""
    cond = "f64 > 0.0 AND ts > TIMESTAMP'1970-01-01 00:00:00'"
    t = LanceTable(spark, table)
    expected = _norm(t.toDF().where(cond).select("rid").collect())

    trace = str(tmp_path / "pushed")

    def read():
        return spark.read.format("lance").option("scanTrace", trace).load(table).where(cond).select("rid").collect()

    rows = read()
    assert _norm(rows) == expected and expected
    sent = sum(r["rows"] for r in read_scan_trace(trace))
    assert sent == len(expected) < lance.dataset(table).count_rows()
    try:
        rows_off = _with(spark, {"spark.sql.python.filterPushdown.enabled": "false"},
                         lambda: (register(spark), read())[1])
    finally:
        register(spark)  # (the session's default again: pushdown on)
    assert _norm(rows_off) == expected
