"""What a query plan says, read from ``EXPLAIN`` text: the plan inspection
of a session without a JVM at hand (Spark Connect).

A classic session asks Catalyst directly (:mod:`lance_ops.spark.jvm`). A
Connect client only gets the plan as text (``df.explain(True)``: parsed,
analyzed, optimized and physical plans -- one round trip, no data), so the
two decisions lance_ops takes from plans are read from that text:

* which columns a projection references (column pruning): the ``name#id``
  attributes of the analyzed plan's top ``Project``; where the text is not
  that shape (or truncated: ``... more fields``) the answer is None and the
  caller reads every column (correct, just wider);
* whether a DataFrame keeps its scan partitions (no exchange or sort in the
  physical plan), which decides between changing fragments in the scan's
  tasks and a shuffle by fragment.

Each function returns None when it cannot tell; callers then take the general
path and record that they did (``planInspection`` in the operation metrics).
"""
from __future__ import annotations

import io
import re
import sys
import threading

_SECTION = re.compile(r"^== (.+?) ==\s*$", re.M)


#: One ``explain`` capture at a time (see :class:`_ThisThreadTo`).
_capturing = threading.Lock()


class _ThisThreadTo(io.TextIOBase):
    """``sys.stdout`` while one thread's ``explain`` output is captured: that
    thread's writes go to the buffer, every other thread's to the stream
    that was there (``contextlib.redirect_stdout`` would take theirs too: a
    merge explains its source on a second thread while the first explains
    the clauses' plans under Spark Connect, and each must get its own)."""

    def __init__(self, buf: io.StringIO, other):
        super().__init__()
        self._buf, self._other, self._ident = buf, other, threading.get_ident()

    def write(self, text: str) -> int:
        return (self._buf if threading.get_ident() == self._ident else self._other).write(text)

    def flush(self) -> None:
        self._other.flush()

    def __getattr__(self, name):  # (encoding, fileno, ... of the real stream)
        return getattr(self._other, name)


def explain_sections(df) -> dict[str, str]:
    """``{"Parsed Logical Plan": text, "Analyzed Logical Plan": ..., ...}``
    of ``df.explain(True)`` (public API: the same on classic and Connect),
    safe to call from several threads at once."""
    buf = io.StringIO()
    with _capturing:
        prev = sys.stdout
        sys.stdout = _ThisThreadTo(buf, prev)
        try:
            df.explain(True)
        finally:
            sys.stdout = prev
    return split_sections(buf.getvalue())


