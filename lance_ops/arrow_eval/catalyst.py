"""Catalyst's analyzed expressions (as JSON) -> a small typed expression tree.

The source is Spark itself: ``queryExecution().analyzed().toJSON()`` of a
projection of the user's condition / values (``spark/jvm.analyzed_json``), so
types, implicit casts and literal coercions are exactly what Spark decided --
nothing is re-parsed from SQL text. The JSON flattens each expression in
pre-order (``num-children`` + child indices); evaluation modes serialize as
null there, so the JVM walk reports each node's ``evalMode`` (ANSI / LEGACY /
TRY) next to it, and ``UnaryMinus`` carries ``failOnError``.

The subset (anything else raises :class:`Unsupported`, and the operation
runs on Spark): attributes and literals of boolean, byte/short/int/long,
float/double, string (default collation), date, timestamp (session zone),
timestamp_ntz; ``+ - * / div %`` and unary minus on int/long/float/double;
casts between numeric types and boolean, integers/booleans to string, and a
decimal *literal* to double; comparisons, ``<=>``, AND/OR/NOT, IS [NOT]
NULL, IN, CASE WHEN, IF, COALESCE. Decimal columns and arithmetic, TRY
modes (``try_*`` functions and ``try_cast``), collations, other functions:
outside. No Spark import (tasks unpickle the tree).
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass

from . import decimals as dec

INTS = ("byte", "short", "integer", "long")
FLOATS = ("float", "double")
NUMERIC = INTS + FLOATS
ARITH_TYPES = ("integer", "long", "float", "double")
TYPES = NUMERIC + ("boolean", "string", "date", "timestamp", "timestamp_ntz")


class Unsupported(Exception):
    """Outside the subset: the caller falls back to Spark."""


@dataclass(frozen=True)
class X:
    """One node. ``kind``: attr, lit, cast, arith, neg, cmp, and, or, not,
    isnull, in, case, coalesce. ``value``: the attribute name, the literal
    (Python value), the operator (arith/cmp) or ``negated`` (isnull).
    ``ansi``: Spark's evaluation mode of this node is ANSI (errors instead of
    wrapping / nulls). ``case`` args: cond1, value1, ..., [else]; ``value``
    of a case is True when it has an ELSE."""

    kind: str
    type: str
    args: tuple = ()
    value: object = None
    ansi: bool = False

    def columns(self) -> set[str]:
        out = {self.value} if self.kind == "attr" else set()
        for a in self.args:
            out |= a.columns()
        return out


_SIMPLE = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}  # (DataType.simpleString)
_CMP = {"EqualTo": "=", "EqualNullSafe": "<=>", "LessThan": "<", "LessThanOrEqual": "<=", "GreaterThan": ">",
        "GreaterThanOrEqual": ">="}
_ARITH = {"Add": "+", "Subtract": "-", "Multiply": "*", "Divide": "/", "IntegralDivide": "div", "Remainder": "%"}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def decode(doc: str | dict) -> list[X]:
    """The trees of a projection document from ``jvm.analyzed_json`` (one per
    projected expression, aliases dropped). Raises Unsupported."""
    if isinstance(doc, str):
        doc = json.loads(doc)
    tz = doc.get("timeZone") or "UTC"
    loss = doc.get("allowPrecisionLoss")
    return [_Decoder(nodes, modes, tz, loss).run() for nodes, modes in zip(doc["exprs"], doc["modes"])]


def try_decode(doc) -> list[X] | None:
    try:
        return decode(doc)
    except (Unsupported, KeyError, TypeError, ValueError, IndexError):
        return None


class _Decoder:
    def __init__(self, nodes: list, modes: list, tz: str, allow_precision_loss=None):
        if len(nodes) != len(modes):
            raise Unsupported("plan and modes disagree")
        self.nodes, self.modes, self.tz, self.pos = nodes, modes, tz, 0
        self.loss = allow_precision_loss

    def run(self) -> X:
        out = self.take()
        if self.pos != len(self.nodes):
            raise Unsupported("trailing nodes")
        return out

    def take(self) -> X:
        i = self.pos
        n = self.nodes[i]
        self.pos += 1
        cls = n["class"].rsplit(".", 1)[-1]
        mode_cls, mode, *typed = self.modes[i]
        if mode_cls != cls:
            raise Unsupported(f"node order: {cls} vs {mode_cls}")
        kids = [self.take() for _ in range(int(n["num-children"]))]
        out = self.build(cls, n, kids, mode)
        spark_type = _SIMPLE.get(typed[0], typed[0]) if typed else out.type
        if spark_type != out.type:
            if not (dec.parse(out.type) and dec.parse(spark_type)):
                raise Unsupported(f"{cls}: Spark says {spark_type}, the decoder {out.type}")
            # Spark's own decimal result type wins (it says how the result is rounded)
            out = X(out.kind, _type(spark_type), out.args, out.value, out.ansi)
        return out

    def build(self, cls: str, n: dict, kids: list, mode) -> X:
        if cls == "Alias":
            return kids[0]
        if cls == "AttributeReference":
            t = _type(n["dataType"])
            return X("attr", t, value=n["name"])
        if cls == "Literal":
            return _literal(n.get("value"), n["dataType"], self.tz)
        if cls == "Cast":
            return _cast(kids[0], n["dataType"], mode, n.get("timeZoneId") or self.tz)
        if cls in _ARITH:
            if dec.parse(kids[0].type) or dec.parse(kids[1].type):
                return _decimal_arith(_ARITH[cls], kids[0], kids[1], mode, self.loss)
            return _arith(_ARITH[cls], kids[0], kids[1], mode)
        if cls == "UnaryMinus":
            c = kids[0]
            if dec.parse(c.type):
                return X("neg", c.type, (c,))  # (values over 34 digits: vector flags them)
            if c.type not in ARITH_TYPES:
                raise Unsupported(c.type)
            return X("neg", c.type, (c,), ansi=bool(n.get("failOnError")))
        if cls in _CMP:
            a, b = kids
            if a.type != b.type and "void" not in (a.type, b.type):
                raise Unsupported(f"compare {a.type} with {b.type}")
            return X("cmp", "boolean", (a, b), _CMP[cls])
        if cls in ("And", "Or"):
            _bools(kids)
            return X(cls.lower(), "boolean", tuple(kids))
        if cls == "Not":
            _bools(kids)
            return X("not", "boolean", tuple(kids))
        if cls in ("IsNull", "IsNotNull"):
            return X("isnull", "boolean", tuple(kids), cls == "IsNotNull")
        if cls == "In":
            if len(kids) < 2:
                raise Unsupported("empty IN")
            _same(kids)
            return X("in", "boolean", tuple(kids))
        if cls == "CaseWhen":
            has_else = len(kids) % 2 == 1
            conds = kids[0:len(kids) - has_else:2]
            _bools(conds)
            values = list(kids[1::2]) + ([kids[-1]] if has_else else [])
            return X("case", _same(values), tuple(kids), has_else)
        if cls == "If":
            _bools(kids[:1])
            return X("case", _same(kids[1:]), tuple(kids), True)
        if cls == "Coalesce":
            return X("coalesce", _same(kids), tuple(kids))
        out = _strings(cls, n, kids, mode)
        if out is None:
            out = _dates(cls, n, kids, self.tz)
        if out is None:
            raise Unsupported(cls)
        return out


def _type(t) -> str:
    if t in TYPES:
        return t
    d = dec.parse(t)
    if d and 0 <= d[1] <= d[0] <= dec.MAX_PRECISION:
        return t
    raise Unsupported(t)


def _decimal_arith(op: str, a: X, b: X, mode, allow_precision_loss) -> X:
    """Decimal ``+ - * /`` (the analyzer has made both sides decimals); the
    result type is Spark's DecimalPrecision with allowPrecisionLoss, which
    the analyzed document must confirm."""
    ansi = _mode(mode)
    pa_, pb = dec.parse(a.type), dec.parse(b.type)
    if not (pa_ and pb):
        raise Unsupported(f"{a.type} {op} {b.type}")
    if op not in ("+", "-", "*", "/"):
        raise Unsupported(f"decimal {op}")
    if allow_precision_loss is not True:
        raise Unsupported("decimal arithmetic without spark.sql.decimalOperations.allowPrecisionLoss")
    p, s = dec.result_type(op, pa_, pb)
    return X("decarith", dec.name(p, s), (a, b), op, ansi)


def _bools(kids) -> None:
    for k in kids:
        if k.type not in ("boolean", "void"):
            raise Unsupported(f"{k.type} as a boolean")


def _same(kids) -> str:
    """The one type of ``kids`` (typed nulls aside)."""
    types = {k.type for k in kids} - {"void"}
    if len(types) > 1:
        raise Unsupported(f"mixed types {sorted(types)}")
    return types.pop() if types else "void"


def _mode(mode) -> bool:
    """True for ANSI, False for LEGACY; TRY (or unknown) is outside."""
    if mode == "ANSI":
        return True
    if mode == "LEGACY":
        return False
    raise Unsupported(f"evaluation mode {mode}")


def _arith(op: str, a: X, b: X, mode) -> X:
    ansi = _mode(mode)
    if a.type != b.type:
        raise Unsupported(f"{a.type} {op} {b.type}")
    if op == "/" and a.type != "double":
        raise Unsupported(f"/ on {a.type}")
    if op == "div" and a.type != "long":
        raise Unsupported(f"div on {a.type}")
    if a.type not in ARITH_TYPES:
        raise Unsupported(a.type)
    out = X("arith", a.type, (a, b), op, ansi)
    if ansi and op in ("+", "*") and a.type in INTS:
        # Spark's optimizer (ReorderAssociativeOperator) regroups integral
        # + / * chains, constants last: the same wrapped value, but in ANSI
        # mode a different intermediate may overflow. Outside the subset.
        chain = _flatten(out, op)
        if len(chain) >= 3 and any(not k.columns() for k in chain):
            raise Unsupported("ANSI integral chain with constants (Spark reorders it)")
    return out


def _flatten(x: X, op: str) -> list[X]:
    if x.kind == "arith" and x.value == op:
        return _flatten(x.args[0], op) + _flatten(x.args[1], op)
    return [x]


_CASTS_TO_STRING = INTS + ("boolean",)


def _cast(c: X, to: str, mode, tz: str = "UTC") -> X:
    if to == c.type:
        return c
    to = _type(to)
    if dec.parse(c.type) or dec.parse(to):
        return _decimal_cast(c, to, mode)
    if c.type == "void":
        return X("lit", to, value=None)
    if c.kind == "cast" and _wider(c.args[0].type, c.type) and _wider(c.type, to):
        # Spark's optimizer (SimplifyCasts) drops the middle of a chain of
        # "widening" numeric casts -- even long -> float -> double, which
        # rounds: evaluate what Spark runs.
        return _cast(c.args[0], to, mode, tz)
    if c.type in _DATETIME or to in _DATETIME:
        return _datetime_cast(c, to, mode, tz)
    ok = (c.type in NUMERIC + ("boolean",) and to in NUMERIC + ("boolean",)) or (
        to == "string" and c.type in _CASTS_TO_STRING)
    if not ok:
        raise Unsupported(f"cast {c.type} to {to}")
    return X("cast", to, (c,), ansi=_mode(mode))


_DATETIME = ("date", "timestamp", "timestamp_ntz")


def _decimal_cast(c: X, to: str, mode) -> X:
    """Casts decimal -> decimal (HALF_UP, overflow NULL / error), integers ->
    decimal, decimal -> integers (truncation; wraps / CAST_OVERFLOW) and
    decimal -> double. Doubles -> decimal (Java 17's ``Double.toString``
    digits), strings and booleans stay on Spark."""
    if c.type == "void":
        return X("lit", to, value=None)
    src = dec.parse(c.type)
    if src and dec.parse(to) or (c.type in INTS and dec.parse(to)) or (src and to in INTS + ("double",)):
        return X("deccast", to, (c,), ansi=_mode(mode))
    raise Unsupported(f"cast {c.type} to {to}")


def _datetime_cast(c: X, to: str, mode, tz: str) -> X:
    """Casts among date / timestamp / timestamp_ntz and from them to string.
    Anything reading or writing a TIMESTAMP's wall clock needs the zone's
    offset: only fixed-offset zones (UTC and +hh:mm) are in the subset
    (region zones: DST gaps and overlaps, tz database versions -> Spark).
    Strings -> dates / timestamps stay on Spark (its lenient parser)."""
    src = c.type
    if src not in _DATETIME or to not in _DATETIME + ("string",):
        raise Unsupported(f"cast {src} to {to}")
    _mode(mode)
    zoned = "timestamp" in (src, to)
    offset = fixed_offset_micros(tz) if zoned else 0
    return X("dtcast", to, (c,), offset)


def fixed_offset_micros(tz: str) -> int:
    """The session zone's offset from UTC in microseconds, for UTC and
    fixed-offset zones; region zones raise Unsupported."""
    if tz in _UTC_NAMES:
        return 0
    m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{2}):?(\d{2})", tz or "")
    if not m:
        raise Unsupported(f"session time zone {tz} (not a fixed offset)")
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60) * 1_000_000


# ------------------------------------------------------------------ strings
_STR_FN = {"Upper": "upper", "Lower": "lower"}
_STR_PRED = {"StartsWith": "startswith", "EndsWith": "endswith", "Contains": "contains"}
_TRIM = {"StringTrim": "both", "StringTrimLeft": "left", "StringTrimRight": "right"}


def _strings(cls: str, n: dict, kids: list, mode) -> X | None:
    """String functions on the default (UTF8_BINARY) collation; None: not one."""
    if cls in _STR_FN:
        _strs(kids)
        return _case_fn(kids[0], _STR_FN[cls])
    if cls == "Length":
        _strs(kids)
        return X("length", "integer", tuple(kids))
    if cls in _STR_PRED:
        _strs(kids)
        return X("strpred", "boolean", tuple(kids), _STR_PRED[cls])
    if cls == "Concat":
        if not kids:
            raise Unsupported("concat()")
        _strs(kids)
        return X("concat", "string", tuple(kids))
    if cls in _TRIM:
        _strs(kids)
        if len(kids) == 2 and kids[1].kind != "lit":
            raise Unsupported("trim characters from a column")
        return X("trim", "string", tuple(kids), _TRIM[cls])
    if cls == "Substring":
        s, pos, ln = kids
        _strs([s])
        for k in (pos, ln):
            if k.type not in ("integer", "void"):
                raise Unsupported(f"substring position of type {k.type}")
        return X("substr", "string", tuple(kids))
    if cls in ("Like", "ILike"):
        s, pat = kids
        _strs(kids)
        if pat.kind != "lit":
            raise Unsupported("LIKE with a pattern from a column")
        escape = mode if isinstance(mode, str) and len(mode) == 1 else None
        if escape is None:
            raise Unsupported("LIKE without its escape character")
        if pat.value is None:
            return X("lit", "boolean", value=None)
        text = pat.value
        if cls == "ILike":
            s = _case_fn(s, "lower")
            text = text.lower()
        prefix = text[:-1]
        if text.endswith("%") and not any(c in prefix for c in ("%", "_", escape)):
            # 'abc%' is a prefix test (Spark's LikeSimplification does the same): no regex per row
            return X("strpred", "boolean", (s, X("lit", "string", value=prefix)), "startswith")
        return X("like", "boolean", (s,), like_regex(text, escape))
    return None


def _case_fn(c: X, fn: str) -> X:
    """upper / lower of ``c``; of an upper / lower, of its argument: Spark's
    optimizer (SimplifyCaseConversionExpressions) drops the inner one, which
    changes results beyond ASCII (``upper(lower('İ'))`` is ``upper('İ')``)."""
    if c.kind == "strfn" and c.value in ("upper", "lower"):
        c = c.args[0]
    return X("strfn", "string", (c,), fn)


def _strs(kids) -> None:
    for k in kids:
        if k.type not in ("string", "void"):
            raise Unsupported(f"{k.type} as a string")


def like_regex(pattern: str, escape: str) -> str:
    """Spark's ``StringUtils.escapeLikeRegex`` as an RE2 pattern matched
    against the whole value: ``_`` is one code point, ``%`` any run (newlines
    too), the escape character may precede only ``_``, ``%`` or itself (else
    Spark raises INVALID_FORMAT: outside the subset)."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c == escape:
            if i == len(pattern):
                raise Unsupported("LIKE pattern ends with the escape character")
            c = pattern[i]
            i += 1
            if c not in ("_", "%", escape):
                raise Unsupported("LIKE escape before an ordinary character")
            out.append(_re_literal(c))
        elif c == "_":
            out.append(".")
        elif c == "%":
            out.append(".*")
        else:
            out.append(_re_literal(c))
    return "^(?s:" + "".join(out) + ")$"


