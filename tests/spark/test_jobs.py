"""The jobs (``lance-ops COMMAND``, :mod:`lance_ops.jobs`) that run Spark
work, called in process with the test session: JSON summary, exit codes 0
(done / noop) / 1 (failed), table lists, feature functions as
module:function, dry runs without Spark, backfill of NULL rows and the
``validate`` gate of a feature (NULL rows in the window fail it)."""
from __future__ import annotations

import json

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops import LanceTable
from lance_ops.jobs import main


def triple(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A feature function for --function tests.spark.test_jobs:triple."""
    return pa.RecordBatch.from_arrays([pc.multiply(batch.column("f0"), 3)], names=["g"])


def _run(capsys, *argv):
    code = main(list(argv) + ["--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert out["exitCode"] == code
    return code, out


def _tables(spark, tmp_path, n=2):
    paths = []
    for k in range(n):
        p = str(tmp_path / f"t{k}.lance")
        df = spark.createDataFrame([(i, float(i)) for i in range(20)], "id long, f0 double").repartition(2)
        t = LanceTable.create(spark, p, df, maxRowsPerFragment=5)
        t.addColumns({"g": "f0 * 3"})
        t.append(spark.createDataFrame([(i, float(i)) for i in range(20, 30)], "id long, f0 double"),
                 allowMissingColumns=True)
        paths.append(p)
    return paths


def test_backfill_job_over_a_table_list(spark, tmp_path, capsys):
    paths = _tables(spark, tmp_path)
    listing = tmp_path / "tables.yaml"
    listing.write_text("tables:\n" + "".join(f"  - uri: {p}\n" for p in paths))
    code, out = _run(capsys, "backfill", "--tables", str(listing), "--dry-run",
                     "--function", "tests.spark.test_jobs:triple", "--read-columns", "f0", "--output-schema", "g double")
    assert code == 0 and out["status"] == "done" and all(t["featureStatus"]["g"]["pending"] for t in out["tables"])
    assert all(lance.dataset(p).version == out["tables"][i]["versionBefore"] for i, p in enumerate(paths))
    code, out = _run(capsys, "backfill", "--tables", str(listing), "--function", "tests.spark.test_jobs:triple",
                     "--read-columns", "f0", "--output-schema", "g double", "--fragments-per-commit", "1",
                     "--property", "job=nightly")
    assert code == 0 and out["status"] == "done", out
    for p, rep in zip(paths, out["tables"]):
        assert rep["status"] == "done" and rep["metrics"]["numBackfilledRows"] == 10
        g = lance.dataset(p).to_table(columns=["id", "g"]).sort_by("id").column("g").to_pylist()
        assert g == [3.0 * i for i in range(30)]
        assert LanceTable(spark, p).history(1).collect()[0]["userMetadata"] == {"job": "nightly"}
    # nothing left: exit 0, "noop", no new version
    version = lance.dataset(paths[0]).version
    code, out = _run(capsys, "backfill", "--table", paths[0], "--sql", "g=f0 * 3")
    assert code == 0 and out["status"] == "noop" == out["tables"][0]["status"]
    assert lance.dataset(paths[0]).version == version == out["tables"][0]["versionAfter"]


def test_backfill_fills_null_rows_only_when_asked_and_validate_sees_them(spark, tmp_path, capsys):
    """Rows appended with the feature column explicitly NULL: a plain
    backfill leaves them (the fragment has the column's file);
    ``validate --feature`` fails on them and keeps the watermark; ``--fill-nulls``
    fills exactly them (pylance reads the values), a second run writes
    nothing, and validate passes and moves the watermark."""
    p = _tables(spark, tmp_path, 1)[0]
    code, out = _run(capsys, "backfill", "--table", p, "--sql", "g=f0 * 3")
    assert code == 0 and out["tables"][0]["metrics"]["numBackfilledRows"] == 10
    mark = int(lance.dataset(p).config()["lance_ops.feature.g.version"])
    # new rows: g given, but NULL for some (a writer that did not compute it)
    LanceTable(spark, p).append(spark.createDataFrame(
        [(i, float(i), None if i % 2 else 3.0 * i) for i in range(30, 40)], "id long, f0 double, g double"))
    LanceTable(spark, p).append(spark.createDataFrame([(40, None, None)], "id long, f0 double, g double"))
    # (as the DAG runs it: the watermark moves only after validate passed)
    code, out = _run(capsys, "backfill", "--table", p, "--sql", "g=f0 * 3", "--no-watermark")
    assert code == 0 and out["status"] == "noop"  # every fragment has g's file: nothing to fill without --fill-nulls
    code, out = _run(capsys, "validate", "--table", p, "--feature", "g")
    rep = out["tables"][0]
    assert code == 1 and rep["status"] == "failed" and rep["nullRows"] == {"g": 6}  # 5 odd ids + id 40
    assert rep["watermark"] == mark and rep["rowsChecked"] == 11  # only the rows created after the watermark
    assert lance.dataset(p).config()["lance_ops.feature.g.version"] == str(mark)
    before = {r["id"]: r for r in lance.dataset(p).to_table(columns=["id", "g"], with_row_id=True).to_pylist()}
    code, out = _run(capsys, "backfill", "--table", p, "--sql", "g=f0 * 3", "--fill-nulls", "--no-watermark")
    rep = out["tables"][0]
    assert code == 0 and rep["metrics"]["numBackfilledRows"] == 5 and rep["operation"] == "Update"
    after = {r["id"]: r for r in lance.dataset(p).to_table(columns=["id", "g"], with_row_id=True).to_pylist()}
    assert {i: r["g"] for i, r in after.items()} == {**{i: 3.0 * i for i in range(40)}, 40: None}
    assert all(after[i]["_rowid"] == before[i]["_rowid"] for i in after)
    version = lance.dataset(p).version
    code, out = _run(capsys, "backfill", "--table", p, "--sql", "g=f0 * 3", "--fill-nulls", "--no-watermark")
    assert code == 0 and out["status"] == "noop" and lance.dataset(p).version == version  # f0 NULL: g stays NULL
    code, out = _run(capsys, "validate", "--table", p, "--feature", "g", "--where", "f0 IS NOT NULL",
                     "--advance-watermark")
    rep = out["tables"][0]
    assert code == 0 and rep["success"] and rep["nullRows"] == {"g": 0} and rep["rowsChecked"] == 10
    new_mark = int(lance.dataset(p).config()["lance_ops.feature.g.version"])
    assert new_mark == rep["throughDataVersion"] > mark and rep["watermarkCommitted"] == lance.dataset(p).version


def test_maintain_validate_and_failures(spark, tmp_path, capsys):
    p = _tables(spark, tmp_path, 1)[0]
    code, out = _run(capsys, "maintain", "--table", p, "--small-fragment-rows", "100", "--dry-run")
    assert code == 0 and out["sparkStarted"] is False and out["tables"][0]["plan"]["compact"]
    code, out = _run(capsys, "maintain", "--table", p, "--small-fragment-rows", "100", "--retention-hours", "0",
                     "--no-retention-check")
    rep = out["tables"][0]
    assert code == 0 and rep["plan"]["compact"] and rep["compaction"]["version"] is not None
    assert len(lance.dataset(p).get_fragments()) < 6
    code, out = _run(capsys, "maintain", "--table", p, "--small-fragment-rows", "1")
    assert code == 0 and out["status"] == "noop"  # healthy now: nothing to do
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "f0", "min_value": 0, "max_value": 25}}]}))
    code, out = _run(capsys, "validate", "--table", p, "--expectations", str(suite), "--where", "id < 20")
    assert code == 0 and out["tables"][0]["validation"]["success"]
    code, out = _run(capsys, "validate", "--table", p, "--expectations", str(suite))
    assert code == 1 and out["tables"][0]["validation"]["unsuccessful"] == 1
    # CHECK constraints are checked on the rows (a writer that bypassed them: pylance)
    LanceTable(spark, p).addConstraint("small_id", "id < 100")
    lance.write_dataset(pa.table({"id": pa.array([500], pa.int64()), "f0": [1.0], "g": [3.0]}), p, mode="append")
    code, out = _run(capsys, "validate", "--table", p)
    assert code == 1 and out["tables"][0]["constraints"] == {"small_id": 1}
    code, out = _run(capsys, "compact", "--table", str(tmp_path / "missing.lance"))
    assert code == 1 and "TableNotFoundError" in out["tables"][0]["error"] and out["sparkStarted"] is False
