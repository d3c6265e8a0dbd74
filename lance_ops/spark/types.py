"""Lance/Arrow types <-> Spark types.

Reading (Lance -> Spark) maps every Lance logical type Spark can hold to the
nearest Spark type; values that need it are converted batch by batch on the
executors (:func:`to_spark_batch`):

=======================  =====================================================
Lance / Arrow            Spark
=======================  =====================================================
int8/16/32/64            ByteType / ShortType / IntegerType / LongType
uint8 / uint16 / uint32  ShortType / IntegerType / LongType (next wider signed)
uint64                   DecimalType(20, 0)
halffloat / float        FloatType
double                   DoubleType
string, large_string     StringType
binary, large_binary,    BinaryType
fixed_size_binary
date32, date64           DateType
timestamp (with tz)      TimestampType (microseconds; finer units truncated)
timestamp (no tz)        TimestampNTZType
duration                 DayTimeIntervalType (microseconds)
time32 / time64          TimeType
decimal128/256 (p <= 38) DecimalType(p, s)
list, large_list,        ArrayType
fixed_size_list
struct                   StructType
map                      MapType
dictionary<v>            the value type
null                     NullType
=======================  =====================================================

Field metadata becomes Spark field metadata (values as UTF-8 strings).

Writing (Spark -> Lance) of a *new* table uses Spark's own Arrow mapping
(timestamps as UTC), see :func:`arrow_schema_for_spark`; writing into an
existing table casts to the table's stored types (so a ``uint32`` column read
as ``long`` goes back as ``uint32``, range-checked).
"""
from __future__ import annotations

import json

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ..errors import UnsupportedFeatureError
from ..format.scan import METADATA_COLUMNS
from ..format.schema import Field, Schema


def spark_type(t: pa.DataType, where: str = "") -> T.DataType:
    """Spark type for an Arrow type as stored in a Lance table."""
    if isinstance(t, pa.ExtensionType):
        t = t.storage_type
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return T.ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return T.IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return T.LongType()
    if pa.types.is_uint64(t):
        return T.DecimalType(20, 0)
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return T.StringType()
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    ):
        return T.BinaryType()
    if pa.types.is_date(t):
        return T.DateType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    if pa.types.is_duration(t):
        return T.DayTimeIntervalType()
    if pa.types.is_time(t):
        return T.TimeType()
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise UnsupportedFeatureError(f"column {where}: {t} exceeds Spark's decimal precision 38")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_null(t):
        return T.NullType()
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type, where)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return T.ArrayType(spark_type(t.value_type, where), t.value_field.nullable)
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type, where), spark_type(t.item_type, where), t.item_field.nullable)
    if pa.types.is_struct(t):
        return T.StructType([spark_field(t.field(i)) for i in range(t.num_fields)])
    raise UnsupportedFeatureError(f"column {where}: Arrow type {t} has no Spark equivalent")


def _metadata(md) -> dict:
    out = {}
    for k, v in (md or {}).items():
        key = k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)
        if key.startswith("lance-encoding:") or key.startswith("ARROW:"):
            continue
        out[key] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return out


def spark_field(f: pa.Field) -> T.StructField:
    return T.StructField(f.name, spark_type(f.type, f.name), f.nullable, _metadata(f.metadata))


def spark_schema(schema: Schema, columns=None, metadata_columns=()) -> T.StructType:
    """Spark schema of (some columns of) a Lance table plus metadata columns."""
    fields = schema.fields if columns is None else [schema.field(c) for c in columns]
    out = [spark_field(f.to_arrow()) for f in fields]
    for m in metadata_columns:
        out.append(T.StructField(m, T.LongType(), False))
    return T.StructType(out)


def spark_arrow_schema(spark: T.StructType) -> pa.Schema:
    """The Arrow schema Spark expects for batches of ``spark`` (Python data
    sources compare it exactly)."""
    return to_arrow_schema(spark, timezone="UTC")


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Convert a batch read from Lance (table types, uint64 metadata columns)
    into exactly ``target`` (from :func:`spark_arrow_schema`)."""
    if batch.schema.equals(target, check_metadata=False):
        if batch.schema.metadata or any(f.metadata for f in batch.schema):
            return pa.RecordBatch.from_arrays(batch.columns, schema=target)
        return batch
    arrays = []
    for i, f in enumerate(target):
        col = batch.column(i)
        if col.type != f.type:
            col = _convert(col, f.type)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def scanned_spark_batch(batch: pa.RecordBatch, target: pa.Schema, fragment_id: int) -> pa.RecordBatch:
    """:func:`to_spark_batch` of a batch ``scan_fragment`` read from fragment
    ``fragment_id``: its ``_rowaddr`` (uint64) is reinterpreted as Spark's
    long, not cast -- the same bits for a fragment id below 2^31 (addresses
    below 2^63), and the checked cast of millions of addresses is ~10% of an
    Arrow task's work."""
    from ..format.scan import ROW_ADDR

    batch = batch.select(target.names)
    if ROW_ADDR in target.names and fragment_id < 2**31:
        i = target.names.index(ROW_ADDR)
        col = batch.column(i)
        if pa.types.is_uint64(col.type) and pa.types.is_int64(target.field(i).type):
            batch = batch.set_column(i, target.field(i), col.view(pa.int64()))
    return to_spark_batch(batch, target)


