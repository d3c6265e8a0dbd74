"""Data skipping: selective delete / update / read / merge with and without a
ZONEMAP index, vs pylance with the same index.

Goals (from the data skipping issue): each operation >= 5x faster with the
index than without; within 2x of pylance plus one empty Spark job of the
same task count, measured in the same run.
"""
from __future__ import annotations

import os
import time

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from lance_ops import LanceTable
from lance_ops.spark.datasource import read_skip_report

from .data import FILES, fresh_copy
from .harness import Context, Result, Section, StageCounter, Timing, empty_job, interleave

TITLE = "Data skipping: zone maps for delete, update, read, merge"
SPEEDUP_GOAL = 5.0
PEER_GOAL = 2.0
TS0 = 1_600_000_000_000_000  # µs
MERGE_ROWS = 10_000


def _table(rows: int):
    """id ascending, ts ascending (1 s apart), a double and a string; batches of 1M rows."""
    step = 1 << 20
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("f0", pa.float64()), ("s", pa.string())])
    for lo in range(0, rows, step):
        ids = np.arange(lo, min(rows, lo + step), dtype=np.int64)
        yield pa.record_batch([
            pa.array(ids), pa.array(TS0 + ids * 1_000_000, pa.timestamp("us", "UTC")),
            pa.array(np.random.default_rng(lo).random(len(ids))), pa.array([f"name-{i}" for i in ids]),
        ], schema=schema)


