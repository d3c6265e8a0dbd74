"""Evaluate :mod:`.catalyst` trees over Arrow columns with Spark's semantics.

Every node evaluates on all rows (numpy / pyarrow, vectorized) and returns
``(values, errors)``: ``errors`` is an int8 array (0 = none, else an
:data:`ERRORS` code) of the rows where *Spark* would raise in ANSI mode --
only rows Spark actually evaluates the node on count: AND / OR short-circuit,
CASE / IF / COALESCE evaluate lazily, a binary operator skips its second
operand when the first is null (division: the dividend when the divisor is
null or, outside ANSI, zero). The caller decides what an error means (the
update tasks hand the operation back to Spark, which raises its own error).

Semantics (non-ANSI / ANSI as the node's mode says):

* integers: ``+ - *`` and unary minus wrap / raise ARITHMETIC_OVERFLOW;
  ``div`` truncates (long), ``Long.MinValue div -1`` wraps / raises;
  ``%`` takes the dividend's sign; ``/`` is on doubles; any division or
  remainder by zero (``-0.0`` too) is NULL / DIVIDE_BY_ZERO (REMAINDER_BY_ZERO);
* floats: IEEE arithmetic; comparisons order NaN above +inf with NaN = NaN
  and -0.0 = 0.0;
* casts: integer narrowing wraps / CAST_OVERFLOW; float to integer truncates,
  NaN -> 0 and saturates (Java's ``toInt`` / ``toLong``; byte and short via
  int) / CAST_OVERFLOW; numbers to boolean are ``<> 0``; booleans to numbers
  1 / 0; integers and booleans to string exactly;
* three-valued logic throughout; IN is null when nothing matches and the
  value or an item is null.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import decimals as dec
from .catalyst import FLOATS, INTS, X

DIVIDE_BY_ZERO, ARITHMETIC_OVERFLOW, CAST_OVERFLOW, REMAINDER_BY_ZERO = 1, 2, 3, 4
NUMERIC_VALUE_OUT_OF_RANGE = 5
#: Not an error of Spark's: a row holding a value this module does not
#: render like Spark (a date beyond year 9999 or before year 0 as a string, a
#: date too far out for a timestamp). The operation reruns on Spark, in
#: either mode.
OUTSIDE_SUBSET = 9
ERRORS = {DIVIDE_BY_ZERO: "DIVIDE_BY_ZERO", ARITHMETIC_OVERFLOW: "ARITHMETIC_OVERFLOW", CAST_OVERFLOW: "CAST_OVERFLOW",
          REMAINDER_BY_ZERO: "REMAINDER_BY_ZERO", NUMERIC_VALUE_OUT_OF_RANGE: "NUMERIC_VALUE_OUT_OF_RANGE",
          OUTSIDE_SUBSET: "OUTSIDE_SUBSET"}

class _ArrowTypes(dict):
    def __missing__(self, t: str) -> pa.DataType:
        d = dec.parse(t)
        if d is None:
            raise KeyError(t)
        return pa.decimal128(*d)


ARROW = _ArrowTypes({
    "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"), "void": pa.null(),
})
NUMPY = {"byte": np.int8, "short": np.int16, "integer": np.int32, "long": np.int64, "float": np.float32,
         "double": np.float64}
_BOUNDS = {t: (int(np.iinfo(NUMPY[t]).min), int(np.iinfo(NUMPY[t]).max)) for t in INTS}
_FOLDABLE = tuple(NUMPY) + ("boolean",)
_ONE_ROW = pa.table({"__one": pa.array([0], pa.int8())})


_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _scalar(x: X):
    """The value of a non-null numeric literal as a numpy scalar of its
    type, else None: operators broadcast it instead of a column of copies."""
    if x.kind == "lit" and x.value is not None and x.type in NUMPY:
        return NUMPY[x.type](x.value)
    return None


def evaluate(tree: X, table: pa.Table) -> tuple[pa.Array, np.ndarray]:
    """(values as an Arrow array of the node's Spark-typed Arrow type, error codes)."""
    with np.errstate(all="ignore"):
        v, e = _Eval(table).ev(_folded(tree))
    return v, e


def fold(tree: X) -> X:
    """``tree`` with its constant numeric / boolean subtrees (no column,
    e.g. the analyzer's ``CAST(100 AS BIGINT)``) replaced by the literal they
    evaluate to -- once, instead of once per row -- so the nodes above see a
    literal (:func:`_scalar`) and compute against a scalar. A constant that
    is null or raises (``1 / 0`` in ANSI mode) stays as it is: evaluated per
    row, it raises only where Spark evaluates it."""
    if tree.kind in ("attr", "lit") or not tree.args:
        return tree
    if not tree.columns() and tree.type in _FOLDABLE:
        with np.errstate(all="ignore"):
            v, e = _Eval(_ONE_ROW).ev(tree)
        if not e.any() and v.null_count == 0:
            return X("lit", tree.type, value=v[0].as_py())
    args = tuple(fold(a) for a in tree.args)
    return tree if all(a is b for a, b in zip(args, tree.args)) else X(tree.kind, tree.type, args, tree.value, tree.ansi)


_FOLDED: dict[int, tuple[X, X]] = {}


def _folded(tree: X) -> X:
    """:func:`fold`, memoized per tree object (tasks evaluate the same tree
    once per batch). By identity, not equality: equal trees may differ in
    what matters (``0.0`` and ``-0.0`` literals compare and hash equal)."""
    hit = _FOLDED.get(id(tree))
    if hit is not None and hit[0] is tree:
        return hit[1]
    out = fold(tree)
    if len(_FOLDED) > 256:
        _FOLDED.clear()
    _FOLDED[id(tree)] = (tree, out)
    return out


def arrow_type(t: str) -> pa.DataType:
    return ARROW[t]


class _Eval:
    def __init__(self, table: pa.Table):
        self.t = table
        self.n = table.num_rows
        self.none = np.zeros(self.n, np.int8)

    # ------------------------------------------------------------ helpers
    def num(self, a: pa.Array, t: str):
        """(numpy values with nulls as 0, valid mask) of a numeric / boolean array."""
        valid = _valid(a, self.n)
        if t == "boolean":
            a = a.fill_null(False) if a.null_count else a
            return np.asarray(a.to_numpy(zero_copy_only=False), bool), valid
        a = a.fill_null(0) if a.null_count else a
        return np.asarray(a.to_numpy(zero_copy_only=False), NUMPY[t]), valid

    def build(self, values: np.ndarray, valid: np.ndarray, t: str) -> pa.Array:
        return pa.array(values, type=ARROW[t], mask=~valid if not valid.all() else None)

    def nulls(self, t: str) -> pa.Array:
        return pa.nulls(self.n, ARROW[t])

    # --------------------------------------------------------------- nodes
    def ev(self, x: X):
        return getattr(self, "ev_" + x.kind)(x)

    def ev_attr(self, x: X):
        col = self.t.column(x.value)
        if isinstance(col, pa.ChunkedArray):
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if col.type != ARROW[x.type]:
            col = col.cast(ARROW[x.type])
        return col, self.none

    def ev_lit(self, x: X):
        if x.value is None or x.type == "void":
            return self.nulls(x.type), self.none
        if x.type in ("timestamp", "timestamp_ntz"):
            return pa.array(np.full(self.n, x.value, np.int64)).cast(ARROW[x.type]), self.none
        if x.type in NUMPY:
            return pa.array(np.full(self.n, x.value, NUMPY[x.type]), ARROW[x.type]), self.none
        d = dec.parse(x.type)
        if d:
            return dec.from_ints(np.full(self.n, x.value, object), np.ones(self.n, bool), *d), self.none
        return pa.array([x.value] * self.n, ARROW[x.type]), self.none

    def ev_isnull(self, x: X):
        a, e = self.ev(x.args[0])
        valid = _valid(a, self.n)
        return pa.array(valid if x.value else ~valid), e

    def ev_not(self, x: X):
        a, e = self.ev(x.args[0])
        return pc.invert(a.cast(pa.bool_())), e

    def ev_and(self, x: X):
        return self._logic(x, pc.and_kleene, False)

    def ev_or(self, x: X):
        return self._logic(x, pc.or_kleene, True)

    def _logic(self, x: X, fn, decided: bool):
        a, ea = self.ev(x.args[0])
        b, eb = self.ev(x.args[1])
        a, b = a.cast(pa.bool_()), b.cast(pa.bool_())
        va, ok = self.num(a, "boolean")
        settled = ok & (va == decided)  # the right side is not evaluated there
        return fn(a, b), _merge(ea, np.where(settled, 0, eb))

    def ev_cmp(self, x: X):
        fast = self._cmp_scalar(x)
        if fast is not None:
            return fast
        (a, ea), (b, eb) = self.ev(x.args[0]), self.ev(x.args[1])
        t = x.args[0].type if x.args[0].type != "void" else x.args[1].type
        va_ok, vb_ok = _valid(a, self.n), _valid(b, self.n)
        # (<=> evaluates both sides; the others skip the right one after a null)
        err = _merge(ea, eb if x.value == "<=>" else np.where(va_ok, eb, 0))
        if t == "void":
            if x.value == "<=>":
                return pa.array(np.ones(self.n, bool)), err
            return self.nulls("boolean"), err
        if t in FLOATS:
            av, _ = self.num(a, t)
            bv, _ = self.num(b, t)
            an, bn = np.isnan(av), np.isnan(bv)
            eq = (av == bv) | (an & bn)
            lt = ((av < bv) & ~an) | (~an & bn)
        elif t in INTS or t in ("date", "timestamp", "timestamp_ntz", "boolean"):
            av, bv = _ints(a), _ints(b)
            eq, lt = av == bv, av < bv
        else:  # strings: UTF-8 bytes, Arrow's order
            eq = np.asarray(pc.equal(a, b).fill_null(False).to_numpy(zero_copy_only=False), bool)
            lt = np.asarray(pc.less(a, b).fill_null(False).to_numpy(zero_copy_only=False), bool)
        op = x.value
        both = va_ok & vb_ok
        if op == "<=>":
            return pa.array((both & eq) | (~va_ok & ~vb_ok)), err
        res = {"=": eq, "<": lt, "<=": lt | eq, ">": ~(lt | eq), ">=": ~lt}[op]
        return pa.array(res, mask=~both if not both.all() else None), err

    def _cmp_scalar(self, x: X):
        """``expression op literal`` (either side) on integers or non-NaN
        floats: one numpy comparison against the scalar. Same results as the general path: the literal is never null
        and raises nothing; a NaN cell orders above every number there."""
        op = x.value
        if op == "<=>":
            return None
        a_x, b_x = x.args
        lit = _scalar(b_x)
        if lit is None:
            lit = _scalar(a_x)
            if lit is None:
                return None
            a_x, op = b_x, _FLIP[op]
        t = a_x.type
        if t not in NUMPY or (t in FLOATS and np.isnan(lit)):
            return None
        a, err = self.ev(a_x)
        if t in FLOATS:
            av, ok = self.num(a, t)
        else:
            av, ok = _ints(a), _valid(a, self.n)
        res = {"=": np.equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op](av, lit)
        if t in FLOATS and op in (">", ">="):
            res |= np.isnan(av)  # (NaN > every number)
        return pa.array(res, mask=~ok if not ok.all() else None), err

    def ev_in(self, x: X):
        v, err = self.ev(x.args[0])
        v_ok = _valid(v, self.n)
        matched = np.zeros(self.n, bool)
        saw_null = ~v_ok
        for item in x.args[1:]:
            eq_tree = X("cmp", "boolean", (X("attr", x.args[0].type, value="__v"), X("attr", item.type, value="__i")), "=")
            i, ei = self.ev(item)
            err = _merge(err, np.where(v_ok & ~matched, ei, 0))
            sub = _Eval(pa.table({"__v": v, "__i": i}))
            r, _ = sub.ev(eq_tree)
            rv, r_ok = self.num(r, "boolean")
            matched |= r_ok & rv
            saw_null |= ~r_ok
        null = ~matched & saw_null
        return pa.array(matched, mask=null if null.any() else None), err

    def ev_case(self, x: X):
        kids = list(x.args)
        has_else = bool(x.value)
        else_x = kids.pop() if has_else else None
        pending = np.ones(self.n, bool)  # rows no branch has taken yet
        err = self.none
        out = self.nulls(x.type) if x.type != "void" else pa.nulls(self.n)
        chosen = []
        for c_x, v_x in zip(kids[0::2], kids[1::2]):
            c, ec = self.ev(c_x)
            err = _merge(err, np.where(pending, ec, 0))
            cv, c_ok = self.num(c.cast(pa.bool_()), "boolean")
            take = pending & c_ok & cv
            v, ev_ = self.ev(v_x)
            err = _merge(err, np.where(take, ev_, 0))
            chosen.append((take, v))
            pending &= ~take
        if else_x is not None:
            v, ev_ = self.ev(else_x)
            err = _merge(err, np.where(pending, ev_, 0))
            chosen.append((pending, v))
        for take, v in reversed(chosen):
            if v.type != out.type:
                v = v.cast(out.type)
            out = pc.if_else(pa.array(take), v, out)
        return out, err

    def ev_coalesce(self, x: X):
        pending = np.ones(self.n, bool)
        err = self.none
        out = self.nulls(x.type)
        parts = []
        for k in x.args:
            v, e = self.ev(k)
            err = _merge(err, np.where(pending, e, 0))
            if v.type != out.type:
                v = v.cast(out.type)
            parts.append(v)
            pending &= ~_valid(v, self.n)
        return pc.coalesce(*parts), err

    def ev_neg(self, x: X):
        a, err = self.ev(x.args[0])
        d = dec.parse(x.type)
        if d:
            # Decimal.unary_- negates a Scala BigDecimal, which rounds to 34
            # significant digits (MathContext.DECIMAL128): wider values are
            # Spark's business (it rounds, or raises even outside ANSI)
            v, ok = dec.to_ints(a), _valid(a, self.n)
            wide = np.array([dec.digits(int(u)) > 34 for u in v], bool) & ok
            return dec.from_ints(-v, ok & ~wide, *d), _merge(err, np.where(wide, OUTSIDE_SUBSET, 0))
        v, ok = self.num(a, x.type)
        r = -v
        if x.ansi and x.type in INTS:
            err = _merge(err, np.where(ok & (v == np.iinfo(v.dtype).min), ARITHMETIC_OVERFLOW, 0))
        return self.build(r, ok, x.type), err

    def ev_arith(self, x: X):
        fast = self._arith_scalar(x)
        if fast is not None:
            return fast
        op, t = x.value, x.type
        (a, ea), (b, eb) = self.ev(x.args[0]), self.ev(x.args[1])
        av, a_ok = self.num(a, t)
        bv, b_ok = self.num(b, t)
        both = a_ok & b_ok
        is_int = t in INTS
        if op in ("+", "-", "*"):
            err = _merge(ea, np.where(a_ok, eb, 0))
            r = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](av, bv)
            if x.ansi and is_int:
                err = _merge(err, np.where(both & _overflow(op, av, bv, r), ARITHMETIC_OVERFLOW, 0))
            return self.build(r, both, t), err
        # / div %: the divisor first; the dividend only when it is not null
        # (and, outside ANSI, not zero).
        zero = b_ok & (bv == 0)
        err = _merge(eb, np.where(b_ok & (x.ansi | ~zero), ea, 0))
        if x.ansi:
            code = REMAINDER_BY_ZERO if op == "%" else DIVIDE_BY_ZERO
            err = _merge(err, np.where(both & zero, code, 0))
        safe_b = np.where(zero, 1, bv).astype(bv.dtype)
        if op == "/":
            r = av / safe_b
        elif op == "%":
            if is_int:
                lo = np.iinfo(av.dtype).min
                special = (av == lo) & (safe_b == -1)  # Java: MIN % -1 == 0
                r = np.where(special, 0, np.fmod(av, np.where(special, 1, safe_b))).astype(av.dtype)
            else:
                r = np.fmod(av, safe_b)
        else:  # div on longs: truncation toward zero
            lo = np.iinfo(np.int64).min
            special = (av == lo) & (safe_b == -1)
            if x.ansi:
                err = _merge(err, np.where(both & special, ARITHMETIC_OVERFLOW, 0))
            d = np.where(special, 1, safe_b)
            q = av // d
            fix = (q < 0) & (q * d != av)  # floor -> trunc for mixed signs
            r = np.where(special, lo, q + fix.astype(np.int64))
        return self.build(r, both & ~zero, t), err

    def _arith_scalar(self, x: X):
        """``expression op literal`` with a literal that needs no special
        case (not 0 or -1 after ``/ div %``): one numpy operation against
        the scalar -- ``id % 100`` over millions of rows without a column
        of hundreds, zero tests or ``MIN % -1`` fix-ups. With a non-null,
        non-zero literal divisor every non-null dividend is evaluated and
        nothing divides by zero, so the rows and errors are the general
        path's; anything else takes the general path."""
        op, t = x.value, x.type
        bv = _scalar(x.args[1])
        if bv is None:
            return None
        if op in ("/", "div", "%") and (bv == 0 or bv == -1 or np.isnan(bv)):
            return None
        a, err = self.ev(x.args[0])
        av, ok = self.num(a, t)
        if op == "%":
            r = np.fmod(av, bv)  # (the dividend's sign, as Java; MIN % b fits for |b| > 1)
        elif op == "/":
            r = av / bv
        elif op == "div":  # truncation toward zero
            q = av // bv
            r = q + ((q < 0) & (q * bv != av)).astype(np.int64)
        else:
            r = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](av, bv)
            if x.ansi and t in INTS:
                err = _merge(err, np.where(ok & _overflow(op, av, bv, r), ARITHMETIC_OVERFLOW, 0))
        return self.build(r, ok, t), err

    def ev_cast(self, x: X):
        c = x.args[0]
        a, err = self.ev(c)
        src, to = c.type, x.type
        if to == "string":
            if src == "boolean":
                return pc.if_else(a, "true", "false").cast(pa.string()), err
            return a.cast(pa.string()), err
        v, ok = self.num(a, src)
        if to == "boolean":
            return self.build(v != 0, ok, "boolean"), err
        if src == "boolean":
            return self.build(v.astype(NUMPY[to]), ok, to), err
        if to in FLOATS:
            return self.build(v.astype(NUMPY[to]), ok, to), err
        lo, hi = _BOUNDS[to]
        if src in INTS:
            if x.ansi:
                over = ok & ((v < lo) | (v > hi))
                err = _merge(err, np.where(over, CAST_OVERFLOW, 0))
            return self.build(v.astype(NUMPY[to]), ok, to), err  # two's complement wrap
        # float -> integer
        f = v.astype(np.float64)
        if x.ansi:
            # Spark: floor(x) <= MAX and ceil(x) >= MIN, bounds as doubles
            fits = (np.floor(f) <= float(hi)) & (np.ceil(f) >= float(lo))
            err = _merge(err, np.where(ok & ~fits, CAST_OVERFLOW, 0))
        wide = "long" if to == "long" else "integer"  # byte / short go through int
        wlo, whi = _BOUNDS[wide]
        nan = np.isnan(f)
        tr = np.trunc(np.where(nan, 0.0, f))
        big, small = tr >= float(whi), tr <= float(wlo)
        mid = np.where(big | small, 0.0, tr).astype(np.int64)
        r = np.where(big, whi, np.where(small, wlo, mid)).astype(np.int64)
        return self.build(r.astype(NUMPY[wide]).astype(NUMPY[to]), ok, to), err


    # ---------------------------------------------------------- decimals
    def ev_decarith(self, x: X):
        op, (p, s) = x.value, dec.parse(x.type)
        (a, ea), (b, eb) = self.ev(x.args[0]), self.ev(x.args[1])
        sa, sb = dec.parse(x.args[0].type)[1], dec.parse(x.args[1].type)[1]
        a_ok, b_ok = _valid(a, self.n), _valid(b, self.n)
        av, bv = dec.to_ints(a), dec.to_ints(b)
        both = a_ok & b_ok
        out = np.zeros(self.n, object)
        ok = both.copy()
        flag = np.zeros(self.n, np.int8)
        if op == "/":
            zero = b_ok & (bv == 0)
            err = _merge(eb, np.where(b_ok & (x.ansi | ~zero), ea, 0))
            if x.ansi:
                err = _merge(err, np.where(both & zero, DIVIDE_BY_ZERO, 0))
            ok &= ~zero
        else:
            err = _merge(ea, np.where(a_ok, eb, 0))
        for i in np.flatnonzero(ok):
            u, v = int(av[i]), int(bv[i])
            doubt = False
            if op in ("+", "-"):
                m = max(sa, sb)
                r = dec.rescale(u, sa, m) + (1 if op == "+" else -1) * dec.rescale(v, sb, m)
                r = dec.rescale(r, m, s)
            elif op == "*":
                r, doubt = dec.product(u, v, sa + sb, s)
            else:
                r, doubt = dec.quotient(u, sa, v, sb, s)
            if doubt:
                flag[i] = OUTSIDE_SUBSET
                ok[i] = False
            elif not dec.fits(r, p):
                ok[i] = False
                if x.ansi:
                    flag[i] = NUMERIC_VALUE_OUT_OF_RANGE
            else:
                out[i] = r
        return dec.from_ints(out, ok, p, s), _merge(err, flag)

    def ev_deccast(self, x: X):
        c = x.args[0]
        a, err = self.ev(c)
        ok = _valid(a, self.n)
        src, to = dec.parse(c.type), dec.parse(x.type)
        flag = np.zeros(self.n, np.int8)
        if src is None:  # integers -> decimal
            vals = np.asarray(a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64).astype(object)
            src = (20, 0)
        else:
            vals = dec.to_ints(a)
        if to is not None:
            p, s = to
            out = np.zeros(self.n, object)
            good = ok.copy()
            for i in np.flatnonzero(ok):
                r = dec.rescale(int(vals[i]), src[1], s)
                if dec.fits(r, p):
                    out[i] = r
                else:
                    good[i] = False
                    if x.ansi:
                        flag[i] = NUMERIC_VALUE_OUT_OF_RANGE
            return dec.from_ints(out, good, p, s), _merge(err, flag)
        scale = src[1]
        if x.type == "double":
            # Decimal.toDouble: exact operands and one IEEE division while
            # the unscaled value is below 2^53 (and 10^scale exact)
            out = np.zeros(self.n, np.float64)
            for i in np.flatnonzero(ok):
                u = int(vals[i])
                if abs(u) < 2**53 and scale <= 22:
                    out[i] = float(u) / float(10**scale)
                else:
                    flag[i] = OUTSIDE_SUBSET
            return self.build(out, ok, "double"), _merge(err, flag)
        # decimal -> integers: truncation toward zero; legacy wraps (Java's
        # longValue, then the narrowing), ANSI raises CAST_OVERFLOW --
        # rows within one of the bounds are left to Spark (its ANSI check
        # goes through a double for wide decimals)
        lo, hi = _BOUNDS[x.type]
        out = np.zeros(self.n, np.int64)
        for i in np.flatnonzero(ok):
            u = int(vals[i])
            t = abs(u) // 10**scale * (1 if u >= 0 else -1)
            if x.ansi:
                if t > hi + 1 or t < lo - 1:
                    flag[i] = CAST_OVERFLOW
                elif t >= hi or t <= lo:
                    flag[i] = OUTSIDE_SUBSET if (t > hi or t < lo or u % 10**scale) else 0
            w = t & ((1 << 64) - 1)
            out[i] = w - (1 << 64) if w >= 1 << 63 else w
        return self.build(out.astype(NUMPY[x.type]), ok, x.type), _merge(err, flag)

    # ----------------------------------------------------------- strings
    def _strict(self, x: X):
        """Children of a null-intolerant function, in order: Spark evaluates
        a child only where the ones before it are not null."""
        vals, err = [], self.none
        ok = np.ones(self.n, bool)
        for k in x.args:
            v, e = self.ev(k)
            err = _merge(err, np.where(ok, e, 0))
            ok &= _valid(v, self.n)
            vals.append(v)
        return vals, err

    def _str(self, a: pa.Array) -> pa.Array:
        return a if a.type == pa.string() else a.cast(pa.string())

    def ev_strfn(self, x: X):
        a, err = self.ev(x.args[0])
        return _change_case(self._str(a), x.value == "upper"), err

    def ev_length(self, x: X):
        a, err = self.ev(x.args[0])
        return pc.utf8_length(self._str(a)).cast(pa.int32()), err

    def ev_strpred(self, x: X):
        (a, b), err = self._strict(x)
        a, b = self._str(a), self._str(b)
        pat = x.args[1]
        if pat.kind == "lit":
            if pat.value is None:
                return self.nulls("boolean"), err
            fn = {"startswith": pc.starts_with, "endswith": pc.ends_with, "contains": pc.match_substring}[x.value]
            return fn(a, pattern=pat.value), err
        test = {"startswith": str.startswith, "endswith": str.endswith, "contains": str.__contains__}[x.value]
        out = [None if u is None or v is None else test(u, v) for u, v in zip(a.to_pylist(), b.to_pylist())]
        return pa.array(out, pa.bool_()), err

    def ev_concat(self, x: X):
        parts, err = [], self.none
        for k in x.args:  # (Spark evaluates every child)
            v, e = self.ev(k)
            err = _merge(err, e)
            parts.append(self._str(v))
        return pc.binary_join_element_wise(*parts, "").cast(pa.string()), err

    def ev_trim(self, x: X):
        a, err = self.ev(x.args[0])
        chars = " "
        if len(x.args) == 2:
            chars = x.args[1].value
            if chars is None:
                return self.nulls("string"), err
        if chars == "":
            return self._str(a), err
        fn = {"both": pc.utf8_trim, "left": pc.utf8_ltrim, "right": pc.utf8_rtrim}[x.value]
        return fn(self._str(a), characters=chars), err

    def ev_substr(self, x: X):
        (s, pos, ln), err = self._strict(x)
        s = self._str(s)
        p_x, l_x = x.args[1], x.args[2]
        if p_x.kind == "lit" and l_x.kind == "lit":
            if p_x.value is None or l_x.value is None:
                return self.nulls("string"), err
            return _substr_literal(s, p_x.value, l_x.value), err
        out = [None if a is None or p is None or n is None else _substr(a, p, n)
               for a, p, n in zip(s.to_pylist(), pos.to_pylist(), ln.to_pylist())]
        return pa.array(out, pa.string()), err

    def ev_like(self, x: X):
        a, err = self.ev(x.args[0])
        return pc.match_substring_regex(self._str(a), pattern=x.value), err

    # ------------------------------------------------------------- dates
    def _days(self, a: pa.Array) -> np.ndarray:
        return np.asarray(a.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False), np.int32)

    def ev_datefield(self, x: X):
        a, err = self.ev(x.args[0])
        ok = _valid(a, self.n)
        y, m, d = _civil(self._days(a).astype(np.int64))
        v = {"year": y, "month": m, "day": d}[x.value]
        return self.build(v.astype(np.int32), ok, "integer"), err

    def ev_dateadd(self, x: X):
        (a, b), err = self._strict(x)
        ok = _valid(a, self.n) & _valid(b, self.n)
        days = np.asarray(b.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False), np.int32)
        r = (np.add if x.value > 0 else np.subtract)(self._days(a), days)  # (Java int: wraps)
        return pa.array(r, pa.int32(), mask=~ok if not ok.all() else None).cast(pa.date32()), err

    def ev_datediff(self, x: X):
        (a, b), err = self._strict(x)
        ok = _valid(a, self.n) & _valid(b, self.n)
        return self.build(np.subtract(self._days(a), self._days(b)), ok, "integer"), err

    def ev_dtcast(self, x: X):
        c = x.args[0]
        a, err = self.ev(c)
        ok = _valid(a, self.n)
        src, to, offset = c.type, x.type, int(x.value)
        if src == "date":
            days = self._days(a).astype(np.int64)
            if to == "string":
                text, bad = _date_strings(days)
                return _masked_strings(text, ok), _merge(err, np.where(ok & bad, OUTSIDE_SUBSET, 0))
            far = np.abs(days) > _MAX_TS_DAYS  # (Spark: long overflow of days * micros)
            err = _merge(err, np.where(ok & far, OUTSIDE_SUBSET, 0))
            micros = np.where(far, 0, days) * _DAY_US - (offset if to == "timestamp" else 0)
            return pa.array(micros, pa.int64(), mask=~ok if not ok.all() else None).cast(ARROW[to]), err
        micros = np.asarray(a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        local = micros + offset if src == "timestamp" else micros
        if to == "date":
            r = np.floor_divide(local, _DAY_US).astype(np.int32)
            return pa.array(r, pa.int32(), mask=~ok if not ok.all() else None).cast(pa.date32()), err
        if to == "string":
            text, bad = _timestamp_strings(local)
            return _masked_strings(text, ok), _merge(err, np.where(ok & bad, OUTSIDE_SUBSET, 0))
        r = local if to == "timestamp_ntz" else micros - offset  # ntz -> timestamp: the wall in the zone
        return pa.array(r, pa.int64(), mask=~ok if not ok.all() else None).cast(ARROW[to]), err


_DAY_US = 86_400_000_000
_MAX_TS_DAYS = 106_751_990  # |days| * micros per day fits a long


def _change_case(a: pa.Array, upper: bool) -> pa.Array:
    """Java's ``String.toUpperCase`` / ``toLowerCase`` (what UTF8String does
    beyond ASCII): full case mappings (``ß`` -> ``SS``), as Python's."""
    if pc.all(pc.string_is_ascii(a)).as_py() is not False:
        return pc.ascii_upper(a) if upper else pc.ascii_lower(a)
    fn = str.upper if upper else str.lower
    return pa.array([None if v is None else fn(v) for v in a.to_pylist()], pa.string())


def _substr(s: str, pos: int, length: int) -> str:
    """``UTF8String.substringSQL``: 1-based, 0 as 1, negative from the end;
    the end is computed before the start is clamped at 0."""
    n = len(s)
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = start + length
    start = max(start, 0)
    return "" if start >= end else s[start:end]


def _substr_literal(s: pa.Array, pos: int, length: int) -> pa.Array:
    """:func:`_substr` with constant arguments, vectorized (Python slicing
    of code points clamps the same way)."""
    if length <= 0:
        start, stop = 0, 0
    elif pos > 0:
        start, stop = pos - 1, pos - 1 + length
    elif pos == 0:
        start, stop = 0, length
    else:
        start, stop = pos, (pos + length if pos + length < 0 else None)
    if stop is not None and stop >= 0 and start >= 0 and start >= stop:
        start, stop = 0, 0
    return pc.utf8_slice_codeunits(s, start=start, stop=stop)


def _civil(days: np.ndarray):
    """(year, month, day) of days since 1970-01-01, proleptic Gregorian."""
    d = days.astype("datetime64[D]")
    months = d.astype("datetime64[M]")
    years = months.astype("datetime64[Y]")
    return (years.astype(np.int64) + 1970, months.astype(np.int64) - years.astype("datetime64[M]").astype(np.int64) + 1,
            (d - months.astype("datetime64[D]")).astype(np.int64) + 1)


def _date_strings(days: np.ndarray):
    """Spark's ``yyyy-MM-dd`` (years 0..9999; '+' and 5+ digits after):
    (strings, rows outside what this renders: negative years)."""
    y, _, _ = _civil(days)
    bad = y < 0
    text = np.datetime_as_string(np.where(bad, 0, days).astype("datetime64[D]"), unit="D").astype(object)
    big = y > 9999
    if big.any():
        text[big] = ["+" + t for t in text[big]]
    return text, bad


def _timestamp_strings(local: np.ndarray):
    """Spark's ``yyyy-MM-dd HH:mm:ss[.fraction]`` (trailing zeros of the
    fraction dropped) of local microseconds; years 0..9999 only."""
    y, _, _ = _civil(np.floor_divide(local, _DAY_US))
    bad = (y < 0) | (y > 9999)
    raw = np.datetime_as_string(np.where(bad, 0, local).astype("datetime64[us]"), unit="us")
    out = []
    for t in raw.tolist():
        t = t.replace("T", " ")
        frac = t[-6:].rstrip("0")
        out.append(t[:-7] + ("." + frac if frac else ""))
    return np.array(out, dtype=object), bad


def _masked_strings(text: np.ndarray, ok: np.ndarray) -> pa.Array:
    return pa.array(text.tolist(), pa.string(), mask=~ok if not ok.all() else None)


def _valid(a: pa.Array, n: int) -> np.ndarray:
    if a.null_count == 0:
        return np.ones(n, bool)
    return np.asarray(a.is_valid().to_numpy(zero_copy_only=False), bool)


def _ints(a: pa.Array) -> np.ndarray:
    t = a.type
    if pa.types.is_boolean(t):
        return np.asarray(a.fill_null(False).to_numpy(zero_copy_only=False), np.int64)
    if pa.types.is_date32(t):
        a = a.cast(pa.int32())
    elif pa.types.is_timestamp(t):
        a = a.cast(pa.int64())
    a = a.fill_null(0) if a.null_count else a
    return np.asarray(a.to_numpy(zero_copy_only=False), np.int64)


def _merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Error codes of a, then b's where a has none."""
    b = np.asarray(b, np.int8)
    if not b.any():
        return a
    return np.where(a != 0, a, b).astype(np.int8)


def _overflow(op: str, a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Rows where the wrapped integer result ``r`` differs from the exact one."""
    if op == "+":
        return ((a >= 0) == (b >= 0)) & ((r >= 0) != (a >= 0))
    if op == "-":
        return ((a >= 0) != (b >= 0)) & ((r >= 0) != (a >= 0))
    lo = np.iinfo(a.dtype).min
    safe_a = np.where((a == 0) | (a == -1), 1, a)
    back = r // safe_a  # exact iff no overflow (floor is exact for exact products)
    over = (a != 0) & (a != -1) & ((back != b) | (r % safe_a != 0))
    return over | ((a == -1) & (b == lo))


def raise_on_error_rows(err, what: str) -> None:
    """A row where Spark would raise (ANSI): the operation reruns on Spark,
    which raises its own error class (ArrowEvalFallback says so)."""
    from ..errors import ArrowEvalFallback

    if err.any():
        code = int(err[err != 0][0])
        raise ArrowEvalFallback(f"{what}: a row raises {ERRORS[code]} in ANSI mode")
