"""Statements about names of a Lance Namespace catalog (``lance_ops.sql``).

With a catalog configured (:mod:`lance_ops.spark.catalogs`)::

    CREATE TABLE db.events (id BIGINT, v DOUBLE) USING lance      -- the namespace places it
    CREATE TABLE db.events USING lance AS SELECT ...
    CREATE TABLE db.events USING lance LOCATION '<uri>'           -- register a table (dir: under its root)
    DROP TABLE [IF EXISTS] db.events [PURGE]    -- deregister; PURGE also deletes the files
    ALTER TABLE db.events RENAME TO db.events_v1  (or RENAME TO events_v1)
    SHOW TABLES [IN|FROM db] [LIKE 'pattern']   -- namespace, tableName, isTemporary
    SHOW NAMESPACES|SCHEMAS|DATABASES [IN db] [LIKE 'pattern']
    CREATE NAMESPACE|SCHEMA|DATABASE [IF NOT EXISTS] db
    DROP NAMESPACE|SCHEMA|DATABASE [IF EXISTS] db

and every other statement reads and writes ``db.events`` by name. A name the
catalog does not know is Spark's (``spark.sql`` runs the statement).
"""
from __future__ import annotations

import fnmatch
import re

from pyspark.sql import types as T
from sqlglot import exp

from ..errors import TableNotFoundError
from ..spark import catalogs

SHOW_TABLES = T.StructType([
    T.StructField("namespace", T.StringType(), False), T.StructField("tableName", T.StringType(), False),
    T.StructField("isTemporary", T.BooleanType(), False),
])
SHOW_NAMESPACES = T.StructType([T.StructField("namespace", T.StringType(), False)])
_SHOW = re.compile(
    r"^\s*SHOW\s+(?P<what>TABLES|NAMESPACES|SCHEMAS|DATABASES)"
    r"(?:\s+(?:IN|FROM)\s+(?P<ns>[`\w.$-]+(?:`[^`]*`)?))?"
    r"(?:\s+(?:LIKE\s+)?'(?P<like>[^']*)')?\s*;?\s*$",
    re.IGNORECASE,
)


def table_parts(table: exp.Table) -> list[str]:
    """The parts of a table name as written (catalog, database, name)."""
    return [p.name for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p is not None]


def _like(names: list[str], pattern: str | None) -> list[str]:
    """Spark's SHOW ... LIKE: ``*`` any characters, ``|`` alternatives, case-insensitive."""
    if not pattern:
        return names
    alts = [p.strip().lower() for p in pattern.split("|")]
    return [n for n in names if any(fnmatch.fnmatchcase(n.lower(), a) for a in alts)]


def show(spark, text: str):
    """SHOW TABLES / NAMESPACES of the catalog, or None when the statement is
    not one (or no catalog is configured: Spark answers)."""
    m = _SHOW.match(text)
    if m is None:
        return None
    what, ns, like = m.group("what").upper(), m.group("ns"), m.group("like")
    first = ns.split(".")[0].strip("`") if ns else None
    if not catalogs.namespace_configured(spark) and not (first and catalogs.impl_of(spark, first)):
        return None
    if what == "TABLES":
        parts, names = catalogs.list_tables(spark, ns)
        where = ".".join(parts)
        return spark.createDataFrame([(where, n, False) for n in _like(names, like)], SHOW_TABLES)
    parts, names = catalogs.list_namespaces(spark, ns)
    prefix = ".".join(parts)
    rows = [(f"{prefix}.{n}" if prefix else n,) for n in _like(names, like)]
    return spark.createDataFrame(rows, SHOW_NAMESPACES)


def catalog_table(spark, table: exp.Table) -> list[str] | None:
    """The parts of ``table`` when a catalog applies to it (a qualified name
    other than ``lance.`<path>```), else None."""
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    parts = table_parts(table)
    if len(parts) == 2 and parts[0].lower() == "lance" and not catalogs.impl_of(spark, "lance"):
        return None  # lance.`<path>`
    if len(parts) == 2 and parts[0].lower() == "lance" and ("/" in parts[1] or ":" in parts[1]):
        return None
    return parts if catalogs.split(spark, parts) is not None else None


def exists(spark, parts: list[str]) -> bool:
    try:
        catalogs.describe(spark, parts)
        return True
    except TableNotFoundError:
        return False


def namespace_statement(spark, node: exp.Expr):
    """CREATE / DROP NAMESPACE (SCHEMA, DATABASE) in the catalog; None when
    it is not one or no catalog is configured."""
    kind = (node.args.get("kind") or "").upper()
    if kind not in ("SCHEMA", "NAMESPACE", "DATABASE") or not catalogs.namespace_configured(spark):
        return None
    target = node.this if isinstance(node, exp.Create) else (node.args.get("tables") or [node.this])[0]
    if not isinstance(target, exp.Table):
        return None
    parts = table_parts(target)
    if not parts:
        return None
    if isinstance(node, exp.Create):
        catalogs.create_namespace(spark, parts, if_not_exists=bool(node.args.get("exists")))
    else:
        catalogs.drop_namespace(spark, parts, if_exists=bool(node.args.get("exists")))
    return spark.createDataFrame([], T.StructType([]))


def drop_table(spark, node: exp.Drop):
    """DROP TABLE of a catalog table; None when the name is not one."""
    tables = node.args.get("tables") or [node.this]
    if len(tables) != 1:
        return None
    parts = catalog_table(spark, tables[0])
    if parts is None or not exists(spark, parts):
        return None  # (Spark's table, or IF EXISTS on nothing: Spark says so)
    catalogs.drop(spark, parts, purge_data=bool(node.args.get("purge")), if_exists=bool(node.args.get("exists")))
    return spark.createDataFrame([], T.StructType([]))


def rename_table(spark, node: exp.Alter):
    """ALTER TABLE <catalog table> RENAME TO <name>; None otherwise."""
    actions = node.args.get("actions") or []
    if len(actions) != 1 or not isinstance(actions[0], exp.AlterRename):
        return None
    parts = catalog_table(spark, node.this)
    if parts is None or not exists(spark, parts):
        return None
    catalogs.rename(spark, parts, table_parts(actions[0].this))
    return spark.createDataFrame([], T.StructType([]))


__all__ = ["table_parts", "show", "catalog_table", "exists", "namespace_statement", "drop_table", "rename_table"]
