"""Scheduled jobs over Lance tables: ``python -m jobs COMMAND`` (also through
``spark-submit jobs/__main__.py COMMAND``).

    compact      compact small fragments / materialize deletions
    vacuum       remove old versions and unreferenced files
    add-columns  add columns: --sql name=EXPR ... or --function module:fn
    backfill     fill existing columns where missing (--where, batches)
    maintain     health check -> compact and vacuum only when the policy says so
    validate     run a great_expectations suite on the table (or some rows)
    health       the metadata-only health report (no Spark)

Tables: ``--table URI`` (repeatable) or ``--tables FILE`` (YAML or JSON: a list
of URIs, or of objects with ``uri`` and per-table options such as
``storage_options``). Spark: ``--master`` (default ``local[2]``, or what
spark-submit set) and ``--conf k=v``. Storage options: ``--option k=v``, the
environment (``LANCE_OPS_STORAGE_<KEY>``) or ``--conf
spark.lance_ops.storage.<key>=v``.

Output: one JSON summary on stdout (per table: status, versions before and
after, metrics, seconds); progress lines on stderr. Exit code 0 when
something was done, 1 when a table failed, 2 when there was nothing to do.
``--dry-run`` reports what would be done and commits nothing.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time

from .. import log_to_stderr
from ..errors import LanceOpsError
from .table import _json, storage_options

log = logging.getLogger("lance_ops")
OK, FAILED, NOTHING = 0, 1, 2
STORAGE_CONF_PREFIX = "spark.lance_ops.storage."


# ----------------------------------------------------------------- arguments
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", action="append", default=[], metavar="URI", help="table URI (repeatable)")
    p.add_argument("--tables", metavar="FILE", help="YAML or JSON file listing tables")
    p.add_argument("--master", help="Spark master (default local[2], or spark-submit's)")
    p.add_argument("--remote", default=os.environ.get("SPARK_REMOTE"), metavar="sc://HOST:PORT",
                   help="run through a Spark Connect server (default $SPARK_REMOTE; no local JVM needed)")
    p.add_argument("--conf", action="append", default=[], metavar="K=V", help="Spark conf (repeatable)")
    p.add_argument("--option", action="append", default=[], metavar="K=V", help="storage option (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="report what would be done; commit nothing")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="commit property recorded in history() userMetadata (repeatable)")


def _columns_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sql", action="append", default=[], metavar="NAME=EXPR", help="Spark SQL expression per column")
    p.add_argument("--function", metavar="MODULE:FUNCTION", help="Arrow batch function (ship with --py-files)")
    p.add_argument("--read-columns", help="comma-separated input columns of --function")
    p.add_argument("--output-schema", help='DDL of --function\'s output, e.g. "g double"')
    p.add_argument("--expectations", metavar="FILE", help="great_expectations suite (JSON) gating the commit")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jobs", description="Maintenance and feature jobs for Lance tables.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compact", help="compact small fragments, materialize deletions")
    _common(c)
    c.add_argument("--target-rows", type=int, default=1024 * 1024, help="target rows per fragment")
    c.add_argument("--deletion-threshold", type=float, default=0.1, help="materialize deletions above this ratio")
    v = sub.add_parser("vacuum", help="remove old versions and unreferenced files")
    _common(v)
    v.add_argument("--retention-hours", type=float, default=168.0)
    v.add_argument("--no-retention-check", action="store_true", help="allow a retention below 168 hours")
    a = sub.add_parser("add-columns", help="add columns computed from existing ones")
    _common(a)
    _columns_source(a)
    b = sub.add_parser("backfill", help="compute existing columns where they are missing")
    _common(b)
    _columns_source(b)
    b.add_argument("--where", help="only rows matching this Spark SQL condition ({watermark} is replaced)")
    b.add_argument("--fragments-per-commit", type=int, help="commit every N fragments")
    b.add_argument("--no-watermark", action="store_true", help="do not advance the feature watermark")
    m = sub.add_parser("maintain", help="compact and vacuum when the health policy says so")
    _common(m)
    m.add_argument("--target-rows", type=int, default=1024 * 1024)
    m.add_argument("--small-fragment-rows", type=int, help="fragments below this are small (default target/2)")
    m.add_argument("--max-small-share", type=float, default=0.3)
    m.add_argument("--max-deleted-ratio", type=float, default=0.1)
    m.add_argument("--max-versions", type=int, default=20)
    m.add_argument("--retention-hours", type=float, default=168.0)
    m.add_argument("--no-retention-check", action="store_true")
    val = sub.add_parser("validate", help="run a great_expectations suite on the table")
    _common(val)
    val.add_argument("--expectations", metavar="FILE", required=True, help="suite as JSON")
    val.add_argument("--where", help="validate only rows matching this condition")
    val.add_argument("--version", type=int, help="validate this version (default: latest)")
    h = sub.add_parser("health", help="metadata-only health report (no Spark)")
    _common(h)
    return p


# --------------------------------------------------------------------- inputs
def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise SystemExit(f"{what} expects key=value, got {it!r}")
        out[k.strip()] = v
    return out


def load_tables(args) -> list[dict]:
    """[{uri, storage_options, ...}] from --table and --tables."""
    tables = [{"uri": u} for u in args.table]
    if args.tables:
        with open(args.tables) as f:
            text = f.read()
        if args.tables.endswith((".yaml", ".yml")):
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
        if isinstance(doc, dict):
            doc = doc.get("tables", [])
        for item in doc or []:
            tables.append({"uri": item} if isinstance(item, str) else dict(item))
    if not tables:
        raise SystemExit("no table given: use --table URI or --tables FILE")
    for t in tables:
        if not t.get("uri"):
            raise SystemExit(f"a table entry has no uri: {t}")
    return tables


def load_function(spec: str):
    """``module:function`` -> the function (the module must be importable on
    the driver and, for executors, shipped with ``--py-files``)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise SystemExit(f"--function expects module:function, got {spec!r}")
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


