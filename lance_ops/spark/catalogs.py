"""Table names through a Lance Namespace configured in Spark conf.

The configuration has the shape lance-spark users know::

    spark.sql.catalog.lance.impl   dir | rest | glue | ... | a class path   (``type`` works too)
    spark.sql.catalog.lance.root   /data/lake            (dir: the directory)
    spark.sql.catalog.lance.uri    http://host:2333      (rest: the server)
    spark.sql.catalog.lance.storage.<key>   storage options of the tables
    spark.sql.catalog.lance.headers.<name>  HTTP headers (rest)
    spark.lance_ops.catalog        lance                 the catalog of names without one

Names are Spark's: ``db.events`` is table ``events`` of namespace ``db`` in
the default catalog, ``lance.db.events`` names the catalog, ``events`` a
table of the root namespace (after the names bound to one call and the
session's own names). Only lance_ops' front ends know these names
(``LanceTable.forName``, ``lance_ops.sql``): Spark 4.3 cannot hand a catalog
table to a Python data source, so ``spark.sql`` does not see them (lance-spark's
JVM catalog plugin is the way to that).

Every namespace error becomes a ``lance_ops.errors`` one: a missing table or
namespace TableNotFoundError, an existing one TableExistsError, a refused
input InvalidArgumentError, an operation the namespace does not implement
UnsupportedFeatureError.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from ..errors import (
    InvalidArgumentError,
    LanceOpsError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from ..namespace.ids import parse_name, quoted

CATALOG_CONF = "spark.lance_ops.catalog"
DEFAULT_CATALOG = "lance"
PREFIX = "spark.sql.catalog."
_IMPL_KEYS = ("impl", "type")

_CACHE: dict = {}
_LOCK = threading.Lock()


def _conf(spark, key: str) -> str | None:
    try:
        v = spark.conf.get(key, None)
    except Exception:
        return None
    return v if v not in (None, "") else None


def _all_conf(spark) -> dict[str, str]:
    try:
        return dict(spark.conf.getAll)  # (a property in pyspark 4)
    except Exception:
        return {r[0]: r[1] for r in spark.sql("SET").collect()}


def impl_of(spark, catalog: str) -> str | None:
    """The namespace kind configured for ``catalog`` (None: not a Lance catalog)."""
    for k in _IMPL_KEYS:
        v = _conf(spark, f"{PREFIX}{catalog}.{k}")
        if v:
            return v
    return None


def default_catalog(spark) -> str | None:
    """The catalog of names that do not name one (None: none configured)."""
    name = _conf(spark, CATALOG_CONF) or DEFAULT_CATALOG
    return name if impl_of(spark, name) else None


def namespace_configured(spark) -> bool:
    return default_catalog(spark) is not None


def namespace_of(spark, catalog: str):
    """The ``LanceNamespace`` of a configured catalog (one per configuration)."""
    from ..namespace import connect

    impl = impl_of(spark, catalog)
    if impl is None:
        raise InvalidArgumentError(
            f"no Lance Namespace catalog {catalog!r} is configured: set {PREFIX}{catalog}.impl (dir or rest) and "
            f"{PREFIX}{catalog}.root or .uri"
        )
    head = (impl, _conf(spark, f"{PREFIX}{catalog}.root"), _conf(spark, f"{PREFIX}{catalog}.uri"))
    key = (id(spark), catalog)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == head:
        return hit[1]
    prefix = f"{PREFIX}{catalog}."
    props = {k[len(prefix):]: v for k, v in _all_conf(spark).items() if k.startswith(prefix)}
    for k in _IMPL_KEYS:
        props.pop(k, None)
    with mapped_errors(f"catalog {catalog}"):
        ns = connect(impl, props)
    with _LOCK:
        _CACHE[key] = (head, ns)
    return ns


@contextlib.contextmanager
def mapped_errors(what: str):
    """Lance Namespace errors as lance_ops errors."""
    import lance_namespace as ln

    try:
        yield
    except (ln.TableNotFoundError, ln.NamespaceNotFoundError) as e:
        raise TableNotFoundError(f"{what}: {e}") from e
    except (ln.TableAlreadyExistsError, ln.NamespaceAlreadyExistsError) as e:
        raise TableExistsError(f"{what}: {e}") from e
    except (ln.InvalidInputError, ln.NamespaceNotEmptyError) as e:
        raise InvalidArgumentError(f"{what}: {e}") from e
    except ln.UnsupportedOperationError as e:
        raise UnsupportedFeatureError(f"{what}: {e}") from e
    except NotImplementedError as e:  # (pylance's namespaces for operations they lack)
        raise UnsupportedFeatureError(f"{what}: {e}") from e
    except ln.LanceNamespaceError as e:
        raise LanceOpsError(f"{what}: {e}") from e
    except ValueError as e:
        if isinstance(e, LanceOpsError):
            raise
        raise InvalidArgumentError(f"{what}: {e}") from e


@dataclass
class CatalogName:
    """A table (or namespace) name resolved to its catalog."""

    catalog: str
    ident: list[str]
    namespace: object

    @property
    def text(self) -> str:
        return quoted([self.catalog, *self.ident])


def split(spark, parts: list[str], allow_root: bool = True) -> CatalogName | None:
    """Which catalog ``parts`` names (None: no catalog applies): a first part
    that is a configured catalog names it (when more parts follow), else the
    default catalog."""
    if len(parts) > 1 and impl_of(spark, parts[0]):
        return CatalogName(parts[0], parts[1:], namespace_of(spark, parts[0]))
    catalog = default_catalog(spark)
    if catalog is None or (not allow_root and len(parts) == 1):
        return None
    return CatalogName(catalog, list(parts), namespace_of(spark, catalog))


def resolve(spark, name) -> CatalogName:
    """``name`` (text or parts) in its catalog; InvalidArgumentError when no
    catalog is configured."""
    parts = parse_name(name) if isinstance(name, str) else list(name)
    found = split(spark, parts)
    if found is None:
        raise InvalidArgumentError(
            f"{quoted(parts)}: no Lance Namespace is configured for table names; set {PREFIX}lance.impl (dir or "
            f"rest) with {PREFIX}lance.root (or .uri), or name the table by its path"
        )
    return found


def describe(spark, name) -> tuple[str, dict]:
    """(location URI, storage options) of the existing table ``name``
    (TableNotFoundError if the namespace does not know it)."""
    import lance_namespace as ln

    target = resolve(spark, name)
    with mapped_errors(f"table {target.text}"):
        out = target.namespace.describe_table(ln.DescribeTableRequest(id=target.ident))
    location = out.location or out.table_uri
    if not location:
        raise TableNotFoundError(f"table {target.text}: the namespace gives it no location")
    return location, dict(out.storage_options or {})


def location_of(spark, name) -> str | None:
    """The location of table ``name`` (None: no namespace configured, or no
    such table) -- the table builder's hook."""
    if not namespace_configured(spark) and not (isinstance(name, str) and "." in name):
        return None
    try:
        return describe(spark, name)[0]
    except (TableNotFoundError, InvalidArgumentError):
        return None


