"""The ``lance`` Spark data source (Python Data Source API).

Reading::

    spark.read.format("lance").load(uri)                      # latest version
    spark.read.format("lance").option("version", 3).load(uri) # time travel
        .option("columns", "id,vec")          # read only these columns
        .option("withRowId", True)            # + _rowid (also withRowAddr,
        .option("withLineage", True)          #   _row_created/last_updated...)
        .option("storage.<key>", value)       # storage_options
        .option("branch", "dev")              # a branch (pylance's tree/dev)
        .option("scanTrace", "/some/dir")     # each task writes what it read
        .option("readChangeFeed", True)       # the change feed (Delta's options:
        .option("startingVersion", 3)         #   startingVersion / -Timestamp,
                                              #   endingVersion / -Timestamp; see changefeed.py)

One input partition per group of small fragments (or per row range of a large
fragment), about ``rowsPerPartition`` live rows each (few large tasks: each
Python task has a fixed cost); ``rowsPerPartition=0`` gives one partition per
fragment. Arrow batches all the way.
Spark 4.3's Python data sources have no column pruning: Spark asks for the full
schema, so use ``columns`` (or ``.schema(...)`` with a subset of columns) to
read fewer columns. Filters are pushed down when
``spark.sql.python.filterPushdown.enabled`` is true: simple comparisons on
integer, string, boolean and date columns drop rows in the executor before
Arrow batches reach the JVM (Spark still re-checks them), and comparisons on
the lineage columns skip whole fragments whose version bounds exclude them.

Writing::

    df.write.format("lance").mode("append" | "overwrite").save(uri)
    df.write.format("lance").option("branch", "dev").mode("append").save(uri)
        .option("allowMissingColumns", True)  # leave out nullable columns

Executors write data files and return fragment metadata; the driver commits
one transaction.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    WriterCommitMessage,
)

from ..errors import InvalidArgumentError
from ..format.proto import table_pb2
from ..format.rowids import version_bounds
from ..format.scan import (
    METADATA_COLUMNS,
    ROW_ADDR,
    ROW_CREATED,
    ROW_ID,
    ROW_UPDATED,
    FragmentScan,
    live_rows,
    scan_fragment,
)
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from ..storage.objectstore import ObjectStore
from ..txn.versions import open_ref, open_version
from .errors import executor_task
from .pyspark_internals import planner_pushdown  # (the one place that reads pyspark's internals)
from .types import spark_arrow_schema, spark_schema, to_spark_batch

DEFAULT_ROWS_PER_PARTITION = 1 << 20
#: A fragment this much larger than the target is split into row ranges.
SPLIT_FACTOR = 1.5


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


@dataclass
class ReadOptions:
    """Parsed data source options."""

    path: str
    version: str | None = None
    #: A branch of the table (None: main, or the branch ``path`` is the
    #: directory of).
    branch: str | None = None
    columns: list[str] | None = None
    metadata: list[str] = field(default_factory=list)
    storage_options: dict[str, str] = field(default_factory=dict)
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION
    #: Split large fragments into row ranges (off for jobs that must see
    #: every row of a fragment in one task).
    split_fragments: bool = True
    #: Read a staged (not yet committed) manifest instead of a version:
    #: its path relative to the root (pre-commit checks reading staged rows).
    staged: str | None = None
    #: Read only these fragments (ids), e.g. the ones a staged change writes.
    fragment_ids: set[int] | None = None

    def open(self, store: ObjectStore, version=None):
        """The snapshot these options read (``version`` pins a resolved one)."""
        from ..txn.log import open_staged

        if self.staged:
            return open_staged(store, self.staged)
        if version is not None:
            return open_version(store, version)
        return open_ref(store, self.branch, self.version)
    #: A directory where every scan task writes one JSON line saying which
    #: columns it read (observability of column pruning; see scan_trace()).
    scan_trace: str | None = None
    #: A file path where planning writes what the scan reads (JSON; see
    #: report_scan()).
    skip_report: str | None = None
    #: A file path: filters Spark pushes that Arrow evaluates exactly
    #: (:mod:`lance_ops.arrow_eval`) are taken over by the scan -- Spark drops
    #: them from its own filter -- and written there (pickled) at planning.
    arrow_eval: str | None = None
    #: "<column>:<base64 filter>" (or "<column>:<JSON>": built in the tasks,
    #: :mod:`.sourcekeys`): only rows whose column the bloom filter may hold
    #: are returned (:mod:`lance_ops.format.keyfilter`; a merge's target scan).
    key_filter: str | None = None
    #: Trees (:mod:`lance_ops.spark.rowfilter`, encoded) the read tasks
    #: evaluate to drop rows before they reach the JVM; Spark still applies
    #: its own filter.
    row_filter: str | None = None

    @classmethod
    def parse(cls, options) -> "ReadOptions":
        opts = {k.lower(): v for k, v in dict(options).items()}
        path = opts.get("path")
        if not path:
            raise InvalidArgumentError("the lance data source needs a path: .load(uri)")
        cols = opts.get("columns")
        meta: list[str] = []
        if _truthy(opts.get("withrowid", False)):
            meta.append(ROW_ID)
        if _truthy(opts.get("withrowaddr", False)):
            meta.append(ROW_ADDR)
        if _truthy(opts.get("withlineage", False)):
            meta += [ROW_CREATED, ROW_UPDATED]
        for m in (opts.get("metadatacolumns") or "").split(","):
            m = m.strip()
            if m and m not in meta:
                if m not in METADATA_COLUMNS:
                    raise InvalidArgumentError(f"unknown metadata column {m!r}; known: {METADATA_COLUMNS}")
                meta.append(m)
        storage = {k[len("storage."):]: v for k, v in dict(options).items() if k.lower().startswith("storage.")}
        return cls(
            path=path,
            version=opts.get("version") or opts.get("versionasof"),  # (Delta's name too)
            branch=opts.get("branch") or None,
            # ("" = no data columns: metadata columns only, e.g. for count(*))
            columns=[c.strip() for c in cols.split(",") if c.strip()] if cols is not None else None,
            metadata=meta,
            storage_options=storage,
            rows_per_partition=int(opts.get("rowsperpartition") or DEFAULT_ROWS_PER_PARTITION),
            split_fragments=_truthy(opts.get("splitfragments", True)),
            staged=opts.get("stagedmanifest") or None,
            fragment_ids={int(x) for x in opts["fragmentids"].split(",") if x.strip()} if opts.get("fragmentids") is not None else None,
            scan_trace=opts.get("scantrace") or None,
            skip_report=opts.get("skipreport") or None,
            arrow_eval=opts.get("arroweval") or None,
            key_filter=opts.get("keyfilter") or None,
            row_filter=opts.get("rowfilter") or None,
        )


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def key_filter_option(column: str, data) -> str:
    """The ``keyFilter`` option's value for a bloom filter of ``column``'s
    keys (:mod:`lance_ops.format.keyfilter`): the filter's bytes, or where
    the tasks build it (:class:`lance_ops.spark.sourcekeys.ParquetKeys`)."""
    import base64

    if isinstance(data, bytes):
        return f"{column}:{base64.b64encode(data).decode()}"
    return f"{column}:{data.spec()}"


class ScanPartition(InputPartition):
    """Pieces (fragment bytes, start row, end row) one task reads in order."""

    def __init__(self, pieces: list[tuple[bytes, int, int]]):
        super().__init__(len(pieces))
        self.pieces = pieces


def plan_partitions(fragments, rows_per_partition: int, split: bool = True, ranges=None) -> list[ScanPartition]:
    """Group small fragments, split large ones (if ``split``), ~rows_per_partition
    live rows each. Fragments keep their order; with ``split=False`` every
    fragment is read by exactly one partition. ``rows_per_partition <= 0``:
    one partition per fragment. ``ranges`` (fragment id -> [(start, end)],
    a data skipping plan): read only those row ranges, and no fragment that
    is not in it."""
    if ranges is not None:
        fragments = [f for f in fragments if f.id in ranges]

    def row_ranges(frag):
        return ranges[frag.id] if ranges is not None else [(0, frag.physical_rows)]

    if rows_per_partition <= 0:
        out = []
        for f in fragments:
            if live_rows(f) > 0:
                data = f.SerializeToString()
                out.append(ScanPartition([(data, s, e) for s, e in row_ranges(f)]))
        return out
    target = rows_per_partition
    out: list[ScanPartition] = []
    current: list[tuple[bytes, int, int]] = []
    current_rows = 0
    for frag in fragments:
        live = live_rows(frag)
        phys = frag.physical_rows
        if phys == 0 or live == 0:
            continue
        data = frag.SerializeToString()
        density = live / phys
        for s0, e0 in row_ranges(frag):
            if split and e0 - s0 > SPLIT_FACTOR * target:
                if current:
                    out.append(ScanPartition(current))
                    current, current_rows = [], 0
                n = -(-(e0 - s0) // target)
                step = -(-(e0 - s0) // n)
                for s in range(s0, e0, step):
                    out.append(ScanPartition([(data, s, min(e0, s + step))]))
                continue
            current.append((data, s0, e0))
            current_rows += (e0 - s0) * density
            if split and current_rows >= target:
                out.append(ScanPartition(current))
                current, current_rows = [], 0
        if not split and current_rows >= target:
            out.append(ScanPartition(current))
            current, current_rows = [], 0
    if current:
        out.append(ScanPartition(current))
    return out


class LanceScanReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, version: int, spark_schema_: T.StructType, store_uri: str | None = None,
                 snapshot=None):
        # ``store_uri``: the root of the branch read (default: the path given);
        # ``snapshot``: the version, already open (a driver-planned scan)
        self.store = snapshot.store if snapshot is not None else ObjectStore(store_uri or opts.path, opts.storage_options)
        self.version = version
        if snapshot is None:
            snapshot = opts.open(self.store, version)
        self.lance_schema = snapshot.schema
        self.stable_row_ids = snapshot.stable_row_ids
        names = spark_schema_.fieldNames()
        self.columns = [n for n in names if n not in METADATA_COLUMNS]
        self.metadata = [n for n in names if n in METADATA_COLUMNS]
        self.arrow_target = spark_arrow_schema(spark_schema_)
        self.rows_per_partition = opts.rows_per_partition
        self.filters: list = []
        #: Every filter Spark pushed (data skipping judges them by index
        #: statistics, also those Arrow does not evaluate in the tasks).
        self.pushed: list = []
        self.skip_report = opts.skip_report
        self.arrow_eval = opts.arrow_eval
        self.key_filter = None
        if opts.key_filter:
            import base64

            column, _, data = opts.key_filter.partition(":")
            if data.startswith("{"):  # (built in the tasks from the source's files)
                from .sourcekeys import ParquetKeys

                self.key_filter = (column, ParquetKeys.parse(data))
            else:
                self.key_filter = (column, base64.b64decode(data))
        #: Trees (lance_ops.arrow_eval) of the filters this scan evaluates
        #: itself in place of Spark (``arrowEval`` option).
        self.accepted: list = []
        #: Trees of pushed filters outside the ``_supported_filter`` set that
        #: arrow_eval evaluates exactly: the tasks drop rows by them too
        #: (Spark re-checks: they only stop rows early).
        self.prefilter: list = []
        #: Trees (lance_ops.arrow_eval.catalyst) of the ``rowFilter`` option.
        self.row_filter = None
        if opts.row_filter:
            from .rowfilter import decode

            self.row_filter = decode(opts.row_filter)
        self._snapshot = snapshot
        self.split_fragments = opts.split_fragments
        self.scan_trace = opts.scan_trace
        #: (columns, directory): each task writes the bounds of these columns
        #: over every fragment it reads whole (:mod:`lance_ops.format.fragbounds`;
        #: set by the driver-planned scans that prune by them later: a merge's target)
        self.record_bounds: tuple[list[str], str] | None = None
        # Planned in partitions(), once pushFilters may have narrowed the scan.
        self._fragments = [f for f in snapshot.fragments if opts.fragment_ids is None or f.id in opts.fragment_ids]

    def __getstate__(self):
        # Spark pickles the reader for the executors *before* it calls
        # partitions(): the fragment list is planning state, not shipped.
        state = dict(self.__dict__)
        state.pop("_fragments", None)
        state.pop("_snapshot", None)
        return state

    def partitions(self):
        fragments = [f for f in self._fragments if lineage_may_match(f, self.filters)]
        skipped_by_lineage = len(self._fragments) - len(fragments)
        ranges = None
        conjuncts = filters_to_conjuncts(self.pushed)
        if conjuncts:  # (indices, and the fragment bounds this process saw: format/fragbounds)
            from ..format.pruning import skip_plan

            plan = skip_plan(self._snapshot, conjuncts, fragments)
            ranges = plan.ranges
        parts = plan_partitions(fragments, self.rows_per_partition, self.split_fragments, ranges)
        report_scan(self, fragments, ranges, skipped_by_lineage, len(parts))
        # Never an empty list: Spark would substitute a bare InputPartition.
        return parts or [ScanPartition([])]

    @executor_task
    def read(self, partition: ScanPartition):
        keep = compile_filters(self.filters, self.arrow_target) if self.filters else None
        accepted = None
        if self.accepted:
            from ..arrow_eval.expr import And, compile_expr, evaluate

            accepted = compile_expr(And(tuple(self.accepted)), self.arrow_target)
        prefilter = None
        if self.prefilter:
            from ..arrow_eval.expr import And, compile_expr, evaluate

            prefilter = compile_expr(And(tuple(self.prefilter)), self.arrow_target)
        if self.row_filter:
            from .rowfilter import apply as apply_row_filter
        key_filter = None  # (column, filter bytes): resolved once a task, not per batch
        if self.key_filter is not None:
            from ..format.keyfilter import may_contain_each

            column, data = self.key_filter
            data = data if isinstance(data, bytes) else data.filter_bytes()
            key_filter = (column, data) if data is not None else None  # (None: the source's files changed)
        rows = 0
        bounds_cols = [c for c in self.record_bounds[0] if c in self.columns] if self.record_bounds else []
        recorded = []
        for frag_bytes, start, end in partition.pieces:
            frag = table_pb2.DataFragment.FromString(frag_bytes)
            scan = FragmentScan(
                frag, self.columns, self.metadata, start, end, stable_row_ids=self.stable_row_ids
            )
            whole = bounds_cols and start == 0 and end >= frag.physical_rows
            seen = {c: [] for c in bounds_cols} if whole else None
            for batch in scan_fragment(self.store, self.lance_schema, scan):
                if seen is not None:
                    for c in bounds_cols:
                        seen[c].append(batch.column(c))
                out = to_spark_batch(batch, self.arrow_target)
                if key_filter is not None:  # (on the values Spark will compare)
                    out = out.filter(may_contain_each(key_filter[1], out.column(key_filter[0])))
                    if not out.num_rows:
                        continue
                if keep is not None:
                    out = out.filter(keep(out))
                    if not out.num_rows:
                        continue
                for expr in (accepted, prefilter):
                    if expr is not None and out.num_rows:
                        parts = evaluate(expr, out).combine_chunks().to_batches()
                        out = parts[0] if parts else out.slice(0, 0)
                if self.row_filter and out.num_rows:
                    out = apply_row_filter(self.row_filter, out)
                if not out.num_rows:
                    continue
                rows += out.num_rows
                yield out
            if seen is not None:
                recorded += fragment_bounds(frag, self.lance_schema, seen)
        if recorded:
            from ..format.fragbounds import write_records

            write_records(self.record_bounds[1], recorded)
        if self.scan_trace:
            write_scan_trace(self, partition, rows)


def fragment_bounds(frag, schema, seen: dict) -> list:
    """[(cache key, (min, max, nulls))] of the columns read whole from one
    fragment (:mod:`lance_ops.format.fragbounds`)."""
    from ..format.fragbounds import key_of, stats, supported

    out = []
    for c, arrays in seen.items():
        field = schema.field(c)
        key = key_of(frag, field.id)
        if key is not None and supported(field.arrow_type()):
            out.append((key, stats(arrays)))
    return out


def report_scan(reader: "LanceScanReader", fragments, ranges, skipped_by_lineage: int, tasks: int) -> dict:
    """What a scan will read, decided before any task starts: logged on the
    ``lance_ops`` logger (one line per scan) and, with the ``skipReport``
    option (a file path), written as JSON for the operation that planned it
    (delete/update/merge put it in ``CommitInfo.metrics``)."""
    import json
    import logging

    live = [f for f in fragments if f.physical_rows and live_rows(f)]
    if ranges is None:
        scanned = {f.id: f.physical_rows for f in live}
    else:
        scanned = {f.id: sum(e - s for s, e in ranges[f.id]) for f in live if f.id in ranges}
    record = {
        "numFragmentsScanned": len(scanned),
        "numFragmentsSkipped": len(reader._fragments) - len(scanned),
        "numRowsScanned": int(sum(scanned.values())),
        "numTasks": tasks,
    }
    logging.getLogger("lance_ops").info(
        "scan %s v%s: %d fragments scanned, %d skipped (%d by lineage bounds), %d rows in %d tasks; filters %s",
        reader.store.root, reader.version, record["numFragmentsScanned"], record["numFragmentsSkipped"],
        skipped_by_lineage, record["numRowsScanned"], tasks, [_short(repr(f)) for f in reader.pushed],
    )
    if reader.skip_report:
        with open(reader.skip_report, "w") as f:
            json.dump(record, f)
    return record


def read_skip_report(path: str) -> dict | None:
    """The record :func:`report_scan` wrote at ``path`` (None if the scan was
    not planned, e.g. no filter pushdown)."""
    import json
    import os

    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_scan_trace(reader: LanceScanReader, partition: ScanPartition, rows: int) -> None:
    """One JSON line per scan task in ``reader.scan_trace`` (a directory):
    table, version, the data and metadata columns the task opened, the filters
    pushed into it, its fragments and the rows it returned. Tests prove column
    pruning with it; users can see what a query really read."""
    import json
    import os
    import uuid

    fragments = sorted({table_pb2.DataFragment.FromString(b).id for b, _, _ in partition.pieces})
    record = {
        "path": reader.store.root, "version": reader.version, "columns": list(reader.columns),
        "metadata": list(reader.metadata), "filters": [repr(f) for f in reader.filters],
        "fragments": fragments, "rows": rows,
    }
    os.makedirs(reader.scan_trace, exist_ok=True)
    with open(os.path.join(reader.scan_trace, f"scan-{uuid.uuid4().hex}.json"), "w") as f:
        f.write(json.dumps(record) + "\n")


def read_scan_trace(directory: str) -> list[dict]:
    """The records :func:`write_scan_trace` left in ``directory``."""
    import glob
    import json
    import os

    out = []
    for p in sorted(glob.glob(os.path.join(directory, "scan-*.json"))):
        with open(p) as f:
            out.extend(json.loads(line) for line in f if line.strip())
    return out


class LanceScanReaderWithPushdown(LanceScanReader):
    def pushFilters(self, filters):
        for f in filters:
            self.pushed.append(f)
            if self.arrow_eval:
                from ..arrow_eval.expr import compile_expr, from_filter

                tree = from_filter(f)
                if tree is not None and compile_expr(tree, self.arrow_target) is not None:
                    # Evaluated here, exactly as Spark would: Spark drops it.
                    self.accepted.append(tree)
                    continue
            if _supported_filter(f, self.arrow_target):
                self.filters.append(f)
            else:
                from ..arrow_eval.expr import compile_expr, from_filter

                tree = from_filter(f)
                if tree is not None and compile_expr(tree, self.arrow_target) is not None:
                    self.prefilter.append(tree)
            # Spark re-evaluates every filter: ours only drop rows early.
            yield f
        if self.arrow_eval:
            write_arrow_eval_report(self.arrow_eval, self.accepted, filters_to_conjuncts(self.pushed))


def write_arrow_eval_report(path: str, accepted: list, conjuncts: list) -> None:
    """What a scan planned with the ``arrowEval`` option took over from
    Spark (trees), and the conjuncts data skipping can use."""
    import os
    import pickle

    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump({"accepted": accepted, "conjuncts": conjuncts}, f)
    os.replace(tmp, path)


def read_arrow_eval_report(path: str) -> dict | None:
    import os
    import pickle

    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return pickle.load(f)


def _short(text: str, limit: int = 200) -> str:
    """A filter as logged: a merge's IN list of up to 4096 keys is cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


