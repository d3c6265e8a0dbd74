"""Shared by the lance_ops DAGs: configuration files, where the Spark work
runs, and the operators that run it.

* Configuration: a YAML or JSON file per DAG, named by an environment variable
  (``LANCE_OPS_MAINTENANCE_CONFIG``, ``LANCE_OPS_FEATURES_CONFIG``) or the
  example next to this file.
* Spark work runs through ``SparkSubmitOperator`` (the Apache Spark provider,
  ``python -m jobs`` as the application) when a Spark connection is named in
  ``LANCE_OPS_SPARK_CONN_ID`` (and exists); otherwise in the task's own
  process: through Spark Connect when ``SPARK_REMOTE`` /
  ``LANCE_OPS_SPARK_REMOTE`` is ``sc://host:port`` (no Java needed on the
  scheduler), else with a local session (``LANCE_OPS_SPARK_MASTER``, default
  ``local[2]``).

The DAGs call only lance_ops' public API and the jobs CLI.
"""
from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
JOBS_APP = os.path.join(REPO, "jobs", "__main__.py")

DEFAULT_ARGS = {
    "owner": "data-platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=5),
}


def load_config(env: str, default: str) -> dict:
    path = os.environ.get(env) or os.path.join(HERE, "config", default)
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml

        return yaml.safe_load(text) or {}
    return json.loads(text)


def spark_conn_id() -> str | None:
    """The Spark connection to submit to, or None (run in process)."""
    conn_id = os.environ.get("LANCE_OPS_SPARK_CONN_ID")
    if not conn_id:
        return None
    try:
        from airflow.sdk import BaseHook

        BaseHook.get_connection(conn_id)
    except Exception:
        return None
    return conn_id


def submit(task_id: str, args: list, conn_id: str, **kw):
    """A SparkSubmitOperator running ``python -m jobs ARGS`` on the cluster."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    return SparkSubmitOperator(
        task_id=task_id,
        conn_id=conn_id,
        application=JOBS_APP,
        application_args=args,
        name=f"lance_ops-{task_id}",
        env_vars={"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python,
                  "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)},
        conf={"spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC"},
        **kw,
    )


def local_spark():
    """The Spark session of a task (created once per process): a Spark
    Connect session when ``SPARK_REMOTE`` (or ``LANCE_OPS_SPARK_REMOTE``) names
    a server -- a scheduler machine without Java runs maintenance against a
    cluster that way -- else an in-process local one."""
    remote = os.environ.get("LANCE_OPS_SPARK_REMOTE") or os.environ.get("SPARK_REMOTE")
    if remote:
        from lance_ops.spark.session import remote_session

        return remote_session(remote, "lance_ops-airflow")
    from lance_ops.spark.session import local_session

    return local_session("lance_ops-airflow", master=os.environ.get("LANCE_OPS_SPARK_MASTER", "local[2]"))


def task_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
