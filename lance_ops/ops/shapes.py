"""Delta Lake's result shapes, shared by the API and SQL.

Where a ``DeltaTable`` method returns a DataFrame, ``LanceTable``'s returns
one of the same columns (plus Lance's own at the end): ``merge().execute()``,
``optimize().executeCompaction()``, ``restoreToVersion``, ``detail()``,
``history()``, ``vacuum()``; the SQL statements return the same frames. Each
is a small local DataFrame (``spark.createDataFrame``: no job, Spark Connect
compatible) built from the operation's :class:`~lance_ops.results.CommitInfo`,
whose metric names are the history's (Delta's names where Delta has them).
"""
from __future__ import annotations

import json

from pyspark.sql import types as T

L, S, D, B = T.LongType(), T.StringType(), T.DoubleType(), T.BooleanType()
TS = T.TimestampType()


def _schema(*fields) -> T.StructType:
    return T.StructType([T.StructField(n, t, True) for n, t in fields])


#: DELETE / UPDATE (Delta 2.x+ SQL)
AFFECTED = _schema(("num_affected_rows", L))
#: INSERT, CREATE TABLE AS SELECT, REPLACE TABLE AS SELECT
INSERTED = _schema(("num_affected_rows", L), ("num_inserted_rows", L))
#: DESCRIBE FRAGMENTS and ``fragments()`` (lance_ops' own: one row per fragment)
FRAGMENTS = _schema(
    ("fragment_id", L), ("physical_rows", L), ("deleted_rows", L), ("live_rows", L), ("deleted_ratio", D),
    ("num_data_files", L), ("size_in_bytes", L), ("data_file_versions", S), ("tombstoned_fields", L),
    ("has_deletion_file", B),
)
#: MERGE (SQL and ``merge().execute()``)
MERGED = _schema(("num_affected_rows", L), ("num_updated_rows", L), ("num_deleted_rows", L), ("num_inserted_rows", L))
#: Delta's per-side file statistics of OPTIMIZE
FILE_STATS = _schema(("min", L), ("max", L), ("avg", D), ("totalFiles", L), ("totalSize", L))
#: OPTIMIZE: Delta's ``OptimizeMetrics`` fields that apply to Lance, then
#: Lance's own (fragments, rows rewritten, indices; ``version`` null: nothing to do)
OPTIMIZE_METRICS = _schema(
    ("numFilesAdded", L), ("numFilesRemoved", L), ("filesAdded", FILE_STATS), ("filesRemoved", FILE_STATS),
    ("partitionsOptimized", L), ("numBatches", L), ("totalConsideredFiles", L), ("totalFilesSkipped", L),
    ("preserveInsertionOrder", B), ("numDeletionVectorsRemoved", L), ("startTimeMs", L), ("endTimeMs", L),
    ("numFragmentsAdded", L), ("numFragmentsRemoved", L), ("numRowsRewritten", L), ("numIndicesRemapped", L),
    ("numIndicesRebuilt", L), ("numIndicesNarrowed", L), ("version", L),
)
OPTIMIZED = _schema(("path", S), ("metrics", OPTIMIZE_METRICS))
#: VACUUM: the files removed (or, DRY RUN, that would be); SQL's plain VACUUM
#: returns the table path, as Delta's
VACUUMED = _schema(("path", S))
#: RESTORE (SQL and ``restoreToVersion`` / ``restoreToTimestamp``)
RESTORED = _schema(
    ("table_size_after_restore", L), ("num_of_files_after_restore", L), ("num_removed_files", L),
    ("num_restored_files", L), ("removed_files_size", L), ("restored_files_size", L),
)
#: DESCRIBE DETAIL / ``detail()``: Delta's columns, then Lance's own
DETAIL = T.StructType(
    [T.StructField(n, t, True) for n, t in (
        ("format", S), ("id", S), ("name", S), ("description", S), ("location", S), ("createdAt", TS),
        ("lastModified", TS), ("partitionColumns", T.ArrayType(S)), ("clusteringColumns", T.ArrayType(S)),
        ("numFiles", L), ("sizeInBytes", L), ("properties", T.MapType(S, S)), ("minReaderVersion", L),
        ("minWriterVersion", L), ("tableFeatures", T.ArrayType(S)), ("version", L), ("numFragments", L),
        ("numRows", L), ("numDeletedRows", L), ("dataFormatVersion", S), ("stableRowIds", B), ("nextRowId", L),
        ("maxFragmentId", L), ("numIndices", L), ("writerVersion", S), ("readerFeatureFlags", L),
        ("writerFeatureFlags", L), ("branch", S), ("schema", S),
    )]
)
#: The table property holding the table comment (Spark's convention; Delta's
#: ``description``).
COMMENT_KEY = "comment"


