"""Merge target pruning: the source's key range, as a filter on the target.

For a merge condition that contains ``t.k = s.k'`` as a top-level conjunct,
no target row whose ``k`` lies outside ``[min(s.k'), max(s.k')]`` can match a
source row (``=`` never matches a null). Filtering the target scan by that
range keeps the merge's result exactly when no clause needs to see unmatched
*target* rows -- i.e. without ``whenNotMatchedBySource*`` clauses: matched
clauses only touch matched rows, and whether a source row is matched (insert
clauses) depends only on target rows that can match it. The range filter is
pushed to the data source like any filter, so data skipping drops the
fragments and the zones whose ``[min, max]`` does not overlap it, and the
scan's skip report gives the merge's ``numFragmentsScanned`` /
``numFragmentsSkipped`` / ``numRowsScanned``.

The source's bounds are one Spark aggregate (a few values); when a key has
at most :data:`MAX_KEY_SET` distinct values, a second small job brings that
key set (bounded by a ``limit``) and the target filter adds ``k IN (keys)``:
zone maps then prune per key (scattered keys no longer widen one range over
everything) and bloom filters are probed with every key. Nothing else of the
source, and nothing of the target, is collected. Finding the key pairs is a conservative
reading of the condition's text: only a top-level ``AND`` of conjuncts, each
exactly ``t.<col> = s.<col>`` (either order, optional backticks), counts;
anything else (``OR`` at the top level, expressions, ``<=>``) simply finds
no key and prunes nothing.
"""
from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

_NAME = r"`?([A-Za-z_][A-Za-z0-9_]*)`?"
_SIDE = rf"`?([tTsS])`?\.{_NAME}"
_EQ = re.compile(rf"^{_SIDE}\s*==?\s*{_SIDE}$")
#: Spark types whose bounds make exact literals (floats are left out: NaN and
#: -0.0 make a range filter on them subtler than it is worth for join keys).
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _strip_parens(s: str) -> str:
    s = s.strip()
    while s.startswith("(") and s.endswith(")") and _depth_ok(s[1:-1]):
        s = s[1:-1].strip()
    return s


def _depth_ok(s: str) -> bool:
    """True if the parentheses of ``s`` balance without going negative."""
    depth = 0
    for part, quoted in _pieces(s):
        if quoted:
            continue
        for ch in part:
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                return False
    return depth == 0


def _pieces(s: str):
    """``s`` as (text, quoted) pieces: quoted strings/identifiers kept whole."""
    out, i, start = [], 0, 0
    while i < len(s):
        q = s[i]
        if q in "'\"`":
            if i > start:
                out.append((s[start:i], False))
            j = i + 1
            while j < len(s) and s[j] != q:
                j += 2 if s[j] == "\\" else 1
            out.append((s[i:j + 1], q != "`"))
            i = start = j + 1
            continue
        i += 1
    if start < len(s):
        out.append((s[start:], False))
    return out


def top_level_conjuncts(text: str) -> list[str] | None:
    """``text`` split at top-level ``AND`` (None when there is a top-level
    ``OR``, which binds weaker than ``AND``, or unbalanced parentheses)."""
    s = _strip_parens(text)
    if not _depth_ok(s):
        return None
    parts, current, depth = [], [], 0
    for piece, quoted in _pieces(s):
        if quoted or piece.startswith("`"):
            current.append(piece)
            continue
        tokens = re.split(r"(\(|\)|\bAND\b|\bOR\b)", piece, flags=re.IGNORECASE)
        for tok in tokens:
            up = tok.upper()
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
            elif depth == 0 and up == "OR":
                return None
            elif depth == 0 and up == "AND":
                parts.append("".join(current))
                current = []
                continue
            current.append(tok)
    parts.append("".join(current))
    return [_strip_parens(p) for p in parts]


