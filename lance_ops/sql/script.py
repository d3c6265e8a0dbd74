"""Running a SQL text: parse it whole, then run its statements in order.

The statements run on handles of the ``LanceTable`` class the caller gives
(:func:`lance_ops.sql` and ``LanceTable.sql`` give theirs), so nothing here
imports :mod:`lance_ops.table`: the facade's ``sql`` method can run this
without a cycle between the two.
"""
from __future__ import annotations

import logging

from ..spark.datasource import register
from .diagnostics import statement_running
from .execute import Executor
from .grammar import parse_script


def run_script(spark, text: str, table_class, tables: dict | None = None, commit_properties: dict | None = None,
               all_results: bool = False):
    """The last statement's result DataFrame (``all_results``: a list, one
    per statement); see :func:`lance_ops.sql`."""
    statements = parse_script(text)
    register(spark)
    executor = Executor(spark, table_class, tables, commit_properties)
    out = []
    for n, stmt in enumerate(statements, 1):
        try:
            with statement_running():
                out.append(executor.run(stmt))
        except Exception as e:
            # one record per failed statement (the exception carries the rest)
            where = f"statement {n} of {len(statements)}, " if len(statements) > 1 else ""
            logging.getLogger("lance_ops.sql").error("%sline %d: %s: %s", where, stmt.line, type(e).__name__,
                                                     str(e).split("\n")[0][:500])
            raise
    if all_results:
        return out
    return out[-1] if out else None
