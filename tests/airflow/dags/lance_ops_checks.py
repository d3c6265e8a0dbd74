"""A DAG of operator edge cases for tests/airflow/test_operators.py: an
idle table under the sensor (reschedule mode and deferrable: skipped, not
failed), a Spark connection id that does not exist (the task fails; nothing
runs in process instead). ``LANCE_OPS_CHECKS_TABLE`` names the table."""
from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from lance_ops.airflow import LanceCompactionOperator, LanceTableVersionSensor

TABLE = os.environ.get("LANCE_OPS_CHECKS_TABLE", "/tmp/none.lance")

with DAG(dag_id="lance_ops_checks", schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 0}, params={"version": 0}) as dag:
    LanceTableVersionSensor(task_id="idle", table=TABLE, newer_than="{{ params.version }}", poke_interval=0.2,
                            timeout=1)
    LanceTableVersionSensor(task_id="idle_deferred", table=TABLE, newer_than="{{ params.version }}",
                            poke_interval=0.2, timeout=1, deferrable=True)
    LanceTableVersionSensor(task_id="changed", table=TABLE, newer_than="{{ params.version - 1 }}", timeout=1)
    LanceTableVersionSensor(task_id="wrong_path", table=TABLE + ".missing", newer_than=0, timeout=1)
    LanceCompactionOperator(task_id="misspelled_connection", table=TABLE, spark_conn_id="spark_defualt")