def equi_keys(condition_text: str, target_cols: list[str], source_cols: list[str]) -> list[tuple[str, str]]:
    """(target column, source column) pairs the condition equates as
    top-level conjuncts (names resolved case-insensitively, as Spark does)."""
    conj = top_level_conjuncts(condition_text or "")
    if not conj:
        return []
    tmap = {c.lower(): c for c in target_cols}
    smap = {c.lower(): c for c in source_cols}
    out = []
    for c in conj:
        m = _EQ.match(c)
        if not m:
            continue
        (a, ac, b, bc) = m.groups()
        sides = {a.lower(): ac.lower(), b.lower(): bc.lower()}
        if set(sides) != {"t", "s"}:
            continue
        t, s = tmap.get(sides["t"]), smap.get(sides["s"])
        if t and s and (t, s) not in out:
            out.append((t, s))
    return out


def boundable(target_type: T.DataType, source_type: T.DataType) -> bool:
    if isinstance(target_type, _INTEGRAL) and isinstance(source_type, _INTEGRAL):
        return True
    if type(target_type) is not type(source_type):
        return False
    return isinstance(target_type, (T.StringType, T.DateType, T.TimestampType)) and target_type == source_type


def _bound_exprs(col: str, dtype: T.DataType, i: int) -> list:
    c = F.col(f"`{col}`")
    if isinstance(dtype, T.TimestampType):
        c = F.unix_micros(c)  # exact (no local-time round trip)
    return [F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}")]


def _literal(v, dtype: T.DataType):
    if isinstance(dtype, T.TimestampType):
        return F.timestamp_micros(F.lit(v))
    return F.lit(v)


#: At most this many distinct source keys are brought to the driver as an
#: ``IN`` list for the target scan (zone maps then prune per key, bloom filters
#: are probed with every key); more keep the range filter only.
MAX_KEY_SET = 4096


#: A bloom filter of source keys is built only for a target with at least
#: this many rows per distinct source key: then it drops most target rows;
#: with fewer its own Spark job costs more than it spares.
KEY_FILTER_MIN_RATIO = 4


def _settable(dtype: T.DataType) -> bool:
    """Key types whose values make exact Python literals for an IN list
    (timestamps stay a range: no local-time round trip)."""
    return isinstance(dtype, (*_INTEGRAL, T.StringType, T.DateType))