def _re_literal(c: str) -> str:
    return c if c.isascii() and c.isalnum() else "\\x{%x}" % ord(c)


# -------------------------------------------------------------------- dates
_FIELDS = {"Year": "year", "Month": "month", "DayOfMonth": "day"}


def _dates(cls: str, n: dict, kids: list, tz: str) -> X | None:
    if cls in _FIELDS:
        _typed(kids, ("date",))
        return X("datefield", "integer", tuple(kids), _FIELDS[cls])
    if cls in ("DateAdd", "DateSub"):
        d, days = kids
        _typed([d], ("date",))
        _typed([days], ("byte", "short", "integer"))
        return X("dateadd", "date", (d, days), 1 if cls == "DateAdd" else -1)
    if cls == "DateDiff":
        _typed(kids, ("date",))
        return X("datediff", "integer", tuple(kids))
    if cls == "ParseToDate":
        if len(kids) != 1 or kids[0].type not in _DATETIME:
            raise Unsupported("to_date of a string / with a format")
        return _cast(kids[0], "date", "ANSI" if n.get("ansiEnabled") else "LEGACY", n.get("timeZoneId") or tz)
    return None


def _typed(kids, types) -> None:
    for k in kids:
        if k.type not in types + ("void",):
            raise Unsupported(f"{k.type} where {types} is expected")


