"""The whole-fragment read compaction uses for tiny fragments
(``scan_whole_fragment``: one codec call per fragment; ``scan_whole_fragments``:
a run of them as one table) against the general fragment scan and pylance:
same rows, metadata columns and deletions; and
the layouts it must leave to the general reader (a renamed column, a second
data file, nested columns) are left to it."""
import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format.datafile import WholeFileLayout
from lance_ops.format.scan import FragmentScan, scan_fragment, scan_whole_fragment, scan_whole_fragments
from lance_ops.storage import ObjectStore
from lance_ops.txn.log import open_snapshot

META = ["_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"]


def _both(path, stable: bool, include_deleted: bool = False):
    """(whole-fragment batches or None, general batches) per fragment."""
    store = ObjectStore(path)
    snap = open_snapshot(store)
    layout = WholeFileLayout.of(snap.schema, snap.data_format_version)
    meta = META if stable else META[1:2]
    out = []
    for frag in snap.fragments:
        scan = FragmentScan(frag, snap.schema.names, meta, stable_row_ids=stable, include_deleted=include_deleted)
        whole = None if layout is None else scan_whole_fragment(store, layout, scan)
        out.append((whole, list(scan_fragment(store, snap.schema, scan))))
    return out


def _rows(batches):
    return pa.Table.from_batches(batches).to_pylist() if batches else []


@pytest.mark.parametrize("stable", [True, False], ids=["stable-row-ids", "addresses"])
@pytest.mark.parametrize("include_deleted", [False, True], ids=["live", "with-deleted"])
def test_equals_the_general_scan_and_pylance(tmp_path, stable, include_deleted):
    p = str(tmp_path / "t.lance")
    ids = np.arange(200)
    data = pa.table({"id": ids, "v": ids * 2.5, "s": pa.array([f"s{i}" if i % 9 else None for i in ids]),
                     "b": pa.array([i % 3 == 0 for i in ids]), "d": pa.array(ids.astype("datetime64[D]"))})
    lance.write_dataset(data, p, max_rows_per_file=25, enable_stable_row_ids=stable)
    lance.write_dataset(data.slice(0, 7), p, mode="append")
    ds = lance.dataset(p)
    ds.delete("id % 7 = 3")
    lance.dataset(p).update({"v": "-v"}, where="id < 40")  # (moved rows: lineage and row id sequences)
    pairs = _both(p, stable, include_deleted)
    assert all(whole is not None for whole, _ in pairs)  # (every fragment took the whole-file read)
    for whole, general in pairs:
        assert _rows(whole) == _rows(general)
        assert all(b.schema == general[0].schema for b in whole)
    if not include_deleted:
        got = sorted((r for whole, _ in pairs for r in _rows(whole)), key=lambda r: (r["id"], r["_rowaddr"]))
        meta = ["_row_created_at_version", "_row_last_updated_at_version"] if stable else []
        expected = lance.dataset(p).to_table(columns=data.column_names + meta, with_row_id=stable,
                                             with_row_address=True)
        assert got == sorted(expected.to_pylist(), key=lambda r: (r["id"], r["_rowaddr"]))
        # the run read as one table: the same rows in the same order, one schema
        store = ObjectStore(p)
        snap = open_snapshot(store)
        layout = WholeFileLayout.of(snap.schema, snap.data_format_version)
        meta = META if stable else META[1:2]
        run = scan_whole_fragments(store, layout, snap.fragments, meta, stable)
        assert run.to_pylist() == [r for _, general in pairs for r in _rows(general)]
        assert run.schema == pairs[0][1][0].schema
        assert scan_whole_fragments(store, layout, snap.fragments[2:3], meta, stable).to_pylist() == _rows(pairs[2][1])


def test_layouts_left_to_the_general_reader(tmp_path):
    p = str(tmp_path / "t.lance")
    ids = np.arange(50)
    lance.write_dataset(pa.table({"id": ids, "x": ids * 2}), p, max_rows_per_file=25, enable_stable_row_ids=True)
    lance.dataset(p).alter_columns({"path": "x", "name": "y"})  # the files still call it x
    pairs = _both(p, True)
    assert [whole for whole, _ in pairs] == [None, None]
    store = ObjectStore(p)
    snap = open_snapshot(store)
    layout = WholeFileLayout.of(snap.schema, snap.data_format_version)
    assert scan_whole_fragments(store, layout, snap.fragments, META, True) is None  # (one by one, then)
    assert [r["y"] for _, g in pairs for r in _rows(g)] == list(range(0, 100, 2))
    lance.write_dataset(pa.table({"id": ids, "y": ids}), p, mode="append", max_rows_per_file=50)
    lance.dataset(p).add_columns({"z": "id + 1"})  # a second data file in every fragment
    assert [whole for whole, _ in _both(p, True)] == [None, None, None]

    q = str(tmp_path / "nested.lance")
    lance.write_dataset(pa.table({"id": ids, "st": pa.array([{"a": int(i)} for i in ids])}), q)
    snap = open_snapshot(ObjectStore(q))
    assert WholeFileLayout.of(snap.schema, snap.data_format_version) is None


def test_compaction_gathers_small_batches_in_order(monkeypatch):
    import lance_ops.spark.rewrite as rewrite

    monkeypatch.setattr(rewrite, "WRITE_BATCH_ROWS", 10)
    sizes = [3, 4, 2, 12, 1, 1, 9, 5]
    batches, start = [], 0
    for n in sizes:
        batches.append(pa.record_batch({"i": pa.array(range(start, start + n))}))
        start += n
    out = list(rewrite._gathered(iter(batches)))
    assert [b.num_rows for b in out] == [9, 12, 11, 5]  # runs under 10 rows gathered; the 12-row batch as is
    assert [v for b in out for v in b.column("i").to_pylist()] == list(range(start))
