"""Shipping lance_ops to a Connect server's executors with
``spark.addArtifacts(..., pyfile=True)`` (``lance_ops.spark.session.ship_to``).

The server's Python workers run the project's interpreter through a wrapper
with ``-S`` and a PYTHONPATH of site-packages only: lance_ops' dependencies
are there, but the editable install's ``.pth`` is not processed, so the
workers cannot import lance_ops on their own -- the client checks that first,
then ships the package and runs operations whose work happens in executor
tasks (create, delete, addColumns(fn), compaction); results checked with
pylance here.

The server's master is the Spark standalone cluster (``tests/servers``'
``SparkCluster``: a master and two one-core workers on 127.0.0.1), so the
executors are processes of their own on the cluster's workers -- as on a
shared cluster, where shipping is what this is for."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import sysconfig

import lance
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _python_without_lance_ops(d: str) -> str:
    site = sysconfig.get_paths()["purelib"]
    path = os.path.join(d, "python-no-lance_ops")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                f'PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}"\nexport PYTHONPATH\n'
                f'exec "{sys.executable}" -S "$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture(scope="module")
def bare_server(tmp_path_factory):
    """A Connect server on the standalone cluster whose Python workers cannot
    import lance_ops; yields (server, cluster)."""
    from tests.servers import ConnectServer, SparkCluster

    work = str(tmp_path_factory.mktemp("connect-bare"))
    cluster = SparkCluster(work, workers=2).start()
    server = None
    try:
        sdir = os.path.join(work, "connect")
        os.makedirs(sdir)
        server = ConnectServer(sdir, python=_python_without_lance_ops(sdir), master=cluster.url,
                               conf={"spark.cores.max": "2", "spark.executor.cores": "1",
                                     "spark.executor.memory": "512m"},
                               env={"PYTHONPATH": ""} if "PYTHONPATH" in os.environ else {}).start()
        yield server, cluster
    finally:
        if server is not None:
            server.stop()
        cluster.stop()


def test_lance_ops_shipped_with_add_artifacts(bare_server, tmp_path, processes):
    server, cluster = bare_server
    run_shipped(server, tmp_path)
    # The work ran on the cluster's executors (one core on each worker).
    apps = cluster.status()["activeapps"]
    assert len(apps) == 1 and apps[0]["cores"] == 2, apps


def run_shipped(server, tmp_path) -> dict:
    """The artifacts client against ``server``; checks and returns its result."""
    bare_server = server
    base = str(tmp_path / "shipped")
    os.makedirs(base)
    out = os.path.join(base, "result.json")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "artifacts_client.py"), bare_server.url, base, out],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    with open(out) as f:
        r = json.load(f)
    # The workers could not import lance_ops before the client shipped it ...
    assert r["before"] == {"origin": None, "no_site": True}, r["before"]
    # ... and import it from the shipped zip after.
    assert r["after"]["no_site"] is True
    assert r["after"]["origin"] and "lance_ops.zip" in r["after"]["origin"] and not r["after"]["origin"].startswith(ROOT)
    assert [s[0] for s in r["steps"]] == ["create", "delete", "addColumns fn", "compaction"]
    ds = lance.dataset(os.path.join(base, "t.lance"))
    assert ds.version == r["steps"][-1][1]
    assert len(ds.get_fragments()) == 1
    expected = sorted([i, 2 * i, 2 * i + 1] for i in range(120) if i % 5)
    assert sorted([list(x.values()) for x in ds.to_table().to_pylist()]) == expected == r["rows"]
    assert r["pushdown_switched"] == [40, 40]
    return r
