"""Merge target pruning: the source's key range, as a filter on the target.

For a merge condition that contains ``t.k = s.k'`` as a top-level conjunct,
no target row whose ``k`` lies outside ``[min(s.k'), max(s.k')]`` can match a
source row (``=`` never matches a null). Filtering the target scan by that
range keeps the merge's result exactly when no clause needs to see unmatched
*target* rows -- i.e. without ``whenNotMatchedBySource*`` clauses: matched
clauses only touch matched rows, and whether a source row is matched (insert
clauses) depends only on target rows that can match it. The range reaches
the target scan as the filters Spark would push for it
(:meth:`SourceBounds.scan_filters`; the merge plans that scan itself), so
data skipping drops the fragments and the zones whose ``[min, max]`` does
not overlap it, and the scan's skip report gives the merge's
``numFragmentsScanned`` / ``numFragmentsSkipped`` / ``numRowsScanned``. No
Spark filter re-checks it: the join itself only matches keys of the source.

Everything the pruning needs of the source -- its row count, each key's
bounds, a key's distinct values when it has at most :data:`MAX_KEY_SET` of
them, and otherwise a bloom filter of its keys -- comes from ONE Spark job
(:func:`_source_stats`: each task returns one small record; a Spark job costs
a fixed 0.1-0.3 s here, which is what a selective merge is made of) -- or,
for a bare scan of Parquet files whose key range alone is narrow, the count
and bounds from their footers and no job (:mod:`.sourcefooters`). With a
key set the scan filters add ``k IN (keys)``: zone maps then prune per key
(scattered keys no longer widen one range over everything) and bloom filter
indices are probed with every key. Nothing else of the source, and nothing
of the target, is collected. Finding the key pairs is a conservative
reading of the condition's text: only a top-level ``AND`` of conjuncts, each
exactly ``t.<col> = s.<col>`` (either order, optional backticks), counts;
anything else (``OR`` at the top level, expressions, ``<=>``) simply finds
no key and prunes nothing.
"""
from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import types as T

_NAME = r"`?([A-Za-z_][A-Za-z0-9_]*)`?"
_SIDE = rf"`?([A-Za-z_][A-Za-z0-9_]*)`?\.{_NAME}"
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


def equi_keys(condition_text: str, target_cols: list[str], source_cols: list[str],
              aliases: tuple[str, str] = ("t", "s")) -> list[tuple[str, str]]:
    """(target column, source column) pairs the condition equates as
    top-level conjuncts (names resolved case-insensitively, as Spark does;
    ``aliases``: the target's and the source's qualifiers)."""
    ta, sa = aliases[0].lower(), aliases[1].lower()
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
        if set(sides) != {ta, sa}:
            continue
        t, s = tmap.get(sides[ta]), smap.get(sides[sa])
        if t and s and (t, s) not in out:
            out.append((t, s))
    return out


def boundable(target_type: T.DataType, source_type: T.DataType) -> bool:
    if isinstance(target_type, _INTEGRAL) and isinstance(source_type, _INTEGRAL):
        return True
    if type(target_type) is not type(source_type):
        return False
    return isinstance(target_type, (T.StringType, T.DateType, T.TimestampType)) and target_type == source_type