# ------------------------------------------------------------- filters
_CMP = {
    EqualTo: pc.equal,
    GreaterThan: pc.greater,
    GreaterThanOrEqual: pc.greater_equal,
    LessThan: pc.less,
    LessThanOrEqual: pc.less_equal,
}


#: Comparison -> "excludes every row" given a fragment's (min, max) lineage version.
_EXCLUDES = {
    EqualTo: lambda lo, hi, v: v < lo or v > hi,
    GreaterThan: lambda lo, hi, v: hi <= v,
    GreaterThanOrEqual: lambda lo, hi, v: hi < v,
    LessThan: lambda lo, hi, v: lo >= v,
    LessThanOrEqual: lambda lo, hi, v: lo > v,
}
_VERSION_SEQUENCES = {ROW_CREATED: "created_at_versions", ROW_UPDATED: "last_updated_at_versions"}


def lineage_may_match(fragment: table_pb2.DataFragment, filters) -> bool:
    """False when a pushed comparison on a lineage column excludes every row of
    ``fragment``, judged from the version bounds in its metadata (change feeds
    over large tables then read only the fragments that changed). A sequence
    stored in an external file has unknown bounds: never excluded."""
    for f in filters:
        excludes = _EXCLUDES.get(type(f))
        attr = getattr(f, "attribute", ())
        seq = _VERSION_SEQUENCES.get(attr[0]) if excludes and len(attr) == 1 else None
        if seq is None or fragment.HasField(f"external_{seq}"):
            continue
        inline = f"inline_{seq}"
        lo, hi = version_bounds(getattr(fragment, inline) if fragment.HasField(inline) else None)
        if excludes(lo, hi, f.value):
            return False
    return True


