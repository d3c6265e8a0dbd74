"""Airflow operators for Lance tables. Each runs one jobs command
(:mod:`lance_ops.jobs`) on one table, in the task's process or through
spark-submit (``spark_conn_id``, see :mod:`.runner`), and returns the table's
report from the jobs' JSON summary as its XCom.

Common arguments: ``table`` (the URI; templated), ``storage_options`` (dict;
templated; pylance's option names, also ``commit_store``), ``commit_store``
(shorthand for ``storage_options["commit_store"]``), ``spark_conn_id`` (None:
in process), ``master`` / ``remote`` (the in-process Spark session),
``spark_conf`` (dict), ``commit_properties`` (dict; recorded in the table's
history, with the DAG, run and task ids added), ``py_files`` and
``spark_submit_kwargs`` (for ``SparkSubmitHook``: ``executor_memory``,
``deploy_mode`` ...).

Writing operators declare the table's asset as an outlet
(``outlets=[table_asset(table)]``, see :mod:`.assets`): Airflow records an
asset event when they succeed -- with the versions before and after in its
``extra`` -- and DAGs scheduled on the asset run. When there is nothing to
do they raise ``AirflowSkipException`` (``skip_on_noop=True``): no asset
event for a table that did not change, and the run shows what happened. A
failed job fails the task with the job's error.

Lineage: every operator reports the table as an OpenLineage input dataset
(at the version it read) and the writing ones as an output (at the version
they committed), through ``get_openlineage_facets_on_complete`` -- what the
OpenLineage provider's listener collects.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.bases.branch import BranchMixIn
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from .assets import is_templated, table_asset
from .lineage import operator_lineage
from .runner import in_process, spark_submit
from .windows import interval_where, run_type_of

COMMON_TEMPLATE_FIELDS = ("table", "storage_options", "commit_store", "spark_conf", "commit_properties")


class LanceOperator(BaseOperator):
    """The common part of the lance_ops operators (not used directly)."""

    command: str = ""
    #: Operators that commit data declare the table as an outlet asset.
    writes_table: bool = False
    template_fields: Sequence[str] = COMMON_TEMPLATE_FIELDS
    template_fields_renderers = {"storage_options": "json", "spark_conf": "json", "commit_properties": "json"}
    ui_color = "#e8f4ea"

    def __init__(self, *, table: str, storage_options: dict | None = None, commit_store: str | None = None,
                 spark_conn_id: str | None = None, master: str | None = None, remote: str | None = None,
                 spark_conf: dict | None = None, commit_properties: dict | None = None, skip_on_noop: bool = True,
                 py_files: str | None = None, spark_submit_kwargs: dict | None = None, **kwargs):
        if self.writes_table and not is_templated(table) and "outlets" not in kwargs:
            kwargs["outlets"] = [table_asset(table)]
        kwargs.setdefault("doc_md", type(self).__doc__)
        super().__init__(**kwargs)
        self.table = table
        self.storage_options = storage_options
        self.commit_store = commit_store
        self.spark_conn_id = spark_conn_id
        self.master = master
        self.remote = remote
        self.spark_conf = spark_conf
        self.commit_properties = commit_properties
        self.skip_on_noop = skip_on_noop
        self.py_files = py_files
        self.spark_submit_kwargs = dict(spark_submit_kwargs or {})
        #: The table's report of the last run (for lineage).
        self.report: dict | None = None

    # ----------------------------------------------------------- subclasses
    def command_args(self, context) -> list[str]:
        """The command's own options (after ``COMMAND --table URI``)."""
        return []

    # ------------------------------------------------------------- running
    def _options(self) -> dict:
        opts = {str(k): str(v) for k, v in (self.storage_options or {}).items()}
        if self.commit_store:
            opts["commit_store"] = str(self.commit_store)
        return opts

    def _properties(self, context) -> list[str]:
        props = {
            "airflow_dag_id": getattr(context.get("dag"), "dag_id", None),
            "airflow_run_id": getattr(context.get("dag_run"), "run_id", None) or context.get("run_id"),
            "airflow_task_id": self.task_id,
        }
        props.update(self.commit_properties or {})
        out = []
        for k, v in props.items():
            if v is not None:
                out += ["--property", f"{k}={v}"]
        return out

    def run_job(self, context) -> dict:
        argv = [self.command, "--table", self.table, *self.command_args(context)]
        if self.command not in ("history", "detail", "tags", "health"):
            argv += self._properties(context)
        for k, v in (self.spark_conf or {}).items():
            if self.command not in ("vacuum", "health"):
                argv += ["--conf", f"{k}={v}"]
        if self.spark_conn_id:
            summary, _hook = spark_submit(
                argv, self.spark_conn_id, self._options(), name=f"lance_ops-{self.task_id}",
                conf=self.spark_conf, py_files=self.py_files, **self.spark_submit_kwargs)
            if summary is None:
                raise AirflowException(f"{self.command} on {self.table}: spark-submit printed no summary")
        else:
            summary = in_process(argv, self._options(), master=self.master, remote=self.remote)
        (report,) = summary["tables"]
        self.report = report
        return report

    def execute(self, context):
        report = self.run_job(context)
        if report.get("dataVersion") is not None:  # (backfill: what a validate task checks up to)
            context["ti"].xcom_push(key="dataVersion", value=report["dataVersion"])
        status = report.get("status")
        if status == "failed":
            raise AirflowException(f"{self.command} on {self.table} failed: {report.get('error') or report.get('failures')}")
        if self.writes_table and status == "done":
            self._record_asset_event(context, report)
        if status == "noop" and self.skip_on_noop:
            context["ti"].xcom_push(key="report", value=report)
            raise AirflowSkipException(f"{self.command} on {self.table}: nothing to do (version {report.get('versionAfter')})")
        return report

    def _record_asset_event(self, context, report: dict) -> None:
        events = context.get("outlet_events")
        if events is None:
            return
        for asset in self.outlets or []:
            if getattr(asset, "uri", None) == table_asset(self.table).uri:
                events[asset].extra = {"table": self.table, "command": self.command,
                                       "versionBefore": report.get("versionBefore"),
                                       "version": report.get("versionAfter")}

    # ------------------------------------------------------------- lineage
    def get_openlineage_facets_on_complete(self, task_instance):
        return operator_lineage(self.table, self.report, self.writes_table, self.storage_options,
                                self._assertions() if hasattr(self, "_assertions") else None)

    def get_openlineage_facets_on_failure(self, task_instance):
        return operator_lineage(self.table, self.report, False, self.storage_options)