def split_sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    marks = list(_SECTION.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[m.group(1)] = text[m.end():end].strip("\n")
    return out


def project_references(analyzed: str, names) -> list[str] | None:
    """Names (of ``names``) that the top ``Project`` of an analyzed plan
    references; None when the plan is not a plain projection or its text is
    truncated."""
    lines = [ln for ln in analyzed.splitlines() if ln.strip()]
    if len(lines) < 2:
        return None
    top = lines[1]  # (line 0: the output schema)
    if not top.startswith("Project [") or "more field" in top:
        return None
    # Subqueries and outer references put attributes below the top line.
    if re.search(r"\b(scalar-subquery|exists#|list#|outer\()", top):
        return None
    # Drop the output aliases (" AS name#id"): only inputs count.
    body = re.sub(r" AS [^#]*?#\d+L?(?=[,\]])", "", top)
    found = []
    for n in names:
        if re.search(r"(?<![\w`.])" + re.escape(n) + r"#\d+", body):
            found.append(n)
    return found


_SHUFFLE_OR_SORT = re.compile(r"\b(Exchange|Sort|SortMergeJoin|ShuffledHashJoin|CartesianProduct)\b")


def keeps_partitions(physical: str) -> bool:
    """True when a physical plan has no shuffle or sort."""
    return not _SHUFFLE_OR_SORT.search(physical)




def project_reference_ids(analyzed: str) -> set[int] | None:
    """Expression ids the top ``Project`` of an analyzed plan reads (None:
    not a plain, untruncated projection)."""
    lines = [ln for ln in analyzed.splitlines() if ln.strip()]
    if len(lines) < 2:
        return None
    top = lines[1]
    if not top.startswith("Project [") or "more field" in top:
        return None
    if re.search(r"\b(scalar-subquery|exists#|list#|outer\()", top):
        return None
    body = re.sub(r" AS [^#]*?#\d+L?(?=[,\]])", "", top)
    return {int(m.group(1)) for m in re.finditer(r"#(\d+)L?", body)}


def aliased_relation_output(analyzed: str, alias: str) -> dict[int, str] | None:
    """exprId -> name of the output of the relation under ``SubqueryAlias
    <alias>`` (a ``LocalRelation`` / ``LogicalRDD``: the empty frames lance_ops analyzes
    expressions over); None where the text is not that shape."""
    lines = analyzed.splitlines()
    for i, ln in enumerate(lines):
        if re.search(r"SubqueryAlias " + re.escape(alias) + r"\s*$", ln):
            for nxt in lines[i + 1:i + 2]:
                # (Connect: LocalRelation <empty>, [...]; classic: LogicalRDD [...], false)
                m = re.search(r"\b(?:LocalRelation|LogicalRDD)\b[^\[]*\[([^\]]*)\]", nxt)
                if not m or "more field" in m.group(1):
                    return None
                out = {}
                for part in m.group(1).split(", "):
                    a = re.fullmatch(r"(.+)#(\d+)L?", part.strip())
                    if not a:
                        return None
                    out[int(a.group(2))] = a.group(1)
                return out
            return None
    return None


#: Physical operators a source may consist of and still be read twice with
#: the same rows in the same order, partition by partition.
_REPLAYABLE_NODES = {
    "AdaptiveSparkPlan", "WholeStageCodegen", "InputAdapter", "ColumnarToRow", "FileScan", "LocalTableScan",
    "Range", "Project", "Filter", "Union", "LocalTableScanExec", "RowToColumnar",
}
#: Expressions whose value differs between two evaluations (or query runs).
_NONDETERMINISTIC = re.compile(
    r"\b(rand|randn|random|uuid|shuffle|monotonically_increasing_id|spark_partition_id|input_file_name|"
    r"input_file_block_start|input_file_block_length|current_timestamp|current_date|current_time|now|"
    r"localtimestamp|unix_timestamp|reflect|java_method|try_reflect|randstr|uniform)\s*\(|\bUDF\b",
    re.IGNORECASE,
)


_TREE = re.compile(r"^[\s|:+\-]*")
_ATTR = r"[A-Za-z_][A-Za-z0-9_]*#\d+L?"
_BARE_PROJECT = re.compile(rf"^Project \[{_ATTR}(, {_ATTR})*\]$")
_PARQUET_RELATION = re.compile(r"^Relation \[.*\] parquet$")


_NODE = re.compile(r"^[\s:|+\-]*([A-Za-z][A-Za-z0-9]*)", re.M)
#: Nodes of an optimized plan that is just a Python data source's scan, projected.
_BARE_SCAN = {"Project", "RelationV2"}


def is_bare_scan(optimized: str | None) -> bool:
    """Whether an optimized logical plan is only a data source scan under
    projections: Spark kept no filter, join or subquery of its own (all the
    condition went into the scan)."""
    if optimized is None:
        return False
    return not {m.group(1) for m in _NODE.finditer(optimized)} - _BARE_SCAN


def _plan_lines(text: str) -> list[str]:
    """A plan's lines without their tree drawing (empty lines left out)."""
    return [_TREE.sub("", ln).strip() for ln in text.splitlines() if ln.strip()]


def bare_parquet_scan(optimized_plan: str) -> bool:
    """True when an optimized logical plan reads Parquet files and does
    nothing else but keep some of their columns: the rows are exactly the
    files' rows (a merge then takes its source's statistics from their
    footers, :mod:`lance_ops.ops.sourcefooters`)."""
    lines = _plan_lines(optimized_plan)
    if not lines or not _PARQUET_RELATION.match(lines[-1]):
        return False
    return all(_BARE_PROJECT.match(ln) for ln in lines[:-1])


def local_relation(optimized_plan: str) -> bool:
    """True when an optimized logical plan is only data sent with the plan
    (``LocalRelation``: ``createDataFrame`` of pandas / Arrow data, and of
    any local data on Spark Connect)."""
    lines = _plan_lines(optimized_plan)
    return len(lines) == 1 and lines[0].startswith("LocalRelation [")


def physical_operators(physical: str) -> list[str]:
    """Operator names of a physical plan's text, one per plan line."""
    out = []
    for ln in _plan_lines(physical):
        body = re.sub(r"^\*\(\d+\)\s*", "", ln)
        m = re.match(r"([A-Za-z]\w*)", body)
        if m:
            out.append(m.group(1))
    return out


def replayable(sections: dict[str, str]) -> bool:
    """True when a DataFrame's plan (``explain_sections``) reads the same rows
    in the same partitions each time it runs: only file scans, local data and
    ranges under projections, filters and unions, and no expression whose
    value changes from one evaluation (or query) to the next. Unsure: False."""
    physical = sections.get("Physical Plan")
    analyzed = sections.get("Analyzed Logical Plan")
    if not physical or not analyzed:
        return False
    ops = physical_operators(physical)
    if not ops or any(op not in _REPLAYABLE_NODES for op in ops):
        return False
    return not (_NONDETERMINISTIC.search(analyzed) or _NONDETERMINISTIC.search(physical))


def analyzed_trees(df, schema) -> list | None:
    """The Arrow evaluator's trees (:mod:`lance_ops.arrow_eval.catalyst`) of
    a Spark Connect DataFrame's top ``select`` / ``where`` over an empty
    frame of ``schema`` (a StructType), read from its ``EXPLAIN`` text and
    the literals of the SQL it was built from
    (:mod:`lance_ops.arrow_eval.plantext`); None when the text does not
    say exactly one thing in the decoder's subset (Spark evaluates then).
    Costs one ``explain`` round trip and three conf lookups. (Callers record ``planInspection`` "explain".)"""
    from ..arrow_eval.catalyst import Unsupported
    from ..arrow_eval.plantext import decode_text
    from .pyspark_internals import connect_literals

    try:
        candidates = connect_literals(df)
        analyzed = explain_sections(df).get("Analyzed Logical Plan")
        if not analyzed:
            return None
        conf = df.sparkSession.conf  # (effective values: getAll lists only what was set)

        def flag(key: str) -> bool:
            return str(conf.get(key)).strip().lower() == "true"

        types = {f.name: _json_type(f.dataType) for f in schema.fields}
        return decode_text(analyzed, types, candidates, ansi=flag("spark.sql.ansi.enabled"),
                           tz=conf.get("spark.sql.session.timeZone"),
                           allow_precision_loss=flag("spark.sql.decimalOperations.allowPrecisionLoss"))
    except Unsupported:
        return None


def _json_type(dtype) -> str | None:
    """A Spark type as the decoder names it (``toJSON``'s names), None for
    nested and other types it never reads."""
    v = dtype.jsonValue()
    return v if isinstance(v, str) else None
