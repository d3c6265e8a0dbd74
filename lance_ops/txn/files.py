"""Which files a change writes, and whether they are still there.

The staged-commit pipeline removes the files of a change that did not commit
(:mod:`.pipeline`), and the commit loop checks, right before it publishes a
manifest, that the files the change adds still exist (:mod:`.commit`): a
vacuum run with its retention check overridden can remove a writer's files
while the writer is still preparing its commit, and a version naming missing
files is a broken table for every reader.

Paths are relative to the table root; an index is its directory
``_indices/{uuid}``. Files reached through a base path (``base_id`` set:
shallow clones, branches) are never a change's own.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..format.deletion import deletion_path_of, has_deletion_file
from ..format.naming import DATA_DIR, index_dir
from .operations import (
    Append,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Rewrite,
    Update,
)

#: Concurrent existence checks against a remote store.
_CHECK_THREADS = 16


def fragment_files(frags) -> set[str]:
    out = set()
    for f in frags:
        out.update(f"{DATA_DIR}/{df.path}" for df in f.files if not df.HasField("base_id"))
        if has_deletion_file(f) and not f.deletion_file.HasField("base_id"):
            out.add(deletion_path_of(f.id, f.deletion_file))
    return out


def operation_files(op: Operation) -> set[str]:
    """Files an operation's fragments and indices reference under the
    table's own root."""
    if isinstance(op, (Append, Overwrite, Merge)):
        return fragment_files(op.fragments)
    if isinstance(op, Delete):
        return fragment_files(op.updated_fragments)
    if isinstance(op, Update):
        return fragment_files(op.updated_fragments) | fragment_files(op.new_fragments)
    if isinstance(op, Rewrite):
        return fragment_files(f for g in op.groups + op.dropped_groups for f in g.new_fragments) | {
            index_dir(r.new_id.uuid) for r in op.rewritten_indices
        }
    if isinstance(op, DataReplacement):
        return {f"{DATA_DIR}/{df.path}" for _, df in op.replacements if not df.HasField("base_id")}
    if isinstance(op, CreateIndex):
        return {index_dir(i.uuid.uuid) for i in op.new_indices if not i.HasField("base_id")}
    return set()


def snapshot_files(snap) -> set[str]:
    """Files a version references under its own root (data, deletion, index
    directories); none for no version."""
    if snap is None:
        return set()
    return fragment_files(snap.fragments) | {index_dir(i.uuid.uuid) for i in snap.indices}


def committed_files(op: Operation) -> set[str]:
    """The files a committed ``op`` references that must exist for readers:
    those of :func:`operation_files`, without the index directories of a
    rewrite's dropped groups (never referenced)."""
    if isinstance(op, Rewrite):
        return fragment_files(f for g in op.groups for f in g.new_fragments) | {
            index_dir(r.new_id.uuid) for r in op.rewritten_indices
        }
    return operation_files(op)


def missing_files(store, paths) -> list[str]:
    """Which of ``paths`` do not exist (an index directory: holds no file).
    One stat/HEAD per path, concurrent on remote stores."""
    paths = sorted(paths)
    if not paths:
        return []

    def gone(rel: str) -> bool:
        if rel.startswith("_indices/"):
            return not store.first_files(rel, 1)[0]
        try:
            store.size(rel)
            return False
        except FileNotFoundError:
            return True

    if store.is_local or len(paths) < 4:
        return [p for p in paths if gone(p)]
    with ThreadPoolExecutor(min(_CHECK_THREADS, len(paths))) as pool:
        return [p for p, g in zip(paths, pool.map(gone, paths)) if g]
