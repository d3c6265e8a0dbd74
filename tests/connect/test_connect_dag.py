"""The maintenance DAG with its tasks running lance_ops in process through
Spark Connect: ``SPARK_REMOTE`` names the test session's Connect server, the
DAG process has no Java on PATH and starts no JVM; results checked with
pylance."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import lance

from lance_ops import LanceTable
from tests.airflow.conftest import DAGS
from tests.connect.test_connect import _path_without_java

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_maintenance_dag_through_spark_remote(connect_server, spark, tmp_path, processes):
    small = str(tmp_path / "small.lance")
    t = LanceTable.create(spark, small, spark.range(0, 10, 1, 1).selectExpr("id", "id * 2 AS x"))
    for i in range(1, 5):
        t.append(spark.range(i * 10, i * 10 + 10, 1, 1).selectExpr("id", "id * 2 AS x"))
    healthy = str(tmp_path / "healthy.lance")
    LanceTable.create(spark, healthy, spark.range(0, 50, 1, 1).selectExpr("id", "id * 2 AS x"))
    cfg = tmp_path / "maintenance.json"
    cfg.write_text(json.dumps({"tables": [
        {"name": "small", "uri": small, "small_fragment_rows": 100, "retention_hours": 0},
        {"name": "healthy", "uri": healthy, "small_fragment_rows": 10},
    ]}))
    before_small, before_healthy = lance.dataset(small).version, lance.dataset(healthy).version
    expected = sorted(lance.dataset(small).to_table().to_pylist(), key=lambda r: r["id"])
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "SPARK_HOME", "LANCE_OPS_SPARK_CONN_ID", "LANCE_OPS_SPARK_REMOTE", "PYTHONPATH")}
    home = tmp_path / "airflow_home"
    home.mkdir()
    env.update(SPARK_REMOTE=connect_server.url, LANCE_OPS_MAINTENANCE_CONFIG=str(cfg), PATH=_path_without_java(),
               AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__DAGS_FOLDER=DAGS,
               AIRFLOW__CORE__UNIT_TEST_MODE="True")
    out = str(tmp_path / "dag.json")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "dag_client.py"), out], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    with open(out) as f:
        r = json.load(f)
    assert r["connect"] is True and r["jvmStarted"] is False, r
    assert r["state"] == "success", r["states"]
    states = r["states"]
    assert states["compact_small"] == "success" and states["vacuum_small"] == "success", states
    assert states["healthy_healthy"] == "success" and states["compact_healthy"] == "skipped", states
    ds = lance.dataset(small)
    assert ds.version > before_small and len(ds.get_fragments()) == 1
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["id"]) == expected
    assert len(ds.versions()) == 1  # vacuumed with retention 0: only the latest version is kept
    assert lance.dataset(healthy).version == before_healthy
