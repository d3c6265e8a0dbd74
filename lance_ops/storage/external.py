"""The external manifest store: commits through a key-value store with
put-if-not-exists, for object stores without one (or that cannot be trusted
with one).

The store maps ``(base_uri, version)`` to the path of that version's manifest
(the format's "External Manifest Store" protocol, as pylance implements it).
A commit of version v, by :class:`ExternalStoreHandler`:

1. *stage*: write the manifest to ``_versions/{final name}-{uuid}`` (a name
   readers ignore);
2. *claim*: put-if-not-exists ``(base_uri, v) -> staged path`` in the store.
   Refused: another writer committed v -- delete the staged file, lose the
   race. Accepted: **v is committed**;
3. *copy* the staged manifest to its final name ``_versions/{final name}``;
4. *flip* the entry to the final path (put-if-exists);
5. delete the staged file.

Steps 3-5 can be done by anyone: a reader that finds the latest entry still
pointing at a staged path finishes them before loading (and refuses to load,
with a clear error, when it cannot). A writer killed after step 1 leaves an
ignored file (vacuum removes it); after step 2, 3 or 4 the next reader
finishes its commit; nothing committed is lost.

Stores (:func:`lance_ops.storage.resolve.open_manifest_store`, from the ``commit_store`` storage
option): ``sqlite:///path/commits.db`` (:mod:`.sqlite_store`),
``postgresql://user@host:port/db`` (:mod:`.postgres_store`),
``dynamodb://<table>`` (:mod:`.dynamodb_store`; pylance's table layout, so
pylance and lance_ops commit to one table concurrently).

Small files that must be created exclusively (tags) are claimed in the store
too, under ``{base_uri}#{path}``, so tags work on any object store.
"""
from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..errors import CorruptTableError
from ..format.naming import ManifestNaming, parse_manifest_name
from .commit import CommitHandler, ManifestLocation, _listed_versions, latest_listed
from .objectstore import ObjectStore

log = logging.getLogger("lance_ops")


@dataclass(frozen=True)
class Entry:
    """One row of the store: ``path`` as the store keeps it."""

    version: int
    path: str
    size: int | None = None


class ManifestStore(ABC):
    """A key-value store with conditional writes, keyed by
    ``(base_uri, version)``. Implementations must be safe to share between
    the threads of a process (vacuum deletes from a pool)."""

    #: Who wrote an entry (DynamoDB's ``committer`` attribute; pylance writes
    #: "lancedb").
    committer = "lance_ops"

    # ---- how a table and its manifests are named in the store
    def base_uri(self, store: ObjectStore) -> str:
        """The table's key: its root URI."""
        return store.root

    def stored_path(self, store: ObjectStore, rel: str) -> str:
        """How a manifest path (relative to the root) is kept."""
        return rel

    def relative_path(self, store: ObjectStore, path: str) -> str:
        """The inverse of :meth:`stored_path`."""
        return path

    # ---- the store
    @abstractmethod
    def get(self, base_uri: str, version: int) -> Entry | None:
        """The entry of ``version``, if any."""

    @abstractmethod
    def latest(self, base_uri: str) -> Entry | None:
        """The entry with the highest version, if any."""

    @abstractmethod
    def since(self, base_uri: str, version: int) -> list[Entry]:
        """Entries with versions above ``version``, ascending."""

    @abstractmethod
    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        """Create the entry; False if it exists."""

    @abstractmethod
    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        """Replace the entry; False if it does not exist."""

    @abstractmethod
    def delete(self, base_uri: str, version: int) -> None:
        """Remove the entry (no error if it does not exist)."""

    @abstractmethod
    def describe(self) -> str:
        """The store, fit for logs and errors (no credentials)."""


def _naming_of(name: str) -> ManifestNaming:
    """The naming scheme of a final or staged manifest file name (pylance:
    a V2 name has a '.' at position 20)."""
    parsed = parse_manifest_name(name)
    if parsed:
        return parsed[0]
    return ManifestNaming.V2 if len(name) > 20 and name[20] == "." else ManifestNaming.V1


def _is_final(path: str) -> bool:
    return path.endswith(".manifest")


