"""Data evolution: add a column (SQL expression, Arrow UDF), rewrite a column.

Goals (from the data-evolution issue): bytes written ≤ 1.1x the new column's
own bytes; ≥ 10x faster than delta-rs, which must rewrite the table to
backfill; within 2x of pylance's add_columns.
"""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops import LanceTable

from . import data
from .harness import Context, Result, Section, fmt_bytes

TITLE = "Data evolution: add / rewrite a column vs pylance and delta-rs"
PYLANCE_GOAL = 2.0
DELTA_GOAL = 0.1  # lance_ops time / delta-rs time: at least 10x faster


def _double_f0(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch({"g": pc.multiply(batch.column("f0"), 2.0)})


def run(ctx: Context) -> Section:
    ds = data.shared_dataset(ctx.spark, ctx.data_dir, ctx.rows)
    section = Section(TITLE, _description(ds, ctx))
    bases = data.engine_tables(ctx.spark, ds)
    paths = {k: ctx.scratch(f"evo-{k}") for k in bases}
    spark = ctx.spark

    @lance.batch_udf(output_schema=pa.schema([("g", pa.float64())]))
    def pylance_udf(batch):
        return _double_f0(batch)

    ops = {
        "add column by SQL expression (`g = f0 * 2`)": {
            "lance_ops": lambda: LanceTable(spark, paths["lance_ops"]).addColumns({"g": "f0 * 2"}),
            "pylance": lambda: lance.dataset(paths["pylance"]).add_columns({"g": "f0 * 2"}),
            "delta-rs": lambda: _delta_backfill(paths["delta-rs"]),
        },
        "add column by Arrow UDF": {
            "lance_ops": lambda: LanceTable(spark, paths["lance_ops"]).addColumns(_double_f0, readColumns=["f0"], outputSchema="g double"),
            "pylance": lambda: lance.dataset(paths["pylance"]).add_columns(pylance_udf, read_columns=["f0"]),
            "delta-rs": lambda: _delta_backfill(paths["delta-rs"]),
        },
        "rewrite a column (`f1 = f1 * 2`)": {
            "lance_ops": lambda: LanceTable(spark, paths["lance_ops"]).rewriteColumns({"f1": "f1 * 2"}),
            "pylance": lambda: _pylance_rewrite(paths["pylance"]),
            "delta-rs": lambda: _delta(paths["delta-rs"]).update(updates={"f1": "f1 * 2"}),
        },
    }
    for name, fns in ops.items():
        t, written = ctx.interleave_with_bytes(fns, paths, setup=lambda n: data.fresh_copy(bases[n], paths[n]))
        own = _new_column_bytes(paths["lance_ops"], t["lance_ops"].value)
        ratio = written["lance_ops"] / own if own else float("inf")
        notes = (
            f"lance_ops wrote {fmt_bytes(written['lance_ops'])} = {ratio:.3f}× the new column files "
            f"({fmt_bytes(own)}; raw values {fmt_bytes(8 * ds.rows)}; goal ≤ 1.1×: {'PASS' if ratio <= 1.1 else 'FAIL'}); "
            f"pylance wrote {fmt_bytes(written['pylance'])}, delta-rs {fmt_bytes(written['delta-rs'])}"
        )
        section.add(Result(name, t["lance_ops"], "pylance", t["pylance"], "time", PYLANCE_GOAL, notes))
        section.add(Result(f"{name} (vs delta-rs rewrite)", t["lance_ops"], "delta-rs", t["delta-rs"], "time", DELTA_GOAL))
    section.note(ctx.memory_note())
    return section


def _description(ds: data.Dataset, ctx: Context) -> str:
    return f"""\
Table: the shared {ds.rows:,}-row dataset ({data.FILES} fragments) as a Lance table (lance_ops' and pylance's
own copies) and as a Delta table. Every run starts from a fresh copy (untimed); best of {ctx.repeat} runs.

- **add column**: lance_ops `addColumns({{"g": "f0 * 2"}})` / `addColumns(fn, readColumns=["f0"], outputSchema="g double")`
  vs pylance `add_columns({{"g": "f0 * 2"}})` / `add_columns(batch_udf, read_columns=["f0"])`. Delta has no
  data-evolution: the peer reads the table, computes `g` and rewrites it
  (`write_deltalake(..., mode="overwrite", schema_mode="overwrite")`).
- **rewrite a column**: lance_ops `rewriteColumns({{"f1": "f1 * 2"}})` (new files with just `f1`, old field
  id tombstoned) vs pylance `merge_insert("id").when_matched_update_all().write_mode("rewrite_columns")` with
  the recomputed column as source (its closest equivalent; reading `id, f1` is included) vs delta-rs
  `update({{"f1": "f1 * 2"}})` (rewrites every file).

*time* = lance_ops s / peer s: goal ≤ {PYLANCE_GOAL:g} vs pylance, ≤ {DELTA_GOAL:g} (10× faster) vs delta-rs.
Bytes: growth of the table directory, against the size of the column files lance_ops added."""


def _delta(path):
    from deltalake import DeltaTable

    return DeltaTable(path)


def _delta_backfill(path: str) -> None:
    from deltalake import write_deltalake

    table = _delta(path).to_pyarrow_table()
    table = table.append_column("g", pc.multiply(table.column("f0"), 2.0))
    write_deltalake(path, table, mode="overwrite", schema_mode="overwrite")


def _pylance_rewrite(path: str):
    ds = lance.dataset(path)
    src = ds.to_table(columns=["id", "f1"])
    src = src.set_column(1, "f1", pc.multiply(src.column("f1"), 2.0))
    return ds.merge_insert("id").when_matched_update_all().write_mode("rewrite_columns").execute(src)


def _new_column_bytes(path: str, info) -> int:
    """Bytes of the data files the lance_ops commit added."""
    from lance_ops.storage import ObjectStore
    from lance_ops.txn.log import open_snapshot

    snap = open_snapshot(ObjectStore(path), info.version)
    prev = open_snapshot(ObjectStore(path), info.version - 1)
    before = {df.path for f in prev.fragments for df in f.files}
    return sum(
        os.path.getsize(os.path.join(path, "data", df.path))
        for f in snap.fragments for df in f.files if df.path not in before
    )
