"""Versions by name: opening a version named by a number, a tag or a branch,
and naming a version with a tag.

Above both halves of the name: :mod:`.refs` reads and writes the
``_refs/`` files (tags, branch heads) and :mod:`.log` reads manifests; a tag
names a version whose manifest must exist (its size goes into the tag file),
and opening a tag or branch reads the ref, then the manifest.
"""
from __future__ import annotations

from ..storage.objectstore import ObjectStore
from .log import Snapshot, TableLog, open_snapshot
from .refs import branch_store, locate, resolve_ref, resolve_version, validate_tag_name, write_tag


def open_version(store: ObjectStore, version: int | str | None = None) -> Snapshot:
    """Snapshot for a version number, a tag name (of ``store``'s branch) or
    None (latest)."""
    return open_snapshot(store, resolve_version(store, version))


def open_ref(store: ObjectStore, branch: str | None = None, version: int | str | None = None) -> Snapshot:
    """Snapshot of ``version`` (number, tag or None) of ``branch`` (None:
    ``store``'s own branch) of the table ``store`` belongs to; a tag names its
    own branch. The snapshot's store is the branch's."""
    root, here = locate(store)
    branch, number = resolve_ref(root, branch if branch is not None else here, version)
    return open_snapshot(store if branch == here else branch_store(root, branch), number)


def create_tag(store: ObjectStore, name: str, version: int | str) -> dict:
    """Tag ``version`` (a number, or another tag's name) of the branch
    ``store`` is rooted at as ``name``. The version must exist (its manifest
    size goes into the tag file, which pylance requires)."""
    validate_tag_name(name)
    v = resolve_version(store, version)
    manifest = TableLog(store).read_manifest(v)
    return write_tag(store, name, v, manifest.size, branch=locate(store)[1])
