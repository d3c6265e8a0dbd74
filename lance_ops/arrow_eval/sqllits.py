"""The literals a Spark SQL expression's text holds, found without parsing it.

Why: under Spark Connect the only analyzed form of an expression the client
gets is ``EXPLAIN`` text (:mod:`.plantext`), and Catalyst prints literals
raw -- ``s = 's#1'`` analyzes to ``(s#3 = s#1)``, ``x > '5'`` and ``x > 5``
both to ``cast(5 as bigint)``. The text alone cannot say which tokens are
literals, nor their types. The client does hold the SQL it sent, though:
this module lists the literals in it (:class:`Candidate`: type and value),
and the text decoder accepts a printed literal only where these candidates
(or, for a few analyzer-made numbers, the surrounding types) say exactly
one thing about it.

A lexer, not a parser: it skips comments and backquoted identifiers, reads
quoted strings, typed literals (``DATE'..'``, ``TIMESTAMP'..'``,
``TIMESTAMP_NTZ'..'``), numbers (Spark's suffixes ``L S Y D F BD``, exponents,
decimals), ``true`` / ``false`` / ``NULL``. Anything it cannot read with
certainty raises :class:`~.catalyst.Unsupported` (the caller then evaluates
with Spark): backslashes and doubled quotes in strings, raw and hex strings,
intervals, adjacent strings (Spark concatenates them), and strings holding a
character the decoder needs as structure -- ``( ) [ ] , #``, quotes, control
characters (a newline splits the plan's lines).
"""
from __future__ import annotations

import datetime
import decimal
import re
import struct
from dataclasses import dataclass

from .catalyst import Unsupported

#: Characters a string literal may not hold (the plan text needs them as structure).
_UNSAFE = re.compile(r"[()\[\],#'\"`\\\x00-\x1f\x7f]")
_NUMBER = re.compile(r"(?i)(\d+\.?\d*|\.\d+)(e[+-]?\d+)?(bd|[lsydf])?(?![\w])")
_IDENT = re.compile(r"[^\W\d]\w*")  # (letters of any script: Spark's identifiers take them)
_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_TS = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")
_TYPED_PREFIX = {"date": "date", "timestamp": "timestamp", "timestamp_ltz": "timestamp",
                 "timestamp_ntz": "timestamp_ntz"}
_INT_RANGE = {"byte": 2**7, "short": 2**15, "integer": 2**31, "long": 2**63}


@dataclass(frozen=True)
class Candidate:
    """One literal of the SQL: its Spark type (JSON name, as the decoder's)
    and value (int / float / Decimal / bool / str / date / datetime; None:
    a NULL, type ``void``)."""

    type: str
    value: object

    def prints_as(self, token: str) -> bool:
        """Whether Catalyst prints this literal (or its negation: ``-5`` is
        read from ``- 5`` too) as ``token``."""
        t, v = self.type, self.value
        if v is None:
            return token == "null"
        if t == "string":
            return token == v
        if t == "boolean":
            return token == ("true" if v else "false")
        if t in _INT_RANGE:
            return re.fullmatch(r"-?\d+", token) is not None and abs(int(token)) == v
        if t in ("float", "double"):
            f = _java_float(token)
            if f is None:
                return False
            if t == "float":
                f = f32(f)
            return (f != f and v != v) or abs(f) == v
        if t.startswith("decimal"):
            if not re.fullmatch(r"-?\d+(\.\d+)?", token):
                return False
            d = decimal.Decimal(token)
            return d.copy_abs() == v and d.as_tuple().exponent == v.as_tuple().exponent
        if t == "date":
            return token == v.isoformat()
        if t in ("timestamp", "timestamp_ntz"):
            return wall_clock(token) == v
        return False


def f32(f: float) -> float:
    try:
        return struct.unpack("f", struct.pack("f", f))[0]
    except OverflowError:
        return float("inf") if f > 0 else float("-inf")


_PRINTED_NUMBER = re.compile(r"-?\d+(\.\d+)?(E-?\d+)?|-?NaN|-?Infinity")


def printed_number(token: str) -> float | None:
    """The value of any number Catalyst may print (integers, decimals, Java's
    renderings of doubles and floats), as a float; None for other tokens."""
    return float(token) if _PRINTED_NUMBER.fullmatch(token) else None


def _java_float(token: str) -> float | None:
    """A Java ``Double.toString`` / ``Float.toString`` rendering as a float."""
    if token in ("NaN", "Infinity", "-Infinity") or re.fullmatch(r"-?\d+\.\d+(E-?\d+)?", token):
        return float(token)
    return None


