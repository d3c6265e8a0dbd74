"""Catalyst's analyzed expressions read back from ``EXPLAIN`` text: the
Arrow evaluator's input under Spark Connect.

A classic session hands the decoder (:mod:`.catalyst`) the analyzed plan as
JSON. A Connect client gets the same analyzed plan only as text
(``df.explain(True)``, one round trip), where Catalyst prints expressions
with ``toString``: binary operators parenthesized (``(a#1 + b#2)``),
functions as ``name(args)``, casts as ``cast(x as bigint)``, attributes as
``name#id`` (``L`` for longs) -- and literals raw, without quotes or types.

This module parses that text into the same typed trees the JSON gives:

* **Structure**: a backtracking parser enumerates every reading of the
  text (a literal may span spaces and keywords; ``NOT a IN (..)`` has two);
  each reading is then typed. A reading Spark's analyzer cannot have
  produced (operands of one comparison with different types, a string
  literal the SQL does not hold, a non-boolean under AND) is dropped. The
  text is accepted only when exactly one reading remains and it is in the
  decoder's subset; two possible readings, or one outside the subset, mean
  :class:`~.catalyst.Unsupported` -- the operation evaluates with Spark.
* **Literals**: a printed literal must match the literals of the SQL the
  client sent (:mod:`.sqllits`), whose types the lexer knows (``5L``,
  ``1.5``, ``DATE'..'``); where the surrounding types fix a literal's type
  (the analyzer gives both sides of a comparison one type) only candidates
  of that type count. A number the analyzer made itself (``substr``'s
  default length) is read in its context's type; a string never is.
* **Types and modes**: attribute types come from the relation's schema;
  evaluation modes (ANSI / LEGACY) from the session conf the plan was
  analyzed under; each tree's type is checked against the plan's output
  header.

The trees are built by the decoder's own ``build``, so every rule of the
subset (casts, decimals, strings, dates, the optimizer's rewrites it
mirrors) is the one the classic path proves against Spark; a test compares
this module's trees with the JSON path's for the same random expressions,
ANSI on and off. No Spark import.
"""
from __future__ import annotations

import re

from . import decimals as dec
from .catalyst import Unsupported, X, _Decoder
from .sqllits import Candidate, f32, printed_number, wall_clock

#: ``cast(x as <simpleString>)`` -> the JSON type names the decoder reads.
_SIMPLE = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}
_BINARY = {"=": "EqualTo", "<=>": "EqualNullSafe", "<": "LessThan", "<=": "LessThanOrEqual", ">": "GreaterThan",
           ">=": "GreaterThanOrEqual", "+": "Add", "-": "Subtract", "*": "Multiply", "/": "Divide",
           "div": "IntegralDivide", "%": "Remainder", "AND": "And", "OR": "Or"}
#: (longest first: ``<=>`` before ``<=`` before ``<``)
_OPS = sorted(_BINARY, key=len, reverse=True)
_CMP = ("=", "<=>", "<", "<=", ">", ">=")
_FUNCS = {"upper": "Upper", "lower": "Lower", "length": "Length", "char_length": "Length",
          "character_length": "Length", "len": "Length", "StartsWith": "StartsWith", "EndsWith": "EndsWith",
          "Contains": "Contains", "concat": "Concat", "substring": "Substring", "substr": "Substring",
          "year": "Year", "month": "Month", "day": "DayOfMonth", "dayofmonth": "DayOfMonth",
          "date_add": "DateAdd", "date_sub": "DateSub", "datediff": "DateDiff", "coalesce": "Coalesce",
          "isnull": "IsNull", "isnotnull": "IsNotNull", "between": "Between"}
_ARITY = {"Upper": 1, "Lower": 1, "Length": 1, "Year": 1, "Month": 1, "DayOfMonth": 1, "IsNull": 1,
          "IsNotNull": 1, "StartsWith": 2, "EndsWith": 2, "Contains": 2, "DateAdd": 2, "DateSub": 2,
          "DateDiff": 2, "Substring": 3, "Between": 3}
