"""Without Spark: every zoo table (tests/zoo.py) scanned fragment by fragment
is pylance's ``to_table()`` -- the same Arrow schema (types, nullability,
field metadata, column order) and the same values and nulls."""
from __future__ import annotations

import pyarrow as pa
import pytest

from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.txn.table import Table
from tests.zoo import pylance_dataset


@pytest.mark.parametrize("name", ["v22", "v21", "v20", "legacy", "clone", "branch"])
def test_scan_equals_pylance(zoo, name):
    z = zoo[name]
    snap = Table(z.path, branch=z.branch).snapshot
    batches = [b for f in snap.fragments
               for b in scan_fragment(snap.store, snap.schema, FragmentScan(f, snap.schema.names))]
    ours = pa.Table.from_batches(batches, schema=snap.schema.to_arrow()).sort_by("id")
    ref = pylance_dataset(z).to_table().sort_by("id")
    assert ours.schema.equals(ref.schema, check_metadata=True)
    assert ours.to_pylist() == ref.to_pylist()
