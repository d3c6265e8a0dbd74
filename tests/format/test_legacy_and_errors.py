"""Legacy (0.x) data files decoded without pylance's codec, equal to
pylance's reading of every type pylance 14 writes in them (its own quirks
included: no nulls for fixed-width values, empty strings read as null); and
the errors for files lance_ops cannot read: UnsupportedFeatureError for a
valid file it cannot decode (naming the file, its version and what to do),
CorruptTableError for a damaged one."""
from __future__ import annotations

import datetime
import decimal
import glob
import struct

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops.errors import CorruptTableError, UnsupportedFeatureError
from lance_ops.format.legacy import LegacyFileReader
from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.format.schema import field_from_arrow
from lance_ops.storage import ObjectStore
from lance_ops.txn.log import open_snapshot
from lance_ops.txn.table import Table

LEGACY_COLUMNS = {
    "i64": pa.array([1, 2, None, 4], pa.int64()),
    "i8": pa.array([1, -2, 3, 4], pa.int8()),
    "u32": pa.array([1, 2, 3, 4], pa.uint32()),
    "f32": pa.array([1.5, None, 3, 4], pa.float32()),
    "f16": pa.array([1.5, 2, 3, 4], pa.float16()),
    "b": pa.array([True, False, None, True]),
    "s": pa.array(["a", "", None, "dddd"]),
    "ls": pa.array(["a", "bb", None, "d"], pa.large_string()),
    "bin": pa.array([b"x", b"yy", None, b""]),
    "lst": pa.array([[1, 2], [], None, [3]], pa.list_(pa.int32())),
    "llst": pa.array([["a"], [], None, ["b", "c"]], pa.large_list(pa.string())),
    "st": pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": None}, None, {"x": 4, "y": "d"}]),
    "fsl": pa.array([[1.0, 2.0], [3.0, 4.0], None, [5.0, 6.0]], pa.list_(pa.float32(), 2)),
    "fsb": pa.array([b"ab", b"cd", None, b"ef"], pa.binary(2)),
    "dict": pa.array(["x", "y", "x", None]).dictionary_encode(),
    "ts": pa.array([datetime.datetime(2024, 1, i) for i in (1, 2, 3, 4)], pa.timestamp("us", "UTC")),
    "d32": pa.array([datetime.date(2024, 1, 1)] * 4, pa.date32()),
    "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("3"), decimal.Decimal("-4.5")], pa.decimal128(10, 2)),
    "lstst": pa.array([[{"a": 1}], [], None, [{"a": 2}, {"a": 3}]], pa.list_(pa.struct([("a", pa.int64())]))),
    "t64": pa.array([1, 2, 3, 4], pa.time64("us")),
    "dur": pa.array([1, 2, 3, 4], pa.duration("ms")),
}


def scan(path, **kw) -> pa.Table:
    store = ObjectStore(path)
    snap = open_snapshot(store)
    batches = [b for f in snap.fragments for b in scan_fragment(store, snap.schema, FragmentScan(f, snap.schema.names, **kw))]
    return pa.Table.from_batches(batches, schema=snap.schema.to_arrow())


