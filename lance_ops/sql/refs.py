"""Which table a SQL table reference names, at which version.

A Lance table is written

* ``lance.`<uri>``` -- a path or URI, optionally ending in ``@v<n>`` (version
  n) or ``@<tag>``;
* a name bound for one call (``lance_ops.sql(..., tables={"events": uri})``,
  ``LanceTable.sql`` binds ``this``);
* a name registered in the session by ``CREATE TABLE name USING lance
  LOCATION '<uri>'`` (or by ``CREATE VIEW v AS SELECT * FROM <lance table>``);
* a name of a Lance Namespace catalog configured in Spark conf
  (:mod:`lance_ops.spark.catalogs`): ``db.events``, ``lance.db.events``, or a
  one-part name of the root namespace that neither of the above nor Spark
  knows. Such names persist across sessions (pylance's DirectoryNamespace
  sees the same tables).

Registered names are the session's temporary views over the ``lance`` data
source (:mod:`lance_ops.spark.sessionnames`).

Time travel: ``VERSION AS OF n`` (or a tag name as a string),
``TIMESTAMP AS OF <expr>`` (the latest version committed at or before it,
evaluated by Spark in the session time zone), ``@v<n>``, ``@<tag>``.
"""
from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import InvalidArgumentError, TableNotFoundError
from ..spark.sessionnames import registered_uri
from .grammar import AT_SUFFIX, sql_of

LANCE_NAMESPACE = "lance"
_VERSION_SUFFIX = re.compile(r"^v(\d+)$")


@dataclass
class LanceRef:
    """A Lance table reference: ``uri`` at ``version`` (None: latest) or
    ``tag``; ``name`` is how the statement spelled it (for aliases)."""

    uri: str
    name: str
    version: int | None = None
    tag: str | None = None
    timestamp: exp.Expr | None = None
    storage_options: dict | None = field(default=None, repr=False)

    @property
    def time_travel(self) -> bool:
        return self.version is not None or self.tag is not None or self.timestamp is not None


def normalize_uri(uri: str) -> str:
    """A local path made absolute here, on the driver: Spark's Python workers
    run in another working directory."""
    if "://" in uri or uri.startswith("file:"):
        return uri
    return os.path.abspath(os.path.expanduser(uri))


def _split_at(path: str) -> tuple[str, str | None]:
    """``/a/b@v3`` -> (``/a/b``, ``v3``): an ``@`` in the last path segment."""
    head, sep, last = path.rpartition("/")
    if "@" not in last:
        return path, None
    base, _, suffix = last.rpartition("@")
    if not base or not suffix:
        return path, None
    return f"{head}{sep}{base}", suffix


