"""Table names -> locations: where ``LanceTable.create(spark).tableName(...)``
(and, later, ``forName``) turn a name into a table location.

The Lance Namespace catalog (issue 30, item 9) fills these hooks: with a
namespace configured, a name resolves to the location the namespace gives it
and a table created by name is registered there. Until one is configured:

* a new table needs ``location(...)``; with ``tableName(...)`` as well, the
  caller registers the name for this Spark session (as SQL's ``CREATE TABLE
  name ... LOCATION``), so ``lance_ops.sql`` statements can use it;
* ``tableName(...)`` without ``location(...)`` is an error that says so.

This module imports nothing of lance_ops: the layers above call it.
"""
from __future__ import annotations


def namespace_configured(spark) -> bool:
    """Whether a Lance Namespace is configured for ``spark`` (hook: none yet)."""
    return False


def location_of(spark, name: str) -> str | None:
    """The location of the existing table ``name`` (None: unknown -- no
    namespace configured, or no such table)."""
    return None


def location_for_new(spark, name: str) -> str | None:
    """Where a new table ``name`` without an explicit location goes (None: no
    namespace configured)."""
    return location_of(spark, name)


def register(spark, name: str, location: str, storage_options: dict | None = None) -> bool:
    """Record in the configured namespace that ``name`` is the table at
    ``location``; False when no namespace is configured (the caller then
    makes it a name of the Spark session)."""
    return False
