"""The jobs' command line: one parser for every command, and the checks that
turn what a user typed into the call's arguments. Everything wrong here is a
usage error (:class:`UsageError`, exit code 2) raised before any table is
touched."""
from __future__ import annotations

import argparse
import importlib
import json
import os

from ..errors import LanceOpsError

#: ``LANCE_OPS_STORAGE_<KEY>=value`` in the environment is storage option ``key``.
ENV_PREFIX = "LANCE_OPS_STORAGE_"
#: ``--conf spark.lance_ops.storage.<key>=v`` is storage option ``key`` too.
STORAGE_CONF_PREFIX = "spark.lance_ops.storage."
#: The vacuum floor, as :data:`lance_ops.txn.vacuum.MIN_RETENTION_HOURS` (not
#: imported: parsing arguments must stay cheap).
MIN_RETENTION_HOURS = 168.0

#: Commands that never start Spark (``lance_ops.Table`` only).
METADATA_COMMANDS = ("history", "detail", "tags", "properties", "restore", "vacuum", "health")
#: Commands that need Spark unless ``--dry-run`` (maintain: only to compact).
SPARK_COMMANDS = ("compact", "add-columns", "backfill", "maintain", "validate")
COMMANDS = SPARK_COMMANDS + METADATA_COMMANDS


class UsageError(LanceOpsError):
    """The command line is wrong: nothing ran (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are :class:`UsageError` (the
    caller prints them and exits 2) instead of an immediate ``sys.exit``."""

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message}\n{self.format_usage().strip()}")

    def print_help(self, file=None):
        if file is not None:
            return super().print_help(file)
        from .output import emit_text  # (the real stdout, also when fd 1 is re-pointed)

        emit_text(self.format_help().rstrip("\n"))


def _common(p: argparse.ArgumentParser, spark: bool) -> None:
    p.add_argument("uris", nargs="*", metavar="URI", help="table URI(s), the same as --table")
    p.add_argument("--table", action="append", default=[], metavar="URI", help="table URI (repeatable)")
    p.add_argument("--tables", metavar="FILE", help="YAML or JSON file listing tables")
    p.add_argument("--option", action="append", default=[], metavar="K=V",
                   help="storage option (repeatable; also LANCE_OPS_STORAGE_<KEY> in the environment)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="commit property recorded in history() userMetadata (repeatable)")
    if spark:
        p.add_argument("--dry-run", action="store_true", help="report what would be done; commit nothing (no Spark)")
        p.add_argument("--master", help="Spark master (default local[2], or spark-submit's)")
        p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                       help="run through a Spark Connect server (default $SPARK_REMOTE; no local JVM needed)")
        p.add_argument("--conf", action="append", default=[], metavar="K=V", help="Spark conf (repeatable)")


def _columns_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sql", action="append", default=[], metavar="NAME=EXPR", help="Spark SQL expression per column")
    p.add_argument("--function", metavar="MODULE:FUNCTION", help="Arrow batch function (ship with --py-files)")
    p.add_argument("--read-columns", help="comma-separated input columns of --function")
    p.add_argument("--output-schema", help='DDL of --function\'s output, e.g. "g double"')
    p.add_argument("--expectations", metavar="FILE", help="great_expectations suite (JSON) gating the commit")


def _retention(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retention-hours", type=float, default=MIN_RETENTION_HOURS,
                   help=f"keep versions younger than this (default {MIN_RETENTION_HOURS:g})")
    p.add_argument("--no-retention-check", action="store_true",
                   help=f"allow a retention below {MIN_RETENTION_HOURS:g} hours (no other process may use the table)")