@pytest.fixture(scope="module")
def legacy_table(tmp_path_factory):
    """Every type above, 3000 rows (the legacy writer cuts batches of 1024), deletions."""
    p = str(tmp_path_factory.mktemp("legacy") / "t.lance")
    n = 3000
    cols = {k: pa.concat_arrays([a] * (n // 4)) for k, a in LEGACY_COLUMNS.items() if k != "dict"}
    cols["dict"] = pa.array((["x", "y", "z", None] * (n // 4))).dictionary_encode()
    cols["id"] = pa.array(np.arange(n - n % 4), pa.int64())
    lance.write_dataset(pa.table(cols), p, data_storage_version="legacy", max_rows_per_file=1600)
    lance.dataset(p).delete("id % 7 = 3")
    return p


def test_every_legacy_type_reads_as_pylance(legacy_table):
    ours = scan(legacy_table, batch_rows=700)
    ref = lance.dataset(legacy_table).to_table()
    assert ours.schema == ref.schema
    assert ours.to_pylist() == ref.to_pylist()


def test_legacy_takes_and_ranges(legacy_table):
    store = ObjectStore(legacy_table)
    snap = open_snapshot(store)
    frag = snap.fragments[0]
    offsets = np.array([0, 1, 1023, 1024, 1025, 1500, frag.physical_rows - 1])
    got = [r for b in scan_fragment(store, snap.schema, FragmentScan(frag, ["id", "s", "lst"], offsets=offsets,
                                                                     include_deleted=True)) for r in b.to_pylist()]
    assert [r["id"] for r in got] == offsets.tolist()
    ranged = [r["id"] for b in scan_fragment(store, snap.schema, FragmentScan(frag, ["id"], start=1000, end=1100,
                                                                              include_deleted=True)) for r in b.to_pylist()]
    assert ranged == list(range(1000, 1100))


def test_a_valid_file_we_cannot_decode_is_unsupported(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"a": list(range(100))}), p)
    (f,) = glob.glob(f"{p}/data/*.lance")
    data = bytearray(open(f, "rb").read())
    struct.pack_into("<HH", data, len(data) - 8, 2, 9)  # a file format version from the future
    open(f, "wb").write(bytes(data))
    with pytest.raises(UnsupportedFeatureError) as e:
        scan(p)
    msg = str(e.value)
    assert f.rsplit("/", 1)[-1] in msg and "2.9" in msg and "version" in msg and "upgrade" in msg


def test_a_damaged_file_is_corrupt(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"a": list(range(100))}), p)
    (f,) = glob.glob(f"{p}/data/*.lance")
    data = open(f, "rb").read()
    open(f, "wb").write(data[: len(data) // 2] + data[-16:])
    with pytest.raises(CorruptTableError) as e:
        scan(p)
    assert f.rsplit("/", 1)[-1] in str(e.value)


def test_a_damaged_legacy_file_is_corrupt(legacy_table, tmp_path):
    import shutil

    p = str(tmp_path / "t.lance")
    shutil.copytree(legacy_table, p)
    f = sorted(glob.glob(f"{p}/data/*.lance"))[0]
    data = open(f, "rb").read()
    open(f, "wb").write(data[:-4] + b"XXXX")
    with pytest.raises(CorruptTableError, match="magic"):
        scan(p)


def test_a_legacy_type_we_cannot_decode_is_unsupported(legacy_table):
    store = ObjectStore(legacy_table)
    snap = open_snapshot(store)
    df = snap.fragments[0].files[0]
    reader = LegacyFileReader(store, f"data/{df.path}", df, ["id"])
    odd = field_from_arrow(pa.field("m", pa.map_(pa.string(), pa.int64())))
    odd.id = 0
    with pytest.raises(UnsupportedFeatureError) as e:
        reader._read(odd, 0, 0, 4)
    assert df.path in str(e.value) and "legacy Lance file (format version 0.2)" in str(e.value)


def test_legacy_table_keeps_its_dictionary_values_across_commits(legacy_table, tmp_path):
    """Legacy dictionary values live in the manifest file: every manifest we
    write carries them (pylance reads them from the version it opens)."""
    import shutil

    p = str(tmp_path / "t.lance")
    shutil.copytree(legacy_table, p)
    before = lance.dataset(p).to_table().column("dict").to_pylist()
    t = Table(p)
    t.setProperties({"a": "b"})
    t.unsetProperties(["a"])
    t.restoreToVersion(1)
    ds = lance.dataset(p)
    assert ds.version == 5 and ds.validate() is None
    assert lance.dataset(p, version=4).to_table().column("dict").to_pylist() == before
    assert scan(p).column("dict").to_pylist() == ds.to_table().column("dict").to_pylist()
