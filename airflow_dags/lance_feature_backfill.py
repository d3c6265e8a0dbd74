"""``lance_feature_backfill``: hourly, keep feature columns filled as rows
arrive.

Per feature (``features`` in ``LANCE_OPS_FEATURES_CONFIG``, see
``config/features.yaml``)::

    wait_<name>      sensor on the *table*, not on time: pokes the feature's
                     status (metadata only) until the table has rows newer
                     than the watermark ``lance_ops.feature.<column>.version``
                     or fragments lacking the column
    backfill_<name>  LanceTable.backfill (SparkSubmitOperator + ``python -m jobs
                     backfill`` when a Spark connection is configured, else in
                     process), in batches of ``fragments_per_commit``, gated by
                     the feature's expectations if any; the watermark is not
                     moved yet
    validate_<name>  every fragment up to the sensed data version has the
                     column (and the suite passes on the rows just written)
    advance_<name>   sets the watermark to the data version the sensor saw

Airflow's own backfill over a date range (``airflow dags backfill
lance_feature_backfill --start-date ... --end-date ...``) maps each run's
logical interval to rows through the feature's ``time_column``: such runs do
not wait, and recompute ``time_column >= data_interval_start AND time_column <
data_interval_end`` (``where``), whatever the watermark says.
"""
from __future__ import annotations

import json
import os
import sys
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from airflow.sdk import DAG, PokeReturnValue, task  # noqa: E402
from lance_common import DEFAULT_ARGS, load_config, local_spark, spark_conn_id, submit, task_name  # noqa: E402

CONFIG = load_config("LANCE_OPS_FEATURES_CONFIG", "features.yaml")
CONN_ID = spark_conn_id()

#: The rows an Airflow backfill run recomputes (empty for scheduled runs).
WHERE_TEMPLATE = (
    "{% if dag_run.run_type == 'backfill' %}{TIME} >= timestamp'{{ data_interval_start.strftime('%Y-%m-%d %H:%M:%S') }}' "
    "AND {TIME} < timestamp'{{ data_interval_end.strftime('%Y-%m-%d %H:%M:%S') }}'{% endif %}"
)


def interval_where(time_column: str | None, dag_run, start, end) -> str | None:
    if not time_column or dag_run is None or str(getattr(dag_run, "run_type", "")).lower() != "backfill":
        return None
    fmt = "%Y-%m-%d %H:%M:%S"
    return f"{time_column} >= timestamp'{start.strftime(fmt)}' AND {time_column} < timestamp'{end.strftime(fmt)}'"


def _source(f: dict):
    if f.get("function"):
        from lance_ops.cli.jobs import load_function

        return load_function(f["function"]), f.get("read_columns"), f.get("output_schema")
    return {f["column"]: f["sql"]}, None, None


with DAG(
    dag_id="lance_feature_backfill",
    description="Backfill feature columns of Lance tables as new rows arrive",
    schedule="@hourly",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lance", "features"],
) as dag:
    for f in CONFIG.get("features", []):
        name = task_name(f.get("name") or f["column"])
        uri, column = f["table"], f["column"]

        @task.sensor(task_id=f"wait_{name}", poke_interval=int(f.get("poke_interval", 60)),
                     timeout=int(f.get("sensor_timeout", 3300)), mode="reschedule")
        def wait(uri=uri, column=column, dag_run=None) -> PokeReturnValue:
            from lance_ops import Table
            from lance_ops.txn.watermarks import feature_status

            status = feature_status(Table(uri).snapshot, column)
            backfill_run = str(getattr(dag_run, "run_type", "")).lower() == "backfill"
            return PokeReturnValue(is_done=bool(status["pending"] or backfill_run), xcom_value=status)

        if CONN_ID:
            args = ["backfill", "--table", uri, "--no-watermark",
                    "--where", WHERE_TEMPLATE.replace("{TIME}", f.get("time_column") or "") if f.get("time_column") else ""]
            if f.get("function"):
                args += ["--function", f["function"], "--read-columns", ",".join(f["read_columns"]),
                         "--output-schema", f["output_schema"]]
            else:
                args += ["--sql", f"{column}={f['sql']}"]
            if f.get("fragments_per_commit"):
                args += ["--fragments-per-commit", str(f["fragments_per_commit"])]
            if f.get("expectations"):
                path = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), f"lance_ops_suite_{name}.json")
                with open(path, "w") as out:
                    json.dump(f["expectations"], out)
                args += ["--expectations", path]
            run_backfill = submit(f"backfill_{name}", args, CONN_ID)
        else:
            @task(task_id=f"backfill_{name}")
            def run_backfill(feature=f, dag_run=None, data_interval_start=None, data_interval_end=None):
                from lance_ops import LanceTable

                source, read_cols, out_schema = _source(feature)
                where = interval_where(feature.get("time_column"), dag_run, data_interval_start, data_interval_end)
                info = LanceTable(local_spark(), feature["table"]).backfill(
                    source, readColumns=read_cols, outputSchema=out_schema, where=where,
                    fragmentsPerCommit=feature.get("fragments_per_commit"),
                    expectations=feature.get("expectations"), advanceWatermark=False,
                    commitProperties={"airflow_dag": "lance_feature_backfill", "airflow_run_id": dag_run.run_id},
                )
                return {"version": info.version, "metrics": info.metrics}

            run_backfill = run_backfill()

        @task(task_id=f"validate_{name}")
        def validate(uri=uri, column=column, name=name, ti=None):
            from lance_ops import Table
            from lance_ops.txn.watermarks import fragment_created_max, has_field

            sensed = ti.xcom_pull(task_ids=f"wait_{name}")
            snap = Table(uri).snapshot
            field = snap.schema.field(column)
            mark = sensed["dataVersion"]
            lacking = [fr.id for fr in snap.fragments
                       if not has_field(fr, field) and fragment_created_max(snap, fr) <= mark]
            if lacking:
                raise ValueError(f"fragments {lacking} created up to version {mark} still lack {column!r}")
            return {"dataVersion": mark, "version": snap.version}

        @task(task_id=f"advance_{name}")
        def advance(uri=uri, column=column, name=name, ti=None):
            from lance_ops import Table
            from lance_ops.txn.watermarks import watermark, watermark_key

            mark = ti.xcom_pull(task_ids=f"validate_{name}")["dataVersion"]
            t = Table(uri)
            if (watermark(t.snapshot, column) or -1) >= mark:
                return {"watermark": watermark(t.snapshot, column), "committed": None}
            info = t.setProperties({watermark_key(column): str(mark)},
                                   commitProperties={"airflow_dag": "lance_feature_backfill"})
            return {"watermark": mark, "committed": info.version}

        wait() >> run_backfill >> validate() >> advance()
