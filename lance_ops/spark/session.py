"""Spark session helpers.

:func:`local_session` builds the session lance_ops' own jobs, demo and tests
use: ``local[N]``, few shuffle partitions, filter pushdown into Python data
sources on, and -- the classic pitfall -- ``PYSPARK_PYTHON`` pointing at the
interpreter that has lance_ops and pylance installed (otherwise executors start
``python3`` from PATH and fail with "No module named 'lance'").
"""
from __future__ import annotations

import os
import sys

DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
    # Python workers talk to the JVM over a Unix domain socket instead of TCP
    # loopback: over TCP every Arrow exchange waited ~40 ms (delayed ACK), a
    # third of a small job here.
    "spark.python.unix.domain.socket.enabled": "true",
}


#: Spark conf prefix of storage options for every table:
#: ``spark.lance_ops.storage.<key> = value`` (pylance's option names).
STORAGE_CONF_PREFIX = "spark.lance_ops.storage."


def storage_options(spark, explicit: dict | None = None) -> dict[str, str]:
    """The storage options of a table: the session's
    ``spark.lance_ops.storage.<key>`` confs, overridden by the ``explicit``
    ones (``storage_options=``)."""
    from .jvm import session_confs

    out: dict[str, str] = {}
    try:
        conf = session_confs(spark)
    except Exception:  # older sessions: no getAll
        conf = {}
    for k, v in conf.items():
        if k.startswith(STORAGE_CONF_PREFIX) and len(k) > len(STORAGE_CONF_PREFIX):
            out[k[len(STORAGE_CONF_PREFIX):]] = v
    out.update({str(k): str(v) for k, v in (explicit or {}).items()})
    return out


def ensure_python_env() -> None:
    """Point Spark's Python workers at this interpreter unless already set."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(app_name: str = "lance_ops", master: str = "local[2]", conf: dict | None = None):
    """A local SparkSession configured for lance_ops, with the ``lance`` data
    source registered."""
    ensure_python_env()
    from pyspark.sql import SparkSession

    from .workers import daemon_conf

    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in {**DEFAULT_CONF, **daemon_conf(master, conf), **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    from .jvm import set_log_level

    set_log_level(spark, "WARN")
    from .datasource import register

    register(spark)
    return spark


#: Confs a Connect client may set on its session (runtime SQL confs; the rest
#: of DEFAULT_CONF belongs to the server's own configuration).
REMOTE_CONF_PREFIXES = ("spark.sql.", "spark.lance_ops.")


def remote_session(url: str | None = None, app_name: str = "lance_ops", conf: dict | None = None):
    """A Spark Connect session to ``url`` (``sc://host:port``; default the
    ``SPARK_REMOTE`` environment variable) with lance_ops' runtime confs and
    the ``lance`` data source registered. Needs no JVM on this machine: works
    with ``pyspark-client`` as with ``pyspark[connect]``. The server's Python
    workers must be able to import lance_ops (installed on the workers, or
    shipped with ``spark.addArtifacts(path, pyfile=True)``)."""
    url = url or os.environ.get("SPARK_REMOTE")
    if not url:
        raise ValueError("remote_session needs a Connect URL (sc://host:port) or SPARK_REMOTE")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(url).appName(app_name)
    for k, v in {**DEFAULT_CONF, **(conf or {})}.items():
        if k.startswith(REMOTE_CONF_PREFIXES):
            builder = builder.config(k, v)
    spark = builder.getOrCreate()
    from .datasource import register

    register(spark)
    return spark


def package_zip(dest_dir: str | None = None) -> str:
    """A zip of the lance_ops package as this process imports it (pure
    Python: importable from the zip), for shipping to executors. Written to
    ``dest_dir`` (default: a new temporary directory) as ``lance_ops.zip``."""
    import tempfile
    import zipfile

    # (this module's own package directory: lance_ops/spark/..)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    top = os.path.dirname(pkg)
    dest_dir = dest_dir or tempfile.mkdtemp(prefix="lance_ops-ship-")
    path = os.path.join(dest_dir, "lance_ops.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for d, dirs, files in os.walk(pkg):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(d, f)
                z.write(full, os.path.relpath(full, top))
    return path


def ship_to(spark, dest_dir: str | None = None) -> str:
    """Ship lance_ops to the executors of ``spark``'s session, for clusters
    whose Python workers do not have it installed: a zip of the package
    (:func:`package_zip`) added with ``spark.addArtifacts(zip, pyfile=True)``
    on a Spark Connect session (session-scoped: other sessions of the server
    are unaffected), ``addPyFile`` on a classic one. Call it once, before the
    first operation. The workers still need lance_ops' dependencies
    (pylance, pyarrow, pyroaring, protobuf, fsspec, numpy). Returns the zip's
    path.

    The ``lance`` data source is registered again afterwards: a Connect
    server captures the session's Python includes when a data source is
    registered, and its planner workers (which create the data source
    instance and push filters into it) see only those -- a registration made
    before the zip was added (importing lance_ops registers in the active
    session) would leave them unable to import lance_ops."""
    from . import jvm
    from .datasource import register

    path = package_zip(dest_dir)
    if jvm.is_connect(spark):
        spark.addArtifacts(path, pyfile=True)
    else:
        jvm.add_py_file(spark, path)
    try:
        spark._lance_ops_registered = None  # (register() is idempotent per session: force it)
    except Exception:
        pass
    register(spark)
    return path
