"""Expressions lance_ops builds, as Spark SQL text where it can be.

On a classic session every ``pyspark.sql.functions`` call and Column method
is a JVM round trip or several -- with DataFrame debugging on (Spark 4's
default) each also captures the Python call stack for the JVM: ``F.col``
costs ~13 round trips, ``F.when`` ~33, ``.cast`` ~21, while ``F.expr`` of a
whole ``CASE WHEN`` costs 3. A merge builds a projection of one ``CASE`` per
column: built from ``F`` calls that is hundreds of round trips, most of the
driver's time in a selective merge. So the pieces here are SQL text when
every input is text (a user's SQL string, a column name) -- Spark parses it
once -- and Columns only where the caller gave a Column object (whose SQL
cannot be recovered exactly). Same expressions either way: a SQL string
given by the user is embedded in parentheses on lines of its own (a trailing
``--`` comment ends with its line), ``CAST`` is ``Column.cast``'s ``Cast``.
"""
from __future__ import annotations

from typing import Union

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .frames import as_column
from .frames import select_exprs as select  # noqa: F401  (``frame.select(items)``, text in one call)

#: SQL text or a Column.
Expr = Union[str, Column]

#: Types whose ``simpleString`` is also their SQL name (for ``CAST``).
_SQL_NAMED = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
              T.DecimalType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType)


def quoted(name: str) -> str:
    """``name`` as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str, qualifier: str | None = None) -> str:
    """A column reference (``t.`id```)."""
    return (f"{quoted(qualifier)}." if qualifier else "") + quoted(name)


def _sql(e: str) -> str:
    return f"(\n{e}\n)"


def _texts(*es) -> bool:
    return all(isinstance(e, str) for e in es if e is not None)


def _joined(word: str, es: list, combine) -> Expr:
    if _texts(*es):
        return f" {word} ".join(_sql(e) for e in es)
    out = as_column(es[0])
    for e in es[1:]:
        out = combine(out, as_column(e))
    return out


def and_(*es: Expr | None) -> Expr | None:
    """The conjunction of the given pieces (None ones left out; None if none)."""
    es = [e for e in es if e is not None]
    if not es:
        return None
    return es[0] if len(es) == 1 else _joined("AND", es, lambda x, y: x & y)


def or_(*es: Expr) -> Expr:
    """The disjunction of the given pieces."""
    return _joined("OR", list(es), lambda x, y: x | y)


def case_when(branches: list[tuple[Expr, Expr]], default: Expr | None = None) -> Expr:
    """``CASE WHEN c THEN v ... [ELSE default] END`` (null when no branch holds)."""
    if _texts(*[x for b in branches for x in b], default):
        body = " ".join(f"WHEN {_sql(c)} THEN {_sql(v)}" for c, v in branches)
        return f"CASE {body}" + (f" ELSE {_sql(default)}" if default is not None else "") + " END"
    out = None
    for c, v in branches:
        out = F.when(as_column(c), as_column(v)) if out is None else out.when(as_column(c), as_column(v))
    return out if default is None else out.otherwise(as_column(default))


def cast(e: Expr, dtype: T.DataType) -> Expr:
    """``CAST(e AS dtype)``."""
    if isinstance(e, str) and _sql_named(dtype):
        return f"CAST({_sql(e)} AS {dtype.simpleString()})"
    return as_column(e).cast(dtype)


def null_of(dtype: T.DataType) -> Expr:
    """A typed null."""
    return f"CAST(NULL AS {dtype.simpleString()})" if _sql_named(dtype) else F.lit(None).cast(dtype)


def aliased(e: Expr, name: str) -> Expr:
    """``e AS name``."""
    return f"{_sql(e)} AS {quoted(name)}" if isinstance(e, str) else as_column(e).alias(name)


def _sql_named(dtype: T.DataType) -> bool:
    return isinstance(dtype, _SQL_NAMED) or dtype == T.StringType()