_TRIMS = {"trim": "StringTrim", "ltrim": "StringTrimLeft", "rtrim": "StringTrimRight"}
_STRING_ARGS = ("Upper", "Lower", "Length", "StartsWith", "EndsWith", "Contains", "Concat")
_TYPE = re.compile(r"[a-z_]+(?:\(\d+,\d+\))?(?: collate \w+)?")
_TOKEN = re.compile(r"[^\s(),]+")
_TS_TOKEN = re.compile(r"-?\d{4,}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?")
_FUNC = re.compile(r"([A-Za-z_]+)\(")
#: What a literal other than a string may print as: numbers (Java's
#: renderings of doubles too), dates, timestamps, booleans, null.
_PLAIN = re.compile(r"-?\d+(\.\d+)?(E-?\d+)?|-?NaN|-?Infinity|true|false|null|-?\d{4,}-\d{2}-\d{2}"
                    r"( \d{2}:\d{2}:\d{2}(\.\d{1,9})?)?")
#: Parses of one expression explored at most (beyond: Unsupported).
MAX_READINGS = 256


class _Impossible(Exception):
    """A reading Spark's analyzer cannot have printed: dropped."""


def decode_text(analyzed: str, schema: dict[str, str | None], candidates: list[Candidate], *, ansi: bool,
                tz: str, allow_precision_loss: bool = True) -> list[X]:
    """The trees of an analyzed plan's top ``Project`` (one per item, in
    order) or ``Filter`` (its condition) over a relation of ``schema``
    (column name -> the decoder's JSON type name, None for other types).
    ``analyzed``: the "Analyzed Logical Plan" section of ``explain(True)``.
    Raises Unsupported."""
    lines = analyzed.splitlines()
    if len(lines) < 3:
        raise Unsupported("plan text too short")
    header, top, leaf = lines[0], lines[1], lines[-1]
    if "more field" in analyzed:
        raise Unsupported("truncated plan text")
    attrs = _relation(leaf, schema)
    if top.startswith("Project [") and top.endswith("]") and len(lines) == 3:
        items = [_unalias(x) for x in _split_top(top[len("Project ["):-1])]
        types = _header_types(header, [a for _, a in items])
        exprs = [e for e, _ in items]
    elif top.startswith("Filter ") and len(lines) == 3:
        exprs, types = [top[len("Filter "):]], ["boolean"]
    else:
        raise Unsupported("neither a Project nor a Filter over the relation")
    typer = _Typer(attrs, candidates, ansi, tz, allow_precision_loss)
    out = []
    for text, want in zip(exprs, types):
        tree = typer.one(text, want)
        if tree.type != want and not (tree.type == "void" and want):
            raise Unsupported(f"decoded {tree.type}, the plan says {want}")
        out.append(tree)
    return out


def _relation(leaf: str, schema: dict) -> dict[str, tuple[str, str | None]]:
    """``{"x#3L": ("x", "long"), ...}`` from the leaf's attribute list."""
    start, end = leaf.find("["), leaf.rfind("]")
    if start < 0 or end < start:
        raise Unsupported("no attribute list on the relation")
    out = {}
    for item in leaf[start + 1:end].split(", "):
        m = re.fullmatch(r"(.+)#\d+L?", item)
        if not m or m.group(1) not in schema:
            raise Unsupported(f"relation attribute {item!r}")
        out[item] = (m.group(1), schema[m.group(1)])
    if set(n for n, _ in out.values()) != set(schema):
        raise Unsupported("relation columns differ from the schema")
    return out


def _split_top(text: str) -> list[str]:
    """Split at ``", "`` outside parentheses (string literals hold none: the lexer refused them)."""
    out, depth, last = [], 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and text.startswith(", ", i):
            out.append(text[last:i])
            last = i + 2
    out.append(text[last:])
    return out


def _unalias(item: str) -> tuple[str, str]:
    i = item.rfind(" AS ")
    m = re.fullmatch(r"(.+)#\d+L?", item[i + 4:]) if i >= 0 else None
    if not m:
        raise Unsupported(f"projection item without an alias: {item[:60]!r}")
    return item[:i], m.group(1)


