"""The DAGs in airflow_dags/: imported like the scheduler does (no errors,
no cycles, owners/retries/tags), then run with ``dag.test()`` against real
Lance tables -- in process and through SparkSubmitOperator."""
from __future__ import annotations

import importlib.metadata
import json
import os
import sys

import lance

from lance_ops import LanceTable
from tests.airflow.conftest import DAGS, load_dag


def _rows(spark, lo, hi, parts=1):
    return spark.createDataFrame(
        [(i, float(i), f"2024-01-01 {i % 24:02d}:30:00") for i in range(lo, hi)], "id long, f0 double, ts string"
    ).selectExpr("id", "f0", "cast(ts as timestamp) as ts").repartition(parts)


def test_pyspark_is_not_replaced_by_a_provider():
    # apache-airflow-providers-apache-spark 6.x pulls pyspark-client, whose
    # wheel overwrites pyspark's files: the versions would then disagree.
    import pyspark

    assert pyspark.__version__ == importlib.metadata.version("pyspark")
    assert importlib.metadata.version("apache-airflow-providers-apache-spark").startswith("5.")


def test_dags_import_cleanly(airflow_home):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAGS)
    assert bag.import_errors == {}
    assert {"lance_maintenance", "lance_feature_backfill"} <= set(bag.dag_ids)
    for dag_id in ("lance_maintenance", "lance_feature_backfill"):
        dag = bag.get_dag(dag_id)
        assert dag.tags and dag.task_ids
        dag.topological_sort() if hasattr(dag, "topological_sort") else None  # raises on a cycle
        for t in dag.tasks:
            assert t.owner == "data-platform" and t.retries >= 1, (dag_id, t.task_id)
    # a cycle check that does not depend on the Airflow version
    dag = bag.get_dag("lance_feature_backfill")
    seen, stack = set(), set()

    def visit(tid):
        assert tid not in stack, f"cycle through {tid}"
        if tid in seen:
            return
        stack.add(tid)
        for d in dag.get_task(tid).downstream_task_ids:
            visit(d)
        stack.discard(tid)
        seen.add(tid)

    for tid in dag.task_ids:
        visit(tid)


def _states(run):
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_maintenance_dag_compacts_only_the_table_that_needs_it(airflow_home, spark, tmp_path):
    small = str(tmp_path / "small.lance")
    t = LanceTable.create(spark, small, _rows(spark, 0, 10))
    for i in range(1, 5):
        t.append(_rows(spark, i * 10, i * 10 + 10))
    healthy = str(tmp_path / "healthy.lance")
    LanceTable.create(spark, healthy, _rows(spark, 0, 50))
    cfg = tmp_path / "maintenance.json"
    cfg.write_text(json.dumps({"tables": [
        {"name": "small", "uri": small, "small_fragment_rows": 100, "retention_hours": 0},
        {"name": "healthy", "uri": healthy, "small_fragment_rows": 10},
    ]}))
    before_small, before_healthy = lance.dataset(small).version, lance.dataset(healthy).version
    dag = load_dag("lance_maintenance", {"LANCE_OPS_MAINTENANCE_CONFIG": str(cfg), "LANCE_OPS_SPARK_CONN_ID": None})
    run = dag.test()
    states = _states(run)
    assert str(run.state) == "success", states
    assert states["compact_small"] == "success" and states["vacuum_small"] == "success"
    assert states["healthy_healthy"] == "success" and states["compact_healthy"] == "skipped"
    ds = lance.dataset(small)
    assert ds.version > before_small and len(ds.get_fragments()) == 1 and ds.count_rows() == 50
    assert len(ds.versions()) == 1  # vacuumed with retention 0: only the latest version is kept
    assert lance.dataset(healthy).version == before_healthy
    ti = [x for x in run.get_task_instances() if x.task_id == "health_small"][0]
    health = ti.xcom_pull(task_ids="health_small", key="health")
    assert health["numFragments"] == 5 and health["numSmallFragments"] == 5


