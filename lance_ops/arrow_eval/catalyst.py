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
    return [_Decoder(nodes, modes, tz).run() for nodes, modes in zip(doc["exprs"], doc["modes"])]


def try_decode(doc) -> list[X] | None:
    try:
        return decode(doc)
    except (Unsupported, KeyError, TypeError, ValueError, IndexError):
        return None


class _Decoder:
    def __init__(self, nodes: list, modes: list, tz: str):
        if len(nodes) != len(modes):
            raise Unsupported("plan and modes disagree")
        self.nodes, self.modes, self.tz, self.pos = nodes, modes, tz, 0

    def run(self) -> X:
        out = self.take()
        if out.type == "decimal":
            raise Unsupported("decimal")
        if self.pos != len(self.nodes):
            raise Unsupported("trailing nodes")
        return out

    def take(self) -> X:
        i = self.pos
        n = self.nodes[i]
        self.pos += 1
        cls = n["class"].rsplit(".", 1)[-1]
        mode_cls, mode = self.modes[i]
        if mode_cls != cls:
            raise Unsupported(f"node order: {cls} vs {mode_cls}")
        kids = [self.take() for _ in range(int(n["num-children"]))]
        if cls not in ("Cast", "Alias") and any(k.type == "decimal" for k in kids):
            raise Unsupported("decimal")  # (a decimal literal only as the operand of a cast to double)
        return self.build(cls, n, kids, mode)

    def build(self, cls: str, n: dict, kids: list, mode) -> X:
        if cls == "Alias":
            return kids[0]
        if cls == "AttributeReference":
            t = _type(n["dataType"])
            return X("attr", t, value=n["name"])
        if cls == "Literal":
            return _literal(n.get("value"), n["dataType"], self.tz)
        if cls == "Cast":
            return _cast(kids[0], n["dataType"], mode)
        if cls in _ARITH:
            return _arith(_ARITH[cls], kids[0], kids[1], mode)
        if cls == "UnaryMinus":
            c = kids[0]
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
        raise Unsupported(cls)


def _type(t) -> str:
    if t in TYPES:
        return t
    raise Unsupported(t)


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


def _cast(c: X, to: str, mode) -> X:
    if to == c.type:
        return c
    to = _type(to)
    if c.kind == "lit" and c.type == "decimal":
        # Decimal.toDouble of a compact decimal (precision <= 18):
        # unscaled.toDouble / 10^scale -- exact operands, one rounding.
        if to != "double":
            raise Unsupported(f"decimal literal to {to}")
        unscaled, scale = c.value
        if abs(unscaled) >= 2**53:
            raise Unsupported("decimal literal beyond 2^53")
        return X("lit", "double", value=float(unscaled) / float(10**scale))
    if c.type == "void":
        return X("lit", to, value=None)
    if c.kind == "cast" and _wider(c.args[0].type, c.type) and _wider(c.type, to):
        # Spark's optimizer (SimplifyCasts) drops the middle of a chain of
        # "widening" numeric casts -- even long -> float -> double, which
        # rounds: evaluate what Spark runs.
        return _cast(c.args[0], to, mode)
    ok = (c.type in NUMERIC + ("boolean",) and to in NUMERIC + ("boolean",)) or (
        to == "string" and c.type in _CASTS_TO_STRING)
    if not ok:
        raise Unsupported(f"cast {c.type} to {to}")
    return X("cast", to, (c,), ansi=_mode(mode))


_PRECEDENCE = ("byte", "short", "integer", "long", "float", "double")


def _wider(a: str, b: str) -> bool:
    """Spark's ``Cast.canUpCast`` between numeric types (numeric precedence)."""
    return a in _PRECEDENCE and b in _PRECEDENCE and _PRECEDENCE.index(a) < _PRECEDENCE.index(b)


def _literal(v, dtype: str, tz: str) -> X:
    m = _DECIMAL.fullmatch(dtype or "")
    if m:
        if v is None:
            raise Unsupported("decimal null")
        precision, scale = int(m.group(1)), int(m.group(2))
        if precision > 18:
            raise Unsupported("wide decimal literal")
        text = str(v)
        neg = text.startswith("-")
        whole, _, frac = text.lstrip("-").partition(".")
        frac = frac.ljust(scale, "0")
        if len(frac) != scale or not (whole + frac).isdigit():
            raise Unsupported(text)
        unscaled = int(whole + frac) * (-1 if neg else 1)
        return X("lit", "decimal", value=(unscaled, scale))
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
