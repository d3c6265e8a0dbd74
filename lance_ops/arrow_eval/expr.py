"""A small predicate tree and its translation to Arrow with Spark's semantics.

The tree is never parsed from SQL text: it is built from what Spark hands
over after analysis and optimization (:func:`from_filters` takes the
``pyspark.sql.datasource`` filters Spark pushes into the ``lance`` data
source -- conjuncts with literals already coerced to the column's type).

Spark SQL semantics that differ from Arrow's defaults, handled explicitly:

* three-valued logic: comparisons with null are null, ``NOT null`` is null,
  AND/OR are Kleene; a filter keeps rows where the predicate is *true*;
* floats: ``NaN = NaN`` is true and NaN is larger than every other value,
  ``+inf`` included (Arrow: NaN compares false with everything); ``-0.0 =
  0.0``;
* ``x IN (...)`` is the OR of equalities (so NaN and -0.0 match as above;
  a null in the list makes a non-match null);
* ``<=>`` (null-safe equality) is never null;
* strings compare by UTF-8 bytes (Spark's default UTF8_BINARY collation),
  which is Arrow's order;
* numeric promotion: an integer column compared with a floating literal is
  compared as double (as Spark casts it); integers as int64.

Anything else -- other types (decimal, binary, nested), literals that do not
fit the column's domain, column-vs-column comparisons -- gives ``None`` from
:func:`compile_expr`, and the caller falls back to Spark.
"""
from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

CMP_OPS = ("=", "<>", "<", "<=", ">", ">=", "<=>")


@dataclass(frozen=True)
class Col:
    name: str


@dataclass(frozen=True)
class Lit:
    value: object  # None = SQL NULL


@dataclass(frozen=True)
class Cmp:
    op: str
    column: Col
    literal: Lit


@dataclass(frozen=True)
class And:
    children: tuple


@dataclass(frozen=True)
class Or:
    children: tuple


@dataclass(frozen=True)
class Not:
    child: object


@dataclass(frozen=True)
class IsNull:
    column: Col
    negated: bool = False


@dataclass(frozen=True)
class In:
    column: Col
    values: tuple


@dataclass(frozen=True)
class Between:
    column: Col
    low: Lit
    high: Lit


@dataclass(frozen=True)
class StrMatch:
    kind: str  # "starts" | "ends" | "contains"
    column: Col
    value: str


class Unsupported(Exception):
    """Outside the subset: the caller falls back to Spark."""


# ------------------------------------------------------------ from Spark
_FILTER_OPS = {
    "EqualTo": "=", "EqualNullSafe": "<=>", "GreaterThan": ">", "GreaterThanOrEqual": ">=",
    "LessThan": "<", "LessThanOrEqual": "<=",
}
_STR_KINDS = {"StringStartsWith": "starts", "StringEndsWith": "ends", "StringContains": "contains"}


def from_filter(f):
    """One ``pyspark.sql.datasource`` filter as a tree (None if outside the
    subset). Matched by class name: no pyspark import needed here."""
    kind = type(f).__name__
    if kind == "Not":
        child = from_filter(f.child)
        return None if child is None else Not(child)
    attr = tuple(getattr(f, "attribute", ()) or ())
    if len(attr) != 1:
        return None  # nested fields
    col = Col(attr[0])
    if kind in _FILTER_OPS:
        return Cmp(_FILTER_OPS[kind], col, Lit(f.value))
    if kind == "In":
        return In(col, tuple(Lit(v) for v in f.value))
    if kind == "IsNull":
        return IsNull(col)
    if kind == "IsNotNull":
        return IsNull(col, negated=True)
    if kind in _STR_KINDS and isinstance(f.value, str):
        return StrMatch(_STR_KINDS[kind], col, f.value)
    return None


def from_filters(filters):
    """The conjunction of ``filters`` as a tree (None if any is outside the subset)."""
    out = []
    for f in filters:
        t = from_filter(f)
        if t is None:
            return None
        out.append(t)
    return And(tuple(out))


# ------------------------------------------------------------ to Arrow
_NULL = pc.scalar(pa.scalar(None, pa.bool_()))
_EPOCH = datetime.datetime(1970, 1, 1)


def compile_expr(tree, schema: pa.Schema) -> pc.Expression | None:
    """``tree`` as a ``pyarrow.compute`` boolean expression over columns of
    ``schema`` (the Spark-typed Arrow schema the rows are evaluated in), or
    None when outside the subset."""
    try:
        return _compile(tree, schema)
    except Unsupported:
        return None


