"""us -> pylance: what we write, pylance reads -- with the same rows, version
numbers, _rowid and lineage values pylance produces for the same writes."""
import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from tests.helpers import arrow_rows, assert_same_rows

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


def data(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i}" if i % 5 else None for i in ids]),
            "score": pa.array(ids * 0.25),
            "st": pa.array([{"a": int(i), "b": f"b{i}"} for i in ids]),
            "tags": pa.array([[f"t{i}"] * (int(i) % 3) for i in ids], pa.list_(pa.string())),
            "vec": pa.array([[float(i), float(i) + 1] for i in ids], pa.list_(pa.float32())),
        }
    )


def sdf(spark, table: pa.Table, partitions: int = 3):
    # Spark keeps the row order of the local data across partitions.
    return spark.createDataFrame(table.to_pandas()).repartitionByRange(partitions, "id") if partitions else spark.createDataFrame(table.to_pandas())


def lance_view(path, version=None):
    ds = lance.dataset(path, version=version)
    return ds.to_table(columns=ds.schema.names + LINEAGE, with_row_id=True)


def same(ours, ref, version=None):
    a = arrow_rows(lance_view(ours, version), ("_rowid",))
    b = arrow_rows(lance_view(ref, version), ("_rowid",))
    assert a == b


def test_create_append_overwrite_time_travel_match_pylance(spark, tmp_path):
    ours, ref = str(tmp_path / "ours.lance"), str(tmp_path / "ref.lance")
    d1, d2, d3 = data(900), data(300, 900), data(40, 5000)

    t = LanceTable.create(spark, ours, sdf(spark, d1), maxRowsPerFragment=250)
    lance.write_dataset(d1, ref, max_rows_per_file=250, enable_stable_row_ids=True)
    assert t.version == 1 and t.lastCommit().operation == "Overwrite"
    assert t.lastCommit().metrics["numInsertedRows"] == 900
    same(ours, ref)

    info = t.append(sdf(spark, d2))
    lance.write_dataset(d2, ref, mode="append", enable_stable_row_ids=True)
    assert (info.version, info.readVersion, info.operation) == (2, 1, "Append")
    same(ours, ref)

    info = t.overwrite(sdf(spark, d3, partitions=1))
    lance.write_dataset(d3, ref, mode="overwrite", enable_stable_row_ids=True)
    assert info.version == 3 and t.version == 3
    same(ours, ref)  # row ids continue after an overwrite, as pylance's do

    ds = lance.dataset(ours)
    assert ds.version == 3 and [v["version"] for v in ds.versions()] == [1, 2, 3]
    for v in (1, 2, 3):
        same(ours, ref, v)
        # and our own reader agrees with pylance at every version
        assert_same_rows(
            LanceTable(spark, ours, version=v).toDF(withRowId=True, withLineage=True), lance_view(ours, v)
        )
    # The manifest says who wrote it; the row id high-water mark is pylance's.
    assert t.detail().first()["nextRowId"] == 1240
    assert lance.dataset(ref).to_table(with_row_id=True)["_rowid"].to_pylist()[-1] == 1239
    assert t.detail().first()["writerVersion"].startswith("lance_ops")


def test_pylance_can_extend_our_table(spark, tmp_path):
    """pylance appends, deletes, updates and compacts a table we created, and
    we read the result identically."""
    p = str(tmp_path / "t.lance")
    LanceTable.create(spark, p, sdf(spark, data(500)), maxRowsPerFragment=100)
    ds = lance.dataset(p)
    ds.insert(data(50, 500))
    ds = lance.dataset(p)
    ds.delete("id % 9 = 0")
    ds.update({"score": "score * -1"}, where="id < 30")
    ds.optimize.compact_files(target_rows_per_fragment=300)
    t = LanceTable(spark, p)
    assert t.version == lance.dataset(p).version
    assert_same_rows(t.toDF(withRowId=True, withLineage=True), lance_view(p))


def test_datasource_write_paths(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    sdf(spark, data(100)).write.format("lance").mode("append").save(p)  # creates
    sdf(spark, data(20, 100)).write.format("lance").mode("append").save(p)
    assert lance.dataset(p).count_rows() == 120 and lance.dataset(p).version == 2
    sdf(spark, data(7, 1000)).write.format("lance").mode("overwrite").save(p)
    ds = lance.dataset(p)
    assert ds.count_rows() == 7 and ds.version == 3
    assert sorted(ds.to_table()["id"].to_pylist()) == list(range(1000, 1007))
    back = spark.read.format("lance").option("version", 2).load(p)
    assert back.count() == 120


def test_append_keeps_stored_types(spark, tmp_path):
    """A pylance table with uint32 / large_string columns: our appends write the
    stored types (range-checked), not Spark's."""
    p = str(tmp_path / "t.lance")
    t0 = pa.table({"id": pa.array([1, 2], pa.uint32()), "s": pa.array(["a", "b"], pa.large_string())})
    lance.write_dataset(t0, p)
    t = LanceTable(spark, p)
    t.append(spark.createDataFrame([(3, "c")], "id long, s string"))
    ds = lance.dataset(p)
    assert ds.schema.field("id").type == pa.uint32() and ds.schema.field("s").type == pa.large_string()
    assert sorted(ds.to_table()["id"].to_pylist()) == [1, 2, 3]
    from lance_ops.errors import SchemaMismatchError

    with pytest.raises(SchemaMismatchError, match="uint32"):
        t.append(spark.createDataFrame([(-1, "neg")], "id long, s string"))
    assert lance.dataset(p).version == 2
