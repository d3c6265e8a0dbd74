"""Which commit handler a table gets, and the external manifest stores.

Resolution sits above everything it chooses from: :class:`ObjectStore` knows
files, :mod:`.commit` the handlers that need no other service, :mod:`.external`
the protocol over a manifest store, and the stores (:mod:`.sqlite_store`,
:mod:`.postgres_store`, :mod:`.dynamodb_store`) their own service. This
module picks among them from a store's scheme and storage options -- so none
of them imports another layer's peer, and ``ObjectStore`` does not build its
own handler.
"""
from __future__ import annotations

import os
import threading

from ..errors import InvalidArgumentError
from .commit import (
    CommitHandler,
    ConditionalPutHandler,
    LocalCommitHandler,
    MemoryCommitHandler,
    UnsafeStoreHandler,
)
from .dynamodb_store import DynamoDBManifestStore
from .external import ExternalStoreHandler, ManifestStore
from .objectstore import ObjectStore, redact_uri
from .postgres_store import PostgresManifestStore
from .sqlite_store import SQLiteManifestStore


def commit_handler(store: ObjectStore) -> CommitHandler:
    """How versions of the table at ``store`` are found and committed: the
    handler :func:`handler_for` picks, created once per store (kept on it as
    ``store.resolved_handler``; executors' unpickled stores start without)."""
    if store.resolved_handler is None:
        store.resolved_handler = handler_for(store)
    return store.resolved_handler


def handler_for(store: ObjectStore) -> CommitHandler:
    """The commit handler for ``store``'s scheme and storage options: an
    external manifest store when ``commit_store`` is set, else the store's
    own put-if-not-exists."""
    if store.commit_store:
        return ExternalStoreHandler(store, open_manifest_store(store.commit_store, store.storage_options))
    if store.is_local:
        return LocalCommitHandler(store)
    if store.scheme == "memory":
        return MemoryCommitHandler(store)
    if store.is_s3:
        return ConditionalPutHandler(store)
    return UnsafeStoreHandler(store)


_STORES: dict[tuple, ManifestStore] = {}
_STORES_LOCK = threading.Lock()

#: Storage option keys a store's connection depends on.
_CONNECTION_KEYS = ("dynamodb_endpoint", "aws_region", "region", "aws_access_key_id", "access_key_id",
                    "aws_secret_access_key", "secret_access_key", "aws_session_token", "session_token",
                    "aws_endpoint", "endpoint")


def open_manifest_store(uri: str, options: dict | None = None) -> ManifestStore:
    """The store named by ``uri`` (the ``commit_store`` storage option); one
    connection per store and process, reused by every table."""
    opts = dict(options or {})
    key = (os.getpid(), uri, tuple((k, opts.get(k)) for k in _CONNECTION_KEYS))
    with _STORES_LOCK:
        found = _STORES.get(key)
        if found is None:
            found = _STORES[key] = _open(uri, opts)
        return found


def _open(uri: str, options: dict) -> ManifestStore:
    scheme = uri.split(":", 1)[0].lower()
    if scheme == "sqlite":
        return SQLiteManifestStore.from_uri(uri)
    if scheme in ("postgresql", "postgres"):
        return PostgresManifestStore(uri)
    if scheme == "dynamodb":
        return DynamoDBManifestStore.from_uri(uri, options)
    raise InvalidArgumentError(
        f"unknown commit store {redact_uri(uri)!r}: use sqlite:///path/commits.db, "
        "postgresql://user@host:5432/db or dynamodb://<table>"
    )
