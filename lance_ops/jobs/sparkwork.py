"""The commands that run Spark work: compact, add-columns, backfill, the
compaction of maintain, validate. Each is ``fn(job, core) -> (status,
report)``; the Spark session is created on first use (``job.spark()``), so
a dry run, or a maintain whose plan is only a vacuum, starts no JVM."""
from __future__ import annotations

import logging

from .args import check_retention, column_source, source_columns
from .metadata import (
    DONE,
    FAILED,
    NOOP,
    add_columns_dry_run,
    backfill_dry_run,
    commit_report,
    compact_dry_run,
    policy,
)
from .metadata import maintain_plan as plan_maintenance

log = logging.getLogger("lance_ops")

#: The lineage column a feature's rows are selected by.
CREATED = "_row_created_at_version"


def _handle(job, version=None):
    from ..table import LanceTable

    return LanceTable(job.spark(), job.uri, version=version, storage_options=job.opts)


def _committed(t, returned):
    """The CommitInfo of the operation just run on ``t`` (whose
    ``lastCommit`` was cleared before): what it returned, or the handle's last
    commit (operations that return a DataFrame, Delta-style)."""
    from ..results import CommitInfo

    return returned if isinstance(returned, CommitInfo) else t.table.lastCommit


def compact(job, core):
    if job.args.dry_run:
        return compact_dry_run(job, core)
    t = _handle(job)
    before = t.table.version
    t.table.lastCommit = None
    returned = t.optimize().executeCompaction(
        targetRowsPerFragment=job.args.target_rows, materializeDeletionsThreshold=job.args.deletion_threshold,
        commitProperties=job.props,
    )
    info = _committed(t, returned)
    report = commit_report(info)
    return (DONE if info is not None and info.version is not None and info.version > before else NOOP), report


def add_columns(job, core):
    source, read_cols, out_schema = column_source(job.args)
    if job.args.dry_run:
        return add_columns_dry_run(job, core, source, out_schema)
    t = _handle(job)
    info = t.addColumns(source, readColumns=read_cols, outputSchema=out_schema, commitProperties=job.props,
                        expectations=job.args.expectations)
    return DONE, commit_report(info)


def backfill(job, core):
    from ..txn.watermarks import data_version, feature_status

    args = job.args
    source, read_cols, out_schema = column_source(args)
    if args.dry_run:
        return backfill_dry_run(job, core, source, out_schema)
    names = source_columns(source, out_schema)
    status_before = {n: feature_status(core.snapshot, n) for n in names}
    report: dict = {"featureStatus": status_before, "dataVersion": data_version(core.snapshot)}
    where = args.where or None
    if where and "{watermark}" in where:
        marks = [s["watermark"] for s in status_before.values()]
        where = where.replace("{watermark}", str(min((m or 0) for m in marks)))
    if where:
        report["where"] = where
    t = _handle(job)
    info = t.backfill(source, readColumns=read_cols, outputSchema=out_schema, where=where,
                      fragmentsPerCommit=args.fragments_per_commit, expectations=args.expectations,
                      commitProperties=job.props, advanceWatermark=not args.no_watermark, fillNulls=args.fill_nulls)
    report.update(commit_report(info))
    return (DONE if info.version is not None else NOOP), report


def maintain(job, core):
    args = job.args
    h, plan = plan_maintenance(job, core)
    report: dict = {"health": h, "plan": plan}
    if not (plan["compact"] or plan["vacuum"]):
        return NOOP, report
    hours = policy(args, job.entry).retention_hours
    check_retention(hours, args.no_retention_check, "retention_hours of the table entry")
    if args.dry_run:
        return DONE, report
    did = False
    if plan["compact"]:
        t = _handle(job)
        before = t.table.version
        t.table.lastCommit = None
        returned = t.optimize().executeCompaction(targetRowsPerFragment=args.target_rows, commitProperties=job.props)
        info = _committed(t, returned)
        report["compaction"] = commit_report(info)
        did = info is not None and info.version is not None and info.version > before
        core.refresh()
    removed = core.vacuum(hours, enforceRetentionDuration=not args.no_retention_check)
    report["vacuum"] = {"removedFiles": len(removed)}
    return (DONE if did or removed else NOOP), report