class SourceBounds:
    """The source's count and key bounds, from one aggregate -- plus, when a
    key has few distinct values (an approximate count in the same aggregate,
    then a ``distinct().limit(MAX_KEY_SET + 1)`` job: bounded, never the
    source itself), the key set."""

    def __init__(self, source: DataFrame, keys: list[tuple[str, str]], target_types: dict, key_filter: bool = True,
                 target_rows: int | None = None):
        src_types = {f.name: f.dataType for f in source.schema.fields}
        self.keys = [(t, s) for t, s in keys if boundable(target_types[t], src_types[s])]
        self.types = {t: target_types[t] for t, _ in self.keys}
        exprs = [F.count(F.lit(1)).alias("n")]
        for i, (_, s) in enumerate(self.keys):
            exprs += _bound_exprs(s, src_types[s], i)
            if (_settable(src_types[s]) and _settable(target_types[self.keys[i][0]])) or (
                    key_filter and filterable(target_types[self.keys[i][0]], src_types[s])):
                exprs.append(F.approx_count_distinct(F.col(f"`{s}`")).alias(f"nd{i}"))
        row = source.agg(*exprs).first()
        self.rows = int(row["n"])
        self.bounds = {t: (row[f"lo{i}"], row[f"hi{i}"]) for i, (t, _) in enumerate(self.keys)}
        #: target key -> sorted distinct non-null source keys (few of them)
        self.key_sets: dict[str, list] = {}
        names = row.asDict()
        for i, (t, s) in enumerate(self.keys):
            nd = names.get(f"nd{i}")
            if nd is None or nd > MAX_KEY_SET or self.bounds[t][0] is None:
                continue
            vals = [r[0] for r in source.select(F.col(f"`{s}`")).where(F.col(f"`{s}`").isNotNull())
                    .distinct().limit(MAX_KEY_SET + 1).collect()]
            if len(vals) <= MAX_KEY_SET:
                self.key_sets[t] = sorted(vals)
            break  # (one key's set is enough to prune by; a second job per key is not worth it)
        #: (target key, filter bytes, approximate distinct keys): a bloom
        #: filter of the source's keys the target scan's tasks probe
        #: (:mod:`lance_ops.format.keyfilter`) when there is no key set.
        self.key_filter: tuple[str, bytes, int] | None = None
        if key_filter and not self.key_sets and not self.matches_nothing:
            for i, (t, s) in enumerate(self.keys):
                nd = names.get(f"nd{i}")
                if nd is not None and filterable(target_types[t], src_types[s]) and (
                        target_rows is None or target_rows >= KEY_FILTER_MIN_RATIO * nd):
                    built = _source_key_filter(source, s, int(nd))
                    if built is not None:
                        self.key_filter = (t, built, int(nd))
                    break

    @property
    def matches_nothing(self) -> bool:
        """No source row can match any target row (empty source or a key
        that is null in every source row)."""
        return any(lo is None for lo, _ in self.bounds.values())

    def target_filter(self):
        """A Column filter on the target keeping every row that may match
        (None: no key to bound)."""
        cond = None
        for t, (lo, hi) in self.bounds.items():
            dtype = self.types[t]
            c = F.col(f"`{t}`")
            part = (c >= _literal(lo, dtype)) & (c <= _literal(hi, dtype))
            if t in self.key_sets:
                part = part & c.isin(self.key_sets[t])
            cond = part if cond is None else cond & part
        return cond

    def describe(self) -> str:
        text = ", ".join(
            f"{t} in [{lo}, {hi}]" + (f" ({len(self.key_sets[t])} keys)" if t in self.key_sets else "")
            for t, (lo, hi) in self.bounds.items()
        )
        if self.key_filter is not None:
            t, data, nd = self.key_filter
            text += f"; {t} in a bloom filter of ~{nd:,} source keys ({len(data):,} bytes)"
        return text


def filterable(target_type: T.DataType, source_type: T.DataType) -> bool:
    """Key pairs a bloom filter of source keys can stand for in the target
    scan: Spark's ``=`` on them is equality of the canonical values
    :mod:`lance_ops.format.keyfilter` hashes (integers of any width, dates,
    timestamps, binary-collated strings)."""
    if not boundable(target_type, source_type):
        return False
    return not isinstance(target_type, T.StringType) or target_type == T.StringType()


def _source_key_filter(source: DataFrame, column: str, ndv: int) -> bytes | None:
    """The bloom filter of ``column``'s non-null values: one Spark job whose
    tasks (at most a few: each returns one whole filter) build partial
    filters the driver unites; None if ``ndv`` keys need a filter larger than
    :data:`lance_ops.format.keyfilter.MAX_BYTES`."""
    import pyarrow as pa

    from ..format import keyfilter
    from ..spark.errors import executor_task
    from ..spark.frames import total_cores

    nbytes = keyfilter.filter_size(ndv)
    if nbytes is None:
        return None

    @executor_task
    def partial(batches):
        acc = None
        for b in batches:
            f = keyfilter.build(b.column(0), nbytes)
            acc = f if acc is None else keyfilter.union([acc, f])
        if acc is not None:
            yield pa.RecordBatch.from_pydict({"f": pa.array([acc], pa.binary())})

    col = F.col(f"`{column}`")
    keys = source.select(col).where(col.isNotNull()).coalesce(max(1, 2 * total_cores(source.sparkSession)))
    parts = [bytes(r[0]) for r in keys.mapInArrow(partial, "f binary").collect()]
    return keyfilter.union(parts) if parts else keyfilter.build(pa.array([], pa.int64()), nbytes)
