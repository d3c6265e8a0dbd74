"""``lance-ops`` (python -m lance_ops.cli): JSON out, exit codes, no Spark."""
from __future__ import annotations

import json
import subprocess
import sys

import lance
import pyarrow as pa


def cli(*args, env=None):
    out = subprocess.run([sys.executable, "-m", "lance_ops.cli", "--quiet", *args], capture_output=True,
                         text=True, timeout=120, env=env)
    return out.returncode, out.stdout, out.stderr


def test_inspect_and_maintain_without_spark(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), p)
    lance.write_dataset(pa.table({"id": [4]}), p, mode="append")
    code, out, _ = cli("history", p)
    assert code == 0 and [h["version"] for h in json.loads(out)] == [2, 1]
    code, out, _ = cli("detail", p, "--version", "1")
    assert code == 0 and json.loads(out)["numRows"] == 3
    code, out, _ = cli("properties", p, "--set", "owner=ml", "team=x")
    assert code == 0 and json.loads(out) == {"owner": "ml", "team": "x"} == lance.dataset(p).config()
    code, out, _ = cli("tags", p, "--create", "first", "--version", "1")
    assert code == 0 and json.loads(out)["first"]["version"] == 1
    code, out, _ = cli("restore", p, "first")
    assert code == 0 and json.loads(out)["operation"] == "Restore" and lance.dataset(p).count_rows() == 3
    code, out, _ = cli("vacuum", p, "--dry-run")
    assert code == 2 and json.loads(out)["numRemoved"] == 0  # nothing old enough: nothing to do
    code, out, err = cli("vacuum", p, "--retention-hours", "1")
    assert code == 1 and "retentionDurationCheck" in err and out == ""
    code, _, err = cli("history", str(tmp_path / "missing"))
    assert code == 1 and "TableNotFoundError" in err
    # the CLI never imports Spark
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, runpy; sys.argv=['x','--quiet','detail',%r];\n"
         "from lance_ops.cli.table import main; main(); assert 'pyspark' not in sys.modules" % p],
        capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
