"""Where an operator's work runs, chosen explicitly by ``spark_conn_id``:

* ``None``: in the task's own process -- the jobs command
  (:mod:`lance_ops.jobs`) called as a function. Metadata commands (vacuum,
  health) start no JVM; the others use a Spark session: Spark Connect when
  ``remote`` (or ``$LANCE_OPS_SPARK_REMOTE`` / ``$SPARK_REMOTE``) names a
  server, else a local one (``master``, default ``$LANCE_OPS_SPARK_MASTER`` or
  ``local[2]``).
* a connection id: ``spark-submit`` through the Apache Spark provider's
  ``SparkSubmitHook`` (what ``SparkSubmitOperator`` runs), the application
  being the installed package's entry file. The connection must exist: a
  misspelled id is an error, never a silent fallback to in-process Spark.
  Storage options travel as ``LANCE_OPS_STORAGE_<KEY>`` environment
  variables of the spark-submit process (not on its command line, which the
  task log shows).

Either way the result is the jobs' JSON summary.
"""
from __future__ import annotations

import json
import logging
import os

log = logging.getLogger("lance_ops")

ENV_PREFIX = "LANCE_OPS_STORAGE_"


def in_process(argv: list[str], storage_options: dict | None, master: str | None = None,
               remote: str | None = None) -> dict:
    """Run a jobs command here; its summary."""
    from ..jobs.args import METADATA_COMMANDS, parser
    from ..jobs.run import execute

    argv = list(argv)
    for k, v in (storage_options or {}).items():
        argv += ["--option", f"{k}={v}"]
    if argv[0] not in METADATA_COMMANDS:
        remote = remote or os.environ.get("LANCE_OPS_SPARK_REMOTE") or os.environ.get("SPARK_REMOTE")
        if remote:
            argv += ["--remote", remote]
        else:
            argv += ["--master", master or os.environ.get("LANCE_OPS_SPARK_MASTER") or "local[2]"]
    summary = execute(parser("lance-ops").parse_args(argv))
    from ..jobs.output import to_json  # as the command line prints it: JSON values only (XCom)

    return json.loads(to_json(summary))


def check_connection(conn_id: str) -> None:
    """Raise a clear error when the Airflow connection does not exist."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowException

    try:
        BaseHook.get_connection(conn_id)
    except Exception as e:
        raise AirflowException(
            f"spark_conn_id={conn_id!r}: there is no Airflow connection with this id ({type(e).__name__}). "
            f"Define it (airflow connections add {conn_id} --conn-type spark --conn-host spark://HOST:7077, "
            f"or AIRFLOW_CONN_{conn_id.upper()}), or pass spark_conn_id=None to run in the task's process. "
            "lance_ops never falls back to another place to run Spark."
        ) from e


def _hook_class():
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class CapturingSparkSubmitHook(SparkSubmitHook):
        """SparkSubmitHook that also keeps the lines spark-submit printed (the
        job's JSON summary among them)."""

        captured: list[str]

        def _process_spark_submit_log(self, itr):
            self.captured = []

            def tee():
                for line in itr:
                    self.captured.append(line)
                    yield line

            return super()._process_spark_submit_log(tee())

    return CapturingSparkSubmitHook


def spark_submit(argv: list[str], conn_id: str, storage_options: dict | None, *, name: str,
                 conf: dict | None = None, py_files: str | None = None, env_vars: dict | None = None,
                 **hook_kwargs) -> tuple[dict | None, object]:
    """Run a jobs command with spark-submit: (its summary, the hook). A
    non-zero exit raises (AirflowException, from the hook) after the summary
    is read, so the caller can report what failed."""
    from airflow.sdk.exceptions import AirflowException

    from ..jobs.output import last_summary
    from ..jobs.run import entry_file

    check_connection(conn_id)
    env = dict(env_vars or {})
    env.update({f"{ENV_PREFIX}{k.upper()}": str(v) for k, v in (storage_options or {}).items()})
    conf = {"spark.sql.session.timeZone": "UTC", **(conf or {})}
    hook = _hook_class()(conf=conf, conn_id=conn_id, application_args=list(argv), name=name, py_files=py_files,
                         env_vars=env or None, **hook_kwargs)
    error = None
    try:
        hook.submit(entry_file())
    except AirflowException as e:
        error = e
    summary = last_summary("\n".join(getattr(hook, "captured", [])))
    if error is not None and summary is None:
        raise error
    return summary, hook
