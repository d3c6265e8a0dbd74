"""Delta's table builder: ``LanceTable.create(spark)`` (and
``createIfNotExists`` / ``replace`` / ``createOrReplace``) ``.location(...)``
/ ``.tableName(...)`` ``.addColumn(...)`` / ``.addColumns(schema)``
``.property(k, v)`` ``.comment(...)`` ``.execute()``.

It makes an *empty* table with a schema -- as a job creates its table before
its first batch: one Overwrite of no fragments (no Spark job), the properties
and the comment (table property ``comment``, Delta's ``description``) in the
same commit. Arguments are checked when each method is called (TypeError,
as Delta's). Names go through :mod:`lance_ops.catalog`. Lance tables have no
partitions and no generated columns: ``partitionedBy`` / ``clusterBy`` /
``generatedAlwaysAs`` raise UnsupportedFeatureError.
"""
from __future__ import annotations

import json

from pyspark.sql import types as T

from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from .shapes import COMMENT_KEY

#: builder mode -> the history's operation (Delta's word)
MODES = {
    "create": "CREATE TABLE", "createIfNotExists": "CREATE TABLE", "replace": "REPLACE TABLE",
    "createOrReplace": "CREATE OR REPLACE TABLE",
}


def _type_error(msg: str, *objs) -> ArgumentTypeError:
    return ArgumentTypeError(msg + "".join(f" Found {o!r} with type {type(o).__name__}." for o in objs))


