"""Data evolution: addColumns / rewriteColumns / dropColumns / renameColumn,
differential against pylance (add_columns, drop_columns, alter_columns,
merge_insert rewrite_columns): rows, schema with field ids, lineage."""
import os

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_ops import LanceTable
from lance_ops.errors import SchemaMismatchError
from tests.helpers import arrow_rows, pylance_pair, read_manifest

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


@pytest.fixture
def pair(tmp_path):
    """Identical pylance-written tables: 4 fragments, stable row ids, deletions."""
    ids = np.arange(400)
    t = pa.table({
        "id": pa.array(ids, pa.int64()),
        "x": pa.array(ids * 3, pa.int64()),
        "y": pa.array(ids * 0.5),
        "name": pa.array([None if i % 9 == 0 else f"n{i}" for i in ids]),
    })
    return pylance_pair(tmp_path, t, 100, "id % 7 = 3 or id between 150 and 160")


def view(path):
    ds = lance.dataset(path)
    return ds.to_table(columns=ds.schema.names + LINEAGE, with_row_id=True, with_row_address=True)


def fields(path):
    m = read_manifest(path).manifest
    return [(f.id, f.parent_id, f.name, f.logical_type) for f in m.fields]


def assert_same(ours, ref, check_nullability=True):
    assert lance.dataset(ours).version == lance.dataset(ref).version
    assert fields(ours) == fields(ref)
    assert arrow_rows(view(ours), ("id",)) == arrow_rows(view(ref), ("id",))


def data_files(path):
    return sorted(os.listdir(os.path.join(path, "data")))


def test_add_columns_expression_matches_pylance(spark, pair):
    ours, ref = pair
    # (expressions whose meaning Spark SQL and DataFusion share: concat of a
    # null differs between the two dialects)
    info = LanceTable(spark, ours).addColumns({"z": "x * 2", "w": "y + id"})
    lance.dataset(ref).add_columns({"z": "x * 2", "w": "y + id"})
    assert_same(ours, ref)
    assert info.operation == "Merge" and info.metrics["numAddedFiles"] == 4
    # one new file per fragment holding only the new columns (ids 4, 5)
    for frag in read_manifest(ours).manifest.fragments:
        assert [list(df.fields) for df in frag.files] == [[0, 1, 2, 3], [4, 5]]
    # no existing data file was touched
    assert all(df.path in data_files(ours) for df in read_manifest(ours, 2).manifest.fragments[0].files)


def test_add_columns_udf_matches_pylance(spark, pair):
    ours, ref = pair

    def double_x(batch):
        return pa.record_batch({"x2": pc.multiply(batch.column("x"), 2), "ylabel": pc.cast(batch.column("y"), pa.string())})

    LanceTable(spark, ours).addColumns(double_x, readColumns=["x", "y"], outputSchema="x2 long, ylabel string")

    @lance.batch_udf(output_schema=pa.schema([("x2", pa.int64()), ("ylabel", pa.string())]))
    def ref_udf(batch):
        return double_x(batch)

    lance.dataset(ref).add_columns(ref_udf, read_columns=["x", "y"])
    assert_same(ours, ref)


def test_add_columns_udf_reads_metadata_columns_and_returns_nested(spark, pair):
    """The function runs in executor tasks that read the fragments themselves:
    it sees the read columns (metadata columns included) as Spark would type
    them, and may return nested types; deleted positions get nulls."""
    ours, _ = pair
    seen = {}

    def fn(batch):
        seen.setdefault("schema", batch.schema)
        x = batch.column("x").to_pylist()
        return pa.record_batch({
            "rid_plus": pc.add(batch.column("_rowid"), 1),
            "tags": pa.array([[f"x{v}", "t"] for v in x], pa.list_(pa.string())),
        })

    info = LanceTable(spark, ours).addColumns(fn, readColumns=["_rowid", "x"], outputSchema="rid_plus long, tags array<string>")
    assert info.metrics["numAddedFiles"] == 4
    t = lance.dataset(ours).to_table(columns=["id", "x", "rid_plus", "tags"], with_row_id=True)
    assert t.num_rows == lance.dataset(ours).count_rows()
    for r in t.to_pylist():
        assert r["rid_plus"] == r["_rowid"] + 1 and r["tags"] == [f"x{r['x']}", "t"]
    # deleted rows (still in the new files, hidden by the deletion vectors) hold nulls
    live = lance.dataset(ours).to_table(columns=["rid_plus"], with_row_address=True).to_pylist()
    by_addr = {r["_rowaddr"]: r["rid_plus"] for r in live}
    from lance.file import LanceFileReader

    for frag in read_manifest(ours).manifest.fragments:
        new_file = frag.files[-1]
        values = LanceFileReader(os.path.join(ours, "data", new_file.path)).read_all().to_table().column(0).to_pylist()
        assert len(values) == frag.physical_rows
        for offset, v in enumerate(values):
            assert v == by_addr.get((frag.id << 32) | offset)  # None where the row is deleted
        assert any(v is None for v in values) or frag.id > 1


