"""CHECK constraints on appends evaluated with Arrow inside the writing tasks
(no check columns computed by Spark): the same outcome as Spark's evaluation
-- the rows committed, or the same constraint named with the same row --
over random batches with NULLs, strings and columns an append leaves out; a
row where Spark raises (ANSI) makes the write run again on Spark, which
raises its own error; nothing is committed by a refused append."""
import random

import lance
import pytest

import lance_ops.ops.write as write_ops
from lance_ops import LanceTable
from lance_ops.errors import ConstraintViolationError

CONF = "spark.lance_ops.arrowEval.enabled"
SCHEMA = "id long, v double, name string, k int"
CHECKS = {
    "v_positive_or_null": "v IS NULL OR v > 0",
    "short_name": "length(name) < 6",
    "k_known": "k IN (0, 1, 2) OR k IS NULL",
}


@pytest.fixture
def arrow_seen(monkeypatch):
    """The driver's choice for each append: Arrow trees or Spark columns."""
    seen = []
    real = write_ops.arrow_checks

    def spy(*a, **kw):
        out = real(*a, **kw)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(write_ops, "arrow_checks", spy)
    return seen


def _rows(rng, n, clean):
    """Random rows; ``clean``: none breaks a check (NaN > 0 holds in Spark,
    NULLs where a check allows them), else a few do."""
    names = ["a", "bb", "ccc", "dddd", "eeeee", "ünï"] + ([] if clean else [None, "ffffff"])
    vs = [None, 1.0, 2.5, float("nan")] + ([] if clean else [0.0, -1.0])
    ks = [None, 0, 1, 2] + ([] if clean else [3])
    out = []
    for i in range(n):
        v = rng.choice(vs) if rng.random() < 0.1 else rng.uniform(0.1, 9)
        name = rng.choice(names) if rng.random() < 0.2 else "ok"
        k = rng.choice(ks) if rng.random() < 0.1 else 1
        out.append((i, v, name, k))
    return out


def _outcome(spark, path, rows, arrow: bool, missing: bool = False):
    spark.conf.set(CONF, str(arrow).lower())
    try:
        t = LanceTable(spark, path)
        before = lance.dataset(path).version
        df = spark.createDataFrame(rows, SCHEMA).repartition(2)
        if missing:
            df = df.drop("k")
        try:
            t.append(df, allowMissingColumns=missing)
        except ConstraintViolationError as e:
            assert lance.dataset(path).version == before  # refused: nothing committed
            return ("refused", e.constraint, e.expression)
        return ("ok", sorted(repr(r) for r in lance.dataset(path).to_table().to_pylist()))  # repr: NaN == NaN
    finally:
        spark.conf.unset(CONF)


def _table(spark, path):
    t = LanceTable.create(spark, path, spark.createDataFrame([(0, 1.0, "x", 0)], SCHEMA))
    for name, expr in CHECKS.items():
        t.addConstraint(name, expr)
    return path


@pytest.mark.parametrize("seed", range(6))
def test_arrow_checked_append_equals_spark_checked(spark, tmp_path, arrow_seen, seed):
    rng = random.Random(seed)
    rows = _rows(rng, 60, clean=seed % 2 == 0)
    missing = seed % 3 == 2  # k left out: NULL for the checks, which allow it
    results = []
    for arrow in (True, False):
        path = _table(spark, str(tmp_path / f"t{arrow}.lance"))
        results.append(_outcome(spark, path, rows, arrow, missing))
    assert arrow_seen == [True, False]  # the Arrow path was taken, then not
    a, s = results
    assert a[0] == s[0] == ("ok" if seed % 2 == 0 else "refused")
    if a[0] == "ok":
        assert a == s  # the same rows committed
    else:  # both refused, naming a constraint some row breaks (tasks may fail in either order)
        assert a[1] in CHECKS and s[1] in CHECKS


def test_arrow_checked_append_accepts_and_refuses(spark, tmp_path, arrow_seen):
    path = _table(spark, str(tmp_path / "t.lance"))
    assert _outcome(spark, path, [(1, 2.0, "ab", 1), (2, None, "abc", None)], True)[0] == "ok"
    assert _outcome(spark, path, [(3, 2.0, "abcdefg", 1)], True) == ("refused", "short_name", "length(name) < 6")
    assert _outcome(spark, path, [(4, -2.0, "a", 1)], True)[1] == "v_positive_or_null"
    assert _outcome(spark, path, [(5, 1.0, None, 1)], True)[1] == "short_name"  # NULL: not satisfied (Delta)
    assert arrow_seen == [True] * 4
    assert lance.dataset(path).count_rows() == 3


def test_ansi_error_row_reruns_on_spark(spark, tmp_path, arrow_seen):
    """CAST('abc' AS INT) raises under ANSI: the Arrow tasks hand the write
    back to Spark, whose error the user sees; nothing is committed."""
    path = str(tmp_path / "a.lance")
    t = LanceTable.create(spark, path, spark.createDataFrame([(0, 1.0, "1", 0)], SCHEMA))
    t.addConstraint("numeric_name", "CAST(name AS INT) >= 0")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception) as e:
            _outcome(spark, path, [(1, 1.0, "12", 1), (2, 1.0, "abc", 1)], True)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert "CAST_INVALID_INPUT" in str(e.value)
    assert lance.dataset(path).version == 2 and lance.dataset(path).count_rows() == 1
