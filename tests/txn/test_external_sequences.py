"""Row id / version sequences stored in external files (``external_row_ids``,
``external_created_at_versions``, ``external_last_updated_at_versions`` --
other Lance writers' form): commits on such a table work and keep the
sequences valid, by inlining them (the form pylance 14 writes and reads)."""
from __future__ import annotations

import lance
import pyarrow as pa

from lance_ops.format.manifest import decode_manifest_file, encode_manifest_file
from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.storage import ObjectStore
from lance_ops.txn.log import open_snapshot
from lance_ops.txn.operations import Append, Delete
from lance_ops.txn.pipeline import StagedCommit
from lance_ops.txn.table import Table
from tests.helpers import manifest_files

META = ["_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"]
SEQS = (
    ("inline_row_ids", "external_row_ids"),
    ("inline_created_at_versions", "external_created_at_versions"),
    ("inline_last_updated_at_versions", "external_last_updated_at_versions"),
)


def externalize(p: str) -> None:
    """Move every fragment's sequences of the latest manifest into one file."""
    files = manifest_files(p)
    path = files[max(files)]
    mf = decode_manifest_file(open(path, "rb").read(), path)
    blob = bytearray(b"HEADER")
    for frag in mf.manifest.fragments:
        for inline, external in SEQS:
            data = getattr(frag, inline)
            ref = getattr(frag, external)
            ref.path, ref.offset, ref.size = "_rowids/seqs.bin", len(blob), len(data)
            blob += data
    ObjectStore(p).write_bytes("_rowids/seqs.bin", bytes(blob))
    with open(path, "wb") as f:
        f.write(encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices))


def scan_all(p: str) -> list[dict]:
    store = ObjectStore(p)
    snap = open_snapshot(store)
    out = [r for f in snap.fragments
           for b in scan_fragment(store, snap.schema, FragmentScan(f, ["id"], META, stable_row_ids=True))
           for r in b.to_pylist()]
    return sorted(out, key=lambda r: r["id"])


def test_commits_inline_external_sequences(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": list(range(30))}), p, max_rows_per_file=10, enable_stable_row_ids=True)
    lance.dataset(p).update({"id": "id + 100"}, where="id < 3")  # moved rows: non-trivial sequences
    before = scan_all(p)
    externalize(p)
    assert scan_all(p) == before
    t = Table(p)
    t.setProperties({"k": "v"})  # a commit that touches no fragment
    m = open_snapshot(ObjectStore(p)).manifest
    for frag in m.fragments:
        for inline, external in SEQS:
            assert frag.HasField(inline) and not frag.HasField(external)
    assert scan_all(p) == before

    # fragments of other writers' transactions and new rows get ids after them
    new = lance.fragment.write_fragments(pa.table({"id": [500, 501]}), p)
    t.execute(lambda snap: StagedCommit(Append([_pb(f) for f in new]), {}, {}))
    t.execute(lambda snap: StagedCommit(Delete([], [0], "fragment 0"), {}, {}))
    after = scan_all(p)
    assert [r["_rowid"] for r in after if r["id"] >= 500] == [30, 31]
    assert [r for r in after if r["id"] < 500] == [r for r in before if r["_rowaddr"] >> 32 != 0]
    ds = lance.dataset(p)  # pylance reads the inlined sequences
    ref = ds.to_table(columns=["id", *META[2:]], with_row_id=True, with_row_address=True).to_pylist()
    assert sorted(ref, key=lambda r: r["id"]) == after and ds.validate() is None


def _pb(fragment_metadata):
    """A pylance FragmentMetadata as the DataFragment message."""
    from lance_ops.format.proto import table_pb2

    f = table_pb2.DataFragment(id=0, physical_rows=fragment_metadata.physical_rows)
    for df in fragment_metadata.files:
        f.files.add(path=df.path, fields=list(df.fields), column_indices=list(df.column_indices),
                    file_major_version=df.file_major_version, file_minor_version=df.file_minor_version,
                    file_size_bytes=df.file_size_bytes or 0)
    return f
