"""Resolving a manifest's ``base_paths`` to root URIs.

pylance records a base path as its writer spelled it: an absolute path, a
URI, or -- when the table was opened through a relative path -- a path
relative to *that process's* working directory (pylance resolves it against
the current directory, ``uri_to_url``). We resolve each base once, on the
driver, when a version is opened, and ship absolute URIs to executors:

* a URI with a scheme, or an absolute path: as written (``file://`` and
  local paths become absolute local paths);
* a relative path: against the current directory, as pylance does, when that
  names an existing table; otherwise, in a branch's manifest (``branch``
  set), by what branches look like: a base ending in ``tree/{name}`` for a
  branch ``name`` of this table is that branch's root, any other relative
  dataset-root base is the table's main root (branches' manifests list their
  ancestors' roots, never another table's). Failing both, the current
  directory's reading stands, and reading a file there fails naming it.
"""
from __future__ import annotations

import os
from urllib.parse import urlparse

from ..format.naming import TREE_DIR, VERSIONS_DIR
from ..format.proto import table_pb2
from ..storage.objectstore import normalize_uri


def _is_relative(path: str) -> bool:
    parsed = urlparse(path)
    if parsed.scheme and not (len(parsed.scheme) == 1 and os.name == "nt"):
        return False
    return not os.path.isabs(os.path.expanduser(path))


def _root_uri(path: str) -> str:
    scheme, root = normalize_uri(path)
    return root


def resolve_base_path(path: str, table_root: str, branch: str | None, branch_names=()) -> str:
    """The root URI base path ``path`` names, for the table version rooted at
    ``table_root`` (on ``branch``; None: main)."""
    if not _is_relative(path):
        return _root_uri(path)
    here = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(os.path.join(here, VERSIONS_DIR)) or not branch:
        return here
    suffix = f"/{TREE_DIR}/{branch}"
    if not table_root.endswith(suffix):
        return here
    main_root = table_root[: -len(suffix)]
    norm = os.path.normpath(path).replace(os.sep, "/")
    for name in sorted(branch_names, key=len, reverse=True):
        if norm == f"{TREE_DIR}/{name}" or norm.endswith(f"/{TREE_DIR}/{name}"):
            return f"{main_root}/{TREE_DIR}/{name}"
    return main_root


def resolve_bases(store, manifest: table_pb2.Manifest) -> dict[int, tuple[str, bool]]:
    """id -> (root URI, is_dataset_root) of every base path of ``manifest``."""
    if not len(manifest.base_paths):
        return {}
    branch = manifest.branch if manifest.HasField("branch") else None
    names = ()
    if branch and any(_is_relative(b.path) for b in manifest.base_paths):
        from .refs import dataset_root, list_branches

        try:
            names = tuple(list_branches(dataset_root(store, branch)))
        except Exception:
            names = ()
    return {
        int(b.id): (resolve_base_path(b.path, store.root, branch, names), bool(b.is_dataset_root))
        for b in manifest.base_paths
    }


def attach_bases(store, manifest: table_pb2.Manifest) -> None:
    """Record ``manifest``'s base paths on ``store`` (what file lookups and
    executors use)."""
    if len(manifest.base_paths):
        store.bases.update(resolve_bases(store, manifest))