def test_add_columns_from_dataframe_on_key_and_rowid(spark, pair):
    ours, _ = pair
    t = LanceTable(spark, ours)
    feats = spark.range(0, 300).selectExpr("id", "cast(id * 10 as int) as f1", "array(id, id) as f2", "named_struct('a', id, 'b', 'q') as f3")
    t.addColumns(feats, on="id")
    rows = {r["id"]: r for r in lance.dataset(ours).to_table().to_pylist()}
    assert rows[12]["f1"] == 120 and rows[12]["f2"] == [12, 12] and rows[12]["f3"] == {"a": 12, "b": "q"}
    assert rows[350]["f1"] is None and rows[350]["f3"] is None  # unmatched rows get nulls
    by_rowid = lance.dataset(ours).to_table(with_row_id=True, columns=["id"]).to_pylist()
    score = spark.createDataFrame([(r["_rowid"], float(r["id"]) / 2) for r in by_rowid], "_rowid long, half double")
    t.addColumns(score, on="_rowid")
    rows = lance.dataset(ours).to_table(columns=["id", "half"]).to_pylist()
    assert all(r["half"] == r["id"] / 2 for r in rows)
    dup = spark.createDataFrame([(1, 1), (1, 2)], "id long, dupcol int")
    from lance_ops.errors import DuplicateMatchError

    with pytest.raises(DuplicateMatchError):
        t.addColumns(dup, on="id")
    assert "dupcol" not in lance.dataset(ours).schema.names


def test_rows_stay_aligned_with_deletions(spark, pair):
    """Values land on the right physical rows although deleted offsets sit in
    between (the deletion vectors stay valid for the new files)."""
    ours, _ = pair
    LanceTable(spark, ours).addColumns({"check": "id * 1000 + x"})
    t = lance.dataset(ours).to_table(columns=["id", "x", "check"])
    assert t.num_rows == lance.dataset(ours).count_rows() and t.num_rows < 400
    assert all(r["check"] == r["id"] * 1000 + r["x"] for r in t.to_pylist())
    # deleted rows stay deleted, new file has every physical row
    for frag in read_manifest(ours).manifest.fragments:
        assert frag.physical_rows == 100


def test_nested_and_null_outputs(spark, pair):
    ours, _ = pair
    LanceTable(spark, ours).addColumns({
        "st": "named_struct('a', x, 'b', name)",
        "arr": "array(y, y * 2)",
        "maybe": "case when id % 2 = 0 then id end",
    })
    rows = {r["id"]: r for r in lance.dataset(ours).to_table().to_pylist()}
    assert rows[12]["st"] == {"a": 36, "b": "n12"} and rows[12]["arr"] == [6.0, 12.0]
    assert rows[9]["st"] == {"a": 27, "b": None} and rows[11]["maybe"] is None and rows[12]["maybe"] == 12
    assert [f[2] for f in fields(ours)][4:] == ["st", "a", "b", "arr", "item", "maybe"]