def parser(prog: str = "lance-ops") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="Maintenance and feature jobs for Lance tables. "
                "stdout: one JSON document; exit 0 done (also nothing to do), 1 failed, 2 usage error.")
    p.add_argument("--print-entry-file", action="store_true",
                   help="print the file to give spark-submit as the application, and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    c = sub.add_parser("compact", help="compact small fragments, materialize deletions")
    _common(c, True)
    c.add_argument("--target-rows", type=int, default=1024 * 1024, help="target rows per fragment")
    c.add_argument("--deletion-threshold", type=float, default=0.1, help="materialize deletions above this ratio")
    v = sub.add_parser("vacuum", help="remove old versions and unreferenced files (no Spark)")
    _common(v, False)
    v.add_argument("--dry-run", action="store_true", help="list what would be removed")
    _retention(v)
    a = sub.add_parser("add-columns", help="add columns computed from existing ones")
    _common(a, True)
    _columns_source(a)
    b = sub.add_parser("backfill", help="compute existing columns where they are missing (or NULL)")
    _common(b, True)
    _columns_source(b)
    b.add_argument("--where", help="only rows matching this Spark SQL condition ({watermark} is replaced)")
    b.add_argument("--fill-nulls", action="store_true",
                   help="also recompute rows whose column is NULL (not only fragments lacking the column)")
    b.add_argument("--fragments-per-commit", type=int, help="commit every N fragments")
    b.add_argument("--no-watermark", action="store_true", help="do not advance the feature watermark")
    m = sub.add_parser("maintain", help="compact and vacuum when the health policy says so")
    _common(m, True)
    m.add_argument("--target-rows", type=int, default=1024 * 1024)
    m.add_argument("--small-fragment-rows", type=int, help="fragments below this are small (default target/2)")
    m.add_argument("--max-small-share", type=float, default=0.3)
    m.add_argument("--max-deleted-ratio", type=float, default=0.1)
    m.add_argument("--max-versions", type=int, default=20)
    _retention(m)
    val = sub.add_parser("validate", help="check rows: CHECK constraints, NOT NULL columns, a great_expectations suite")
    _common(val, True)
    val.add_argument("--expectations", metavar="FILE", help="great_expectations suite (JSON)")
    val.add_argument("--not-null", action="append", default=[], metavar="COLUMN",
                     help="fail when a row (of those checked) has COLUMN NULL (repeatable)")
    val.add_argument("--no-constraints", action="store_true", help="do not check the table's CHECK constraints")
    val.add_argument("--where", help="check only rows matching this condition")
    val.add_argument("--feature", metavar="COLUMN",
                     help="check the rows created after COLUMN's watermark (up to --through-data-version)")
    val.add_argument("--through-data-version", type=int, metavar="N",
                     help="with --feature: rows created up to this version (default: the table's data version)")
    val.add_argument("--advance-watermark", action="store_true",
                     help="with --feature: when the checks pass, move the watermark to the version checked")
    val.add_argument("--version", help="check this version or tag (default: latest)")
    h = sub.add_parser("health", help="metadata-only health report and maintenance plan (no Spark)")
    _common(h, False)
    h.add_argument("--target-rows", type=int, default=1024 * 1024)
    h.add_argument("--small-fragment-rows", type=int)
    h.add_argument("--max-small-share", type=float, default=0.3)
    h.add_argument("--max-deleted-ratio", type=float, default=0.1)
    h.add_argument("--max-versions", type=int, default=20)
    h.add_argument("--retention-hours", type=float, default=MIN_RETENTION_HOURS)
    hi = sub.add_parser("history", help="one entry per version, newest first (no Spark)")
    _common(hi, False)
    hi.add_argument("--limit", type=int)
    d = sub.add_parser("detail", help="fragments, rows, size, flags, schema (no Spark)")
    _common(d, False)
    d.add_argument("--version", help="a version number or tag (default: latest)")
    t = sub.add_parser("tags", help="list, create or delete tags (no Spark)")
    _common(t, False)
    g = t.add_mutually_exclusive_group()
    g.add_argument("--create", metavar="NAME")
    g.add_argument("--delete", metavar="NAME")
    t.add_argument("--version", help="version or tag to tag (default: latest)")
    pr = sub.add_parser("properties", help="show, set or unset table config (no Spark)")
    _common(pr, False)
    pr.add_argument("--set", nargs="+", metavar="KEY=VALUE", default=[])
    pr.add_argument("--unset", nargs="+", metavar="KEY", default=[])
    r = sub.add_parser("restore", help="commit a version whose content is an older version's (no Spark)")
    _common(r, False)
    r.add_argument("--version", required=True, help="version number or tag name to restore")
    return p


# --------------------------------------------------------------------- inputs
def pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"{what} expects KEY=VALUE, got {it!r}")
        out[k.strip()] = v
    return out


