"""``lance-ops``: a Lance table from the shell, without Spark.

    lance-ops history URI [--limit N]
    lance-ops detail URI
    lance-ops tags URI [--create NAME [--version V] | --delete NAME]
    lance-ops properties URI [--set k=v ...] [--unset k ...]
    lance-ops restore URI VERSION_OR_TAG
    lance-ops vacuum URI [--retention-hours H] [--dry-run] [--no-retention-check]

Output is JSON on stdout; progress and warnings go to stderr. Storage options
come from ``--option key=value`` (repeatable) or the environment variables
``LANCE_OPS_STORAGE_<KEY>`` (e.g. ``LANCE_OPS_STORAGE_AWS_ENDPOINT``), so that
secrets stay out of shell history. Exit codes: 0 done, 1 failed, 2 nothing to
do (a vacuum that removed nothing).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

from .. import log_to_stderr
from ..errors import LanceOpsError
from ..txn.table import Table

ENV_PREFIX = "LANCE_OPS_STORAGE_"


def storage_options(pairs: list[str] | None) -> dict[str, str]:
    """Storage options from the environment, then ``key=value`` pairs."""
    out = {k[len(ENV_PREFIX):].lower(): v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise SystemExit(f"--option expects key=value, got {p!r}")
        out[k] = v
    return out


def _json(obj) -> str:
    def default(x):
        if isinstance(x, (datetime.datetime, datetime.date)):
            return x.isoformat()
        if hasattr(x, "__dict__"):
            return x.__dict__
        return str(x)

    return json.dumps(obj, default=default, indent=2, sort_keys=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lance-ops", description="Look at and maintain a Lance table without Spark.")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="storage option (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    sub = p.add_subparsers(dest="command", required=True)
    h = sub.add_parser("history", help="one entry per version, newest first")
    h.add_argument("uri")
    h.add_argument("--limit", type=int)
    d = sub.add_parser("detail", help="fragments, rows, size, flags, schema")
    d.add_argument("uri")
    d.add_argument("--version")
    t = sub.add_parser("tags", help="list, create or delete tags")
    t.add_argument("uri")
    g = t.add_mutually_exclusive_group()
    g.add_argument("--create", metavar="NAME")
    g.add_argument("--delete", metavar="NAME")
    t.add_argument("--version", help="version or tag to tag (default: latest)")
    pr = sub.add_parser("properties", help="show, set or unset table config")
    pr.add_argument("uri")
    pr.add_argument("--set", nargs="+", metavar="KEY=VALUE", default=[])
    pr.add_argument("--unset", nargs="+", metavar="KEY", default=[])
    r = sub.add_parser("restore", help="commit a version whose content is an older version's")
    r.add_argument("uri")
    r.add_argument("version", help="version number or tag name")
    v = sub.add_parser("vacuum", help="remove old versions and unreferenced files")
    v.add_argument("uri")
    v.add_argument("--retention-hours", type=float, default=168.0)
    v.add_argument("--dry-run", action="store_true")
    v.add_argument("--no-retention-check", action="store_true", help="allow a retention under 168 hours")
    return p


def run(args) -> tuple[object, int]:
    opts = storage_options(args.option)
    if args.command == "history":
        return Table(args.uri, opts).history(args.limit), 0
    if args.command == "detail":
        return Table(args.uri, opts, version=args.version).detail(), 0
    if args.command == "tags":
        t = Table(args.uri, opts)
        if args.create:
            t.createTag(args.create, args.version)
        elif args.delete:
            t.deleteTag(args.delete)
        return t.listTags(details=True), 0
    if args.command == "properties":
        t = Table(args.uri, opts)
        pairs = dict(p.split("=", 1) for p in args.set)
        if pairs:
            t.setProperties(pairs)
        if args.unset:
            t.unsetProperties(args.unset)
        return t.properties(), 0
    if args.command == "restore":
        t = Table(args.uri, opts)
        version = int(args.version) if args.version.isdigit() else args.version
        return t.restoreToVersion(version), 0
    if args.command == "vacuum":
        removed = Table(args.uri, opts).vacuum(args.retention_hours, args.dry_run, not args.no_retention_check)
        return {"dryRun": args.dry_run, "removed": removed, "numRemoved": len(removed)}, 0 if removed else 2
    raise SystemExit(f"unknown command {args.command}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.quiet:
        log_to_stderr("INFO")
    try:
        result, code = run(args)
    except LanceOpsError as e:
        print(f"lance-ops {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(_json(result))
    return code
