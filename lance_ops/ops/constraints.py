"""addConstraint / dropConstraint: Delta-style CHECK constraints.

``addConstraint(name, sql)`` analyzes the expression (Spark's own error for
bad SQL; it must be boolean), then checks every existing row in one Spark job
-- as Delta does, a constraint that existing rows break is refused, naming how
many and one of them -- and commits an ``UpdateConfig`` setting
``lance_ops.constraint.<name>``. If other writers committed in between, the
pre-commit check validates the table again at the version the constraint is
committed on, so no row that breaks it can slip in unseen (writes that started
before it see the new constraint through their own pre-commit check and are
prepared again).
"""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConstraintViolationError, InvalidArgumentError, SchemaMismatchError
from ..spark.constraints import ConstraintSpec
from ..spark.frames import checked_columns, scan_frame
from ..txn.constraints import check_name, constraint_key, constraints_of
from ..txn.log import Snapshot
from ..txn.operations import UpdateConfig
from ..txn.pipeline import StagedCommit
from .dml import analysis_frame


def violations(spark, snap: Snapshot, spec: ConstraintSpec) -> tuple[int, dict | None]:
    """(number of rows of ``snap`` that break ``spec``, one of them)."""
    cols = checked_columns(spark, snap, [spec])
    frame = scan_frame(spark, snap, cols, ())
    bad = frame.where(~F.coalesce(F.expr(spec.expression).cast("boolean"), F.lit(False)))
    first = bad.limit(1).collect()
    if not first:
        return 0, None
    return bad.count(), {k: (None if v is None else str(v)) for k, v in first[0].asDict().items()}


def add_constraint(spark, snapshot: Snapshot, name: str, expression: str):
    """``prepare(snapshot) -> StagedCommit`` of addConstraint (validated here
    on ``snapshot`` and again at commit time if the table moved)."""
    name = check_name(name)
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidArgumentError("addConstraint needs the constraint's SQL expression, e.g. 'v > 0'")
    if name in constraints_of(snapshot.manifest.config):
        raise InvalidArgumentError(f"constraint {name!r} already exists; drop it first")
    dtype = analysis_frame(spark, snapshot).select(F.expr(expression).alias("c")).schema["c"].dataType
    if not isinstance(dtype, T.BooleanType):
        raise InvalidArgumentError(f"constraint {name!r}: {expression!r} is {dtype.simpleString()}, not boolean")
    spec = ConstraintSpec(name, expression, "")
    validated = {"version": None}

    def validate(snap: Snapshot) -> None:
        if validated["version"] == snap.version:
            return
        n, row = violations(spark, snap, spec)
        if n:
            shown = ", ".join(f"{k}: {v}" for k, v in (row or {}).items())
            raise ConstraintViolationError(
                f"cannot add CHECK constraint {name} ({expression}): {n} row(s) of the table at version "
                f"{snap.version} violate it, e.g. the row with values: {shown}",
                constraint=name, expression=expression, row=row,
            )
        validated["version"] = snap.version

    def check(ctx) -> None:
        if ctx.base is not None:
            validate(ctx.base)

    def prepare(snap: Snapshot) -> StagedCommit:
        if name in constraints_of(snap.manifest.config):
            raise InvalidArgumentError(f"constraint {name!r} already exists; drop it first")
        validate(snap)
        op = UpdateConfig(config_updates=({constraint_key(name): expression}, False))
        return StagedCommit(op, {}, {"name": name, "expr": expression}, checks=[check])

    return prepare


def drop_constraint(snapshot: Snapshot, name: str, if_exists: bool = False):
    name = check_name(name)
    if name not in constraints_of(snapshot.manifest.config):
        if if_exists:
            return None
        raise InvalidArgumentError(f"constraint {name!r} does not exist")

    def prepare(snap: Snapshot) -> StagedCommit | None:
        if name not in constraints_of(snap.manifest.config):
            return None
        op = UpdateConfig(config_updates=({constraint_key(name): None}, False))
        return StagedCommit(op, {}, {"name": name})

    return prepare


def refuse_constrained(spark, snapshot: Snapshot, columns, what: str) -> None:
    """dropColumns / renameColumn refuse columns a constraint references (as
    Delta does): the constraint would break silently."""
    from ..spark.constraints import specs_for

    for spec in specs_for(snapshot):
        used = set(checked_columns(spark, snapshot, [spec]))
        hit = [c for c in columns if c.split(".")[0] in used]
        if hit:
            raise SchemaMismatchError(
                f"cannot {what} column(s) {hit}: CHECK constraint {spec.name} ({spec.expression}) uses them; "
                "drop the constraint first"
            )
