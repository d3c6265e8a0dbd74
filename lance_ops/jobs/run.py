"""Running a jobs command: parse, open every table (metadata only, so a wrong
path fails at once), start Spark only when a command needs it, run each
table, print the summary, return the exit code."""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field

from ..errors import CommitOutcomeUnknownError
from .args import COMMANDS, METADATA_COMMANDS, UsageError, check, load_tables, pairs, parser, storage_options
from .metadata import DONE, FAILED, NOOP
from .output import emit

log = logging.getLogger("lance_ops")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def entry_file() -> str:
    """The file ``spark-submit`` runs as the application: the package's
    ``__main__.py``, wherever lance_ops is installed."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


class SparkProvider:
    """The job's Spark session, created on first use and shared by its
    tables: ``--remote`` / ``$SPARK_REMOTE`` (Spark Connect, no local JVM),
    else a classic session (``--master``, default ``local[2]``, or what
    ``spark-submit`` set)."""

    def __init__(self, args):
        self.args = args
        self.session = None

    def __call__(self):
        if self.session is None:
            t0 = time.monotonic()
            self.session = _start_spark(self.args)
            log.info("Spark session ready in %.1f s", time.monotonic() - t0)
        return self.session


def _start_spark(args):
    from ..spark.session import DEFAULT_CONF, ensure_python_env
    from ..spark.workers import daemon_conf

    conf = pairs(getattr(args, "conf", []) or [], "--conf")
    remote = getattr(args, "remote", None) or os.environ.get("SPARK_REMOTE")
    if remote and not getattr(args, "master", None):
        from ..spark.session import remote_session

        return remote_session(remote, f"lance_ops {args.command}", conf)
    ensure_python_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"lance_ops {args.command}")
    master = getattr(args, "master", None)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        master = "local[2]"
        builder = builder.master(master)
    for k, v in {**DEFAULT_CONF, **daemon_conf(master, conf), **conf}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    from ..spark.jvm import set_log_level

    set_log_level(spark, "WARN")
    from ..spark.datasource import register

    register(spark)
    return spark


@dataclass
class Job:
    """One table's run of the command: what the command functions get."""

    args: object
    entry: dict
    opts: dict | None
    props: dict | None
    spark: SparkProvider
    extra: dict = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return self.entry["uri"]


def _commands():
    from .metadata import COMMANDS as metadata_commands
    from .sparkwork import COMMANDS as spark_commands

    return {**metadata_commands, **spark_commands}


def run_table(job: Job) -> tuple[str, dict]:
    """(status, report) of one table. The table is opened first, metadata
    only: a wrong path or a damaged table fails before any Spark work."""
    from ..txn.table import Table

    core = Table(job.uri, job.opts)
    before = core.version
    status, report = _commands()[job.args.command](job, core)
    report.setdefault("versionBefore", before)
    report["versionAfter"] = Table(job.uri, job.opts).version
    return status, report


def execute(args) -> dict:
    """Run the parsed command on every table; the summary (a dict)."""
    check(args)
    tables = load_tables(args)
    conf = pairs(getattr(args, "conf", []) or [], "--conf")
    storage = storage_options(args.option, conf)
    props = pairs(args.property, "--property") or None
    spark = SparkProvider(args)
    started = time.monotonic()
    results = []
    for entry in tables:
        t0 = time.monotonic()
        dry = getattr(args, "dry_run", False)
        log.info("%s %s%s", args.command, entry["uri"], " (dry run)" if dry else "")
        opts = {**storage, **(entry.get("storage_options") or {})} or None
        try:
            status, report = run_table(Job(args, entry, opts, props, spark))
        except Exception as e:  # one table's failure does not stop the others
            log.error("%s %s failed: %s: %s", args.command, entry["uri"], type(e).__name__, e)
            status, report = FAILED, {"error": f"{type(e).__name__}: {e}"}
            if isinstance(e, CommitOutcomeUnknownError):  # what a retry must settle first
                report["commitOutcome"] = {"unknown": True, "version": e.version,
                                           "transactionUuid": e.transaction_uuid}
        report.update(table=entry["uri"], status=status, durationSeconds=round(time.monotonic() - t0, 3))
        results.append(report)
        log.info("%s %s: %s in %.1f s", args.command, entry["uri"], status, time.monotonic() - t0)
    statuses = [r["status"] for r in results]
    status = FAILED if FAILED in statuses else (NOOP if all(s == NOOP for s in statuses) else DONE)
    return {
        "command": args.command,
        "dryRun": bool(getattr(args, "dry_run", False)),
        "status": status,
        "exitCode": EXIT_FAILED if status == FAILED else EXIT_OK,
        "sparkStarted": spark.session is not None,
        "tables": results,
        "durationSeconds": round(time.monotonic() - started, 3),
    }


def main(argv=None, prog: str = "lance-ops") -> int:
    """Parse ``argv`` and run; prints the JSON summary on stdout and returns
    the exit code (0 done or nothing to do, 1 failed, 2 usage error)."""
    from .. import log_to_stderr

    p = parser(prog)
    try:
        args = p.parse_args(argv)
        if args.print_entry_file:
            from .output import emit_text

            emit_text(entry_file())
            return EXIT_OK
        if not args.command:
            raise UsageError(f"{prog}: error: a COMMAND is required ({', '.join(COMMANDS)})\n"
                             f"{p.format_usage().strip()}")
        if not args.quiet:
            log_to_stderr("INFO")
        summary = execute(args)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    emit(summary)
    return summary["exitCode"]


def cli(prog: str = "lance-ops") -> None:
    """The console script / ``python -m`` entry: stdout keeps the summary only
    (:func:`lance_ops.jobs.output.separate_stdout`)."""
    from .output import separate_stdout

    separate_stdout()
    code = main(None, prog)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


__all__ = ["main", "cli", "execute", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "METADATA_COMMANDS"]
