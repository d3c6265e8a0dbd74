"""Table names through a Lance Namespace configured in Spark conf (issue 30
item 9): ``LanceTable.forName``, ``lance_ops.sql`` names, CREATE TABLE without
LOCATION, SHOW TABLES, DROP TABLE [PURGE], ALTER TABLE ... RENAME TO -- with
a directory catalog (pylance's ``DirectoryNamespace`` on the same root is the
oracle, both ways) and a REST catalog (pylance's REST adapter serving a
directory on 127.0.0.1)."""
import os

import lance
import lance_namespace as ln
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace, RestAdapter

import lance_ops
from lance_ops import LanceTable
from lance_ops.errors import (
    InvalidArgumentError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)

KEYS = ("impl", "root", "uri")


def configure(spark, **props):
    for k, v in props.items():
        spark.conf.set(f"spark.sql.catalog.lance.{k}", v)


def unconfigure(spark):
    for k in KEYS:
        spark.conf.unset(f"spark.sql.catalog.lance.{k}")


@pytest.fixture
def warehouse(spark, tmp_path):
    root = str(tmp_path / "warehouse")
    os.makedirs(root)
    configure(spark, impl="dir", root=root)
    yield root
    unconfigure(spark)


def sql(spark, text):
    return lance_ops.sql(spark, text)


def listed(root, ns):
    return DirectoryNamespace(root=root).list_tables(ln.ListTablesRequest(id=ns)).tables


def located(root, ident):
    return DirectoryNamespace(root=root).describe_table(ln.DescribeTableRequest(id=ident)).location


def test_created_by_name_here_opened_by_pylance(spark, warehouse):
    sql(spark, "CREATE NAMESPACE db")
    sql(spark, "CREATE TABLE db.events (id BIGINT, v DOUBLE) USING lance")
    sql(spark, "INSERT INTO db.events VALUES (1, 0.5), (2, 1.5), (3, 2.5)")
    out = sql(spark, "CREATE TABLE lance.db.big USING lance AS SELECT * FROM db.events WHERE id > 1").head()
    assert out.num_inserted_rows == 2
    sql(spark, "CREATE TABLE top USING lance AS SELECT 1 AS a")  # the root namespace: {root}/top.lance
    assert listed(warehouse, ["db"]) == ["big", "events"] and listed(warehouse, []) == ["top"]
    assert lance.dataset(located(warehouse, ["db", "events"])).to_table().sort_by("id").to_pylist() == [
        {"id": 1, "v": 0.5}, {"id": 2, "v": 1.5}, {"id": 3, "v": 2.5}]
    assert lance.dataset(located(warehouse, ["db", "big"])).count_rows() == 2
    assert os.path.isdir(os.path.join(warehouse, "top.lance"))
    t = LanceTable.forName(spark, "db.events")
    assert t.count() == 3 and LanceTable.forName(spark, "lance.db.big").count() == 2
    assert LanceTable.forName(spark, "top").toDF().collect()[0].a == 1
    shown = sql(spark, "SHOW TABLES IN db").collect()
    assert [(r.namespace, r.tableName, r.isTemporary) for r in shown] == [("db", "big", False), ("db", "events", False)]
    assert [r.namespace for r in sql(spark, "SHOW NAMESPACES").collect()] == ["db"]
    # every statement takes the name
    sql(spark, "UPDATE db.events SET v = v * 2 WHERE id = 3")
    assert sql(spark, "SELECT v FROM db.events WHERE id = 3").head().v == 5.0
    assert sql(spark, "DESCRIBE HISTORY db.events").count() == t.refresh().version


