"""Spark's Python worker daemon, with lance_ops' executor imports done once.

Spark starts a daemon per executor (``python -m pyspark.daemon``) and forks a
Python worker from it for each task that finds no idle worker to reuse. The
stock daemon imports nothing before forking, so each new worker imports
pyarrow, pylance's file codec and lance_ops' task modules again (~0.5 s of
CPU), and a reused worker runs a full ``gc.collect()`` after every task over
all of those modules' objects (~20 ms a task). This daemon imports them once,
then freezes them out of the collector (``gc.freeze()``, what the Python docs
advise before forking: the children's collections skip them and their pages
stay shared). ``spark.python.daemon.module = lance_ops.spark.daemon`` selects
it; lance_ops' local sessions set it when their workers run this interpreter
(:func:`lance_ops.spark.workers.daemon_conf`; docs/getting-started.md).

Importing before the fork is safe for these modules: they start no thread that
holds a lock across it -- pyarrow's jemalloc background thread and Arrow's
thread pools reinitialise in a forked child (at-fork handlers), and pylance's
runtime threads start on first use, in the worker. pylance warns "lance is not
fork-safe" on every fork once it is imported, used or not; the daemon never
uses it, so it silences that one warning in itself (its workers, which do use
pylance, keep it).
"""
from __future__ import annotations

import gc
import os
import sys
import warnings
import zipimport

#: pylance's at-fork warning (lance/__init__.py), true of a process that ran
#: pylance, not of this daemon, which only imported it.
FORK_WARNING = "lance is not fork-safe"


def _preload() -> None:
    import lance.file  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.ipc  # noqa: F401
    import pyspark.sql.pandas.serializers  # noqa: F401
    import pyspark.worker  # noqa: F401

    import lance_ops.spark.arrowtasks  # noqa: F401
    import lance_ops.spark.rowchanges  # noqa: F401
    import lance_ops.spark.write  # noqa: F401

    # A new worker adds Spark's files directory to sys.path and calls
    # importlib.invalidate_caches(), which re-reads the zip directory of every
    # zipimporter cached for a package inside pyspark.zip; keep the archives'
    # own importers only (the rest are rebuilt from the cached directory).
    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter) and path not in sys.path:
            del sys.path_importer_cache[path]
    gc.collect()
    gc.freeze()


def _quiet_fork_warning() -> None:
    """Ignore pylance's fork warning in the daemon; a forked worker drops the
    filter again (it runs pylance and may fork in user code)."""
    warnings.filterwarnings("ignore", message=FORK_WARNING, category=UserWarning)
    entry = warnings.filters[0]

    def restore() -> None:
        if entry in warnings.filters:
            warnings.filters.remove(entry)
            # (CPython's hook that drops cached decisions; absent elsewhere)
            getattr(warnings, "_filters_mutated", lambda: None)()

    os.register_at_fork(after_in_child=restore)


if __name__ == "__main__":
    try:
        _quiet_fork_warning()
        _preload()
    except ImportError:
        pass  # the stock daemon's behaviour: each task then fails with its own import error
    from pyspark.daemon import manager

    manager()
