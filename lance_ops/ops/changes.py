"""changes(start, end): rows inserted or updated in versions (start, end].

Computed from the row lineage at version ``end`` (rowids-lineage.md §6):

* insert: ``start < _row_created_at_version <= end``;
* update: ``_row_created_at_version <= start`` and
  ``start < _row_last_updated_at_version <= end``.

Every writer keeps ``created <= last_updated <= version`` for each row (an
update keeps the creation version and stamps the new one), so the union of the
two is ``start < _row_last_updated_at_version <= end``: two plain comparisons
on a long column that the ``lance`` data source evaluates in the executors
(filter pushdown), skipping whole fragments whose lineage cannot match. The
change type is then ``insert`` iff the row was created after ``start``.

Caveats (inherent to lineage, as in pylance): deleted rows are gone from
version ``end`` and are not reported; a row inserted and updated inside the
range is one ``insert`` with its latest values; operations that rewrite every
row's columns (adding or casting a column) report every row as updated; a
restore brings back the restored version's lineage, so what it undid or
reinstated is not reported.
"""
from __future__ import annotations

import numbers

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..format.scan import ROW_CREATED, ROW_ID, ROW_UPDATED
from ..spark.frames import scan_frame
from ..txn.log import Snapshot, open_snapshot

CHANGE_TYPE = "_change_type"
INSERT = "insert"
UPDATE = "update"


def _version_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidArgumentError(f"{name} must be a version number >= 0, got {value!r}")
    return int(value)


def changes(spark, store, snapshot: Snapshot, start_version: int, end_version: int | None = None) -> DataFrame:
    """The change feed of (start_version, end_version]; ``end_version``
    defaults to ``snapshot``'s version. A version past the latest raises
    TableNotFoundError; start > end raises InvalidArgumentError."""
    start = _version_arg("startVersion", start_version)
    end = snapshot.version if end_version is None else _version_arg("endVersion", end_version)
    if start > end:
        raise InvalidArgumentError(f"startVersion {start} is after endVersion {end}")
    at_end = snapshot if end == snapshot.version else open_snapshot(store, end)
    if not at_end.stable_row_ids:
        raise UnsupportedFeatureError(
            f"changes() needs stable row ids (version {end} of {store.root} has none): without "
            "them rows have no lineage. Create the table with stableRowIds=True."
        )
    updated = F.col(ROW_UPDATED)
    frame = scan_frame(spark, at_end, None, metadata=(ROW_ID, ROW_CREATED, ROW_UPDATED))
    return frame.where((updated > start) & (updated <= end)).withColumn(
        CHANGE_TYPE, F.when(F.col(ROW_CREATED) > start, F.lit(INSERT)).otherwise(F.lit(UPDATE))
    )