def test_created_by_pylance_used_by_name_here(spark, warehouse):
    py = DirectoryNamespace(root=warehouse)
    py.create_namespace(ln.CreateNamespaceRequest(id=["sales"]))
    data = pa.table({"id": [1, 2, 3, 4], "amount": [10, 20, 30, 40]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_table(data)
    py.create_table(ln.CreateTableRequest(id=["sales", "orders"]), sink.getvalue().to_pybytes())
    assert [r.tableName for r in sql(spark, "SHOW TABLES FROM sales").collect()] == ["orders"]
    sql(spark, "DELETE FROM sales.orders WHERE amount > 25")
    assert lance.dataset(located(warehouse, ["sales", "orders"])).to_table()["id"].to_pylist() == [1, 2]
    t = LanceTable.forName(spark, "sales.orders")
    t.update("id = 1", {"amount": "amount + 1"})
    assert sorted(lance.dataset(located(warehouse, ["sales", "orders"])).to_table()["amount"].to_pylist()) == [11, 20]


def test_drop_purge_rename(spark, warehouse):
    sql(spark, "CREATE NAMESPACE IF NOT EXISTS db")
    sql(spark, "CREATE NAMESPACE IF NOT EXISTS db")
    for name in ("kept", "purged", "renamed"):
        sql(spark, f"CREATE TABLE db.{name} USING lance AS SELECT 1 AS a")
    kept, purged = located(warehouse, ["db", "kept"]), located(warehouse, ["db", "purged"])
    sql(spark, "DROP TABLE db.kept")  # deregistered, the data stays
    sql(spark, "DROP TABLE db.purged PURGE")  # and its files go
    assert lance.dataset(kept).count_rows() == 1 and not os.path.exists(purged.replace("file://", ""))
    before = located(warehouse, ["db", "renamed"])
    sql(spark, "ALTER TABLE db.renamed RENAME TO db.renamed_v1")
    assert listed(warehouse, ["db"]) == ["renamed_v1"] and located(warehouse, ["db", "renamed_v1"]) == before
    sql(spark, "ALTER TABLE db.renamed_v1 RENAME TO renamed_v2")  # a one-part new name keeps the namespace
    assert listed(warehouse, ["db"]) == ["renamed_v2"]
    with pytest.raises(TableNotFoundError):
        LanceTable.forName(spark, "db.renamed")
    sql(spark, "DROP TABLE IF EXISTS db.renamed")  # (nothing there: Spark's own no-op)
    sql(spark, "DROP TABLE db.renamed_v2")
    sql(spark, "DROP NAMESPACE db")
    assert sql(spark, "SHOW NAMESPACES").count() == 0


def test_errors_leave_nothing(spark, warehouse):
    before = sorted(os.listdir(warehouse))
    with pytest.raises(TableNotFoundError, match="nope"):
        sql(spark, "CREATE TABLE nope.t USING lance AS SELECT 1 AS a")
    outside = os.path.join(os.path.dirname(warehouse), "outside.lance")
    sql(spark, "CREATE NAMESPACE db")
    with pytest.raises(InvalidArgumentError, match="root"):
        sql(spark, f"CREATE TABLE db.ext USING lance LOCATION '{outside}' AS SELECT 1 AS a")
    assert not os.path.exists(outside)
    assert sorted(os.listdir(warehouse)) == sorted(before + ["__manifest"])
    sql(spark, "CREATE TABLE db.t USING lance AS SELECT 1 AS a")
    with pytest.raises(TableExistsError):
        sql(spark, "CREATE TABLE db.t USING lance AS SELECT 2 AS a")
    sql(spark, "CREATE TABLE IF NOT EXISTS db.t USING lance AS SELECT 2 AS a")
    assert LanceTable.forName(spark, "db.t").toDF().collect()[0].a == 1
    sql(spark, "CREATE OR REPLACE TABLE db.t USING lance AS SELECT 3 AS a")
    assert LanceTable.forName(spark, "db.t").toDF().collect()[0].a == 3
    with pytest.raises(TableNotFoundError):
        LanceTable.forName(spark, "db.missing")
    # a table at a location inside the root is registered as it is
    inside = os.path.join(warehouse, "made-elsewhere.lance")
    LanceTable.create(spark, inside, spark.createDataFrame([(7,)], "a int"))
    sql(spark, f"CREATE TABLE db.registered USING lance LOCATION '{inside}'")
    assert LanceTable.forName(spark, "db.registered").toDF().collect()[0].a == 7


def test_without_a_catalog_names_are_not_found(spark):
    with pytest.raises(TableNotFoundError, match="no Lance Namespace"):
        LanceTable.forName(spark, "db.events")


def test_rest_catalog(spark, tmp_path):
    root = str(tmp_path / "served")
    os.makedirs(root)
    with RestAdapter("dir", {"root": root}, host="127.0.0.1", port=0) as adapter:
        configure(spark, impl="rest", uri=f"http://127.0.0.1:{adapter.port}")
        try:
            sql(spark, "CREATE NAMESPACE db")
            sql(spark, "CREATE TABLE db.t USING lance AS SELECT id, id * 2 AS v FROM range(5)")
            assert listed(root, ["db"]) == ["t"]
            assert lance.dataset(located(root, ["db", "t"])).count_rows() == 5
            t = LanceTable.forName(spark, "db.t")
            t.delete("id < 2")
            assert [r.tableName for r in sql(spark, "SHOW TABLES IN db").collect()] == ["t"]
            assert sql(spark, "SELECT count(*) AS n FROM db.t").head().n == 3
            with pytest.raises(UnsupportedFeatureError, match="rename"):  # pylance's server has no rename
                sql(spark, "ALTER TABLE db.t RENAME TO db.u")
            with pytest.raises(TableExistsError):
                sql(spark, "CREATE TABLE db.t USING lance AS SELECT 1 AS a")
            sql(spark, "DROP TABLE db.t")
            assert listed(root, ["db"]) == []
        finally:
            unconfigure(spark)
