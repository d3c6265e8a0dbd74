"""Spark's decimal arithmetic on Arrow ``decimal128`` columns, exactly.

Values are handled as unscaled Python integers (no rounding anywhere but
where Spark rounds: ROUND_HALF_UP to the result scale), so every result is
Spark's or the row is flagged:

* result types follow Spark's ``DecimalPrecision`` with
  ``spark.sql.decimalOperations.allowPrecisionLoss`` true (the default; the
  decoder refuses the other setting): ``+ -``: scale max(s1, s2), precision
  max(p1-s1, p2-s2) + scale + 1; ``*``: p1+p2+1, s1+s2; ``/``: scale max(6,
  s1+p2+1), precision p1-s1+s2+scale; over 38 digits the scale gives way down
  to min(scale, 6) (``DecimalType.adjustPrecisionScale``);
* a result that does not fit its precision is NULL, or
  NUMERIC_VALUE_OUT_OF_RANGE in ANSI mode; division by zero NULL /
  DIVIDE_BY_ZERO;
* Spark rounds a product to 38 significant digits and a quotient to 38
  decimals before rounding to the result scale (``MathContext``): where that
  double rounding could differ from one rounding the row is flagged
  OUTSIDE_SUBSET (the operation reruns on Spark) -- never guessed.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

MAX_PRECISION = 38
_DEC = re.compile(r"decimal\((\d+),(\d+)\)")


def parse(t: str) -> tuple[int, int] | None:
    m = _DEC.fullmatch(t or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def name(p: int, s: int) -> str:
    return f"decimal({p},{s})"


def adjust(p: int, s: int) -> tuple[int, int]:
    """``DecimalType.adjustPrecisionScale`` (allowPrecisionLoss)."""
    if p <= MAX_PRECISION:
        return p, s
    if s < 0:
        return MAX_PRECISION, s
    int_digits = p - s
    return MAX_PRECISION, max(MAX_PRECISION - int_digits, min(s, 6))


def result_type(op: str, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (p1, s1), (p2, s2) = a, b
    if op in ("+", "-"):
        s = max(s1, s2)
        return adjust(max(p1 - s1, p2 - s2) + s + 1, s)
    if op == "*":
        return adjust(p1 + p2 + 1, s1 + s2)
    if op == "/":
        s = max(6, s1 + p2 + 1)
        return adjust(p1 - s1 + s2 + s, s)
    raise ValueError(op)


_MASK64 = (1 << 64) - 1


def to_ints(a: pa.Array) -> np.ndarray:
    """Unscaled values of a decimal128 array as an object array of Python
    ints (nulls as 0)."""
    n = len(a)
    if n == 0:
        return np.zeros(0, object)
    words = np.frombuffer(a.buffers()[1], dtype="<u8")[2 * a.offset: 2 * (a.offset + n)].reshape(n, 2)
    lo = words[:, 0].astype(object)
    hi = words[:, 1].view(np.int64).astype(object)
    out = hi * (1 << 64) + lo
    if a.null_count:
        valid = np.asarray(a.is_valid().to_numpy(zero_copy_only=False), bool)
        out = np.where(valid, out, 0)
    return out


def from_ints(values: np.ndarray, valid: np.ndarray, p: int, s: int) -> pa.Array:
    """A decimal128(p, s) array of unscaled ints (rows where ``valid`` is
    False are null; their value is ignored)."""
    n = len(values)
    v = np.where(valid, values, 0).astype(object) if n else np.zeros(0, object)
    lo = np.array([int(x) & _MASK64 for x in v], dtype=np.uint64)
    hi = np.array([(int(x) >> 64) & _MASK64 for x in v], dtype=np.uint64)
    words = np.empty(2 * n, np.uint64)
    words[0::2], words[1::2] = lo, hi
    mask = None
    if n and not valid.all():
        mask = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.decimal128(p, s), n, [mask, pa.py_buffer(words.tobytes())],
                                 null_count=int(n - valid.sum()) if n else 0)


def round_half_up(v: int, drop: int) -> int:
    """``v`` / 10**drop rounded half away from zero (Java's HALF_UP)."""
    if drop <= 0:
        return v * 10 ** (-drop)
    d = 10 ** drop
    q, r = divmod(abs(v), d)
    if 2 * r >= d:
        q += 1
    return q if v >= 0 else -q


def rescale(v: int, s_from: int, s_to: int) -> int:
    return round_half_up(v, s_from - s_to)


def fits(v: int, p: int) -> bool:
    return abs(v) < 10 ** p


def digits(v: int) -> int:
    return len(str(abs(v))) if v else 1


def quotient(a: int, sa: int, b: int, sb: int, s: int) -> tuple[int, bool]:
    """a / b (unscaled at scales sa, sb) at scale ``s``, HALF_UP, and whether
    Spark's rounding to 38 decimals first could give something else."""
    # exact quotient as a fraction: (a * 10^sb) / (b * 10^sa)
    num, den = a * 10 ** sb, b * 10 ** sa
    once = _div_half_up(num * 10 ** s, den)
    if s >= MAX_PRECISION:
        return once, False
    first = _div_half_up(num * 10 ** MAX_PRECISION, den)  # what Java's divide(.., 38, HALF_UP) keeps
    twice = round_half_up(first, MAX_PRECISION - s)
    first39 = _div_half_up(num * 10 ** (MAX_PRECISION + 1), den)
    twice39 = round_half_up(first39, MAX_PRECISION + 1 - s)
    return once, not (once == twice == twice39)


def product(a: int, b: int, scale: int, s: int) -> tuple[int, bool]:
    """a * b (exact at ``scale``) at scale ``s``, HALF_UP, and whether
    Spark's rounding to 38 significant digits first could differ."""
    exact = a * b
    once = rescale(exact, scale, s)
    n = digits(exact)
    if n <= MAX_PRECISION:
        return once, False
    for keep in (MAX_PRECISION, MAX_PRECISION + 1):
        drop = n - keep
        if drop > 0 and drop <= scale:
            approx = round_half_up(exact, drop)  # at scale - drop
            if rescale(approx, scale - drop, s) != once:
                return once, True
        elif drop > scale:
            return once, True  # (the integer part itself rounded: leave it to Spark)
    return once, False


def _div_half_up(num: int, den: int) -> int:
    neg = (num < 0) != (den < 0)
    q, r = divmod(abs(num), abs(den))
    if 2 * r >= abs(den):
        q += 1
    return -q if neg else q