# ------------------------------------------------------------------- validate
def validate(job, core):
    """Check rows: the table's CHECK constraints, NOT NULL columns and a
    great_expectations suite, over all rows, ``--where`` rows, or -- with
    ``--feature COL`` -- the rows created after COL's watermark up to the data
    version checked (``--through-data-version``, default the table's); then,
    with ``--advance-watermark``, move the watermark there when everything
    passed. Fails (exit 1) when a check fails."""
    from pyspark.sql import functions as F

    from ..txn.watermarks import data_version, watermark, watermark_key

    args = job.args
    t = _handle(job, version=_version(args.version))
    snap = t.table.snapshot
    scope = [args.where] if args.where else []
    not_null = list(dict.fromkeys(args.not_null + ([args.feature] if args.feature else [])))
    for c in not_null:
        if not snap.schema.has(c):
            from ..errors import SchemaMismatchError

            raise SchemaMismatchError(f"--not-null {c}: no such column in {job.uri} (columns: {snap.schema.names})")
    report: dict = {"version": snap.version}
    through = None
    if args.feature:
        mark = watermark(snap, args.feature)
        through = args.through_data_version if args.through_data_version is not None else data_version(snap)
        report.update(feature=args.feature, watermark=mark, throughDataVersion=through)
        if snap.stable_row_ids:  # rows know their version: check only the new ones
            lo = f"{CREATED} > {mark} AND " if mark is not None else ""
            scope.append(f"{lo}{CREATED} <= {through}")
    where = " AND ".join(f"({w})" for w in scope) or None
    report["where"] = where
    df = t.toDF(withLineage=bool(where and "_row_" in where))
    if where:
        df = df.where(where)
    constraints = {} if args.no_constraints else t.table.constraints()
    aggs = [F.count(F.lit(1)).alias("rows")]
    aggs += [F.sum(F.when(F.coalesce(F.expr(e), F.lit(False)), 0).otherwise(1)).alias(f"c{i}")
             for i, e in enumerate(constraints.values())]
    aggs += [F.sum(F.when(F.col(f"`{c}`").isNull(), 1).otherwise(0)).alias(f"n{i}") for i, c in enumerate(not_null)]
    counts = df.agg(*aggs).head()
    report["rowsChecked"] = int(counts["rows"])
    failed = []
    if constraints:
        report["constraints"] = {n: int(counts[f"c{i}"] or 0) for i, n in enumerate(constraints)}
        failed += [f"CHECK {n} ({constraints[n]}): {v} row(s) violate it" for n, v in report["constraints"].items() if v]
    if not_null:
        report["nullRows"] = {c: int(counts[f"n{i}"] or 0) for i, c in enumerate(not_null)}
        failed += [f"{c} IS NULL in {v} row(s)" for c, v in report["nullRows"].items() if v]
    if args.expectations:
        from ..ops.quality import summary, validate_frame

        result = validate_frame(df, args.expectations)
        report["validation"] = summary(result)
        if not result.success:
            failed.append(f"expectations {report['validation']['failed']}")
    if not (constraints or not_null or args.expectations):
        report["note"] = "nothing to check: the table has no CHECK constraints and no --not-null/--expectations given"
    report["success"] = not failed
    if failed:
        report["failures"] = failed
        for f in failed:
            log.error("validate %s: %s", job.uri, f)
        return FAILED, report
    if args.advance_watermark and through is not None:
        current = watermark(core.refresh().snapshot, args.feature)
        if current is None or current < through:
            info = core.setProperties({watermark_key(args.feature): str(through)}, commitProperties=job.props)
            report["watermarkCommitted"] = info.version
        report["watermark"] = max(through, current or through)
    return DONE, report


def _version(v):
    return int(v) if isinstance(v, str) and v.isdigit() else v


COMMANDS = {
    "compact": compact,
    "add-columns": add_columns,
    "backfill": backfill,
    "maintain": maintain,
    "validate": validate,
}