def merge_frame(spark, info):
    """``merge().execute()``'s result from its CommitInfo."""
    m = info.metrics
    upd, dele, ins = (int(m.get(k, 0)) for k in ("numTargetRowsUpdated", "numTargetRowsDeleted",
                                                   "numTargetRowsInserted"))
    return spark.createDataFrame([(upd + dele + ins, upd, dele, ins)], MERGED)


def affected_frame(spark, rows: int):
    return spark.createDataFrame([(int(rows),)], AFFECTED)


def _stats(n: int, total: int, lo, hi) -> tuple:
    return (lo, hi, (total / n) if n else None, n, total) if n else (None, None, None, 0, 0)


def optimize_frame(spark, uri: str, info, considered_files: int, started: float, ended: float):
    """``executeCompaction()``'s result (Delta's ``path``, ``metrics``)."""
    m = info.metrics
    g = lambda k: int(m.get(k, 0))  # noqa: E731
    added, removed = g("numAddedFiles"), g("numRemovedFiles")
    metrics = (
        added, removed,
        _stats(added, g("numAddedBytes"), m.get("minFileSize"), m.get("maxFileSize")),
        _stats(removed, g("numRemovedBytes"), None, None),
        0, 1 if info.version is not None else 0, considered_files, max(0, considered_files - removed), True,
        g("numDeletionVectorsRemoved"), int(started * 1000), int(ended * 1000),
        g("numAddedFragments"), g("numRemovedFragments"), g("numRowsRewritten"), g("numIndicesRemapped"),
        g("numIndicesRebuilt"), g("numIndicesNarrowed"), info.version,
    )
    return spark.createDataFrame([(uri, metrics)], OPTIMIZED)


def vacuum_frame(spark, root: str, removed: list[str]):
    """The files a vacuum removed (or would), as full paths."""
    root = root.rstrip("/")
    return spark.createDataFrame([(f"{root}/{p}",) for p in removed], VACUUMED)


def data_files(snapshot) -> dict[str, int]:
    return {df.path: int(df.file_size_bytes) for f in snapshot.fragments for df in f.files}


def restore_frame(spark, info):
    """Delta's RESTORE result from the restore's CommitInfo (whose metrics
    carry the same numbers under Delta's history names)."""
    m = info.metrics
    row = tuple(int(m.get(k, 0)) for k in (
        "tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
        "removedFilesSize", "restoredFilesSize"))
    return spark.createDataFrame([row], RESTORED)


def table_features(d: dict) -> list[str]:
    out = []
    if d.get("stableRowIds"):
        out.append("stableRowIds")
    if d.get("numIndices"):
        out.append("indices")
    return out


def detail_frame(spark, d: dict, name: str | None = None):
    """``detail()``'s one row from the Spark-free core's ``detail()`` dict."""
    config = dict(d["config"])
    description = config.pop(COMMENT_KEY, None)
    row = (
        "lance", d.get("id"), name, description, d["location"], d.get("createdAt"), d["timestamp"], [], [],
        int(d["numFiles"]), int(d["sizeInBytes"]), config, int(d["readerFeatureFlags"]),
        int(d["writerFeatureFlags"]), table_features(d), int(d["version"]), int(d["numFragments"]),
        int(d["numRows"]), int(d["numDeletedRows"]), d["dataFormatVersion"], bool(d["stableRowIds"]),
        int(d["nextRowId"]), d["maxFragmentId"], int(d["numIndices"]), d["writerVersion"],
        int(d["readerFeatureFlags"]), int(d["writerFeatureFlags"]), d.get("branch"), json.dumps(d["schema"]),
    )
    return spark.createDataFrame([row], DETAIL)


__all__ = [
    "AFFECTED", "INSERTED", "MERGED", "OPTIMIZED", "VACUUMED", "RESTORED", "DETAIL", "merge_frame", "affected_frame",
    "optimize_frame", "vacuum_frame", "restore_frame", "detail_frame", "data_files",
]