class LanceCompactionOperator(LanceOperator):
    """Compact a Lance table: merge small fragments into ones of about
    ``target_rows`` rows and materialize deletions above
    ``deletion_threshold`` (``OPTIMIZE``). Skipped when there is nothing to
    compact. Outlet: the table's asset."""

    command = "compact"
    writes_table = True
    template_fields = (*COMMON_TEMPLATE_FIELDS, "target_rows")

    def __init__(self, *, target_rows: int = 1024 * 1024, deletion_threshold: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.target_rows = target_rows
        self.deletion_threshold = deletion_threshold

    def command_args(self, context):
        return ["--target-rows", str(int(self.target_rows)), "--deletion-threshold", str(self.deletion_threshold)]


class LanceVacuumOperator(LanceOperator):
    """Remove versions older than ``retention_hours`` and the files no kept
    version needs. Metadata only: in process it starts no JVM. A retention
    under 168 hours needs ``enforce_retention_duration=False``. Skipped when
    nothing was removed. Outlet: the table's asset."""

    command = "vacuum"
    writes_table = True
    template_fields = (*COMMON_TEMPLATE_FIELDS, "retention_hours")

    def __init__(self, *, retention_hours: float = 168.0, enforce_retention_duration: bool = True,
                 dry_run: bool = False, **kwargs):
        if dry_run:
            kwargs.setdefault("outlets", [])  # a dry run changes nothing: no asset event
        super().__init__(**kwargs)
        self.retention_hours = retention_hours
        self.enforce_retention_duration = enforce_retention_duration
        self.dry_run = dry_run

    def command_args(self, context):
        return (["--retention-hours", str(float(self.retention_hours))]
                + ([] if self.enforce_retention_duration else ["--no-retention-check"])
                + (["--dry-run"] if self.dry_run else []))


class _ColumnsMixin:
    """``columns={"g": "f0 * 2"}`` (Spark SQL) or ``function="module:fn"`` +
    ``read_columns`` + ``output_schema``; ``expectations``: a great
    expectations suite (dict, or the path of its JSON) gating the commit."""

    def _columns_args(self) -> list[str]:
        if bool(self.columns) == bool(self.function):
            raise AirflowException("give either columns={name: SQL} or function='module:fn', not both or neither")
        if self.columns:
            args = []
            for k, v in self.columns.items():
                args += ["--sql", f"{k}={v}"]
        else:
            if not self.read_columns or not self.output_schema:
                raise AirflowException("function= needs read_columns=[...] and output_schema='g double'")
            args = ["--function", self.function, "--read-columns", ",".join(self.read_columns),
                    "--output-schema", self.output_schema]
        if self.expectations:
            args += ["--expectations", _suite_file(self.expectations, self.task_id)]
        return args


def _suite_file(expectations, name: str) -> str:
    """A suite given as a dict is written to a file the job reads (on this
    machine: with spark-submit in cluster deploy mode give a path the driver
    can read)."""
    if isinstance(expectations, str):
        return expectations
    fd, path = tempfile.mkstemp(prefix=f"lance_ops_suite_{name}_", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(expectations, f)
    return path


class LanceAddColumnsOperator(_ColumnsMixin, LanceOperator):
    """Add columns computed from existing ones (``addColumns``): SQL
    expressions or an Arrow batch function, written as new column files.
    Outlet: the table's asset."""

    command = "add-columns"
    writes_table = True
    template_fields = (*COMMON_TEMPLATE_FIELDS, "columns")

    def __init__(self, *, columns: dict | None = None, function: str | None = None, read_columns=None,
                 output_schema: str | None = None, expectations=None, **kwargs):
        super().__init__(**kwargs)
        self.columns, self.function = columns, function
        self.read_columns, self.output_schema, self.expectations = read_columns, output_schema, expectations

    def command_args(self, context):
        return self._columns_args()


class LanceBackfillOperator(_ColumnsMixin, LanceOperator):
    """Fill existing (feature) columns where they are missing: fragments
    without the column's file, and with ``fill_nulls=True`` rows whose value
    is NULL. ``where`` (templated) narrows the rows. With
    ``interval_column``, runs of the types in ``interval_run_types``
    (default: backfill runs) fill the rows of the run's data interval,
    ``interval_column >= data_interval_start AND < data_interval_end``; an
    empty interval (start == end: the DAG's timetable has no real
    intervals) is refused. ``advance_watermark`` moves the feature watermark
    when done (set it False when a validate task moves it after checking).
    Skipped when there was nothing to fill. Outlet: the table's asset."""

    command = "backfill"
    writes_table = True
    template_fields = (*COMMON_TEMPLATE_FIELDS, "columns", "where")

    def __init__(self, *, columns: dict | None = None, function: str | None = None, read_columns=None,
                 output_schema: str | None = None, expectations=None, where: str | None = None,
                 fill_nulls: bool = False, fragments_per_commit: int | None = None, advance_watermark: bool = True,
                 interval_column: str | None = None, interval_run_types: Sequence = ("backfill",), **kwargs):
        super().__init__(**kwargs)
        self.columns, self.function = columns, function
        self.read_columns, self.output_schema, self.expectations = read_columns, output_schema, expectations
        self.where = where
        self.fill_nulls = fill_nulls
        self.fragments_per_commit = fragments_per_commit
        self.advance_watermark = advance_watermark
        self.interval_column = interval_column
        self.interval_run_types = tuple(interval_run_types)

    def command_args(self, context):
        args = self._columns_args()
        where = self.where or None
        window = interval_where(context, self.interval_column, self.interval_run_types)
        if window:
            where = f"({where}) AND ({window})" if where else window
        if where:
            args += ["--where", where]
        if self.fill_nulls:
            args.append("--fill-nulls")
        if self.fragments_per_commit:
            args += ["--fragments-per-commit", str(int(self.fragments_per_commit))]
        if not self.advance_watermark:
            args.append("--no-watermark")
        return args


class LanceValidateOperator(LanceOperator):
    """Check the table's rows -- its CHECK constraints (``check_constraints``),
    ``not_null`` columns and a great_expectations suite (``expectations``) --
    and fail the task when a check fails. Which rows: all, ``where``, the
    run's data interval (``interval_column``, in ``interval_run_types`` runs,
    as the backfill operator), or with ``feature="g"`` (in other runs) the
    rows created after g's watermark up to ``through_data_version``
    (templated; default the table's data version); with
    ``advance_watermark=True`` the watermark then moves there."""

    command = "validate"
    template_fields = (*COMMON_TEMPLATE_FIELDS, "where", "through_data_version")

    def __init__(self, *, expectations=None, not_null: Sequence[str] = (), check_constraints: bool = True,
                 where: str | None = None, feature: str | None = None, through_data_version=None,
                 advance_watermark: bool = False, interval_column: str | None = None,
                 interval_run_types: Sequence = ("backfill",), version: int | str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.expectations, self.not_null, self.check_constraints = expectations, list(not_null), check_constraints
        self.where, self.feature, self.through_data_version = where, feature, through_data_version
        self.advance_watermark = advance_watermark
        self.interval_column, self.interval_run_types = interval_column, tuple(interval_run_types)
        self.version = version

    def command_args(self, context):
        args = []
        if self.expectations:
            args += ["--expectations", _suite_file(self.expectations, self.task_id)]
        for c in self.not_null:
            args += ["--not-null", c]
        if not self.check_constraints:
            args.append("--no-constraints")
        where = self.where or None
        window = interval_where(context, self.interval_column, self.interval_run_types)
        if window:
            where = f"({where}) AND ({window})" if where else window
        if where:
            args += ["--where", where]
        if self.feature:
            if window:  # a window run checks its window, and moves no watermark
                args += ["--not-null", self.feature]
            else:
                args += ["--feature", self.feature]
                through = self.through_data_version
                if through not in (None, "", "None"):
                    args += ["--through-data-version", str(int(through))]
                if self.advance_watermark:
                    args.append("--advance-watermark")
        if self.version is not None:
            args += ["--version", str(self.version)]
        return args

    def execute(self, context):
        report = self.run_job(context)
        if report.get("status") == "failed":
            raise AirflowException(
                f"validate {self.table}: {report.get('failures') or report.get('error')} (rows checked: "
                f"{report.get('rowsChecked')}, where: {report.get('where')})")
        return report

    def _assertions(self):
        r = self.report or {}
        out = [(f"not_null({c})", n == 0, c) for c, n in (r.get("nullRows") or {}).items()]
        out += [(f"check({n})", v == 0, None) for n, v in (r.get("constraints") or {}).items()]
        if r.get("validation"):
            out.append((f"expectations({r['validation'].get('suite')})", bool(r["validation"].get("success")), None))
        return out


class LanceHealthOperator(LanceOperator, BranchMixIn):
    """The table's health (fragments, small-fragment share, deleted rows,
    versions since the last vacuum) and maintenance plan, from metadata only
    (no JVM), as XCom (``health``, ``plan`` keys; the whole report is the
    return value). With ``branch={"compact": task_id, "vacuum": task_id,
    "healthy": task_id}`` it also branches: to the compaction task when the
    plan compacts, else the vacuum task when it vacuums, else the healthy
    one; the others are skipped. Policy: ``small_fragment_rows``,
    ``max_small_share``, ``max_deleted_ratio``, ``max_versions``,
    ``retention_hours``."""

    command = "health"
    inherits_from_skipmixin = True

    def __init__(self, *, small_fragment_rows: int | None = None, max_small_share: float = 0.3,
                 max_deleted_ratio: float = 0.1, max_versions: int = 20, retention_hours: float = 168.0,
                 target_rows: int = 1024 * 1024, branch: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        self.policy: dict[str, Any] = dict(small_fragment_rows=small_fragment_rows, max_small_share=max_small_share,
                                           max_deleted_ratio=max_deleted_ratio, max_versions=max_versions,
                                           retention_hours=retention_hours, target_rows=target_rows)
        self.branch = dict(branch) if branch else None

    def command_args(self, context):
        args = []
        for k, v in self.policy.items():
            if v is not None:
                args += [f"--{k.replace('_', '-')}", str(v)]
        return args

    def execute(self, context):
        report = self.run_job(context)
        if report.get("status") == "failed":
            raise AirflowException(f"health {self.table} failed: {report.get('error')}")
        ti = context["ti"]
        ti.xcom_push(key="health", value=report["health"])
        ti.xcom_push(key="plan", value=report["plan"])
        if self.branch:
            plan = report["plan"]
            chosen = (self.branch.get("compact") if plan["compact"] else
                      self.branch.get("vacuum") if plan["vacuum"] else self.branch.get("healthy"))
            self.do_branch(context, chosen)
        return report


__all__ = [
    "LanceOperator", "LanceCompactionOperator", "LanceVacuumOperator", "LanceAddColumnsOperator",
    "LanceBackfillOperator", "LanceValidateOperator", "LanceHealthOperator", "run_type_of",
]
