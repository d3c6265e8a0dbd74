"""Pipelines: backfill of a feature after appends, constraint overhead.

Goals (from the pipelines issue): a backfill after 10 appends of 1% each
writes only the new fragments' column files (bytes <= 1.1x those files); its
time against addColumns over the whole table; CHECK constraint enforcement
costs <= 10% on an append.
"""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops import LanceTable

from . import data
from .harness import Context, Result, Section, dir_bytes, fmt_bytes

TITLE = "Pipelines: feature backfill after appends, constraint overhead on append"
APPENDS = 10
APPEND_SHARE = 0.01
BYTES_GOAL = 1.1
CONSTRAINT_GOAL = 1.10
BACKFILL_GOAL = 0.5  # backfill time / addColumns-over-the-whole-table time


def _double_f0(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch({"g": pc.multiply(batch.column("f0"), 2.0)})


def _double_f0_h(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch({"h": pc.multiply(batch.column("f0"), 2.0)})


def _new_rows(spark, start: int, n: int):
    cols = ["id", *(f"rand({i} + {start}) as f{i}" for i in range(data.FLOAT_COLUMNS)),
            "concat('name-', cast(id as string)) as s"]
    return spark.range(start, start + n, 1, 4).selectExpr(*cols)


def _feature_table(spark, ds: data.Dataset) -> str:
    """The shared table + a feature column g, then 10 appends of 1% that leave g out (cached)."""
    path = os.path.join(ds.root, "pipelines-appended.lance")

    def build(p: str) -> None:
        data.fresh_copy(data.lance_ops_table(spark, ds), p)
        t = LanceTable(spark, p)
        t.addColumns(_double_f0, readColumns=["f0"], outputSchema="g double")
        n = max(1, int(ds.rows * APPEND_SHARE))
        for k in range(APPENDS):
            t.append(_new_rows(spark, ds.rows + k * n, n), allowMissingColumns=True)

    return data._cached(path, ds.rows, build)


def _added_file_bytes(path: str, before_version: int, after_version: int) -> int:
    from lance_ops.storage import ObjectStore
    from lance_ops.txn.log import open_snapshot

    store = ObjectStore(path)
    before = {df.path for f in open_snapshot(store, before_version).fragments for df in f.files}
    snap = open_snapshot(store, after_version)
    return sum(os.path.getsize(os.path.join(path, "data", df.path))
               for f in snap.fragments for df in f.files if df.path not in before)


def run(ctx: Context) -> Section:
    spark = ctx.spark
    ds = data.shared_dataset(spark, ctx.data_dir, ctx.rows)
    section = Section(TITLE, _description(ds, ctx))
    base = _feature_table(spark, ds)
    paths = {"backfill": ctx.scratch("pipe-backfill"), "addColumns": ctx.scratch("pipe-add")}
    fns = {
        "backfill": lambda: LanceTable(spark, paths["backfill"]).backfill(_double_f0, readColumns=["f0"],
                                                                        outputSchema="g double"),
        "addColumns": lambda: LanceTable(spark, paths["addColumns"]).addColumns(_double_f0_h, readColumns=["f0"],
                                                                                outputSchema="h double"),
    }
    t, written = ctx.interleave_with_bytes(fns, paths, setup=lambda n: data.fresh_copy(base, paths[n]))
    info = t["backfill"].value
    filled = info.version - 1  # the DataReplacement; the watermark commit follows
    own = _added_file_bytes(paths["backfill"], filled - 1, filled)
    ratio = written["backfill"] / own if own else float("inf")
    notes = (f"backfill wrote {fmt_bytes(written['backfill'])} = {ratio:.3f}× the new column files ({fmt_bytes(own)}, "
             f"{info.metrics['numUpdatedFragments']} fragments, {info.metrics['numBackfilledRows']:,} rows; goal ≤ "
             f"{BYTES_GOAL}×: {'PASS' if ratio <= BYTES_GOAL else 'FAIL'}); addColumns over the whole table wrote "
             f"{fmt_bytes(written['addColumns'])}; bytes written backfill / addColumns = "
             f"{written['backfill'] / max(1, written['addColumns']):.3f}")
    section.add(Result(f"backfill `g` after {APPENDS} appends of {APPEND_SHARE:.0%} (Arrow function)", t["backfill"],
                       "addColumns over the whole table", t["addColumns"], "time", BACKFILL_GOAL, notes))

    # Constraint overhead on an append of 10% of the rows.
    plain, checked = ctx.scratch("pipe-plain"), ctx.scratch("pipe-checked")
    src = data.lance_ops_table(spark, ds)
    data.fresh_copy(src, plain)
    data.fresh_copy(src, checked)
    LanceTable(spark, checked).addConstraint("f0_unit", "f0 >= 0 AND f0 < 1")
    LanceTable(spark, checked).addConstraint("named", "s LIKE 'name-%'")
    n = max(1, int(ds.rows * 0.1))
    batch = _new_rows(spark, 2 * ds.rows, n).cache()
    batch.count()
    a = ctx.interleave({
        "checked": lambda: LanceTable(spark, checked).append(batch),
        "plain": lambda: LanceTable(spark, plain).append(batch),
    }, warmup=True)
    batch.unpersist()
    section.add(Result(f"append {n:,} rows with 2 CHECK constraints", a["checked"], "the same append without",
                       a["plain"], "time", CONSTRAINT_GOAL,
                       f"table bytes after: {fmt_bytes(dir_bytes(checked))} vs {fmt_bytes(dir_bytes(plain))}"))
    section.note(ctx.memory_note())
    return section


def _description(ds: data.Dataset, ctx: Context) -> str:
    n = max(1, int(ds.rows * APPEND_SHARE))
    return f"""\
Table: the shared {ds.rows:,}-row dataset ({data.FILES} fragments) as a lance_ops table, plus a feature column
`g = f0 * 2` (addColumns), then {APPENDS} appends of {n:,} rows ({APPEND_SHARE:.0%}) each with
`allowMissingColumns=True` (no file for `g`). Every timed write starts from a fresh copy (untimed); best of
{ctx.repeat} runs.

- **backfill**: `backfill(fn, readColumns=["f0"], outputSchema="g double")` -- column files for the
  {APPENDS}×4 appended fragments only, one `DataReplacement` commit, then the watermark -- against
  `addColumns(fn, ..., outputSchema="h double")` over the whole table (what a team without backfill would
  have to run). *time* = backfill s / addColumns s (goal ≤ {BACKFILL_GOAL:g}); bytes: growth of the table
  directory against the column files the backfill added (goal ≤ {BYTES_GOAL:g}×).
- **constraint overhead**: appending {int(ds.rows * 0.1):,} cached rows to a table with two CHECK constraints
  (`f0 >= 0 AND f0 < 1`, `s LIKE 'name-%'`: evaluated by Spark in the write's projection, enforced in the
  writing task) against the same append without. *time* = with / without (goal ≤ {CONSTRAINT_GOAL:g}×)."""
