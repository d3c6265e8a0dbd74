"""Versions by commit time: which version a timestamp names.

Delta's two readings of a timestamp, both from the manifests' commit
``timestamp`` (what pylance's history shows), never from file mtimes:

* :func:`version_at` -- the table *as of* a time: the latest version committed
  at or before it (``cloneAtTimestamp``, ``restoreToTimestamp``,
  ``TIMESTAMP AS OF``, a change feed's ``endingTimestamp``);
* :func:`first_version_from` -- the first version committed at or after it (a
  change feed's ``startingTimestamp``).

A timestamp is a ``datetime`` (naive: UTC) or an ISO 8601 string (naive: the
process's local time zone, which is the default Spark session time zone on
the driver; Spark front ends convert strings with the session time zone
themselves and pass a ``datetime``).
"""
from __future__ import annotations

import datetime

from ..errors import InvalidArgumentError, TableNotFoundError
from ..storage.objectstore import ObjectStore
from .history import _timestamp
from .log import TableLog

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def as_utc(when) -> datetime.datetime:
    """``when`` (datetime or ISO string) as an aware UTC datetime."""
    if isinstance(when, str):
        text = when.strip().replace("Z", "+00:00")
        try:
            parsed = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgumentError(f"{when!r} is not a timestamp (use e.g. '2026-11-01 00:00:00')") from None
        if parsed.tzinfo is None:
            parsed = parsed.astimezone()  # the local time zone
        return parsed.astimezone(datetime.timezone.utc)
    if isinstance(when, datetime.datetime):
        if when.tzinfo is None:
            return when.replace(tzinfo=datetime.timezone.utc)
        return when.astimezone(datetime.timezone.utc)
    if isinstance(when, datetime.date):
        return datetime.datetime(when.year, when.month, when.day, tzinfo=datetime.timezone.utc)
    raise InvalidArgumentError(f"expected a timestamp (datetime or string), got {type(when).__name__}")


def commit_times(store: ObjectStore) -> list[tuple[int, datetime.datetime | None]]:
    """(version, commit time) of every version, oldest first."""
    log = TableLog(store)
    return [(loc.version, _timestamp(log.read_manifest(loc).manifest)) for loc in log.versions()]


def version_at(store: ObjectStore, when, times=None) -> int:
    """The latest version committed at or before ``when``."""
    target = as_utc(when)
    times = commit_times(store) if times is None else times
    candidates = [v for v, ts in times if ts is not None and ts <= target]
    if not candidates:
        earliest = min((ts for _v, ts in times if ts is not None), default=None)
        raise TableNotFoundError(
            f"{store.root} has no version committed at or before {target.isoformat()} (the earliest kept "
            f"version was committed at {earliest.isoformat() if earliest else 'an unknown time'})"
        )
    return max(candidates)


def first_version_from(store: ObjectStore, when, times=None) -> int:
    """The first version committed at or after ``when``."""
    target = as_utc(when)
    times = commit_times(store) if times is None else times
    candidates = [v for v, ts in times if ts is not None and ts >= target]
    if not candidates:
        latest = max((ts for _v, ts in times if ts is not None), default=None)
        raise InvalidArgumentError(
            f"{target.isoformat()} is after the latest commit of {store.root} "
            f"({latest.isoformat() if latest else 'none'}): no version starts there"
        )
    return min(candidates)


__all__ = ["as_utc", "commit_times", "version_at", "first_version_from"]
