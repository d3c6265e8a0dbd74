"""``readChangeFeed``: the change feed through the ``lance`` data source.

::

    spark.read.format("lance").option("readChangeFeed", "true")
        .option("startingVersion", 3)          # inclusive, as Delta
        .option("endingVersion", 5)            # inclusive; default: latest
        .option("startingTimestamp", "2026-11-01 00:00:00")   # instead of a version
        .option("endingTimestamp", "...")
        .load(uri)

Rows: the table's columns (the end version's), ``_change_type`` (insert,
update_preimage, update_postimage, delete), ``_commit_version`` (long) and
``_commit_timestamp`` (timestamp) -- Delta's columns; ``withRowId`` /
``withLineage`` add ``_rowid`` / the lineage columns before them. What the
rows are and how they are found: :mod:`lance_ops.txn.changefeed`.

Planning (the Python planner process) reads only metadata; each task reads
the changed rows of a group of changed fragments. A timestamp option is a
timestamp string (ISO 8601; without an offset it is read in the driver's
local time zone -- Spark's default session time zone; ``LanceTable.changes``
converts with the session time zone itself) or epoch milliseconds.

Delta's rules: a start is required; both a version and a timestamp for the
same end is an error; a version past the latest raises TableNotFoundError,
a starting timestamp after the latest commit InvalidArgumentError; the end
before the start InvalidArgumentError.
"""
from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..errors import InvalidArgumentError
from ..format.scan import ROW_CREATED, ROW_ID, ROW_UPDATED
from ..storage.objectstore import ObjectStore
from ..txn.changefeed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, change_rows, plan_feed
from ..txn.log import TableLog, open_snapshot
from ..txn.timetravel import as_utc, commit_times, first_version_from, version_at
from .errors import executor_task
from .types import spark_arrow_schema, spark_schema, to_spark_batch

OPTION = "readchangefeed"
#: Rows a task aims for (the changed rows it reads).
ROWS_PER_TASK = 1 << 20


def wants_change_feed(options) -> bool:
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    return str(opts.get(OPTION, "false")).strip().lower() in ("1", "true", "yes", "on")


def has_start(options) -> bool:
    """Whether the options name where a change feed starts (a batch read
    needs one; a stream starts from the table as it is without one)."""
    opts = {str(k).lower() for k in dict(options)}
    return bool(opts & {"startingversion", "startingtimestamp"})


def feed_schema(schema, metadata: list[str]) -> T.StructType:
    """The Spark schema of a change feed of a table of ``schema`` (lance)."""
    out = spark_schema(schema, None, metadata)
    out.add(T.StructField(CHANGE_TYPE, T.StringType(), False))
    out.add(T.StructField(COMMIT_VERSION, T.LongType(), False))
    out.add(T.StructField(COMMIT_TIMESTAMP, T.TimestampType(), False))
    return out


def _timestamp_option(value) -> datetime.datetime:
    text = str(value).strip()
    if text.isdigit():  # epoch milliseconds
        return datetime.datetime.fromtimestamp(int(text) / 1000, datetime.timezone.utc)
    return as_utc(text)


def _version_option(name: str, value) -> int:
    try:
        v = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a version number, got {value!r}") from None
    if v < 0:
        raise InvalidArgumentError(f"{name} must be >= 0, got {v}")
    return v


def resolve_range(store: ObjectStore, options: dict) -> tuple[int, int]:
    """(start exclusive, end inclusive) of the versions the options name."""
    opts = {str(k).lower(): v for k, v in options.items()}
    sv, st = opts.get("startingversion"), opts.get("startingtimestamp")
    ev, et = opts.get("endingversion"), opts.get("endingtimestamp")
    if sv is None and st is None:
        raise InvalidArgumentError(
            "readChangeFeed needs startingVersion or startingTimestamp (as Delta: no start was given)"
        )
    if sv is not None and st is not None:
        raise InvalidArgumentError("give either startingVersion or startingTimestamp, not both")
    if ev is not None and et is not None:
        raise InvalidArgumentError("give either endingVersion or endingTimestamp, not both")
    latest = TableLog(store).latest_version()
    if latest is None:
        from ..errors import TableNotFoundError

        raise TableNotFoundError(f"no Lance table at {store.root}")
    times = commit_times(store) if (st is not None or et is not None) else None
    if sv is not None:
        first = max(1, _version_option("startingVersion", sv))
        if first > latest:
            raise InvalidArgumentError(
                f"startingVersion {first} is after the latest version of {store.root} ({latest})"
            )
    else:
        first = first_version_from(store, _timestamp_option(st), times)
    if ev is not None:
        end = _version_option("endingVersion", ev)
        if end > latest:
            open_snapshot(store, end)  # TableNotFoundError, naming the version
    elif et is not None:
        end = version_at(store, _timestamp_option(et), times)
    else:
        end = latest
    if end < first:
        raise InvalidArgumentError(
            f"the change feed range is empty: it starts at version {first} and ends at version {end} "
            "(the end cannot be before the start)"
        )
    return first - 1, end