class Resolver:
    """Resolves the table references of one ``lance_ops.sql`` call to handles
    of ``table_class`` (``LanceTable``: the public API the statements run on,
    given by the caller -- the front end sits above it)."""

    def __init__(self, spark, table_class, bindings: dict | None = None):
        self.spark = spark
        self.table_class = table_class
        self.bindings = {}
        for name, target in (bindings or {}).items():
            self.bindings[name.lower()] = target

    def lance(self, table: exp.Table) -> LanceRef | None:
        """The Lance table ``table`` names, or None if it is Spark's."""
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            return None
        name = table.name
        db = table.args.get("db")
        ref: LanceRef | None = None
        if db is not None and table.args.get("catalog") is None and db.name.lower() == LANCE_NAMESPACE:
            uri, suffix = _split_at(name)
            ref = LanceRef(normalize_uri(uri), name=uri.rstrip("/").rsplit("/", 1)[-1] or uri)
            if suffix is not None:
                self._apply_suffix(ref, suffix)
        elif db is None:
            bound = self.bindings.get(name.lower())
            if bound is not None:
                ref = self._bound(name, bound)
            else:
                uri = registered_uri(self.spark, name)
                if uri is not None:
                    ref = LanceRef(uri, name=name)
                elif self._catalog_applies() and not self._spark_knows(name):
                    ref = self._cataloged(table)
        else:
            ref = self._cataloged(table)
        if ref is None:
            return None
        at = table.meta.get(AT_SUFFIX)
        if at is not None:
            if ref.time_travel:
                raise InvalidArgumentError(f"{sql_of(table)}: two time-travel specifications")
            self._apply_suffix(ref, at)
        version = table.args.get("version")
        if version is not None:
            if ref.time_travel:
                raise InvalidArgumentError(f"{sql_of(table)}: two time-travel specifications")
            self._apply_version(ref, version)
        return ref

    def _catalog_applies(self) -> bool:
        """Whether a Lance Namespace catalog is configured (one conf lookup)."""
        from ..spark import catalogs

        return catalogs.namespace_configured(self.spark)

    def _spark_knows(self, name: str) -> bool:
        """Whether Spark's session catalog has ``name`` (a temporary view or a
        table of the current database): Spark's names come before the
        namespace's root tables."""
        try:
            return bool(self.spark.catalog.tableExists(name))
        except Exception:
            return False

    def _cataloged(self, table: exp.Table) -> LanceRef | None:
        """The table a Lance Namespace catalog (:mod:`lance_ops.spark.catalogs`)
        knows by this name, None when no catalog applies or it has no such
        table (then the name is Spark's)."""
        from ..spark import catalogs
        from .names import table_parts

        parts = table_parts(table)
        if catalogs.split(self.spark, parts) is None:
            return None
        try:
            uri, options = catalogs.describe(self.spark, parts)
        except TableNotFoundError:
            return None
        return LanceRef(uri, name=table.name, storage_options=options or None)

    def _bound(self, name: str, target) -> LanceRef:
        if isinstance(target, self.table_class):
            ref = LanceRef(target.uri, name=name, storage_options=target.table.store.storage_options or None)
            if target.table.pinned:
                ref.version = target.version
            return ref
        if isinstance(target, str):
            return LanceRef(normalize_uri(target), name=name)
        raise InvalidArgumentError(f"tables[{name!r}] must be a URI or a LanceTable, got {type(target).__name__}")

    def _apply_suffix(self, ref: LanceRef, suffix: str) -> None:
        m = _VERSION_SUFFIX.match(suffix)
        if m:
            ref.version = int(m.group(1))
        else:
            ref.tag = suffix

    def _apply_version(self, ref: LanceRef, version: exp.Version) -> None:
        kind = version.this
        value = version.expression
        if kind == "VERSION":
            if isinstance(value, exp.Literal) and not value.is_string:
                ref.version = int(value.this)
            elif isinstance(value, exp.Literal):
                ref.tag = value.this
            else:
                raise InvalidArgumentError(f"VERSION AS OF needs a version number or a tag name, got {sql_of(value)}")
        elif kind == "TIMESTAMP":
            ref.timestamp = value
        else:
            raise InvalidArgumentError(f"unsupported time travel {sql_of(version)}")

    # ------------------------------------------------------------- handles
    def handle(self, ref: LanceRef):
        """A LanceTable at the reference's version (TableNotFoundError if the
        location holds no table or the version / tag does not exist)."""
        version: int | str | None = ref.version if ref.version is not None else ref.tag
        if ref.timestamp is not None:
            version = self.version_at(ref, ref.timestamp)
        return self.table_class(self.spark, ref.uri, version=version, storage_options=ref.storage_options)

    def version_at(self, ref: LanceRef, when: exp.Expr) -> int:
        """The latest version of ``ref`` committed at or before ``when`` (a
        Spark SQL timestamp expression, evaluated by Spark)."""
        from ..txn.table import Table

        micros = self.timestamp_micros(when)
        rows = Table(ref.uri, ref.storage_options).history()
        target = datetime.datetime.fromtimestamp(0, tz=datetime.timezone.utc) + datetime.timedelta(microseconds=micros)
        candidates = [r["version"] for r in rows if r["timestamp"] is not None and r["timestamp"] <= target]
        if not candidates:
            raise TableNotFoundError(
                f"{ref.uri} has no version committed at or before {target.isoformat()} (the earliest kept "
                f"version is {min((r['version'] for r in rows), default='none')})"
            )
        return max(candidates)

    def timestamp_micros(self, when: exp.Expr) -> int:
        row = self.spark.sql(f"SELECT unix_micros(CAST({sql_of(when)} AS TIMESTAMP)) AS us").head()
        if row is None or row[0] is None:
            raise InvalidArgumentError(f"TIMESTAMP AS OF {sql_of(when)} is not a timestamp")
        return int(row[0])


__all__ = ["LanceRef", "Resolver", "normalize_uri"]