class ExternalStoreHandler(CommitHandler):
    """Commits through a :class:`ManifestStore` (the module docstring has the
    protocol). The store is the truth for the versions it holds; a table it
    has no entry for (committed before the store was configured) is found
    by listing, as pylance does."""

    def __init__(self, store: ObjectStore, kv: ManifestStore):
        super().__init__(store)
        self.kv = kv
        self.base = kv.base_uri(store)
        self.writes_hint = store.is_local

    def describe(self) -> str:
        return f"{type(self).__name__}({self.kv.describe()})"

    # ------------------------------------------------------------ discovery
    def list_versions(self) -> list[ManifestLocation]:
        listed = _listed_versions(self.store)
        top = listed[-1].version if listed else 0
        # Committed versions whose manifest is not at its final name yet.
        listed += [self._resolve(e) for e in self.kv.since(self.base, top)]
        return listed

    def latest(self) -> ManifestLocation | None:
        entry = self.kv.latest(self.base)
        if entry is None:
            return latest_listed(self.store)
        return self._resolve(entry)

    def location(self, version: int, naming: ManifestNaming | None = None) -> ManifestLocation | None:
        entry = self.kv.get(self.base, version)
        if entry is not None:
            return self._resolve(entry)
        loc = super().location(version, naming)
        if loc is not None:
            # A version committed without the store: record it (best effort,
            # as pylance does), so later lookups are one store read.
            try:
                self.kv.put_if_not_exists(self.base, version, self.kv.stored_path(self.store, loc.path), loc.size or 0)
            except Exception as e:  # noqa: BLE001 - reading must not fail on it
                log.debug("could not record version %d of %s in %s: %s", version, self.store.root,
                          self.kv.describe(), e)
        return loc

    def _resolve(self, entry: Entry) -> ManifestLocation:
        rel = self.kv.relative_path(self.store, entry.path)
        name = rel.rsplit("/", 1)[-1]
        naming = _naming_of(name)
        if _is_final(rel):
            return ManifestLocation(entry.version, rel, naming, entry.size)
        return self.finish(entry.version, rel, naming, entry.size)

    # -------------------------------------------------------------- commits
    def commit(self, version, naming, data):
        final = naming.path(version)
        staged = f"{final}-{uuid.uuid4()}"
        self._stage(staged, data)
        if not self._claim(version, staged, len(data)):
            # A client that retried a claim that had succeeded sees it
            # refused: the entry then names our staged file.
            entry = self.kv.get(self.base, version)
            if entry is None or self.kv.relative_path(self.store, entry.path) != staged:
                self.store.delete(staged)
                return None
        try:
            return self.finish(version, staged, naming, len(data))
        except Exception as e:  # noqa: BLE001 - committed: the next reader finishes it
            log.warning("version %d of %s is committed but finishing its manifest failed (%s); the next "
                        "reader finishes it", version, self.store.root, e)
            return ManifestLocation(version, staged, naming, len(data))

    def finish(self, version: int, staged: str, naming: ManifestNaming, size: int | None) -> ManifestLocation:
        """Steps 3-5 for a committed version whose entry points at the staged
        manifest ``staged``; safe to run by several processes at once.
        Raises CorruptTableError when the manifest cannot be finished (the
        version is then not loaded)."""
        final = naming.path(version)
        try:
            self._copy(staged, final)
        except FileNotFoundError:
            # Another process finished it (copied, flipped, deleted the staged file).
            try:
                size = self.store.size(final)
            except FileNotFoundError:
                raise CorruptTableError(
                    f"version {version} of {self.store.root} is committed in {self.kv.describe()} with its "
                    f"manifest staged at {staged}, but neither that file nor {final} exists; refusing to "
                    "load it (restore the manifest file, or remove the entry to drop the version)",
                    self.store.path(staged),
                ) from None
            return ManifestLocation(version, final, naming, size)
        except Exception as e:
            raise CorruptTableError(
                f"version {version} of {self.store.root} is committed in {self.kv.describe()} with its "
                f"manifest staged at {staged}, and copying it to {final} failed ({type(e).__name__}: {e}); "
                "refusing to load it until the copy succeeds",
                self.store.path(staged),
            ) from e
        if size is None:
            size = self.store.size(final)
        if not self._flip(version, final, size):
            raise CorruptTableError(
                f"the entry of version {version} of {self.store.root} vanished from {self.kv.describe()} "
                "while its manifest was being finished", self.store.path(final),
            )
        self.store.delete(staged)
        return ManifestLocation(version, final, naming, size)

    # The steps, one method each (fault-injection tests kill a writer after each).
    def _stage(self, staged: str, data: bytes) -> None:
        self.store.write_bytes(staged, data)

    def _claim(self, version: int, staged: str, size: int) -> bool:
        return self.kv.put_if_not_exists(self.base, version, self.kv.stored_path(self.store, staged), size)

    def _copy(self, staged: str, final: str) -> None:
        self.store.copy(staged, final)

    def _flip(self, version: int, final: str, size: int) -> bool:
        return self.kv.put_if_exists(self.base, version, self.kv.stored_path(self.store, final), size)

    def remove_version(self, version: int, path: str) -> None:
        # The file first: a reader finding no entry falls back to the file
        # and would record it again.
        self.store.delete(path)
        self.kv.delete(self.base, version)

    # ---------------------------------------------------------- small files
    def _file_key(self, rel: str) -> str:
        return f"{self.base}#{rel}"

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        if self.store.exists(rel):
            return False
        if not self.kv.put_if_not_exists(self._file_key(rel), 0, rel, len(data)):
            return False
        self.store.write_bytes(rel, data)
        return True

    def delete_file(self, rel: str) -> None:
        self.store.delete(rel)
        self.kv.delete(self._file_key(rel), 0)

