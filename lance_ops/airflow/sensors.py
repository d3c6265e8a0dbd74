"""``LanceTableVersionSensor``: wait for a Lance table to have something new
-- for tables written outside Airflow (those written by Airflow tasks
declare the table's asset, and DAGs can be scheduled on it instead).

It reads metadata only (``lance_ops.Table``: no Spark, no JVM), in
``reschedule`` mode by default (the worker slot is free between pokes), and
with ``soft_fail=True`` by default: a table with nothing new when the
timeout comes is *skipped*, not failed -- quiet hours are not red runs. A
wrong path or a damaged table still fails it.

What "something new" is:

* ``feature_column="g"``: the feature has work (fragments lacking the
  column, or rows newer than its watermark: ``featureStatus()["pending"]``);
* ``newer_than=N`` (templated): the table's version is greater than N;
* ``changed_since=<datetime or ISO text>`` (templated): the latest version
  was committed after it;
* none of these: the latest commit is newer than the start of the DAG's
  previous successful run (``prev_start_date_success``; the table merely
  existing on a DAG's first run).

By run type (compared as ``DagRunType`` values): runs in ``wait_run_types``
(default scheduled and manual) wait; runs in ``pass_run_types`` (default
backfill: the run's interval, not the table's news, decides what to do)
succeed at once; other runs (asset-triggered: the asset event already says
something changed) look once and are skipped when there is nothing new.

``deferrable=True`` waits in Airflow's triggerer instead
(:class:`lance_ops.airflow.triggers.LanceTableVersionTrigger`): no worker
slot at all while waiting. The XCom value is the table's status when done.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

from .status import table_status
from .windows import context_run_type, run_type_of


class LanceTableVersionSensor(BaseSensorOperator):
    """Wait until a Lance table has something new (see the module's doc:
    ``feature_column``, ``newer_than``, ``changed_since``). Metadata only,
    reschedule mode, ``soft_fail=True``: idle means skipped, never failed.
    ``deferrable=True`` waits in the triggerer."""

    template_fields: Sequence[str] = ("table", "storage_options", "newer_than", "changed_since")
    ui_color = "#e8f4ea"

    def __init__(self, *, table: str, storage_options: dict | None = None, feature_column: str | None = None,
                 newer_than=None, changed_since=None, wait_run_types: Sequence = ("scheduled", "manual"),
                 pass_run_types: Sequence = ("backfill",), deferrable: bool = False, mode: str = "reschedule",
                 soft_fail: bool = True, poke_interval: float = 60, timeout: float = 3300, **kwargs):
        kwargs.setdefault("doc_md", type(self).__doc__)
        super().__init__(mode=mode, soft_fail=soft_fail, poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.table = table
        self.storage_options = storage_options
        self.feature_column = feature_column
        self.newer_than = newer_than
        self.changed_since = changed_since
        self.wait_run_types = tuple(wait_run_types)
        self.pass_run_types = tuple(pass_run_types)
        self.deferrable = deferrable

    def _since(self, context):
        if self.changed_since not in (None, "", "None") or self.newer_than not in (None, "", "None") \
                or self.feature_column:
            return self.changed_since
        prev = context.get("prev_start_date_success")
        return prev.isoformat() if prev is not None else None

    def _status(self, context) -> dict:
        return table_status(self.table, self.storage_options, self.feature_column, self.newer_than,
                            self._since(context))

    def poke(self, context):
        run_type = context_run_type(context)
        status = self._status(context)
        if run_type in {run_type_of(t) for t in self.pass_run_types}:
            self.log.info("%s run: not waiting (%s at version %s)", run_type.value, self.table, status["version"])
            return PokeReturnValue(True, status)
        if status["new"]:
            return PokeReturnValue(True, status)
        if run_type is not None and run_type not in {run_type_of(t) for t in self.wait_run_types}:
            raise AirflowSkipException(f"{run_type.value} run: nothing new in {self.table} (version {status['version']})")
        self.log.info("nothing new in %s yet (version %s)", self.table, status["version"])
        return PokeReturnValue(False, status)

    def execute(self, context):
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first:
            return first.xcom_value
        from .triggers import LanceTableVersionTrigger

        self.defer(
            trigger=LanceTableVersionTrigger(table=self.table, storage_options=self.storage_options,
                                             feature_column=self.feature_column, newer_than=self.newer_than,
                                             changed_since=self._since(context), poke_interval=self.poke_interval,
                                             deadline=time.time() + self.timeout),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context, event=None):
        if event and event.get("status") == "done":
            return event["tableStatus"]
        message = f"nothing new in {self.table} within {self.timeout:g} s: {event}"
        if self.soft_fail:
            raise AirflowSkipException(message)
        raise AirflowSensorTimeout(message)