def _convert(col: pa.Array, to: pa.DataType) -> pa.Array:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.dictionary_decode()
        t = col.type
        if t == to:
            return col
    if pa.types.is_timestamp(t) and pa.types.is_timestamp(to):
        return col.cast(to, safe=False)  # ns -> us truncates, as Spark would
    if pa.types.is_struct(to) and pa.types.is_struct(t):
        flat = col.flatten()
        children = [_convert(c, to.field(i).type) if c.type != to.field(i).type else c for i, c in enumerate(flat)]
        mask = col.is_null() if col.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(to), mask=mask)
    if pa.types.is_list(to) and (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        if pa.types.is_fixed_size_list(t):
            col = col.cast(pa.list_(t.value_field))
        elif pa.types.is_large_list(t):
            col = col.cast(pa.list_(t.value_field))
        values = col.values
        if values.type != to.value_type:
            values = _convert(values, to.value_type)
        mask = col.is_null() if col.null_count else None
        return pa.ListArray.from_arrays(col.offsets, values, type=to, mask=mask)
    if pa.types.is_map(to) and pa.types.is_map(t):
        keys = col.keys if col.keys.type == to.key_type else _convert(col.keys, to.key_type)
        items = col.items if col.items.type == to.item_type else _convert(col.items, to.item_type)
        return pa.MapArray.from_arrays(col.offsets, keys, items, type=to, mask=col.is_null() if col.null_count else None)
    if pa.types.is_time(to) and pa.types.is_time(t):
        return col.cast(to)
    return col.cast(to, safe=False) if pa.types.is_floating(to) else col.cast(to)


# ---------------------------------------------------------------- writing
def arrow_schema_for_spark(spark: T.StructType) -> pa.Schema:
    """Arrow schema for a new Lance table created from a Spark schema: Spark's
    own Arrow mapping (timestamps as UTC instants), list items named ``item``
    as pyarrow and pylance name them (Spark says ``element``), Spark field
    metadata as Arrow field metadata (non-string values JSON-encoded)."""
    base = to_arrow_schema(spark, timezone="UTC")
    fields = []
    for f, sf in zip(base, spark.fields):
        f = f.with_type(_pyarrow_names(f.type))
        md = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in (sf.metadata or {}).items()}
        fields.append(f.with_metadata(md) if md else f)
    return pa.schema(fields)


def _pyarrow_names(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        item = pa.field("item", _pyarrow_names(item.type), item.nullable, item.metadata)
        return pa.list_(item) if pa.types.is_list(t) else pa.large_list(item)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_pyarrow_names(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        key = t.key_field.with_type(_pyarrow_names(t.key_type))
        item = t.item_field.with_type(_pyarrow_names(t.item_type))
        return pa.map_(key, item)
    return t


def lance_schema_for_spark(spark: T.StructType) -> Schema:
    for name in spark.fieldNames():
        if name in METADATA_COLUMNS:
            raise UnsupportedFeatureError(f"column name {name!r} is reserved for Lance metadata")
    return Schema.from_arrow(arrow_schema_for_spark(spark))


def comparable(t: T.DataType) -> T.DataType:
    """A Spark type with nullability and metadata erased (for schema checks)."""
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, comparable(f.dataType), True) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(comparable(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(comparable(t.keyType), comparable(t.valueType), True)
    return t


__all__ = [
    "spark_type", "spark_field", "spark_schema", "spark_arrow_schema", "to_spark_batch",
    "arrow_schema_for_spark", "lance_schema_for_spark", "comparable", "Field",
]


#: ``history()`` as a DataFrame (the core's history rows, Delta's columns).
HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("version", T.LongType(), False),
        T.StructField("timestamp", T.TimestampType(), True),
        T.StructField("operation", T.StringType(), True),
        T.StructField("readVersion", T.LongType(), True),
        T.StructField("operationParameters", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("operationMetrics", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("userMetadata", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("writer", T.StringType(), True),
        T.StructField("transactionUuid", T.StringType(), True),
        T.StructField("lanceOperation", T.StringType(), True),
        T.StructField("isolationLevel", T.StringType(), True),
        T.StructField("isBlindAppend", T.BooleanType(), True),
        T.StructField("engineInfo", T.StringType(), True),
    ]
)