_PRECEDENCE = ("byte", "short", "integer", "long", "float", "double")


def _wider(a: str, b: str) -> bool:
    """Spark's ``Cast.canUpCast`` between numeric types (numeric precedence)."""
    return a in _PRECEDENCE and b in _PRECEDENCE and _PRECEDENCE.index(a) < _PRECEDENCE.index(b)


def _literal(v, dtype: str, tz: str) -> X:
    m = _DECIMAL.fullmatch(dtype or "")
    if m:
        t = _type(dtype)
        if v is None:
            return X("lit", t, value=None)
        scale = int(m.group(2))
        text = str(v)
        neg = text.startswith("-")
        whole, _, frac = text.lstrip("-").partition(".")
        frac = frac.ljust(scale, "0")
        if len(frac) != scale or not (whole + frac).isdigit():
            raise Unsupported(text)  # (e.g. scientific notation)
        unscaled = int(whole + frac) * (-1 if neg else 1)
        return X("lit", t, value=unscaled)
    if dtype == "void":
        return X("lit", "void", value=None)
    t = _type(dtype)
    if v is None:
        return X("lit", t, value=None)
    if t in INTS:
        return X("lit", t, value=int(v))
    if t in FLOATS:
        return X("lit", t, value=float(v))  # Java's NaN / Infinity / 1.0E308 all parse
    if t == "boolean":
        if v not in ("true", "false"):
            raise Unsupported(v)
        return X("lit", t, value=v == "true")
    if t == "string":
        return X("lit", t, value=str(v))
    if t == "date":
        return X("lit", t, value=datetime.date.fromisoformat(v))
    if t == "timestamp_ntz" and re.fullmatch(r"-?\d+", str(v)):
        return X("lit", t, value=int(v))  # (TIMESTAMP_NTZ literals print as their microseconds)
    # timestamps: printed as a wall clock (the session zone for TIMESTAMP)
    wall = _wall(v)
    if t == "timestamp_ntz":
        return X("lit", t, value=(wall - _EPOCH) // datetime.timedelta(microseconds=1))
    return X("lit", t, value=_instant_micros(wall, tz))


_EPOCH = datetime.datetime(1970, 1, 1)
_UTC_NAMES = ("UTC", "Etc/UTC", "GMT", "Z", "+00:00", "Etc/GMT")


def _wall(text: str) -> datetime.datetime:
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?", text)
    if not m:
        raise Unsupported(text)
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    us = int((m.group(7) or "").ljust(6, "0") or 0)
    return datetime.datetime(y, mo, d, h, mi, s, us)


def _instant_micros(wall: datetime.datetime, tz: str) -> int:
    if tz in _UTC_NAMES:
        return (wall - _EPOCH) // datetime.timedelta(microseconds=1)
    import zoneinfo

    try:
        zone = zoneinfo.ZoneInfo(tz)
    except Exception as e:
        raise Unsupported(tz) from e
    a, b = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
    if a.utcoffset() != b.utcoffset():
        raise Unsupported("ambiguous or skipped local time")  # DST edge: the text lost which one
    utc = a.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return (utc - _EPOCH) // datetime.timedelta(microseconds=1)
