"""The commands that need no Spark: they read and commit metadata through
:class:`lance_ops.Table` (no JVM, no pyspark import), and the dry runs of the
Spark commands, answered from the manifests.

Each command is ``fn(job, core) -> (status, report)`` where ``core`` is the
table opened by the runner (so a wrong path fails before anything else) and
``status`` is :data:`DONE` or :data:`NOOP`.
"""
from __future__ import annotations

from .args import source_columns

DONE, NOOP, FAILED = "done", "noop", "failed"


def policy(args, entry: dict):
    """The health policy: per-table entries of ``--tables`` override the
    command line."""
    from ..txn.health import Policy

    target = getattr(args, "target_rows", None) or 1024 * 1024

    def pick(key, default):
        if entry.get(key) is not None:
            return entry[key]
        v = getattr(args, key, None)
        return default if v is None else v

    return Policy(
        small_fragment_rows=int(pick("small_fragment_rows", target // 2)),
        max_small_share=float(pick("max_small_share", 0.3)),
        max_deleted_ratio=float(pick("max_deleted_ratio", 0.1)),
        max_versions=int(pick("max_versions", 20)),
        retention_hours=float(pick("retention_hours", 168.0)),
    )


def health(job, core):
    from ..txn.health import health as table_health
    from ..txn.health import maintenance_plan

    p = policy(job.args, job.entry)
    h = table_health(core.snapshot, p)
    return DONE, {"health": h, "plan": maintenance_plan(h, p)}


def history(job, core):
    return DONE, {"history": core.history(job.args.limit)}


def detail(job, core):
    if job.args.version is not None:
        core = type(core)(core.uri, job.opts, version=_version_arg(job.args.version))
    return DONE, {"detail": core.detail()}


def tags(job, core):
    args = job.args
    if args.create:
        core.createTag(args.create, _version_arg(args.version) if args.version is not None else None)
    elif args.delete:
        core.deleteTag(args.delete)
    return DONE, {"tags": core.listTags(details=True)}


def properties(job, core):
    from .args import pairs

    args = job.args
    changed = False
    to_set = pairs(args.set, "--set")
    if to_set:
        core.setProperties(to_set, commitProperties=job.props)
        changed = True
    if args.unset:
        present = [k for k in args.unset if k in core.properties()]
        if present:
            core.unsetProperties(present, commitProperties=job.props)
            changed = True
    return (DONE if changed or not (to_set or args.unset) else NOOP), {"properties": core.properties()}


def restore(job, core):
    info = core.restoreToVersion(_version_arg(job.args.version), commitProperties=job.props)
    return DONE, commit_report(info)


def vacuum(job, core):
    args = job.args
    removed = core.vacuum(args.retention_hours, dryRun=args.dry_run, enforceRetentionDuration=not args.no_retention_check)
    return (DONE if removed else NOOP), {"removedFiles": len(removed), "files": removed[:100]}


# ------------------------------------------------------- dry runs, metadata only
def compact_dry_run(job, core):
    from ..txn.health import Policy
    from ..txn.health import health as table_health

    h = table_health(core.snapshot, Policy(small_fragment_rows=max(1, job.args.target_rows // 2)))
    would = h["numSmallFragments"] >= 2 or h["numDeletedRows"] > 0
    return (DONE if would else NOOP), {"health": h}


def maintain_plan(job, core) -> tuple[dict, dict]:
    from ..txn.health import health as table_health
    from ..txn.health import maintenance_plan

    p = policy(job.args, job.entry)
    h = table_health(core.snapshot, p)
    return h, maintenance_plan(h, p)


def backfill_dry_run(job, core, source, output_schema):
    from ..txn.watermarks import feature_status

    status = {n: feature_status(core.snapshot, n) for n in source_columns(source, output_schema)}
    report = {"featureStatus": status}
    pending = any(s["pending"] for s in status.values()) or bool(job.args.where)
    if job.args.fill_nulls:
        report["note"] = "NULL values are found by a scan: a dry run counts only fragments lacking the column"
        pending = True
    return (DONE if pending else NOOP), report


def add_columns_dry_run(job, core, source, output_schema):
    names = source_columns(source, output_schema)
    existing = [n for n in names if n in core.snapshot.schema.names]
    if existing:
        from ..errors import SchemaMismatchError

        raise SchemaMismatchError(f"column(s) {existing} already exist in {core.uri}")
    return DONE, {"wouldAdd": names}


# ------------------------------------------------------------------ helpers
def _version_arg(v):
    """A version number or a tag name, as typed."""
    return int(v) if isinstance(v, str) and v.isdigit() else v


def commit_report(info) -> dict:
    if info is None:
        return {"version": None}
    return {"version": info.version, "operation": info.operation, "metrics": info.metrics, "retries": info.retries}


#: command -> the function for the commands that never need Spark.
COMMANDS = {
    "health": health,
    "history": history,
    "detail": detail,
    "tags": tags,
    "properties": properties,
    "restore": restore,
    "vacuum": vacuum,
}
