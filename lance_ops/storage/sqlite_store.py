"""The SQLite manifest store (``commit_store=sqlite:///path/commits.db``).

One database file, in WAL mode, safe for any number of processes on one
machine (SQLite's file locks serialize writers; a writer waits up to
:data:`BUSY_TIMEOUT_S` for the lock). Not for file systems shared between
machines (NFS locks are unreliable): use PostgreSQL or DynamoDB there.
``commit_store=sqlite`` alone uses ``~/.lance_ops/commits.db``.
"""
from __future__ import annotations

import os
import sqlite3
import threading

from ..errors import CommitStoreError
from .external import Entry, ManifestStore

BUSY_TIMEOUT_S = 60.0
TABLE = "lance_ops_commits"
DEFAULT_PATH = os.path.join("~", ".lance_ops", "commits.db")

_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    base_uri TEXT NOT NULL,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    size INTEGER,
    committer TEXT,
    PRIMARY KEY (base_uri, version)
)"""


def path_of(uri: str) -> str:
    """The database file of a ``sqlite:`` URI: ``sqlite:///abs/path.db`` (and
    ``sqlite:////abs/path.db``) name ``/abs/path.db``; ``sqlite`` alone the
    default file."""
    rest = uri[len("sqlite"):]
    if rest in ("", ":", "://"):
        return os.path.expanduser(DEFAULT_PATH)
    if not rest.startswith(":"):
        raise CommitStoreError(f"not a sqlite URI: {uri!r} (use sqlite:///path/commits.db)")
    rest = rest[1:]
    if rest.startswith("//"):
        rest = rest[2:]
        if rest and not rest.startswith("/"):
            raise CommitStoreError(f"sqlite URIs name a local file: sqlite:///path/commits.db, not {uri!r}")
    if not rest.strip("/"):
        raise CommitStoreError(f"the sqlite commit store URI {uri!r} names no file")
    return os.path.abspath(os.path.expanduser("/" + rest.lstrip("/") if rest.startswith("/") else rest))


class SQLiteManifestStore(ManifestStore):
    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            self._conn.execute("PRAGMA journal_mode=WAL")
            # A claimed version is committed: make the claim durable.
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute(_SCHEMA)
        except sqlite3.Error as e:
            raise CommitStoreError(f"cannot open the SQLite commit store {path}: {e}") from e

    @classmethod
    def from_uri(cls, uri: str) -> "SQLiteManifestStore":
        return cls(path_of(uri))

    def describe(self) -> str:
        return f"sqlite:///{self.path.lstrip('/')}"

    def _query(self, sql: str, params: tuple) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as e:
                raise CommitStoreError(f"{self.describe()}: {e}") from e

    def _write(self, sql: str, params: tuple) -> int:
        with self._lock:
            try:
                return self._conn.execute(sql, params).rowcount
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as e:
                raise CommitStoreError(f"{self.describe()}: {e}") from e

    def get(self, base_uri, version):
        rows = self._query(f"SELECT version, path, size FROM {TABLE} WHERE base_uri = ? AND version = ?",
                           (base_uri, version))
        return Entry(*rows[0]) if rows else None

    def latest(self, base_uri):
        rows = self._query(f"SELECT version, path, size FROM {TABLE} WHERE base_uri = ? "
                           "ORDER BY version DESC LIMIT 1", (base_uri,))
        return Entry(*rows[0]) if rows else None

    def since(self, base_uri, version):
        rows = self._query(f"SELECT version, path, size FROM {TABLE} WHERE base_uri = ? AND version > ? "
                           "ORDER BY version", (base_uri, version))
        return [Entry(*r) for r in rows]

    def put_if_not_exists(self, base_uri, version, path, size):
        try:
            self._write(f"INSERT INTO {TABLE} (base_uri, version, path, size, committer) VALUES (?, ?, ?, ?, ?)",
                        (base_uri, version, path, size, self.committer))
            return True
        except sqlite3.IntegrityError:
            return False

    def put_if_exists(self, base_uri, version, path, size):
        n = self._write(f"UPDATE {TABLE} SET path = ?, size = ?, committer = ? WHERE base_uri = ? AND version = ?",
                        (path, size, self.committer, base_uri, version))
        return n == 1

    def delete(self, base_uri, version):
        self._write(f"DELETE FROM {TABLE} WHERE base_uri = ? AND version = ?", (base_uri, version))
