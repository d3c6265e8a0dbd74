"""lance_ops.airflow's operators and sensor at their edges: idle tables are
skipped (not failed) by the sensor, in reschedule mode and deferred; a wrong
path fails it; a misspelled Spark connection fails the task instead of
running Spark in the worker; run types compared as DagRunType values and
the data interval turned into rows (an empty interval refused)."""
from __future__ import annotations

import datetime
import os

import lance
import pyarrow as pa
import pytest

from tests.airflow.conftest import load_dag

HERE = os.path.dirname(os.path.abspath(__file__))


def test_sensor_skips_idle_tables_and_a_misspelled_connection_fails(airflow_home, tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), p)
    lance.write_dataset(pa.table({"id": [4]}), p, mode="append")
    dag = load_dag("lance_ops_checks", {"LANCE_OPS_CHECKS_TABLE": p})
    run = dag.test(run_conf={"version": 2})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states == {"idle": "skipped", "idle_deferred": "skipped", "changed": "success",
                      "wrong_path": "failed", "misspelled_connection": "failed"}, states
    assert lance.dataset(p).version == 2  # the compaction did not run anywhere


def test_missing_connection_error_names_it(airflow_home):
    from airflow.sdk.exceptions import AirflowException

    from lance_ops.airflow.runner import check_connection

    with pytest.raises(AirflowException, match="spark_conn_id='spark_defualt'.*no Airflow connection"):
        check_connection("spark_defualt")


def test_interval_where_compares_run_types_as_values():
    from airflow.sdk.api.datamodels._generated import DagRunType as SdkRunType

    from lance_ops.airflow.windows import interval_where, window
    from lance_ops.errors import InvalidArgumentError

    class Run:
        def __init__(self, run_type):
            self.run_type = run_type

    start = datetime.datetime(2024, 1, 1, 5, tzinfo=datetime.timezone.utc)
    end = start + datetime.timedelta(hours=1)
    assert str(SdkRunType.BACKFILL) != "backfill"  # the runtime enum's str() is not its value
    for run_type in (SdkRunType.BACKFILL, "backfill"):
        ctx = {"dag_run": Run(run_type), "data_interval_start": start, "data_interval_end": end}
        assert interval_where(ctx, "ts", ("backfill",)) == (
            "`ts` >= timestamp'2024-01-01 05:00:00.000000' AND `ts` < timestamp'2024-01-01 06:00:00.000000'")
    ctx = {"dag_run": Run(SdkRunType.SCHEDULED), "data_interval_start": start, "data_interval_end": end}
    assert interval_where(ctx, "ts", ("backfill",)) is None
    zero = {"dag_run": Run(SdkRunType.BACKFILL), "data_interval_start": start, "data_interval_end": start}
    with pytest.raises(InvalidArgumentError, match="CronDataIntervalTimetable"):
        interval_where(zero, "ts", ("backfill",))
    with pytest.raises(InvalidArgumentError, match="empty"):
        window("ts", start, start)
