"""Scanning one fragment: live rows of some columns plus metadata columns.

This is the executor-side read used by the Spark DataSource and by every
internal job (delete/update scans, compaction, column backfills). It needs no
Spark: a fragment descriptor (its protobuf bytes), the table schema and a row
range in, Arrow batches out.

Metadata columns (pylance's names and values, ``uint64``):

* ``_rowaddr``: ``(fragment_id << 32) | physical_offset``;
* ``_rowid``: the stable row id (row id sequence) or, without stable row ids,
  the row address;
* ``_row_created_at_version`` / ``_row_last_updated_at_version``: from the
  fragment's version sequences (1 when absent, as pylance reads them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptTableError
from .datafile import FragmentDataReader, WholeFileLayout, read_whole_file
from .deletion import read_deletion_vector
from .proto import table_pb2
from .rowids import (
    CREATED,
    ROW_IDS,
    UPDATED,
    decode_row_ids,
    decode_row_ids_at,
    decode_versions,
    decode_versions_at,
    sequence_bytes,
)
from .schema import Schema

ROW_ID = "_rowid"
ROW_ADDR = "_rowaddr"
ROW_CREATED = "_row_created_at_version"
ROW_UPDATED = "_row_last_updated_at_version"
METADATA_COLUMNS = (ROW_ID, ROW_ADDR, ROW_CREATED, ROW_UPDATED)
#: Physical offset inside the fragment (internal jobs only).
ROW_OFFSET = "_rowoffset"


def is_reserved_name(name: str) -> bool:
    """Column names a table must not use (pylance reserves them for metadata)."""
    return name in METADATA_COLUMNS or name.startswith("_row")


@dataclass
class FragmentScan:
    """What to read from one fragment."""

    fragment: table_pb2.DataFragment
    columns: Sequence[str]
    metadata: Sequence[str] = ()
    start: int = 0
    end: int | None = None
    #: Applied to each batch after deletions: returns a boolean mask of rows
    #: to keep (pushed-down filters).
    filter: Callable[[pa.RecordBatch], pa.Array] | None = None
    stable_row_ids: bool = False
    batch_rows: int | None = None
    #: Keep deleted rows (internal jobs that must stay row-aligned).
    include_deleted: bool = False
    #: Read only these physical offsets (sorted); start/end are ignored.
    offsets: "np.ndarray | None" = None
    extra: dict = field(default_factory=dict)


def scan_fragment(store, schema: Schema, scan: FragmentScan) -> Iterator[pa.RecordBatch]:
    frag = scan.fragment
    n_phys = frag.physical_rows
    start = scan.start
    end = n_phys if scan.end is None else min(scan.end, n_phys)
    if end <= start:
        return
    reader = FragmentDataReader(store, schema, frag, scan.columns)
    deleted = None
    if not scan.include_deleted:
        dv = read_deletion_vector(store, frag)
        if len(dv):
            deleted = dv.mask(n_phys)
    meta = list(scan.metadata)
    if scan.offsets is not None:
        offsets = np.asarray(scan.offsets, dtype=np.uint64)
        # (the sequences at those offsets only: indexed by position in them)
        sequences = _sequences(store, frag, meta, scan.stable_row_ids, at=offsets.astype(np.int64))
        source = reader.take(offsets, scan.batch_rows)
    else:
        sequences = _sequences(store, frag, meta, scan.stable_row_ids)
        offsets = None
        source = reader.read(start, end, scan.batch_rows)
    pos = start if offsets is None else 0
    for batch in source:
        n = batch.num_rows
        lo, hi = pos, pos + n
        pos = hi
        # Physical offsets of this batch's rows.
        phys = np.arange(lo, hi, dtype=np.uint64) if offsets is None else offsets[lo:hi]
        keep = None
        if deleted is not None:
            d = deleted[lo:hi] if offsets is None else deleted[phys.astype(np.int64)]
            if d.any():
                keep = ~d
                if not keep.any():
                    continue
        arrays = list(batch.columns)
        names = list(batch.schema.names)
        fields = list(batch.schema)
        idx = phys.astype(np.int64) if offsets is None else slice(lo, hi)
        for m in meta:
            arrays.append(pa.array(_metadata_values(m, frag, phys, idx, sequences), type=pa.uint64()))
            names.append(m)
            fields.append(pa.field(m, pa.uint64(), nullable=False))
        out = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)) if arrays else batch
        if keep is not None:
            out = out.filter(pa.array(keep))
        if scan.filter is not None and out.num_rows:
            mask = scan.filter(out)
            out = out.filter(mask)
        if out.num_rows:
            yield out


def scan_whole_fragment(store, layout: WholeFileLayout, scan: FragmentScan) -> list[pa.RecordBatch] | None:
    """What :func:`scan_fragment` yields for a whole-fragment scan (no row
    range, offsets or filter) of a fragment ``layout.holds``, read with one
    codec call (:func:`.datafile.read_whole_file`); ``None``: not that
    layout after all -- use :func:`scan_fragment`. Compaction of thousands of
    tiny fragments reads them this way (:func:`scan_whole_fragments`)."""
    if (scan.start or scan.end is not None or scan.offsets is not None or scan.filter is not None
            or list(scan.columns) != layout.arrow.names):
        return None
    table = scan_whole_fragments(store, layout, [scan.fragment], scan.metadata, scan.stable_row_ids,
                                 scan.include_deleted)
    if table is None:
        return None
    return table.to_batches() if table.num_rows else []


def scan_whole_fragments(store, layout: WholeFileLayout, fragments: Sequence[table_pb2.DataFragment],
                         metadata: Sequence[str] = (), stable_row_ids: bool = False,
                         include_deleted: bool = False) -> pa.Table | None:
    """The rows of whole ``fragments`` (the table's columns plus
    ``metadata``; deleted rows dropped unless ``include_deleted``), in
    order, as one table: what :func:`scan_fragment` yields for each of
    them, with the table work (metadata columns, deletions) done once for
    all, so a run of thousands of 25-row fragments costs one codec call each
    and little Python. ``None``: some fragment is not that layout after all
    -- read them one by one."""
    meta = list(metadata)
    tables, counts, keeps = [], [], []
    versions: dict = {}  # (sequence bytes, rows) -> decoded: fragments written together share them
    columns: dict = {m: [] for m in meta}
    for frag in fragments:
        if not layout.holds(frag):
            return None
        table = read_whole_file(store, layout, frag)
        if table is None:
            return None
        n = frag.physical_rows
        tables.append(table)
        counts.append(n)
        if meta:
            phys = np.arange(n, dtype=np.uint64)
            sequences = _sequences(store, frag, meta, stable_row_ids, versions=versions)
            for m in meta:
                columns[m].append(_metadata_values(m, frag, phys, slice(None), sequences))
        if not include_deleted:
            dv = read_deletion_vector(store, frag)
            if len(dv):
                keeps.append((len(counts) - 1, ~dv.mask(n)))
    if not tables:
        return None
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    for m in meta:
        table = table.append_column(pa.field(m, pa.uint64(), nullable=False),
                                    pa.array(np.concatenate(columns[m]), type=pa.uint64()))
    if keeps:
        mask = np.ones(sum(counts), dtype=bool)
        starts = np.concatenate([[0], np.cumsum(counts)])
        for i, keep in keeps:
            mask[starts[i]:starts[i + 1]] = keep
        table = table.filter(pa.array(mask))
    return table


def _sequences(store, frag: table_pb2.DataFragment, meta, stable_row_ids: bool, at: np.ndarray | None = None,
               versions: dict | None = None) -> tuple:
    """(row ids, created-at versions, last-updated versions) of every
    physical row of ``frag`` -- or only of the physical offsets ``at``, in
    their order -- each decoded only when a metadata column in ``meta``
    needs it (else None). ``versions``: decoded whole version sequences by
    (bytes, rows), shared across fragments (read-only arrays)."""

    def whole_versions(data):
        if versions is None:
            return decode_versions(data, n)
        key = (data, n)
        if key not in versions:
            versions[key] = decode_versions(data, n)
        return versions[key]

    n = frag.physical_rows
    row_ids = created = updated = None
    if ROW_ID in meta and stable_row_ids:
        data = sequence_bytes(store, frag, ROW_IDS) or b""
        if at is not None:
            try:
                row_ids = decode_row_ids_at(data, n, at)
            except CorruptTableError as e:
                raise CorruptTableError(f"fragment {frag.id}: {e}") from e
        else:
            row_ids = decode_row_ids(data)
            if len(row_ids) != n:
                raise CorruptTableError(f"fragment {frag.id} has {len(row_ids)} row ids for {n} rows")
    if ROW_CREATED in meta:
        data = sequence_bytes(store, frag, CREATED)
        created = whole_versions(data) if at is None else decode_versions_at(data, n, at)
    if ROW_UPDATED in meta:
        data = sequence_bytes(store, frag, UPDATED)
        updated = whole_versions(data) if at is None else decode_versions_at(data, n, at)
    return row_ids, created, updated


def _metadata_values(m: str, frag: table_pb2.DataFragment, phys: np.ndarray, idx, sequences: tuple) -> np.ndarray:
    """Metadata column ``m`` of the rows at physical offsets ``phys``
    (``idx``: the same offsets as an index into ``sequences``)."""
    row_ids, created, updated = sequences
    if m == ROW_ADDR or (m == ROW_ID and row_ids is None):
        return (np.uint64(frag.id) << np.uint64(32)) + phys
    if m == ROW_ID:
        return row_ids[idx]
    if m == ROW_CREATED:
        return created[idx]
    if m == ROW_UPDATED:
        return updated[idx]
    if m == ROW_OFFSET:
        return phys
    raise ValueError(f"unknown metadata column {m}")


def live_rows(fragment: table_pb2.DataFragment) -> int:
    deleted = fragment.deletion_file.num_deleted_rows if fragment.HasField("deletion_file") else 0
    return fragment.physical_rows - deleted