def _python_value(v, dtype: T.DataType):
    """A bound as Spark hands a pushed literal to Python (timestamps: the
    tasks' bounds are microseconds since the epoch; Spark gives a datetime)."""
    if isinstance(dtype, T.TimestampType):
        import datetime as dt

        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=v)
    return v


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
    """The source's count, key bounds, small key set and key bloom filter --
    all from ONE Spark job over the source (:func:`_source_stats`: a task per
    source partition, at most ``2 x cores``, each returning one small
    record), never the source itself."""

    def __init__(self, source: DataFrame, keys: list[tuple[str, str]], target_types: dict, key_filter: bool = True,
                 target_rows: int | None = None, footers=None, local: bool = False):
        src_types = {f.name: f.dataType for f in source.schema.fields}
        self.keys = [(t, s) for t, s in keys if boundable(target_types[t], src_types[s])
                     and _arrow_bounds_exact(src_types[s])]
        self.types = {t: target_types[t] for t, _ in self.keys}
        #: source column -> what the tasks collect for it
        sets = [s for t, s in self.keys if _settable(src_types[s]) and _settable(target_types[t])]
        bloom = next((s for t, s in self.keys if key_filter and filterable(target_types[t], src_types[s])), None)
        #: the count and bounds came from the source's Parquet footers
        #: (``footers(key columns) -> stats or None``: no Spark job, no key
        #: set, no bloom filter; see lance_ops.ops.sourcefooters)
        stats = footers({s: src_types[s] for _, s in self.keys}) if footers is not None else None
        self.from_footers = stats is not None
        if stats is None:
            stats = _source_stats(source, [s for _, s in self.keys], sets, bloom, local=local)
        self.rows = stats.rows
        self.bounds = {t: stats.bounds[s] for t, s in self.keys}
        #: target key -> sorted distinct non-null source keys (few of them)
        self.key_sets: dict[str, list] = {}
        for t, s in self.keys:
            vals = stats.key_sets.get(s)
            if vals is not None and self.bounds[t][0] is not None:
                self.key_sets[t] = sorted(vals)
                break  # (one key's set is enough to prune by)
        #: (target key, filter bytes, approximate distinct keys): a bloom
        #: filter of the source's keys the target scan's tasks probe
        #: (:mod:`lance_ops.format.keyfilter`) when there is no key set --
        #: from footers, where the tasks build it instead of the bytes
        #: (:class:`lance_ops.spark.sourcekeys.ParquetKeys`).
        self.key_filter: tuple[str, bytes, int] | None = None
        if bloom is not None and not self.key_sets and not self.matches_nothing:
            t = next(t for t, s in self.keys if s == bloom)
            nd = stats.distinct.get(bloom)
            if nd is not None and (target_rows is None or target_rows >= KEY_FILTER_MIN_RATIO * nd):
                built = stats.key_filter(bloom)
                if built is not None:
                    self.key_filter = (t, built, int(nd))

    @property
    def matches_nothing(self) -> bool:
        """No source row can match any target row (empty source or a key
        that is null in every source row)."""
        return any(lo is None for lo, _ in self.bounds.values())

    def scan_filters(self) -> list:
        """The target rows that may match, as the ``pyspark.sql.datasource``
        filters Spark would push (``k >= min``, ``k <= max`` per key, ``k IN
        (keys)`` for a key set) to the target's scan, which the merge plans in
        the driver (:func:`lance_ops.spark.frames.planned_scan_frame`)."""
        from pyspark.sql.datasource import GreaterThanOrEqual, In, LessThanOrEqual

        out = []
        for t, (lo, hi) in self.bounds.items():
            dtype = self.types[t]
            out += [GreaterThanOrEqual((t,), _python_value(lo, dtype)), LessThanOrEqual((t,), _python_value(hi, dtype))]
            if t in self.key_sets:
                out.append(In((t,), tuple(self.key_sets[t])))
        return out

    def describe(self) -> str:
        text = ", ".join(
            f"{t} in [{lo}, {hi}]" + (f" ({len(self.key_sets[t])} keys)" if t in self.key_sets else "")
            for t, (lo, hi) in self.bounds.items()
        )
        if self.key_filter is not None:
            t, data, nd = self.key_filter
            if isinstance(data, bytes):
                text += f"; {t} in a bloom filter of ~{nd:,} source keys ({len(data):,} bytes)"
            else:  # (lance_ops.spark.sourcekeys)
                text += f"; {t} in a bloom filter of <= {nd:,} source keys built by the scan's tasks"
        if self.from_footers:
            text += " (from the source's Parquet footers)"
        return text


def filterable(target_type: T.DataType, source_type: T.DataType) -> bool:
    """Key pairs a bloom filter of source keys can stand for in the target
    scan: Spark's ``=`` on them is equality of the canonical values
    :mod:`lance_ops.format.keyfilter` hashes (integers of any width, dates,
    timestamps, binary-collated strings)."""
    if not boundable(target_type, source_type):
        return False
    return not isinstance(target_type, T.StringType) or target_type == T.StringType()