def new_location(spark, name) -> tuple[CatalogName, str, dict, bool]:
    """Where a new table ``name`` goes: (resolved name, location URI, storage
    options, declared). A directory namespace picks the location (the table is
    registered after its data is written); a REST namespace declares the
    table and says where (``declared``: the name is already taken)."""
    import lance_namespace as ln

    from ..namespace.directory import DirectoryNamespace

    target = resolve(spark, name)
    ns = target.namespace
    with mapped_errors(f"table {target.text}"):
        _must_be_free(ns, target)
        if isinstance(ns, DirectoryNamespace):
            rel = ns.new_location(target.ident)
            return target, ns.uri_of(rel), dict(ns.storage_options), False
        out = ns.declare_table(ln.DeclareTableRequest(id=target.ident))
    if not out.location:
        raise UnsupportedFeatureError(f"table {target.text}: the namespace declared it without a location")
    return target, out.location, dict(out.storage_options or {}), True


def _must_be_free(ns, target: CatalogName) -> None:
    import lance_namespace as ln

    try:
        ns.table_exists(ln.TableExistsRequest(id=target.ident))
    except (ln.TableNotFoundError, NotImplementedError, ln.UnsupportedOperationError):
        if len(target.ident) > 1:
            ns.namespace_exists(ln.NamespaceExistsRequest(id=target.ident[:-1]))
        return
    raise ln.TableAlreadyExistsError(f"Table already exists: {target.text}")


def check_location(spark, name, location: str) -> None:
    """Refuse, before anything is written, a LOCATION the namespace of
    ``name`` cannot register (a directory namespace keeps its tables under
    its root, as pylance's does)."""
    from ..namespace.directory import DirectoryNamespace

    target = resolve(spark, name)
    if isinstance(target.namespace, DirectoryNamespace):
        with mapped_errors(f"table {target.text}"):
            target.namespace.relative(location)


def location_for_new(spark, name) -> str:
    """Where a new table ``name`` goes (the table builder's hook; a REST
    namespace declares the name at once -- :func:`register` then accepts it)."""
    return new_location(spark, name)[1]


def register(spark, name, location: str, declared: bool = False, storage_options: dict | None = None) -> None:
    """Record table ``name`` at ``location`` in its namespace (a declared
    table already is; so is one the namespace already has at this location)."""
    if declared:
        return
    target = resolve(spark, name)
    try:
        _register(target, location)
    except TableExistsError:
        try:
            current = describe(spark, [target.catalog, *target.ident])[0]
        except TableNotFoundError:
            raise
        from ..storage.objectstore import ObjectStore

        if ObjectStore(current).root != ObjectStore(location).root:
            raise


def _register(target: CatalogName, location: str) -> None:
    import lance_namespace as ln

    with mapped_errors(f"table {target.text}"):
        target.namespace.register_table(ln.RegisterTableRequest(id=target.ident, location=location))


