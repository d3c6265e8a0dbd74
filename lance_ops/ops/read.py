"""toDF(): the table at a version through the ``lance`` data source."""
from __future__ import annotations

from ..format.scan import ROW_ADDR, ROW_CREATED, ROW_ID, ROW_UPDATED
from ..spark.credentials import reader_options
from ..spark.datasource import register
from ..spark.frames import rows_per_partition
from ..txn.log import open_snapshot

#: Spark conf: a directory where every scan task of ``toDF()`` (and of
#: ``lance_ops.sql`` queries) writes which columns it read (see
#: :func:`lance_ops.spark.datasource.write_scan_trace`).
SCAN_TRACE_CONF = "spark.lance_ops.scanTrace"


def read_dataframe(
    spark,
    store,
    version: int,
    *,
    columns=None,
    with_row_id=False,
    with_row_addr=False,
    with_lineage=False,
    extra_metadata=(),
    row_filter=None,
):
    """The table at ``version`` through the ``lance`` data source.
    ``row_filter``: conditions (Spark SQL strings or Columns) known to apply
    right above this scan -- the read tasks drop the rows they rule out with
    Arrow (:mod:`lance_ops.spark.rowfilter`); the caller still applies them
    with Spark (``toDF(filter=...)`` and ``lance_ops.sql`` do)."""
    from ..spark.types import spark_schema

    register(spark)
    meta = []
    if with_row_id:
        meta.append(ROW_ID)
    if with_row_addr:
        meta.append(ROW_ADDR)
    if with_lineage:
        meta += [ROW_CREATED, ROW_UPDATED]
    meta += [m for m in extra_metadata if m not in meta]
    snap = open_snapshot(store, version)
    reader = spark.read.format("lance").option("version", str(version))
    reader = reader.option("rowsPerPartition", str(rows_per_partition(spark, snap.num_rows())))
    if columns is not None:
        reader = reader.option("columns", ",".join(columns))
    if meta:
        reader = reader.option("metadataColumns", ",".join(meta))
    trace = spark.conf.get(SCAN_TRACE_CONF, None)
    if trace:
        reader = reader.option("scanTrace", trace)
    reader = reader.options(**reader_options(spark, store))
    # The schema the source would report, given up front: Spark then skips
    # the data source's schema() round trip (a Python planner process).
    schema = spark_schema(snap.schema, columns, meta)
    if row_filter:
        from ..spark.rowfilter import OPTION, encode

        trees = analyzed_filters(spark, schema, row_filter)
        if trees:
            reader = reader.option(OPTION, encode(trees))
    return reader.schema(schema).load(store.uri)


def analyzed_filters(spark, schema, conditions) -> list:
    """The conditions (Spark SQL strings or Columns over a frame of
    ``schema``) as :mod:`lance_ops.arrow_eval.catalyst` trees -- each one
    analyzed by Spark on its own; those outside the subset (or not
    boolean, or failing analysis) are left out: Spark evaluates them.
    What the read tasks do with them: :mod:`lance_ops.spark.rowfilter`."""
    import json

    from ..spark import jvm
    from ..spark.arrowtasks import enabled, inline_with

    if not conditions or not enabled(spark):
        return []
    from ..arrow_eval.catalyst import try_decode
    from ..spark.frames import as_column, empty_frame
    from ..spark.plans import analyzed_trees

    frame = empty_frame(spark, schema)
    connect = jvm.is_connect(spark)
    out = []
    for c in conditions:
        try:
            if connect:  # (EXPLAIN text: lance_ops.arrow_eval.plantext)
                trees = analyzed_trees(frame.select(as_column(c).alias("__filter")), schema)
            else:
                doc = jvm.analyzed_json(frame.select(as_column(c)))
                trees = try_decode(json.loads(inline_with(doc))) if doc is not None else None
        except Exception:  # (Spark reports bad SQL when it runs the query itself)
            continue
        if trees and len(trees) == 1 and trees[0].type == "boolean":
            out.append(trees[0])
    return out