_CONJUNCT_OPS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


def filters_to_conjuncts(filters) -> list:
    """The pushed filters data skipping understands, as
    :class:`lance_ops.format.pruning.Conjunct` (Spark already split the
    condition into conjuncts and translated each from its analyzed
    expression; anything else -- NOT, string matching, null-safe equality,
    nested columns -- is left to the scan)."""
    from ..format.pruning import Conjunct

    out = []
    for f in filters:
        attr = getattr(f, "attribute", ())
        if len(attr) != 1 or attr[0] in METADATA_COLUMNS:
            continue
        col = attr[0]
        if type(f) in _CONJUNCT_OPS:
            out.append(Conjunct(col, _CONJUNCT_OPS[type(f)], f.value))
        elif isinstance(f, In):
            out.append(Conjunct(col, "in", tuple(f.value)))
        elif isinstance(f, IsNull):
            out.append(Conjunct(col, "isnull"))
        elif isinstance(f, IsNotNull):
            out.append(Conjunct(col, "notnull"))
    return out


def _column_type(f, schema: pa.Schema) -> pa.DataType | None:
    attr = getattr(f, "attribute", None)
    if not attr or len(attr) != 1 or attr[0] not in schema.names:
        return None
    return schema.field(attr[0]).type


def _safe_type(t: pa.DataType) -> bool:
    """Types whose Arrow comparison agrees with Spark's (no NaN ordering, time
    zones or decimal rescaling involved)."""
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_boolean(t) or pa.types.is_date32(t)


