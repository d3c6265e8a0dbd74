"""Run the benchmark suites on one local Spark session and write a Markdown report.

    python benchmarks/run.py --out BENCHMARKS.md [--rows 10000000]
        [--suites foundation,...] [--repeat 2] [--data-dir ./bench-data] [--update]

A suite is a module ``benchmarks/bench_<name>.py`` with ``run(ctx) -> Section``
(see ``benchmarks/README.md``); ``--suites`` defaults to all of them. The report
is regenerated from scratch (after every suite, so a crash keeps what finished):
write subsets to another ``--out``, or pass ``--update`` to replace only the
suites run in an existing report and keep the others. Use a small ``--rows`` (e.g. 200000) for a
smoke test.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import shlex
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Run as a script, only benchmarks/ itself is on sys.path.
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.harness import SPARK_CONF, Context, Section, remove  # noqa: E402
from benchmarks.report import machine_info, render, update  # noqa: E402

#: Fewer rows than this leave the 40 files/fragments nearly empty.
MIN_ROWS = 4000


def available_suites() -> list[str]:
    return sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules([HERE]) if m.name.startswith("bench_"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    suites = available_suites()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="Markdown report to (re)write")
    p.add_argument("--rows", type=int, default=10_000_000, help="rows of the shared dataset (default 10,000,000)")
    p.add_argument("--suites", default=",".join(suites), help=f"comma-separated subset of: {', '.join(suites)}")
    p.add_argument("--repeat", type=int, default=2, help="timed runs per measurement; the best counts (default 2)")
    p.add_argument("--data-dir", default="./bench-data", help="shared datasets and scratch space (default ./bench-data)")
    p.add_argument("--update", action="store_true",
                   help="replace only these suites' sections in an existing --out report, keep the others")
    args = p.parse_args(argv)
    args.suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = sorted(set(args.suites) - set(suites))
    if unknown:
        p.error(f"unknown suites {unknown}; available: {suites}")
    if args.rows < MIN_ROWS:
        p.error(f"--rows must be at least {MIN_ROWS}")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def command_line() -> str:
    """This run's command, with the interpreter relative to the working
    directory when it is inside it (e.g. ``.venv/bin/python``)."""
    exe = os.path.relpath(sys.executable)
    return shlex.join([sys.executable if exe.startswith("..") else exe, *sys.argv])


def run_suite(name: str, ctx: Context) -> Section:
    """Run one suite; a failure becomes a section holding the traceback so the
    other suites still run and report."""
    print(f"== {name}", flush=True)
    module = importlib.import_module(f"benchmarks.bench_{name}")
    try:
        return module.run(ctx)
    except Exception:
        traceback.print_exc()
        return Section(getattr(module, "TITLE", name), "", error=traceback.format_exc())


def write_report(path: str, sections: list[Section], machine, command: str, previous: str | None = None) -> None:
    text = render(sections, machine, command) if previous is None else update(previous, sections, machine, command)
    with open(path, "w") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line()
    # Start Spark (a fork of this process) before any suite imports pylance,
    # which warns at every fork once loaded.
    from lance_ops.spark.session import local_session

    spark = local_session("lance_ops-benchmarks", conf=SPARK_CONF)
    ctx = Context(spark, args.rows, args.repeat, os.path.abspath(args.data_dir))
    sections: list[Section] = []
    previous = None
    if args.update and os.path.exists(args.out):
        with open(args.out) as f:
            previous = f.read()
    try:
        machine = machine_info(spark)
        for name in args.suites:
            sections.append(run_suite(name, ctx))
            write_report(args.out, sections, machine, command, previous)
    finally:
        remove(ctx.scratch_dir)
        spark.stop()
    print(f"wrote {args.out}")
    return 1 if any(s.error for s in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