def storage_options(items: list[str] | None, conf: dict | None = None) -> dict[str, str]:
    """Storage options from the environment (``LANCE_OPS_STORAGE_<KEY>``),
    ``--conf spark.lance_ops.storage.<key>=v``, then ``--option key=value``."""
    out = {k[len(ENV_PREFIX):].lower(): v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    out.update({k[len(STORAGE_CONF_PREFIX):]: v for k, v in (conf or {}).items() if k.startswith(STORAGE_CONF_PREFIX)})
    out.update(pairs(items or [], "--option"))
    return out


def load_tables(args) -> list[dict]:
    """[{uri, storage_options, ...}] from positional URIs, --table and --tables."""
    tables = [{"uri": u} for u in list(args.uris) + list(args.table)]
    if args.tables:
        try:
            with open(args.tables) as f:
                text = f.read()
        except OSError as e:
            raise UsageError(f"--tables {args.tables}: {e.strerror or e}") from None
        try:
            if args.tables.endswith((".yaml", ".yml")):
                import yaml

                doc = yaml.safe_load(text)
            else:
                doc = json.loads(text)
        except Exception as e:
            raise UsageError(f"--tables {args.tables}: not valid {'YAML' if args.tables.endswith(('.yaml', '.yml')) else 'JSON'}: {e}") from None
        if isinstance(doc, dict):
            doc = doc.get("tables", [])
        for item in doc or []:
            tables.append({"uri": item} if isinstance(item, str) else dict(item))
    if not tables:
        raise UsageError("no table given: use --table URI or --tables FILE")
    for t in tables:
        if not t.get("uri"):
            raise UsageError(f"a table entry has no uri: {t}")
    return tables


def load_function(spec: str):
    """``module:function`` -> the function (the module must be importable on
    the driver and, for executors, shipped with ``--py-files``)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise UsageError(f"--function expects MODULE:FUNCTION, got {spec!r}")
    try:
        fn = importlib.import_module(module)
        for part in name.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"--function {spec}: {e}") from None
    return fn


def column_source(args) -> tuple:
    """(source, readColumns, outputSchema) for add-columns / backfill."""
    if args.sql and args.function:
        raise UsageError("give either --sql or --function, not both")
    if args.sql:
        return pairs(args.sql, "--sql"), None, None
    if args.function:
        if not args.read_columns or not args.output_schema:
            raise UsageError("--function needs --read-columns and --output-schema")
        return load_function(args.function), [c.strip() for c in args.read_columns.split(",")], args.output_schema
    raise UsageError("give --sql NAME=EXPR or --function MODULE:FUNCTION")


def source_columns(source, output_schema) -> list[str]:
    """The columns an add-columns / backfill source computes (without Spark:
    the names of ``--sql`` or of the output DDL's fields)."""
    if isinstance(source, dict):
        return list(source)
    names = []
    depth, field = 0, ""
    for ch in output_schema + ",":  # split on top-level commas ("m map<string, int>, g double")
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            if field.strip():
                names.append(field.strip().split()[0].strip("`"))
            field = ""
        else:
            field += ch
    return names


def check_retention(hours: float, unchecked: bool, what: str = "--retention-hours") -> None:
    """The vacuum floor, in the CLI's words (``--no-retention-check``)."""
    if hours < 0:
        raise UsageError(f"{what} must be >= 0, got {hours:g}")
    if hours < MIN_RETENTION_HOURS and not unchecked:
        raise UsageError(
            f"{what} {hours:g} is below the safety floor of {MIN_RETENTION_HOURS:g} hours: files of "
            "commits in progress and versions readers may still use could be deleted. If no other process "
            "writes or reads the table, add --no-retention-check."
        )


def check(args) -> None:
    """Cross-option checks argparse cannot express, in the CLI's words."""
    hours = getattr(args, "retention_hours", None)
    if hours is not None and args.command != "health":
        check_retention(hours, args.no_retention_check)
    if getattr(args, "master", None) and getattr(args, "remote", None):
        raise UsageError("give either --master or --remote, not both")
    if args.command == "backfill" and args.fragments_per_commit is not None and args.fragments_per_commit <= 0:
        raise UsageError("--fragments-per-commit must be a positive number of fragments")
    if args.command == "validate":
        if (args.through_data_version is not None or args.advance_watermark) and not args.feature:
            raise UsageError("--through-data-version and --advance-watermark need --feature COLUMN")
        if args.feature and args.version:
            raise UsageError("--feature checks the latest version: leave out --version")
    if args.command == "properties":
        pairs(args.set, "--set")
