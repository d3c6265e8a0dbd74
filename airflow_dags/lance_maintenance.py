"""``lance_maintenance``: daily health check of every table in the config,
compaction and vacuum only where the policy calls for them.

Per table (``tables`` in ``LANCE_OPS_MAINTENANCE_CONFIG``, see
``config/maintenance.yaml``):

    health_<name>  (metadata only, no Spark; metrics to XCom) -- branches to
      compact_<name> -> vacuum_<name>   when small fragments / deleted rows pass
                                        their thresholds
      vacuum_<name>                     when only too many versions are kept
      healthy_<name>                    otherwise

The policy is :func:`lance_ops.txn.health.maintenance_plan`, the same as the
``maintain`` job's. Compaction and vacuum run through ``SparkSubmitOperator``
when a Spark connection is configured, else in the task's process.
"""
from __future__ import annotations

import os
import sys
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from airflow.providers.standard.operators.empty import EmptyOperator  # noqa: E402
from airflow.sdk import DAG, task  # noqa: E402
from lance_common import DEFAULT_ARGS, load_config, local_spark, spark_conn_id, submit, task_name  # noqa: E402

CONFIG = load_config("LANCE_OPS_MAINTENANCE_CONFIG", "maintenance.yaml")
CONN_ID = spark_conn_id()


def _policy(entry: dict):
    from lance_ops.txn.health import Policy

    keys = ("small_fragment_rows", "max_small_share", "max_deleted_ratio", "max_versions", "retention_hours")
    return Policy(**{k: entry[k] for k in keys if k in entry})


with DAG(
    dag_id="lance_maintenance",
    description="Compact and vacuum Lance tables when their health calls for it",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lance", "maintenance"],
) as dag:
    for entry in CONFIG.get("tables", []):
        name = task_name(entry.get("name") or os.path.basename(entry["uri"].rstrip("/")))
        uri = entry["uri"]
        policy = _policy(entry)
        target_rows = int(entry.get("target_rows", 1024 * 1024))

        @task.branch(task_id=f"health_{name}")
        def health(uri=uri, policy=policy, name=name, opts=entry.get("storage_options"), ti=None):
            from lance_ops import Table
            from lance_ops.txn.health import health as table_health
            from lance_ops.txn.health import maintenance_plan

            h = table_health(Table(uri, opts).snapshot, policy)
            plan = maintenance_plan(h, policy)
            ti.xcom_push(key="health", value=h)
            ti.xcom_push(key="plan", value={"compact": plan["compact"], "vacuum": plan["vacuum"],
                                            "reasons": plan["reasons"]})
            if plan["compact"]:
                return f"compact_{name}"
            if plan["vacuum"]:
                return f"vacuum_{name}"
            return f"healthy_{name}"

        healthy = EmptyOperator(task_id=f"healthy_{name}")
        if CONN_ID:
            compact = submit(f"compact_{name}", ["compact", "--table", uri, "--target-rows", str(target_rows)], CONN_ID)
            vacuum = submit(
                f"vacuum_{name}",
                ["vacuum", "--table", uri, "--retention-hours", str(policy.retention_hours)]
                + (["--no-retention-check"] if policy.retention_hours < 168 else []),
                CONN_ID, trigger_rule="none_failed_min_one_success",
            )
        else:
            @task(task_id=f"compact_{name}")
            def compact(uri=uri, target_rows=target_rows):
                from lance_ops import LanceTable

                t = LanceTable(local_spark(), uri)
                t.optimize().executeCompaction(targetRowsPerFragment=target_rows)
                info = t.lastCommit()
                return {"version": info.version, "metrics": info.metrics}

            @task(task_id=f"vacuum_{name}", trigger_rule="none_failed_min_one_success")
            def vacuum(uri=uri, policy=policy):
                from lance_ops import Table

                removed = Table(uri).vacuum(policy.retention_hours, enforceRetentionDuration=policy.retention_hours >= 168)
                return {"removedFiles": len(removed)}

            compact, vacuum = compact(), vacuum()
        branch = health()
        branch >> [compact, vacuum, healthy]
        compact >> vacuum
