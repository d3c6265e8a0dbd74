"""A real Spark standalone cluster on 127.0.0.1 (a master and 2 workers,
separate JVMs with their own Python workers) and a driver in its own
process: create, delete, merge, addColumns(fn) and compaction on a local
table and on an S3 table (committed through DynamoDB), read back by pylance.
Nothing may rely on the driver and the executors sharing a process or a
file system view beyond the table URI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import lance
import pytest

from tests.servers import SparkCluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def expected_rows() -> list[dict]:
    rows = {i: i % 5 for i in range(30) if i % 4 != 0}
    for i in range(25, 35):
        rows[i] = 100
    return [{"id": i, "x": x, "z": x + 1} for i, x in sorted(rows.items())]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    c = SparkCluster(str(tmp_path_factory.mktemp("cluster")))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_operations_on_a_standalone_cluster(spark_cluster, moto, tmp_path, processes):
    cluster = spark_cluster
    local = str(tmp_path / "local.lance")
    s3 = f"s3+ddb://lance-ops/cluster-{tmp_path.name}.lance?ddbTableName=lance_commits"
    options = moto.options()
    env = dict(os.environ, LANCE_OPS_TEST_STORAGE=json.dumps(options), PYTHONPATH=ROOT,
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, "-m", "tests.objectstores.cluster_driver", cluster.url, local, s3],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    # Tasks ran in two executor processes, neither of them the driver.
    pids = {pid for pid, _host in out["executors"]}
    assert len(pids) == 2 and out["driver_pid"] not in pids
    for uri, opts in ((local, None), (s3, options)):
        ds = lance.dataset(uri, storage_options=opts)
        assert ds.version == out["versions"][uri]
        got = sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])
        assert got == expected_rows()
