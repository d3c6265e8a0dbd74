"""Enforcing table CHECK constraints inside the write tasks.

Every lance_ops write whose rows cross Spark (append/overwrite from a
DataFrame, update, merge, rewriteColumns, addColumns and backfill from SQL or
through the Spark path) adds one boolean column per constraint to the very
projection that feeds its writer task::

    __lance_ck_0 = coalesce(<constraint SQL over the rows as written>, false)

Spark evaluates it (its own semantics and errors) in the same stage that
produces the rows -- no second scan -- and the executor task that writes a
batch calls :func:`enforce` before writing it: a row whose column is false
(the expression was false *or NULL*: Delta's rule, a CHECK must be true)
raises :class:`~lance_ops.errors.ConstraintViolationError` naming the
constraint, its SQL and a sample row. The error reaches the driver as itself
(``executor_task``); the pipeline commits nothing and removes the files the
job wrote.
"""
from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConstraintViolationError
from ..txn.constraints import constraints_of

CHECK_PREFIX = "__lance_ck_"


@dataclass(frozen=True)
class ConstraintSpec:
    """One constraint as the tasks see it: its name, SQL and check column."""

    name: str
    expression: str
    column: str


def specs_for(config_or_snapshot) -> list[ConstraintSpec]:
    """Check columns for the constraints of a table config (or a snapshot)."""
    config = getattr(getattr(config_or_snapshot, "manifest", None), "config", config_or_snapshot)
    return [ConstraintSpec(n, sql, f"{CHECK_PREFIX}{i}") for i, (n, sql) in enumerate(constraints_of(config).items())]


def check_columns(specs: list[ConstraintSpec]):
    """The Spark Columns computing the checks over a frame whose columns are
    the rows as they will be written."""
    from pyspark.sql import functions as F

    return [F.coalesce(F.expr(s.expression).cast("boolean"), F.lit(False)).alias(s.column) for s in specs]


def with_checks(frame, specs: list[ConstraintSpec], missing_types: dict | None = None):
    """``frame`` plus the check columns evaluated over its rows (callers put
    the new values in place first, e.g. ``frame.withColumns(new_values)``);
    columns the frame lacks (an append leaving out nullable columns) are
    NULL of their ``missing_types`` for the evaluation only."""
    if not specs:
        return frame
    from pyspark.sql import functions as F

    cols = frame.columns
    missing = {n: F.lit(None).cast(t) for n, t in (missing_types or {}).items() if n not in cols}
    evaluated = frame.withColumns(missing) if missing else frame
    return evaluated.select(*[F.col(f"`{c}`") for c in cols], *check_columns(specs))


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, (datetime.date, datetime.datetime, decimal.Decimal)):
        return str(v)
    if isinstance(v, bytes):
        return v[:64].hex()
    return str(v)


def enforce(batch: pa.RecordBatch, specs: list[ConstraintSpec], mask=None, row_columns=None) -> None:
    """Executor side: raise ConstraintViolationError if a row of ``batch``
    (among ``mask``, if given: the rows actually written) fails a check.
    ``row_columns`` are the columns shown in the sample row (default: every
    column that is not a check column or internal)."""
    names = batch.schema.names
    for s in specs:
        if s.column not in names:
            continue
        ok = pc.fill_null(batch.column(names.index(s.column)), False)
        bad = pc.invert(ok)
        if mask is not None:
            bad = pc.and_(bad, mask)
        if not pc.any(bad).as_py():
            continue
        i = pc.index(bad, True).as_py()
        cols = row_columns or [n for n in names if not n.startswith("__lance") and not n.startswith("_lance")]
        row = {c: _text(batch.column(names.index(c))[i].as_py()) for c in cols if c in names}
        shown = ", ".join(f"{k}: {v}" for k, v in row.items())
        raise ConstraintViolationError(
            f"CHECK constraint {s.name} ({s.expression}) violated by row with values: {shown}",
            constraint=s.name, expression=s.expression, row=row,
        )
