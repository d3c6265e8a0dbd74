"""Schema: Arrow <-> Lance fields, ids and DataFile.fields exactly as pylance."""
import datetime
import decimal

import lance
import pyarrow as pa
import pytest

from lance_ops.format.schema import Schema, data_file_field_ids
from tests.helpers import read_manifest


def all_types_table() -> pa.Table:
    cols = {
        "i8": pa.array([1, 2], pa.int8()),
        "u8": pa.array([1, 2], pa.uint8()),
        "u16": pa.array([1, 2], pa.uint16()),
        "u32": pa.array([1, 2], pa.uint32()),
        "u64": pa.array([1, 2], pa.uint64()),
        "h": pa.array([1, 2], pa.float16()),
        "f": pa.array([1, 2], pa.float32()),
        "d": pa.array([1, 2], pa.float64()),
        "b": pa.array([True, None]),
        "s": pa.array(["a", None]),
        "ls": pa.array(["a", "b"], pa.large_string()),
        "bin": pa.array([b"a", b"b"]),
        "lbin": pa.array([b"a", b"b"], pa.large_binary()),
        "d32": pa.array([datetime.date(2020, 1, 1)] * 2),
        "d64": pa.array([datetime.datetime(2020, 1, 1)] * 2, pa.date64()),
        "ts_s": pa.array([1, 2], pa.timestamp("s")),
        "ts_ms": pa.array([1, 2], pa.timestamp("ms", "UTC")),
        "ts_us": pa.array([1, 2], pa.timestamp("us", "America/New_York")),
        "ts_ns": pa.array([1, 2], pa.timestamp("ns")),
        "dur": pa.array([1, 2], pa.duration("us")),
        "t32": pa.array([1, 2], pa.time32("ms")),
        "t64": pa.array([1, 2], pa.time64("ns")),
        "dec": pa.array([decimal.Decimal("1.23")] * 2, pa.decimal128(10, 2)),
        "dec256": pa.array([decimal.Decimal("1.23")] * 2, pa.decimal256(40, 2)),
        "fsb": pa.array([b"ab", b"cd"], pa.binary(2)),
        "fsl": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2)),
        "l": pa.array([[1], [2]], pa.list_(pa.int32())),
        "ll": pa.array([[1], [2]], pa.large_list(pa.int32())),
        "lst": pa.array([[{"x": 1}], [{"x": 2}]], pa.list_(pa.struct([("x", pa.int64())]))),
        "lls": pa.array([[{"x": 1}], [{"x": 2}]], pa.large_list(pa.struct([("x", pa.int64())]))),
        "dict": pa.array(["a", "b"]).dictionary_encode(),
        "nul": pa.nulls(2),
        "fslst": pa.array([[{"m": 1}], [{"m": 2}]], pa.list_(pa.struct([("m", pa.int64())]), 1)),
        "mp": pa.array([[("a", 1)], [("b", 2)]], pa.map_(pa.string(), pa.int64())),
        "st": pa.array([{"a": 1, "b": {"c": "x"}}] * 2),
    }
    t = pa.table(cols)
    schema = t.schema.set(0, t.schema.field(0).with_metadata({"fm": "x"}).with_nullable(False))
    return t.cast(schema).replace_schema_metadata({"k": "v"})


def test_schema_matches_pylance_manifest(tmp_path):
    """Our Arrow->Lance conversion yields the very field list pylance writes:
    names, ids (pre-order), parent ids, logical types, nullability, encoding,
    metadata -- and converts back to the same Arrow schema."""
    t = all_types_table()
    lance.write_dataset(t, str(tmp_path / "ds"))
    mf = read_manifest(str(tmp_path / "ds"))
    ours = Schema.from_arrow(t.schema)
    theirs = list(mf.manifest.fields)
    assert [(f.id, f.parent_id, f.name, f.logical_type, f.nullable, f.encoding, dict(f.metadata)) for f in ours.to_proto()] == [
        (f.id, f.parent_id, f.name, f.logical_type, f.nullable, f.encoding, dict(f.metadata)) for f in theirs
    ]
    back = Schema.from_proto(theirs, dict(mf.manifest.schema_metadata)).to_arrow()
    assert back.equals(lance.dataset(str(tmp_path / "ds")).schema, check_metadata=True)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_data_file_fields_match_pylance(tmp_path, version):
    t = all_types_table() if version != "2.1" else all_types_table().drop_columns(["fslst", "mp"])
    if version == "2.0":
        t = t.drop_columns(["mp"])
    p = str(tmp_path / "ds")
    lance.write_dataset(t, p, data_storage_version=version)
    mf = read_manifest(p)
    df = mf.manifest.fragments[0].files[0]
    schema = Schema.from_proto(mf.manifest.fields)
    major, minor = (int(x) for x in version.split("."))
    assert data_file_field_ids(schema.fields, (major, minor)) == list(df.fields)
    assert list(df.column_indices) == list(range(len(df.fields)))


def test_ids_continue_after_max_and_tree_roundtrip():
    s = Schema.from_arrow(pa.schema([("a", pa.int64()), ("st", pa.struct([("x", pa.int32()), ("y", pa.string())]))]))
    assert [f.id for f in s.walk()] == [0, 1, 2, 3]
    assert s.parent_ids() == {0: -1, 1: -1, 2: 1, 3: 1}
    added = Schema.from_arrow(pa.schema([("z", pa.list_(pa.int64()))]))
    for f in added.walk():
        f.id = -1
    s.fields.extend(added.fields)
    assert s.assign_ids(s.max_id() + 1) == 6
    assert [f.id for f in s.walk()] == [0, 1, 2, 3, 4, 5]
    again = Schema.from_proto(s.to_proto())
    assert again.same_structure(s)
