"""``lance-ops`` metadata commands (history, detail, tags, properties,
restore, vacuum, health and the dry runs), run as users run them: the
console script in a subprocess. One JSON document on stdout, exit codes 0
(done or noop) / 1 (failed) / 2 (usage), CLI words in errors, no JVM and no
pyspark import, a wrong path answered in well under a second."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import lance
import pyarrow as pa

LANCE_OPS = os.path.join(os.path.dirname(sys.executable), "lance-ops")


def cli(*args, env=None):
    t0 = time.monotonic()
    out = subprocess.run([LANCE_OPS, *args, "--quiet"], capture_output=True, text=True, timeout=120, env=env)
    return out.returncode, out.stdout, out.stderr, time.monotonic() - t0


def table_report(stdout: str) -> dict:
    doc = json.loads(stdout)
    assert doc["sparkStarted"] is False and len(doc["tables"]) == 1
    return doc["tables"][0]


def test_metadata_commands_without_spark(tmp_path, processes):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), p)
    lance.write_dataset(pa.table({"id": [4]}), p, mode="append")
    code, out, _, _ = cli("history", "--table", p)
    assert code == 0 and [h["version"] for h in table_report(out)["history"]] == [2, 1]
    code, out, _, _ = cli("history", p, "--limit", "1")  # a bare URI is --table
    assert code == 0 and [h["version"] for h in table_report(out)["history"]] == [2]
    code, out, _, _ = cli("detail", "--table", p, "--version", "1")
    assert code == 0 and table_report(out)["detail"]["numRows"] == 3
    code, out, _, _ = cli("properties", "--table", p, "--set", "owner=ml", "team=x")
    rep = table_report(out)
    assert code == 0 and rep["properties"] == {"owner": "ml", "team": "x"} == lance.dataset(p).config()
    assert rep["status"] == "done" and rep["versionAfter"] == rep["versionBefore"] + 1 == 3
    code, out, _, _ = cli("tags", "--table", p, "--create", "first", "--version", "1")
    assert code == 0 and table_report(out)["tags"]["first"]["version"] == 1
    code, out, _, _ = cli("restore", "--table", p, "--version", "first")
    rep = table_report(out)
    assert code == 0 and rep["operation"] == "Restore" and lance.dataset(p).count_rows() == 3
    code, out, _, _ = cli("health", "--table", p, "--max-versions", "2")
    rep = table_report(out)
    assert code == 0 and rep["health"]["numFragments"] == 1 and rep["plan"]["vacuum"] is True
    # nothing to do is success, said in the JSON
    code, out, _, _ = cli("vacuum", "--table", p, "--dry-run")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "noop" and doc["tables"][0]["removedFiles"] == 0
    code, out, _, _ = cli("compact", "--table", p, "--dry-run")  # one fragment: nothing to compact
    assert code == 0 and json.loads(out)["status"] == "noop" and json.loads(out)["sparkStarted"] is False


def test_failures_usage_errors_and_speed(tmp_path, processes):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), p)
    # usage errors: exit 2, stdout empty, the message in the CLI's words
    code, out, err, _ = cli("vacuum", "--table", p, "--retention-hours", "1")
    assert code == 2 and out == "" and "--no-retention-check" in err and "enforceRetention" not in err
    code, out, err, _ = cli("compact", "--table", p, "--target-rows", "many")
    assert code == 2 and out == "" and "invalid int value" in err
    code, out, err, _ = cli("history")
    assert code == 2 and out == "" and "--table" in err
    code, out, err, _ = cli("frobnicate", "--table", p)
    assert code == 2 and out == "" and "invalid choice" in err
    # a wrong path: exit 1, the summary says why, and no JVM: well under a second
    for command in ("history", "compact", "backfill", "validate"):
        extra = ["--sql", "g=1"] if command == "backfill" else []
        code, out, err, seconds = cli(command, "--table", str(tmp_path / "missing.lance"), *extra)
        doc = json.loads(out)
        assert code == 1 and doc["status"] == "failed" and doc["sparkStarted"] is False, (command, err)
        assert "TableNotFoundError" in doc["tables"][0]["error"]
        assert seconds < 3.0, (command, seconds)  # (< 0.5 s measured; the bound leaves room for a busy CI)
    # one failed table fails the command; the others still run
    code, out, _, _ = cli("history", "--table", p, "--table", str(tmp_path / "missing.lance"))
    doc = json.loads(out)
    assert code == 1 and [t["status"] for t in doc["tables"]] == ["done", "failed"]


def test_metadata_commands_never_import_pyspark(tmp_path, processes):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), p)
    code = (
        "import sys\n"
        "class B:\n"
        "    def find_spec(self, n, p=None, t=None):\n"
        "        if n == 'pyspark' or n.startswith('pyspark.'): raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, B())\n"
        "from lance_ops.jobs import main\n"
        "for argv in (['detail', %r], ['health', %r], ['vacuum', %r, '--dry-run'], ['compact', %r, '--dry-run'],\n"
        "             ['history', %r], ['tags', %r], ['properties', %r]):\n"
        "    assert main(argv + ['--quiet']) == 0, argv\n"
        "assert 'pyspark' not in sys.modules\n"
    ) % ((p,) * 7)
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
