"""What the sensor and its trigger ask a table: metadata only."""
from __future__ import annotations

import datetime


def table_status(table: str, storage_options: dict | None, feature_column: str | None, newer_than,
                 changed_since) -> dict:
    """Metadata-only status of the table and whether it has something new
    (``new``)."""
    from ..txn.table import Table
    from ..txn.watermarks import feature_status

    core = Table(table, storage_options)
    snap = core.snapshot
    ts = snap.manifest.timestamp
    committed = (datetime.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, datetime.timezone.utc)
                 if snap.manifest.HasField("timestamp") else None)
    status = {"table": table, "version": snap.version, "committedAt": committed.isoformat() if committed else None}
    if feature_column:
        fs = feature_status(snap, feature_column)
        status["feature"] = fs
        status["new"] = bool(fs["pending"])
    elif newer_than not in (None, "", "None"):
        status["new"] = snap.version > int(newer_than)
    elif changed_since not in (None, "", "None"):
        since = changed_since
        if isinstance(since, str):
            since = datetime.datetime.fromisoformat(since)
        if since.tzinfo is None:
            since = since.replace(tzinfo=datetime.timezone.utc)
        status["new"] = committed is not None and committed > since
    else:
        status["new"] = True
    return status
