"""Foundation: scanning into Spark vs Spark's Parquet scan, writing vs pylance.

Goals (from the foundation issue): a scan reaches at least half of Parquet's
rate on the same data; create and append take at most twice as long as
``lance.write_dataset`` converting the same Parquet.
"""
from __future__ import annotations

import math

import lance

from lance_ops import LanceTable

from . import data
from .harness import Context, Result, Section, Timing, dir_bytes, fmt_bytes, remove

TITLE = "Foundation: scan vs Parquet, create/append vs pylance"
SCAN_GOAL = 0.5
WRITE_GOAL = 2.0
FILTER = "id % 100 = 7"
APPEND_FILTER = "id % 10 = 0"


def run(ctx: Context) -> Section:
    ds = data.shared_dataset(ctx.spark, ctx.data_dir, ctx.rows)
    section = Section(TITLE, _description(ds, ctx))
    table = data.lance_ops_table(ctx.spark, ds)
    section.note(f"scanned table: {_describe(table, dir_bytes(table))}")
    _spark_floor(ctx, ds, section)
    _filtered_sum(ctx, ds, table, section)
    _full_scan(ctx, ds, table, section)
    _create(ctx, ds, section)
    _append(ctx, ds, section)
    section.note(ctx.memory_note())
    return section


def _description(ds: data.Dataset, ctx: Context) -> str:
    return f"""\
Data: {ds.rows:,} rows of `id` (long), `f0`..`f7` (double), `s` (string `name-<id>`),
{fmt_bytes(dir_bytes(ds.parquet))} as {data.FILES} Parquet files written by Spark. The Lance table
read by the scans was created from them by `LanceTable.create(..., maxRowsPerFragment={ds.rows_per_fragment:,})`
(once, then cached under the data directory).
Every lance_ops timing is interleaved with its peer's in the same process; best of {ctx.repeat} runs
(reads after one untimed warm-up; writes to a path deleted before every run).

- **filtered sum**: `df.where("{FILTER}").selectExpr("sum(f0)").collect()`, peer `spark.read.parquet`.
  `toDF()` reads all 10 columns: Spark 4.3's Python Data Source API offers no column pruning
  (its `PythonScanBuilder` implements only `SupportsPushDownFilters`), so Spark asks the source for the
  full schema. `toDF(columns=["id", "f0"])` is the documented workaround. Parquet prunes to 2 columns.
- **full scan**: `df.write.format("noop").mode("overwrite").save()` over all columns.
- **create**: Parquet -> Lance, `LanceTable.create(spark, path, spark.read.parquet(...), maxRowsPerFragment={ds.rows_per_fragment:,})`
  vs `lance.write_dataset(pyarrow.dataset.dataset(...), path, max_rows_per_file={ds.rows_per_fragment:,}, enable_stable_row_ids=True)`.
- **append**: 10% of the rows (`{APPEND_FILTER}`) read from the same Parquet files, appended to a fresh copy
  of each side's own table: `LanceTable.append(spark.read.parquet(...).where(...))` vs `lance.write_dataset(
  <pyarrow scanner with the same filter>, path, mode="append", max_rows_per_file={ds.rows_per_fragment:,})`.

Ratios: *rate* = peer seconds / lance_ops seconds (lance_ops' throughput as a fraction of the peer's,
goal ≥ {SCAN_GOAL}); *time* = lance_ops seconds / peer seconds (goal ≤ {WRITE_GOAL:g})."""


def _row_counter():
    """A ``mapInArrow`` function that only counts the rows handed to it (made
    here, inside a function, so it is pickled by value: the Python workers
    need not import the benchmarks package)."""

    def consume(batches):
        import pyarrow as pa

        n = 0
        for b in batches:
            n += b.num_rows
        yield pa.RecordBatch.from_pydict({"n": [n]})

    return consume


def _spark_floor(ctx: Context, ds: data.Dataset, section: Section) -> None:
    """What Spark itself costs here, whatever the source: a job that does
    nothing, and handing rows from the JVM to a Python task (``mapInArrow``),
    which every lance_ops write path pays (executors write Lance files in
    Python) and pylance does not. No goal: context for the ratios below."""
    from pyspark.sql import functions as F

    spark = ctx.spark

    def two_columns():
        return spark.range(0, ds.rows, 1, 4).select("id", (F.col("id") * 2.0).alias("g"))

    t = ctx.interleave(
        {
            "empty": lambda: spark.range(0, data.FILES, 1, data.FILES).write.format("noop").mode("overwrite").save(),
            "noop": lambda: two_columns().write.format("noop").mode("overwrite").save(),
            "python": lambda: two_columns().mapInArrow(_row_counter(), "n long").collect(),
        },
        warmup=True,
    )
    section.note(
        f"Spark's own floor on this machine: an empty job of {data.FILES} tasks {t['empty'].best:.2f} s; "
        f"{ds.rows:,} rows x 2 columns from `spark.range` to `noop` {t['noop'].best:.2f} s, and into Python "
        f"tasks through `mapInArrow` {t['python'].best:.2f} s -- the JVM -> Python hand-off every lance_ops "
        "write pays (executors write Lance files from Python) and pylance, running in-process in Rust, does not"
    )


