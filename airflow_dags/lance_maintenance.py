"""``lance_maintenance``: daily health check of every table in the config,
compaction and vacuum only where the policy calls for them -- built from
``lance_ops.airflow`` operators.

Per table (``tables`` in ``LANCE_OPS_MAINTENANCE_CONFIG``, see
``config/maintenance.yaml``)::

    health_<name>   LanceHealthOperator: metadata only (no JVM); health and
                    plan to XCom; branches to
      compact_<name> -> vacuum_<name>   when small fragments / deleted rows
                                        pass their thresholds
      vacuum_<name>                     when only too many versions are kept
      healthy_<name>                    otherwise

Compaction runs through spark-submit when the table's ``spark_conn_id`` (or
``LANCE_OPS_SPARK_CONN_ID``) names a Spark connection -- which must exist --
else in the task's process. Vacuum is metadata only. Both declare the
table's asset: DAGs scheduled on it run after they changed the table.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from lance_ops.airflow import LanceCompactionOperator, LanceHealthOperator, LanceVacuumOperator

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


CONFIG = load_config("LANCE_OPS_MAINTENANCE_CONFIG", "maintenance.yaml")
POLICY_KEYS = ("small_fragment_rows", "max_small_share", "max_deleted_ratio", "max_versions", "retention_hours")

with DAG(
    dag_id="lance_maintenance",
    description="Compact and vacuum Lance tables when their health calls for it",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "data-platform", "retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["lance", "maintenance"],
) as dag:
    for entry in CONFIG.get("tables", []):
        name = task_name(entry.get("name") or os.path.basename(entry["uri"].rstrip("/")))
        table = dict(table=entry["uri"], storage_options=entry.get("storage_options"),
                     spark_conn_id=entry.get("spark_conn_id") or os.environ.get("LANCE_OPS_SPARK_CONN_ID") or None)
        retention = float(entry.get("retention_hours", 168))
        health = LanceHealthOperator(
            task_id=f"health_{name}", **table, **{k: entry[k] for k in POLICY_KEYS if k in entry},
            branch={"compact": f"compact_{name}", "vacuum": f"vacuum_{name}", "healthy": f"healthy_{name}"},
        )
        compact = LanceCompactionOperator(task_id=f"compact_{name}", target_rows=int(entry.get("target_rows", 1024 * 1024)),
                                          **table)
        vacuum = LanceVacuumOperator(task_id=f"vacuum_{name}", retention_hours=retention,
                                     enforce_retention_duration=retention >= 168,
                                     trigger_rule="none_failed_min_one_success", **table)
        healthy = EmptyOperator(task_id=f"healthy_{name}")
        health >> [compact, vacuum, healthy]
        compact >> vacuum
