"""Storage credentials to a Spark session's workers as a handle
(:mod:`lance_ops.storage.credentials` has the why and the protocol): the
options file is published as a Spark artifact of the session, once, and
what lance_ops sends through Spark afterwards names only the handle."""
from __future__ import annotations

import threading
import weakref

from ..storage import credentials as C

_LOCK = threading.Lock()
#: session -> handles published to it
_SESSIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_BY_ID: dict[int, set[str]] = {}


def publish(spark, store) -> str | None:
    """Make ``store``'s credentials resolvable by ``spark``'s workers; returns
    the handle (None: nothing secret in its options)."""
    options = store.storage_options
    if not C.has_secrets(options):
        return None
    handle, path = C.seal(options)
    with _LOCK:
        try:
            done = _SESSIONS.setdefault(spark, set())
        except TypeError:  # a session that takes no weak reference
            done = _BY_ID.setdefault(id(spark), set())
        if handle not in done:
            spark.addArtifacts(path, file=True)
            done.add(handle)
    C.mark_published(handle)
    return handle


def reader_storage_options(spark, store) -> dict[str, str]:
    """The storage options of ``store`` as the ``lance`` data source should
    receive them from ``spark``: the handle when they hold a secret."""
    handle = publish(spark, store)
    if handle is not None:
        return {C.HANDLE_OPTION: handle}
    return dict(store.storage_options)


def reader_options(spark, store) -> dict[str, str]:
    """``storage.<key>`` reader options for ``store`` (see
    :func:`reader_storage_options`)."""
    return {f"storage.{k}": v for k, v in reader_storage_options(spark, store).items()}


def spark_files_path(handle: str) -> str | None:
    """Where a Python worker finds a published file (``SparkFiles``)."""
    try:
        from pyspark.files import SparkFiles
    except ImportError:
        return None
    if not SparkFiles._is_running_on_worker:
        return None
    return SparkFiles.get(handle)