def _source(args) -> tuple:
    """(source, readColumns, outputSchema) for add-columns / backfill."""
    if args.sql and args.function:
        raise SystemExit("give either --sql or --function, not both")
    if args.sql:
        return _pairs(args.sql, "--sql"), None, None
    if args.function:
        if not args.read_columns or not args.output_schema:
            raise SystemExit("--function needs --read-columns and --output-schema")
        return load_function(args.function), [c.strip() for c in args.read_columns.split(",")], args.output_schema
    raise SystemExit("give --sql NAME=EXPR or --function module:function")


def spark_session(args):
    from ..spark.session import DEFAULT_CONF, ensure_python_env

    if getattr(args, "remote", None):
        if args.master:
            raise SystemExit("give either --master or --remote, not both")
        from ..spark.session import remote_session

        return remote_session(args.remote, f"lance_ops {args.command}", _pairs(args.conf, "--conf"))
    ensure_python_env()
    from pyspark.sql import SparkSession

    conf = {**DEFAULT_CONF, **_pairs(args.conf, "--conf")}
    builder = SparkSession.builder.appName(f"lance_ops {args.command}")
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        builder = builder.master("local[2]")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    from ..spark.datasource import register

    register(spark)
    return spark


# ----------------------------------------------------------------- commands
def _info(info) -> dict:
    return {"version": info.version, "operation": info.operation, "metrics": info.metrics, "retries": info.retries}


def _health_policy(args, table_opts: dict):
    from ..txn.health import Policy

    target = getattr(args, "target_rows", 1024 * 1024)
    return Policy(
        small_fragment_rows=table_opts.get("small_fragment_rows") or getattr(args, "small_fragment_rows", None) or target // 2,
        max_small_share=float(table_opts.get("max_small_share", getattr(args, "max_small_share", 0.3))),
        max_deleted_ratio=float(table_opts.get("max_deleted_ratio", getattr(args, "max_deleted_ratio", 0.1))),
        max_versions=int(table_opts.get("max_versions", getattr(args, "max_versions", 20))),
        retention_hours=float(table_opts.get("retention_hours", getattr(args, "retention_hours", 168.0))),
    )


