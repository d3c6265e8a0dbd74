"""An fsspec-backed object store rooted at a table location.

Everything lance_ops reads or writes besides data file *contents* goes through
:class:`ObjectStore`: manifests, transaction files, deletion files, tags. Data
files are read and written by pylance's file codec (``lance.file``), which
addresses them by URI; :meth:`ObjectStore.codec_uri` gives that URI. For
schemes the codec cannot open itself (``memory://`` and other fsspec-only
filesystems) the store *stages* data files through a local temporary file
(:meth:`codec_staging`), so every fsspec filesystem works.

How versions are committed (an atomic put-if-not-exists of the next
manifest) is not the store's business but its commit handler's
(:attr:`ObjectStore.commit_handler`, :mod:`.commit`).

``storage_options`` go to both fsspec and the codec: keys prefixed ``fsspec.``
go only to fsspec (prefix stripped), keys prefixed ``lance.`` only to the codec;
common object-store credential keys (``aws_access_key_id``, ``aws_endpoint``,
``region``, ...) are translated for s3fs.
"""
from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator
from urllib.parse import urlparse

import fsspec

#: Schemes pylance's file codec opens directly.
CODEC_NATIVE_SCHEMES = {"file", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oss", "hf"}

# s3fs keyword names for object-store option keys the Lance codec understands.
_S3FS_KEYS = {
    "aws_access_key_id": ("key",),
    "access_key_id": ("key",),
    "aws_secret_access_key": ("secret",),
    "secret_access_key": ("secret",),
    "aws_session_token": ("token",),
    "session_token": ("token",),
    "aws_endpoint": ("client_kwargs", "endpoint_url"),
    "endpoint": ("client_kwargs", "endpoint_url"),
    "aws_region": ("client_kwargs", "region_name"),
    "region": ("client_kwargs", "region_name"),
}


@dataclass(frozen=True)
class FileInfo:
    """A listed file: name relative to the listed directory, size, mtime (epoch s)."""

    name: str
    size: int
    mtime: float


def split_storage_options(scheme: str, options: dict[str, str] | None) -> tuple[dict, dict]:
    """(fsspec kwargs, codec storage_options) from user ``storage_options``."""
    fs_kwargs: dict[str, Any] = {}
    codec: dict[str, str] = {}
    for k, v in (options or {}).items():
        if k.startswith("fsspec."):
            fs_kwargs[k[len("fsspec."):]] = v
            continue
        if k.startswith("lance."):
            codec[k[len("lance."):]] = v
            continue
        codec[k] = v
        if scheme in ("s3", "s3a") and k.lower() in _S3FS_KEYS:
            path = _S3FS_KEYS[k.lower()]
            if len(path) == 1:
                fs_kwargs.setdefault(path[0], v)
            else:
                fs_kwargs.setdefault(path[0], {}).setdefault(path[1], v)
    return fs_kwargs, codec


def normalize_uri(uri: str) -> tuple[str, str]:
    """(scheme, root) for a table location. Local paths become absolute paths
    with scheme "file"; other URIs keep their scheme and lose a trailing slash."""
    uri = os.fspath(uri)
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        path = parsed.path if parsed.scheme == "file" else uri
        if parsed.scheme == "file" and parsed.netloc:
            path = "/" + parsed.netloc + parsed.path
        return "file", os.path.abspath(os.path.expanduser(path))
    root = uri.rstrip("/")
    return parsed.scheme, root


class ObjectStore:
    """File operations relative to a table root. Picklable (re-created from
    ``(uri, storage_options)`` in executors)."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None):
        self.uri = os.fspath(uri)
        self.storage_options = dict(storage_options or {})
        self.scheme, self.root = normalize_uri(self.uri)
        fs_kwargs, self.codec_options = split_storage_options(self.scheme, self.storage_options)
        self.fs = fsspec.filesystem(self.scheme, **fs_kwargs)
        self.is_local = self.scheme == "file"
        self.codec_native = self.scheme in CODEC_NATIVE_SCHEMES
        # fsspec's own spelling of the root (protocol stripped).
        self._fs_root = self.fs._strip_protocol(self.root).rstrip("/")
        #: Base paths of the table's manifest, resolved: id -> (root URI,
        #: is_dataset_root). Files with a ``base_id`` live there (shallow
        #: clones, branches); set when a version is opened
        #: (:mod:`lance_ops.txn.bases`), shipped to executors with the store.
        self.bases: dict[int, tuple[str, bool]] = {}

    def __reduce__(self):
        return (ObjectStore, (self.uri, self.storage_options), {"bases": self.bases})

    def __repr__(self) -> str:
        return f"ObjectStore({self.root!r})"

    @cached_property
    def commit_handler(self):
        """How versions of the table at this root are found and committed
        (:func:`lance_ops.storage.commit.handler_for`)."""
        from .commit import handler_for

        return handler_for(self)

    # ------------------------------------------------------------------ paths
    def path(self, rel: str = "") -> str:
        """Filesystem path (for fsspec) of a path relative to the root."""
        if not rel:
            return self._fs_root
        return f"{self._fs_root}/{rel.lstrip('/')}"

    def codec_uri(self, rel: str) -> str:
        """URI the Lance file codec understands for a path relative to the root."""
        return f"{self.root}/{rel.lstrip('/')}"

    # ------------------------------------------------------------------ reads
    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open(self.path(rel), "rb") as f:
            return f.read()

    def read_range(self, rel: str, start: int, length: int) -> bytes:
        with self.fs.open(self.path(rel), "rb") as f:
            f.seek(start)
            return f.read(length)

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def size(self, rel: str) -> int:
        return int(self.fs.size(self.path(rel)))

    def list_dir(self, rel: str) -> list[FileInfo]:
        """Files directly inside ``rel`` (not recursive); [] if it does not exist."""
        base = self.path(rel)
        try:
            entries = self.fs.ls(base, detail=True)
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            if e.get("type") == "directory":
                continue
            name = e["name"].rstrip("/").rsplit("/", 1)[-1]
            out.append(FileInfo(name, int(e.get("size") or 0), _mtime(e)))
        return out

    def walk_files(self, rel: str) -> Iterator[tuple[str, FileInfo]]:
        """(path relative to the root, info) for every file below ``rel``."""
        base = self.path(rel)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return
        prefix = self._fs_root + "/"
        for name, e in found.items():
            if e.get("type") == "directory":
                continue
            n = name[len(prefix):] if name.startswith(prefix) else name
            yield n, FileInfo(n.rsplit("/", 1)[-1], int(e.get("size") or 0), _mtime(e))

    # ----------------------------------------------------------------- writes
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Plain put (may overwrite)."""
        target = self.path(rel)
        if self.is_local:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = f"{target}.tmp-{uuid.uuid4().hex}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
            return
        self.fs.pipe_file(target, data)

    def delete(self, rel: str) -> None:
        try:
            self.fs.rm_file(self.path(rel))
        except FileNotFoundError:
            pass

    def makedirs(self, rel: str) -> None:
        if self.is_local:
            os.makedirs(self.path(rel), exist_ok=True)

    # ---------------------------------------------------- codec data staging
    def codec_staging(self) -> "CodecStaging":
        return CodecStaging(self)


def _mtime(entry: dict) -> float:
    for key in ("mtime", "LastModified", "last_modified", "created", "updated"):
        v = entry.get(key)
        if v is None:
            continue
        if hasattr(v, "timestamp"):
            return float(v.timestamp())
        try:
            return float(v)
        except (TypeError, ValueError):
            continue
    return 0.0


class CodecStaging:
    """Where the Lance codec should read/write a data file.

    For codec-native schemes the file is addressed directly; otherwise a local
    temporary copy is used (downloaded before reading, uploaded after writing).
    """

    def __init__(self, store: ObjectStore):
        self.store = store

    def reader_uri(self, rel: str) -> str:
        if self.store.codec_native:
            return self.store.codec_uri(rel)
        local = os.path.join(_staging_dir(), rel.replace("/", "_") + "-" + uuid.uuid5(uuid.NAMESPACE_URL, self.store.root).hex[:8])
        if not os.path.exists(local):
            tmp = local + f".part-{uuid.uuid4().hex}"
            with open(tmp, "wb") as f:
                f.write(self.store.read_bytes(rel))
            os.replace(tmp, local)
        return local

    def writer_uri(self, rel: str) -> str:
        if self.store.codec_native:
            if self.store.is_local:
                os.makedirs(os.path.dirname(self.store.path(rel)), exist_ok=True)
            return self.store.codec_uri(rel)
        return os.path.join(_staging_dir(), f"w-{uuid.uuid4().hex}.lance")

    def finish_write(self, rel: str, local_uri: str) -> None:
        if self.store.codec_native:
            return
        with open(local_uri, "rb") as f:
            self.store.write_bytes(rel, f.read())
        os.unlink(local_uri)


def _staging_dir() -> str:
    d = os.path.join(tempfile.gettempdir(), "lance_ops-staging")
    os.makedirs(d, exist_ok=True)
    return d
