"""``lance_feature_backfill``: keep feature columns of Lance tables filled --
built from ``lance_ops.airflow`` operators.

Schedule: hourly with real data intervals (``CronDataIntervalTimetable``) *or*
whenever one of the feature tables' assets is updated (a task with the table
as an outlet wrote it): ``AssetOrTimeSchedule``. Per feature (``features`` in
``LANCE_OPS_FEATURES_CONFIG``, see ``config/features.yaml``)::

    wait_<name>      LanceTableVersionSensor on the feature (metadata only,
                     reschedule mode, soft_fail): scheduled and manual runs
                     wait for rows newer than the watermark or fragments
                     lacking the column -- an idle hour is *skipped*, not
                     failed; asset-triggered runs look once; backfill runs
                     do not wait
    backfill_<name>  LanceBackfillOperator, fill_nulls: fragments lacking the
                     column and rows whose value is NULL; in backfill runs
                     only the rows of the run's data interval (the feature's
                     ``time_column``); skipped when there is nothing to fill
    validate_<name>  LanceValidateOperator: no NULL left -- in backfill runs
                     in the interval; otherwise in the rows created after the
                     watermark up to the version the backfill read, then the
                     watermark moves there

``airflow backfill create --dag-id lance_feature_backfill --from-date ...
--to-date ...`` (Airflow 3; see airflow_dags/README.md) recomputes history
interval by interval; a second backfill of the same dates writes nothing.
Spark work runs through spark-submit when the feature's ``spark_conn_id``
(or ``LANCE_OPS_SPARK_CONN_ID``) names a Spark connection -- which must exist
-- else in the task's process (``SPARK_REMOTE`` for a Connect server).
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, AssetAny, AssetOrTimeSchedule, CronDataIntervalTimetable

from lance_ops.airflow import (
    LanceBackfillOperator,
    LanceTableVersionSensor,
    LanceValidateOperator,
    table_asset,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def load_config(env: str, default: str) -> dict:
    path = os.environ.get(env) or os.path.join(HERE, "config", default)
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml

        return yaml.safe_load(text) or {}
    return json.loads(text)


def task_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


CONFIG = load_config("LANCE_OPS_FEATURES_CONFIG", "features.yaml")
FEATURES = CONFIG.get("features", [])
HOURLY = CronDataIntervalTimetable(CONFIG.get("schedule", "0 * * * *"), timezone="UTC")
TABLES = sorted({f["table"] for f in FEATURES})


def _date(key: str, default=None):
    v = CONFIG.get(key)
    return datetime.fromisoformat(str(v)) if v else default


with DAG(
    dag_id="lance_feature_backfill",
    description="Backfill feature columns of Lance tables as new rows arrive",
    schedule=AssetOrTimeSchedule(timetable=HOURLY, assets=AssetAny(*[table_asset(t) for t in TABLES]))
    if TABLES else HOURLY,
    start_date=_date("start_date", datetime(2024, 1, 1)),
    end_date=_date("end_date"),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "data-platform", "retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["lance", "features"],
) as dag:
    for f in FEATURES:
        name = task_name(f.get("name") or f["column"])
        common = dict(table=f["table"], storage_options=f.get("storage_options"),
                      spark_conn_id=f.get("spark_conn_id") or os.environ.get("LANCE_OPS_SPARK_CONN_ID") or None)
        source = (dict(function=f["function"], read_columns=f["read_columns"], output_schema=f["output_schema"])
                  if f.get("function") else dict(columns={f["column"]: f["sql"]}))
        wait = LanceTableVersionSensor(task_id=f"wait_{name}", table=f["table"], storage_options=f.get("storage_options"),
                                       feature_column=f["column"], poke_interval=int(f.get("poke_interval", 300)),
                                       timeout=int(f.get("sensor_timeout", 3300)))
        fill = LanceBackfillOperator(task_id=f"backfill_{name}", **common, **source, fill_nulls=True,
                                     interval_column=f.get("time_column"), advance_watermark=False,
                                     fragments_per_commit=f.get("fragments_per_commit"),
                                     expectations=f.get("expectations"))
        check = LanceValidateOperator(
            task_id=f"validate_{name}", **common, feature=f["column"], interval_column=f.get("time_column"),
            through_data_version="{{ ti.xcom_pull(task_ids='backfill_%s', key='dataVersion') }}" % name,
            advance_watermark=True, trigger_rule="none_failed_min_one_success",
        )
        wait >> fill >> check
        wait >> check
