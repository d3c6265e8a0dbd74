"""``restoreToTimestamp``: the version a timestamp names, as Delta picks it.

The timestamp is Spark's: a string cast to TIMESTAMP in the session time zone
(``yyyy-MM-dd``, ``yyyy-MM-dd HH:mm:ss[.ffffff]``) or a ``datetime``. The
version restored is the latest one committed at or before it. As Delta's
RESTORE TO TIMESTAMP, a timestamp before the earliest kept version or after
the latest commit is an error (the latter would restore the current state
under a misleading name).
"""
from __future__ import annotations

import datetime

from pyspark.sql import functions as F

from ..errors import ArgumentTypeError, InvalidArgumentError

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def timestamp_micros(spark, timestamp) -> int:
    """``timestamp`` as microseconds since the epoch, read by Spark."""
    if isinstance(timestamp, datetime.datetime):
        value = F.lit(timestamp)
    elif isinstance(timestamp, datetime.date):
        value = F.lit(timestamp.isoformat()).cast("timestamp")
    elif isinstance(timestamp, str):
        value = F.lit(timestamp).cast("timestamp")
    else:
        raise ArgumentTypeError(f"timestamp needs to be a string but got {type(timestamp)!r}")
    row = spark.range(1).select(F.unix_micros(value).alias("us")).head()
    if row is None or row["us"] is None:
        raise InvalidArgumentError(f"{timestamp!r} is not a timestamp (use 'yyyy-MM-dd' or 'yyyy-MM-dd HH:mm:ss')")
    return int(row["us"])


def version_at(spark, table, timestamp) -> int:
    """The latest version of ``table`` (the Spark-free core) committed at or
    before ``timestamp``."""
    when = EPOCH + datetime.timedelta(microseconds=timestamp_micros(spark, timestamp))
    rows = [r for r in table.history() if r["timestamp"] is not None]
    if not rows:
        raise InvalidArgumentError(f"{table.uri} has no version with a commit timestamp")
    latest, earliest = rows[0], rows[-1]
    if when > latest["timestamp"]:
        raise InvalidArgumentError(
            f"the provided timestamp ({when.isoformat()}) is after the latest version available to this table "
            f"(version {latest['version']} at {latest['timestamp'].isoformat()})"
        )
    candidates = [r["version"] for r in rows if r["timestamp"] <= when]
    if not candidates:
        raise InvalidArgumentError(
            f"the provided timestamp ({when.isoformat()}) is before the earliest version available to this table "
            f"(version {earliest['version']} at {earliest['timestamp'].isoformat()})"
        )
    return max(candidates)
