"""Branches: creating and deleting them, in pylance 14's layout.

A branch ``name`` of the table rooted at ``R`` is a table of its own rooted at
``R/tree/{name}`` whose manifests say ``branch = name`` and reach their
parent's files through a base path; ``R/_refs/branches/{name, / as %2F}.json``
records where it forked::

    {"parentBranch": null | "<parent>",
     "identifier": {"version_mapping": [[<fork version>, "<uuid hex>"], ...]},
     "parentVersion": <fork version>, "createAt": <unix seconds>,
     "manifestSize": <bytes of the branch's first manifest>, "metadata": {}}

Creating branch ``name`` from version ``v`` of a parent (main or a branch)
writes, as pylance's ``create_branch`` does:

1. the branch's first manifest, *version v* under ``tree/{name}/_versions``:
   the parent's manifest with a base path added for the parent's root (the
   next free id; ``name`` = the parent branch, none for main;
   ``is_dataset_root``), every file of the parent's own root (data files,
   deletion files, indices without ``base_id``) pointed at it, files the
   parent itself reached through a base path left as they are; ``branch`` set;
   a ``Clone`` transaction (shallow, ``ref_name`` the parent branch,
   ``ref_version`` v, ``ref_path`` the parent's root, ``branch_name``);
2. then the branch file (put-if-not-exists). Its identifier extends the
   parent's (``[]`` for main) by ``[v, uuid4 hex]``.

We write the parent's root as an absolute URI (pylance writes it as its
caller spelled it, possibly relative; :mod:`.bases` reads both).

Deleting a branch (pylance's rules): refused while another branch forked from
it (its identifier extends this one's, or ``parentBranch`` names it) or a tag
names one of its versions; then the branch file goes, then the branch's own
files -- only the directories of its own layout, so a nested branch
``name/x`` (rooted inside ``tree/name/``) is untouched.
"""
from __future__ import annotations

import datetime
import json
import re
import time
import uuid

from ..errors import InvalidArgumentError, TableExistsError, TableNotFoundError
from ..format.features import compute_flags
from ..format.manifest import encode_manifest_file
from ..format.messages import copy_messages
from ..format.naming import (
    DATA_DIR,
    DELETIONS_DIR,
    INDICES_DIR,
    TRANSACTIONS_DIR,
    TREE_DIR,
    VERSIONS_DIR,
)
from ..format.proto import table_pb2, transaction_pb2
from ..storage.objectstore import ObjectStore
from ..storage.resolve import commit_handler
from ..version import __version__
from .build import PER_VERSION_FIELDS, inline_external_sequences
from .log import Snapshot
from .operations import Clone, Transaction
from .refs import (
    MAIN_BRANCH,
    branch_file,
    branch_store,
    list_branches,
    list_tags,
    locate,
    tag_branch,
)

_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")


def validate_branch_name(name: str) -> None:
    """pylance's ``check_valid_branch``: segments of alphanumerics, ``.``,
    ``-``, ``_`` separated by single ``/``; no ``..``; not ending in
    ``.lock``; not ``main``."""
    bad = (
        not isinstance(name, str)
        or not name
        or name.startswith("/")
        or name.endswith("/")
        or "//" in name
        or ".." in name
        or "\\" in name
        or name.endswith(".lock")
        or name == MAIN_BRANCH
        or not all(_SEGMENT.match(seg) for seg in name.split("/"))
    )
    if bad:
        raise InvalidArgumentError(
            f"invalid branch name {name!r}: use segments of letters, digits, '.', '-', '_' separated "
            "by '/' (no '..', not ending in '.lock', not 'main')"
        )


