"""The PostgreSQL manifest store (``commit_store=postgresql://user@host:5432/db``).

Entries live in the table ``lance_ops_commits`` (created on first use);
put-if-not-exists is ``INSERT ... ON CONFLICT DO NOTHING`` on the primary key
``(base_uri, version)``. Needs psycopg 3 (``pip install 'lance_ops[postgres]'``).
The URI is libpq's: credentials may come from it, ``PGPASSWORD`` or
``~/.pgpass``; a password in the URI is never shown.
"""
from __future__ import annotations

import threading

from ..errors import CommitStoreError
from .external import Entry, ManifestStore
from .objectstore import redact_uri

TABLE = "lance_ops_commits"

_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    base_uri TEXT NOT NULL,
    version BIGINT NOT NULL,
    path TEXT NOT NULL,
    size BIGINT,
    committer TEXT,
    PRIMARY KEY (base_uri, version)
)"""


class PostgresManifestStore(ManifestStore):
    def __init__(self, uri: str):
        try:
            import psycopg  # noqa: F401
        except ImportError as e:
            raise CommitStoreError(
                "commit_store=postgresql://... needs psycopg 3: pip install 'lance_ops[postgres]'"
            ) from e
        self.uri = uri
        self._conn = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        return redact_uri(self.uri)

    def _connect(self):
        import psycopg

        try:
            conn = psycopg.connect(self.uri, autocommit=True, connect_timeout=30)
        except psycopg.Error as e:
            raise CommitStoreError(f"cannot connect to the PostgreSQL commit store {self.describe()}: "
                                   f"{redact_uri(str(e))}") from None
        try:
            conn.execute(_SCHEMA)
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            pass  # another process created it at the same moment
        return conn

    def _run(self, sql: str, params: tuple, fetch: bool):
        import psycopg

        with self._lock:
            for attempt in (0, 1):
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                try:
                    cur = self._conn.execute(sql, params)
                    return cur.fetchall() if fetch else cur.rowcount
                except psycopg.OperationalError as e:
                    # A dropped connection: reconnect and repeat a read once. A
                    # write is never repeated -- it may have happened, and a
                    # repeated claim would report a lost race for a won one.
                    self._conn = None
                    if attempt or not fetch:
                        raise CommitStoreError(f"{self.describe()}: {redact_uri(str(e))}") from None
                except psycopg.Error as e:
                    raise CommitStoreError(f"{self.describe()}: {redact_uri(str(e))}") from None

    def get(self, base_uri, version):
        rows = self._run(f"SELECT version, path, size FROM {TABLE} WHERE base_uri = %s AND version = %s",
                         (base_uri, version), True)
        return Entry(*rows[0]) if rows else None

    def latest(self, base_uri):
        rows = self._run(f"SELECT version, path, size FROM {TABLE} WHERE base_uri = %s "
                         "ORDER BY version DESC LIMIT 1", (base_uri,), True)
        return Entry(*rows[0]) if rows else None

    def since(self, base_uri, version):
        rows = self._run(f"SELECT version, path, size FROM {TABLE} WHERE base_uri = %s AND version > %s "
                         "ORDER BY version", (base_uri, version), True)
        return [Entry(*r) for r in rows]

    def put_if_not_exists(self, base_uri, version, path, size):
        n = self._run(f"INSERT INTO {TABLE} (base_uri, version, path, size, committer) VALUES (%s, %s, %s, %s, %s) "
                      "ON CONFLICT DO NOTHING", (base_uri, version, path, size, self.committer), False)
        return n == 1

    def put_if_exists(self, base_uri, version, path, size):
        n = self._run(f"UPDATE {TABLE} SET path = %s, size = %s, committer = %s WHERE base_uri = %s AND version = %s",
                      (path, size, self.committer, base_uri, version), False)
        return n == 1

    def delete(self, base_uri, version):
        self._run(f"DELETE FROM {TABLE} WHERE base_uri = %s AND version = %s", (base_uri, version), False)
