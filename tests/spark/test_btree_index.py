"""createIndex(col, "BTREE"): pylance 14's page_data.lance / page_lookup.lance,
used by pylance and by our data skipping, kept by executeIndexUpdate."""
from __future__ import annotations

import shutil

import lance
import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from lance_ops.errors import InvalidArgumentError
from lance_ops.format.btree_build import btree_tables, pairs
from lance_ops.spark.datasource import read_skip_report

from .test_skipping import N, _data, _ids, _predicates

COLUMNS = ["id", "f", "s", "ts", "k"]


def _table(seed=17) -> pa.Table:
    data = _data(seed)
    # few distinct values: ties that span pages
    return data.append_column("k", pa.array(np.arange(N) // 3000 % 5, pa.int32(), mask=np.arange(N) % 1000 == 999))


def _files(path: str) -> dict:
    """Each index's files as comparable values: the lookup file whole; the
    data file's values in order and its (value, id) pairs as a set (pylance's
    sort is unstable: the order of ids among equal values is arbitrary)."""
    from lance_ops.txn.table import Table

    versions = {i.name: i.index_version for i in Table(path).snapshot.indices}
    out = {}
    for i in lance.dataset(path).list_indices():
        d = f"{path}/_indices/{i['uuid']}"
        data = lf.LanceFileReader(f"{d}/page_data.lance")
        look = lf.LanceFileReader(f"{d}/page_lookup.lance")
        dt, lt = data.read_all().to_table(), look.read_all().to_table()
        values = [repr(v) for v in dt.column("values").to_pylist()]  # (-0.0 / 0.0 / nan as text)
        lookup = {c: [repr(v) for v in lt.column(c).to_pylist()] for c in lt.column_names}
        out[i["name"]] = (i["type"], versions[i["name"]], i["fragment_ids"], values, sorted(zip(values, dt.column("ids").to_pylist())),
                          lookup, data.metadata().schema, look.metadata().schema,
                          look.metadata().schema.metadata, (data.metadata().major_version, data.metadata().minor_version))
    return out


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable-row-ids"])
def test_btrees_built_as_pylance_and_used(spark, tmp_path, stable):
    """Our BTREE files equal pylance's for the same rows (live rows only;
    nulls first, -0.0 before +0.0, NaN last; row addresses also on a
    stable-row-id table; 4096-row pages with first/last value and null
    count); pylance plans with ours and agrees; our reads and deletes skip
    by them; executeIndexUpdate covers appended fragments as pylance's
    optimize_indices does."""
    ours, ref = str(tmp_path / "o.lance"), str(tmp_path / "r.lance")
    lance.write_dataset(_table(), ours, max_rows_per_file=8000, enable_stable_row_ids=stable)
    lance.dataset(ours).delete("id % 11 = 3 OR id BETWEEN 100 AND 5000")
    shutil.copytree(ours, ref)
    t = LanceTable(spark, ours)
    plain = t.version
    info = t.createIndex(COLUMNS, "BTREE")
    assert info.operation == "CreateIndex" and info.metrics["numIndexedFragments"] == 3
    for c in COLUMNS:
        lance.dataset(ref).create_scalar_index(c, "BTREE")
    assert _files(ours) == _files(ref)
    assert [i["type"] for i in t.listIndices()] == ["BTREE"] * len(COLUMNS)

    ds = lance.dataset(ours)
    trace = str(tmp_path / "skip.json")
    reader = spark.read.format("lance").option("skipReport", trace)
    for flt, frags in [("id >= 21000", 1), ("id = 20000", 1), ("id IN (5, 17000)", 2), ("s = 'k00060'", 1),
                       ("s IS NULL", 2), ("f < -1", 0), ("k = 4", 1), ("k = 2", 3), ("k = 9", 0)]:
        got = _ids(reader.load(ours).where(flt))
        assert read_skip_report(trace)["numFragmentsScanned"] == frags, flt
        assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan(), flt
        assert got == sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist()), flt
    unindexed = LanceTable(spark, ours, version=plain)
    preds = _predicates(31, 12)
    from pyspark.sql import functions as F

    flags = unindexed.toDF().select("id", *[F.expr(p).alias(f"p{i}") for i, p in enumerate(preds)]).collect()
    for i, p in enumerate(preds):
        assert _ids(t.toDF().where(p)) == sorted(r["id"] for r in flags if r[f"p{i}"]), p

    # appended rows: executeIndexUpdate rebuilds each BTREE over every live
    # fragment; pylance's optimize_indices merges the new rows in: same files
    more = _table(5).slice(0, 300)
    for p in (ours, ref):
        lance.write_dataset(more, p, mode="append")
    info = LanceTable(spark, ours).optimize().executeIndexUpdate()
    assert info.metrics["numUpdatedIndices"] == len(COLUMNS)
    lance.dataset(ref).optimize.optimize_indices()
    assert _files(ours) == _files(ref)
    t = LanceTable(spark, ours)
    info = t.delete("id BETWEEN 20000 AND 20010")
    assert (info.metrics["numFragmentsScanned"], info.metrics["numDeletedRows"]) == (1, 10)
    lance.dataset(ref).delete("id BETWEEN 20000 AND 20010")
    assert _ids(t.toDF()) == sorted(lance.dataset(ref).to_table(columns=["id"]).column("id").to_pylist())


def test_btree_pages_and_order():
    """The page layout on its own: pages of batch_size sorted rows, a page's
    min/max its first/last value (null min when it starts with nulls), ties
    by id, empty input -> empty files."""
    values = pa.array([3.0, None, -0.0, float("nan"), 0.0, 3.0, None, -1.5], pa.float64())
    ids = np.array([7, 6, 5, 4, 3, 2, 1, 0], dtype=np.uint64)
    data, lookup = btree_tables([pairs(values.slice(0, 5), ids[:5], pa.float64()),
                                 pairs(values.slice(5), ids[5:], pa.float64())], pa.float64(), batch_size=3)
    assert [repr(v) for v in data.column("values").to_pylist()] == [
        "None", "None", "-1.5", "-0.0", "0.0", "3.0", "3.0", "nan"]
    assert data.column("ids").to_pylist() == [1, 6, 0, 5, 3, 2, 7, 4]
    assert [repr(v) for v in lookup.column("min").to_pylist()] == ["None", "-0.0", "3.0"]
    assert [repr(v) for v in lookup.column("max").to_pylist()] == ["-1.5", "3.0", "nan"]
    assert lookup.column("null_count").to_pylist() == [2, 0, 0]
    assert lookup.column("page_idx").to_pylist() == [0, 1, 2]
    assert lookup.schema.metadata == {b"batch_size": b"3", b"range_partitioned": b"false"}
    empty_data, empty_lookup = btree_tables([], pa.string())
    assert empty_data.num_rows == empty_lookup.num_rows == 0


def test_btree_rejects_unindexable_columns(spark, tmp_path):
    path = str(tmp_path / "l.lance")
    lance.write_dataset(pa.table({"id": [1, 2], "v": pa.array([[1], [2]], pa.list_(pa.int64()))}), path)
    t = LanceTable(spark, path)
    with pytest.raises(InvalidArgumentError, match="a BTREE cannot index column 'v'"):
        t.createIndex("v", "BTREE")
    assert LanceTable(spark, path).version == t.version