def wall_clock(text: str) -> datetime.datetime | None:
    m = _TS.fullmatch(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    us = int((m.group(7) or "").ljust(6, "0") or 0)
    try:
        return datetime.datetime(y, mo, d, h, mi, s, us)
    except ValueError:
        return None


def literals(texts) -> list[Candidate]:
    """The literals of every SQL text in ``texts``. Raises Unsupported."""
    out: list[Candidate] = []
    for text in texts:
        out.extend(_lex(text))
    return out


def _lex(text: str) -> list[Candidate]:
    out: list[Candidate] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise Unsupported("unterminated comment")
            i = j + 2
        elif c == "`":
            j = text.find("`", i + 1)
            while j >= 0 and text.startswith("``", j):
                j = text.find("`", j + 2)
            if j < 0:
                raise Unsupported("unterminated identifier")
            i = j + 1
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                if text[j] == "\\":
                    raise Unsupported("escape sequence in a string literal")
                j += 1
            if j >= n:
                raise Unsupported("unterminated string")
            value = text[i + 1:j]
            k = j + 1
            while k < n and text[k].isspace():
                k += 1
            if k < n and text[k] in "'\"":
                raise Unsupported("adjacent string literals")
            m = re.search(r"([A-Za-z_]\w*)\s*$", text[:i])
            prefix = m.group(1).lower() if m and m.end() == i else None
            out.append(_quoted(value, prefix))
            i = j + 1
        elif c.isalpha() or c == "_":
            m = _IDENT.match(text, i)
            word = m.group().lower()
            if word in ("true", "false"):
                out.append(Candidate("boolean", word == "true"))
            elif word == "null":
                out.append(Candidate("void", None))
            i = m.end()
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            if i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i += 1  # (inside an identifier)
                continue
            m = _NUMBER.match(text, i)
            if not m:
                raise Unsupported(f"number at {text[i:i + 20]!r}")
            negated = _unary_minus_before(text, i)
            out.extend(_number(m.group(1), m.group(2), (m.group(3) or "").lower(), negated))
            i = m.end()
        else:
            i += 1
    return out


def _quoted(value: str, prefix: str | None) -> Candidate:
    if prefix in _TYPED_PREFIX:
        t = _TYPED_PREFIX[prefix]
        if t == "date":
            m = _DATE.fullmatch(value)
            if not m:
                raise Unsupported(f"date literal {value!r}")
            try:
                return Candidate("date", datetime.date(*(int(g) for g in m.groups())))
            except ValueError as e:
                raise Unsupported(str(e)) from e
        v = wall_clock(value)
        if v is None:
            raise Unsupported(f"timestamp literal {value!r}")
        return Candidate(t, v)
    if prefix is not None and prefix not in ("in", "and", "or", "not", "then", "else", "when", "like", "ilike",
                                             "escape", "from", "both", "leading", "trailing", "is", "case", "end",
                                             "as", "between", "rlike", "regexp", "div"):
        raise Unsupported(f"{prefix}'...' literal")  # (X'..', INTERVAL '..', r'..', a function's name)
    if not safe_string(value):
        raise Unsupported("a string literal with characters the plan text cannot delimit")
    return Candidate("string", value)


def safe_string(value: str) -> bool:
    """Whether a string literal holds none of the characters the plan text
    needs as structure."""
    return _UNSAFE.search(value) is None


def _number(digits: str, exp: str | None, suffix: str, negated: bool) -> list[Candidate]:
    """The candidate of one number token; ``negated``: a unary minus
    precedes it (the literal's type is that of the negative value)."""
    c = _unsigned(digits, exp, suffix)
    if negated and c.type == "long" and c.value == _INT_RANGE["integer"]:
        return [Candidate("integer", c.value)]  # (-2147483648 is an int)
    if negated and c.type == "decimal(19,0)" and c.value == _INT_RANGE["long"]:
        return [Candidate("long", c.value)]
    return [c]


#: Words after which a minus sign is unary.
_OPERATOR_WORDS = {"and", "or", "not", "then", "else", "when", "case", "in", "between", "like", "ilike", "is",
                   "div", "escape", "from"}


def _unary_minus_before(text: str, i: int) -> bool:
    """Whether a unary minus precedes the number at ``i`` (Spark reads
    ``-2147483648`` as one int literal; ``x -2147483648`` subtracts a long)."""
    m = re.search(r"-\s*$", text[:i])
    if not m:
        return False
    before = text[:m.start()].rstrip()
    if not before or before[-1] in "(,+-*/%=<>!|&^~":
        return True
    w = re.search(r"([A-Za-z_]\w*)$", before)
    return bool(w) and w.group(1).lower() in _OPERATOR_WORDS


def _unsigned(digits: str, exp: str | None, suffix: str) -> Candidate:
    text = digits + (exp or "")
    if suffix in ("l", "s", "y"):
        if "." in digits or exp:
            raise Unsupported(f"{text}{suffix}")
        t = {"l": "long", "s": "short", "y": "byte"}[suffix]
        v = int(digits)
        if v > _INT_RANGE[t]:
            raise Unsupported(f"{text}{suffix} out of range")
        return Candidate(t, v)
    if suffix == "d" or (exp and suffix != "bd" and suffix != "f"):
        return Candidate("double", abs(float(text)))
    if suffix == "f":
        return Candidate("float", abs(f32(float(text))))
    if suffix == "bd" or "." in digits:
        d = decimal.Decimal(text)
        if exp:
            raise Unsupported("decimal with an exponent")
        sign, ds, e = d.as_tuple()
        precision = max(len(ds), -e)
        if precision > 38:
            raise Unsupported("decimal over 38 digits")
        return Candidate(f"decimal({precision},{-e})", d)
    v = int(digits)
    for t in ("integer", "long"):
        if v < _INT_RANGE[t]:  # (-2147483648 is read as 2147483648: a long; its negation may still be an int)
            return Candidate(t, v)
    if len(digits.lstrip("0")) > 38:
        raise Unsupported("integer literal over 38 digits")
    return Candidate(f"decimal({len(digits.lstrip('0')) or 1},0)", decimal.Decimal(digits))