def _arrow_bounds_exact(dtype: T.DataType) -> bool:
    """Key types whose min / max Arrow computes exactly as Spark orders them
    (strings: only the default, binary UTF-8 collation)."""
    return not isinstance(dtype, T.StringType) or dtype == T.StringType()


class _Stats:
    """The tasks' partial statistics, united on the driver."""

    def __init__(self, parts: list[dict], cols: list[str], sets: list[str], bloom: str | None):
        self.rows = sum(p["n"] for p in parts)
        self.bounds: dict[str, tuple] = {}
        for c in cols:
            los = [p["lo"][c] for p in parts if p["lo"][c] is not None]
            his = [p["hi"][c] for p in parts if p["hi"][c] is not None]
            self.bounds[c] = (min(los), max(his)) if los else (None, None)
        #: column -> the distinct values (None: more than MAX_KEY_SET)
        self.key_sets: dict[str, list | None] = {}
        for c in sets:
            acc: set | None = set()
            for p in parts:
                vals = p["sets"].get(c)
                if vals is None or acc is None:
                    acc = None
                    break
                acc.update(vals)
                if len(acc) > MAX_KEY_SET:
                    acc = None
                    break
            self.key_sets[c] = None if acc is None else list(acc)
        self._parts, self._bloom = parts, bloom
        #: column -> distinct keys (an over-estimate: the tasks' counts summed)
        self.distinct = {bloom: sum(p["nd"] for p in parts)} if bloom is not None else {}

    def key_filter(self, column: str) -> bytes | None:
        """The bloom filter of ``column``'s keys: the tasks' filters (built
        larger) folded to the size for all the source's keys, plus the small
        tasks' key lists added on the driver. None if too many keys."""
        import pyarrow as pa

        from ..format import keyfilter

        nbytes = keyfilter.filter_size(self.distinct[column])
        if nbytes is None:
            return None
        built = [p["filter"] for p in self._parts if p.get("filter") is not None]
        nbytes = min([nbytes] + [len(f) for f in built])
        acc = [keyfilter.fold(f, nbytes) for f in built]
        small = [v for p in self._parts if p.get("filter") is None for v in (p["sets"].get(column) or [])]
        if small or not acc:
            kind = next((p["type"] for p in self._parts if p.get("type") is not None), pa.int64())
            acc.append(keyfilter.build(pa.array(small, kind), nbytes))
        return keyfilter.union(acc)


def _source_stats(source: DataFrame, cols: list[str], sets: list[str], bloom: str | None,
                  local: bool = False) -> _Stats:
    """Count, per key column min / max, distinct values (up to
    :data:`MAX_KEY_SET` a task) and a bloom filter of ``bloom``'s keys, in
    one Spark job: one task per source partition (coalesced to at most
    ``2 x cores``), each returning one small record.

    ``local``: the source is data the client sent with its plan (a bare
    ``LocalRelation``: ``spark.createDataFrame`` of a CDC micro-batch, say).
    Up to :data:`LOCAL_SOURCE_ROWS` of its key columns are then read in the
    driver (:func:`_local_table`; the optimizer folds the limit into the
    local data: no statistics job)
    and the same statistics computed here; a bigger one runs the job."""
    import pickle

    from ..spark.errors import executor_task
    from ..spark.frames import total_cores
    from ..spark.sqltext import quoted

    frame = source.selectExpr(*[quoted(c) for c in cols] or ["1 AS _one"])
    set_cols = set(sets) | ({bloom} if bloom is not None else set())
    if local:
        table = _local_table(frame.limit(LOCAL_SOURCE_ROWS + 1))
        if table.num_rows <= LOCAL_SOURCE_ROWS:
            return _Stats([_partial_stats(table.to_batches(), cols, set_cols, bloom, 1)], cols, sets, bloom)
    slots = max(1, 2 * total_cores(source.sparkSession))

    @executor_task
    def partial(batches):
        import pyarrow as pa

        out = _partial_stats(batches, cols, set_cols, bloom, slots)
        yield pa.RecordBatch.from_pydict({"p": pa.array([pickle.dumps(out)], pa.binary())})

    rows = frame.coalesce(slots).mapInArrow(partial, "p binary").collect()
    parts = [pickle.loads(bytes(r[0])) for r in rows]
    return _Stats(parts, cols, sets, bloom)


