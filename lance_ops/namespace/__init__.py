"""Lance Namespace catalogs: table names that persist, shared with pylance.

The Lance Namespace spec (``lance-namespace`` on PyPI) is Lance's catalog
abstraction: a tree of namespaces holding tables, each table a location.
lance_ops implements the spec's two native kinds in Python on its own table
layer -- :class:`DirectoryNamespace` (a directory with a ``__manifest``
table, the layout pylance's ``lance.namespace.DirectoryNamespace`` reads and
writes) and :class:`RestNamespace` (a client of a REST namespace server) --
both as ``lance_namespace.LanceNamespace`` implementations; any other kind
(``glue``, ``hive2``, ``unity`` from ``lance-namespace-impls``, or a class
path) is loaded through ``lance_namespace.connect``. No Spark here: the
Spark front end (:mod:`lance_ops.spark.catalogs`) reads the configuration
from Spark conf and turns names into tables.
"""
from __future__ import annotations

from .ids import object_id, parse_name, quoted

#: Short names of the kinds lance_ops implements itself.
NATIVE = {"dir": "directory", "directory": "directory", "rest": "rest"}


def connect(impl: str, properties: dict):
    """A ``lance_namespace.LanceNamespace`` of kind ``impl`` ("dir", "rest",
    a registered short name or a class path) configured by ``properties``."""
    kind = NATIVE.get(str(impl or "dir").strip().lower())
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    if kind == "directory":
        from .directory import DirectoryNamespace

        return DirectoryNamespace(**props)
    if kind == "rest":
        from .rest import RestNamespace

        return RestNamespace(**props)
    import lance_namespace

    return lance_namespace.connect(impl, props)


def __getattr__(name):
    if name == "DirectoryNamespace":
        from .directory import DirectoryNamespace

        return DirectoryNamespace
    if name == "RestNamespace":
        from .rest import RestNamespace

        return RestNamespace
    raise AttributeError(name)


__all__ = ["connect", "DirectoryNamespace", "RestNamespace", "parse_name", "object_id", "quoted"]
