"""The DAGs in airflow_dags/ (built from lance_ops.airflow's operators):
imported as the DAG processor does, then run with ``dag.test()`` against real
Lance tables -- in process and through SparkSubmitHook -- with asset events
and OpenLineage events checked. (The scheduler-driven ``airflow backfill
create`` run is tests/airflow/test_scheduler_backfill.py.)"""
from __future__ import annotations

import importlib.metadata
import json
import os
import sys

import lance

from lance_ops import LanceTable
from lance_ops.airflow.assets import asset_uri
from tests.airflow.conftest import DAGS, lineage_events, load_dag


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
    assert importlib.metadata.version("apache-airflow-providers-openlineage") == "2.20.3"


def test_dags_import_cleanly(airflow_home, tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAGS)
    assert bag.import_errors == {}
    assert {"lance_maintenance", "lance_feature_backfill"} <= set(bag.dag_ids)
    for dag_id in ("lance_maintenance", "lance_feature_backfill"):
        dag = bag.get_dag(dag_id)
        assert dag.tags and dag.task_ids
        for t in dag.tasks:
            assert t.owner == "data-platform" and t.retries >= 1, (dag_id, t.task_id)
            if t.task_type.startswith("Lance"):
                assert t.doc_md and "table" in t.template_fields, t.task_id
    fb = bag.get_dag("lance_feature_backfill")
    uri = asset_uri("/data/lance/events.lance")
    # hourly with real intervals (backfill runs fill their interval) or when the table's asset is updated
    assert type(fb.timetable).__name__ == "AssetOrTimeSchedule"
    assert type(fb.timetable.timetable).__name__ == "CronDataIntervalTimetable"
    assert fb.timetable.timetable.expression == "0 * * * *"
    assert [a.uri for a in fb.timetable.asset_condition.objects] == [uri]
    assert [o.uri for o in fb.get_task("backfill_events_g").outlets] == [uri]  # writers declare the table's asset
    sensor = fb.get_task("wait_events_g")
    assert sensor.mode == "reschedule" and sensor.soft_fail is True
    m = bag.get_dag("lance_maintenance")
    assert [o.uri for o in m.get_task("compact_events").outlets] == [uri]
    assert m.get_task("health_events").outlets == []


def _states(run):
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def _asset_events(uri: str) -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetEvent.extra, AssetEvent.source_task_id).join(
            AssetModel, AssetEvent.asset_id == AssetModel.id).where(AssetModel.uri == uri)).all()
    return [dict(extra=r[0], task=r[1]) for r in rows]


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
    expected = sorted(lance.dataset(small).to_table().to_pylist(), key=lambda r: r["id"])
    dag = load_dag("lance_maintenance", {"LANCE_OPS_MAINTENANCE_CONFIG": str(cfg), "LANCE_OPS_SPARK_CONN_ID": None})
    run = dag.test()
    states = _states(run)
    assert str(run.state) == "success", states
    assert states["compact_small"] == "success" and states["vacuum_small"] == "success"
    assert states["healthy_healthy"] == "success" and states["compact_healthy"] == "skipped"
    assert states["vacuum_healthy"] == "skipped"
    ds = lance.dataset(small)
    assert ds.version > before_small and len(ds.get_fragments()) == 1
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["id"]) == expected
    assert len(ds.versions()) == 1  # vacuumed with retention 0: only the latest version is kept
    assert lance.dataset(healthy).version == before_healthy
    ti = [x for x in run.get_task_instances() if x.task_id == "health_small"][0]
    health = ti.xcom_pull(task_ids="health_small", key="health")
    assert health["numFragments"] == 5 and health["numSmallFragments"] == 5
    history = LanceTable(spark, small).history().collect()
    compaction = [h for h in history if h["operation"] in ("Rewrite", "OPTIMIZE")][0]
    assert compaction["userMetadata"]["airflow_task_id"] == "compact_small"
    assert compaction["userMetadata"]["airflow_dag_id"] == "lance_maintenance"
    # asset events: the compaction and the vacuum changed the table, with their versions
    events = {e["task"]: e["extra"] for e in _asset_events(asset_uri(small))}
    assert events["compact_small"]["versionBefore"] == before_small
    assert events["compact_small"]["version"] == compaction["version"]
    assert "vacuum_small" in events and _asset_events(asset_uri(healthy)) == []
    # OpenLineage: the compaction read version N and wrote version M of the table
    complete = [e for e in lineage_events(airflow_home) if e["eventType"] == "COMPLETE"
                and e["job"]["name"] == "lance_maintenance.compact_small"]
    assert complete, [e["job"]["name"] for e in lineage_events(airflow_home)]
    (inp,), (out,) = complete[-1]["inputs"], complete[-1]["outputs"]
    assert (inp["namespace"], inp["name"]) == ("file", small) == (out["namespace"], out["name"])
    assert inp["facets"]["version"]["datasetVersion"] == str(before_small)
    assert out["facets"]["version"]["datasetVersion"] == str(compaction["version"])
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == ["id", "f0", "ts"]