#: A local source (:func:`_source_stats`) of up to this many rows has its
#: statistics computed in the driver from its key columns.
LOCAL_SOURCE_ROWS = 10_000

#: Key types whose values a ``Row`` holds exactly (:func:`_local_table`).
_ROW_EXACT = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.StringType,
              T.BinaryType, T.BooleanType, T.DateType, T.DecimalType)


def _local_table(frame: DataFrame):
    """A frame over local data (a ``LocalRelation``), as Arrow. On a classic
    session ``collect()`` returns such a frame's rows from the driver, no job
    run, where ``toArrow()`` runs one (~0.06 s, a tenth of a small merge);
    the rows become Arrow columns of the types ``toArrow`` gives -- for
    types a ``Row`` holds exactly. Timestamps (a ``Row`` holds them in the
    session's time zone), nested types and Spark Connect (where ``toArrow``
    of local data runs no job either) take ``toArrow``."""
    import pyarrow as pa

    from ..spark.jvm import is_connect

    if is_connect(frame.sparkSession) or not all(isinstance(f.dataType, _ROW_EXACT) for f in frame.schema.fields):
        return frame.toArrow()
    from ..spark.types import spark_arrow_schema

    schema = spark_arrow_schema(frame.schema)
    rows = frame.collect()
    return pa.table([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)], schema=schema)


def _partial_stats(batches, cols: list[str], set_cols: set, bloom: str | None, slots: int) -> dict:
    """One task's statistics of its batches (streamed: memory grows with the
    distinct keys kept, not the rows); ``slots``: the most tasks there are
    (a bloom filter is built for that many times this task's keys)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..format import keyfilter

    #: distinct keys a task keeps (beyond them: no set; for the bloom
    #: column, no filter -- it would exceed keyfilter.MAX_BYTES anyway)
    cap = {c: (keyfilter.MAX_BYTES * 8 // keyfilter.BITS_PER_KEY) if c == bloom else MAX_KEY_SET for c in set_cols}
    n = 0
    lo: dict = dict.fromkeys(cols)
    hi: dict = dict.fromkeys(cols)
    uniq: dict = {c: None for c in set_cols}
    over: set = set()
    for b in batches:
        n += b.num_rows
        for c in cols:
            arr = b.column(c)
            if arr.null_count == len(arr):
                continue
            if pa.types.is_timestamp(arr.type):
                arr = arr.cast(pa.timestamp("us", arr.type.tz)).cast(pa.int64())
            mm = pc.min_max(arr)
            x, y = mm["min"].as_py(), mm["max"].as_py()
            lo[c] = x if lo[c] is None else min(lo[c], x)
            hi[c] = y if hi[c] is None else max(hi[c], y)
            if c in set_cols and c not in over:
                new = pc.unique(arr.drop_null())
                u = new if uniq[c] is None else pc.unique(pa.concat_arrays([uniq[c], new]))
                if len(u) > cap[c]:
                    over.add(c)
                    uniq[c] = None
                else:
                    uniq[c] = u
    out = {"n": n, "lo": lo, "hi": hi, "sets": {}, "nd": 0, "filter": None, "type": None}
    for c in set_cols:
        u = uniq[c]
        if c == bloom:
            out["nd"] = cap[c] * slots + 1 if c in over else (0 if u is None else len(u))
            out["type"] = None if u is None else u.type
        if c in over:
            out["sets"][c] = None
        elif u is None or len(u) <= MAX_KEY_SET:
            out["sets"][c] = [] if u is None else u.to_pylist()
        else:  # (the bloom column: more keys than a set holds)
            # built for this task's keys times the most tasks there are:
            # the driver folds it down to the size for all the keys
            size = keyfilter.filter_size(len(u) * slots) or keyfilter.MAX_BYTES
            out["filter"] = keyfilter.build(u, size)
            out["sets"][c] = None
    return out
