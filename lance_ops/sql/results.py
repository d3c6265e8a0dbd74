"""What each statement returns: Delta Lake's result shapes, as small local
DataFrames (``spark.createDataFrame``: no job, Spark Connect compatible)."""
from __future__ import annotations

from pyspark.sql import types as T

# Delta's result shapes the API returns too
from ..ops.shapes import (  # noqa: F401
    AFFECTED,
    DETAIL,
    FRAGMENTS,
    INSERTED,
    MERGED,
    OPTIMIZED,
    RESTORED,
    VACUUMED,
)

L, S = T.LongType(), T.StringType()


def _schema(*fields) -> T.StructType:
    return T.StructType([T.StructField(n, t, True) for n, t in fields])


#: DESCRIBE t (Spark's)
DESCRIBED = _schema(("col_name", S), ("data_type", S), ("comment", S))
#: SHOW TBLPROPERTIES (Spark's)
PROPERTIES = _schema(("key", S), ("value", S))
#: SHOW TAGS
TAGS = _schema(("tag", S), ("version", L), ("createdAt", S), ("updatedAt", S))
#: Statements with nothing to report (ALTER TABLE, tags, CREATE TABLE ... LOCATION)
EMPTY = T.StructType([])


def frame(spark, schema: T.StructType, rows: list[tuple]):
    return spark.createDataFrame(rows, schema)


__all__ = [
    "AFFECTED", "INSERTED", "MERGED", "OPTIMIZED", "VACUUMED", "RESTORED", "DETAIL", "DESCRIBED",
    "PROPERTIES", "TAGS", "FRAGMENTS", "EMPTY", "frame",
]