def branch_info(doc: dict) -> dict:
    """What ``listBranches()`` reports of a branch file."""
    created = doc.get("createAt")
    created_at = (
        datetime.datetime.fromtimestamp(int(created), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if created is not None
        else None
    )
    return {
        "parentBranch": doc.get("parentBranch"),
        "parentVersion": int(doc["parentVersion"]),
        "createdAt": created_at,
        "metadata": dict(doc.get("metadata") or {}),
    }


def _identifier(doc: dict | None) -> list:
    if not doc:
        return []
    ident = doc.get("identifier") or {}
    return [list(x) for x in ident.get("version_mapping") or []]


def branch_manifest(source: Snapshot, name: str, parent_branch: str | None, txn: Transaction) -> tuple:
    """(manifest, indices) of branch ``name``'s first version, forked from
    ``source`` (a version of ``parent_branch``)."""
    m = table_pb2.Manifest()
    m.CopyFrom(source.manifest)
    m.DiscardUnknownFields()
    for f in PER_VERSION_FIELDS:
        if f != "version":
            m.ClearField(f)
    new_id = max((b.id for b in m.base_paths), default=-1) + 1
    base = m.base_paths.add()
    base.id = new_id
    if parent_branch is not None:
        base.name = parent_branch
    base.is_dataset_root = True
    base.path = source.store.root
    for frag in m.fragments:
        for df in frag.files:
            if not df.HasField("base_id"):
                df.base_id = new_id
        if frag.HasField("deletion_file") and not frag.deletion_file.HasField("base_id"):
            frag.deletion_file.base_id = new_id
        inline_external_sequences(source.store, frag)  # (their paths name the parent's root)
    indices = copy_messages(source.indices)
    for idx in indices:
        if not idx.HasField("base_id"):
            idx.base_id = new_id
    m.branch = name
    reader, writer = compute_flags(
        m, source.stable_row_ids, (source.manifest.reader_feature_flags, source.manifest.writer_feature_flags)
    )
    m.reader_feature_flags, m.writer_feature_flags = reader, writer
    ts = time.time()
    m.timestamp.seconds = int(ts)
    m.timestamp.nanos = int((ts - int(ts)) * 1e9)
    m.writer_version.Clear()
    m.writer_version.library = "lance_ops"
    m.writer_version.version = __version__
    m.transaction_file = txn.file_name
    return m, indices


def create_branch(source: Snapshot, name: str) -> dict:
    """Create branch ``name`` from ``source`` (any version of main or of a
    branch); returns the branch file's content."""
    validate_branch_name(name)
    root, parent = locate(source.store)
    if root.exists(branch_file(name)):
        raise TableExistsError(f"branch {name!r} already exists in {root.root}")
    target = branch_store(root, name)
    clone = transaction_pb2.Transaction.Clone(
        is_shallow=True, ref_version=source.version, ref_path=source.store.root, branch_name=name
    )
    if parent is not None:
        clone.ref_name = parent
    txn = Transaction(source.version, Clone(clone))
    manifest, indices = branch_manifest(source, name, parent, txn)
    txn_bytes = txn.to_bytes()
    target.write_bytes(f"{TRANSACTIONS_DIR}/{txn.file_name}", txn_bytes)
    data = encode_manifest_file(manifest, txn_bytes, indices, source.file.dictionaries)
    handler = commit_handler(target)
    if handler.commit(source.version, source.naming, data) is None:
        raise TableExistsError(
            f"{target.root} already holds version {source.version} (a leftover of a deleted branch "
            f"{name!r}?); remove the directory or pick another name"
        )
    parents = list_branches(root)
    doc = {
        "parentBranch": parent,
        "identifier": {"version_mapping": _identifier(parents.get(parent)) + [[source.version, uuid.uuid4().hex]]},
        "parentVersion": source.version,
        "createAt": int(time.time()),
        "manifestSize": len(data),
        "metadata": {},
    }
    if not commit_handler(root).put_if_not_exists(branch_file(name), json.dumps(doc, indent=2).encode()):
        _remove_branch_files(target)
        raise TableExistsError(f"branch {name!r} already exists in {root.root}")
    return doc


def _forks_of(name: str, branches: dict[str, dict]) -> list[tuple[str, int]]:
    """Branches forked from branch ``name`` (child name, fork version)."""
    mine = _identifier(branches.get(name))
    out = []
    for other, doc in branches.items():
        if other == name:
            continue
        ident = _identifier(doc)
        extends = bool(mine) and len(ident) > len(mine) and ident[: len(mine)] == mine
        if extends or doc.get("parentBranch") == name:
            out.append((other, int(doc["parentVersion"])))
    return out


def delete_branch(store: ObjectStore, name: str) -> None:
    """Delete branch ``name`` of the table ``store`` belongs to."""
    validate_branch_name(name)
    root = locate(store)[0]
    branches = list_branches(root)
    if name not in branches:
        raise TableNotFoundError(f"branch {name!r} does not exist in {root.root}")
    forks = _forks_of(name, branches)
    if forks:
        raise InvalidArgumentError(
            f"branch {name!r} cannot be deleted: branch(es) {forks} were forked from it (name, version); "
            "delete them first"
        )
    tags = sorted((t, int(doc["version"])) for t, doc in list_tags(root).items() if tag_branch(doc) == name)
    if tags:
        raise InvalidArgumentError(f"branch {name!r} cannot be deleted: tag(s) {tags} name its versions")
    root.delete(branch_file(name))
    _remove_branch_files(branch_store(root, name))


def _remove_branch_files(target: ObjectStore) -> None:
    """Remove a branch's own files (not a nested branch's), then its
    directories once empty, up to ``tree/``."""
    for d in (VERSIONS_DIR, TRANSACTIONS_DIR, DELETIONS_DIR, DATA_DIR, INDICES_DIR):
        for rel, _info in list(target.walk_files(d)):
            target.delete(rel)
    if not target.is_local:
        return  # object stores have no directories
    import os

    top = target.path()
    for d in (VERSIONS_DIR, TRANSACTIONS_DIR, DELETIONS_DIR, DATA_DIR, INDICES_DIR):
        for dirpath, _dirs, _files in os.walk(os.path.join(top, d), topdown=False):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
    marker = f"{os.sep}{TREE_DIR}{os.sep}"
    tree = top[: top.rfind(marker) + len(marker) - 1]
    path = top
    while len(path) > len(tree):
        try:
            os.rmdir(path)
        except OSError:
            break
        path = os.path.dirname(path)


__all__ = ["create_branch", "delete_branch", "validate_branch_name", "branch_info"]