def _supported_filter(f, schema: pa.Schema) -> bool:
    if isinstance(f, Not):
        return _supported_filter(f.child, schema)
    t = _column_type(f, schema)
    if t is None:
        return False
    if isinstance(f, (IsNull, IsNotNull)):
        return True
    if isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        return pa.types.is_string(t)
    if type(f) in _CMP or isinstance(f, In):
        return _safe_type(t)
    return False


def _scalar(value, t: pa.DataType):
    if pa.types.is_date32(t) and isinstance(value, datetime.datetime):
        value = value.date()
    return pa.scalar(value, type=t)


def _expr(f, batch: pa.RecordBatch):
    if isinstance(f, Not):
        inner = _expr(f.child, batch)
        # NOT(null) stays null -> row dropped, as in Spark.
        return pc.invert(inner)
    col = batch.column(f.attribute[0])
    if isinstance(f, IsNull):
        return pc.is_null(col)
    if isinstance(f, IsNotNull):
        return pc.is_valid(col)
    if isinstance(f, StringStartsWith):
        return pc.starts_with(col, f.value)
    if isinstance(f, StringEndsWith):
        return pc.ends_with(col, f.value)
    if isinstance(f, StringContains):
        return pc.match_substring(col, f.value)
    if isinstance(f, In):
        values = pa.array([v for v in f.value if v is not None], type=col.type)
        return pc.is_in(col, value_set=values)
    return _CMP[type(f)](col, _scalar(f.value, col.type))


