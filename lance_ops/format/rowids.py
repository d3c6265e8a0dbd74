"""Row id sequences and row version (lineage) sequences.

A fragment of a table with stable row ids stores, inline in its metadata:

* ``inline_row_ids``: a ``RowIdSequence`` -- the stable row id of each physical
  row, as a list of ``U64Segment`` (range, range with holes, range with bitmap,
  sorted array, array);
* ``inline_created_at_versions`` / ``inline_last_updated_at_versions``: a
  ``RowDatasetVersionSequence`` -- runs of rows sharing a version. Only the
  number of values in a run's ``span`` matters (compaction keeps old offsets in
  there), so decoding counts span values.

Decoding returns numpy ``uint64`` arrays of length ``physical_rows``. Encoding
follows the reference writer's choices (segment kind by estimated size, narrow
offsets when the spread allows) so the bytes match pylance's where it matters.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..errors import CorruptTableError
from .paths import check_relative
from .proto import rowids_pb2

_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFFFFFF


# ---------------------------------------------------------------- arrays
def _decode_array(a: rowids_pb2.EncodedU64Array) -> np.ndarray:
    kind = a.WhichOneof("array")
    if kind == "u16_array":
        return np.frombuffer(a.u16_array.offsets, dtype="<u2").astype(np.uint64) + np.uint64(a.u16_array.base)
    if kind == "u32_array":
        return np.frombuffer(a.u32_array.offsets, dtype="<u4").astype(np.uint64) + np.uint64(a.u32_array.base)
    if kind == "u64_array":
        return np.frombuffer(a.u64_array.values, dtype="<u8").astype(np.uint64)
    return np.empty(0, dtype=np.uint64)


def _encode_array(values: np.ndarray) -> rowids_pb2.EncodedU64Array:
    out = rowids_pb2.EncodedU64Array()
    if len(values) == 0:
        out.u64_array.values = b""
        return out
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= _U16_MAX:
        out.u16_array.base = lo
        out.u16_array.offsets = (values - np.uint64(lo)).astype("<u2").tobytes()
    elif hi - lo <= _U32_MAX:
        out.u32_array.base = lo
        out.u32_array.offsets = (values - np.uint64(lo)).astype("<u4").tobytes()
    else:
        out.u64_array.values = values.astype("<u8").tobytes()
    return out


def _array_len(a: rowids_pb2.EncodedU64Array) -> int:
    kind = a.WhichOneof("array")
    if kind == "u16_array":
        return len(a.u16_array.offsets) // 2
    if kind == "u32_array":
        return len(a.u32_array.offsets) // 4
    if kind == "u64_array":
        return len(a.u64_array.values) // 8
    return 0


# -------------------------------------------------------------- segments
def decode_segment(seg: rowids_pb2.U64Segment) -> np.ndarray:
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return np.arange(seg.range.start, seg.range.end, dtype=np.uint64)
    if kind == "range_with_holes":
        r = seg.range_with_holes
        values = np.arange(r.start, r.end, dtype=np.uint64)
        holes = _decode_array(r.holes)
        return values[~np.isin(values, holes)] if len(holes) else values
    if kind == "range_with_bitmap":
        r = seg.range_with_bitmap
        n = r.end - r.start
        bits = np.unpackbits(np.frombuffer(r.bitmap, dtype=np.uint8), bitorder="little")[:n]
        return np.flatnonzero(bits).astype(np.uint64) + np.uint64(r.start)
    if kind in ("sorted_array", "array"):
        return _decode_array(getattr(seg, kind))
    if kind is None:
        return np.empty(0, dtype=np.uint64)
    raise CorruptTableError(f"unknown row id segment kind {kind}")


def segment_len(seg: rowids_pb2.U64Segment) -> int:
    """Number of values in a segment, without materializing them."""
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return max(0, seg.range.end - seg.range.start)
    if kind == "range_with_holes":
        r = seg.range_with_holes
        return r.end - r.start - _array_len(r.holes)
    if kind == "range_with_bitmap":
        r = seg.range_with_bitmap
        n = r.end - r.start
        bits = np.unpackbits(np.frombuffer(r.bitmap, dtype=np.uint8), bitorder="little")[:n]
        return int(bits.sum())
    if kind in ("sorted_array", "array"):
        return _array_len(getattr(seg, kind))
    return 0


def encode_segment(values: np.ndarray) -> rowids_pb2.U64Segment:
    """One segment holding ``values`` in order, of the kind the reference writer
    picks: array if unsorted, range if contiguous, otherwise the smallest of
    range-with-holes, range-with-bitmap and sorted array."""
    values = np.asarray(values, dtype=np.uint64)
    seg = rowids_pb2.U64Segment()
    n = len(values)
    if n == 0:
        seg.range.SetInParent()
        return seg
    if n > 1 and not bool(np.all(values[1:] > values[:-1])):
        seg.array.CopyFrom(_encode_array(values))
        return seg
    lo, hi = int(values[0]), int(values[-1])
    span = hi - lo + 1
    if span == n:
        seg.range.start = lo
        seg.range.end = hi + 1
        return seg
    n_holes = span - n
    holes_size = 24 + 4 * n_holes
    bitmap_size = 24 + (span + 7) // 8
    sorted_size = 24 + 2 * n
    best = min(holes_size, bitmap_size, sorted_size)
    if holes_size == best:
        full = np.arange(lo, hi + 1, dtype=np.uint64)
        holes = full[~np.isin(full, values, assume_unique=True)]
        seg.range_with_holes.start = lo
        seg.range_with_holes.end = hi + 1
        seg.range_with_holes.holes.CopyFrom(_encode_array(holes))
    elif bitmap_size == best:
        bits = np.zeros(span, dtype=np.uint8)
        bits[(values - np.uint64(lo)).astype(np.int64)] = 1
        seg.range_with_bitmap.start = lo
        seg.range_with_bitmap.end = hi + 1
        seg.range_with_bitmap.bitmap = np.packbits(bits, bitorder="little").tobytes()
    else:
        seg.sorted_array.CopyFrom(_encode_array(values))
    return seg


def range_segment(start: int, end: int) -> rowids_pb2.U64Segment:
    seg = rowids_pb2.U64Segment()
    seg.range.start = start
    seg.range.end = end
    return seg


def _parsed(message, data: bytes, what: str):
    """``message`` parsed from ``data``; a CorruptTableError naming ``what``
    when the bytes are not one."""
    try:
        message.ParseFromString(data)
    except Exception as e:  # protobuf DecodeError
        raise CorruptTableError(f"cannot decode {what}: {e}") from e
    return message


# ----------------------------------------------------- stored sequences
ROW_IDS = ("inline_row_ids", "external_row_ids")
CREATED = ("inline_created_at_versions", "external_created_at_versions")
UPDATED = ("inline_last_updated_at_versions", "external_last_updated_at_versions")


def sequence_bytes(store, fragment, which: tuple[str, str]) -> bytes | None:
    """A fragment's serialized row id / version sequence (``which``: ROW_IDS,
    CREATED or UPDATED), stored inline or in an external file (a byte range of a
    file under the table root); None when it has none. lance_ops always writes
    them inline, as pylance 14 does, but reads both forms."""
    inline, external = which
    if fragment.HasField(inline):
        return getattr(fragment, inline)
    if fragment.HasField(external):
        ref = getattr(fragment, external)
        check_relative(ref.path, f"external sequence file of fragment {fragment.id}", store.root)
        try:
            return store.read_range(ref.path, ref.offset, ref.size)
        except FileNotFoundError as e:
            raise CorruptTableError(f"external sequence file of fragment {fragment.id} is missing", ref.path) from e
    return None


# -------------------------------------------------------------- row ids
def decode_row_ids(data: bytes) -> np.ndarray:
    """All row ids of a fragment (physical order) from ``inline_row_ids``."""
    seq = _parsed(rowids_pb2.RowIdSequence(), data, "row id sequence")
    parts = [decode_segment(s) for s in seq.segments]
    if not parts:
        return np.empty(0, dtype=np.uint64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def decode_row_ids_at(data: bytes, physical_rows: int, offsets: np.ndarray) -> np.ndarray:
    """The row ids at physical ``offsets`` (each below ``physical_rows``),
    without decoding the others where the sequence is ranges (a fragment
    pylance or lance_ops wrote: one range): an update of a few rows of a
    250k-row fragment reads a few ids, not 250k. Any other segment: the
    whole sequence, indexed. The sequence must cover ``physical_rows``."""
    seq = _parsed(rowids_pb2.RowIdSequence(), data, "row id sequence")
    offsets = np.asarray(offsets, dtype=np.int64)
    if all(s.WhichOneof("segment") == "range" for s in seq.segments):
        starts = np.array([s.range.start for s in seq.segments], dtype=np.uint64)
        lengths = np.array([max(0, s.range.end - s.range.start) for s in seq.segments], dtype=np.int64)
        if int(lengths.sum()) != physical_rows:
            raise CorruptTableError(f"row id sequence covers {int(lengths.sum())} rows, fragment has {physical_rows}")
        ends = np.cumsum(lengths)
        which = np.searchsorted(ends, offsets, side="right")
        before = ends[which] - lengths[which]
        return starts[which] + (offsets - before).astype(np.uint64)
    ids = decode_row_ids(data)
    if len(ids) != physical_rows:
        raise CorruptTableError(f"row id sequence covers {len(ids)} rows, fragment has {physical_rows}")
    return ids[offsets]


def encode_row_ids(chunks: Iterable[np.ndarray]) -> bytes:
    """``inline_row_ids`` bytes: one segment per chunk (empty chunks skipped)."""
    seq = rowids_pb2.RowIdSequence()
    for chunk in chunks:
        if len(chunk):
            seq.segments.append(encode_segment(chunk))
    return seq.SerializeToString()


def encode_row_id_range(start: int, count: int) -> bytes:
    """Row ids ``start .. start+count-1`` (a new fragment) as one range."""
    seq = rowids_pb2.RowIdSequence()
    if count:
        seq.segments.append(range_segment(start, start + count))
    return seq.SerializeToString()


def sorted_runs(values: np.ndarray) -> list[np.ndarray]:
    """Split values into maximal strictly increasing runs; each run encodes as
    one compact segment (range, range with holes/bitmap or sorted array)."""
    values = np.asarray(values, dtype=np.uint64)
    if len(values) == 0:
        return []
    breaks = np.flatnonzero(values[1:] <= values[:-1]) + 1
    return np.split(values, breaks) if len(breaks) else [values]


def count_row_ids(data: bytes) -> int:
    """Number of row ids in an ``inline_row_ids`` sequence, without decoding them."""
    seq = rowids_pb2.RowIdSequence()
    seq.ParseFromString(data)
    return sum(segment_len(s) for s in seq.segments)


def append_row_id_range(data: bytes, start: int, count: int) -> bytes:
    """``data`` (a RowIdSequence) followed by the ids ``start .. start+count-1``."""
    seq = rowids_pb2.RowIdSequence()
    seq.ParseFromString(data)
    if count:
        seq.segments.append(range_segment(start, start + count))
    return seq.SerializeToString()


def append_version_run(data: bytes | None, version: int, count: int) -> bytes:
    """A RowDatasetVersionSequence followed by ``count`` rows at ``version``."""
    seq = rowids_pb2.RowDatasetVersionSequence()
    if data:
        seq.ParseFromString(data)
    if count:
        run = seq.runs.add()
        run.span.CopyFrom(range_segment(0, count))
        run.version = version
    return seq.SerializeToString()


def contiguous_runs(values: np.ndarray) -> list[np.ndarray]:
    """Split values into maximal runs of consecutive integers (pylance's segment
    structure for rows moved by an update)."""
    values = np.asarray(values, dtype=np.uint64)
    if len(values) == 0:
        return []
    breaks = np.flatnonzero(np.diff(values.astype(np.int64)) != 1) + 1
    return np.split(values, breaks)


# ------------------------------------------------------- version sequences
def decode_versions_prefix(data: bytes) -> np.ndarray:
    """Per-row versions of every run of a RowDatasetVersionSequence, however many
    rows they cover."""
    seq = _parsed(rowids_pb2.RowDatasetVersionSequence(), data, "row version sequence")
    lengths = [segment_len(r.span) for r in seq.runs]
    return np.repeat(
        np.array([r.version for r in seq.runs], dtype=np.uint64),
        np.array(lengths, dtype=np.int64),
    )


def version_bounds(data: bytes | None, default: int = 1) -> tuple[int, int]:
    """(min, max) version of a RowDatasetVersionSequence without expanding it
    per row; a missing or empty sequence reads as ``default``."""
    if not data:
        return default, default
    seq = _parsed(rowids_pb2.RowDatasetVersionSequence(), data, "row version sequence")
    versions = [r.version for r in seq.runs if segment_len(r.span)]
    return (min(versions), max(versions)) if versions else (default, default)


def decode_versions_at(data: bytes | None, physical_rows: int, offsets: np.ndarray, default: int = 1) -> np.ndarray:
    """:func:`decode_versions` at physical ``offsets`` only (a run lookup
    each, no per-row expansion of the fragment)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if not data:
        return np.full(len(offsets), default, dtype=np.uint64)
    seq = _parsed(rowids_pb2.RowDatasetVersionSequence(), data, "row version sequence")
    lengths = np.array([segment_len(r.span) for r in seq.runs], dtype=np.int64)
    if int(lengths.sum()) != physical_rows:
        raise CorruptTableError(
            f"row version sequence covers {int(lengths.sum())} rows, fragment has {physical_rows}"
        )
    versions = np.array([r.version for r in seq.runs], dtype=np.uint64)
    return versions[np.searchsorted(np.cumsum(lengths), offsets, side="right")]


