"""Delta Lake's table-name usage -- ``CREATE TABLE ... USING DELTA`` without
a location, ``DeltaTable.forName``, ``SHOW TABLES``, ``ALTER TABLE ...
RENAME TO``, ``DROP TABLE`` -- run on Lance tables named through a Lance
Namespace configured in Spark conf. Renames: ``DeltaTable`` ->
``LanceTable``, ``USING DELTA`` -> ``USING lance``, ``spark.sql`` ->
``lance_ops.sql`` (Spark 4.3 cannot hand a catalog table to a Python data
source); the catalog is configured as lance-spark's (``spark.sql.catalog.lance.impl
= dir``, ``.root``) instead of a Hive metastore."""
from __future__ import annotations

import os

import pytest

import lance_ops
from lance_ops import LanceTable
from lance_ops.errors import TableNotFoundError


@pytest.fixture
def catalog(spark, tmp_path):
    root = str(tmp_path / "warehouse")
    os.makedirs(root)
    spark.conf.set("spark.sql.catalog.lance.impl", "dir")
    spark.conf.set("spark.sql.catalog.lance.root", root)
    yield root
    spark.conf.unset("spark.sql.catalog.lance.impl")
    spark.conf.unset("spark.sql.catalog.lance.root")


def test_create_by_name_and_forName(spark, catalog):
    sql = lambda text: lance_ops.sql(spark, text)  # noqa: E731
    sql("CREATE SCHEMA IF NOT EXISTS default")
    sql("CREATE TABLE IF NOT EXISTS default.people10m (id INT, firstName STRING, lastName STRING) USING lance")
    sql("INSERT INTO default.people10m VALUES (1, 'Ada', 'Lovelace'), (2, 'Alan', 'Turing')")
    deltaTable = LanceTable.forName(spark, "default.people10m")
    assert sorted(r.firstName for r in deltaTable.toDF().collect()) == ["Ada", "Alan"]
    deltaTable.delete("id = 2")
    assert LanceTable.forName(spark, "default.people10m").toDF().count() == 1
    assert [r.tableName for r in sql("SHOW TABLES IN default").collect()] == ["people10m"]


def test_rename_and_drop(spark, catalog):
    sql = lambda text: lance_ops.sql(spark, text)  # noqa: E731
    sql("CREATE SCHEMA db")
    sql("CREATE TABLE db.events USING lance AS SELECT id FROM range(3)")
    sql("ALTER TABLE db.events RENAME TO db.events_archive")
    assert LanceTable.forName(spark, "db.events_archive").toDF().count() == 3
    with pytest.raises(TableNotFoundError):
        LanceTable.forName(spark, "db.events")
    sql("DROP TABLE db.events_archive")
    assert sql("SHOW TABLES IN db").count() == 0
