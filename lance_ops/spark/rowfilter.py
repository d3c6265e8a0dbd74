"""Row filters the ``lance`` scan evaluates in its read tasks.

A query's filter usually stays with Spark: ``id % 100 = 7`` is not a filter
Spark pushes into a Python data source, so every row of the scanned columns
crosses from the Python task into the JVM only to be dropped there. When
the caller knows the filter that applies right above the scan (``toDF(...,
filter=...)``, the WHERE of a single-table ``lance_ops.sql`` query), it is
analyzed by Spark over the scan's schema (:func:`lance_ops.spark.jvm.analyzed_json`),
translated by :mod:`lance_ops.arrow_eval` where every node is in its subset,
and shipped to the scan (option ``rowFilter``): each task drops the rows
where a conjunct is not true, with Spark's semantics (three-valued logic,
NaN, ANSI mode), before they reach the JVM. Spark still evaluates its own
filter on what is left, so results are Spark's by construction; the tasks
only stop sending rows that cannot pass. A row where a conjunct would
raise in ANSI mode is kept (Spark raises its own error for it).

Under Spark Connect (no analyzed plan object) the conditions are read from
their EXPLAIN text (:func:`lance_ops.spark.plans.analyzed_trees`); one the
text does not decode exactly stays with Spark alone. Off with
``spark.lance_ops.arrowEval.enabled=false``.
"""
from __future__ import annotations

import base64
import pickle

import numpy as np
import pyarrow as pa

#: Data source option carrying the encoded trees.
OPTION = "rowFilter"


def encode(trees: list) -> str:
    return base64.b64encode(pickle.dumps(list(trees))).decode("ascii")


def decode(text: str) -> list:
    return pickle.loads(base64.b64decode(text.encode("ascii")))


def apply(trees: list, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of ``batch`` (Spark-typed Arrow columns) where every tree is
    true -- or where one of them raises in ANSI mode (kept for Spark to
    raise on)."""
    from ..arrow_eval.vector import evaluate

    table = pa.Table.from_batches([batch])
    keep = np.ones(batch.num_rows, dtype=bool)
    errors = np.zeros(batch.num_rows, dtype=bool)
    for tree in trees:
        values, err = evaluate(tree, table)
        true = values.cast(pa.bool_()).fill_null(False)
        keep &= np.asarray(true.to_numpy(zero_copy_only=False), dtype=bool)
        errors |= np.asarray(err) != 0
    keep |= errors
    if keep.all():
        return batch
    return batch.filter(pa.array(keep))