def _header_types(header: str, aliases: list[str]) -> list[str]:
    out, pos = [], 0
    for k, a in enumerate(aliases):
        head = a + ": "
        if not header.startswith(head, pos):
            raise Unsupported("plan header")
        pos += len(head)
        end = header.find(", " + aliases[k + 1] + ": ", pos) if k + 1 < len(aliases) else len(header)
        if end < 0:
            raise Unsupported("plan header")
        out.append(_json_type(header[pos:end]))
        pos = end + 2
    return out


def _json_type(simple: str) -> str:
    """A ``simpleString`` as the decoder names types; the default collation
    (``string collate UTF8_BINARY``, how a cast to a table's StringType sent
    by a Connect client prints) is the plain string type."""
    if simple == "string collate UTF8_BINARY":
        return "string"
    return _SIMPLE.get(simple, simple)


# ------------------------------------------------------------------ parsing
class _Parser:
    """Every reading of one expression's text, as untyped tuples:
    ("attr", token) ("lit", token) ("cast", x, type) ("neg", x) ("not", x)
    ("bin", op, l, r) ("in", x, items) ("like", x, pattern, escape)
    ("case", [(cond, value)...], else|None) ("if", c, a, b) ("fn", name, args)
    ("trim", class, x, chars|None) ("to_date", x, ansi) ("ilike", x, pattern, escape)."""

    def __init__(self, text: str, attrs, strings):
        self.t = text
        self.attrs = sorted(attrs, key=len, reverse=True)
        self.strings = sorted({s for s in strings}, key=len, reverse=True)

    def readings(self):
        for node, end in self.expr(0):
            if end == len(self.t):
                yield node

    def expr(self, i):
        for node, j in self.prefix(i):
            yield from self.postfix(node, j)

    def postfix(self, node, j):
        t = self.t
        yield node, j
        if t.startswith(" IN (", j):
            for items, k in self.items(j + 5, ","):
                yield from self.postfix(("in", node, items), k)
        if t.startswith(" LIKE ", j):
            for pat, k in self.prefix(j + 6):
                m = re.compile(r" ESCAPE '(.)'").match(t, k)
                if m:
                    yield from self.postfix(("like", node, pat, m.group(1)), m.end())
                yield from self.postfix(("like", node, pat, "\\"), k)

    def items(self, i, sep):
        """``a<sep>b<sep>c)``: lists of expressions, ending after the ``)``
        (depth first, with a stack of its own: an IN list of thousands of
        items must not recurse as deep)."""
        stack = [(None, self.expr(i))]
        while stack:
            got, readings = stack[-1]
            nxt = next(readings, None)
            if nxt is None:
                stack.pop()
                continue
            node, j = nxt
            cur = (node, got)  # (a linked list, newest first: no copying per item)
            if self.t.startswith(")", j):
                yield _unlink(cur), j + 1
            if self.t.startswith(sep, j):
                stack.append((cur, self.expr(j + len(sep))))

    def prefix(self, i):
        t = self.t
        if t.startswith("NOT ", i):
            for c, j in self.expr(i + 4):
                yield ("not", c), j
        if t.startswith("-", i) and i + 1 < len(t) and not t[i + 1].isdigit():
            for c, j in self.prefix(i + 1):
                yield ("neg", c), j
        if t.startswith("(", i):
            for left, j in self.expr(i + 1):
                for op in _OPS:
                    if t.startswith(f" {op} ", j):
                        for right, k in self.expr(j + len(op) + 2):
                            if t.startswith(")", k):
                                yield ("bin", op, left, right), k + 1
        if t.startswith("CASE WHEN ", i):
            yield from self.case(i + len("CASE WHEN "), [])
        if t.startswith("if (", i):
            for c, j in self.expr(i + 4):
                if t.startswith(") ", j):
                    for a, k in self.expr(j + 2):
                        if t.startswith(" else ", k):
                            for b, m in self.expr(k + 6):
                                yield ("if", c, a, b), m
        m = _FUNC.match(t, i)
        if m:
            yield from self.call(m.group(1), m.end())
        for a in self.attrs:
            if t.startswith(a, i):
                yield ("attr", a), i + len(a)
        yield from self.literal(i)

    def literal(self, i):
        t = self.t
        seen = set()
        for s in self.strings:
            if t.startswith(s, i) and len(s) not in seen:
                seen.add(len(s))
                yield ("lit", s), i + len(s)
        for rx in (_TS_TOKEN, _TOKEN):
            m = rx.match(t, i)
            if m and len(m.group()) not in seen and _PLAIN.fullmatch(m.group()):
                seen.add(len(m.group()))
                yield ("lit", m.group()), m.end()

    def case(self, i, branches):
        t = self.t
        for c, j in self.expr(i):
            if not t.startswith(" THEN ", j):
                continue
            for v, k in self.expr(j + 6):
                got = branches + [(c, v)]
                if t.startswith(" WHEN ", k):
                    yield from self.case(k + 6, got)
                if t.startswith(" END", k):
                    yield ("case", got, None), k + 4
                if t.startswith(" ELSE ", k):
                    for e, m in self.expr(k + 6):
                        if t.startswith(" END", m):
                            yield ("case", got, e), m + 4

    def call(self, name, i):
        t = self.t
        if name in ("cast", "try_cast"):
            if name == "try_cast":
                return
            for c, j in self.expr(i):
                m = re.compile(r" as (" + _TYPE.pattern + r")\)").match(t, j)
                if m:
                    yield ("cast", c, m.group(1)), m.end()
            return
        if name in _TRIMS:
            for x, j in self.expr(i):
                if t.startswith(", None)", j):
                    yield ("trim", _TRIMS[name], x, None), j + 7
                elif t.startswith(", Some(", j):
                    for chars, k in self.expr(j + 7):
                        if t.startswith("))", k):
                            yield ("trim", _TRIMS[name], x, chars), k + 2
            return
        if name == "to_date":
            for x, j in self.expr(i):
                m = re.compile(r", None, Some\([^()]*\), (true|false)\)").match(t, j)
                if m:
                    yield ("to_date", x, m.group(1) == "true"), m.end()
            return
        if name == "ilike":
            for x, j in self.expr(i):
                if t.startswith(", ", j):
                    for pat, k in self.expr(j + 2):
                        if t.startswith(", ", k) and t.startswith(")", k + 3):
                            yield ("ilike", x, pat, t[k + 2]), k + 4
            return
        if t.startswith(")", i):
            yield ("fn", name, []), i + 1
        for args, j in self.items(i, ", "):
            yield ("fn", name, args), j


