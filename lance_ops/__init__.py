"""lance_ops: Spark-native, Delta-style operations and maintenance for Lance tables.

    from lance_ops import LanceTable
    t = LanceTable(spark, "/data/events.lance")
    t.delete("x > 5")

The lower layers (``lance_ops.format``, ``.storage``, ``.txn``) import without
pyspark, and so does ``lance_ops.Table``, the Spark-free core (history,
detail, tags, restore, vacuum, table properties). Spark-facing names
(``LanceTable``, ``register``, ``sql``) load lazily; ``%load_ext lance_ops``
adds the ``%%lance_sql`` notebook magic.
Importing lance_ops registers the ``lance`` data source in the active Spark
session if there is one; ``lance_ops.register(spark)`` does it explicitly.
"""
from __future__ import annotations

import logging
import sys

from . import errors
from .errors import (
    ArgumentTypeError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    CommitStoreError,
    ConstraintViolationError,
    CorruptTableError,
    DataQualityError,
    DuplicateMatchError,
    InvalidArgumentError,
    LanceOpsError,
    OperationCancelledError,
    ReadOnlyVersionError,
    SchemaMismatchError,
    SqlParseError,
    StorageIOError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    WorkerEnvironmentError,
)
from .results import CommitInfo
from .txn.table import Table
from .version import __version__

# A library logs, an application decides where it goes: progress lines and
# warnings go to the "lance_ops" logger (the CLI and the demo configure it).
logging.getLogger("lance_ops").addHandler(logging.NullHandler())


def log_to_stderr(level: str | int = "INFO") -> None:
    """Show lance_ops' progress lines and warnings on stderr as
    ``[lance_ops] ...`` (for scripts, jobs and the demo; a library using
    lance_ops leaves logging to its application)."""
    logger = logging.getLogger("lance_ops")
    if not any(getattr(h, "_lance_ops_stderr", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[lance_ops] %(message)s"))
        handler._lance_ops_stderr = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level)

_LAZY = {
    "LanceTable": ("lance_ops.table", "LanceTable"),
    "register": ("lance_ops.spark.datasource", "register"),
    "local_session": ("lance_ops.spark.session", "local_session"),
    "cancel": ("lance_ops.spark.progress", "cancel"),
    "ship_to": ("lance_ops.spark.session", "ship_to"),
    # the package lance_ops.sql, callable: lance_ops.sql(spark, text)
    "sql": ("lance_ops.sql", None),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        value = value if attr is None else getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lance_ops' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    """``%load_ext lance_ops``: adds the ``%%lance_sql`` cell magic."""
    from .sql import load_ipython_extension as load

    load(ipython)


def _session_to_register():
    """The session ``import lance_ops`` registers the data source in: the
    thread's active session, else the process's default one -- a thread
    other than the session's own has no active session (classic: the JVM's
    is thread-local; Connect: the client's), and a
    ``df.write.format("lance")`` there must still find the data source."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        return spark
    try:
        from pyspark.sql.utils import is_remote

        if is_remote():
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            return ConnectSession._get_default_session()
    except Exception:
        pass
    return getattr(SparkSession, "_instantiatedSession", None)


def _register_in_active_session() -> None:
    # Only if the user already imported pyspark: never import it ourselves here.
    if "pyspark.sql" not in sys.modules:
        return
    try:
        spark = _session_to_register()
        if spark is not None:
            from .spark.datasource import register as _register

            _register(spark)
    except Exception:
        pass


_register_in_active_session()


def _spark_files_credentials(handle: str):
    # Storage credentials published to a Spark session reach its Python
    # workers as a Spark file (lance_ops.storage.credentials); pyspark is
    # only imported when a worker resolves one.
    from .spark.credentials import spark_files_path

    return spark_files_path(handle)


from .storage import credentials as _credentials  # noqa: E402

_credentials.add_resolver(_spark_files_credentials)

__all__ = [
    "LanceTable", "Table", "CommitInfo", "register", "log_to_stderr", "local_session", "errors", "__version__",
    "LanceOpsError", "TableNotFoundError", "TableExistsError", "SchemaMismatchError",
    "UnsupportedFeatureError", "CorruptTableError", "CommitConflictError", "ReadOnlyVersionError",
    "CommitStoreError", "CommitOutcomeUnknownError", "StorageIOError",
    "DuplicateMatchError", "InvalidArgumentError", "ArgumentTypeError", "SqlParseError", "sql", "load_ipython_extension",
    "ConstraintViolationError", "DataQualityError", "OperationCancelledError", "cancel", "ship_to",
    "WorkerEnvironmentError",
]