def create_by_name(spark, name, write) -> str:
    """Create table ``name`` in its namespace: ``write(location, storage
    options)`` writes the table's first version; then the name is registered.
    If either step fails nothing is left: the written table is removed, a
    declared name deregistered. Returns the location."""
    import lance_namespace as ln

    target, location, options, declared = new_location(spark, name)
    try:
        write(location, options)
        if not declared:
            from ..namespace.directory import DirectoryNamespace

            if isinstance(target.namespace, DirectoryNamespace):
                with mapped_errors(f"table {target.text}"):
                    target.namespace.record_table(target.ident, location)
            else:
                _register(target, location)
    except BaseException:
        with contextlib.suppress(Exception):
            if declared:
                target.namespace.deregister_table(ln.DeregisterTableRequest(id=target.ident))
            from ..namespace.directory import purge
            from ..storage.objectstore import ObjectStore

            purge(ObjectStore(location, options))
        raise
    return location


def drop(spark, name, purge_data: bool = False, if_exists: bool = False) -> bool:
    """DROP TABLE: deregister ``name`` (its data stays), or with
    ``purge_data`` drop it with its files. False when it did not exist and
    ``if_exists``."""
    import lance_namespace as ln

    target = resolve(spark, name)
    try:
        with mapped_errors(f"table {target.text}"):
            if purge_data:
                target.namespace.drop_table(ln.DropTableRequest(id=target.ident))
            else:
                target.namespace.deregister_table(ln.DeregisterTableRequest(id=target.ident))
    except TableNotFoundError:
        if if_exists:
            return False
        raise
    return True


def rename(spark, name, new_name) -> None:
    """ALTER TABLE ... RENAME TO: within the catalog; a one-part new name
    keeps the table's namespace."""
    import lance_namespace as ln

    target = resolve(spark, name)
    new_parts = parse_name(new_name) if isinstance(new_name, str) else list(new_name)
    if len(new_parts) > 1 and new_parts[0] == target.catalog and impl_of(spark, new_parts[0]):
        new_parts = new_parts[1:]
    new_ns = new_parts[:-1] if len(new_parts) > 1 else target.ident[:-1]
    with mapped_errors(f"table {target.text}"):
        target.namespace.rename_table(ln.RenameTableRequest(
            id=target.ident, new_table_name=new_parts[-1], new_namespace_id=new_ns))


def list_tables(spark, namespace=None) -> tuple[list[str], list[str]]:
    """(namespace parts, table names) of a namespace (default: the root of
    the default catalog)."""
    import lance_namespace as ln

    parts = [] if namespace is None else (parse_name(namespace) if isinstance(namespace, str) else list(namespace))
    target = _namespace_target(spark, parts)
    with mapped_errors(f"namespace {target.text or '(root)'}"):
        out = target.namespace.list_tables(ln.ListTablesRequest(id=target.ident))
    return target.ident, sorted(out.tables or [])


def list_namespaces(spark, namespace=None) -> tuple[list[str], list[str]]:
    import lance_namespace as ln

    parts = [] if namespace is None else (parse_name(namespace) if isinstance(namespace, str) else list(namespace))
    target = _namespace_target(spark, parts)
    with mapped_errors(f"namespace {target.text or '(root)'}"):
        out = target.namespace.list_namespaces(ln.ListNamespacesRequest(id=target.ident))
    return target.ident, sorted(out.namespaces or [])


def create_namespace(spark, namespace, if_not_exists: bool = False, properties: dict | None = None) -> bool:
    import lance_namespace as ln

    target = _namespace_target(spark, parse_name(namespace) if isinstance(namespace, str) else list(namespace))
    try:
        with mapped_errors(f"namespace {target.text}"):
            target.namespace.create_namespace(ln.CreateNamespaceRequest(id=target.ident, properties=properties))
    except TableExistsError:
        if if_not_exists:
            return False
        raise
    return True


def drop_namespace(spark, namespace, if_exists: bool = False) -> bool:
    import lance_namespace as ln

    target = _namespace_target(spark, parse_name(namespace) if isinstance(namespace, str) else list(namespace))
    try:
        with mapped_errors(f"namespace {target.text}"):
            target.namespace.drop_namespace(ln.DropNamespaceRequest(id=target.ident))
    except TableNotFoundError:
        if if_exists:
            return False
        raise
    return True


def _namespace_target(spark, parts: list[str]) -> CatalogName:
    if parts and impl_of(spark, parts[0]):
        return CatalogName(parts[0], parts[1:], namespace_of(spark, parts[0]))
    catalog = default_catalog(spark)
    if catalog is None:
        raise InvalidArgumentError(
            f"no Lance Namespace is configured: set {PREFIX}lance.impl (dir or rest) with {PREFIX}lance.root (or .uri)"
        )
    return CatalogName(catalog, parts, namespace_of(spark, catalog))


__all__ = [
    "CATALOG_CONF", "namespace_configured", "default_catalog", "namespace_of", "resolve", "describe", "location_of",
    "new_location", "location_for_new", "check_location", "register", "create_by_name", "drop", "rename", "list_tables", "list_namespaces",
    "create_namespace", "drop_namespace", "mapped_errors", "split",
]