def _unlink(cell) -> list:
    out = []
    while cell is not None:
        out.append(cell[0])
        cell = cell[1]
    return out[::-1]


class _Index:
    """The SQL's literals by what they may print as (an IN list of thousands
    of literals is looked up once per printed literal, not scanned)."""

    def __init__(self, candidates):
        self.by: dict = {}
        for c in candidates:
            self.by.setdefault(_key_of(c), []).append(c)

    def printed_as(self, token: str) -> list:
        out = []
        for k in _token_keys(token):
            out += [c for c in self.by.get(k, ()) if c not in out and c.prints_as(token)]
        return out


def _key_of(c: Candidate):
    t, v = c.type, c.value
    if v is None:
        return ("s", "null")
    if t == "string":
        return ("s", v)
    if t == "boolean":
        return ("s", "true" if v else "false")
    if t == "date":
        return ("s", v.isoformat())
    if t in ("timestamp", "timestamp_ntz"):
        return ("t", v)
    f = float(v)
    return ("n", "nan" if f != f else abs(f))


def _token_keys(token: str) -> list:
    keys = [("s", token)]
    f = printed_number(token)
    if f is not None:
        keys.append(("n", "nan" if f != f else abs(f)))
        if f == f:
            keys.append(("n", abs(f32(f))))  # (a float literal's value is its 32-bit rounding)
    wall = wall_clock(token)
    if wall is not None:
        keys.append(("t", wall))
    return keys


