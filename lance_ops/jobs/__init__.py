"""Scheduled jobs over Lance tables, installed with the package:
``lance-ops COMMAND --table URI [options]`` (the console script),
``python -m lance_ops.jobs COMMAND ...``, or through ``spark-submit`` with the
installed entry file (``lance-ops --print-entry-file``)::

    spark-submit --master spark://host:7077 "$(lance-ops --print-entry-file)" compact --table s3://b/t.lance

Commands that run Spark work (a session is started only when needed):

    compact      compact small fragments / materialize deletions
    add-columns  add columns: --sql NAME=EXPR ... or --function MODULE:FN
    backfill     fill existing columns where missing (--fill-nulls: also NULL rows)
    maintain     health check -> compact (Spark) and vacuum only when the policy says so
    validate     CHECK constraints, --not-null, a great_expectations suite (--feature: new rows)

Commands that never start a JVM (:class:`lance_ops.Table`, metadata only):

    health  history  detail  tags  properties  restore  vacuum
    (and --dry-run of compact, add-columns, backfill, maintain)

Tables: ``--table URI`` (repeatable; a bare URI works too) or ``--tables FILE``
(YAML or JSON: a list of URIs, or of objects with ``uri`` and per-table
options such as ``storage_options``). Storage options: ``--option k=v``, the
environment (``LANCE_OPS_STORAGE_<KEY>``) or ``--conf
spark.lance_ops.storage.<key>=v``.

Output: stdout carries one JSON document and nothing else -- ``command``,
``status`` (``done`` / ``noop`` / ``failed``), ``exitCode``, ``sparkStarted``
and per table its status, versions before and after, metrics and seconds.
Progress lines, warnings and Spark's log go to stderr (under ``spark-submit``
too). Exit codes: 0 done (also nothing to do: ``"status": "noop"``), 1 a
table failed, 2 usage error (nothing ran; the message is on stderr).
"""
from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def entry_file() -> str:
    """The file ``spark-submit`` runs as the application: this package's
    ``__main__.py``, wherever lance_ops is installed."""
    from .run import entry_file as path

    return path()


def main(argv=None, prog: str = "lance-ops") -> int:
    """Run a jobs command in this process; returns the exit code (the JSON
    summary goes to ``sys.stdout``)."""
    from .run import main as run_main

    return run_main(argv, prog)


def cli() -> None:
    """The ``lance-ops`` console script."""
    from .run import cli as run_cli

    run_cli("lance-ops")


__all__ = ["main", "cli", "entry_file", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]
