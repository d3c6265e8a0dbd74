"""Tags: createTag / deleteTag / listTags over :mod:`lance_ops.txn.refs`.

Tags are pylance-compatible ``_refs/tags/{name}.json`` files. They are not
table versions: creating or deleting one commits nothing, so it also works
through a time-travel handle. A tagged version is kept by vacuum.
"""
from __future__ import annotations

from ..txn.log import TableLog
from ..txn.refs import list_tags, resolve_version, validate_tag_name, write_tag


def create_tag(store, name: str, version: int | str) -> dict:
    """Tag ``version`` (a number, or another tag's name) as ``name``. The
    version must exist (its manifest size goes into the tag file, which
    pylance requires)."""
    validate_tag_name(name)
    v = resolve_version(store, version)
    manifest = TableLog(store).read_manifest(v)
    return write_tag(store, name, v, manifest.size)


def tag_versions(store) -> dict[str, int]:
    """Tag name -> version, sorted by name."""
    return {name: int(doc["version"]) for name, doc in list_tags(store).items()}