def compile_filters(filters, schema: pa.Schema):
    def keep(batch: pa.RecordBatch) -> pa.Array:
        mask = None
        for f in filters:
            m = _expr(f, batch)
            mask = m if mask is None else pc.and_kleene(mask, m)
        return pc.fill_null(mask, False)

    return keep


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


@dataclass
class FragmentsMessage(WriterCommitMessage):
    fragments: list[bytes]


class LanceDataSourceWriter(DataSourceArrowWriter):
    def __init__(self, options, schema: T.StructType, overwrite: bool):
        from ..txn.log import latest_or_none
        from .write import plan_write

        opts = {k.lower(): v for k, v in dict(options).items()}
        path = opts.get("path")
        if not path:
            raise InvalidArgumentError("the lance data source needs a path: .save(uri)")
        storage = {k[len("storage."):]: v for k, v in dict(options).items() if k.lower().startswith("storage.")}
        store = ObjectStore(path, storage)
        if opts.get("branch"):
            from ..txn.refs import branch_file, branch_store, locate

            root = locate(store)[0]
            store = branch_store(root, opts["branch"])
            if store is not root and not root.exists(branch_file(opts["branch"])):
                raise InvalidArgumentError(f"branch {opts['branch']!r} does not exist in {root.root}")
        from ..txn.idempotence import TxnId

        #: Delta's idempotent writes: options txnAppId + txnVersion.
        self.txn = TxnId.of(opts.get("txnappid"), opts.get("txnversion"))
        self.snapshot = latest_or_none(store)
        #: Delta's ``mode`` of the WRITE in history (the save mode asked for,
        #: also when an append creates the table)
        self.save_mode = "Overwrite" if overwrite else "Append"
        self.plan = plan_write(
            store,
            schema,
            "overwrite" if overwrite else "append",
            snapshot=self.snapshot,
            stable_row_ids=_truthy(opts.get("stablerowids", True)),
            max_rows_per_fragment=int(opts.get("maxrowsperfragment") or DEFAULT_MAX_ROWS_PER_FRAGMENT),
            allow_missing=_truthy(opts.get("allowmissingcolumns", False)),
        )
        if self.snapshot is not None:
            from ..txn.constraints import constraints_of

            if constraints_of(self.snapshot.manifest.config):
                # The rows reach this writer as they are: there is no Spark
                # projection to evaluate the constraints in. Refuse rather
                # than commit unchecked rows.
                raise InvalidArgumentError(
                    f"the table at {path} has CHECK constraints {sorted(constraints_of(self.snapshot.manifest.config))}; "
                    "df.write.format('lance') cannot evaluate them in its tasks -- write with "
                    "LanceTable(spark, uri).append(df) / .overwrite(df), which enforce them"
                )

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("snapshot", None)  # metadata of the driver's planning, not shipped
        return state

    @executor_task
    def write(self, iterator):
        from .write import write_task

        return FragmentsMessage(list(write_task(self.plan, iterator)))

    def commit(self, messages):
        from ..txn.log import open_snapshot
        from ..txn.pipeline import WriteOptions, execute
        from .write import must_not_exist, new_table, staged_write

        frags = [f for m in messages if m is not None for f in m.fragments]
        staged = staged_write(self.plan, frags)
        staged.parameters["mode"] = getattr(self, "save_mode", staged.parameters.get("mode"))
        checks = [] if self.plan.exists else [must_not_exist]
        # (Spark may commit through an unpickled copy of this writer)
        read = open_snapshot(self.plan.store, self.plan.read_version) if self.plan.exists else None
        info = execute(self.plan.store, read, lambda snap: staged,
                       WriteOptions(checks=checks, new_table=new_table(self.plan), operation="WRITE", txn=self.txn))
        if info.skipped:  # an idempotent write the table already holds: the new files are nobody's
            self.abort(messages)

    def abort(self, messages):
        for m in messages:
            if m is None:
                continue
            for b in m.fragments:
                frag = table_pb2.DataFragment.FromString(b)
                for df in frag.files:
                    self.plan.store.delete(f"data/{df.path}")


