"""The jobs CLI (``python -m jobs``): JSON summary, exit codes 0/1/2,
table lists, feature functions as module:function, dry runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops import LanceTable
from lance_ops.cli.jobs import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def triple(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A feature function for --function tests.test_jobs:triple."""
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
    assert code == 0 and all(t["featureStatus"]["g"]["pending"] for t in out["tables"])
    assert all(lance.dataset(p).version == out["tables"][i]["versionBefore"] for i, p in enumerate(paths))
    code, out = _run(capsys, "backfill", "--tables", str(listing), "--function", "tests.spark.test_jobs:triple",
                     "--read-columns", "f0", "--output-schema", "g double", "--fragments-per-commit", "1",
                     "--property", "job=nightly")
    assert code == 0, out
    for p, rep in zip(paths, out["tables"]):
        assert rep["status"] == "done" and rep["metrics"]["numBackfilledRows"] == 10
        g = lance.dataset(p).to_table(columns=["id", "g"]).sort_by("id").column("g").to_pylist()
        assert g == [3.0 * i for i in range(30)]
        assert LanceTable(spark, p).history(1).collect()[0]["userMetadata"] == {"job": "nightly"}
    # nothing left: exit 2
    code, out = _run(capsys, "backfill", "--table", paths[0], "--sql", "g=f0 * 3")
    assert code == 2 and out["tables"][0]["status"] == "nothing to do"


def test_maintain_validate_and_failures(spark, tmp_path, capsys):
    p = _tables(spark, tmp_path, 1)[0]
    code, out = _run(capsys, "health", "--table", p)
    assert code == 0 and out["tables"][0]["health"]["numFragments"] == 6
    code, out = _run(capsys, "maintain", "--table", p, "--small-fragment-rows", "100", "--retention-hours", "0",
                     "--no-retention-check")
    rep = out["tables"][0]
    assert code == 0 and rep["plan"]["compact"] and rep["compaction"]["version"] is not None
    assert len(lance.dataset(p).get_fragments()) < 6
    code, out = _run(capsys, "maintain", "--table", p, "--small-fragment-rows", "1")
    assert code == 2  # healthy now: nothing to do
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "f0", "min_value": 0, "max_value": 25}}]}))
    code, out = _run(capsys, "validate", "--table", p, "--expectations", str(suite), "--where", "id < 20")
    assert code == 0 and out["tables"][0]["validation"]["success"]
    code, out = _run(capsys, "validate", "--table", p, "--expectations", str(suite))
    assert code == 1 and out["tables"][0]["validation"]["unsuccessful"] == 1
    code, out = _run(capsys, "compact", "--table", str(tmp_path / "missing.lance"))
    assert code == 1 and "TableNotFoundError" in out["tables"][0]["error"]


def test_python_m_jobs_entry_point(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "jobs", "--help"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "backfill" in r.stdout and "maintain" in r.stdout
    # the file entry point spark-submit runs, on a table without Spark work (health)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "jobs", "__main__.py"), "health", "--table",
                        str(tmp_path / "none.lance")], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and json.loads(r.stdout)["tables"][0]["status"] == "failed"
