"""changes(start, end): the change feed of versions (start, end], Delta's rows.

``LanceTable.changes`` is ``spark.read.format("lance").option("readChangeFeed",
"true")`` over the handle's table with the versions resolved here: every row
inserted, deleted or updated (a pre- and a post-image) by each version, with
``_change_type``, ``_commit_version`` and ``_commit_timestamp``. How the rows
are found -- fragment and deletion-file diffs of consecutive versions, paired
by stable row id, read by time travel, no extra files -- is
:mod:`lance_ops.txn.changefeed`.

The range is ``(startVersion, endVersion]`` (the API's contract since the
first change feed); the data source options and SQL's ``table_changes`` take
Delta's inclusive ``startingVersion``.
"""
from __future__ import annotations

import numbers

from pyspark.sql import DataFrame

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..format.scan import ROW_CREATED, ROW_ID, ROW_UPDATED
from ..spark.changefeed import feed_schema
from ..spark.datasource import register
from ..txn.changefeed import CDF_COLUMNS, CHANGE_TYPE, DELETE, INSERT, POSTIMAGE, PREIMAGE, check_range
from ..txn.log import Snapshot, open_snapshot
from ..txn.timetravel import first_version_from, version_at

UPDATE_TYPES = (PREIMAGE, POSTIMAGE)


def _version_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidArgumentError(f"{name} must be a version number >= 0, got {value!r}")
    return int(value)


def changes(spark, store, snapshot: Snapshot, start_version: int | None = None, end_version: int | None = None, *,
            with_row_id: bool = False, with_lineage: bool = False, starting_timestamp=None,
            ending_timestamp=None) -> DataFrame:
    """The change feed of (start_version, end_version]; ``end_version``
    defaults to ``snapshot``'s version. ``starting_timestamp`` (instead of a
    start version: from the first version committed at or after it) and
    ``ending_timestamp`` (instead of an end: the last version committed at or
    before it) are aware datetimes. A version past the latest raises
    TableNotFoundError; start > end raises InvalidArgumentError."""
    if (start_version is None) == (starting_timestamp is None):
        raise InvalidArgumentError("changes() needs startVersion or startingTimestamp (one of them)")
    if end_version is not None and ending_timestamp is not None:
        raise InvalidArgumentError("give either endVersion or endingTimestamp, not both")
    if start_version is not None:
        start = _version_arg("startVersion", start_version)
    else:
        start = first_version_from(store, starting_timestamp) - 1
    if ending_timestamp is not None:
        end = version_at(store, ending_timestamp)
    else:
        end = snapshot.version if end_version is None else _version_arg("endVersion", end_version)
    check_range(start, end)
    at_end = snapshot if end == snapshot.version else open_snapshot(store, end)
    if not at_end.stable_row_ids:
        raise UnsupportedFeatureError(
            f"changes() needs stable row ids (version {end} of {store.root} has none): without "
            "them rows have no identity across versions. Create the table with stableRowIds=True."
        )
    meta = ([ROW_ID] if with_row_id else []) + ([ROW_CREATED, ROW_UPDATED] if with_lineage else [])
    schema = feed_schema(at_end.schema, meta)
    if start == end:
        return spark.createDataFrame([], schema)
    register(spark)
    reader = (spark.read.format("lance").option("readChangeFeed", "true")
              .option("startingVersion", str(start + 1)).option("endingVersion", str(end)))
    if meta:
        reader = reader.option("metadataColumns", ",".join(meta))
    for k, v in store.storage_options.items():
        reader = reader.option(f"storage.{k}", v)
    return reader.schema(schema).load(store.uri)


__all__ = ["changes", "CHANGE_TYPE", "CDF_COLUMNS", "INSERT", "DELETE", "PREIMAGE", "POSTIMAGE", "UPDATE_TYPES"]
