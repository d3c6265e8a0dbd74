"""Streaming: the sink's and the source's cost per micro-batch, and tables with
many versions (one commit per trigger makes tens of thousands).

* **Sink**: 20 micro-batches of 5,000 rows (a JSON file each, one file per
  trigger, ``availableNow``) into a lance table through
  ``writeStream.format("lance")`` -- vs ``LanceTable.append`` of the same 20
  DataFrames in a loop: seconds per batch, rows/s, commits/s.
* **Source latency**: a running ``readStream.format("lance")`` query
  (``processingTime`` 0.1 s) into a memory sink; 10 appends of 1,000 rows,
  one at a time: seconds from each append's commit to its rows in the sink.
* **Many versions**: tables of 1,000 / 10,000 / 30,000 versions (one
  ``UpdateConfig`` commit each, written by lance_ops' manifest build, so each
  version is a manifest and a transaction file) -- ``vacuum`` of every old
  version (retention 0) vs pylance's ``cleanup_old_versions`` on a copy of the
  same table, and ``history(limit=10)`` vs pylance's ``versions()``. Goals:
  vacuum at 30,000 versions ≤ 10× its time at 1,000 (linear) and ≤ pylance's;
  ``history(limit=10)`` flat in the number of versions.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import time

from tests.helpers import many_versions

from .harness import Context, Result, Section, Timing

TITLE = "Streaming: sink and source per micro-batch; vacuum and history with many versions"
BATCHES = 20
BATCH_ROWS = 5_000
VERSION_COUNTS = (1_000, 10_000, 30_000)


def _once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _sink(ctx: Context, section: Section) -> None:
    from lance_ops import LanceTable

    spark = ctx.spark
    src = ctx.scratch("stream-src")
    os.makedirs(src)
    for b in range(BATCHES):
        with open(os.path.join(src, f"part-{b:03d}.json"), "w") as f:
            f.write("".join(json.dumps({"id": b * BATCH_ROWS + i, "v": f"b{b}"}) + "\n" for i in range(BATCH_ROWS)))
    schema = "id long, v string"

    def sink():
        uri, ck = ctx.scratch("stream-sink.lance"), ctx.scratch("stream-ck")
        q = (spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1).load(src)
             .writeStream.format("lance").option("checkpointLocation", ck).trigger(availableNow=True).start(uri))
        q.awaitTermination()

    frames = [spark.read.schema(schema).json(os.path.join(src, f"part-{b:03d}.json")) for b in range(BATCHES)]

    def appends():
        uri = ctx.scratch("stream-append.lance")
        t = LanceTable.create(spark, uri, frames[0])
        for df in frames[1:]:
            t.append(df)

    sink_t = ctx.timeit(sink, warmup=True)
    append_t = ctx.timeit(appends, warmup=True)
    per = Timing([s / BATCHES for s in sink_t.runs])
    section.add(Result(f"sink: {BATCHES} micro-batches of {BATCH_ROWS:,} rows, seconds per batch", per,
                       "LanceTable.append per batch", Timing([s / BATCHES for s in append_t.runs]), kind="time",
                       notes=f"{BATCHES * BATCH_ROWS / sink_t.best:,.0f} rows/s, "
                             f"{BATCHES / sink_t.best:.1f} commits/s through the sink"))


def _source_latency(ctx: Context, section: Section) -> None:
    from lance_ops import LanceTable

    spark = ctx.spark
    uri = ctx.scratch("stream-source.lance")
    t = LanceTable.create(spark, uri, spark.range(0, 1000))
    q = (spark.readStream.format("lance").option("startingVersion", "latest").load(uri)
         .writeStream.format("memory").queryName("lance_ops_bench_source").trigger(processingTime="100 milliseconds")
         .start())
    try:
        time.sleep(2)
        lat = []
        for i in range(1, 11):
            t.append(spark.range(i * 1000, (i + 1) * 1000))
            committed = time.perf_counter()
            want = i * 1000
            while spark.table("lance_ops_bench_source").count() < want:
                time.sleep(0.02)
            lat.append(time.perf_counter() - committed)
    finally:
        q.stop()
    section.add(Result("source: append commit → rows in a running query (processingTime 0.1 s)", Timing(lat),
                       notes=f"median {sorted(lat)[len(lat) // 2]:.2f} s over 10 appends"))


def _many_versions(ctx: Context, section: Section) -> None:
    import lance

    from lance_ops.txn.table import Table

    ours_vacuum: dict[int, float] = {}
    old = datetime.timedelta(seconds=0)
    for n in VERSION_COUNTS:
        base = ctx.scratch(f"versions-{n}")
        t0 = time.perf_counter()
        many_versions(base, n)
        built = time.perf_counter() - t0
        runs, peer_runs = [], []
        for _ in range(ctx.repeat):
            mine, theirs = ctx.scratch(f"versions-{n}-ours"), ctx.scratch(f"versions-{n}-pylance")
            shutil.copytree(base, mine)
            shutil.copytree(base, theirs)
            runs.append(_once(lambda m=mine: Table(m).vacuum(retentionHours=0, enforceRetentionDuration=False)))
            peer_runs.append(_once(lambda p=theirs: lance.dataset(p).cleanup_old_versions(older_than=old,
                                                                                          delete_unverified=True)))
            kept_ours = sorted(os.listdir(os.path.join(mine, "_versions")))
            kept_theirs = sorted(os.listdir(os.path.join(theirs, "_versions")))
            assert [x for x in kept_ours if x.endswith(".manifest")] == [x for x in kept_theirs if x.endswith(".manifest")]
        ours_vacuum[n] = min(runs)
        section.add(Result(f"vacuum of {n - 1:,} old versions", Timing(runs), "pylance cleanup_old_versions",
                           Timing(peer_runs), kind="time", goal=1.0,
                           notes=f"table built in {built:.1f} s"))
        hist = ctx.timeit(lambda b=base: Table(b).history(limit=10))
        peer_hist = ctx.timeit(lambda b=base: lance.dataset(b).versions()[-10:])
        section.add(Result(f"history(limit=10) at {n:,} versions", hist, "pylance versions()[-10:]", peer_hist,
                           kind="time"))
    lo, hi = VERSION_COUNTS[0], VERSION_COUNTS[-1]
    growth = ours_vacuum[hi] / ours_vacuum[lo]
    section.note(f"vacuum time {hi:,} vs {lo:,} versions: {growth:.1f}× for {hi / lo:.0f}× the versions "
                 f"(goal ≤ 10×: {'PASS' if growth <= 10 else 'FAIL'})")


def run(ctx: Context) -> Section:
    section = Section(TITLE, __doc__.split("\n\n", 1)[1].replace("\n", " ").strip())
    _sink(ctx, section)
    _source_latency(ctx, section)
    _many_versions(ctx, section)
    return section