def _feature_table(spark, path):
    t = LanceTable.create(spark, path, _rows(spark, 0, 20), maxRowsPerFragment=10)
    t.addColumns({"g": "f0 * 2"})
    t.backfill({"g": "f0 * 2"})  # watermark set
    t.append(_rows(spark, 20, 40, 2), allowMissingColumns=True)
    return t


def _feature_config(tmp_path, path, **extra):
    cfg = tmp_path / "features.json"
    feature = {"name": "g", "table": path, "column": "g", "sql": "f0 * 2", "time_column": "ts",
               "fragments_per_commit": 1, "poke_interval": 1, "sensor_timeout": 30,
               "expectations": {"name": "g_suite", "expectations": [
                   {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "g"}}]}}
    feature.update(extra)
    cfg.write_text(json.dumps({"features": [feature]}))
    return str(cfg)


def _check_backfilled(path, watermark):
    ds = lance.dataset(path)
    g = ds.to_table(columns=["id", "g"]).sort_by("id").column("g").to_pylist()
    assert g == [2.0 * i for i in range(40)]
    assert ds.config()["lance_ops.feature.g.version"] == str(watermark)


def test_feature_backfill_dag_in_process(airflow_home, spark, tmp_path):
    path = str(tmp_path / "events.lance")
    t = _feature_table(spark, path)
    sensed = t.featureStatus("g")
    assert sensed["pending"] and sensed["fragmentsMissing"] == 2
    dag = load_dag("lance_feature_backfill", {"LANCE_OPS_FEATURES_CONFIG": _feature_config(tmp_path, path),
                                              "LANCE_OPS_SPARK_CONN_ID": None})
    run = dag.test()
    assert str(run.state) == "success", _states(run)
    _check_backfilled(path, sensed["dataVersion"])
    kinds = [tx.operation.__class__.__name__ for tx in lance.dataset(path).get_transactions(3)]
    assert kinds == ["UpdateConfig", "DataReplacement", "DataReplacement"]  # 1 fragment per commit, then the watermark
    history = t.refresh().history(3).collect()
    assert history[1]["userMetadata"]["airflow_dag"] == "lance_feature_backfill"
    assert json.loads(history[1]["operationParameters"]["dataQuality"])["success"] is True


def test_feature_backfill_dag_through_spark_submit(airflow_home, spark, tmp_path):
    path = str(tmp_path / "events.lance")
    t = _feature_table(spark, path)
    sensed = t.featureStatus("g")
    bin_dir = os.path.dirname(sys.executable)
    env = {
        "LANCE_OPS_FEATURES_CONFIG": _feature_config(tmp_path, path, fragments_per_commit=None),
        "LANCE_OPS_SPARK_CONN_ID": "lance_spark",
        "AIRFLOW_CONN_LANCE_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
    }
    dag = load_dag("lance_feature_backfill", env)
    assert type(dag.get_task("backfill_g")).__name__ == "SparkSubmitOperator"
    try:
        run = dag.test()
    finally:
        os.environ.pop("LANCE_OPS_SPARK_CONN_ID", None)
    assert str(run.state) == "success", _states(run)
    _check_backfilled(path, sensed["dataVersion"])
    assert lance.dataset(path).get_transactions(2)[1].operation.__class__.__name__ == "DataReplacement"


def test_airflow_backfill_runs_map_the_interval_to_rows():
    import datetime

    sys.path.insert(0, DAGS)
    from lance_feature_backfill import interval_where

    class Run:
        run_type = "backfill"

    start = datetime.datetime(2024, 1, 1, 5)
    where = interval_where("ts", Run(), start, start + datetime.timedelta(hours=1))
    assert where == "ts >= timestamp'2024-01-01 05:00:00' AND ts < timestamp'2024-01-01 06:00:00'"
    Run.run_type = "scheduled"
    assert interval_where("ts", Run(), start, start) is None
