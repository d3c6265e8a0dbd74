"""Row-level changes -- the executor pipeline behind delete, update and merge.

Driver-side, an operation turns the user's condition / clauses into a
DataFrame of *change requests*, one row per target row to change::

    _rowaddr  long     the target row's address (fragment id << 32 | offset)
    _action   string   "U" (rewrite with new values) or "D" (delete)
    <assigned columns> new values of the columns the operation assigns

plus, for merge, *insert* rows. Then, in one Spark job:

1. requests are grouped by fragment (``groupBy(fragment).applyInArrow``) and
   :func:`fragment_changes` handles each touched fragment in an executor: it
   unions the requested offsets into the fragment's deletion vector and writes
   the new deletion file (of the kind pylance would pick, or none when every
   row is now deleted), reads the *unassigned* columns of the rows to rewrite
   (random access, only those rows) together with their stable row id and
   created-at version, and emits the complete new rows -- plus one marker row
   carrying the fragment's deletion result;
2. :func:`write_changes` (``mapInArrow``) streams the rewritten rows into new
   fragments that carry the moved rows' ids and created-at versions, fresh
   inserts into fragments of their own, and passes the markers through.

When the requests come straight from a scan that reads whole fragments in
order (delete, update, and a merge whose source is broadcast),
:func:`aligned_changes` does both steps in the scan's own tasks -- no
shuffle; a merge's tasks also report the source rows they matched, and
:func:`merge_inserts` then writes the source rows nobody matched.

The driver collects only metadata -- markers and new fragments -- and builds
one Delete or Update transaction (:class:`ChangeSet`).
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyroaring import BitMap
from pyspark.sql import types as T

from ..errors import DuplicateMatchError, LanceOpsError
from ..format.deletion import read_deletion_vector, write_deletion_vector
from ..format.proto import table_pb2
from ..format.scan import ROW_ADDR, ROW_CREATED, ROW_ID, FragmentScan, scan_fragment
from ..format.schema import Schema
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT, FragmentSink
from ..storage.objectstore import ObjectStore
from .constraints import enforce
from .errors import executor_task
from .types import spark_arrow_schema, to_spark_batch

ACTION = "_action"
UPDATE = "U"
DELETE = "D"
INSERT_ACTION = "I"
#: Merge (broadcast strategy): the marker of a matched source row, keyed
#: like that row's insert candidate (which it cancels).
MATCH_MARK = "M"
#: Merge: the source row's id (insert candidates and markers carry it).
SOURCE_ID = "__lance_sid"
FRAGMENT_KEY = "_fragment"

KIND = "_kind"
PAYLOAD = "_payload"
CARRIED_ID = "_carried_rowid"
CARRIED_CREATED = "_carried_created"
MOVED, INSERT, MARKER, FRAGMENT = "moved", "insert", "marker", "fragment"
#: Result kind of a merge's aligned target task: the ids of the source rows
#: some target row matched (sorted unique int64, raw bytes).
MATCHED_IDS = "matched"

RESULT_SCHEMA = T.StructType([T.StructField("kind", T.StringType(), False), T.StructField("payload", T.BinaryType(), False)])

#: Prefix of the error raised when several source rows change one target row.
DUPLICATE_MATCH = "MERGE_DUPLICATE_MATCH"


@dataclass
class ChangeContext:
    """What the executor tasks need (pickled into their closures)."""

    store: ObjectStore
    schema: Schema
    table_spark: T.StructType
    read_version: int
    stable_row_ids: bool
    file_version: str
    fragments: dict[int, bytes]
    assigned: list[str]
    max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT
    #: Merge with only unconditional delete clauses may match a row twice.
    allow_duplicate_matches: bool = False
    #: Table CHECK constraints: their check columns ride along with the
    #: requests and are enforced on rows to write (updates, inserts) before
    #: anything of the fragment is written.
    checks: list = field(default_factory=list)
    #: Journal token (:mod:`.journal`): files of finished tasks are recorded.
    journal: str | None = None

    @property
    def unassigned(self) -> list[str]:
        return [f.name for f in self.table_spark.fields if f.name not in self.assigned]


def nullable(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


def changed_rows_schema(table_spark: T.StructType) -> T.StructType:
    """Rows after :func:`fragment_changes`: the table's columns (nullable: marker
    rows have none), the carried row id / created-at version, kind and payload."""
    return T.StructType(
        nullable(table_spark).fields
        + [
            T.StructField(CARRIED_ID, T.LongType(), True),
            T.StructField(CARRIED_CREATED, T.LongType(), True),
            T.StructField(KIND, T.StringType(), False),
            T.StructField(PAYLOAD, T.BinaryType(), True),
        ]
    )


# ------------------------------------------------------------ per fragment
class _Schemas:
    """Arrow schemas of the intermediate rows (built once per task)."""

    def __init__(self, ctx: ChangeContext):
        self.out = spark_arrow_schema(changed_rows_schema(ctx.table_spark))
        take = nullable(T.StructType([f for f in ctx.table_spark.fields if f.name not in ctx.assigned]))
        self.take = spark_arrow_schema(take)


def change_fragment(ctx: ChangeContext, schemas: _Schemas, frag_id: int, table: pa.Table) -> pa.Table:
    """One fragment's change requests -> its marker row + its rewritten rows.

    Writes the fragment's new deletion file (old vector | requested offsets),
    reads back the unassigned columns, row ids and created-at versions of the
    rows to rewrite, and returns them with their new values."""
    frag = table_pb2.DataFragment.FromString(ctx.fragments[frag_id])
    addr = table.column(ROW_ADDR).to_numpy().astype(np.uint64)
    offsets = (addr & np.uint64(0xFFFFFFFF)).astype(np.int64)
    uniq, first, counts = np.unique(offsets, return_index=True, return_counts=True)
    if (counts > 1).any():
        if not ctx.allow_duplicate_matches:
            dup = int(uniq[counts > 1][0])
            raise DuplicateMatchError(
                f"{DUPLICATE_MATCH}: several source rows matched target row {(frag_id << 32) | dup} "
                f"(fragment {frag_id}, offset {dup}) and more than one would modify it"
            )
        table = table.take(pa.array(first))
        offsets = uniq
    is_update = table.column(ACTION).to_numpy(zero_copy_only=False) == UPDATE
    n_update = int(is_update.sum())
    if ctx.checks and n_update:
        enforce(table, ctx.checks, pa.array(is_update), row_columns=[ROW_ADDR, *ctx.assigned])

    # 1. deletion vector: old | requested rows.
    old = read_deletion_vector(ctx.store, frag)
    dv = old.extended(offsets)
    removed = len(dv) >= frag.physical_rows
    deletion = None if removed else write_deletion_vector(ctx.store, frag_id, ctx.read_version, dv)
    if ctx.journal and deletion is not None:
        from ..format.deletion import deletion_path_of
        from .journal import record

        record(ctx.store, ctx.journal, [deletion_path_of(frag_id, deletion)])
    marker = {
        "fragment_id": frag_id,
        "removed": removed,
        "deletion_file": deletion.SerializeToString() if deletion is not None else None,
        "affected": BitMap(offsets.astype(np.uint32)).serialize(),
        "updated": n_update,
        "deleted": int(len(offsets) - n_update),
    }
    parts = [_marker_batch(schemas.out, pickle.dumps(marker))]

    # 2. rows to rewrite: assigned values + the rest read back by offset.
    if n_update:
        upd = table.filter(pa.array(is_update))
        upd_offsets = offsets[is_update]
        order = np.argsort(upd_offsets, kind="stable")
        parts.append(_rewritten(ctx, frag, upd.take(pa.array(order)), upd_offsets[order], schemas.take, schemas.out))
    return pa.Table.from_batches(parts, schema=schemas.out)


def fragment_changes(ctx: ChangeContext):
    """``groupBy(fragment).applyInArrow`` function: one fragment's requests in,
    its marker and rewritten rows out (negative keys: merge inserts)."""
    schemas = _Schemas(ctx)

    @executor_task
    def run(key, table):  # no annotations: pyspark infers the UDF kind from them
        frag_id = int(key[0].as_py())
        if frag_id < 0:  # merge inserts (spread over negative keys)
            table = _unmatched(table)
            if ctx.checks:
                enforce(table, ctx.checks, row_columns=[f.name for f in ctx.table_spark.fields])
            return _inserts(table, schemas.out)
        return change_fragment(ctx, schemas, frag_id, table)

    return run


def aligned_changes(ctx: ChangeContext, matched_ids: bool = False, inserts: bool = False):
    """``mapInArrow`` function over requests straight from a scan whose tasks
    read whole fragments in order (``split_fragments=False``): handles each
    fragment as soon as its requests are complete and writes the rewritten rows
    in the same task -- no shuffle. Emits (kind, payload) metadata rows.

    ``matched_ids`` (merge): the rows also carry :data:`SOURCE_ID` (null for a
    target row no source row matched) and a matched pair no clause applies to
    comes with a null action; the task reports the source ids it saw matched
    (one :data:`MATCHED_IDS` row) -- the inserts are the source rows no task
    saw -- and changes only the rows with an action.

    ``inserts`` (merge, with ``matched_ids``; the task reads the whole
    target scan): the rows also hold the insert candidates (null row
    address, anywhere in the stream); once every request is handled, the
    candidates no request matched are written as :func:`merge_inserts`
    writes them, in this task."""
    schemas = _Schemas(ctx)

    @executor_task
    def run(batches):
        writer = _ChangeWriter(ctx)
        done: set[int] = set()
        current, pending = None, []
        seen: list[np.ndarray] = []
        candidates: list[pa.RecordBatch] = []

        def flush():
            if current is not None and pending:
                writer.add(change_fragment(ctx, schemas, current, pa.Table.from_batches(pending)))

        try:
            for b in batches:
                if inserts and b.num_rows and b.column(ROW_ADDR).null_count:
                    addr = b.column(ROW_ADDR)
                    candidates.append(b.filter(addr.is_null()))
                    b = b.filter(addr.is_valid())
                if matched_ids and b.num_rows:
                    seen.append(_present(b.column(SOURCE_ID)))
                    b = _with_action(b)
                if not b.num_rows:
                    continue
                frags = (b.column(ROW_ADDR).to_numpy().astype(np.uint64) >> np.uint64(32)).astype(np.int64)
                bounds = np.flatnonzero(np.diff(frags)) + 1
                for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(frags)]))):
                    fid = int(frags[lo])
                    if fid != current:
                        flush()
                        if fid in done:
                            raise LanceOpsError(f"fragment {fid} was split across scan batches out of order")
                        if current is not None:
                            done.add(current)
                        current, pending = fid, []
                    pending.append(b.slice(lo, hi - lo))
            flush()
            ids = np.unique(np.concatenate(seen)) if seen else np.zeros(0, np.int64)
            for c in candidates:
                _write_inserts(ctx, schemas, writer, c, ids)
            yield from writer.finish()
            if matched_ids:
                yield pa.RecordBatch.from_arrays(
                    [pa.array([MATCHED_IDS], pa.string()), pa.array([ids.astype(np.int64).tobytes()], pa.binary())],
                    names=["kind", "payload"])
        except BaseException:
            writer.abort()
            raise

    return run


def _present(col) -> np.ndarray:
    """The non-null values of an int64 column."""
    col = _array(col)
    if col.null_count:
        col = col.drop_null()
    return col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _with_action(b: pa.RecordBatch) -> pa.RecordBatch:
    """``b`` without the rows that carry no action (merge: matched pairs no
    clause applies to)."""
    action = b.column(ACTION)
    return b if not action.null_count else b.filter(action.is_valid())


def matched_source_ids(rows) -> np.ndarray:
    """Sorted unique ids of the source rows some target row matched, from
    the (kind, payload) results of :func:`aligned_changes` tasks."""
    parts = [np.frombuffer(p, dtype=np.int64) for k, p in rows if k == MATCHED_IDS]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def merge_inserts(ctx: ChangeContext, matched: bytes):
    """``mapInArrow`` function over a merge's insert candidates (every source
    row an insert clause applies to, with its :data:`SOURCE_ID`): drops the
    ones whose id is in ``matched`` (sorted int64 bytes: the source rows some
    target row matched, from the aligned target tasks), checks constraints and
    writes the rest into new fragments; emits (kind, payload)."""
    schemas = _Schemas(ctx)

    @executor_task
    def run(batches):
        taken = np.frombuffer(matched, dtype=np.int64)
        writer = _ChangeWriter(ctx)
        try:
            for b in batches:
                _write_inserts(ctx, schemas, writer, b, taken)
            yield from writer.finish()
        except BaseException:
            writer.abort()
            raise

    return run


def _write_inserts(ctx: ChangeContext, schemas: _Schemas, writer: "_ChangeWriter", b: pa.RecordBatch,
                   taken: np.ndarray) -> None:
    """The insert candidates of ``b`` whose source id is not in ``taken``
    (sorted: the source rows some target row matched), constraints checked,
    into ``writer``."""
    if not b.num_rows:
        return
    if len(taken):
        ids = _array(b.column(SOURCE_ID)).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        at = np.minimum(np.searchsorted(taken, ids), len(taken) - 1)
        b = b.filter(pa.array(taken[at] != ids))
        if not b.num_rows:
            return
    table = pa.Table.from_batches([b])
    if ctx.checks:
        enforce(table, ctx.checks, row_columns=[f.name for f in ctx.table_spark.fields])
    for part in _inserts(table, schemas.out).to_batches():
        writer.add(part)


def _unmatched(table: pa.Table) -> pa.Table:
    """Merge insert candidates without the ones a marker says were matched
    (candidates and markers of one source row share a group)."""
    if SOURCE_ID not in table.column_names or ACTION not in table.column_names:
        return table
    import pyarrow.compute as pc

    is_mark = pc.fill_null(pc.equal(table.column(ACTION), MATCH_MARK), False)
    if not pc.any(is_mark).as_py():
        return table
    ids = table.column(SOURCE_ID)
    matched = pc.filter(ids, is_mark).combine_chunks()
    keep = pc.and_(pc.invert(is_mark), pc.invert(pc.fill_null(pc.is_in(ids, value_set=matched), False)))
    return table.filter(keep)


def _inserts(table: pa.Table, out_arrow: pa.Schema) -> pa.Table:
    n = table.num_rows
    arrays = []
    for f in out_arrow:
        if f.name == KIND:
            arrays.append(pa.array([INSERT] * n, f.type))
        elif f.name in (PAYLOAD, CARRIED_ID, CARRIED_CREATED):
            arrays.append(pa.nulls(n, f.type))
        else:
            col = table.column(f.name).combine_chunks()
            arrays.append(col if col.type == f.type else col.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=out_arrow)


def _marker_batch(schema: pa.Schema, payload: bytes) -> pa.RecordBatch:
    arrays = []
    for f in schema:
        if f.name == KIND:
            arrays.append(pa.array([MARKER], f.type))
        elif f.name == PAYLOAD:
            arrays.append(pa.array([payload], f.type))
        else:
            arrays.append(pa.nulls(1, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _rewritten(ctx: ChangeContext, frag, upd: pa.Table, offsets: np.ndarray, take_arrow: pa.Schema, out_arrow: pa.Schema) -> pa.RecordBatch:
    meta = [ROW_ID, ROW_CREATED] if ctx.stable_row_ids else []
    scan = FragmentScan(
        frag, ctx.unassigned, meta, offsets=offsets.astype(np.uint64), include_deleted=True,
        stable_row_ids=ctx.stable_row_ids,
    )
    n = len(offsets)
    batches = list(scan_fragment(ctx.store, ctx.schema, scan))
    old = pa.Table.from_batches(batches) if batches else pa.table({})
    if (ctx.unassigned or meta) and old.num_rows != n:
        raise LanceOpsError(f"fragment {frag.id}: read {old.num_rows} rows for {n} offsets")
    converted = None
    if ctx.unassigned:
        raw = pa.RecordBatch.from_arrays([old.column(c).combine_chunks() for c in ctx.unassigned], names=ctx.unassigned)
        converted = to_spark_batch(raw, take_arrow)
    arrays = []
    for f in out_arrow:
        if f.name == KIND:
            arrays.append(pa.array([MOVED] * n, f.type))
        elif f.name == PAYLOAD:
            arrays.append(pa.nulls(n, f.type))
        elif f.name == CARRIED_ID:
            arrays.append(old.column(ROW_ID).cast(pa.int64()).combine_chunks() if meta else pa.nulls(n, pa.int64()))
        elif f.name == CARRIED_CREATED:
            arrays.append(old.column(ROW_CREATED).cast(pa.int64()).combine_chunks() if meta else pa.nulls(n, pa.int64()))
        elif f.name in ctx.assigned:
            col = upd.column(f.name).combine_chunks()
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(converted.column(f.name))
    return pa.RecordBatch.from_arrays(arrays, schema=out_arrow)


# ----------------------------------------------------------------- writing
class _ChangeWriter:
    """Routes changed rows: markers pass through, moved rows (keeping their row
    ids) and inserts go to new fragments. Emits (kind, payload) batches."""

    def __init__(self, ctx: ChangeContext):
        self.ctx = ctx
        self.names = [f.name for f in ctx.table_spark.fields]
        self.moved = FragmentSink(ctx.store, ctx.schema, ctx.file_version, ctx.max_rows_per_fragment)
        self.fresh = FragmentSink(ctx.store, ctx.schema, ctx.file_version, ctx.max_rows_per_fragment)
        self.kinds: list[str] = []
        self.payloads: list[bytes] = []

    def _emit(self, frags) -> None:
        for frag in frags:
            self.kinds.append(FRAGMENT)
            self.payloads.append(frag.SerializeToString())

    def add(self, b) -> None:
        kinds = b.column(KIND).to_numpy(zero_copy_only=False)
        markers = kinds == MARKER
        if markers.any():
            for p in b.column(PAYLOAD).filter(pa.array(markers)).to_pylist():
                self.kinds.append(MARKER)
                self.payloads.append(p)
        if markers.all():
            return
        data = pa.RecordBatch.from_arrays([_array(b.column(n)) for n in self.names], names=self.names)
        mv = kinds == MOVED
        if mv.any():
            part = data.filter(pa.array(mv))
            if self.ctx.stable_row_ids:
                ids = _array(b.column(CARRIED_ID)).filter(pa.array(mv)).to_numpy().astype(np.uint64)
                created = _array(b.column(CARRIED_CREATED)).filter(pa.array(mv)).to_numpy().astype(np.uint64)
                self._emit(self.moved.write(part, ids, created))
            else:
                self._emit(self.fresh.write(part))
        ins = kinds == INSERT
        if ins.any():
            self._emit(self.fresh.write(data.filter(pa.array(ins))))

    def finish(self):
        self._emit(self.moved.finish())
        self._emit(self.fresh.finish())
        if self.ctx.journal:
            from .journal import record

            frags = [table_pb2.DataFragment.FromString(p) for k, p in zip(self.kinds, self.payloads) if k == FRAGMENT]
            record(self.ctx.store, self.ctx.journal, [f"data/{df.path}" for f in frags for df in f.files])
        if self.kinds:
            yield pa.RecordBatch.from_arrays(
                [pa.array(self.kinds, pa.string()), pa.array(self.payloads, pa.binary())], names=["kind", "payload"]
            )

    def abort(self) -> None:
        self.moved.abort()
        self.fresh.abort()


def _array(col):
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def write_changes(ctx: ChangeContext):
    """``mapInArrow`` function after :func:`fragment_changes`: rewritten and
    inserted rows into new fragments (moved rows keep their ids), markers passed
    through; emits (kind, payload)."""

    @executor_task
    def run(batches):
        writer = _ChangeWriter(ctx)
        try:
            for b in batches:
                writer.add(b)
            yield from writer.finish()
        except BaseException:
            writer.abort()
            raise

    return run


# ---------------------------------------------------------------- results
@dataclass
class ChangeSet:
    """What a change job produced, parsed on the driver."""

    removed: list[int] = field(default_factory=list)
    deletion_files: dict[int, table_pb2.DeletionFile] = field(default_factory=dict)
    affected: dict[int, BitMap] = field(default_factory=dict)
    new_fragments: list[table_pb2.DataFragment] = field(default_factory=list)
    updated_rows: int = 0
    deleted_rows: int = 0
    @classmethod
    def from_rows(cls, rows) -> "ChangeSet":
        out = cls()
        moved, fresh = [], []
        for kind, payload in rows:
            if kind == MARKER:
                m = pickle.loads(payload)
                fid = m["fragment_id"]
                if fid in out.affected:
                    # Two tasks changed one fragment: each wrote a deletion vector
                    # missing the other's rows. Never commit that.
                    raise LanceOpsError(f"fragment {fid} was changed by two tasks; nothing was committed")
                out.affected[fid] = BitMap.deserialize(m["affected"])
                out.updated_rows += m["updated"]
                out.deleted_rows += m["deleted"]
                if m["removed"]:
                    out.removed.append(fid)
                else:
                    out.deletion_files[fid] = table_pb2.DeletionFile.FromString(m["deletion_file"])
            elif kind == FRAGMENT:
                frag = table_pb2.DataFragment.FromString(payload)
                (moved if frag.HasField("inline_row_ids") else fresh).append(frag)
        # Moved rows first, fresh inserts after (fresh ids are assigned in order).
        out.new_fragments = moved + fresh
        return out

    def updated_fragments(self, snapshot) -> list[table_pb2.DataFragment]:
        """Copies of the touched fragments with their new deletion files."""
        out = []
        for fid, df in sorted(self.deletion_files.items()):
            frag = table_pb2.DataFragment()
            frag.CopyFrom(snapshot.fragment(fid))
            frag.deletion_file.CopyFrom(df)
            out.append(frag)
        return out

    def inserted_rows(self) -> int:
        return sum(f.physical_rows for f in self.new_fragments) - self.updated_rows

    def deletion_bytes(self, store) -> int:
        from ..format.deletion import deletion_path_of

        return sum(store.size(deletion_path_of(fid, df)) for fid, df in self.deletion_files.items())
