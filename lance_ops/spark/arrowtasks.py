"""Row-level changes whose condition Arrow evaluates in the tasks.

Driver side, :func:`arrow_condition` takes the user's condition *from Spark*:
it plans ``scan.where(condition)`` over the ``lance`` data source with the
``arrowEval`` option, so Spark analyzes and optimizes the condition and
pushes its conjuncts as typed ``pyspark.sql.datasource`` filters; the scan
takes over every filter :mod:`lance_ops.arrow_eval` evaluates exactly and
writes them down. Only when Spark kept no filter of its own (the optimized
plan is the bare scan) is the whole condition in Arrow's hands; otherwise
the operation runs its Spark path. Planning uses the public ``explain``
(works from Spark Connect as well; no JVM handle).

Then one Spark stage, one task per group of fragments
(``spark.range(n).mapInArrow`` over task descriptions): each task reads the
referenced columns of its fragments from the Lance files, evaluates the
condition with Arrow and writes the fragments' new deletion vectors -- no
row crosses into the JVM.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..format.proto import table_pb2
from ..format.scan import ROW_ADDR, FragmentScan, scan_fragment
from .fanout import run_pair_tasks
from .rowchanges import ACTION, DELETE, ChangeContext, ChangeSet, _Schemas, change_fragment
from .types import spark_arrow_schema, spark_schema

CONF = "spark.lance_ops.arrowEval.enabled"


def enabled(spark) -> bool:
    try:
        return str(spark.conf.get(CONF, "true")).strip().lower() in ("1", "true", "yes", "on")
    except Exception:
        return True


def log_evaluation(operation: str, snap, evaluation: str) -> None:
    """The progress line saying which path evaluates the operation's SQL."""
    import logging

    logging.getLogger("lance_ops.progress").info(
        "%s %s v%s: evaluation %s", operation, snap.store.root, snap.version, evaluation)


@dataclass
class ArrowCondition:
    """A condition Arrow evaluates: its tree, the columns it reads, and the
    skip plan (fragment id -> row ranges) of the pushed conjuncts."""

    tree: object
    columns: list[str]
    metadata: list[str]
    ranges: dict[int, list[tuple[int, int]]]
    skipped: list[int]


_NODE = re.compile(r"^[\s:|+\-]*([A-Za-z][A-Za-z0-9]*)", re.M)
#: Nodes of an optimized plan that is just our scan, projected.
_BARE_SCAN = {"Project", "RelationV2"}


def _optimized_plan(text: str) -> str | None:
    m = re.search(r"== Optimized Logical Plan ==\n(.*?)\n== Physical Plan ==", text, re.S)
    return m.group(1) if m else None


def arrow_condition(spark, snap, condition, columns: list[str], metadata: list[str]) -> ArrowCondition | None:
    """The condition as an Arrow-evaluable tree, taken from Spark's
    optimized plan of ``scan.where(condition)``; None when any part of it is
    outside the subset (or the conf is off, or filter pushdown is off)."""
    from ..arrow_eval.expr import And, compile_expr
    from ..format.pruning import skip_plan
    from .datasource import read_arrow_eval_report
    from .frames import as_column, scan_frame

    if not enabled(spark):
        return None
    fd, path = tempfile.mkstemp(prefix="lance_ops-arrow-eval-", suffix=".pickle")
    os.close(fd)
    os.unlink(path)
    try:
        frame = scan_frame(spark, snap, columns, metadata, split_fragments=False, arrow_eval=path)
        planned = frame.where(as_column(condition)).select(ROW_ADDR)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            planned.explain(mode="extended")
        plan = _optimized_plan(out.getvalue())
        if plan is None or {m.group(1) for m in _NODE.finditer(plan)} - _BARE_SCAN:
            return None  # Spark kept a filter (or a join, a subquery...) of its own
        report = read_arrow_eval_report(path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if not report or not report["accepted"]:
        return None
    tree = And(tuple(report["accepted"]))
    arrow_in = spark_arrow_schema(spark_schema(snap.schema, columns, metadata))
    if compile_expr(tree, arrow_in) is None:
        return None
    sp = skip_plan(snap, report["conjuncts"])
    return ArrowCondition(tree, list(columns), list(metadata), sp.ranges, list(sp.skipped))


def fragment_tasks(snap, cond: ArrowCondition, rows_per_task: int) -> list[list[tuple[bytes, list]]]:
    """Groups of (fragment bytes, row ranges) of about ``rows_per_task`` rows."""
    groups, current, rows = [], [], 0
    for frag in snap.fragments:
        rs = cond.ranges.get(frag.id)
        if not rs or not frag.physical_rows:
            continue
        current.append((frag.SerializeToString(), rs))
        rows += sum(e - s for s, e in rs)
        if rows >= rows_per_task:
            groups.append(current)
            current, rows = [], 0
    if current:
        groups.append(current)
    return groups


def arrow_delete_task(ctx: ChangeContext, cond: ArrowCondition):
    """Executor work of one task: per fragment, the offsets where the
    condition is true, unioned into the deletion vector (``change_fragment``,
    the same code the Spark path ends in); returns (kind, payload) pairs."""
    from ..arrow_eval.expr import compile_expr, evaluate

    def run(group) -> list[tuple[str, bytes]]:
        arrow_in = spark_arrow_schema(spark_schema(ctx.schema, cond.columns, cond.metadata))
        expr = compile_expr(cond.tree, arrow_in)
        schemas = _Schemas(ctx)
        out = []
        from .types import to_spark_batch

        for raw, ranges in group:
            frag = table_pb2.DataFragment.FromString(raw)
            hits = []
            for start, end in ranges:
                scan = FragmentScan(frag, cond.columns, cond.metadata, start, end, stable_row_ids=ctx.stable_row_ids)
                for batch in scan_fragment(ctx.store, ctx.schema, scan):
                    if not batch.num_rows:
                        continue
                    batch = to_spark_batch(batch.select(arrow_in.names), arrow_in)
                    hit = evaluate(expr, batch).column(ROW_ADDR)
                    if len(hit):
                        hits.append(hit.combine_chunks())
            if not hits:
                continue
            addr = pa.concat_arrays(hits)
            requests = pa.table({ROW_ADDR: addr, ACTION: pa.array(np.full(len(addr), DELETE, dtype=object), pa.string())})
            result = change_fragment(ctx, schemas, frag.id, requests)
            kinds = result.column("_kind").to_pylist()
            payloads = result.column("_payload").to_pylist()
            out.extend((k, p) for k, p in zip(kinds, payloads))
        return out

    return run


def run_arrow_changes(spark, groups, task) -> ChangeSet:
    """``task(group)`` once per group, one Spark task each (no RDD: works
    from Spark Connect too)."""
    return ChangeSet.from_rows(run_pair_tasks(spark, groups, task))
