"""Errors that name what the user wrote.

* A table a statement names that exists nowhere -- not a Lance table by
  path or name, not a Spark table or view -- is a ``TableNotFoundError``
  naming it (with close names), checked before the statement runs: Spark
  would otherwise answer ``DESCRIBE HISTORY evnts`` with "the table or view
  HISTORY cannot be found" and ``OPTIMIZE evnts`` with a syntax error.
* Spark's analysis errors keep their class (``AnalysisException``, its
  error class and parameters) with a cleaned message: no internal view
  names (``_pyspark_<hex>``, placeholders), no metadata columns
  (``_rowid``, ``_rowaddr``, lineage) among "did you mean" suggestions
  unless the statement uses them, no logical plan dump.
* One log record per failed statement (``lance_ops.sql``, from
  :func:`lance_ops.sql`): PySpark's own "query context" records (a JSON
  line with the JVM stack trace, for every analysis error, including the one
  lance_ops re-asks Spark to get better suggestions) are held back while a
  statement runs in this thread.
"""
from __future__ import annotations

import contextlib
import difflib
import logging
import re
import threading

from sqlglot import exp

from ..errors import TableNotFoundError

METADATA = ("_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version")
_INTERNAL_VIEW = re.compile(r"`?_pyspark_[0-9a-f]{32}`?\.?")
_PLACEHOLDER = re.compile(r"`?__lance_ops_\d+__`?\.?")
_SUGGESTIONS = re.compile(r"(Did you mean one of the following\? \[)([^\]]*)(\])")
_PLAN = re.compile(r";\s*line \d+ pos \d+;.*", re.S)


def _tables(node: exp.Expr) -> list[exp.Table]:
    """The tables a statement reads or writes that must exist: not a CREATE
    or DROP target, not the new name of a RENAME, not a CTE name, not a
    table function."""
    if isinstance(node, exp.Drop):
        return []
    if isinstance(node, exp.Alter):
        return [node.this] if isinstance(node.this, exp.Table) else []
    if isinstance(node, exp.Create):
        node = node.args.get("expression")
        if node is None:
            return []
    ctes = {c.alias_or_name.lower() for c in node.find_all(exp.CTE)}
    out = []
    for t in node.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier):
            continue
        if t.args.get("db") is None and t.name.lower() in ctes:
            continue
        out.append(t)
    return out


def _spark_has(spark, table: exp.Table) -> bool:
    parts = [p.name for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p is not None]
    try:
        return bool(spark.catalog.tableExists(".".join(parts)))
    except Exception:
        return True  # a name Spark cannot even look up: let Spark say why


def _known_names(spark, resolver) -> list[str]:
    names = set(resolver.bindings)
    try:
        names |= {t.name for t in spark.catalog.listTables()}
    except Exception:
        pass
    return sorted(names)


def check_tables_exist(spark, resolver, node, table: exp.Table | None = None) -> None:
    """TableNotFoundError naming the first table of the statement that is
    neither a Lance table nor a Spark table or view. ``table``: the target of
    one of our statements (OPTIMIZE, VACUUM, DESCRIBE HISTORY ...)."""
    candidates = [table] if table is not None else _tables(node)
    for t in candidates:
        if t is None or not isinstance(t, exp.Table):
            continue
        if resolver.lance(t) is not None or _spark_has(spark, t):
            continue
        if t.args.get("db") is not None and t.args["db"].name.lower() == "lance":
            continue  # a path: opening it says "no Lance table at <path>"
        name = ".".join(p.name for p in (t.args.get("catalog"), t.args.get("db"), t.this) if p is not None)
        close = difflib.get_close_matches(t.name, _known_names(spark, resolver), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise TableNotFoundError(
            f"table {name} not found: no Lance table is registered by that name (CREATE TABLE {t.name} USING "
            f"lance LOCATION '<uri>', or lance.`<uri>` for a path) and there is no Spark table or view {name}.{hint}"
        )


def clean_message(message: str, statement: str) -> str:
    """Spark's analysis message without internal names, metadata columns the
    statement does not use, or the plan dump."""
    used = {m for m in METADATA if m in statement.lower()}

    def suggestions(m):
        items = [s.strip() for s in m.group(2).split(",") if s.strip()]
        kept = [s for s in items if s.strip("`").rsplit("`.`", 1)[-1].strip("`") not in METADATA
                or s.strip("`").rsplit("`.`", 1)[-1].strip("`") in used]
        return f"{m.group(1)}{', '.join(kept)}{m.group(3)}"

    out = _PLAN.sub("", message)
    out = _INTERNAL_VIEW.sub("", out)
    out = _PLACEHOLDER.sub("", out)
    out = _SUGGESTIONS.sub(suggestions, out)
    out = out.replace("Did you mean one of the following? []. ", "").replace("Did you mean one of the following? []", "")
    return out.strip()


_SUBCLASSES: dict[type, type] = {}


def with_message(e: BaseException, message: str) -> BaseException:
    """``e`` itself (same class family, error class, parameters) showing
    ``message``: its class becomes a subclass of its own class whose text is
    ``message``."""
    cls = type(e)
    sub = _SUBCLASSES.get(cls)
    if sub is None:
        sub = type(cls.__name__, (cls,), {
            "__module__": cls.__module__,
            "__str__": lambda self: self._lance_ops_message,
            "getMessage": lambda self: self._lance_ops_message,
        })
        _SUBCLASSES[cls] = sub
    try:
        e.__class__ = sub
        e._lance_ops_message = message
        e.args = (message,)
        return e
    except TypeError:
        return e


def is_analysis_error(e: BaseException) -> bool:
    try:
        from pyspark.errors import AnalysisException
    except ImportError:
        return False
    return isinstance(e, AnalysisException)


def cleaned(e: BaseException, statement: str) -> BaseException:
    """An analysis error with :func:`clean_message`'s message (others as they are)."""
    if not is_analysis_error(e):
        return e
    try:
        text = e.getMessage() if hasattr(e, "getMessage") else str(e)
    except Exception:
        text = str(e)
    new = clean_message(text or str(e), statement)
    return with_message(e, new) if new != str(e) else e


_running = threading.local()
_QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_installed = False


class _HoldBack(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_running, "active", False)


def _install() -> None:
    global _installed
    if _installed:
        return
    try:
        from pyspark.logger import PySparkLogger  # (its own class: a plain getLogger could shadow it)
    except ImportError:
        _installed = True
        return
    for name in _QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).addFilter(_HoldBack())
    _installed = True


@contextlib.contextmanager
def statement_running():
    """While a statement runs in this thread: PySpark's query-context log
    records are held back (the statement's error is reported once)."""
    _install()
    before = getattr(_running, "active", False)
    _running.active = True
    try:
        yield
    finally:
        _running.active = before
