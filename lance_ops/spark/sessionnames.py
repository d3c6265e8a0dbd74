"""Names a Spark session gives Lance tables: temporary views over the
``lance`` data source, remembered in the session's conf.

``CREATE TABLE name USING lance LOCATION '<uri>'`` (the SQL front end), the
table builder's ``.tableName(...)`` and ``CREATE VIEW v AS SELECT * FROM
<lance table>`` register a name here; ``LanceTable.forName`` and the SQL front
end look names up here. Spark 4.3 keeps a catalog table whose provider is a
Python data source, but hands the data source neither its LOCATION nor its
OPTIONS at read time, so a catalog table cannot point at a Lance table: a name
is a temporary view (so ``spark.sql`` reads it too) created with the table's
schema given explicitly, which leaves the version open -- every query through
``spark.sql`` plans against the latest version (``lance_ops.sql`` re-creates
the view after changing the schema; after a schema change made elsewhere,
``REFRESH TABLE name``). The name -> URI map is kept in the session's conf
(``spark.lance_ops.sql.table.<name>``), which Spark Connect sessions have too.
"""
from __future__ import annotations

REGISTRY_PREFIX = "spark.lance_ops.sql.table."


def registered_uri(spark, name: str) -> str | None:
    """The URI a session name was registered for (None if not, or if its view
    was dropped since)."""
    uri = spark.conf.get(REGISTRY_PREFIX + name.lower(), None)
    if not uri:
        return None
    try:
        if spark.catalog.tableExists(name):
            return uri
    except Exception:
        pass
    spark.conf.unset(REGISTRY_PREFIX + name.lower())
    return None


def register_name(spark, name: str, uri: str, storage_options: dict | None = None) -> None:
    """(Re-)create the temp view ``name`` over the Lance table at ``uri``
    (latest version at every query; the table's current columns) and record
    the name."""
    from ..txn.table import Table
    from .credentials import publish, reader_options
    from .datasource import register
    from .session import storage_options as session_storage_options
    from .types import spark_schema

    register(spark)
    table = Table(uri, session_storage_options(spark, storage_options))
    # credentials reach the executors as a handle, never as logged text
    publish(spark, table.store)
    schema = spark_schema(table.snapshot.schema)
    reader = spark.read.format("lance").schema(schema).options(**reader_options(spark, table.store))
    reader.load(table.uri).createOrReplaceTempView(name)
    spark.conf.set(REGISTRY_PREFIX + name.lower(), table.uri)


def unregister_name(spark, name: str) -> None:
    spark.conf.unset(REGISTRY_PREFIX + name.lower())


def refresh_registered(spark, uri: str) -> None:
    """Re-create the views of every name registered for ``uri`` (after a
    schema change)."""
    try:
        items = dict(spark.conf.getAll)  # a property in pyspark 4
    except Exception:
        items = {r[0]: r[1] for r in spark.sql("SET").collect()}
    for key, value in items.items():
        if key.startswith(REGISTRY_PREFIX) and value == uri:
            name = key[len(REGISTRY_PREFIX):]
            if registered_uri(spark, name):
                register_name(spark, name, uri)
