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
import decimal
import os
import re
import tempfile
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_eval.vector import raise_on_error_rows
from ..format.proto import table_pb2
from ..format.scan import ROW_ADDR, FragmentScan, scan_fragment
from . import plans
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
        if not plans.is_bare_scan(plans.explain_sections(planned).get("Optimized Logical Plan")):
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


#: Rows an Arrow task handles at most. Its work is cheap (reading the
#: referenced columns and evaluating them: ~30 ns a row) next to its fixed
#: cost (a Spark task handing a Python worker its function and results:
#: 0.1-0.3 s here), so a second wave of tasks costs more than it saves:
#: one task per slot, up to this many rows each.
ARROW_TASK_ROWS = 16 * 1024 * 1024


def one_wave(spark, items, rows: list[int]) -> list[list]:
    """``items`` (in order; ``rows[i]`` rows each) in contiguous groups of
    about equal rows, one per task slot (more when a group would exceed
    :data:`ARROW_TASK_ROWS`): the inputs of Arrow tasks."""
    from .frames import total_cores

    items = list(items)
    total = sum(rows)
    return balanced_groups(items, rows, max(total_cores(spark), -(-total // ARROW_TASK_ROWS)))


def balanced_groups(items: list, rows: list[int], n: int) -> list[list]:
    """At most ``n`` non-empty contiguous groups of ``items`` whose ``rows``
    sum to about ``total / n`` each (a group closes once the running total
    reaches its share)."""
    n = max(1, min(n, len(items)))
    total = sum(rows)
    groups: list[list] = []
    current: list = []
    acc, k = 0, 1
    for item, r in zip(items, rows):
        current.append(item)
        acc += r
        if len(groups) < n - 1 and acc * n >= total * k:
            groups.append(current)
            current = []
            k = acc * n // max(total, 1) + 1
    if current:
        groups.append(current)
    return groups


def fragment_tasks(spark, snap, cond) -> list[list[tuple[bytes, list]]]:
    """The (fragment bytes, row ranges) Arrow tasks read, in
    :func:`one_wave` groups (fragments data skipping rules out are left
    out)."""
    kept = [(f.SerializeToString(), cond.ranges[f.id]) for f in snap.fragments
            if cond.ranges.get(f.id) and f.physical_rows]
    return one_wave(spark, kept, [sum(e - s for s, e in item[1]) for item in kept])


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
        for raw, ranges in group:
            frag = table_pb2.DataFragment.FromString(raw)
            hits = []
            for batch in _spark_batches(ctx, frag, ranges, cond.columns, cond.metadata, arrow_in):
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


def _spark_batches(ctx, frag, ranges, columns, metadata, arrow_in: pa.Schema):
    """The non-empty batches of ``columns`` (+ ``metadata``) over a fragment's
    row ``ranges``, as Spark types (``arrow_in``): what every Arrow task reads."""
    from .types import scanned_spark_batch

    for start, end in ranges:
        scan = FragmentScan(frag, columns, metadata, start, end, stable_row_ids=ctx.stable_row_ids)
        for batch in scan_fragment(ctx.store, ctx.schema, scan):
            if batch.num_rows:
                yield scanned_spark_batch(batch, arrow_in, frag.id)


def scanned_metrics(snap, groups) -> dict:
    """Scan metrics of Arrow tasks over ``groups`` (from :func:`fragment_tasks`)."""
    n = sum(1 for g in groups for _ in g)
    return {"numFragmentsScanned": n, "numFragmentsSkipped": len(snap.fragments) - n,
            "numRowsScanned": sum(e - s for g in groups for _, rs in g for s, e in rs)}


def run_arrow_changes(spark, groups, task) -> ChangeSet:
    """``task(group)`` once per group, one Spark task each (no RDD: works
    from Spark Connect too)."""
    return ChangeSet.from_rows(run_pair_tasks(spark, groups, task))


# ------------------------------------------------------------------ update
@dataclass
class ArrowValues:
    """An update Arrow evaluates: the condition (None: every row) and the
    new values as :mod:`lance_ops.arrow_eval.catalyst` trees, from Spark's
    analyzed plan; the columns they read, the data skipping ranges."""

    condition: object
    values: dict
    columns: list[str]
    metadata: list[str]
    ranges: dict[int, list[tuple[int, int]]]
    skipped: list[int]


def arrow_values(spark, snap, projected, has_condition: bool, names: list[str]) -> ArrowValues | None:
    """The analyzed projection ``projected`` (``[condition,] value...``, over
    the table's analysis frame) as Arrow-evaluable trees; None when the conf
    is off or any node is outside the subset. A classic session gives the
    analyzed plan as JSON; Spark Connect only as EXPLAIN text, read back by
    :func:`lance_ops.spark.plans.analyzed_trees`."""
    from ..arrow_eval.catalyst import try_decode
    from ..format.pruning import skip_plan
    from ..format.scan import METADATA_COLUMNS
    from .frames import record_inspection, table_spark_schema
    from .jvm import analyzed_json, is_connect

    if not enabled(spark):
        return None
    doc = analyzed_json(projected)
    if doc is not None:
        trees = try_decode(inline_with(doc))
    elif is_connect(spark):  # (no analyzed plan object: its EXPLAIN text)
        record_inspection("explain")
        trees = plans.analyzed_trees(projected, table_spark_schema(snap, METADATA_COLUMNS))
    else:
        trees = None
    if trees is None or len(trees) != len(names) + has_condition:
        return None
    cond = trees[0] if has_condition else None
    if cond is not None and cond.type not in ("boolean", "void"):
        return None
    values = dict(zip(names, trees[has_condition:]))
    refs = set().union(*(t.columns() for t in trees))
    data = [c for c in snap.schema.names if c in refs]
    meta = [ROW_ADDR] + [c for c in METADATA_COLUMNS if c in refs and c != ROW_ADDR]
    if refs - set(data) - set(meta):
        return None
    sp = skip_plan(snap, pruning_conjuncts(cond)) if cond is not None else None
    ranges = sp.ranges if sp is not None else {f.id: [(0, f.physical_rows)] for f in snap.fragments}
    return ArrowValues(cond, values, data, meta, ranges, list(sp.skipped) if sp else [])


def inline_with(doc: str) -> str:
    """``doc`` (``jvm.analyzed_json``) with Spark's common-subexpression
    wrappers inlined: ``x BETWEEN a AND b`` analyzes to ``Between`` whose one
    child (its replacement) is ``With(x >= a AND x <= b, def x)``, the
    comparisons reading ``x`` through ``CommonExpressionRef``. Replacing the
    ``Between`` node by its replacement with every reference to the single
    definition substituted by the definition's expression is exactly what
    Spark evaluates (the definition is computed once there, here per use:
    the same values for the deterministic expressions the decoder accepts).
    Nodes and their evaluation modes are rewritten in lockstep; anything
    unexpected is left as it is (the decoder then rejects it: Spark path)."""
    import json

    d = json.loads(doc)
    if "Between" not in doc:
        return doc

    def parse(nodes, modes, i):
        n = int(nodes[i]["num-children"])
        kids, j = [], i + 1
        for _ in range(n):
            kid, j = parse(nodes, modes, j)
            kids.append(kid)
        return (nodes[i], modes[i], kids), j

    def cls(t):
        return t[0]["class"].rsplit(".", 1)[-1]

    def subst(t, value):
        if cls(t) == "CommonExpressionRef":
            return value
        return (t[0], t[1], [subst(k, value) for k in t[2]])

    def rewrite(t):
        t = (t[0], t[1], [rewrite(k) for k in t[2]])
        if cls(t) == "Between" and len(t[2]) == 1 and cls(t[2][0]) == "With":
            body, *defs = t[2][0][2]
            if len(defs) == 1 and cls(defs[0]) == "CommonExpressionDef" and len(defs[0][2]) == 1:
                return subst(body, defs[0][2][0])
        return t

    def flatten(t, nodes, modes):
        nodes.append(t[0])
        modes.append(t[1])
        for k in t[2]:
            flatten(k, nodes, modes)

    try:
        exprs, all_modes = [], []
        for nodes, modes in zip(d["exprs"], d["modes"]):
            if len(nodes) != len(modes):
                return doc
            tree, end = parse(nodes, [list(m) for m in modes], 0)
            if end != len(nodes):
                return doc
            out_n, out_m = [], []
            flatten(rewrite(tree), out_n, out_m)
            exprs.append(out_n)
            all_modes.append(out_m)
    except (KeyError, TypeError, ValueError, IndexError, RecursionError):
        return doc
    d["exprs"], d["modes"] = exprs, all_modes
    return json.dumps(d)


_PRUNE_TYPES = ("byte", "short", "integer", "long", "string", "date", "float", "double")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


_INTEGRAL = ("byte", "short", "integer", "long")
_FLOATS = ("float", "double")
_DECIMAL_TYPE = re.compile(r"decimal\((\d+),(\d+)\)")
_NOT_A_LITERAL = object()


def _literal(node, want: str):
    """The value of ``node`` if it is a literal of type ``want`` -- or an
    integral literal widened to ``want`` (the analyzer's ``CAST(3 AS BIGINT)``
    for ``long_col = 3``: the value is unchanged) -- else ``_NOT_A_LITERAL``."""
    if node.kind == "cast" and node.type == want and want in _INTEGRAL:
        inner = node.args[0]
        if inner.kind == "lit" and inner.type in _INTEGRAL \
                and _INTEGRAL.index(inner.type) <= _INTEGRAL.index(want):
            return inner.value
    if node.kind in ("cast", "deccast") and node.type == want and want in _FLOATS:
        # the analyzer's CAST(0.3 AS DOUBLE) for ``double_col > 0.3`` (a decimal
        # or integral literal): the double Spark compares with, correctly rounded
        inner = node.args[0]
        if inner.kind == "lit" and inner.value is not None:
            m = _DECIMAL_TYPE.fullmatch(inner.type or "")
            if m:
                return float(decimal.Decimal(inner.value).scaleb(-int(m.group(2))))
            if inner.type in _INTEGRAL or (inner.type == "float" and want == "double"):
                return float(inner.value)
    if node.kind == "lit" and node.type == want:
        return node.value
    return _NOT_A_LITERAL


def pruning_conjuncts(tree) -> list:
    """Top-level ``column op literal`` conjuncts of a condition tree, for data
    skipping (the ones Spark would push to the scan)."""
    from ..format.pruning import Conjunct

    if tree is None:
        return []
    if tree.kind == "and":
        return [c for a in tree.args for c in pruning_conjuncts(a)]
    out = []
    if tree.kind == "cmp" and tree.value in _FLIP:
        a, b = tree.args
        op = tree.value
        if b.kind == "attr" and a.kind != "attr":
            a, b, op = b, a, _FLIP[op]
        if a.kind == "attr" and a.type in _PRUNE_TYPES:
            v = _literal(b, a.type)
            if v is not _NOT_A_LITERAL and v is not None:
                out.append(Conjunct(a.value, op, v))
    elif tree.kind == "in" and tree.args[0].kind == "attr" and tree.args[0].type in _PRUNE_TYPES:
        values = [_literal(v, tree.args[0].type) for v in tree.args[1:]]
        if all(v is not _NOT_A_LITERAL for v in values):
            values = [v for v in values if v is not None]  # (NULL never matches)
            if values:
                out.append(Conjunct(tree.args[0].value, "in", values))
    elif tree.kind == "isnull" and tree.args[0].kind == "attr":
        out.append(Conjunct(tree.args[0].value, "notnull" if tree.value else "isnull"))
    return out


def arrow_update_task(ctx: ChangeContext, av: ArrowValues):
    """Executor work of one update (or, without values, delete) task: per
    fragment, read the referenced columns of its ranges, evaluate the
    condition and the new values with Arrow, and hand the change requests to
    ``change_fragment`` and the change writer -- the very code the Spark
    path's tasks end in (same deletion vectors, moved rows keep their row ids
    and created-at versions). An ANSI error row raises
    :class:`ArrowEvalFallback`."""
    from ..arrow_eval.vector import evaluate
    from .rowchanges import UPDATE, _ChangeWriter

    action = UPDATE if av.values else DELETE
    check = raise_on_error_rows

    def run(group) -> list[tuple[str, bytes]]:
        arrow_in = spark_arrow_schema(spark_schema(ctx.schema, av.columns, av.metadata))
        out_types = {f.name: f.type for f in spark_arrow_schema(ctx.table_spark)}
        schemas = _Schemas(ctx)
        writer = _ChangeWriter(ctx)
        try:
            for raw, ranges in group:
                frag = table_pb2.DataFragment.FromString(raw)
                parts = list(_spark_batches(ctx, frag, ranges, av.columns, av.metadata, arrow_in))
                if not parts:
                    continue
                rows = pa.Table.from_batches(parts, schema=arrow_in)
                if av.condition is not None:
                    hit, err = evaluate(av.condition, rows)
                    check(err, "condition")
                    rows = rows.filter(hit.cast(pa.bool_()).fill_null(False))
                if not rows.num_rows:
                    continue
                cols = {ROW_ADDR: rows.column(ROW_ADDR).combine_chunks(),
                        ACTION: pa.array(np.full(rows.num_rows, action, dtype=object), pa.string())}
                for name, tree in av.values.items():
                    v, err = evaluate(tree, rows)
                    check(err, f"value of {name}")
                    cols[name] = v if v.type == out_types[name] else v.cast(out_types[name])
                writer.add(change_fragment(ctx, schemas, frag.id, pa.table(cols)))
            out = []
            for b in writer.finish():
                out.extend(zip(b.column(0).to_pylist(), b.column(1).to_pylist()))
            return out
        except BaseException:
            writer.abort()
            raise

    return run


# ------------------------------------------------------- column expressions
def arrow_column_transform(av: ArrowValues, target: pa.Schema):
    """``ColumnFileContext.transform`` computing the columns of ``target``
    from their trees (``av.values``) over one input batch; an ANSI error row
    raises :class:`ArrowEvalFallback`."""

    def apply(batch: pa.RecordBatch) -> pa.RecordBatch:
        from ..arrow_eval.vector import evaluate

        table = pa.Table.from_batches([batch])
        cols = []
        for f in target:
            v, err = evaluate(av.values[f.name], table)
            raise_on_error_rows(err, f"column {f.name}")
            cols.append(v if v.type == f.type else v.cast(f.type))
        return pa.RecordBatch.from_arrays(cols, schema=target)

    return apply


def arrow_rewrite_transform(av: ArrowValues, target: pa.Schema, changed_name: str):
    """``ColumnFileContext.transform`` of rewriteColumns: each assigned
    column's new value where the condition is true (evaluated only there, as
    Spark's ``CASE WHEN`` would), its old value elsewhere, and the changed
    flag (condition true). Without a condition every row changes."""

    def apply(batch: pa.RecordBatch) -> pa.RecordBatch:
        from ..arrow_eval.vector import ERRORS, evaluate
        from ..errors import ArrowEvalFallback

        def check(err, what):
            if err.any():
                code = int(err[err != 0][0])
                raise ArrowEvalFallback(f"{what}: a row raises {ERRORS[code]} in ANSI mode")

        table = pa.Table.from_batches([batch])
        if av.condition is not None:
            hit, err = evaluate(av.condition, table)
            check(err, "condition")
            changed = hit.cast(pa.bool_()).fill_null(False)
        else:
            changed = pa.array(np.ones(table.num_rows, bool))
        rows = table.filter(changed)
        cols = []
        for f in target:
            v, err = evaluate(av.values[f.name], rows)
            check(err, f"value of {f.name}")
            v = v if v.type == f.type else v.cast(f.type)
            old = table.column(f.name).combine_chunks()
            old = old if old.type == f.type else old.cast(f.type)
            if rows.num_rows == table.num_rows:
                cols.append(v)
                continue
            # scatter the new values into the changed positions
            idx = np.cumsum(np.asarray(changed.to_numpy(zero_copy_only=False), bool)) - 1
            idx = np.clip(idx, 0, max(rows.num_rows - 1, 0))
            spread = v.take(pa.array(idx)) if rows.num_rows else pa.nulls(table.num_rows, f.type)
            cols.append(pc.if_else(changed, spread, old))
        if av.condition is None:
            return pa.RecordBatch.from_arrays(cols, schema=target)
        cols.append(changed)
        return pa.RecordBatch.from_arrays(cols, names=[f.name for f in target] + [changed_name])

    return apply
