"""Paths a manifest names stay inside the root they are relative to.

A data file's ``path`` is relative to the table's ``data/`` directory (or to
a base path). A manifest is data from the store, not code we trust: a path
such as ``../../other.lance/data/x.lance`` would make a reader return another
table's rows, and a writer's cleanup remove another table's files. pylance
refuses such paths (its object-store paths have no ``..``); so do we, on
every store, whether or not the manifest records the file's size.

Refused (:class:`~lance_ops.errors.CorruptTableError`): an empty path,
absolute paths (``/x``, ``C:\\x``), URIs (``s3://...``), backslashes, NUL
bytes, and ``.``/``..``/empty segments -- also percent-encoded (``%2e%2e``):
URL parsers decode them and treat them as dot segments.
"""
from __future__ import annotations

import re
from urllib.parse import unquote

from ..errors import CorruptTableError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def escape_reason(path: str) -> str | None:
    """Why ``path`` may reach outside the directory it is relative to, or
    None when it cannot."""
    if not path:
        return "it is empty"
    if "\x00" in path:
        return "it holds a NUL byte"
    if "\\" in path:
        return "it holds a backslash"
    if path.startswith("/"):
        return "it is absolute"
    if _SCHEME.match(path):
        return "it is a URI or a drive path"
    for seg in path.split("/"):
        if unquote(seg) in ("", ".", "..") or "/" in unquote(seg) or "\\" in unquote(seg):
            return f"it has the segment {seg!r}"
    return None


def check_relative(path: str, what: str, where: str | None = None) -> str:
    """``path`` if it stays inside its directory, else CorruptTableError
    naming ``what`` (e.g. "data file") and ``where`` (the table)."""
    reason = escape_reason(path)
    if reason is not None:
        raise CorruptTableError(
            f"the manifest names a {what} at {path!r}, which reaches outside the table ({reason}); "
            "refusing to read or write it",
            where,
        )
    return path