# ---------------------------------------------------------------------------
# The data source
# ---------------------------------------------------------------------------


class LanceDataSource(DataSource):
    """``spark.read.format("lance")`` / ``df.write.format("lance")``."""

    #: Reader class where Spark's planner does not say whether it pushes
    #: filters; the registered variant with filter pushdown swaps it.
    reader_class = LanceScanReader

    @classmethod
    def name(cls) -> str:
        return "lance"

    def __init__(self, options):
        super().__init__(options)
        self._resolved: tuple[str, int] | None = None

    def _opts(self) -> ReadOptions:
        return ReadOptions.parse(self.options)

    def _open(self, opts: ReadOptions):
        snap = opts.open(ObjectStore(opts.path, opts.storage_options))
        # Pin the branch root and version: the reader runs in another process,
        # maybe after a commit.
        self._resolved = (snap.store.root, snap.version)
        return snap

    def schema(self):
        opts = self._opts()
        if _change_feed(self.options):
            from .changefeed import feed_schema, has_start

            if not has_start(self.options):  # a change feed stream may start from the table as it is
                return feed_schema(open_version(ObjectStore(opts.path, opts.storage_options)).schema, opts.metadata)
            store, _start, end = self._feed()
            return feed_schema(open_version(store, end).schema, opts.metadata)
        snap = self._open(opts)
        return spark_schema(snap.schema, opts.columns, opts.metadata)

    def _feed(self):
        """(store, start, end) of a ``readChangeFeed`` read, resolved once."""
        from .changefeed import open_feed

        if getattr(self, "_feed_range", None) is None:
            self._feed_range = open_feed(self.options)
        return self._feed_range

    def reader(self, schema: T.StructType):
        if _change_feed(self.options):
            from .changefeed import ChangeFeedReader

            store, start, end = self._feed()
            return ChangeFeedReader(store.uri, store.storage_options, start, end, schema)
        opts = self._opts()
        if self._resolved is None:
            self._open(opts)
        store_uri, version = self._resolved
        pushdown = planner_pushdown()
        cls = self.reader_class if pushdown is None else LanceScanReaderWithPushdown if pushdown else LanceScanReader
        return cls(opts, version, schema, store_uri)

    def writer(self, schema: T.StructType, overwrite: bool):
        return LanceDataSourceWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: T.StructType, overwrite: bool):
        from .streaming import LanceStreamWriter

        return LanceStreamWriter(self.options, schema, overwrite)

    def streamReader(self, schema: T.StructType):
        from .streaming import LanceStreamReader

        return LanceStreamReader(self.options, schema)


def _change_feed(options) -> bool:
    """Whether a read asks for the change feed (``readChangeFeed``;
    :mod:`.changefeed`)."""
    from .changefeed import wants_change_feed

    return wants_change_feed(options)


class LanceDataSourceWithPushdown(LanceDataSource):
    reader_class = LanceScanReaderWithPushdown


def register(spark) -> None:
    """Register the ``lance`` data source in ``spark`` (idempotent). Filter
    pushdown is used when the session enables it for Python data sources --
    at the time of each read: switching the conf after registering is fine
    (see :func:`planner_pushdown`)."""
    try:
        pushdown = _truthy(spark.conf.get("spark.sql.python.filterPushdown.enabled", "false"))
    except Exception:
        pushdown = False
    cls = LanceDataSourceWithPushdown if pushdown else LanceDataSource
    key = (id(spark), pushdown)
    if getattr(spark, "_lance_ops_registered", None) == key:
        return
    from .workers import check_worker_python

    check_worker_python(spark)  # before any job: a worker Python without lance_ops fails here, named
    spark.dataSource.register(cls)
    try:
        spark._lance_ops_registered = key
    except Exception:
        pass
