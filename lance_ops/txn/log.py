"""The version log of a table: ``_versions/`` manifests and transaction files.

Latest-version discovery is a listing of ``_versions/`` (as pylance does on a
local file system; it ignores the hint file there, and so do we for reading).
A directory mixing V1 and V2 manifest names is refused. Version ``v`` is found
under its V2 name, then its V1 name.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from ..errors import CorruptTableError, TableNotFoundError
from ..format.features import check_readable, uses_stable_row_ids
from ..format.manifest import ManifestFile, decode_manifest_file
from ..format.naming import (
    HINT_FILE,
    TRANSACTIONS_DIR,
    VERSIONS_DIR,
    ManifestNaming,
    detect_naming,
    parse_manifest_name,
)
from ..format.proto import table_pb2
from ..format.schema import Schema
from ..storage.objectstore import FileInfo, ObjectStore
from .operations import Transaction


class TableLog:
    """Reads the manifests and transactions of the table at ``store``."""

    def __init__(self, store: ObjectStore):
        self.store = store

    # ---------------------------------------------------------------- listing
    def manifests(self) -> list[tuple[int, ManifestNaming, FileInfo]]:
        """Every committed manifest: (version, naming scheme, file info), sorted."""
        infos = self.store.list_dir(VERSIONS_DIR)
        detect_naming([i.name for i in infos])
        out = []
        for info in infos:
            parsed = parse_manifest_name(info.name)
            if parsed:
                out.append((parsed[1], parsed[0], info))
        out.sort(key=lambda x: x[0])
        return out

    def naming(self) -> ManifestNaming | None:
        return detect_naming([i.name for i in self.store.list_dir(VERSIONS_DIR)])

    def latest_version(self) -> int | None:
        ms = self.manifests()
        return ms[-1][0] if ms else None

    def exists(self) -> bool:
        return self.latest_version() is not None

    # ---------------------------------------------------------------- reading
    def read_manifest(self, version: int, naming: ManifestNaming | None = None) -> ManifestFile:
        schemes = [naming] if naming else [ManifestNaming.V2, ManifestNaming.V1]
        for scheme in schemes:
            rel = scheme.path(version)
            try:
                data = self.store.read_bytes(rel)
            except FileNotFoundError:
                continue
            return decode_manifest_file(data, self.store.path(rel))
        raise TableNotFoundError(f"version {version} of table {self.store.root} does not exist")

    def read_transaction(self, version: int, mf: ManifestFile | None = None) -> Transaction | None:
        """The transaction that produced ``version`` (inline section first, then
        the ``.txn`` file); None if neither exists."""
        mf = mf or self.read_manifest(version)
        if mf.transaction_bytes is not None:
            return Transaction.from_bytes(mf.transaction_bytes, f"version {version} inline transaction")
        name = mf.manifest.transaction_file
        if not name:
            return None
        rel = f"{TRANSACTIONS_DIR}/{name}"
        try:
            data = self.store.read_bytes(rel)
        except FileNotFoundError:
            return None
        return Transaction.from_bytes(data, self.store.path(rel))

    def write_hint(self, version: int) -> None:
        """Best-effort ``latest_version_hint.json`` (pylance writes it after every
        commit; readers do not depend on it)."""
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


def open_snapshot(store: ObjectStore, version: int | None = None) -> Snapshot:
    """The latest (or given) version of the table at ``store``."""
    log = TableLog(store)
    ms = log.manifests()
    if not ms:
        raise TableNotFoundError(f"no Lance table at {store.root} (no manifests in _versions/)")
    naming = ms[-1][1]
    if version is None:
        version = ms[-1][0]
    mf = log.read_manifest(version, naming)
    if mf.manifest.version != version:
        raise CorruptTableError(
            f"manifest file of version {version} says it is version {mf.manifest.version}",
            store.path(naming.path(version)),
        )
    check_readable(mf.manifest, f"at {store.root}")
    return Snapshot(store, version, mf, naming)
