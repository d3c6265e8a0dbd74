"""What the jobs print: one JSON document on stdout, everything else on stderr.

Automation reads stdout (``| jq``, Airflow's XCom, a wrapper script), so
nothing but the summary may reach it: not our progress lines, not a feature
function's ``print``, not the JVM's or py4j's chatter. :func:`separate_stdout`
keeps a private copy of the real stdout for the summary and points file
descriptor 1 at stderr for the rest of the process (and for the JVM it starts,
which inherits it).

Under ``spark-submit`` there is one more trap: Spark's ``PythonRunner`` starts
the Python driver with stderr merged into stdout and copies both to its own
stdout. There, stderr is re-pointed at the ``spark-submit`` process's own
stderr (``/proc/<parent>/fd/2``, Linux), so the progress lines and Spark's
log go to stderr and stdout carries only the summary, as outside
``spark-submit``. Where that is not possible (not Linux), stdout stays merged
and the summary is the last line.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

_SUMMARY_FD: int | None = None


def to_json(obj, indent: int | None = None) -> str:
    def default(x):
        if isinstance(x, (datetime.datetime, datetime.date)):
            return x.isoformat()
        if hasattr(x, "to_json_dict"):
            return x.to_json_dict()
        if hasattr(x, "__dict__"):
            return x.__dict__
        return str(x)

    return json.dumps(obj, default=default, indent=indent, sort_keys=True)


def under_spark_submit() -> bool:
    """Whether this Python process is the driver ``spark-submit`` started
    (its parent is the SparkSubmit JVM)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return False
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return b"org.apache.spark.deploy.SparkSubmit" in f.read()
    except OSError:
        return False


def separate_stdout() -> None:
    """Keep the real stdout for :func:`emit` only; send every other write to
    fd 1 (Python's ``print``, the JVM's System.out) to stderr. Under
    ``spark-submit``, stderr first becomes spark-submit's own stderr."""
    global _SUMMARY_FD
    if _SUMMARY_FD is not None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if under_spark_submit():
        try:
            fd = os.open(f"/proc/{os.getppid()}/fd/2", os.O_WRONLY | os.O_APPEND)
            os.dup2(fd, 2)
            os.close(fd)
        except OSError:
            pass  # stdout stays merged with stderr; the summary is the last line
    _SUMMARY_FD = os.dup(1)
    os.dup2(2, 1)


def emit(summary: dict) -> None:
    """Write the summary: indented on a terminal, one line otherwise (easy to
    pick out of a log that merged streams)."""
    if _SUMMARY_FD is None:  # called as a library (tests, in-process callers)
        sys.stdout.write(to_json(summary, indent=2 if sys.stdout.isatty() else None) + "\n")
        sys.stdout.flush()
        return
    text = to_json(summary, indent=2 if os.isatty(_SUMMARY_FD) else None) + "\n"
    sys.stdout.flush()
    data = text.encode()
    while data:
        n = os.write(_SUMMARY_FD, data)
        data = data[n:]


def emit_text(text: str) -> None:
    """Plain text on the real stdout (``--print-entry-file``)."""
    if _SUMMARY_FD is None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    os.write(_SUMMARY_FD, (text + "\n").encode())


def last_summary(text: str) -> dict | None:
    """The summary in a log that merged stdout and stderr (the last line that
    is a JSON object with a ``command``), for callers that captured both."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and "command" in doc:
                return doc
    return None
