"""Manifest files: byte layout, naming schemes, corruption and feature flags."""
import os
import shutil

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import CorruptTableError, UnsupportedFeatureError
from lance_ops.format.features import check_readable, check_writable
from lance_ops.format.manifest import decode_manifest_file, encode_manifest_file
from lance_ops.format.naming import ManifestNaming, detect_naming, new_data_file_name, parse_manifest_name
from lance_ops.storage import ObjectStore
from lance_ops.txn.log import TableLog, open_snapshot
from tests.helpers import manifest_files


def test_names():
    assert ManifestNaming.V2.file_name(1) == "18446744073709551614.manifest"
    assert ManifestNaming.V1.file_name(12) == "12.manifest"
    assert parse_manifest_name("18446744073709551614.manifest") == (ManifestNaming.V2, 1)
    assert parse_manifest_name("3.manifest") == (ManifestNaming.V1, 3)
    for junk in (".tmp-abc", "latest_version_hint.json", "_latest.manifest", "1.manifest-1234", "d5.manifest"):
        assert parse_manifest_name(junk) is None
    with pytest.raises(CorruptTableError, match="naming schemes"):
        detect_naming(["1.manifest", "18446744073709551614.manifest"])
    name = new_data_file_name()
    assert len(name) == 56 and name.endswith(".lance") and set(name[:24]) <= {"0", "1"}


def test_roundtrip_pylance_manifest_bytes(tmp_path):
    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": [1, 2, 3]}), p)
    path = manifest_files(p)[1]
    data = open(path, "rb").read()
    mf = decode_manifest_file(data, path)
    assert mf.manifest.version == 1 and mf.transaction().HasField("overwrite")
    again = encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices)
    assert again == data  # byte-identical layout


@pytest.mark.parametrize("v2", [True, False])
def test_both_naming_schemes_discovered(tmp_path, v2):
    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": [1]}), p, enable_v2_manifest_paths=v2)
    lance.write_dataset(pa.table({"a": [2]}), p, mode="append")
    log = TableLog(ObjectStore(p))
    assert log.latest_version() == 2
    assert log.latest().naming == (ManifestNaming.V2 if v2 else ManifestNaming.V1)
    assert open_snapshot(ObjectStore(p), 1).num_rows() == 1


def test_mixed_naming_is_an_error(tmp_path):
    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": [1]}), p, enable_v2_manifest_paths=False)
    lance.write_dataset(pa.table({"a": [2]}), p, mode="append", enable_v2_manifest_paths=False)
    src = os.path.join(p, "_versions", "2.manifest")
    shutil.copy(src, os.path.join(p, "_versions", ManifestNaming.V2.file_name(3)))
    with pytest.raises(CorruptTableError, match="naming schemes"):
        open_snapshot(ObjectStore(p))


def _garble_manifest(b: bytes) -> bytes:
    pos = int.from_bytes(b[-16:-8], "little")
    body = bytearray(b)
    for i in range(pos + 4, min(pos + 40, len(b) - 16)):
        body[i] = 0xFF
    return bytes(body)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:-4] + b"XXXX",  # bad magic
        lambda b: b[:-16] + (10**9).to_bytes(8, "little") + b[-8:],  # position out of range
        lambda b: _garble_manifest(b),  # undecodable protobuf
        lambda b: b[:10],  # truncated
    ],
)
def test_corrupt_manifest(tmp_path, mutate):
    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": list(range(100)), "s": ["x" * 10] * 100}), p)
    path = manifest_files(p)[1]
    data = open(path, "rb").read()
    open(path, "wb").write(mutate(data))
    with pytest.raises(CorruptTableError) as e:
        open_snapshot(ObjectStore(p))
    assert path in str(e.value)


def test_feature_flags(tmp_path):
    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": [1]}), p)
    snap = open_snapshot(ObjectStore(p))
    m = snap.manifest
    check_writable(m)
    m.writer_feature_flags |= 1 << 20
    check_readable(m)
    with pytest.raises(UnsupportedFeatureError, match="can read it but not write it"):
        check_writable(m)
    m.reader_feature_flags |= 64
    with pytest.raises(UnsupportedFeatureError, match="data overlay"):
        check_readable(m)


def test_damaged_names_and_empty_transaction_name_the_manifest(tmp_path):
    """Damage only the manifest can hold (fuzzer finds): a data file path with
    a NUL byte, and a transaction section decoding to nothing (neither an
    operation nor a uuid: pylance refuses it as "Unsupported operation"). Both
    are CorruptTableErrors naming the manifest, not later errors about a data
    file."""
    from lance_ops.txn.history import history_rows

    p = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": [1, 2, 3]}), p)
    path = manifest_files(p)[1]
    mf = decode_manifest_file(open(path, "rb").read(), path)
    m = mf.manifest
    m.fragments[0].files[0].path = m.fragments[0].files[0].path[:4] + "\x00" + m.fragments[0].files[0].path[5:]
    with pytest.raises(CorruptTableError, match="NUL byte") as e:
        decode_manifest_file(encode_manifest_file(m, mf.transaction_bytes, mf.indices), path)
    assert os.path.basename(path) in str(e.value)

    mf = decode_manifest_file(open(path, "rb").read(), path)
    open(path, "wb").write(encode_manifest_file(mf.manifest, b"", mf.indices))
    with pytest.raises(CorruptTableError, match="neither an operation nor a uuid") as e:
        history_rows(ObjectStore(p))
    assert os.path.basename(path) in str(e.value)
    with pytest.raises(ValueError, match="Unsupported operation"):
        lance.dataset(p).get_transactions(1)
