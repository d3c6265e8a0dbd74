"""Every kind of operation through Spark Connect, compared with the same
operations on the classic session and with pylance.

The Connect client runs in a process of its own (a Connect session turns the
whole Python process into Connect mode: pyspark's functions then build
Connect columns, which the classic ``spark`` fixture cannot use); the server
is started by the test session on 127.0.0.1 (``connect_server``). Each
operation runs once per mode -- the classic suites are not re-run."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import lance
import pytest

from tests.connect import scenario

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run_client(python: str, url: str, base: str, env: dict | None = None) -> dict:
    out = os.path.join(base, "result.json")
    os.makedirs(base, exist_ok=True)
    proc = subprocess.run([python, os.path.join(HERE, "client.py"), url, base, out], cwd=ROOT,
                          env=env or dict(os.environ), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"Connect client failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    with open(out) as f:
        return json.load(f)


def _without(metrics: dict, *keys) -> dict:
    return {k: v for k, v in metrics.items() if k not in keys}


def compare(classic: dict, remote: dict, classic_base: str, remote_base: str) -> None:
    assert [s["step"] for s in remote["steps"]] == [s["step"] for s in classic["steps"]]
    for c, r in zip(classic["steps"], remote["steps"]):
        assert (r.get("version"), r.get("readVersion"), r.get("operation")) == \
            (c.get("version"), c.get("readVersion"), c.get("operation")), c["step"]
        # planInspection: it says how the Connect run took its plan-dependent
        # decisions. Everything else is the same -- evaluation too: SQL that
        # classic evaluates with Arrow in the tasks (from the analyzed plan's
        # JSON) Connect evaluates with Arrow as well (from its EXPLAIN text).
        cm, rm = c.get("metrics", {}), r.get("metrics", {})
        assert _without(rm, "planInspection") == _without(cm, "planInspection"), c["step"]
    # the filter Spark keeps for itself dropped rows in the scan's tasks on both
    assert remote["filteredRead"]["sent"] == len(remote["filteredRead"]["rows"]) > 0
    for key in ("read", "filteredRead", "beforeCompaction", "afterCompaction", "final", "count", "version", "history", "vacuumed"):
        assert remote[key] == classic[key], key
    # Executor-side lance_ops errors arrive as themselves, message included.
    for kind in ("constraint", "udf"):
        c, r = classic["errors"][kind], remote["errors"][kind]
        assert r["class"] == c["class"] and r["class"] in ("ConstraintViolationError", "SchemaMismatchError"), (kind, r)
        assert r["module"] == "lance_ops.errors"
        assert r["message"].replace(remote_base, "<base>") == c["message"].replace(classic_base, "<base>")
        assert r["fields"] == c["fields"]
    assert remote["errors"]["sql"]["class"] == classic["errors"]["sql"]["class"] == "AnalysisException"
    # Cancelled by tag (interruptTag through Connect, lance_ops.cancel on classic).
    for side, base in ((classic, classic_base), (remote, remote_base)):
        check_cancelled(side["cancel"], os.path.join(base, "cancel", "c.lance"))
    assert remote["cancel"]["error"] == classic["cancel"]["error"]
    # pylance reads both tables the same (vacuum kept the latest version only).
    cp, rp = os.path.join(classic_base, "t.lance"), os.path.join(remote_base, "t.lance")
    cds, rds = lance.dataset(cp), lance.dataset(rp)
    assert rds.version == cds.version == remote["version"]
    assert [v["version"] for v in rds.versions()] == [v["version"] for v in cds.versions()]
    ct, rt = cds.to_table(), rds.to_table()
    assert rt.schema == ct.schema
    assert sorted(rt.to_pylist(), key=repr) == sorted(ct.to_pylist(), key=repr)
    final = lance.dataset(rp).to_table()
    assert final.num_rows == remote["count"]
    assert sorted([list(r.values()) for r in final.to_pylist()], key=repr) == \
        sorted([[v if v is None or isinstance(v, (int, float)) else str(v) for v in r] for r in remote["final"]], key=repr)


def check_cancelled(c: dict, path: str) -> None:
    """The cancelled addColumns raised a clear error, committed nothing, lost
    nothing; the files it had written are listed by a vacuum dry run and
    referenced by no version."""
    assert c["started"] and c["returned"] and c["secondsToCancel"] < 60, c
    assert c["error"] is not None and c["error"]["class"] == "OperationCancelledError", c["error"]
    assert c["error"]["module"] == "lance_ops.errors" and c["error"]["operation"] == "addColumns"
    assert "was cancelled" in c["error"]["message"] and "nothing was committed" in c["error"]["message"]
    ds = lance.dataset(path)
    assert c["version"] == ds.version == 1 and c["rowsKept"]
    assert ds.schema.names == ["id", "x"] and ds.count_rows() == 100
    referenced = {f"data/{df.path}" for frag in ds.get_fragments() for df in frag.data_files()}
    assert c["orphans"] and all(o.startswith("data/") and o not in referenced for o in c["orphans"]), c["orphans"]
    assert all(os.path.exists(os.path.join(path, o)) for o in c["orphans"])


@pytest.fixture(scope="module")
def classic_run(spark, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("classic"))
    return base, scenario.run(spark, base)


def test_every_operation_through_connect_matches_classic(connect_server, classic_run, tmp_path, processes):
    classic_base, classic = classic_run
    remote_base = str(tmp_path / "connect")
    remote = run_client(sys.executable, connect_server.url, remote_base)
    assert remote["client"]["pyspark"] == classic_pyspark_version()
    compare(classic, remote, classic_base, remote_base)
    timings = {s["step"]: (s["seconds"], r["seconds"]) for s, r in zip(classic["steps"], remote["steps"])}
    print("seconds per step (classic, connect):", json.dumps(timings))
    # What took another path under Connect is reported, not silent.
    how = {s["step"]: s.get("metrics", {}).get("planInspection") for s in remote["steps"]}
    assert how["delete"] == how["update"] == how["addColumns expr"] == "explain"
    evaluated = {s["step"]: s.get("metrics", {}).get("evaluation") for s in remote["steps"]}
    assert evaluated["delete"] == evaluated["update"] == evaluated["addColumns expr"] == "arrow", evaluated
    assert how["merge"] == "explain"
    assert all("planInspection" not in s.get("metrics", {}) for s in classic["steps"])


def classic_pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def test_jobs_cli_through_connect(connect_server, spark, tmp_path, processes):
    """``python -m jobs compact/vacuum`` with --remote and with SPARK_REMOTE:
    the job process talks to the server only (results checked with pylance)."""
    from lance_ops import LanceTable

    p = str(tmp_path / "small.lance")
    LanceTable.create(spark, p, spark.range(0, 40, 1, 4).selectExpr("id", "id * 2 AS x"), maxRowsPerFragment=10)
    expected = sorted(lance.dataset(p).to_table().to_pylist(), key=repr)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("SPARK_REMOTE", None)
    r = subprocess.run([sys.executable, "-m", "jobs", "compact", "--table", p, "--target-rows", "100",
                        "--remote", connect_server.url, "--quiet"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    ds = lance.dataset(p)
    assert out["tables"][0]["status"] == "done" and ds.version == 2  # (one Rewrite: ids reserved in its commit)
    assert len(ds.get_fragments()) == 1
    assert sorted(ds.to_table().to_pylist(), key=repr) == expected
    r = subprocess.run([sys.executable, "-m", "jobs", "vacuum", "--table", p, "--retention-hours", "0",
                        "--no-retention-check", "--quiet"], cwd=ROOT, env=dict(env, SPARK_REMOTE=connect_server.url),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [v["version"] for v in lance.dataset(p).versions()] == [2]


THIN_PYTHON = os.path.join(ROOT, ".venv-thin", "bin", "python")


def _path_without_java() -> str:
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, "java"))]
    return os.pathsep.join(dirs)


def test_thin_client_without_pyspark_or_java(connect_server, classic_run, tmp_path, processes):
    """The same operations from the thin-client environment (``make
    thin-client``: pyspark-client 4.2.0 + lance_ops, no pyspark package) with
    no Java on PATH, against the 4.3.0 server; results equal the classic run's
    and pylance's."""
    assert os.path.exists(THIN_PYTHON), "the thin-client environment is missing: run `make thin-client`"
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["PATH"] = _path_without_java()
    probe = subprocess.run([THIN_PYTHON, "-c", "import importlib.metadata as m, importlib.util as u, shutil; "
                            "print(m.version('pyspark-client'), u.find_spec('pyspark.core') is None, shutil.which('java'))"],
                           env=env, capture_output=True, text=True)
    assert probe.stdout.split() == ["4.2.0", "True", "None"], probe.stdout + probe.stderr
    try:
        import importlib.metadata as md

        md.distribution("pyspark-client")
        raise AssertionError("pyspark-client is installed next to pyspark in the main environment")
    except md.PackageNotFoundError:
        pass
    classic_base, classic = classic_run
    remote_base = str(tmp_path / "thin")
    remote = run_client(THIN_PYTHON, connect_server.url, remote_base, env=env)
    assert remote["client"] == {"pyspark": "4.2.0", "java": False}
    compare(classic, remote, classic_base, remote_base)