def _feature_table(spark, path, storage_options=None):
    """20 rows with g, the watermark set; then 20 rows appended without g
    (2 fragments lacking its file) and 4 with g explicitly NULL."""
    t = LanceTable.create(spark, path, _rows(spark, 0, 20), maxRowsPerFragment=10, storage_options=storage_options)
    t.addColumns({"g": "f0 * 2"})
    t.backfill({"g": "f0 * 2"})  # watermark set
    t.append(_rows(spark, 20, 40, 2), allowMissingColumns=True)
    t.append(_rows(spark, 40, 44).selectExpr("*", "CAST(NULL AS double) AS g"))
    return t


def _feature_config(tmp_path, path, **extra):
    cfg = tmp_path / "features.json"
    feature = {"name": "g", "table": path, "column": "g", "sql": "f0 * 2", "time_column": "ts",
               "fragments_per_commit": 1, "poke_interval": 1, "sensor_timeout": 30,
               "expectations": {"name": "g_suite", "expectations": [
                   {"type": "expect_column_values_to_be_between", "kwargs": {"column": "g", "min_value": 0}}]}}
    feature.update(extra)
    cfg.write_text(json.dumps({"features": [feature]}))
    return str(cfg)


def _check_backfilled(path, watermark):
    ds = lance.dataset(path)
    g = ds.to_table(columns=["id", "g"]).sort_by("id").column("g").to_pylist()
    assert g == [2.0 * i for i in range(44)]
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
    kinds = [tx.operation.__class__.__name__ for tx in lance.dataset(path).get_transactions(4)]
    # missing fragments (1 per commit), then the NULL rows (an Update, REWRITE_COLUMNS), then validate's watermark
    assert kinds == ["UpdateConfig", "Update", "DataReplacement", "DataReplacement"], kinds
    history = t.refresh().history(4).collect()
    assert history[0]["userMetadata"]["airflow_task_id"] == "validate_g"
    assert history[1]["userMetadata"]["airflow_dag_id"] == "lance_feature_backfill"
    assert json.loads(history[1]["operationParameters"]["dataQuality"])["success"] is True
    assert history[1]["operationParameters"]["fillNulls"] == "true"
    ti = {x.task_id: x for x in run.get_task_instances()}
    report = ti["validate_g"].xcom_pull(task_ids="validate_g")
    assert report["nullRows"] == {"g": 0} and report["rowsChecked"] == 24  # the rows after the old watermark
    # a second run: nothing new -- in an asset-triggered or manual run the sensor skips/waits;
    # with the table unchanged the backfill has nothing to do
    version = lance.dataset(path).version
    assert not t.refresh().featureStatus("g")["pending"]
    assert lance.dataset(path).version == version


def test_feature_backfill_dag_through_spark_submit(airflow_home, spark, tmp_path, processes):
    """Through spark-submit, with the table's commits going through a SQLite
    commit store: the operators pass the storage options on (a commit made
    without them would leave the store without its version)."""
    import sqlite3

    path = str(tmp_path / "events.lance")
    store = tmp_path / "commits.db"
    opts = {"commit_store": f"sqlite:///{store}"}
    t = _feature_table(spark, path, opts)
    sensed = t.featureStatus("g")
    bin_dir = os.path.dirname(sys.executable)
    env = {
        "LANCE_OPS_FEATURES_CONFIG": _feature_config(tmp_path, path, fragments_per_commit=None, storage_options=opts),
        "LANCE_OPS_SPARK_CONN_ID": "lance_spark",
        "AIRFLOW_CONN_LANCE_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
    }
    dag = load_dag("lance_feature_backfill", env)
    assert dag.get_task("backfill_g").spark_conn_id == "lance_spark"
    try:
        run = dag.test()
    finally:
        os.environ.pop("LANCE_OPS_SPARK_CONN_ID", None)
    assert str(run.state) == "success", _states(run)
    _check_backfilled(path, sensed["dataVersion"])
    kinds = [tx.operation.__class__.__name__ for tx in lance.dataset(path).get_transactions(3)]
    assert kinds == ["UpdateConfig", "Update", "DataReplacement"], kinds
    report = {x.task_id: x for x in run.get_task_instances()}["backfill_g"].xcom_pull(task_ids="backfill_g")
    assert report["status"] == "done" and report["metrics"]["numBackfilledRows"] == 24  # parsed from spark-submit
    with sqlite3.connect(str(store)) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM lance_ops_commits ORDER BY version")]
    assert versions == list(range(1, lance.dataset(path).version + 1))  # every commit went through the store