def _compile(t, schema: pa.Schema) -> pc.Expression:
    if isinstance(t, And):
        if not t.children:
            return pc.scalar(True)
        out = _compile(t.children[0], schema)
        for c in t.children[1:]:
            out = pc.and_kleene(out, _compile(c, schema))
        return out
    if isinstance(t, Or):
        if not t.children:
            return pc.scalar(False)
        out = _compile(t.children[0], schema)
        for c in t.children[1:]:
            out = pc.or_kleene(out, _compile(c, schema))
        return out
    if isinstance(t, Not):
        return pc.invert(_compile(t.child, schema))
    if isinstance(t, IsNull):
        x, _ = _column(t.column, schema)
        return pc.is_valid(x) if t.negated else pc.is_null(x)
    if isinstance(t, Cmp):
        if t.op not in CMP_OPS:
            raise Unsupported(t.op)
        return _cmp(t.op, t.column, t.literal, schema)
    if isinstance(t, In):
        if not t.values:
            raise Unsupported("empty IN")
        return _compile(Or(tuple(Cmp("=", t.column, v) for v in t.values)), schema)
    if isinstance(t, Between):
        return pc.and_kleene(_cmp(">=", t.column, t.low, schema), _cmp("<=", t.column, t.high, schema))
    if isinstance(t, StrMatch):
        x, typ = _column(t.column, schema)
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)) or not isinstance(t.value, str):
            raise Unsupported(t)
        fn = {"starts": pc.starts_with, "ends": pc.ends_with, "contains": pc.match_substring}[t.kind]
        return fn(x, pattern=t.value)
    raise Unsupported(type(t).__name__)


def _column(c, schema: pa.Schema):
    if not isinstance(c, Col) or c.name not in schema.names:
        raise Unsupported(c)
    return pc.field(c.name), schema.field(c.name).type


def _cmp(op: str, col: Col, lit: Lit, schema: pa.Schema) -> pc.Expression:
    x, typ = _column(col, schema)
    v = lit.value if isinstance(lit, Lit) else _raise(lit)
    if v is None:
        if op == "<=>":
            return pc.is_null(x)
        _domain(v, typ)
        return _NULL
    x, v, is_float = _domain_cast(x, typ, v)
    if op == "<=>":
        return pc.and_kleene(pc.is_valid(x), _plain_or_float("=", x, v, is_float))
    return _plain_or_float(op, x, v, is_float)


def _raise(x):
    raise Unsupported(x)


def _domain(v, typ):
    """Column types in the subset (a null literal needs no conversion)."""
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_string(typ)
            or pa.types.is_large_string(typ) or pa.types.is_boolean(typ) or pa.types.is_date32(typ)
            or pa.types.is_timestamp(typ)):
        raise Unsupported(typ)


def _domain_cast(x, typ, v):
    """(column expression, literal scalar, compare-as-float) in the domain
    Spark compares in; Unsupported if the literal does not belong there."""
    _domain(v, typ)
    if pa.types.is_boolean(typ):
        if not isinstance(v, bool):
            raise Unsupported(v)
        return x, pc.scalar(v), False
    if pa.types.is_integer(typ):
        if isinstance(v, bool):
            raise Unsupported(v)
        if isinstance(v, int):
            if not -(2**63) <= v < 2**63:
                raise Unsupported(v)
            return x.cast(pa.int64()), pc.scalar(pa.scalar(v, pa.int64())), False
        if isinstance(v, float):  # Spark casts the integer column to double
            return x.cast(pa.float64()), v, True
        raise Unsupported(v)
    if pa.types.is_floating(typ):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Unsupported(v)
        return x.cast(pa.float64()), float(v), True
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        if not isinstance(v, str):
            raise Unsupported(v)
        return x, pc.scalar(pa.scalar(v, typ)), False
    if pa.types.is_date32(typ):
        if isinstance(v, datetime.datetime) or not isinstance(v, datetime.date):
            raise Unsupported(v)
        return x, pc.scalar(pa.scalar(v, pa.date32())), False
    if pa.types.is_timestamp(typ):
        if not isinstance(v, datetime.datetime):
            raise Unsupported(v)
        if typ.tz is None:  # TIMESTAMP_NTZ: a wall clock
            if v.tzinfo is not None:
                raise Unsupported(v)
            micros = (v - _EPOCH) // datetime.timedelta(microseconds=1)
        else:  # TIMESTAMP: an instant (pyspark hands naive local times, fold set)
            micros = int(v.replace(microsecond=0).timestamp()) * 1_000_000 + v.microsecond
        return x.cast(pa.int64()), pc.scalar(pa.scalar(micros, pa.int64())), False
    raise Unsupported(typ)


def _plain_or_float(op: str, x, v, is_float: bool) -> pc.Expression:
    if not is_float:
        return _PLAIN[op](x, v)
    nan = pc.is_nan(x)
    if math.isnan(v):
        if op in ("=", ">="):
            return nan
        if op in ("<>", "<"):
            return pc.invert(nan)
        if op == ">":  # false, or null for null
            return pc.and_kleene(nan, pc.invert(nan))
        return pc.or_kleene(nan, pc.invert(nan))  # "<=": true, or null for null
    s = pc.scalar(v)
    if op in (">", ">="):  # NaN is above every number
        return pc.or_kleene(_PLAIN[op](x, s), nan)
    return _PLAIN[op](x, s)  # IEEE: NaN = / < / <= v is false, NaN <> v true; -0.0 = 0.0


_PLAIN = {
    "=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal,
}


def evaluate(expr: pc.Expression, batch) -> pa.Table:
    """Rows of ``batch`` (a RecordBatch or Table) where ``expr`` is true --
    a filter's semantics: false and null drop the row."""
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    return table.filter(expr)
