"""Storage credentials cross to Spark's Python workers as a *handle*, never
as text that Spark, py4j or a Spark Connect client logs.

Everything the driver sends to Spark passes through logged channels: data
source options are py4j string arguments (py4j logs each command at DEBUG)
or Spark Connect plan fields (the Connect client logs plans at DEBUG), and
pickled task closures are py4j byte arguments (logged base64-encoded). So a
table whose storage options hold a secret (a key such as
``aws_secret_access_key``, or a URI with a password) ships them sealed:

1. :func:`seal` writes the options as JSON to a file readable only by the
   user (mode 0600, in a private 0700 directory removed at exit), named by
   a keyed hash of the options -- the *handle*;
2. the Spark layer publishes that file to the session's workers as a Spark
   artifact (``spark.addArtifacts(path, file=True)``: copied, not logged;
   under Spark Connect uploaded over the artifact channel) and marks the
   handle published (:func:`mark_published`);
3. from then on options sent to Spark name only the handle (the storage
   option :data:`HANDLE_OPTION`), and an :class:`ObjectStore` pickled into a
   task carries the handle instead of the options;
4. a worker building an ObjectStore from a handle reads the options through
   the resolvers (:func:`add_resolver`; lance_ops registers one that looks in
   the directory of Spark's files, ``SparkFiles``).

Without a Spark session nothing is sealed: options travel as they are.
"""
from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
from typing import Callable

from ..errors import InvalidArgumentError

#: The storage option that names a handle instead of holding the options.
HANDLE_OPTION = "lance_ops.credentials"
_HANDLE = re.compile(r"lance_ops-credentials-[0-9a-f]{32}\.json")
_SECRET_KEY = re.compile(r"secret|token|password|passwd|credential|sas|signature|private|(^|_)key$", re.I)
_URI_PASSWORD = re.compile(r"://[^/:@?#]*:[^@/?#]*@")

_LOCK = threading.Lock()
_SALT = secrets.token_bytes(32)
#: handle -> options (this process sealed or resolved them)
_KNOWN: dict[str, dict[str, str]] = {}
#: handles a Spark session of this process can resolve in its workers
_PUBLISHED: set[str] = set()
_DIR: list[str] = []
_RESOLVERS: list[Callable[[str], str | None]] = []


def is_secret_key(key: str) -> bool:
    """Whether a storage option's value is a credential (never shown)."""
    return bool(_SECRET_KEY.search(key))


def has_secrets(options: dict | None) -> bool:
    """Whether any option is a credential: a secret key, or a URI holding a
    password (e.g. ``commit_store=postgresql://user:pw@host/db``)."""
    return any(is_secret_key(k) or _URI_PASSWORD.search(str(v)) for k, v in (options or {}).items())


def seal(options: dict[str, str]) -> tuple[str, str]:
    """(handle, path of the 0600 file holding ``options``). The same options
    give the same handle within a process."""
    canonical = json.dumps(sorted((str(k), str(v)) for k, v in options.items()), separators=(",", ":"))
    handle = f"lance_ops-credentials-{hmac.new(_SALT, canonical.encode(), hashlib.sha256).hexdigest()[:32]}.json"
    with _LOCK:
        path = os.path.join(_private_dir(), handle)
        if handle not in _KNOWN or not os.path.exists(path):
            fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(dict(options), f)
            os.replace(path + ".tmp", path)
            _KNOWN[handle] = {str(k): str(v) for k, v in options.items()}
    return handle, path


def mark_published(handle: str) -> None:
    """Workers of a Spark session can resolve ``handle`` from now on."""
    with _LOCK:
        _PUBLISHED.add(handle)


def published_handle(options: dict[str, str]) -> str | None:
    """The published handle of ``options``, if they were sealed and published
    (what a pickled ObjectStore carries instead of them)."""
    if not has_secrets(options):
        return None
    handle, _ = seal(options)
    return handle if handle in _PUBLISHED else None


def add_resolver(resolver: Callable[[str], str | None]) -> None:
    """Register ``resolver(handle) -> path of the options file or None``."""
    with _LOCK:
        if resolver not in _RESOLVERS:
            _RESOLVERS.append(resolver)


def unseal(handle: str) -> dict[str, str]:
    """The options a handle names (this process's, or read through the
    resolvers)."""
    if not _HANDLE.fullmatch(str(handle)):
        raise InvalidArgumentError(f"{HANDLE_OPTION} must name a lance_ops credentials handle, not {handle!r}")
    with _LOCK:
        found = _KNOWN.get(handle)
        resolvers = list(_RESOLVERS)
    if found is not None:
        return dict(found)
    for resolve in resolvers:
        try:
            path = resolve(handle)
        except Exception:  # noqa: BLE001 - try the next resolver
            path = None
        if path and os.path.exists(path):
            with open(path) as f:
                options = {str(k): str(v) for k, v in json.load(f).items()}
            with _LOCK:
                _KNOWN[handle] = options
            return dict(options)
    raise InvalidArgumentError(
        f"the storage credentials {handle} are not available in this process: they reach Spark's workers as a "
        "Spark artifact of the session that published them (is this task running in another session?)"
    )


def resolve_options(options: dict[str, str]) -> dict[str, str]:
    """``options`` with a :data:`HANDLE_OPTION` entry replaced by the options
    it names (other entries win over the handle's)."""
    handle = options.get(HANDLE_OPTION)
    if not handle:
        return options
    out = unseal(handle)
    out.update({k: v for k, v in options.items() if k != HANDLE_OPTION})
    return out


def _private_dir() -> str:
    if not _DIR or not os.path.isdir(_DIR[0]):
        d = tempfile.mkdtemp(prefix="lance_ops-credentials-")  # mode 0700
        _DIR[:] = [d]
        atexit.register(shutil.rmtree, d, True)
    return _DIR[0]
