"""Fan out driver-planned tasks to executors through a DataFrame job.

RDDs (``sparkContext.parallelize``) do not exist under Spark Connect, so work
that is planned on the driver -- a compaction group, a group of fragments to
compute a column for -- runs as ``spark.range(0, n, 1, n).mapInArrow(...)``:
one partition (so one Spark task) per item, the items themselves shipped in
the task function's closure (small: serialized fragment metadata), and each
task returning Arrow rows. The same code runs on classic and Connect
sessions; executor errors travel as lance_ops errors (``executor_task``).
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import pyarrow as pa

from .errors import executor_errors, executor_task


def task_frame(spark, items: Sequence, fn: Callable[[object], Iterable[pa.RecordBatch]], schema):
    """A DataFrame of one partition (one Spark task) per item, whose rows are
    the Arrow batches ``fn(item)`` yields (``schema``: theirs, a StructType or
    DDL). ``items`` must not be empty."""
    items = list(items)

    @executor_task
    def run(batches):
        for b in batches:
            for i in b.column(0).to_pylist():
                yield from fn(items[i])

    n = len(items)
    return spark.range(0, n, 1, n).mapInArrow(run, schema)


def run_tasks(spark, items: Sequence, fn: Callable[[object], list[tuple]], schema: str,
              arrow_schema: pa.Schema) -> list[tuple]:
    """``fn(item)`` for every item, one Spark task each; returns all the rows
    (tuples matching ``arrow_schema``; ``schema``: the same as Spark DDL)."""
    items = list(items)
    if not items:
        return []

    def batches(item):
        rows = fn(item)
        if rows:
            cols = list(zip(*rows))
            yield pa.RecordBatch.from_arrays(
                [pa.array(list(c), f.type) for c, f in zip(cols, arrow_schema)], schema=arrow_schema
            )

    with executor_errors():
        out = task_frame(spark, items, batches, schema).collect()
    return [tuple(r) for r in out]


#: Rows of tasks that report (kind, payload) pairs: written column files,
#: row changes (see :mod:`.columnfiles`, :mod:`.rowchanges`).
PAIRS_DDL = "kind string, payload binary"
PAIRS_ARROW = pa.schema([("kind", pa.string()), ("payload", pa.binary())])


def run_pair_tasks(spark, items: Sequence, fn: Callable[[object], list[tuple]]) -> list[tuple[str, bytes]]:
    """:func:`run_tasks` for tasks returning ``(kind, payload)`` pairs."""
    return [(k, bytes(p)) for k, p in run_tasks(spark, items, fn, PAIRS_DDL, PAIRS_ARROW)]
