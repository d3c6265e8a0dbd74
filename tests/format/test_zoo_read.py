"""Without Spark: every zoo table (tests/zoo.py) scanned fragment by fragment
is pylance's ``to_table()`` -- the same Arrow schema (types, nullability,
field metadata, column order) and the same values and nulls."""
from __future__ import annotations

import pyarrow as pa
import pytest

from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.txn.table import Table
from tests.zoo import pylance_dataset


@pytest.mark.parametrize("name", ["v22", "v21", "v20", "legacy", "clone", "branch", "multibase"])
def test_scan_equals_pylance(zoo, name):
    z = zoo[name]
    snap = Table(z.path, branch=z.branch).snapshot
    batches = [b for f in snap.fragments
               for b in scan_fragment(snap.store, snap.schema, FragmentScan(f, snap.schema.names))]
    ours = pa.Table.from_batches(batches, schema=snap.schema.to_arrow()).sort_by("id")
    ref = pylance_dataset(z).to_table().sort_by("id")
    assert ours.schema.equals(ref.schema, check_metadata=True)
    assert ours.to_pylist() == ref.to_pylist()


def test_commits_on_a_multi_base_table_keep_its_bases(zoo, tmp_path):
    """Commits keep every file's base id; nothing is written under a base path."""
    import os

    from lance_ops.txn.operations import Delete
    from lance_ops.txn.pipeline import StagedCommit
    from tests.zoo import copy_table

    z = copy_table(zoo["multibase"], str(tmp_path))
    bases = [os.path.join(os.path.dirname(zoo["multibase"].path), d) for d in ("mb_bare", "mb_root")]
    before = {b: sorted(os.listdir(b)) for b in bases}
    t = Table(z.path)
    t.setProperties({"k": "v"})
    t.execute(lambda snap: StagedCommit(Delete([], [0], "fragment 0"), {}, {}))
    ds = pylance_dataset(z)
    assert ds.validate() is None and ds.config()["k"] == "v"
    assert ds.to_table().num_rows == zoo_rows(zoo["multibase"]) - len(
        [i for i in range(30) if i % 8 != 3])
    assert {b: sorted(os.listdir(b)) for b in bases} == before


def zoo_rows(z) -> int:
    return pylance_dataset(z).count_rows()
