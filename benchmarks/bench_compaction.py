"""Compaction: 400 fragments of 25k rows compacted to ~40, vs pylance.

Goals (from the maintenance issue): within 2x of pylance's compact_files; peak
executor memory stays flat as the fragment count grows.
"""
from __future__ import annotations

import os

import lance

from lance_ops import LanceTable

from . import data
from .harness import Context, Result, Section, fmt_bytes

TITLE = "Compaction: 400 small fragments -> ~40, vs pylance"
GOAL = 2.0
FRAGMENTS = 400


def run(ctx: Context) -> Section:
    ds = data.shared_dataset(ctx.spark, ctx.data_dir, ctx.rows)
    per_fragment = max(1, ds.rows // FRAGMENTS)
    target = per_fragment * 10
    section = Section(TITLE, _description(ds, ctx, per_fragment, target))
    bases = {
        "lance_ops": data.small_fragments_table(ctx.spark, ds, per_fragment, "lance_ops"),
        "pylance": data.small_fragments_table(ctx.spark, ds, per_fragment, "pylance"),
    }
    paths = {k: ctx.scratch(f"compact-{k}.lance") for k in bases}
    spark = ctx.spark
    t = ctx.interleave(
        {
            "lance_ops": lambda: _compact(spark, paths["lance_ops"], target),
            "pylance": lambda: lance.dataset(paths["pylance"]).optimize.compact_files(target_rows_per_fragment=target),
        },
        setup=lambda name: data.fresh_copy(bases[name], paths[name]),
    )
    counts = {k: len(lance.dataset(p).get_fragments()) for k, p in paths.items()}
    rows = {k: lance.dataset(p).count_rows() for k, p in paths.items()}
    if len(set(rows.values())) != 1 or rows["lance_ops"] != ds.rows:
        raise RuntimeError(f"compaction changed the row count: {rows}")
    m = t["lance_ops"].value.metrics
    notes = (
        f"fragments after: lance_ops {counts['lance_ops']}, pylance {counts['pylance']}; "
        f"lance_ops rewrote {m['numRowsRewritten']:,} rows from {m['numRemovedFragments']} fragments"
    )
    section.add(Result(f"compact {FRAGMENTS} x {per_fragment:,} rows", t["lance_ops"], "pylance `compact_files`", t["pylance"], "time", GOAL, notes))
    _executor_memory(ctx, ds, per_fragment, target, section)
    section.note(ctx.memory_note())
    return section


def _description(ds: data.Dataset, ctx: Context, per_fragment: int, target: int) -> str:
    return f"""\
Table: the shared {ds.rows:,}-row dataset written as {FRAGMENTS} fragments of {per_fragment:,} rows (stable row ids;
lance_ops' copy written by lance_ops, pylance's by pylance). Compaction with `targetRowsPerFragment={target:,}`
(pylance: `compact_files(target_rows_per_fragment={target:,})`), so groups of 10 fragments become one.
Every run starts from a fresh copy (untimed); best of {ctx.repeat} runs; *time* = lance_ops s / pylance s
(goal ≤ {GOAL:g}). Executor memory: peak RSS of Spark's Python workers (reset before each run via
`/proc/<pid>/clear_refs`), compacting {FRAGMENTS // 4} and {FRAGMENTS} fragments of the same size."""


def _python_workers() -> list[int]:
    """PIDs of Spark's Python worker processes (local mode: forks of the worker
    daemon, pyspark's or lance_ops.spark.daemon)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        args = cmd.split(b"\0")
        # python -m pyspark.daemon / -m lance_ops.spark.daemon (not the JVM,
        # whose arguments name the daemon module in a --conf)
        if (b"-m" in args and any(a.endswith(b"spark.daemon") for a in args)) or b"pyspark/worker" in cmd:
            pids.append(int(pid))
    return pids


def _reset_peaks() -> None:
    for pid in _python_workers():
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")  # reset the peak RSS (VmHWM)
        except OSError:
            pass


def _peak_worker_rss() -> int:
    peak = 0
    for pid in _python_workers():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            pass
    return peak


def _executor_memory(ctx: Context, ds: data.Dataset, per_fragment: int, target: int, section: Section) -> None:
    spark = ctx.spark
    peaks = {}
    for n in (FRAGMENTS // 4, FRAGMENTS):
        path = ctx.scratch(f"compact-mem-{n}.lance")
        LanceTable.create(
            spark, path, spark.read.parquet(ds.parquet).where(f"id < {n * per_fragment}"),
            maxRowsPerFragment=per_fragment,
        )
        _reset_peaks()
        LanceTable(spark, path).optimize().executeCompaction(targetRowsPerFragment=target)
        peaks[n] = _peak_worker_rss()
    small, big = peaks[FRAGMENTS // 4], peaks[FRAGMENTS]
    growth = big / small if small else float("inf")
    section.note(
        f"peak Python worker RSS while compacting: {fmt_bytes(small)} for {FRAGMENTS // 4} fragments, "
        f"{fmt_bytes(big)} for {FRAGMENTS} ({growth:.2f}× for 4× the fragments; goal: flat: "
        f"{'PASS' if growth < 1.3 else 'FAIL'})"
    )


def _compact(spark, path: str, target: int):
    t = LanceTable(spark, path)
    t.optimize().executeCompaction(targetRowsPerFragment=target)
    return t.lastCommit()