def _sum_f0(df) -> float:
    return df.where(FILTER).selectExpr("sum(f0)").collect()[0][0]


def _filtered_sum(ctx: Context, ds: data.Dataset, table: str, section: Section) -> None:
    spark = ctx.spark
    t = ctx.interleave(
        {
            "parquet": lambda: _sum_f0(spark.read.parquet(ds.parquet)),
            "all": lambda: _sum_f0(LanceTable(spark, table).toDF()),
            "cols": lambda: _sum_f0(LanceTable(spark, table).toDF(columns=["id", "f0"])),
        },
        warmup=True,
    )
    _check_same(t["parquet"].value, {k: t[k].value for k in ("all", "cols")})
    for key, name in (("all", "filtered sum, `toDF()`"), ("cols", 'filtered sum, `toDF(columns=["id","f0"])`')):
        section.add(Result(name, t[key], "`spark.read.parquet`", t["parquet"], "rate", SCAN_GOAL))


def _check_same(expected: float, actual: dict[str, float]) -> None:
    """A comparison is void if the two paths disagree (float sums differ only
    in summation order)."""
    for name, value in actual.items():
        if not math.isclose(value, expected, rel_tol=1e-9):
            raise RuntimeError(f"sum(f0) of {name} is {value!r}, Parquet's is {expected!r}")


def _full_scan(ctx: Context, ds: data.Dataset, table: str, section: Section) -> None:
    spark = ctx.spark

    def noop(df) -> None:
        df.write.format("noop").mode("overwrite").save()

    t = ctx.interleave(
        {
            "parquet": lambda: noop(spark.read.parquet(ds.parquet)),
            "lance": lambda: noop(LanceTable(spark, table).toDF()),
        },
        warmup=True,
    )
    notes = f"lance_ops {ds.rows / t['lance'].best / 1e6:.1f} vs Parquet {ds.rows / t['parquet'].best / 1e6:.1f} M rows/s"
    section.add(Result("full scan to `noop`, `toDF()`", t["lance"], "`spark.read.parquet`", t["parquet"], "rate", SCAN_GOAL, notes))


def _create(ctx: Context, ds: data.Dataset, section: Section) -> None:
    paths = {"lance_ops": ctx.scratch("create-lance_ops.lance"), "pylance": ctx.scratch("create-pylance.lance")}
    t = ctx.interleave(
        {
            "lance_ops": lambda: data.create_with_lance_ops(ctx.spark, ds, paths["lance_ops"]),
            "pylance": lambda: data.create_with_pylance(ds, paths["pylance"]),
        },
        setup=lambda name: remove(paths[name]),
    )
    written = {k: dir_bytes(p) for k, p in paths.items()}
    notes = (
        f"lance_ops wrote {_describe(paths['lance_ops'], written['lance_ops'])}, "
        f"pylance {_describe(paths['pylance'], written['pylance'])}"
    )
    section.add(Result("create from Parquet", t["lance_ops"], "`lance.write_dataset`", t["pylance"], "time", WRITE_GOAL, notes))
    _create_stages(ctx, ds, section, t["lance_ops"])


#: Issue 33's goal for create against its own stages (below).
STAGE_GOAL = 1.2


def _create_stages(ctx: Context, ds: data.Dataset, section: Section, ours: Timing) -> None:
    """Create broken into its stages, each timed in this run: Spark reading
    the Parquet source to ``noop`` (the JVM scan); the same scan handed to
    Python tasks through ``mapInArrow`` (scan + the JVM -> Python hand-off of
    every column, the batches only counted); pylance writing the same rows,
    already decoded into one in-memory Arrow table, in this one process (the
    encode + write). Their floor = hand-off + encode; the rest of lance_ops'
    create is what its tasks add around the encoder (batch re-chunking,
    per-fragment files, the write journal) and the commit."""
    held = {"table": ds.arrow().to_table()}  # (decoded once, outside the timings)
    path = ctx.scratch("create-stages-pylance.lance")
    _stage_floor(
        ctx, section, ours, lambda: ctx.spark.read.parquet(ds.parquet),
        lambda: lance.write_dataset(held["table"], path, max_rows_per_file=ds.rows_per_fragment,
                                    enable_stable_row_ids=True),
        lambda: remove(path),
        what=("create", f"{ds.rows:,} rows, {len(ds.arrow().files)} Parquet files", "scan", "every column",
              "encoding + writing", " (task-side batching and files, the commit)"),
        row=("create from Parquet", "scan + hand-off + pylance encode"))
    held.clear()