def test_errors_before_any_data_is_written(spark, pair):
    from pyspark.errors import AnalysisException

    ours, _ = pair
    t = LanceTable(spark, ours)
    before = data_files(ours)
    with pytest.raises(SchemaMismatchError, match="already exists"):
        t.addColumns({"x": "1"})
    with pytest.raises(SchemaMismatchError, match="reserved"):
        t.addColumns({"_rowid": "1"})
    with pytest.raises(SchemaMismatchError, match="reserved"):
        t.addColumns({"_row_foo": "1"})
    with pytest.raises(AnalysisException):
        t.addColumns({"z": "nope + 1"})
    with pytest.raises(SchemaMismatchError):
        t.rewriteColumns({"nope": "1"})
    with pytest.raises(SchemaMismatchError, match="every column"):
        t.dropColumns(["id", "x", "y", "name"])
    with pytest.raises(SchemaMismatchError, match="exists"):
        t.renameColumn("x", "y")
    assert data_files(ours) == before and lance.dataset(ours).version == 2


def test_udf_failure_leaves_no_version(spark, pair):
    ours, _ = pair

    def boom(batch):
        raise ValueError("feature service unavailable")

    with pytest.raises(Exception, match="feature service unavailable"):
        LanceTable(spark, ours).addColumns(boom, readColumns=["x"], outputSchema="z long")
    assert lance.dataset(ours).version == 2 and "z" not in lance.dataset(ours).schema.names


def test_drop_and_rename_match_pylance(spark, pair):
    ours, ref = pair
    t = LanceTable(spark, ours)
    t.addColumns({"z": "x * 2"})
    lance.dataset(ref).add_columns({"z": "x * 2"})
    info = t.dropColumns(["y"])
    lance.dataset(ref).drop_columns(["y"])
    assert info.operation == "Project"
    assert_same(ours, ref)
    t.renameColumn("z", "zz")
    lance.dataset(ref).alter_columns({"path": "z", "name": "zz"})
    assert_same(ours, ref)
    # a dropped column whose file held nothing else disappears; the next id is reused
    t.dropColumns("zz")
    lance.dataset(ref).drop_columns(["zz"])
    assert_same(ours, ref)
    t.addColumns({"again": "id + 1"})
    lance.dataset(ref).add_columns({"again": "id + 1"})
    assert_same(ours, ref)


def test_rewrite_columns_matches_pylance_rewrite_columns_merge(spark, pair):
    ours, ref = pair
    info = LanceTable(spark, ours).rewriteColumns({"y": "y * 100"}, "id < 120")
    live = lance.dataset(ref).to_table(filter="id < 120", columns=["id", "y"])
    new = pa.table({"id": live["id"], "y": pc.multiply(live["y"], 100)})
    lance.dataset(ref).merge_insert("id").when_matched_update_all().write_mode("rewrite_columns").execute(new)
    assert_same(ours, ref)
    assert info.operation == "Update"
    m = read_manifest(ours)
    txn = m.transaction()
    assert txn.update.update_mode == 1 and list(txn.update.fields_modified) == [2]
    f0, f2 = m.manifest.fragments[0], m.manifest.fragments[2]
    assert list(f0.files[0].fields) == [0, 1, -2, 3] and list(f0.files[1].fields) == [2]
    assert len(f2.files) == 1  # no matched row there: untouched


def test_rewrite_whole_column_then_pylance_reads_and_extends(spark, pair):
    ours, _ = pair
    t = LanceTable(spark, ours)
    t.addColumns({"z": "x + 1"})
    t.rewriteColumns({"z": "z * -1", "name": "upper(name)"})
    ds = lance.dataset(ours)
    rows = ds.to_table().to_pylist()
    assert all(r["z"] == -(r["x"] + 1) for r in rows)
    assert all(r["name"] is None or r["name"] == r["name"].upper() for r in rows)
    # the z file ([4]) was fully replaced: its old file is gone from the fragments
    for frag in read_manifest(ours).manifest.fragments:
        assert all(any(x >= 0 for x in df.fields) for df in frag.files)
    # pylance keeps working on the evolved table
    ds.delete("id < 10")
    lance.dataset(ours).optimize.compact_files()
    back = LanceTable(spark, ours).toDF().orderBy("id").collect()
    assert back[0]["id"] >= 10 and all(r["z"] == -(r["x"] + 1) for r in back)
