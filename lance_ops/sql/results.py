"""What each statement returns: Delta Lake's result shapes, as small local
DataFrames (``spark.createDataFrame``: no job, Spark Connect compatible)."""
from __future__ import annotations

from pyspark.sql import types as T

# Delta's result shapes the API returns too
from ..ops.shapes import AFFECTED, DETAIL, INSERTED, MERGED, OPTIMIZED, RESTORED, VACUUMED  # noqa: F401

L, S, D, B = T.LongType(), T.StringType(), T.DoubleType(), T.BooleanType()
TS = T.TimestampType()


def _schema(*fields) -> T.StructType:
    return T.StructType([T.StructField(n, t, True) for n, t in fields])


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