# ------------------------------------------------------------------- typing
class _Typer:
    def __init__(self, attrs, candidates, ansi: bool, tz: str, loss: bool):
        self.attrs = attrs
        self.cands = _Index(candidates)
        self.strings = [c.value for c in candidates if c.type == "string"]
        self.mode = "ANSI" if ansi else "LEGACY"
        self.ansi = ansi
        self.tz = tz
        self.dec = _Decoder([], [], tz, loss)

    def one(self, text: str, want: str | None) -> X:
        """The one tree of ``text``. Raises Unsupported."""
        trees, outside = set(), []
        try:
            for n, node in enumerate(_Parser(text, self.attrs, self.strings).readings()):
                if n >= MAX_READINGS:
                    raise Unsupported("too many readings")
                try:
                    trees.add(self.typed(node, want))
                except _Impossible:
                    continue
                except (Unsupported, KeyError, TypeError, ValueError, IndexError) as e:
                    outside.append(e)
        except RecursionError:
            raise Unsupported("an expression nested too deep for the text decoder") from None
        if outside:
            raise Unsupported(f"a reading outside the subset: {outside[0]}")
        if len(trees) != 1:
            raise Unsupported(f"{len(trees)} readings of the plan text")
        return trees.pop()

    def build(self, cls: str, kids, n=None, mode=None) -> X:
        return self.dec.build(cls, n or {}, list(kids), mode)

    def typed(self, a, expect: str | None = None) -> X:
        k = a[0]
        if k == "attr":
            name, t = self.attrs[a[1]]
            if t is None:
                raise Unsupported(f"column {name}'s type")
            return self.build("AttributeReference", [], {"name": name, "dataType": t})
        if k == "lit":
            return self.literal(a[1], expect)
        if k == "cast":
            return self.build("Cast", [self.typed(a[1])], {"dataType": _json_type(a[2]), "timeZoneId": None},
                              self.mode)
        if k == "neg":
            c = self.typed(a[1], expect)
            if not (c.type in ("byte", "short", "integer", "long", "float", "double") or dec.parse(c.type)):
                raise _Impossible
            return self.build("UnaryMinus", [c], {"failOnError": self.ansi})
        if k == "not":
            return self.build("Not", [self.boolean(a[1])])
        if k == "bin":
            op, left, right = a[1], a[2], a[3]
            if op in ("AND", "OR"):
                return self.build(_BINARY[op], [self.boolean(left), self.boolean(right)])
            kids = self.same([left, right], expect if op not in _CMP else None, decimal_free=op not in _CMP)
            if op not in _CMP:
                for x in kids:
                    if not (x.type in ("byte", "short", "integer", "long", "float", "double", "void")
                            or dec.parse(x.type)):
                        raise _Impossible
            return self.build(_BINARY[op], kids, mode=self.mode if op not in _CMP else None)
        if k == "in":
            return self.build("In", self.same([a[1]] + list(a[2])))
        if k in ("like", "ilike"):
            return self.build("Like" if k == "like" else "ILike", self.strs([a[1], a[2]]), mode=a[3])
        if k == "case":
            conds = [self.boolean(c) for c, _ in a[1]]
            values = self.same([v for _, v in a[1]] + ([a[2]] if a[2] is not None else []), expect)
            kids = []
            for i, c in enumerate(conds):
                kids += [c, values[i]]
            if a[2] is not None:
                kids.append(values[-1])
            return self.build("CaseWhen", kids)
        if k == "if":
            return self.build("If", [self.boolean(a[1])] + self.same([a[2], a[3]], expect))
        if k == "trim":
            kids = self.strs([a[2]] + ([a[3]] if a[3] is not None else []))
            return self.build(a[1], kids)
        if k == "to_date":
            return self.build("ParseToDate", [self.typed(a[1])], {"ansiEnabled": a[2], "timeZoneId": None})
        if k == "fn":
            return self.function(a[1], a[2], expect)
        raise Unsupported(k)

    def function(self, name: str, args, expect) -> X:
        cls = _FUNCS.get(name)
        if cls is None:
            raise Unsupported(f"function {name}")
        arity = _ARITY.get(cls)
        if (arity is not None and len(args) != arity) or (cls == "Coalesce" and not args):
            raise _Impossible
        if cls == "Between":
            # The text prints BETWEEN's arguments as written, not the casts
            # its replacement (two comparisons) got: only one type is safe.
            try:
                x, lo, hi = self.same(args)
            except _Impossible:
                raise Unsupported("BETWEEN over several types (the text hides the casts)") from None
            return self.build("And", [self.build("GreaterThanOrEqual", [x, lo]),
                                      self.build("LessThanOrEqual", [x, hi])])
        if cls == "Coalesce":
            return self.build(cls, self.same(args, expect))
        if cls in _STRING_ARGS:
            return self.build(cls, self.strs(args))
        if cls == "Substring":
            s = self.strs(args[:1])
            return self.build(cls, s + [self.typed(x, "integer") for x in args[1:]])
        if cls in ("DateAdd", "DateSub", "DateDiff", "Year", "Month", "DayOfMonth"):
            rest = [self.typed(x, "integer" if cls in ("DateAdd", "DateSub") else "date") for x in args[1:]]
            return self.build(cls, [self.typed(args[0], "date")] + rest)
        return self.build(cls, [self.typed(x) for x in args])

    def boolean(self, a) -> X:
        x = self.typed(a, "boolean")
        if x.type not in ("boolean", "void"):
            raise _Impossible
        return x

    def strs(self, args) -> list[X]:
        out = [self.typed(x, "string") for x in args]
        if any(x.type not in ("string", "void") for x in out):
            raise _Impossible
        return out

    def same(self, args, expect: str | None = None, decimal_free: bool = False) -> list[X]:
        """``args`` typed as operands Spark's analyzer gave one type
        (literals take it from their typed siblings); for arithmetic on
        decimals (``decimal_free``) the analyzer leaves the two types apart."""
        typed = {i: self.typed(x) for i, x in enumerate(args) if x[0] != "lit"}
        known = {x.type for x in typed.values()} - {"void"}
        if decimal_free and any(dec.parse(t) for t in known):
            one = None
        elif len(known) > 1:
            raise _Impossible
        elif known:
            one = known.pop()
        else:
            one = None if decimal_free and dec.parse(expect or "") else expect
        for i, x in enumerate(args):  # literals, NULLs last: the others' type is theirs
            if i not in typed and x[1] != "null":
                typed[i] = self.typed(x, one)
        if one is None and not decimal_free:
            seen = {x.type for x in typed.values()} - {"void"}
            one = seen.pop() if len(seen) == 1 else None
        out = [typed[i] if i in typed else self.typed(x, one) for i, x in enumerate(args)]
        if not (decimal_free and any(dec.parse(x.type) for x in out)):
            if len({x.type for x in out} - {"void"}) > 1:
                raise _Impossible
        return out

    def literal(self, token: str, expect: str | None) -> X:
        printed = self.cands.printed_as(token)
        cands = [c for c in printed if expect is None or c.type in (expect, "void")]
        if printed and not cands:
            raise Unsupported(f"literal {token!r}: the SQL's literals printed so are not {expect}")
        kinds = {(c.type, c.value) for c in cands}
        if len(kinds) > 1:
            raise Unsupported(f"literal {token!r} could be any of {sorted(t for t, _ in kinds)}")
        if kinds:
            t, v = kinds.pop()
            if v is None and expect is not None:
                t = expect  # (the analyzer types a NULL by its context: Literal(null, string))
            return self.build("Literal", [], {"value": None if v is None else token, "dataType": t})
        # A literal the SQL does not hold: made by the analyzer (substr's
        # default length, ...) -- a number or date in its context's type.
        if expect is None or expect in ("string", "void", "boolean"):
            raise _Impossible
        try:
            return self.build("Literal", [], {"value": None if token == "null" else token, "dataType": expect})
        except (Unsupported, ValueError) as e:
            raise _Impossible from e
