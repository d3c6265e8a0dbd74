"""Names of a table outside lance_ops: its Airflow ``Asset`` (data-aware
scheduling) and its OpenLineage dataset (namespace + name).

One table has one asset URI whoever spells its location: a local path
becomes ``file:///absolute/path`` (no trailing slash), object-store URIs keep
their scheme, bucket and key. The writing operators declare
``outlets=[table_asset(table)]``; a DAG that should run whenever the table
changes declares ``schedule=[table_asset(table)]`` (or an
``AssetOrTimeSchedule`` with it) -- the two meet because both use this
function.
"""
from __future__ import annotations

import os
import urllib.parse


def asset_uri(table: str) -> str:
    """The canonical URI of a table location (local paths -> ``file://``)."""
    parsed = urllib.parse.urlsplit(table)
    if not parsed.scheme or len(parsed.scheme) == 1:  # a path (or a Windows drive letter)
        return "file://" + os.path.abspath(os.path.expanduser(table)).rstrip("/")
    if parsed.scheme == "file":
        return "file://" + os.path.abspath(parsed.path).rstrip("/")
    path = parsed.path.rstrip("/") or "/"
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def table_asset(table: str, **kwargs):
    """The Airflow ``Asset`` of a table (``kwargs``: ``name``, ``group``,
    ``extra`` as ``Asset`` takes them)."""
    from airflow.sdk import Asset

    return Asset(asset_uri(table), **kwargs)


def is_templated(value) -> bool:
    """A Jinja template, rendered only at run time (no asset can be derived
    from it when the DAG is parsed)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def lineage_name(table: str) -> tuple[str, str]:
    """(namespace, name) of the table as an OpenLineage dataset, per the
    OpenLineage naming conventions: local files ``file`` + absolute path;
    object stores ``scheme://bucket`` + the key."""
    uri = asset_uri(table)
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme == "file":
        return "file", parsed.path
    scheme = {"s3a": "s3", "s3n": "s3", "s3+ddb": "s3", "gcs": "gs"}.get(parsed.scheme, parsed.scheme)
    return f"{scheme}://{parsed.netloc}", parsed.path.lstrip("/")
