"""Fragment scans without Spark: metadata columns, takes by offset, and row id /
version sequences stored in external files (which lance_ops reads although
pylance 14 writes -- and reads -- only inline ones)."""
import lance
import numpy as np
import pyarrow as pa

from lance_ops.format.manifest import encode_manifest_file
from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.storage import ObjectStore
from lance_ops.txn.log import open_snapshot
from tests.helpers import manifest_files

META = ["_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"]


def table(tmp_path):
    p = str(tmp_path / "t.lance")
    ids = np.arange(50)
    lance.write_dataset(pa.table({"id": ids, "x": ids * 2}), p, max_rows_per_file=25, enable_stable_row_ids=True)
    lance.dataset(p).delete("id % 7 = 0")
    lance.dataset(p).update({"x": "-x"}, where="id < 5")
    return p


def scan_all(store, snap, **kw):
    out = []
    for frag in snap.fragments:
        for b in scan_fragment(store, snap.schema, FragmentScan(frag, ["id", "x"], META, stable_row_ids=True, **kw)):
            out.extend(b.to_pylist())
    return sorted(out, key=lambda r: r["id"])


def test_scan_matches_pylance(tmp_path):
    p = table(tmp_path)
    store = ObjectStore(p)
    expected = lance.dataset(p).to_table(columns=["id", "x", *META[2:]], with_row_id=True, with_row_address=True)
    assert scan_all(store, open_snapshot(store)) == sorted(expected.to_pylist(), key=lambda r: r["id"])


def test_take_by_offsets(tmp_path):
    p = table(tmp_path)
    store = ObjectStore(p)
    snap = open_snapshot(store)
    frag = snap.fragments[0]
    rows = [r for b in scan_fragment(store, snap.schema, FragmentScan(frag, ["id"], ["_rowaddr"], offsets=np.array([1, 3, 7]), include_deleted=True)) for r in b.to_pylist()]
    assert rows == [{"id": 1, "_rowaddr": 1}, {"id": 3, "_rowaddr": 3}, {"id": 7, "_rowaddr": 7}]  # 7 is deleted, still taken


def test_external_sequences(tmp_path):
    p = table(tmp_path)
    store = ObjectStore(p)
    before = scan_all(store, open_snapshot(store))
    path = manifest_files(p)[max(manifest_files(p))]
    from lance_ops.format.manifest import decode_manifest_file

    mf = decode_manifest_file(open(path, "rb").read(), path)
    blob = bytearray(b"HEADER")
    for frag in mf.manifest.fragments:
        for inline, external in (
            ("inline_row_ids", "external_row_ids"),
            ("inline_created_at_versions", "external_created_at_versions"),
            ("inline_last_updated_at_versions", "external_last_updated_at_versions"),
        ):
            data = getattr(frag, inline)
            ref = getattr(frag, external)
            ref.path, ref.offset, ref.size = "_rowids/seqs.bin", len(blob), len(data)
            blob += data
            assert not frag.HasField(inline)
    store.write_bytes("_rowids/seqs.bin", bytes(blob))
    with open(path, "wb") as f:
        f.write(encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices))
    assert scan_all(store, open_snapshot(store)) == before
