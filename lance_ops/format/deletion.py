"""Deletion vectors: which physical rows of a fragment are deleted.

Two on-disk kinds, both read; the kind written is the one pylance 14 would pick:

* ``ARROW_ARRAY`` (``.arrow``): an Arrow IPC *file* with one batch of one
  non-null ``uint32`` column ``row_id`` holding the deleted offsets;
* ``BITMAP`` (``.bin``): a portable 32-bit roaring bitmap.

pylance's choice (lance-core ``DeletionVector``): a vector read from an
``.arrow`` file, or a fresh one built from fewer than 5000 offsets, is a *set*
and stays one while it holds at most 5000 offsets; larger sets, vectors read
from ``.bin`` files, and the union written by a commit-time rebase are
*bitmaps*. Sets are written as ``.arrow``, bitmaps as ``.bin``.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from pyroaring import BitMap

from ..errors import CorruptTableError
from .basepaths import deletion_file_location
from .naming import deletion_file_path, random_u64
from .proto import table_pb2

#: pylance's ``BITMAP_THRESDHOLD``.
BITMAP_THRESHOLD = 5000

_ARROW_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])
ARROW_ARRAY = table_pb2.DeletionFile.ARROW_ARRAY
BITMAP = table_pb2.DeletionFile.BITMAP


@dataclass
class DeletionVector:
    """Deleted physical offsets of one fragment plus the kind it would be
    stored as (``bitmap`` False = Arrow set)."""

    offsets: BitMap
    bitmap: bool = False

    @classmethod
    def empty(cls) -> "DeletionVector":
        return cls(BitMap(), False)

    @classmethod
    def from_new_offsets(cls, offsets: Iterable[int] | np.ndarray) -> "DeletionVector":
        """A fresh vector as pylance builds it from one delete."""
        bm = _to_bitmap(offsets)
        return cls(bm, len(bm) >= BITMAP_THRESHOLD)

    def __len__(self) -> int:
        return len(self.offsets)

    def extended(self, new_offsets: Iterable[int] | np.ndarray) -> "DeletionVector":
        """This vector plus ``new_offsets``, with pylance's kind transition."""
        new = _to_bitmap(new_offsets)
        if len(self.offsets) == 0:
            return DeletionVector.from_new_offsets(new)
        merged = self.offsets | new
        return DeletionVector(merged, self.bitmap or len(merged) > BITMAP_THRESHOLD)

    def union_for_rebase(self, other: "DeletionVector") -> "DeletionVector":
        """The union written when a commit is rebased over a concurrent delete
        (pylance always writes a bitmap then)."""
        return DeletionVector(self.offsets | other.offsets, True)

    def to_numpy(self) -> np.ndarray:
        return np.frombuffer(self.offsets.to_array(), dtype=np.uint32) if len(self.offsets) else np.empty(0, np.uint32)

    def mask(self, physical_rows: int) -> np.ndarray:
        """Boolean array, True at deleted offsets."""
        m = np.zeros(physical_rows, dtype=bool)
        if len(self.offsets):
            m[self.to_numpy().astype(np.int64)] = True
        return m

    # --------------------------------------------------------------- bytes
    def to_bytes(self) -> bytes:
        if self.bitmap:
            return self.offsets.serialize()
        sink = io.BytesIO()
        arr = pa.array(self.to_numpy(), type=pa.uint32())
        # pylance compresses the body with ZSTD (small buffers stay raw).
        opts = ipc.IpcWriteOptions(compression="zstd")
        with ipc.new_file(sink, _ARROW_SCHEMA, options=opts) as w:
            w.write_batch(pa.record_batch([arr], schema=_ARROW_SCHEMA))
        return sink.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, bitmap: bool, path: str = "") -> "DeletionVector":
        try:
            if bitmap:
                return cls(BitMap.deserialize(data), True)
            reader = ipc.open_file(pa.BufferReader(data))
            if reader.schema.names != ["row_id"] or reader.schema.field(0).type != pa.uint32():
                raise ValueError(f"unexpected deletion file schema {reader.schema}")
            bm = BitMap()
            for i in range(reader.num_record_batches):
                col = reader.get_batch(i).column(0)
                bm.update(col.to_numpy(zero_copy_only=False).astype(np.uint32))
            return cls(bm, False)
        except Exception as e:
            raise CorruptTableError(f"cannot decode deletion file: {e}", path) from e


def _to_bitmap(offsets) -> BitMap:
    if isinstance(offsets, BitMap):
        return BitMap(offsets)
    arr = np.asarray(offsets if not isinstance(offsets, (set, frozenset)) else sorted(offsets))
    if arr.size == 0:
        return BitMap()
    return BitMap(arr.astype(np.uint32))


def deletion_path_of(fragment_id: int, df: table_pb2.DeletionFile) -> str:
    return deletion_file_path(fragment_id, df.read_version, df.id, df.file_type == BITMAP)


def has_deletion_file(fragment: table_pb2.DataFragment) -> bool:
    return fragment.HasField("deletion_file") and (
        fragment.deletion_file.num_deleted_rows > 0 or fragment.deletion_file.id != 0
    )


def read_deletion_vector(store, fragment: table_pb2.DataFragment) -> DeletionVector:
    """The fragment's deletion vector (empty if it has no deletion file)."""
    if not has_deletion_file(fragment):
        return DeletionVector.empty()
    df = fragment.deletion_file
    where, rel = deletion_file_location(store, fragment)
    try:
        data = where.read_bytes(rel)
    except FileNotFoundError as e:
        raise CorruptTableError("deletion file is missing", where.path(rel)) from e
    dv = DeletionVector.from_bytes(data, df.file_type == BITMAP, where.path(rel))
    check_vector(dv, fragment, where.path(rel))
    return dv


def check_vector(dv: DeletionVector, fragment: table_pb2.DataFragment, path: str) -> None:
    """A decoded vector must agree with the manifest: as many offsets as
    ``DeletionFile.num_deleted_rows`` records (when set; pylance does not
    check this, so a deletion file replaced by another would delete the wrong
    rows), all below the fragment's physical row count."""
    recorded = fragment.deletion_file.num_deleted_rows
    if recorded and len(dv) != recorded:
        raise CorruptTableError(
            f"deletion file holds {len(dv)} deleted rows but the manifest records {recorded} for fragment "
            f"{fragment.id} (replaced or damaged)",
            path,
        )
    if len(dv) and fragment.physical_rows and dv.offsets.max() >= fragment.physical_rows:
        raise CorruptTableError(
            f"deletion file deletes row {dv.offsets.max()} of fragment {fragment.id}, which has "
            f"{fragment.physical_rows} rows",
            path,
        )


def write_deletion_vector(
    store, fragment_id: int, read_version: int, dv: DeletionVector
) -> table_pb2.DeletionFile:
    """Write ``dv`` as a new deletion file; returns its ``DeletionFile`` message."""
    file_id = random_u64()
    rel = deletion_file_path(fragment_id, read_version, file_id, dv.bitmap)
    store.write_bytes(rel, dv.to_bytes())
    return table_pb2.DeletionFile(
        file_type=BITMAP if dv.bitmap else ARROW_ARRAY,
        read_version=read_version,
        id=file_id,
        num_deleted_rows=len(dv),
    )