def decode_versions(data: bytes | None, physical_rows: int, default: int = 1) -> np.ndarray:
    """Per-row versions (physical order) from a RowDatasetVersionSequence; a
    missing sequence reads as ``default`` (pylance: 1) for every row."""
    if not data:
        return np.full(physical_rows, default, dtype=np.uint64)
    out = decode_versions_prefix(data)
    if len(out) != physical_rows:
        raise CorruptTableError(
            f"row version sequence covers {len(out)} rows, fragment has {physical_rows}"
        )
    return out


def encode_versions(per_row: Sequence[int] | np.ndarray) -> bytes:
    """A RowDatasetVersionSequence of runs of equal versions, spans as absolute
    ranges ``pos .. pos+len`` (the form pylance writes for fresh data)."""
    arr = np.asarray(per_row, dtype=np.uint64)
    seq = rowids_pb2.RowDatasetVersionSequence()
    if len(arr) == 0:
        return seq.SerializeToString()
    starts = np.concatenate(([0], np.flatnonzero(arr[1:] != arr[:-1]) + 1))
    ends = np.concatenate((starts[1:], [len(arr)]))
    for s, e in zip(starts.tolist(), ends.tolist()):
        run = seq.runs.add()
        run.span.CopyFrom(range_segment(s, e))
        run.version = int(arr[s])
    return seq.SerializeToString()


def encode_version_runs(runs: Iterable[tuple[rowids_pb2.U64Segment, int]]) -> bytes:
    seq = rowids_pb2.RowDatasetVersionSequence()
    for span, version in runs:
        run = seq.runs.add()
        run.span.CopyFrom(span)
        run.version = version
    return seq.SerializeToString()


def uniform_versions(version: int, count: int) -> bytes:
    """Every one of ``count`` rows at ``version`` (bytes as pylance writes them)."""
    if count == 0:
        return rowids_pb2.RowDatasetVersionSequence().SerializeToString()
    return encode_version_runs([(range_segment(0, count), version)])
