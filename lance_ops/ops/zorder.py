"""optimize().executeZOrderBy(*columns): rewrite the table in Z-order.

Delta's ``OPTIMIZE ... ZORDER BY``: rows that are close in *every* one of the
columns end up in the same fragments, so a selective predicate on any one of
them touches few fragments -- zone maps (and bloom filters) then skip the
rest. One Spark job does it:

1. *Ranks* (metadata-sized): each column is mapped to an order-preserving
   long (numbers and booleans as they are, dates in days, timestamps in
   microseconds, strings and binaries by their first 7 bytes), and one
   aggregate computes ``percentile_approx`` boundaries of all of them
   (up to 255 per column) -- Delta's ``range_partition_id``, which is also a
   sampled range partitioning. Only the boundaries reach the driver.
2. *Z-value*: each row's range ids (a binary search over the boundaries,
   a Spark expression) with their bits interleaved, most significant first
   (Delta's ``interleave_bits``).
3. *Rewrite*: a range partitioning of the rows by z-value into
   ``ceil(rows / targetRowsPerFragment)`` tasks, sorted within each; every
   task streams its rows into one new fragment (about the target's size: the
   range partitioning is sampled, as Delta's; cut at twice the target) --
   each row keeping its stable row id
   and both lineage versions (nothing changed in it: the change feed
   reports nothing, as Delta's ``dataChange=false``); deleted rows are
   dropped.

The commit is compaction's: a ``Rewrite`` of every fragment of the version
read into the new ones (ids taken in the Rewrite's own commit, as
compaction commits), BTREE indices remapped and zone maps / bloom filters
rebuilt over the new fragments (:mod:`lance_ops.ops.compact`). A concurrent
change to any fragment makes the rewrite re-run on the new version.

Z-order is not incremental (as Delta's): each run rewrites the whole table.
Columns must be top-level and orderable (numbers, booleans, dates,
timestamps, strings, binaries); NULLs sort first.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..format.indexremap import REMAP, compaction_rule
from ..format.naming import index_dir
from ..format.proto import table_pb2
from ..format.scan import ROW_CREATED, ROW_ID, ROW_UPDATED
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT, FragmentSink
from ..spark.errors import executor_errors, executor_task
from ..spark.frames import rows_per_partition, scan_frame
from ..txn.compaction import group_metrics
from ..txn.log import Snapshot
from ..txn.pipeline import StagedCommit

#: Bits of range id per column (255 boundaries: 256 ranges), fewer when many
#: columns share the 62 bits of a z-value.
MAX_BITS = 8
ZKEY = "__lance_zkey"
#: The part (fragment) of the z-range a row goes to.
ZPART = "__lance_zpart"
_RESULT = pa.schema([("frag", pa.binary())])


def ordered_key(name: str, dtype: T.DataType) -> Column:
    """An order-preserving long of column ``name`` (NULL stays NULL)."""
    c = F.col(f"`{name}`")
    if isinstance(dtype, T.BooleanType):
        return c.cast("int").cast("long")
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return c.cast("long")
    if isinstance(dtype, (T.FloatType, T.DoubleType, T.DecimalType)):
        return c.cast("double")
    if isinstance(dtype, T.DateType):
        return F.unix_date(c).cast("long")
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_micros(c.cast("timestamp"))
    if isinstance(dtype, (T.StringType, T.BinaryType)):
        raw = F.encode(c, "UTF-8") if isinstance(dtype, T.StringType) else c
        # the first 7 bytes, big-endian: byte order is Spark's string order
        return F.conv(F.rpad(F.hex(F.substring(raw, 1, 7)), 14, "0"), 16, 10).cast("long")
    raise InvalidArgumentError(
        f"cannot Z-order by column {name!r} of type {dtype.simpleString()}: use numbers, booleans, dates, "
        "timestamps, strings or binaries"
    )


def range_id(key: Column, bounds: list) -> Column:
    """How many of the sorted ``bounds`` are <= ``key`` (0 for NULL), as a
    binary search of nested CASEs."""
    def search(lo: int, hi: int) -> Column:
        if lo == hi:
            return F.lit(lo)
        mid = (lo + hi + 1) // 2
        return F.when(key >= F.lit(bounds[mid - 1]), search(mid, hi)).otherwise(search(lo, mid - 1))

    return search(0, len(bounds))


def interleave(ids: list[Column], bits: int) -> Column:
    """The z-value: bit ``i`` of column ``c``'s range id at position
    ``i * n + (n - 1 - c)`` (the first column's bit leads each group)."""
    n = len(ids)
    out = F.lit(0).cast("long")
    for i in range(bits):
        for c, rid in enumerate(ids):
            bit = F.shiftright(rid, i).bitwiseAND(1).cast("long")
            out = out + F.shiftleft(bit, i * n + (n - 1 - c))
    return out


def _check_columns(snap: Snapshot, columns) -> list[str]:
    if not columns:
        raise InvalidArgumentError("executeZOrderBy needs at least one column")
    cols = []
    for c in columns:
        if not isinstance(c, str):
            raise TypeError(f"Z-order columns are column names (str), got {type(c).__name__}")
        if c not in snap.schema.names:
            raise InvalidArgumentError(
                f"cannot Z-order by {c!r}: the table has no top-level column of that name "
                f"(columns: {', '.join(snap.schema.names)})"
            )
        if c in cols:
            raise InvalidArgumentError(f"column {c!r} is named twice")
        cols.append(c)
    return cols


def zorder(spark, columns, target_rows: int = DEFAULT_MAX_ROWS_PER_FRAGMENT, state: dict | None = None):
    """``prepare(snapshot) -> StagedCommit | None`` of one Z-order rewrite;
    ``state`` receives the last attempt's old and new fragments and tasks
    (for the result)."""
    if isinstance(target_rows, bool) or not isinstance(target_rows, int) \
            or target_rows <= 0:
        raise InvalidArgumentError(f"targetRowsPerFragment must be a positive int, got {target_rows!r}")
    state = {} if state is None else state

    def prepare(snap: Snapshot) -> StagedCommit | None:
        cols = _check_columns(snap, columns)
        olds = [f for f in snap.fragments]
        live = snap.num_rows()
        if not olds or live == 0:
            return None
        snap.new_data_file_version("Z-order")
        stable = snap.stable_row_ids
        if not stable:
            by_address = [idx.name for idx in snap.indices if compaction_rule(idx, False) == REMAP]
            if by_address:
                raise UnsupportedFeatureError(
                    f"Z-order of {snap.store.root}: its indices {by_address} address rows by position and the "
                    "table has no stable row ids to follow the reordered rows; drop them first (and create them "
                    "again after), or use a table with stable row ids"
                )
        meta = (ROW_ID, ROW_CREATED, ROW_UPDATED) if stable else ()
        frame = scan_frame(spark, snap, None, metadata=meta)
        types = {f.name: f.dataType for f in frame.schema.fields}
        keys = [ordered_key(c, types[c]) for c in cols]
        bits = max(1, min(MAX_BITS, 62 // len(cols)))
        n_bounds = (1 << bits) - 1
        pct = [i / (n_bounds + 1) for i in range(1, n_bounds + 1)]
        # (the boundaries from a scan of the Z-order columns only)
        narrow = scan_frame(spark, snap, cols, metadata=())
        row = narrow.agg(*[F.percentile_approx(k, pct, 10_000).alias(f"b{i}") for i, k in enumerate(keys)]).head()
        bounds = [_unique_bounds(row[i]) for i in range(len(cols))]
        # (range ids as columns of their own: the z-value uses each one's bits
        # many times, and a repeated CASE tree would be evaluated each time)
        rids = [f"__lance_rid{i}" for i in range(len(cols))]

        def with_zkey(df):
            for name, k, b in zip(rids, keys, bounds):
                df = df.withColumn(name, range_id(k, b))
            return df.withColumn(ZKEY, interleave([F.col(r) for r in rids], bits)).drop(*rids)

        n_out = max(1, math.ceil(live / target_rows))
        # the fragments' z-ranges: quantiles of the z-value, snapped to
        # aligned z-values (whole cells of the curve) where that costs little
        zcut = []
        if n_out > 1:
            zpct = [i / n_out for i in range(1, n_out)]
            zrow = with_zkey(narrow).agg(F.percentile_approx(ZKEY, zpct, 100_000)).head()
            zcut = snap_bounds(_unique_bounds(zrow[0]), bits * len(cols))
        parts = len(zcut) + 1
        # consecutive parts share a task (each part is one fragment of its own)
        per_task = max(1, rows_per_partition(spark, live) // target_rows)
        tasks = -(-parts // per_task)
        keyed = with_zkey(frame).withColumn(ZPART, range_id(F.col(ZKEY), zcut))
        ordered = (keyed.repartition(tasks, route(spark, (F.col(ZPART) / per_task).cast("int"), tasks))
                   .sortWithinPartitions(ZKEY))
        # (a z-value shared by many rows cannot be split: a part twice the
        # target is cut into fragments)
        task = _WriteTask(snap.store, snap.schema, snap.data_format_version, 2 * target_rows, stable)
        with executor_errors():
            rows = ordered.mapInArrow(task, "frag binary").collect()
        new = [table_pb2.DataFragment.FromString(bytes(r[0])) for r in rows]
        state.update(olds=olds, news=new, tasks=tasks)
        return _staged(spark, snap, olds, new, cols, bits)

    return prepare


def snap_bounds(cuts: list[int], total_bits: int, slack: float = 0.125) -> list[int]:
    """Quantile cuts of the z-value moved to the most aligned z-value within
    ``slack`` of the distance to their neighbours: a cut at a multiple of
    2^k starts a whole cell of the curve (a box in the columns' ranks), so no
    fragment takes a sliver of a cell -- a sliver would widen its zone
    boxes across the whole cell."""
    out: list[int] = []
    edges = [0, *cuts, 1 << total_bits]
    for i, q in enumerate(cuts, start=1):
        tol = int(min(q - edges[i - 1], edges[i + 1] - q) * slack)
        best = q
        for k in range(total_bits, 0, -1):
            step = 1 << k
            c = ((q + step // 2) // step) * step
            if abs(c - q) <= tol:
                best = c
                break
        if not out or best > out[-1]:
            out.append(best)
    return out


def route(spark, part: Column, parts: int) -> Column:
    """A column whose hash partitioning (``repartition(parts, it)``) puts
    every row of part ``p`` (0 <= p < parts) into partition ``p`` exactly: for
    each p the smallest long whose Spark hash lands there (a small Spark job
    computes them -- Spark's own Murmur3, as its hash partitioning uses)."""
    if parts == 1:
        return F.lit(0).cast("long")
    found: dict[int, int] = {}
    n = 16 * parts
    while len(found) < parts:
        rows = (spark.range(0, n, 1, 1).select(F.col("id"), F.pmod(F.hash("id"), F.lit(parts)).alias("p"))
                .groupBy("p").agg(F.min("id")).collect())
        found = {int(r[0]): int(r[1]) for r in rows}
        n *= 4
    keys = F.array(*[F.lit(found[p]).cast("long") for p in range(parts)])
    return F.element_at(keys, part + 1)


def _unique_bounds(values) -> list:
    out = []
    for v in values or []:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            continue
        if not out or v > out[-1]:
            out.append(v)
    return out


class _WriteTask:
    """``mapInArrow`` function: one partition's rows (in z-order) into new
    fragments, each row keeping its row id and lineage."""

    def __init__(self, store, schema, file_version: str, max_rows: int, stable: bool):
        self.store, self.schema, self.file_version = store, schema, file_version
        self.max_rows, self.stable = max_rows, stable

    def __call__(self, batches):
        return _write(self, batches)


@executor_task
def _write(task: _WriteTask, batches):
    names = task.schema.names
    sink = FragmentSink(task.store, task.schema, task.file_version, task.max_rows, scattered_ids=True)
    out: list[bytes] = []
    current = None  # the part being written (one fragment per part)
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            part = batch.column(ZPART).to_numpy(zero_copy_only=False)
            starts = [0, *(np.flatnonzero(part[1:] != part[:-1]) + 1).tolist(), len(part)]
            for lo, hi in zip(starts, starts[1:]):
                if current is not None and part[lo] != current:
                    out += [f.SerializeToString() for f in sink.finish()]
                current = part[lo]
                out += _write_rows(task, sink, batch.slice(lo, hi - lo), names)
        out += [f.SerializeToString() for f in sink.finish()]
    except BaseException:
        sink.abort()
        raise
    if out:
        yield pa.RecordBatch.from_arrays([pa.array(out, pa.binary())], schema=_RESULT)


def _write_rows(task: "_WriteTask", sink: FragmentSink, b: pa.RecordBatch, names) -> list[bytes]:
    """Rows of one part into ``sink``, moved rows keeping their row id and
    lineage; the fragments that filled up, serialized."""
    data = pa.RecordBatch.from_arrays([b.column(n) for n in names], names=names)
    if not task.stable:
        return [f.SerializeToString() for f in sink.write(data)]
    ids, created, updated = (
        b.column(m).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
        for m in (ROW_ID, ROW_CREATED, ROW_UPDATED)
    )
    return [f.SerializeToString() for f in sink.write(data, ids, created, updated)]


def _staged(spark, snap: Snapshot, olds, new_frags, cols, bits) -> StagedCommit:
    """The Rewrite of every fragment into the z-ordered ones, with the
    index handling of compaction (:func:`lance_ops.ops.compact.compact`)."""
    from .remap import index_metrics, staged_rewrite

    op, to_rebuild = staged_rewrite(spark, snap, [olds], [new_frags], by_row_id=True)
    rewritten = op.rewritten_indices

    def committed_metrics(result) -> dict:
        committed = result.transaction.operation
        done = {**group_metrics(committed.groups), **index_metrics(snap, to_rebuild, committed)}
        done["zOrderBy"] = ", ".join(cols)
        return done

    params = {"zOrderBy": "[" + ", ".join(f'"{c}"' for c in cols) + "]", "predicate": "[]",
              "bitsPerColumn": bits}
    metrics = group_metrics(op.groups)
    staged = StagedCommit(op, metrics, params, extra_files=[index_dir(r.new_id.uuid) for r in rewritten],
                          metrics_after=committed_metrics)
    return staged


# ------------------------------------------------------------------ result
FILE_STATS = T.StructType([
    T.StructField("min", T.LongType()), T.StructField("max", T.LongType()), T.StructField("avg", T.DoubleType()),
    T.StructField("totalFiles", T.LongType()), T.StructField("totalSize", T.LongType()),
])
CUBE_FILES = T.StructType([T.StructField("num", T.LongType()), T.StructField("size", T.LongType())])
ZORDER_STATS = T.StructType([
    T.StructField("strategyName", T.StringType()),
    T.StructField("inputCubeFiles", CUBE_FILES),
    T.StructField("inputOtherFiles", CUBE_FILES),
    T.StructField("inputNumCubes", T.LongType()),
    T.StructField("mergedFiles", CUBE_FILES),
    T.StructField("numOutputCubes", T.LongType()),
])
#: Delta's ``OPTIMIZE ... ZORDER BY`` result (``path``, ``metrics``); Delta's
#: files are Lance data files; Lance's own counts follow.
OPTIMIZE_RESULT = T.StructType([
    T.StructField("path", T.StringType()),
    T.StructField("metrics", T.StructType([
        T.StructField("numFilesAdded", T.LongType()),
        T.StructField("numFilesRemoved", T.LongType()),
        T.StructField("filesAdded", FILE_STATS),
        T.StructField("filesRemoved", FILE_STATS),
        T.StructField("partitionsOptimized", T.LongType()),
        T.StructField("zOrderStats", ZORDER_STATS),
        T.StructField("numBatches", T.LongType()),
        T.StructField("totalConsideredFiles", T.LongType()),
        T.StructField("totalFilesSkipped", T.LongType()),
        T.StructField("preserveInsertionOrder", T.BooleanType()),
        T.StructField("numFilesSkippedToReduceWriteAmplification", T.LongType()),
        T.StructField("numBytesSkippedToReduceWriteAmplification", T.LongType()),
        T.StructField("startTimeMs", T.LongType()),
        T.StructField("endTimeMs", T.LongType()),
        T.StructField("totalClusterParallelism", T.LongType()),
        T.StructField("totalScheduledTasks", T.LongType()),
        T.StructField("numFragmentsAdded", T.LongType()),
        T.StructField("numFragmentsRemoved", T.LongType()),
        T.StructField("numRowsRewritten", T.LongType()),
        T.StructField("version", T.LongType()),
    ])),
])


def flatten_columns(columns) -> list:
    """Delta's ``executeZOrderBy("a", "b")`` or ``executeZOrderBy(["a", "b"])``."""
    out = []
    for c in columns:
        if isinstance(c, (list, tuple)):
            out.extend(c)
        else:
            out.append(c)
    return out


def execute_zorder(t, columns, target_rows: int, commit_properties: dict | None):
    """Run a Z-order of the table behind ``t`` (a LanceTable); the result
    DataFrame (Delta's shape), the CommitInfo in ``t.lastCommit``."""
    cols = flatten_columns(columns)
    t._writable()
    _check_columns(t.snapshot, cols)  # (bad arguments fail before any Spark job)
    started = time.time()
    state: dict = {}
    info = t._run("zorder", zorder(t._spark, cols, target_rows, state), commit_properties)
    info.operation = info.operation or "Rewrite"
    for k in ("fragmentsRemoved", "fragmentsAdded", "filesRemoved", "filesAdded", "rowsRewritten"):
        info.metrics.setdefault(k, 0)
    if info.version is None:
        state = {}
    return result_frame(t._spark, t.uri, state.get("olds", []), state.get("news", []), info, started,
                        state.get("tasks", 0))


def _file_stats(sizes: list[int]) -> tuple:
    if not sizes:
        return (None, None, 0.0, 0, 0)
    return (min(sizes), max(sizes), float(sum(sizes)) / len(sizes), len(sizes), sum(sizes))


def result_frame(spark, uri: str, olds, news, info, started: float, tasks: int):
    """The one-row result DataFrame of a Z-order run."""
    removed = [int(df.file_size_bytes) for f in olds for df in f.files]
    added = [int(df.file_size_bytes) for f in news for df in f.files]
    metrics = (
        len(added), len(removed), _file_stats(added), _file_stats(removed), 0,
        ("all", (0, 0), (len(removed), sum(removed)), 0, (len(added), sum(added)), 1 if added else 0),
        1 if added else 0, len(removed), 0, False, 0, 0, int(started * 1000), int(time.time() * 1000),
        tasks, tasks, len(news), len(olds), sum(f.physical_rows for f in news),
        info.version,
    )
    return spark.createDataFrame([(uri, metrics)], OPTIMIZE_RESULT)


__all__ = ["zorder", "execute_zorder", "result_frame", "ordered_key", "range_id", "interleave", "OPTIMIZE_RESULT"]
