"""Many small fragments: the CDC pattern -- a few rows every few minutes into
a table of thousands of fragments -- vs pylance on copies of the same table.

A table of 4,000 fragments × 25 rows (100,000 rows; id, v, s; stable row
ids), written by pylance. Each operation runs on a fresh copy, timed, and
pylance's equivalent on another copy in the same round:

* merge of 10 upserts (keys spread over the table) without an index --
  goal ≤ 1.0 s -- and with a zone map and with a BTREE on the key -- goal
  ≤ 0.5 s -- vs ``merge_insert``; both merge the same Arrow table (ours
  through ``spark.createDataFrame(table)``);
* delete / update of 1 row -- goal ≤ 3× pylance's ``delete`` / ``update``;
* compaction of the 4,000 fragments -- goal ≤ 3× ``optimize.compact_files``.
"""
from __future__ import annotations

import os
import shutil
import time

import lance
import numpy as np
import pyarrow as pa

from .harness import Context, Result, Section, Timing

TITLE = "Many small fragments: small merges, deletes, updates and compaction at 4,000 fragments vs pylance"
FRAGMENTS = 4_000
ROWS_PER_FRAGMENT = 25
UPSERTS = 10


def base_table(path: str, index: str | None = None) -> str:
    """The 4,000-fragment table (cached under the data dir)."""
    if os.path.exists(os.path.join(path, "_versions")):
        return path
    n = FRAGMENTS * ROWS_PER_FRAGMENT
    ids = np.arange(n, dtype=np.int64)
    table = pa.table({"id": ids, "v": ids * 2, "s": pa.array([f"s{i}" for i in range(n)])})
    lance.write_dataset(table, path, max_rows_per_file=ROWS_PER_FRAGMENT, max_rows_per_group=ROWS_PER_FRAGMENT,
                        enable_stable_row_ids=True)
    if index is not None:
        lance.dataset(path).create_scalar_index("id", index)
    return path


def _copy(src: str, dst: str) -> str:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def _pair(ctx: Context, base: str, name: str, ours, theirs) -> tuple[Timing, Timing]:
    """(ours, pylance) over ``ctx.repeat`` rounds, each on fresh copies,
    after one untimed round of each."""
    mine, peer = [], []
    for i in range(ctx.repeat + 1):
        a, b = _copy(base, ctx.scratch(f"{name}-ours")), _copy(base, ctx.scratch(f"{name}-pylance"))
        t0 = time.perf_counter()
        ours(a, i)
        t1 = time.perf_counter()
        theirs(b, i)
        t2 = time.perf_counter()
        if i:
            mine.append(t1 - t0)
            peer.append(t2 - t1)
    return Timing(mine), Timing(peer)


def run(ctx: Context) -> Section:
    from lance_ops import LanceTable

    spark = ctx.spark
    section = Section(TITLE, __doc__.split("\n\n", 1)[1].replace("\n", " ").strip())
    plain = base_table(os.path.join(ctx.data_dir, f"fragments-{FRAGMENTS}.lance"))
    keys = np.linspace(0, FRAGMENTS * ROWS_PER_FRAGMENT - 1, UPSERTS).astype(np.int64)

    def upserts(i):
        k = keys + i  # other keys each round
        return k, pa.table({"id": k, "v": k * 3, "s": pa.array([f"m{x}" for x in k])})

    def our_merge(path, i):
        # the very Arrow table pylance merges (a CDC micro-batch as it arrives)
        _, tbl = upserts(i)
        src = spark.createDataFrame(tbl)
        LanceTable(spark, path).merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def their_merge(path, i):
        _, tbl = upserts(i)
        lance.dataset(path).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(tbl)

    for label, index, goal in (("no index", None, 1.0), ("zone map", "ZONEMAP", 0.5), ("BTREE", "BTREE", 0.5)):
        base = plain if index is None else base_table(
            os.path.join(ctx.data_dir, f"fragments-{FRAGMENTS}-{index.lower()}.lance"), index)
        ours, peer = _pair(ctx, base, f"merge-{label}", our_merge, their_merge)
        passed = "PASS" if ours.best <= goal else "FAIL"
        section.add(Result(f"merge of {UPSERTS} upserts, {label}", ours, "pylance merge_insert", peer, kind="time",
                           notes=f"goal ≤ {goal:g} s: {passed}"))

    def our_delete(path, i):
        LanceTable(spark, path).delete(f"id = {777 + i}")

    def their_delete(path, i):
        lance.dataset(path).delete(f"id = {777 + i}")

    def our_update(path, i):
        LanceTable(spark, path).update(f"id = {888 + i}", {"v": "v + 1"})

    def their_update(path, i):
        lance.dataset(path).update({"v": "v + 1"}, where=f"id = {888 + i}")

    def our_compaction(path, i):
        LanceTable(spark, path).optimize().executeCompaction()

    def their_compaction(path, i):
        lance.dataset(path).optimize.compact_files()

    for name, ours_fn, theirs_fn, peer in (
        ("delete of 1 row", our_delete, their_delete, "pylance delete"),
        ("update of 1 row", our_update, their_update, "pylance update"),
        (f"compaction of {FRAGMENTS:,} fragments", our_compaction, their_compaction, "pylance compact_files"),
    ):
        ours, theirs = _pair(ctx, plain, name.split()[0], ours_fn, theirs_fn)
        section.add(Result(name, ours, peer, theirs, kind="time", goal=3.0))
    return section
