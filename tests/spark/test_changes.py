"""changes(): the change feed equals what the spec's lineage predicates give on
pylance's own lineage columns, over appends, updates, deletes and merges by
both engines; version filters prune fragments in the data source."""
import lance
import pytest
from pyspark.sql.datasource import GreaterThan

from lance_ops import LanceTable
from lance_ops.errors import InvalidArgumentError, TableNotFoundError, UnsupportedFeatureError
from lance_ops.format.proto import table_pb2
from lance_ops.format.scan import ROW_ID, ROW_UPDATED
from lance_ops.spark.datasource import LanceScanReaderWithPushdown, ReadOptions
from lance_ops.spark.frames import table_spark_schema
from lance_ops.storage.objectstore import ObjectStore
from lance_ops.txn.log import open_snapshot
from tests.helpers import spark_rows

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]
DDL = "id long, x long"


def rows(spark, ids):
    return spark.createDataFrame([(i, i) for i in ids], DDL)


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """Versions: 1 create (ids 0-29, 3 fragments), 2 append (30-39), 3 update
    id < 5, 4 delete ids 3 and 31 (pylance), 5 merge (update 20-22, insert
    500-501), 6 update id = 25 (pylance)."""
    p = str(tmp_path_factory.mktemp("changes") / "t.lance")
    t = LanceTable.create(spark, p, rows(spark, range(30)).coalesce(1), maxRowsPerFragment=10)
    t.append(rows(spark, range(30, 40)))
    t.update("id < 5", {"x": "x + 100"})
    lance.dataset(p).delete("id = 3 or id = 31")
    src = spark.createDataFrame([(i, -1) for i in (20, 21, 22, 500, 501)], DDL)
    t.refresh().merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    lance.dataset(p).update({"x": "x * 10"}, where="id = 25")
    assert lance.dataset(p).version == 6
    return p


def expected(path, start, end):
    """The spec's predicates (rowids-lineage.md §6) on pylance's lineage."""
    ds = lance.dataset(path, version=end)
    out = []
    for r in ds.to_table(columns=ds.schema.names + LINEAGE, with_row_id=True).to_pylist():
        created, updated = r["_row_created_at_version"], r["_row_last_updated_at_version"]
        if start < created <= end:
            out.append({**r, "_change_type": "insert"})
        elif created <= start < updated <= end:
            out.append({**r, "_change_type": "update"})
    return sorted(out, key=lambda r: r["_rowid"])


@pytest.mark.parametrize("start,end", [(0, 6), (1, 6), (2, 3), (3, 5), (4, 6), (1, 2), (5, 5), (2, None)])
def test_changes_match_lineage_predicates(spark, table, start, end):
    t = LanceTable(spark, table)
    df = t.changes(start, end)
    assert df.columns == ["id", "x", ROW_ID, *LINEAGE, "_change_type"]
    assert spark_rows(df, ("_rowid",)) == expected(table, start, 6 if end is None else end)


def test_change_types_and_deleted_rows(spark, table):
    t = LanceTable(spark, table)
    by_id = {r.id: r._change_type for r in t.changes(2, 3).collect()}
    assert by_id == {i: "update" for i in range(5)}
    # Deleted rows are gone from the later version, so not reported (caveat).
    later = {r.id: r._change_type for r in t.changes(2, 6).collect()}
    assert 3 not in later and 31 not in later
    assert later[500] == later[501] == "insert" and later[20] == later[25] == "update"
    # A time-travel handle ends at its own version by default.
    assert {r.id for r in LanceTable(spark, table, version=3).changes(2).collect()} == set(range(5))


def test_argument_errors(spark, table):
    t = LanceTable(spark, table)
    with pytest.raises(InvalidArgumentError, match="after endVersion"):
        t.changes(4, 2)
    with pytest.raises(InvalidArgumentError, match="startVersion"):
        t.changes(-1)
    with pytest.raises(InvalidArgumentError, match="endVersion"):
        t.changes(0, "3")
    with pytest.raises(TableNotFoundError, match="version 7"):
        t.changes(1, 7)


def test_needs_stable_row_ids(spark, tmp_path):
    p = str(tmp_path / "plain.lance")
    t = LanceTable.create(spark, p, rows(spark, range(3)), stableRowIds=False)
    with pytest.raises(UnsupportedFeatureError, match="stable row ids"):
        t.changes(0)


def test_version_filter_prunes_fragments(table):
    """A pushed ``_row_last_updated_at_version > 5`` plans only fragments whose
    lineage bounds allow such rows."""
    snap = open_snapshot(ObjectStore(table))
    schema = table_spark_schema(snap, (ROW_ID, ROW_UPDATED))
    reader = LanceScanReaderWithPushdown(ReadOptions(path=table), snap.version, schema)
    assert list(reader.pushFilters([GreaterThan((ROW_UPDATED,), 5)])) == [GreaterThan((ROW_UPDATED,), 5)]
    planned = {
        table_pb2.DataFragment.FromString(b).id for part in reader.partitions() for b, _, _ in part.pieces
    }
    ds = lance.dataset(table)
    changed = ds.to_table(columns=[], with_row_address=True, filter="_row_last_updated_at_version > 5")
    assert planned == {a >> 32 for a in changed["_rowaddr"].to_pylist()}
    assert len(planned) < len(snap.fragments)