def run_one(args, spark, entry: dict, storage: dict) -> tuple[int, dict]:
    """Run the command on one table: (exit status, report)."""
    from ..table import LanceTable
    from ..txn.health import health, maintenance_plan
    from ..txn.table import Table

    uri = entry["uri"]
    opts = {**storage, **(entry.get("storage_options") or {})} or None
    props = _pairs(args.property, "--property") or None
    cmd = args.command
    if cmd == "health":
        core = Table(uri, opts)
        policy = _health_policy(args, entry)
        h = health(core.snapshot, policy)
        return OK, {"health": h, "plan": maintenance_plan(h, policy)}
    t = LanceTable(spark, uri, storage_options=opts)
    before = t.version
    report: dict = {"versionBefore": before}
    status = OK
    if cmd == "compact":
        if args.dry_run:
            h = health(t.snapshot)
            report["health"] = h
            status = OK if h["numSmallFragments"] >= 2 or h["numDeletedRows"] else NOTHING
        else:
            t.optimize().executeCompaction(
                targetRowsPerFragment=args.target_rows, materializeDeletionsThreshold=args.deletion_threshold,
                commitProperties=props,
            )
            info = t.lastCommit()
            report.update(_info(info))
            status = OK if info.version is not None else NOTHING
    elif cmd == "vacuum":
        removed = t.vacuumFiles(args.retention_hours, dryRun=args.dry_run,
                                enforceRetentionDuration=not args.no_retention_check)
        report.update(removedFiles=len(removed), files=removed[:100])
        status = OK if removed else NOTHING
    elif cmd in ("add-columns", "backfill"):
        source, read_cols, out_schema = _source(args)
        if cmd == "add-columns":
            if args.dry_run:
                report["wouldAdd"] = list(source) if isinstance(source, dict) else out_schema
            else:
                info = t.addColumns(source, readColumns=read_cols, outputSchema=out_schema, commitProperties=props,
                                    expectations=args.expectations)
                report.update(_info(info))
        else:
            names = list(source) if isinstance(source, dict) else [
                f.split()[0] for f in out_schema.split(",") if f.strip()
            ]
            status_before = {n: t.featureStatus(n) for n in names}
            report["featureStatus"] = status_before
            where = args.where or None
            if where and "{watermark}" in where:
                marks = [s["watermark"] for s in status_before.values()]
                where = where.replace("{watermark}", str(min((m or 0) for m in marks)))
                report["where"] = where
            if args.dry_run:
                status = OK if any(s["pending"] for s in status_before.values()) or where else NOTHING
            else:
                info = t.backfill(source, readColumns=read_cols, outputSchema=out_schema, where=where,
                                  fragmentsPerCommit=args.fragments_per_commit, expectations=args.expectations,
                                  commitProperties=props, advanceWatermark=not args.no_watermark)
                report.update(_info(info))
                status = OK if info.version is not None else NOTHING
    elif cmd == "maintain":
        policy = _health_policy(args, entry)
        h = health(t.snapshot, policy)
        plan = maintenance_plan(h, policy)
        report.update(health=h, plan=plan)
        if args.dry_run or not (plan["compact"] or plan["vacuum"]):
            status = OK if (plan["compact"] or plan["vacuum"]) else NOTHING
        else:
            if plan["compact"]:
                t.optimize().executeCompaction(targetRowsPerFragment=args.target_rows, commitProperties=props)
                info = t.lastCommit()
                report["compaction"] = _info(info)
            removed = t.vacuumFiles(policy.retention_hours, enforceRetentionDuration=not args.no_retention_check)
            report["vacuum"] = {"removedFiles": len(removed)}
            nothing = (not plan["compact"] or report["compaction"]["version"] is None) and not removed
            status = NOTHING if nothing else OK
    elif cmd == "validate":
        from ..ops.quality import summary, validate_frame

        df = LanceTable(spark, uri, version=args.version, storage_options=opts).toDF() if args.version else t.toDF()
        if args.where:
            df = df.where(args.where)
        result = validate_frame(df, args.expectations)
        report["validation"] = summary(result)
        status = OK if result.success else FAILED
    else:  # pragma: no cover - argparse rejects it
        raise SystemExit(f"unknown command {cmd}")
    report["versionAfter"] = t.refresh().version if cmd != "validate" else t.version
    return status, report


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if not args.quiet:
        log_to_stderr("INFO")
    tables = load_tables(args)
    conf = _pairs(args.conf, "--conf")
    storage = storage_options(args.option)
    storage.update({k[len(STORAGE_CONF_PREFIX):]: v for k, v in conf.items() if k.startswith(STORAGE_CONF_PREFIX)})
    started = time.monotonic()
    spark = None if args.command == "health" else spark_session(args)
    results, statuses = [], []
    for entry in tables:
        t0 = time.monotonic()
        log.info("%s %s%s", args.command, entry["uri"], " (dry run)" if args.dry_run else "")
        try:
            status, report = run_one(args, spark, entry, storage)
        except (LanceOpsError, SystemExit, Exception) as e:  # one table's failure does not stop the others
            if isinstance(e, SystemExit):
                raise
            log.error("%s %s failed: %s", args.command, entry["uri"], e)
            status, report = FAILED, {"error": f"{type(e).__name__}: {e}"}
        report.update(table=entry["uri"], status={OK: "done", FAILED: "failed", NOTHING: "nothing to do"}[status],
                      durationSeconds=round(time.monotonic() - t0, 3))
        results.append(report)
        statuses.append(status)
    code = FAILED if FAILED in statuses else (NOTHING if all(s == NOTHING for s in statuses) else OK)
    summary = {"command": args.command, "dryRun": args.dry_run, "exitCode": code, "tables": results,
               "durationSeconds": round(time.monotonic() - started, 3)}
    sys.stdout.write(_json(summary) + "\n")
    sys.stdout.flush()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
