"""SQL front end: Delta's statements on Lance tables.

    import lance_ops
    lance_ops.sql(spark, "DELETE FROM lance.`/data/events.lance` WHERE ts < '2024-01-01'")
    lance_ops.sql(spark, "SELECT user_id, sum(v) FROM lance.`/data/events.lance` GROUP BY 1")

:func:`sql` parses the whole text first (:mod:`.grammar`), then runs each
statement (:mod:`.script`, :mod:`.execute`), queries with every Lance table read pruned to the
columns it needs (:mod:`.query`). ``%load_ext lance_ops`` adds the
``%%lance_sql`` cell magic (:mod:`.magic`). Nothing here is imported by
``import lance_ops``: sqlglot and pyspark load on first use.
"""
from __future__ import annotations


def sql(spark, text: str, tables: dict | None = None, commitProperties: dict | None = None, allResults: bool = False):
    """Run one SQL statement or a ``;``-separated script; return the last
    statement's result DataFrame (``allResults=True``: a list, one per
    statement).

    ``tables`` binds names to Lance tables (URIs or ``LanceTable`` handles)
    for this call; ``commitProperties`` go into every commit the statements
    make (``userMetadata`` in DESCRIBE HISTORY). The whole text is parsed
    before anything runs (``SqlParseError`` with line, column and token);
    each statement is analyzed completely before it runs.
    """
    from ..table import LanceTable
    from .script import run_script

    return run_script(spark, text, LanceTable, tables, commitProperties, allResults)


def load_ipython_extension(ipython) -> None:
    """``%load_ext lance_ops``: registers the ``%%lance_sql`` cell magic."""
    from .magic import register_magics

    register_magics(ipython)


__all__ = ["sql", "load_ipython_extension"]


def _make_callable() -> None:
    """``lance_ops.sql`` is both this package and the entry point: once the
    package is imported, the attribute ``lance_ops.sql`` is the module, so the
    module itself is made callable (``lance_ops.sql(spark, text)``)."""
    import sys
    import types

    class _SqlModule(types.ModuleType):
        def __call__(self, spark, text, tables=None, commitProperties=None, allResults=False):
            return sql(spark, text, tables=tables, commitProperties=commitProperties, allResults=allResults)

    sys.modules[__name__].__class__ = _SqlModule


_make_callable()
