"""create / append / overwrite: executors write fragments, the driver commits.

The DataFrame is written with ``mapInArrow``: each task streams its partition
into data files of at most ``maxRowsPerFragment`` rows and returns the
fragments' metadata (a few hundred bytes each); the driver collects only that
metadata and stages one Append or Overwrite transaction for the commit
pipeline.

The table's CHECK constraints (of the version written on) are evaluated by
Spark as extra boolean columns of the same projection and enforced by the
writing task before a batch is written (:mod:`lance_ops.spark.constraints`).
``allowMissingColumns`` appends leave out nullable columns: the new
fragments have no data file for them and read them as NULL.
"""
from __future__ import annotations

from ..errors import ArrowEvalFallback
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from ..spark.constraints import specs_for, with_checks
from ..spark.errors import executor_errors
from ..spark.journal import journaled
from ..spark.types import spark_arrow_schema, spark_schema
from ..spark.write import FRAGMENT_COLUMN, FRAGMENTS_SCHEMA, map_in_arrow_writer, plan_write, staged_write
from ..txn.log import Snapshot
from ..txn.pipeline import StagedCommit
from .common import guarded


def write_dataframe(store, df, mode: str, *, stable_row_ids: bool = True, max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
                    planned: list | None = None, properties: dict | None = None, allow_missing: bool = False):
    """``prepare(snapshot) -> StagedCommit`` writing ``df`` (``snapshot`` None:
    no table yet). ``planned`` (if given) receives each attempt's WritePlan;
    ``properties`` (create / overwrite) become the table config in the same
    commit."""

    def prepare(snap: Snapshot | None, arrow: bool = True) -> StagedCommit:
        plan = plan_write(
            store, df.schema, mode, snapshot=snap, stable_row_ids=stable_row_ids,
            max_rows_per_fragment=max_rows_per_fragment, allow_missing=allow_missing,
        )
        rows = df
        if snap is not None:
            plan.checks = specs_for(snap)
            if mode == "overwrite" and plan.checks:
                # (as Delta: the table's constraints outlive an overwrite, so
                # the new schema must keep the columns they use)
                from .constraints import refuse_constrained

                dropped = [n for n in snap.schema.names if n not in df.columns]
                refuse_constrained(df.sparkSession, snap, dropped, "overwrite the table without")
            types = {f.name: f.dataType for f in spark_schema(snap.schema).fields if f.name in plan.missing}
            plan.arrow_checks = arrow_checks(df.sparkSession, snap, plan.checks) if arrow and plan.checks else None
            if plan.arrow_checks is not None:  # the tasks evaluate them: no check columns cross from the JVM
                plan.missing_types = {n: spark_arrow_schema(spark_schema(snap.schema, [n], [])).field(n).type
                                      for n in plan.missing}
            else:
                rows = with_checks(df, plan.checks, types)
        if planned is not None:
            planned.append(plan)
        try:
            with journaled(store, bool(plan.checks)) as token, executor_errors():
                plan.journal = token
                out = rows.mapInArrow(map_in_arrow_writer(plan), FRAGMENTS_SCHEMA).collect()
        except ArrowEvalFallback:  # a row where Spark raises: Spark computes the checks (and raises its error)
            return prepare(snap, arrow=False)
        staged = staged_write(plan, [bytes(r[FRAGMENT_COLUMN]) for r in out], properties)
        if plan.missing:
            staged.parameters["missingColumns"] = ", ".join(plan.missing)
        return guarded(staged, snap)

    return prepare


#: Analyzed constraint trees by (session confs, table columns, constraints):
#: analyzing them is a JVM round trip (~60 ms) that every append would pay.
_CHECK_TREES: dict = {}
_SESSION_CONFS = ("spark.sql.ansi.enabled", "spark.sql.session.timeZone", "spark.sql.legacy.timeParserPolicy")


def arrow_checks(spark, snap: Snapshot, specs) -> dict | None:
    """The constraints as Arrow trees over the rows as written (check column
    -> tree), or None: some are outside the subset proven equal to Spark,
    the session has no analyzed plan (Spark Connect), or Arrow evaluation is
    off -- then Spark computes the check columns. Remembered per session
    confs that change analysis, table columns and constraints."""
    from ..spark.arrowtasks import arrow_values, enabled
    from ..spark.constraints import check_columns
    from .dml import analysis_frame

    if not enabled(spark):
        return None
    key = (tuple(spark.conf.get(c, None) for c in _SESSION_CONFS),
           tuple((f.name, f.dataType.simpleString(), f.nullable) for f in spark_schema(snap.schema).fields),
           tuple((s.name, s.expression, s.column) for s in specs))
    if key not in _CHECK_TREES:
        found = arrow_values(spark, snap, analysis_frame(spark, snap).select(*check_columns(specs)), False,
                             [s.column for s in specs])
        if len(_CHECK_TREES) >= 64:
            _CHECK_TREES.clear()
        _CHECK_TREES[key] = dict(found.values) if found is not None else None
    return _CHECK_TREES[key]