def _bases(ctx: Context) -> dict[str, str]:
    """Untimed: the plain table (pylance writes it: 40 fragments), a copy with
    ZONEMAPs made by lance_ops' createIndex, one with pylance's."""
    rows = ctx.rows
    plain = ctx.scratch("skip-plain.lance")
    schema = next(_table(1)).schema
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, _table(rows)), plain,
                        max_rows_per_file=-(-rows // FILES), enable_stable_row_ids=True)
    ours = fresh_copy(plain, ctx.scratch("skip-ours.lance"))
    t = LanceTable(ctx.spark, ours)
    t.createIndex(["id", "ts"], "ZONEMAP")  # (one scan of both columns)
    peer = fresh_copy(plain, ctx.scratch("skip-pylance.lance"))
    ds = lance.dataset(peer)
    ds.create_scalar_index("id", "ZONEMAP")
    lance.dataset(peer).create_scalar_index("ts", "ZONEMAP")
    return {"indexed": ours, "no index": plain, "pylance": peer}


def run(ctx: Context) -> Section:
    spark = ctx.spark
    rows = ctx.rows
    bases = _bases(ctx)
    paths = {k: ctx.scratch(f"skip-run-{k.replace(' ', '')}.lance") for k in bases}
    a = rows // 2 + rows // 7
    width = 10_000
    lo_ts = rows // 3
    n_read = max(1, rows // 1000)
    ts_lit = lambda i: f"TIMESTAMP_MICROS({TS0 + i * 1_000_000})"  # noqa: E731
    read_pred = f"ts BETWEEN {ts_lit(lo_ts)} AND {ts_lit(lo_ts + n_read - 1)}"
    pylance_read = (f"ts BETWEEN to_timestamp({(TS0 // 1_000_000) + lo_ts}) AND "
                    f"to_timestamp({(TS0 // 1_000_000) + lo_ts + n_read - 1})")
    delete_pred = f"id BETWEEN {a} AND {a + width}"
    merge_ids = np.arange(a, a + 2 * MERGE_ROWS, 2, dtype=np.int64)
    src = next(_table(1)).schema.empty_table()
    src = pa.table({"id": merge_ids, "ts": pa.array(TS0 + merge_ids * 1_000_000, pa.timestamp("us", "UTC")),
                    "f0": np.zeros(len(merge_ids)), "s": [f"merged-{i}" for i in merge_ids]}, schema=src.schema)
    src_path = os.path.join(ctx.scratch_dir, "skip-merge-source.parquet")
    pq.write_table(src, src_path)
    section = Section(TITLE, _description(ctx, delete_pred, read_pred))

    def fresh(name):
        fresh_copy(bases[name], paths[name])

    def ours(name):
        return LanceTable(spark, paths[name])

    # The source DataFrame is defined once, as pylance's source table is built
    # once: each merge still reads the Parquet file; only Spark's schema
    # inference of it (a job of its own) is left out of the timings.
    merge_source = spark.read.parquet(src_path)

    def merge_ours(name):
        t = ours(name)
        t.merge(merge_source, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        return t.lastCommit()

    report = os.path.join(ctx.scratch_dir, "skip-read.json")

    def read_ours(name):
        # (only the indexed run reports: the note below describes it)
        df = spark.read.format("lance").load(bases[name])
        if name == "indexed":
            df = spark.read.format("lance").option("skipReport", report).load(bases[name])
        # (the rows, as Arrow: what pylance's to_table returns)
        return df.where(read_pred).select("f0").toArrow().num_rows

    ops = {
        f"delete {delete_pred}": (
            lambda k: ours(k).delete(delete_pred),
            lambda: lance.dataset(paths["pylance"]).delete(delete_pred), True),
        f"update {delete_pred}": (
            lambda k: ours(k).update(delete_pred, {"f0": "f0 + 1"}),
            lambda: lance.dataset(paths["pylance"]).update({"f0": "f0 + 1"}, where=delete_pred), True),
        f"read WHERE ts BETWEEN … ({n_read:,} rows)": (
            read_ours,
            lambda: lance.dataset(bases["pylance"]).to_table(filter=pylance_read, columns=["f0"]).num_rows, False),
        f"merge of {MERGE_ROWS // 1000}k upserts, clustered keys": (
            merge_ours,
            lambda: lance.dataset(paths["pylance"]).merge_insert("id").when_matched_update_all()
            .when_not_matched_insert_all().execute(src), True),
    }
    stages = StageCounter()
    empties: dict[int, Timing] = {}

    def indexed(fn):
        def go():
            with stages:
                return fn("indexed")
        return go

    for name, (fn, peer, writes) in ops.items():
        fns = {"indexed": indexed(fn), "no index": lambda fn=fn: fn("no index"), "pylance": peer}
        # (each once untimed first, writes too -- on a fresh copy: Spark's
        # planner code is JIT-compiled over the first runs of a query shape,
        # and a session that merges or deletes has been warm since its first)
        t = interleave(fns, ctx.repeat, warmup=True, setup=fresh if writes else None)
        # The empty job gets the task count of *this* operation's indexed run:
        # its widest stage (operations report stages in progress lines; the
        # read, which runs no lance_ops job, in its skip report).
        if stages.stages:
            tasks, how = stages.max_tasks, stages.describe()
        else:
            tasks = max(1, read_skip_report(report)["numTasks"])
            how = f"{tasks} scan task(s)"
        if tasks not in empties:
            empties[tasks] = ctx.timeit(lambda n=tasks: empty_job(spark, n), warmup=True)
        empty = empties[tasks]
        info = t["indexed"].value
        notes = ""
        if hasattr(info, "metrics"):
            m = info.metrics
            notes = (f"indexed read {m['numFragmentsScanned']} fragments / {m['numRowsScanned']:,} rows "
                     f"(skipped {m['numFragmentsSkipped']})")
            plain = t["no index"].value.metrics
            notes += f"; without the index {plain['numFragmentsScanned']} / {plain['numRowsScanned']:,}"
        elif os.path.exists(report):
            rec = read_skip_report(report)
            notes = f"indexed read {rec['numFragmentsScanned']} fragments / {rec['numRowsScanned']:,} rows in {rec['numTasks']} tasks"
        # (the best rate any indexed run through Spark could reach here: the
        # unindexed time over one empty job of the indexed run's task count)
        ceiling = t["no index"].best / empty.best
        notes += (f"; ceiling for a run of one Spark job: {t['no index'].best:.2f} / empty job {empty.best:.2f} "
                  f"= {ceiling:.1f}×")
        section.add(Result(f"{name}: index vs no index", t["indexed"], "lance_ops without the index",
                           t["no index"], "rate", SPEEDUP_GOAL, notes))
        peer_plus = Timing([p + empty.best for p in t["pylance"].runs])
        section.add(Result(f"{name}: vs pylance + empty job", t["indexed"], "pylance + one empty Spark job",
                           peer_plus, "time", PEER_GOAL,
                           f"pylance alone {t['pylance']} s; empty job of {tasks} task(s) {empty} s; "
                           f"lance_ops ran {how}"))
    _zorder(ctx, section)
    section.note(_python_source_floor(ctx))
    section.note(_python_source_rows_floor(ctx, read_pred, lo_ts, n_read))
    agg = ctx.timeit(lambda: spark.read.format("lance").load(bases["indexed"]).where(read_pred)
                     .agg(F.count("*"), F.sum("f0")).collect(), warmup=True)
    section.note(f"the indexed read as an aggregate instead (count + sum of `f0`: Spark adds a shuffle stage, "
                 f"run as a second job): {agg} s")
    section.note(_driver_memory(ctx, bases["indexed"]))
    section.note(ctx.memory_note())
    return section


def _memory_source(spark, name: str, schema: str, data: list, push: bool = False) -> str:
    """Register ``name``: a Python data source of one partition yielding
    ``data`` (rows, or Arrow batches) from memory, no lance_ops code;
    ``push``: its reader takes the pushed filters and hands them all back to
    Spark, as the lance reader does."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class _Reader(DataSourceReader):
        def partitions(self):
            return [InputPartition(0)]

        def read(self, partition):
            yield from data

    class _Pushing(_Reader):
        def pushFilters(self, filters):
            yield from filters

    reader = _Pushing if push else _Reader

    class _Source(DataSource):
        @classmethod
        def name(cls):
            return name

        def schema(self):
            return schema

        def reader(self, schema):
            return reader()

    spark.dataSource.register(_Source)
    return name


def _python_source_floor(ctx: Context) -> str:
    """What any Python data source pays for the read's query shape: one
    column's rows as Arrow from a source of one partition that yields one
    row (its schema lookup and planning round trips to Python workers and
    the scan task), timed in this run -- the floor under the indexed read,
    which an empty job of one task does not have."""
    spark = ctx.spark
    name = _memory_source(spark, "lance_ops_bench_one_row", "f0 double", [(1.0,)])
    t = ctx.timeit(lambda: spark.read.format(name).load().select("f0").toArrow(), warmup=True)
    return (f"floor of the read's query shape on any Python data source (`select(\"f0\").toArrow()` of a "
            f"one-row, one-partition source, no lance_ops code): {t} s")


def _python_source_rows_floor(ctx: Context, read_pred: str, lo: int, n: int) -> str:
    """The indexed read's query on a Python data source with the table's
    schema that takes the pushed filters and yields the very rows the
    indexed read yields, from memory: what a Python data source pays for
    this query and these rows."""
    ids = np.arange(lo, lo + n, dtype=np.int64)
    batch = pa.record_batch([
        pa.array(ids), pa.array(TS0 + ids * 1_000_000, pa.timestamp("us", "UTC")),
        pa.array(np.random.default_rng(lo).random(len(ids))), pa.array([f"name-{i}" for i in ids]),
    ], names=["id", "ts", "f0", "s"])
    spark = ctx.spark
    name = _memory_source(spark, "lance_ops_bench_same_rows", "id bigint, ts timestamp, f0 double, s string",
                          [batch], push=True)
    t = ctx.timeit(lambda: spark.read.format(name).load().where(read_pred).select("f0").toArrow(), warmup=True)
    return (f"floor of the indexed read's query on a Python data source that takes the pushed filters and yields "
            f"the same {n:,} rows of the table's 4 columns from memory (no lance_ops code; Python data sources "
            f"cannot prune columns): {t} s")


#: Z-order: the columns (uncorrelated, neither clustered by the writer) and the goal
ZORDER_COLUMNS = ("f0", "k")
K_RANGE = 1 << 40
ZORDER_GOAL = 0.2


def _zorder_table(rows: int):
    """The skipping table's rows plus ``k``, a random long uncorrelated with ``f0``."""
    for batch in _table(rows):
        k = np.random.default_rng(batch.column(0)[0].as_py() + 1).integers(0, K_RANGE, batch.num_rows)
        yield pa.record_batch([*batch.columns, pa.array(k)], names=[*batch.schema.names, "k"])


def _touched(ctx: Context, path: str, pred: str, op: str) -> int:
    """Fragments a selective read (skip report) or delete (its metrics) of
    ``pred`` touches; a delete runs on a fresh copy."""
    spark = ctx.spark
    if op == "read":
        report = os.path.join(ctx.scratch_dir, "zorder-read.json")
        spark.read.format("lance").option("skipReport", report).load(path).where(pred).select("id").toArrow()
        return read_skip_report(report)["numFragmentsScanned"]
    work = fresh_copy(path, ctx.scratch("zorder-delete.lance"))
    t = LanceTable(spark, work)
    t.delete(pred)
    info = t.lastCommit() if callable(t.lastCommit) else t.lastCommit
    return info.metrics["numFragmentsScanned"]


def _zorder(ctx: Context, section: Section) -> None:
    """Issue 30 item 13: ``optimize().executeZOrderBy("f0", "k")`` on a copy of
    the table with a second random column -- as Delta users call it (the
    default fragment size) and keeping the table's 40 fragments; a selective
    read and delete on each column, fragments touched before and after (goal:
    after <= 20% of before) and rows scanned; pylance reads the z-ordered
    table equal (rows, row ids, lineage)."""
    spark = ctx.spark
    rows = ctx.rows
    schema = next(_zorder_table(1)).schema
    base = ctx.scratch("skip-zorder-base.lance")
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, _zorder_table(rows)), base,
                        max_rows_per_file=-(-rows // FILES), enable_stable_row_ids=True)
    LanceTable(spark, base).createIndex(list(ZORDER_COLUMNS), "ZONEMAP")
    preds = {"f0": "f0 BETWEEN 0.3 AND 0.3001",
             "k": f"k BETWEEN {K_RANGE // 3} AND {K_RANGE // 3 + K_RANGE // 10_000}"}
    ops = [(op, c) for c in preds for op in ("read", "delete")]
    before = {k: _touched(ctx, base, preds[k[1]], k[0]) for k in ops}
    read = lambda p: spark.read.format("lance").load(p).where(preds["f0"]).select("id").toArrow()  # noqa: E731
    read_before = ctx.timeit(lambda: read(base), warmup=True)
    variants = {"default fragment size": {}, f"{FILES} fragments kept": {"targetRowsPerFragment": -(-rows // FILES)}}
    verdicts = []
    for label, kwargs in variants.items():
        work = fresh_copy(base, ctx.scratch("skip-zorder.lance"))
        t0 = time.time()
        metrics = LanceTable(spark, work).optimize().executeZOrderBy(*ZORDER_COLUMNS, **kwargs).head().metrics
        zorder_s = time.time() - t0
        after = {k: _touched(ctx, work, preds[k[1]], k[0]) for k in ops}
        scanned = _rows_scanned(ctx, work, preds)
        read_after = ctx.timeit(lambda w=work: read(w), warmup=True)
        same = _same_by_row_id(base, work)
        worst = max(after[k] / before[k] for k in ops)
        touched = "; ".join(f"{op} on {c}: {before[(op, c)]} → {after[(op, c)]}" for op, c in ops)
        section.add(Result(
            f"Z-order by ({', '.join(ZORDER_COLUMNS)}), {label}: read `{preds['f0']}`, z-ordered vs not",
            read_after, "the same table before the Z-order", read_before, "rate", None,
            f"fragments touched (of {FILES} before, {metrics.numFilesAdded} after) {touched}"))
        verdicts.append(worst <= ZORDER_GOAL)
        section.note(
            f"Z-order, {label} (`executeZOrderBy(\"f0\", \"k\"{', targetRowsPerFragment=' + str(kwargs['targetRowsPerFragment']) if kwargs else ''})`, "
            f"{rows:,} rows, {metrics.numFilesRemoved} → {metrics.numFilesAdded} fragments, {zorder_s:.1f} s, one run): "
            f"fragments a selective read / delete touches -- {touched}; worst after/before {worst:.2f} "
            f"(goal ≤ {ZORDER_GOAL:g}: {'PASS' if worst <= ZORDER_GOAL else 'FAIL'}); rows the reads scan after "
            f"(zones of {ZONE_ROWS:,} rows): {scanned}; pylance reads the z-ordered table equal (values, row ids, "
            f"lineage by row id): {'yes' if same else 'NO'}"
        )


ZONE_ROWS = 8192


def _rows_scanned(ctx: Context, path: str, preds: dict) -> str:
    report = os.path.join(ctx.scratch_dir, "zorder-rows.json")
    out = []
    for c, pred in preds.items():
        ctx.spark.read.format("lance").option("skipReport", report).load(path).where(pred).select("id").toArrow()
        out.append(f"{c}: {read_skip_report(report)['numRowsScanned']:,}")
    return ", ".join(out)


def _same_by_row_id(base: str, work: str) -> bool:
    """pylance reads both tables with the same values, row ids and lineage
    (one column at a time: two copies of the whole table would not fit in memory)."""
    for c in ["id", "f0", "k", "_row_created_at_version", "_row_last_updated_at_version"]:
        a = lance.dataset(base).to_table(columns=[c], with_row_id=True).sort_by("_rowid")
        b = lance.dataset(work).to_table(columns=[c], with_row_id=True).sort_by("_rowid")
        if not (a.column(c).equals(b.column(c)) and a.column("_rowid").equals(b.column("_rowid"))):
            return False
    return True


#: The table size the driver-memory check compares the run's size with.
MEMORY_SMALL_DIVISOR = 10


def _peak_growth(fn) -> tuple[int, int]:
    """(peak RSS growth of this process, peak traced Python allocation) while
    ``fn`` runs: the driver's own memory for one operation. The peak RSS
    (VmHWM) is reset first through /proc/self/clear_refs."""
    import tracemalloc

    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        return 0

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS:")
    tracemalloc.start()
    try:
        fn()
        traced = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return max(0, status("VmHWM:") - before), traced


def _driver_memory(ctx: Context, indexed_base: str) -> str:
    """The issue's "driver memory flat in table size": each indexed operation
    on the run's table and on one a tenth of its size (same 40 fragments,
    ZONEMAPs by createIndex), each from a fresh copy; the driver's peak RSS
    growth and peak Python allocation (tracemalloc) during the operation.
    Untimed. (In local mode the JVM is driver and executors at once, so its
    heap is not the driver's alone: not measured here.)"""
    spark = ctx.spark
    sizes = {"small": ctx.rows // MEMORY_SMALL_DIVISOR, "large": ctx.rows}
    results: dict[str, dict[str, tuple[int, int]]] = {}
    for label, n in sizes.items():
        if label == "large":
            base = indexed_base
        else:
            base = ctx.scratch("skip-memory-small.lance")
            schema = next(_table(1)).schema
            lance.write_dataset(pa.RecordBatchReader.from_batches(schema, _table(n)), base,
                                max_rows_per_file=-(-n // FILES), enable_stable_row_ids=True)
            LanceTable(spark, base).createIndex(["id", "ts"], "ZONEMAP")
        results[label] = _memory_at(ctx, label, n, base)
    worst = max(results["large"][op][1] / max(1, results["small"][op][1]) for op in results["large"])
    mib = lambda b: f"{b / 2**20:.1f}"  # noqa: E731
    parts = "; ".join(
        f"{op} {mib(results['small'][op][1])} → {mib(results['large'][op][1])} MiB "
        f"(RSS growth {mib(results['small'][op][0])} → {mib(results['large'][op][0])})"
        for op in results["large"])
    return (f"driver memory of each indexed operation, {sizes['small']:,} → {sizes['large']:,} rows "
            f"(peak Python allocation, tracemalloc): {parts}; worst growth {worst:.2f}× for "
            f"{MEMORY_SMALL_DIVISOR}× the rows (goal: flat, ≤ 1.5×: {'PASS' if worst <= 1.5 else 'FAIL'})")


def _description(ctx: Context, delete_pred: str, read_pred: str) -> str:
    return f"""\
Table: {ctx.rows:,} rows in {FILES} fragments written by pylance (stable row ids): `id` ascending, `ts`
ascending (one second apart), `f0` double, `s` string. Three copies: without an index, with ZONEMAPs on
`id` and `ts` made by `LanceTable.createIndex` (lance_ops runs on it), and with pylance's own
`create_scalar_index(col, "ZONEMAP")` (pylance runs on it). Every write starts from a fresh copy (untimed).

- **delete**: `{delete_pred}`; **update**: `f0 = f0 + 1` where the same; **read**: `{read_pred}` through the
  data source, its rows as Arrow (`.select("f0").toArrow()`) vs pylance `to_table(filter=..., columns=["f0"])`; **merge**: {MERGE_ROWS:,} source rows
  (every second id of a 20k-id range, all matching) upserted with
  `merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll()` (`src = spark.read.parquet(...)`,
  defined once before the runs as pylance's in-memory source is built once: every merge reads the Parquet
  file, only Spark's schema inference job is not timed; a bare Parquet source: its count and key bounds come
  from the file's footer, no statistics job) vs pylance `merge_insert("id")` (source in memory).

Ratios: *rate* = seconds without the index / seconds with it (goal ≥ {SPEEDUP_GOAL:g}); *time* = lance_ops
seconds / (pylance seconds + one empty Spark job of the task count of that operation's indexed run -- its widest
stage, from its progress lines; the read's scan tasks from its skip report) (goal ≤ {PEER_GOAL:g}).
Best of {ctx.repeat} runs, after one untimed run of each (writes on a fresh copy too)."""


def _memory_at(ctx: Context, label: str, n: int, base: str) -> dict[str, tuple[int, int]]:
    """:func:`_peak_growth` of each indexed operation on a fresh copy of
    ``base`` (``n`` rows), after one warm run (imports and caches are not
    the table's size)."""
    spark = ctx.spark
    work = ctx.scratch("skip-memory-run.lance")
    a = n // 2 + n // 7
    pred = f"id BETWEEN {a} AND {a + 10_000}"
    ids = np.arange(a, a + 2 * MERGE_ROWS, 2, dtype=np.int64)
    src_path = ctx.scratch(f"skip-memory-source-{label}.parquet")
    pq.write_table(pa.table({"id": ids, "ts": pa.array(TS0 + ids * 1_000_000, pa.timestamp("us", "UTC")),
                             "f0": np.zeros(len(ids)), "s": [f"m-{i}" for i in ids]},
                            schema=next(_table(1)).schema), src_path)
    merge_source = spark.read.parquet(src_path)
    ops = {
        "delete": lambda: LanceTable(spark, work).delete(pred),
        "update": lambda: LanceTable(spark, work).update(pred, {"f0": "f0 + 1"}),
        "read": lambda: spark.read.format("lance").load(work).where(pred).select("f0").toArrow(),
        "merge": lambda: LanceTable(spark, work).merge(merge_source, "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(),
    }
    out = {}
    for op, fn in ops.items():
        fresh_copy(base, work)
        fn()
        fresh_copy(base, work)
        out[op] = _peak_growth(fn)
    return out
