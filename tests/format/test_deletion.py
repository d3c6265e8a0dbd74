"""Deletion vectors: read pylance's files of both kinds, write the kind
pylance would pick, and pylance reads ours."""
import os

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

from lance_ops.errors import CorruptTableError
from lance_ops.format.deletion import (
    BITMAP,
    DeletionVector,
    read_deletion_vector,
    write_deletion_vector,
)
from lance_ops.format.naming import DELETIONS_DIR
from lance_ops.storage import ObjectStore
from tests.helpers import read_manifest


@pytest.mark.parametrize("n_deleted,bitmap", [(10, False), (4999, False), (5000, True), (6000, True)])
def test_reads_pylance_deletions_and_agrees_on_kind(tmp_path, n_deleted, bitmap):
    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": np.arange(10000)}), p)
    ds = lance.dataset(p)
    ds.delete(f"a < {n_deleted}")
    frag = read_manifest(p).manifest.fragments[0]
    assert (frag.deletion_file.file_type == BITMAP) == bitmap
    dv = read_deletion_vector(ObjectStore(p), frag)
    assert sorted(dv.offsets) == list(range(n_deleted))
    assert dv.bitmap == bitmap
    assert DeletionVector.from_new_offsets(range(n_deleted)).bitmap == bitmap


def test_kind_transitions_match_pylance_rules():
    dv = DeletionVector.from_new_offsets(range(4999))
    assert not dv.bitmap
    assert not dv.extended([4999]).bitmap  # 5000 stays a set
    assert dv.extended([4999, 5000]).bitmap  # 5001 becomes a bitmap
    assert DeletionVector(BitMap([1]), True).extended([2]).bitmap  # bitmaps stay bitmaps
    assert DeletionVector.empty().union_for_rebase(DeletionVector.from_new_offsets([3])).bitmap


@pytest.mark.parametrize("offsets", [[1, 3, 5], list(range(0, 9000, 2))])
def test_pylance_reads_our_deletion_files(tmp_path, offsets):
    """A Delete committed by us with our deletion file is read by pylance."""
    from lance_ops.txn.commit import commit
    from lance_ops.txn.log import open_snapshot
    from lance_ops.txn.operations import Delete, Transaction

    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": np.arange(10000)}), p)
    store = ObjectStore(p)
    snap = open_snapshot(store)
    dv = DeletionVector.from_new_offsets(offsets)
    assert dv.bitmap == (len(offsets) >= 5000)
    frag = type(snap.fragments[0])()
    frag.CopyFrom(snap.fragments[0])
    frag.deletion_file.CopyFrom(write_deletion_vector(store, 0, snap.version, dv))
    commit(store, Transaction(snap.version, Delete([frag], [], "test")))
    ds = lance.dataset(p)
    assert ds.count_rows() == 10000 - len(offsets)
    got = set(ds.to_table()["a"].to_pylist())
    assert got == set(range(10000)) - set(offsets)
    assert ds.get_fragments()[0].metadata.deletion_file.num_deleted_rows == len(offsets)


def test_corrupt_deletion_file_names_the_file(tmp_path):
    store = ObjectStore(str(tmp_path))
    dv = DeletionVector.from_new_offsets([1])
    df = write_deletion_vector(store, 7, 1, dv)
    path = [f for f in os.listdir(tmp_path / DELETIONS_DIR)][0]
    with open(tmp_path / DELETIONS_DIR / path, "wb") as f:
        f.write(b"garbage")
    from lance_ops.format.proto import table_pb2

    frag = table_pb2.DataFragment(id=7, physical_rows=10, deletion_file=df)
    with pytest.raises(CorruptTableError, match=path):
        read_deletion_vector(store, frag)
