"""Commit handlers: how a table's versions are listed, located and committed.

Everything that finds or creates versions -- the commit loop, the version log
(:class:`lance_ops.txn.log.TableLog`), vacuum, tags -- talks to a
:class:`CommitHandler`, never to the file layout or the store's capabilities
directly. The format's commit protocol needs one primitive: an atomic
*put-if-not-exists* of the next version's manifest. How a store provides it is
the handler's business:

* :class:`LocalCommitHandler` -- local file systems: write a temporary file
  next to the target, ``os.link`` it to the final name (fails if the name
  exists), unlink the temporary;
* :class:`MemoryCommitHandler` -- ``memory://`` (one process): check and
  write under a process-wide lock;
* :class:`UnsafeStoreHandler` -- any other store until a handler for it is
  configured: reads work, commits are refused (concurrent writers could
  overwrite each other's versions).

A handler is chosen per table by :func:`handler_for` from the URI scheme and
the storage options; it is created lazily from the :class:`ObjectStore` and
never pickled (executors do not commit).
"""
from __future__ import annotations

import os
import threading
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..errors import UnsupportedFeatureError
from ..format.naming import VERSIONS_DIR, ManifestNaming, detect_naming, parse_manifest_name
from .objectstore import FileInfo, ObjectStore


@dataclass(frozen=True)
class ManifestLocation:
    """Where the manifest of one committed version is: ``path`` relative to the
    table root, its naming scheme and, when known, its size in bytes."""

    version: int
    path: str
    naming: ManifestNaming
    size: int | None = None


class CommitHandler(ABC):
    """Version discovery and atomic commits for the table at ``store``."""

    def __init__(self, store: ObjectStore):
        self.store = store

    # ------------------------------------------------------------ discovery
    @abstractmethod
    def list_versions(self) -> list[ManifestLocation]:
        """Every committed version, ascending (a table mixing V1 and V2 names
        is refused with CorruptTableError)."""

    def latest(self) -> ManifestLocation | None:
        """The newest committed version (None: no table here)."""
        versions = self.list_versions()
        return versions[-1] if versions else None

    def location(self, version: int, naming: ManifestNaming | None = None) -> ManifestLocation | None:
        """Where version ``version`` is, if it exists. Tries the given naming
        scheme, else V2 then V1, without listing."""
        for scheme in [naming] if naming else [ManifestNaming.V2, ManifestNaming.V1]:
            rel = scheme.path(version)
            try:
                size = self.store.size(rel)
            except FileNotFoundError:
                continue
            return ManifestLocation(version, rel, scheme, size)
        return None

    # -------------------------------------------------------------- commits
    @abstractmethod
    def commit(self, version: int, naming: ManifestNaming, data: bytes) -> ManifestLocation | None:
        """Atomically make ``data`` the manifest of ``version``. Returns its
        location, or None when another writer committed that version first."""

    def remove_version(self, version: int, path: str) -> None:
        """Forget a version (vacuum): its manifest file, and whatever the
        handler keeps about it."""
        self.store.delete(path)

    @abstractmethod
    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        """Atomically create the small file ``rel`` (tags, branch files); False
        if it exists."""

    def describe(self) -> str:
        return type(self).__name__


def _listed_versions(store: ObjectStore) -> list[ManifestLocation]:
    infos: list[FileInfo] = store.list_dir(VERSIONS_DIR)
    detect_naming([i.name for i in infos])
    out = []
    for info in infos:
        parsed = parse_manifest_name(info.name)
        if parsed:
            out.append(ManifestLocation(parsed[1], f"{VERSIONS_DIR}/{info.name}", parsed[0], info.size or None))
    out.sort(key=lambda loc: loc.version)
    return out


class LocalCommitHandler(CommitHandler):
    """Local file systems: write-then-link, so a manifest appears whole or not
    at all and an existing name is never replaced."""

    def list_versions(self) -> list[ManifestLocation]:
        return _listed_versions(self.store)

    def commit(self, version, naming, data):
        rel = naming.path(version)
        if not self.put_if_not_exists(rel, data):
            return None
        return ManifestLocation(version, rel, naming, len(data))

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        target = self.store.path(rel)
        d = os.path.dirname(target)
        os.makedirs(d, exist_ok=True)
        # The temporary name does not end in ".manifest": readers ignore it.
        tmp = os.path.join(d, f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, target)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)


_MEMORY_LOCK = threading.Lock()


class MemoryCommitHandler(CommitHandler):
    """``memory://``: the filesystem lives in one process, so a check-and-write
    under a process-wide lock is atomic for it."""

    def list_versions(self) -> list[ManifestLocation]:
        return _listed_versions(self.store)

    def commit(self, version, naming, data):
        rel = naming.path(version)
        if not self.put_if_not_exists(rel, data):
            return None
        return ManifestLocation(version, rel, naming, len(data))

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        target = self.store.path(rel)
        with _MEMORY_LOCK:
            if self.store.fs.exists(target):
                return False
            self.store.fs.pipe_file(target, data)
            return True


class UnsafeStoreHandler(CommitHandler):
    """A store with no put-if-not-exists lance_ops can rely on: readable,
    never committed to."""

    def list_versions(self) -> list[ManifestLocation]:
        return _listed_versions(self.store)

    def _refuse(self):
        raise UnsupportedFeatureError(
            f"{self.store.scheme}:// has no atomic put-if-not-exists in lance_ops; commits to "
            f"{self.store.root} are refused (concurrent writers could overwrite each other's "
            "versions). Use a local path, or configure an external manifest store."
        )

    def commit(self, version, naming, data):
        self._refuse()

    def put_if_not_exists(self, rel, data):
        self._refuse()


def handler_for(store: ObjectStore) -> CommitHandler:
    """The commit handler for ``store``'s scheme and storage options."""
    if store.is_local:
        return LocalCommitHandler(store)
    if store.scheme == "memory":
        return MemoryCommitHandler(store)
    return UnsafeStoreHandler(store)
