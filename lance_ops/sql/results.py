"""What each statement returns: Delta Lake's result shapes, as small local
DataFrames (``spark.createDataFrame``: no job, Spark Connect compatible)."""
from __future__ import annotations

from pyspark.sql import types as T

L, S, D, B = T.LongType(), T.StringType(), T.DoubleType(), T.BooleanType()
TS = T.TimestampType()


def _schema(*fields) -> T.StructType:
    return T.StructType([T.StructField(n, t, True) for n, t in fields])


#: DELETE / UPDATE (Delta 2.x+)
AFFECTED = _schema(("num_affected_rows", L))
#: INSERT, CREATE TABLE AS SELECT, REPLACE TABLE AS SELECT
INSERTED = _schema(("num_affected_rows", L), ("num_inserted_rows", L))
#: MERGE
MERGED = _schema(("num_affected_rows", L), ("num_updated_rows", L), ("num_deleted_rows", L), ("num_inserted_rows", L))
#: OPTIMIZE: the table path and a metrics struct (Delta's names where Delta has
#: the counterpart, Lance's fragments besides; ``version`` null = nothing to do)
OPTIMIZE_METRICS = _schema(
    ("numFilesAdded", L), ("numFilesRemoved", L), ("numFragmentsAdded", L), ("numFragmentsRemoved", L),
    ("numRowsRewritten", L), ("numIndicesNarrowed", L), ("version", L),
)
OPTIMIZED = _schema(("path", S), ("metrics", OPTIMIZE_METRICS))
#: VACUUM: the files it would delete (DRY RUN) or the table path
VACUUMED = _schema(("path", S))
#: RESTORE
RESTORED = _schema(
    ("table_size_after_restore", L), ("num_of_files_after_restore", L), ("num_removed_files", L),
    ("num_restored_files", L), ("removed_files_size", L), ("restored_files_size", L),
)
#: DESCRIBE DETAIL: Delta's columns, then Lance's own
DETAIL = T.StructType(
    [T.StructField(n, t, True) for n, t in (
        ("format", S), ("id", S), ("name", S), ("description", S), ("location", S), ("createdAt", TS),
        ("lastModified", TS), ("partitionColumns", T.ArrayType(S)), ("clusteringColumns", T.ArrayType(S)),
        ("numFiles", L), ("sizeInBytes", L), ("properties", T.MapType(S, S)), ("minReaderVersion", L),
        ("minWriterVersion", L), ("tableFeatures", T.ArrayType(S)), ("version", L), ("numFragments", L),
        ("numRows", L), ("numDeletedRows", L), ("dataFormatVersion", S), ("stableRowIds", B), ("nextRowId", L),
        ("maxFragmentId", L), ("numIndices", L), ("writerVersion", S),
    )]
)
#: DESCRIBE t (Spark's)
DESCRIBED = _schema(("col_name", S), ("data_type", S), ("comment", S))
#: SHOW TBLPROPERTIES (Spark's)
PROPERTIES = _schema(("key", S), ("value", S))
#: SHOW TAGS
TAGS = _schema(("tag", S), ("version", L), ("createdAt", S), ("updatedAt", S))
#: DESCRIBE FRAGMENTS (lance_ops' own: one row per fragment)
FRAGMENTS = _schema(
    ("fragment_id", L), ("physical_rows", L), ("deleted_rows", L), ("live_rows", L), ("deleted_ratio", D),
    ("num_data_files", L), ("size_in_bytes", L), ("data_file_versions", S), ("tombstoned_fields", L),
    ("has_deletion_file", B),
)
#: Statements with nothing to report (ALTER TABLE, tags, CREATE TABLE ... LOCATION)
EMPTY = T.StructType([])


def frame(spark, schema: T.StructType, rows: list[tuple]):
    return spark.createDataFrame(rows, schema)


__all__ = [
    "AFFECTED", "INSERTED", "MERGED", "OPTIMIZED", "VACUUMED", "RESTORED", "DETAIL", "DESCRIBED",
    "PROPERTIES", "TAGS", "FRAGMENTS", "EMPTY", "frame",
]
