"""The rows of a DAG run: its data interval as a Spark SQL condition.

Airflow 3 gives every run ``data_interval_start`` / ``data_interval_end``;
with a timetable that has real intervals (``CronDataIntervalTimetable``) a
backfill run of logical date D covers [D, D + interval). Run types are
compared as ``DagRunType`` values: the runtime ``dag_run.run_type`` is an
enum whose ``str()`` is not its value (``"DagRunType.BACKFILL"``), so
string comparisons silently never match.
"""
from __future__ import annotations

import datetime

from ..errors import InvalidArgumentError

FMT = "%Y-%m-%d %H:%M:%S.%f"


def _dag_run_type():
    try:
        from airflow.utils.types import DagRunType  # airflow-core
    except ImportError:  # a worker with the task SDK only
        from airflow.sdk.api.datamodels._generated import DagRunType
    return DagRunType


def run_type_of(value):
    """``DagRunType`` of a run type given as the enum (core's or the task
    SDK's) or its value (``"backfill"``)."""
    DagRunType = _dag_run_type()
    if value is None:
        return None
    return DagRunType(getattr(value, "value", value))


def context_run_type(context):
    run = context.get("dag_run")
    return run_type_of(getattr(run, "run_type", None)) if run is not None else None


def _utc(t) -> datetime.datetime:
    if t.tzinfo is not None:
        t = t.astimezone(datetime.timezone.utc)
    return t.replace(tzinfo=None)


def window(column: str, start, end) -> str:
    """``column >= start AND column < end`` (UTC timestamps; the jobs' Spark
    sessions run with ``spark.sql.session.timeZone=UTC``)."""
    if start is None or end is None or start == end:
        raise InvalidArgumentError(
            f"the run's data interval is empty (data_interval_start={start}, data_interval_end={end}): a run "
            "that fills the rows of its interval needs a DAG whose timetable has real intervals, e.g. "
            "schedule=CronDataIntervalTimetable('0 * * * *', timezone='UTC') -- the default timetable gives "
            "runs zero-width intervals. Nothing was filled."
        )
    if end < start:
        raise InvalidArgumentError(f"the run's data interval ends before it starts ({start} > {end})")
    return (f"`{column}` >= timestamp'{_utc(start).strftime(FMT)}' AND "
            f"`{column}` < timestamp'{_utc(end).strftime(FMT)}'")


def interval_where(context, column: str | None, run_types) -> str | None:
    """The interval condition for runs of ``run_types`` (values or enums),
    None for other runs or without ``column``."""
    if not column:
        return None
    wanted = {run_type_of(t) for t in run_types}
    if context_run_type(context) not in wanted:
        return None
    return window(column, context.get("data_interval_start"), context.get("data_interval_end"))
