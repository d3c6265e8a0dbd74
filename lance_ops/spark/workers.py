"""The Python Spark's workers will run, checked in the driver.

Spark starts its Python workers with ``spark.pyspark.python``, else the
``PYSPARK_PYTHON`` environment variable, else ``python3`` from PATH -- often
an interpreter without lance_ops, pylance or pyarrow. The first job then
fails in an executor with a bare ``No module named 'pyarrow'``. For sessions
whose workers run on this machine (``local`` masters) that interpreter is
probed once, before any job: if it cannot import lance_ops' worker-side
dependencies, :class:`~lance_ops.errors.WorkerEnvironmentError` names it and
how it was chosen. Sessions on a cluster or through Spark Connect run their
workers elsewhere and are not probed here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ..errors import WorkerEnvironmentError

#: What an executor task imports (the data file codec and lance_ops itself).
PROBE = "import pyarrow, lance.file, lance_ops.format.scan"
_checked: dict[str, str | None] = {}


def worker_python(spark) -> tuple[str, str]:
    """(interpreter, where it came from) for the session's Python workers."""
    try:
        conf = spark.conf.get("spark.pyspark.python", None)
    except Exception:
        conf = None
    if conf:
        return conf, "spark.pyspark.python"
    env = os.environ.get("PYSPARK_PYTHON")
    if env:
        return env, "PYSPARK_PYTHON"
    return "python3", "Spark's default (PYSPARK_PYTHON is not set)"


def _is_this_interpreter(path: str) -> bool:
    """Whether ``path`` (found on PATH) is the interpreter running lance_ops."""
    return os.path.realpath(path) == os.path.realpath(sys.executable)


def _probe(interpreter: str) -> str | None:
    """None when ``interpreter`` imports what the workers need, else why not."""
    if interpreter in _checked:
        return _checked[interpreter]
    path = shutil.which(interpreter)
    if path is None:
        problem = "it is not found"
    elif _is_this_interpreter(path):
        problem = None  # this very interpreter, which imported lance_ops
    else:
        try:
            r = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=120)
            last = (r.stderr.strip().splitlines() or [""])[-1]
            problem = None if r.returncode == 0 else f"{path} fails to import them: {last}"
        except (OSError, subprocess.TimeoutExpired) as e:
            problem = f"{path} cannot be run: {e}"
    _checked[interpreter] = problem
    return problem


def check_worker_python(spark) -> None:
    """Raise WorkerEnvironmentError when a local session's workers cannot
    import lance_ops (see the module's doc); a no-op elsewhere."""
    from .jvm import is_connect

    if is_connect(spark):
        return
    try:
        master = spark.conf.get("spark.master", "")
    except Exception:
        return
    if not str(master).startswith("local"):
        return
    interpreter, source = worker_python(spark)
    problem = _probe(interpreter)
    if problem:
        raise WorkerEnvironmentError(
            f"Spark's Python workers would run {interpreter!r} ({source}), which cannot import lance_ops' "
            f"worker dependencies (pyarrow, pylance, lance_ops): {problem}. Set PYSPARK_PYTHON (or "
            f"spark.pyspark.python) to an interpreter that has them -- this one is {sys.executable} -- "
            "before the Spark session starts; lance_ops.local_session() does it for you."
        )


#: Spark conf naming the module Spark runs as its Python worker daemon.
DAEMON_MODULE_CONF = "spark.python.daemon.module"
#: lance_ops' daemon: the executor imports done once, before workers fork.
DAEMON_MODULE = "lance_ops.spark.daemon"


def daemon_conf(master: str | None, conf: dict | None = None) -> dict[str, str]:
    """``{spark.python.daemon.module: lance_ops.spark.daemon}`` for a session
    whose Python workers run on this machine with this very interpreter (a
    ``local`` master, ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` unset or
    this interpreter), else nothing: Spark runs the daemon module with
    ``python -m`` before any task ships code, so it must be importable from
    the worker interpreter's own path -- not guaranteed on a cluster or when
    lance_ops reaches the workers as a shipped zip. A conf the caller sets
    wins. Why the daemon: :mod:`lance_ops.spark.daemon`."""
    conf = conf or {}
    if DAEMON_MODULE_CONF in conf or not str(master or "").startswith("local"):
        return {}
    interpreter = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable
    path = shutil.which(interpreter)
    return {DAEMON_MODULE_CONF: DAEMON_MODULE} if path is not None and _is_this_interpreter(path) else {}
