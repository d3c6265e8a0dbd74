"""The version log of a table: its manifests and transaction files.

Which versions exist and where their manifests are is the commit handler's
answer (:mod:`lance_ops.storage.commit`): a listing of ``_versions/`` on
stores with put-if-not-exists (as pylance does on a local file system; it
ignores the hint file there, and so do we for reading), an external manifest
store otherwise. A directory mixing V1 and V2 manifest names is refused.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import cached_property

from ..errors import CorruptTableError, TableNotFoundError, UnsupportedFeatureError
from ..format.features import check_readable, uses_stable_row_ids
from ..format.manifest import ManifestFile, decode_manifest_file
from ..format.messages import copy_message
from ..format.naming import HINT_FILE, TRANSACTIONS_DIR, ManifestNaming
from ..format.proto import table_pb2
from ..format.schema import Schema
from ..storage.commit import ManifestLocation
from ..storage.objectstore import ObjectStore
from ..storage.resolve import commit_handler
from .bases import attach_bases
from .operations import Transaction

#: Transaction file names as pylance and lance_ops write them.
_TXN_NAME = re.compile(r"\d+-[0-9a-fA-F-]{36}\.txn")


class TableLog:
    """Reads the manifests and transactions of the table at ``store``."""

    def __init__(self, store: ObjectStore):
        self.store = store
        self.handler = commit_handler(store)

    # ---------------------------------------------------------------- listing
    def versions(self) -> list[ManifestLocation]:
        """Every committed version, ascending."""
        return self.handler.list_versions()

    def latest(self) -> ManifestLocation | None:
        return self.handler.latest()

    def latest_version(self) -> int | None:
        loc = self.latest()
        return loc.version if loc else None

    def exists(self) -> bool:
        return self.latest() is not None

    # ---------------------------------------------------------------- reading
    def read_manifest(self, version: int | ManifestLocation, naming: ManifestNaming | None = None) -> ManifestFile:
        """The manifest file of a version (a number, or a location from
        :meth:`versions`)."""
        v = version.version if isinstance(version, ManifestLocation) else version
        cached = self.store.manifest_cache.get(v)
        if cached is not None:
            return cached[1]
        if not isinstance(version, ManifestLocation):
            # The committed manifest's name is known: read it (one request)
            # before asking the handler where it is (a lookup, then the read).
            guess = (naming or ManifestNaming.V2).path(version)
            try:
                data = self.store.read_bytes(guess)
            except FileNotFoundError:
                data = None
            if data is not None:
                mf = decode_manifest_file(data, self.store.path(guess))
                if mf.manifest.version == version:
                    remember(self.store, ManifestLocation(version, guess, naming or ManifestNaming.V2, len(data)), mf)
                    return mf
        loc = version if isinstance(version, ManifestLocation) else self.handler.location(version, naming)
        if loc is not None:
            try:
                data = self.store.read_bytes(loc.path)
            except FileNotFoundError:
                data = None
            if data is not None:
                mf = decode_manifest_file(data, self.store.path(loc.path))
                if mf.manifest.version == loc.version:
                    remember(self.store, loc, mf)
                return mf
        v = loc.version if loc is not None else version
        raise TableNotFoundError(f"version {v} of table {self.store.root} does not exist")

    def read_transaction(self, version: int, mf: ManifestFile | None = None) -> Transaction | None:
        """The transaction that produced ``version`` (inline section first, then
        the ``.txn`` file); None if neither exists."""
        mf = mf or self.read_manifest(version)
        if mf.transaction_bytes is not None:
            try:
                return Transaction.from_bytes(mf.transaction_bytes)
            except CorruptTableError as e:
                loc = self.handler.location(version)
                where = self.store.path(loc.path) if loc is not None else f"manifest of version {version}"
                raise CorruptTableError(f"{e} (the inline transaction of version {version})", where) from e
        name = mf.manifest.transaction_file
        if not name:
            return None
        rel = f"{TRANSACTIONS_DIR}/{name}"
        try:
            data = self.store.read_bytes(rel)
        except FileNotFoundError:
            return None
        txn = Transaction.from_bytes(data, self.store.path(rel))
        if _TXN_NAME.fullmatch(name) and name != txn.file_name:
            # Named {read_version}-{uuid}.txn by every writer: another
            # commit's transaction copied over this one.
            raise CorruptTableError(
                f"transaction file of version {version} holds the transaction {txn.file_name}",
                self.store.path(rel),
            )
        return txn

    def write_hint(self, version: int) -> None:
        """Best-effort ``latest_version_hint.json`` (pylance writes it after every
        commit on stores whose listings are unsorted, not on S3; readers do not
        depend on it)."""
        if not self.handler.writes_hint:
            return
        try:
            self.store.write_bytes(HINT_FILE, json.dumps({"version": version}, separators=(",", ":")).encode())
        except Exception:
            pass


@dataclass
class Snapshot:
    """One version of a table: its manifest file and what derives from it."""

    store: ObjectStore
    version: int
    file: ManifestFile
    naming: ManifestNaming

    @property
    def manifest(self) -> table_pb2.Manifest:
        return self.file.manifest

    @property
    def fragments(self):
        return self.file.manifest.fragments

    @property
    def indices(self) -> list[table_pb2.IndexMetadata]:
        return self.file.indices

    @cached_property
    def schema(self) -> Schema:
        return Schema.from_proto(self.manifest.fields, dict(self.manifest.schema_metadata))

    @property
    def stable_row_ids(self) -> bool:
        return uses_stable_row_ids(self.manifest)

    @property
    def data_format_version(self) -> str:
        df = self.manifest.data_format
        if df.version:
            return df.version
        for frag in self.fragments:
            for f in frag.files:
                return f"{f.file_major_version}.{f.file_minor_version}"
        return "2.2"

    def new_data_file_version(self, operation: str) -> str:
        """The file format version of data files a change of this table
        writes; a legacy (0.x) table refuses (UnsupportedFeatureError) before
        anything is written: pylance's file codec writes 2.x files only, and
        pylance refuses a table mixing legacy and 2.x data files."""
        version = self.data_format_version
        if version.startswith("0."):
            raise UnsupportedFeatureError(
                f"{operation} writes data files, and the table at {self.store.root} has the legacy data "
                f"storage version {version}: lance_ops writes data files through pylance's codec, which "
                "writes 2.x files only, and a table cannot mix the two. delete, dropColumns, renameColumn, "
                "setProperties, restoreToVersion, tags and vacuum work on legacy tables; to change data, "
                "migrate the table to a 2.x data storage version first (rewrite it with pylance or "
                "LanceDB using data_storage_version='2.0')"
            )
        return version

    def with_schema(self, schema: Schema) -> "Snapshot":
        """This version as it would be with ``schema`` (in memory, for planning
        a change that also changes the schema; nothing is written)."""
        m = copy_message(self.manifest)
        m.ClearField("fields")
        m.fields.extend(schema.to_proto())
        m.ClearField("schema_metadata")
        for k, v in schema.metadata.items():
            m.schema_metadata[k] = v
        return Snapshot(self.store, self.version,
                        ManifestFile(m, self.file.transaction_bytes, self.file.indices, 0, self.file.dictionaries),
                        self.naming)

    def fragment(self, fragment_id: int) -> table_pb2.DataFragment | None:
        for f in self.fragments:
            if f.id == fragment_id:
                return f
        return None

    def num_rows(self) -> int:
        """Live rows, from metadata only."""
        return sum(f.physical_rows - (f.deletion_file.num_deleted_rows if f.HasField("deletion_file") else 0) for f in self.fragments)

    def num_deleted_rows(self) -> int:
        return sum(f.deletion_file.num_deleted_rows for f in self.fragments if f.HasField("deletion_file"))


#: How many manifests an ObjectStore keeps (:attr:`ObjectStore.manifest_cache`).
MANIFEST_CACHE_SIZE = 8


_CACHE_LOCK = threading.Lock()


def remember(store: ObjectStore, loc: ManifestLocation, mf: ManifestFile) -> None:
    """Keep a committed version's manifest on ``store`` (they never change;
    vacuum forgets the versions it removes)."""
    cache = store.manifest_cache
    with _CACHE_LOCK:
        cache.pop(loc.version, None)
        cache[loc.version] = (loc, mf)
        while len(cache) > MANIFEST_CACHE_SIZE:
            cache.pop(next(iter(cache)))


def forget(store: ObjectStore, version: int) -> None:
    with _CACHE_LOCK:
        store.manifest_cache.pop(version, None)


def open_snapshot(store: ObjectStore, version: int | None = None) -> Snapshot:
    """The latest (or given) version of the table at ``store``. A version
    this store read or committed before is not fetched again; "latest" always
    asks the commit handler."""
    cached = store.manifest_cache.get(version) if version is not None else None
    if cached is not None:
        attach_bases(store, cached[1].manifest)
        return Snapshot(store, version, cached[1], cached[0].naming)
    log = TableLog(store)
    if version is None:
        loc = log.latest()
        if loc is None:
            raise TableNotFoundError(f"no Lance table at {store.root} (no manifests in _versions/)")
        cached = store.manifest_cache.get(loc.version)
        if cached is not None:
            attach_bases(store, cached[1].manifest)
            return Snapshot(store, loc.version, cached[1], cached[0].naming)
    else:
        # A given version is looked up directly (it stays readable even when
        # the latest cannot be loaded).
        loc = log.handler.location(version)
        if loc is None:
            if log.latest() is None:
                raise TableNotFoundError(f"no Lance table at {store.root} (no manifests in _versions/)")
            raise TableNotFoundError(f"version {version} of table {store.root} does not exist")
    mf = log.read_manifest(loc)
    if mf.manifest.version != loc.version:
        raise CorruptTableError(
            f"manifest file of version {loc.version} says it is version {mf.manifest.version}",
            store.path(loc.path),
        )
    check_readable(mf.manifest, f"at {store.root}")
    attach_bases(store, mf.manifest)
    remember(store, loc, mf)
    return Snapshot(store, loc.version, mf, loc.naming)


def latest_or_none(store: ObjectStore) -> Snapshot | None:
    """The latest version, or None when ``store`` holds no table yet."""
    if not TableLog(store).exists():
        return None
    return open_snapshot(store)


def open_staged(store: ObjectStore, rel: str) -> Snapshot:
    """A staged (not committed) manifest published for pre-commit checks."""
    try:
        data = store.read_bytes(rel)
    except FileNotFoundError as e:
        raise TableNotFoundError(f"staged manifest {rel} of {store.root} is gone (its commit finished)") from e
    mf = decode_manifest_file(data, store.path(rel))
    check_readable(mf.manifest, f"at {store.root}")
    return Snapshot(store, mf.manifest.version, mf, ManifestNaming.V2)