def _stage_floor(ctx: Context, section: Section, ours: Timing, source, encode, reset, what: tuple, row: tuple) -> None:
    """Time ``source()`` (a DataFrame) to ``noop`` (the JVM scan) and handed
    to Python tasks (scan + hand-off), and ``encode()`` (pylance writing its
    rows from memory; ``reset()`` before each run); note them and add the row
    of ``ours`` against the floor = hand-off + encode. ``what``: (operation,
    sizes, the scan, the columns handed off, what pylance does, a tail for
    the note); ``row``: (measurement, peer)."""
    t = ctx.interleave(
        {
            "scan": lambda: source().write.format("noop").mode("overwrite").save(),
            "handoff": lambda: source().mapInArrow(_row_counter(), "n long").collect(),
            "encode": encode,
        },
        warmup=True,
        setup=lambda name: reset() if name == "encode" else None,
    )
    scan, handoff, enc = t["scan"].best, t["handoff"].best, t["encode"].best
    floor = Timing([handoff + enc])
    op, sizes, scanned, handed, doing, tail = what
    section.note(
        f"{op}, stage by stage ({sizes}): Spark's {scanned} to `noop` {scan:.2f} s; + the JVM -> Python hand-off of "
        f"{handed} {handoff - scan:.2f} s (scan + hand-off {handoff:.2f} s); pylance {doing} the same rows from "
        f"memory in one process {enc:.2f} s. Floor = {handoff:.2f} + {enc:.2f} = {floor.best:.2f} s; lance_ops' "
        f"{op} {ours.best:.2f} s spends {ours.best - floor.best:+.2f} s beyond it{tail}"
    )
    section.add(Result(f"{row[0]} vs its stage floor", ours, row[1], floor, "time", STAGE_GOAL,
                       "floor: the three stages measured in this run (note above)"))


def _append(ctx: Context, ds: data.Dataset, section: Section) -> None:
    spark = ctx.spark
    bases = {"lance_ops": data.lance_ops_table(spark, ds), "pylance": data.pylance_table(ds)}
    paths = {"lance_ops": ctx.scratch("append-lance_ops.lance"), "pylance": ctx.scratch("append-pylance.lance")}
    t = ctx.interleave(
        {
            "lance_ops": lambda: LanceTable(spark, paths["lance_ops"]).append(
                spark.read.parquet(ds.parquet).where(APPEND_FILTER)
            ),
            "pylance": lambda: lance.write_dataset(
                data.every_tenth_row(ds), paths["pylance"], mode="append", max_rows_per_file=ds.rows_per_fragment
            ),
        },
        setup=lambda name: data.fresh_copy(bases[name], paths[name]),
    )
    expected = len(range(0, ds.rows, 10))
    for side, path in paths.items():
        appended = lance.dataset(path).count_rows() - ds.rows
        if appended != expected:
            raise RuntimeError(f"{side} appended {appended} rows, expected {expected}")
    written = {k: dir_bytes(p) - dir_bytes(bases[k]) for k, p in paths.items()}
    notes = (
        f"appended {expected:,} rows; lance_ops wrote {fmt_bytes(written['lance_ops'])} "
        f"({t['lance_ops'].value.metrics['numAddedFragments']} fragments), pylance {fmt_bytes(written['pylance'])} "
        f"({_fragments(paths['pylance']) - _fragments(bases['pylance'])} fragments)"
    )
    section.add(Result("append 10% of rows", t["lance_ops"], "`lance.write_dataset(mode=\"append\")`", t["pylance"], "time", WRITE_GOAL, notes))
    _append_stages(ctx, ds, section, t["lance_ops"], bases["pylance"])


def _append_stages(ctx: Context, ds: data.Dataset, section: Section, ours: Timing, pylance_base: str) -> None:
    """Append broken into its stages as create is (:func:`_create_stages`):
    Spark scanning the Parquet source with the filter to ``noop``; the same
    filtered scan handed to Python tasks (scan + hand-off of the appended
    rows); pylance appending those rows, already decoded in memory, to a
    fresh copy of its table in this process (encode + write + commit)."""
    held = {"table": data.every_tenth_row(ds).to_table()}  # (decoded once, outside the timings)
    path = ctx.scratch("append-stages-pylance.lance")
    _stage_floor(
        ctx, section, ours, lambda: ctx.spark.read.parquet(ds.parquet).where(APPEND_FILTER),
        lambda: lance.write_dataset(held["table"], path, mode="append", max_rows_per_file=ds.rows_per_fragment),
        lambda: data.fresh_copy(pylance_base, path),
        what=("append", f"{len(range(0, ds.rows, 10)):,} of {ds.rows:,} rows", "filtered scan", "the appended rows",
              "appending", ""),
        row=("append 10% of rows", "filtered scan + hand-off + pylance append"))
    held.clear()


def _fragments(path: str) -> int:
    return len(lance.dataset(path).get_fragments())


def _describe(path: str, size: int) -> str:
    """Size, fragment count and file format of a written table (read with pylance
    for both sides, so the two are described alike)."""
    d = lance.dataset(path)
    return f"{fmt_bytes(size)} in {len(d.get_fragments())} fragments (format {d.data_storage_version})"
