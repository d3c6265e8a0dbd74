"""Bad input gets a documented error and leaves the table unchanged."""
import os

import lance
import pytest

from lance_ops import LanceTable
from lance_ops.errors import (
    CorruptTableError,
    ReadOnlyVersionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from lance_ops.format.manifest import encode_manifest_file
from tests.helpers import manifest_files, read_manifest


@pytest.fixture
def table(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    LanceTable.create(spark, p, spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string"))
    return p


def snapshot_of_dir(p):
    return sorted((root, tuple(sorted(files))) for root, _, files in os.walk(p))


def test_not_a_table(spark, tmp_path):
    p = str(tmp_path / "nothing")
    assert not LanceTable.isLanceTable(spark, p)
    with pytest.raises(TableNotFoundError, match="no Lance table"):
        LanceTable(spark, p)
    os.makedirs(p)
    with pytest.raises(TableNotFoundError):
        LanceTable.forPath(spark, p)


def test_missing_version_and_tag(spark, table):
    assert LanceTable.isLanceTable(spark, table)
    with pytest.raises(TableNotFoundError, match="version 9"):
        LanceTable(spark, table, version=9)
    with pytest.raises(TableNotFoundError, match="tag 'nope'"):
        LanceTable(spark, table, version="nope")


def test_create_on_existing(spark, table):
    before = snapshot_of_dir(table)
    with pytest.raises(TableExistsError):
        LanceTable.create(spark, table, spark.createDataFrame([(3, "c")], "id long, s string"))
    assert snapshot_of_dir(table) == before


@pytest.mark.parametrize(
    "ddl,row,match",
    [
        ("id long", (3,), "missing column"),
        ("id long, s string, extra int", (3, "c", 1), "unknown column"),
        ("id string, s string", ("3", "c"), "type mismatch"),
    ],
)
def test_schema_mismatched_append(spark, table, ddl, row, match):
    t = LanceTable(spark, table)
    with pytest.raises(SchemaMismatchError, match=match):
        t.append(spark.createDataFrame([row], ddl))
    assert lance.dataset(table).version == 1 and t.version == 1
    assert lance.dataset(table).count_rows() == 2


def test_append_with_other_column_order(spark, table):
    t = LanceTable(spark, table)
    t.append(spark.createDataFrame([("c", 3)], "s string, id long"))
    assert sorted(lance.dataset(table).to_table().to_pylist(), key=lambda r: r["id"])[-1] == {"id": 3, "s": "c"}


def test_write_through_time_travel_handle(spark, table):
    t = LanceTable(spark, table, version=1)
    with pytest.raises(ReadOnlyVersionError):
        t.append(spark.createDataFrame([(3, "c")], "id long, s string"))
    with pytest.raises(ReadOnlyVersionError):
        t.overwrite(spark.createDataFrame([(3, "c")], "id long, s string"))
    assert lance.dataset(table).version == 1


def _rewrite_latest(path, mutate):
    mf = read_manifest(path)
    mutate(mf.manifest)
    data = encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices)
    with open(manifest_files(path)[mf.manifest.version], "wb") as f:
        f.write(data)


def test_unknown_reader_flag(spark, table):
    def bump(m):
        m.reader_feature_flags |= 1 << 13

    _rewrite_latest(table, bump)
    with pytest.raises(UnsupportedFeatureError, match="reader feature"):
        LanceTable(spark, table)


def test_unknown_writer_flag_blocks_writes_only(spark, table):
    def bump(m):
        m.writer_feature_flags |= 1 << 13

    _rewrite_latest(table, bump)
    t = LanceTable(spark, table)
    assert t.toDF().count() == 2
    before = snapshot_of_dir(table)
    with pytest.raises(UnsupportedFeatureError, match="writer feature"):
        t.append(spark.createDataFrame([(3, "c")], "id long, s string"))
    # no new version (data files of the failed write may be left as orphans)
    assert [d for d in snapshot_of_dir(table) if d[0].endswith("_versions")] == [
        d for d in before if d[0].endswith("_versions")
    ]


def test_corrupt_manifest(spark, table):
    path = manifest_files(table)[1]
    with open(path, "r+b") as f:
        f.seek(-4, 2)
        f.write(b"NOPE")
    with pytest.raises(CorruptTableError, match=os.path.basename(path)):
        LanceTable(spark, table)


def test_bad_sql_in_read_is_sparks_error(spark, table):
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException):
        LanceTable(spark, table).toDF().where("no_such_column > 1").collect()