class LanceTableBuilder:
    """Built by ``LanceTable.create(spark)`` & co.; ``execute()`` returns the
    ``LanceTable``: ``open_table(location, storage_options)`` opens it,
    ``register_session_name(spark, name, location, storage_options)`` names
    it for the session when no namespace is configured (both given by the
    facade, which this layer does not import), ``retries`` is the write's
    re-run budget."""

    def __init__(self, spark, mode: str, open_table, register_session_name, retries: int):
        if mode not in MODES:
            raise InvalidArgumentError(f"unknown builder mode {mode!r}")
        self._spark = spark
        self._mode = mode
        self._open_table = open_table
        self._register_session_name = register_session_name
        self._retries = retries
        self._name: str | None = None
        self._location: str | None = None
        self._comment: str | None = None
        self._fields: list[T.StructField] = []
        self._properties: dict[str, str] = {}
        self._storage_options: dict | None = None
        self._stable_row_ids = True

    def tableName(self, identifier: str) -> "LanceTableBuilder":
        if not isinstance(identifier, str):
            raise _type_error("Identifier must be str.", identifier)
        self._name = identifier
        return self

    def location(self, location: str) -> "LanceTableBuilder":
        if not isinstance(location, str):
            raise _type_error("Location must be str.", location)
        self._location = location
        return self

    def comment(self, comment: str) -> "LanceTableBuilder":
        if not isinstance(comment, str):
            raise _type_error("Table comment must be str.", comment)
        self._comment = comment
        return self

    def addColumn(self, colName: str, dataType, nullable: bool = True, generatedAlwaysAs: str | None = None,
                  comment: str | None = None) -> "LanceTableBuilder":
        """A column: ``dataType`` a Spark type or its SQL name ("INT",
        "array<string>", ...)."""
        if not isinstance(colName, str):
            raise _type_error("Column name must be str.", colName)
        if not isinstance(dataType, (str, T.DataType)):
            raise _type_error("Column data type must be str or DataType.", dataType)
        if not isinstance(nullable, bool):
            raise _type_error("Column nullable must be bool.", nullable)
        if generatedAlwaysAs is not None:
            if not isinstance(generatedAlwaysAs, str):
                raise _type_error("Column generation expression must be str.", generatedAlwaysAs)
            raise UnsupportedFeatureError(
                "generated columns (generatedAlwaysAs) are a Delta feature Lance tables do not have; compute the "
                "column with addColumns / backfill"
            )
        if comment is not None and not isinstance(comment, str):
            raise _type_error("Column comment must be str.", comment)
        if isinstance(dataType, str):
            # Spark's own parser (and its errors)
            dataType = self._spark.createDataFrame([], f"`{colName.replace('`', '``')}` {dataType}").schema[0].dataType
        self._fields.append(T.StructField(colName, dataType, nullable, {"comment": comment} if comment else {}))
        return self

    def addColumns(self, cols) -> "LanceTableBuilder":
        """Columns from a StructType or a list of StructFields."""
        if isinstance(cols, list):
            for c in cols:
                if not isinstance(c, T.StructField):
                    raise _type_error("Column in existing schema must be StructField.", c)
            cols = T.StructType(cols)
        if not isinstance(cols, T.StructType):
            raise _type_error("Schema must be StructType or a list of StructField.", cols)
        self._fields.extend(cols.fields)
        return self

    def partitionedBy(self, *cols) -> "LanceTableBuilder":
        raise UnsupportedFeatureError(
            "Lance tables are not partitioned (data skipping uses zone maps instead: createIndex(col, 'ZONEMAP'))"
        )

    def clusterBy(self, *cols) -> "LanceTableBuilder":
        raise UnsupportedFeatureError("Lance tables have no clustering columns (see optimize().executeZOrderBy)")

    def property(self, key: str, value: str) -> "LanceTableBuilder":
        if not isinstance(key, str) or not isinstance(value, str):
            raise _type_error("Key and value of property must be string.", key, value)
        self._properties[key] = value
        return self

    # ------------------------------------------------ lance_ops' extensions
    def storageOptions(self, options: dict) -> "LanceTableBuilder":
        """Object store options (as ``LanceTable(..., storage_options=)``)."""
        if not isinstance(options, dict):
            raise _type_error("storageOptions must be a dict.", options)
        self._storage_options = dict(options)
        return self

    def stableRowIds(self, enabled: bool = True) -> "LanceTableBuilder":
        """Whether a new table has stable row ids (default True, as
        ``LanceTable.create``)."""
        if not isinstance(enabled, bool):
            raise _type_error("stableRowIds must be bool.", enabled)
        self._stable_row_ids = enabled
        return self

    # ----------------------------------------------------------- execute
    def _resolve_location(self) -> str:
        from .. import catalog

        if self._location is not None:
            return self._location
        if self._name is None:
            raise InvalidArgumentError("the table builder needs location(...) or tableName(...)")
        found = catalog.location_for_new(self._spark, self._name)
        if found is None:
            raise InvalidArgumentError(
                f"tableName({self._name!r}) without location(...): no Lance Namespace is configured to place the "
                "table; give the table a location"
            )
        return found

    def execute(self):
        """Create / replace the table; returns its ``LanceTable`` (the
        CommitInfo is ``lastCommit()``; None for createIfNotExists on an
        existing table)."""
        from .. import catalog
        from ..spark.session import storage_options as session_storage_options
        from ..spark.write import must_not_exist, new_table, plan_write, staged_write
        from ..storage.objectstore import ObjectStore
        from ..txn.log import latest_or_none
        from ..txn.pipeline import WriteOptions, execute

        if not self._fields:
            raise InvalidArgumentError("the table builder needs at least one column (addColumn / addColumns)")
        names = [f.name for f in self._fields]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidArgumentError(f"duplicate column(s) {dup}")
        location = self._resolve_location()
        options = session_storage_options(self._spark, self._storage_options)
        store = ObjectStore(location, options)
        current = latest_or_none(store)
        if current is not None and self._mode == "create":
            raise TableExistsError(f"a Lance table already exists at {store.root} (version {current.version})")
        if current is None and self._mode == "replace":
            raise TableNotFoundError(f"no Lance table at {store.root} to replace")
        if current is not None and self._mode == "createIfNotExists":
            t = self._open_table(location, self._storage_options)
            t._name = self._name
            return t
        schema = T.StructType(self._fields)
        props = dict(self._properties)
        if self._comment is not None:
            props[COMMENT_KEY] = self._comment
        mode = "overwrite" if current is not None else "create"
        plan = plan_write(store, schema, mode, snapshot=current, stable_row_ids=self._stable_row_ids,
                          max_rows_per_fragment=DEFAULT_MAX_ROWS_PER_FRAGMENT)

        def prepare(snap):
            staged = staged_write(plan, [], props)
            staged.parameters = {
                "isManaged": "false", "description": self._comment, "partitionBy": "[]",
                "properties": json.dumps(self._properties),
            }
            return staged

        run = WriteOptions(
            checks=[must_not_exist] if current is None else [],
            retries=self._retries,
            new_table=new_table(plan), operation=MODES[self._mode],
        )
        info = execute(store, current, prepare, run)
        if self._name is not None and not catalog.register(self._spark, self._name, store.root,
                                                           self._storage_options):
            self._register_session_name(self._spark, self._name, store.root, self._storage_options)
        t = self._open_table(location, self._storage_options)
        t.table.lastCommit = info
        t._name = self._name
        return t