class ChangePartition(InputPartition):
    """Items one task reads, and the base paths of every version planned
    (the reader is shipped to executors before planning)."""

    def __init__(self, items, bases=None):
        super().__init__(len(items))
        self.items = items
        self.bases = bases or {}


def group_items(items, rows_per_task: int = ROWS_PER_TASK, bases=None) -> list[ChangePartition]:
    """Items in order, in groups of about ``rows_per_task`` changed rows."""
    out, current, rows = [], [], 0
    for item in items:
        current.append(item)
        rows += item.weight
        if rows >= rows_per_task:
            out.append(ChangePartition(current, bases))
            current, rows = [], 0
    if current:
        out.append(ChangePartition(current, bases))
    return out or [ChangePartition([], bases)]


class ChangeFeedReader(DataSourceReader):
    """Reads the change feed of versions ``(start, end]`` of the table (or
    branch) at ``store_uri``."""

    def __init__(self, store_uri: str, storage_options: dict, start: int, end: int, schema: T.StructType,
                 rows_per_task: int = ROWS_PER_TASK):
        self.store = ObjectStore(store_uri, storage_options)
        self.start, self.end = start, end
        #: the end version's columns: what every image is read with
        self.lance_schema = open_snapshot(self.store, end).schema
        self.names = schema.fieldNames()
        self.target = spark_arrow_schema(schema)
        self.rows_per_task = rows_per_task

    def partitions(self):
        plan = plan_feed(self.store, self.start, self.end)
        return group_items(plan.items, self.rows_per_task, plan.store.bases)

    @executor_task
    def read(self, partition: ChangePartition):
        if not partition.items:
            return
        store = ObjectStore(self.store.uri, self.store.storage_options)
        store.bases = dict(partition.bases)
        special = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP, ROW_ID, ROW_CREATED, ROW_UPDATED)
        data = [n for n in self.names if n not in special]
        yield from change_batches(store, self.lance_schema, partition.items, data, self.names, self.target)


def open_feed(options) -> tuple[ObjectStore, int, int]:
    """(store of the branch read, start exclusive, end) of a reader's options
    (``path``, ``storage.<key>``, ``branch`` as the table reader takes them)."""
    raw = dict(options)
    opts = {str(k).lower(): v for k, v in raw.items()}
    if not opts.get("path"):
        raise InvalidArgumentError("the lance data source needs a path: .load(uri)")
    storage = {k[len("storage."):]: v for k, v in raw.items() if str(k).lower().startswith("storage.")}
    store = ObjectStore(opts["path"], storage)
    if opts.get("branch"):
        from ..txn.refs import branch_store, locate

        store = branch_store(locate(store)[0], opts["branch"])
    start, end = resolve_range(store, raw)
    return store, start, end


__all__ = ["ChangeFeedReader", "feed_schema", "open_feed", "resolve_range", "wants_change_feed"]


def change_batches(store, lance_schema, items, data: list[str], names: list[str], target):
    """Executor side: the change rows of each planned ``item`` (a version's
    share of the feed) with ``_commit_version`` / ``_commit_timestamp``,
    as Spark batches of the columns ``names`` -- for the batch reader and
    the streaming source alike."""
    for item in items:
        for batch in change_rows(store, lance_schema, item, data):
            n = batch.num_rows
            cols = {name: batch.column(name) for name in batch.schema.names}
            cols[COMMIT_VERSION] = pa.array(np.full(n, item.version, dtype=np.int64))
            cols[COMMIT_TIMESTAMP] = pa.array(np.full(n, item.micros, dtype=np.int64)).cast(
                pa.timestamp("us", tz="UTC"))
            out = pa.RecordBatch.from_arrays([cols[name] for name in names], names=names)
            yield to_spark_batch(out, target)
