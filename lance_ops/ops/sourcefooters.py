"""A merge source's row count and key bounds from its Parquet footers.

A selective merge pays for each Spark job it runs (a fixed ~0.05-0.1 s
here, as much as its target scan). The source statistics job
(:func:`lance_ops.ops.mergekeys._source_stats`) exists to learn the source's
row count (broadcast or shuffle) and its key range (which target zones may
match). When the source is a bare scan of Parquet files -- the optimized plan
is a ``Relation ... parquet`` under at most projections of plain columns,
:func:`lance_ops.spark.plans.bare_parquet_scan` --
both are in the files' footers: each row group's row count and, per column,
``min`` / ``max`` / ``null_count``. Reading them is metadata work for the
driver (one small read per file), no Spark job and none of the source's
rows.

Only where the footers are exact for what Spark reads:

* integer keys whose Parquet type is the Spark type's own (``int64`` for
  ``bigint``, ``int32`` for ``int``, ...: the same values, no widening) and
  dates from 1900 on (older ones may be rebased from the legacy hybrid
  calendar when Spark reads them: their footer values are not Spark's);
* every row group has the statistics (or only nulls in that key);
* files on the driver's own file system (``file:`` URIs), at most
  :data:`MAX_FILES` of them -- and a classic session: a Spark Connect client
  is not the server, whose local paths ``inputFiles()`` names.

Anything else answers None and the merge runs its statistics job. Footer
bounds have no key set (the job's finer pruning, for sources of at most
``MAX_KEY_SET`` keys): such a source is taken from its footers only when the
key range alone leaves little to read (:func:`narrow_enough`). The bloom
filter of integer keys the target scan's tasks build themselves from the
same files (:mod:`lance_ops.spark.sourcekeys`).
"""
from __future__ import annotations

import datetime as dt
from urllib.parse import unquote, urlparse

from pyspark.sql import types as T

#: More files than this: the statistics job (one Spark job) is cheaper than
#: reading their footers one by one in the driver.
MAX_FILES = 64

#: Footer bounds are used when the target rows inside their key range are at
#: most this many times the source's rows (plus :data:`SLACK_ROWS`): then the
#: statistics job's key set or bloom filter could spare little of the read.
RANGE_RATIO = 4
#: Two zones of pylance's zone maps.
SLACK_ROWS = 2 * 8192

#: Dates before this may be stored in the legacy hybrid calendar (Spark < 3
#: writes them so; Spark rebases them on read): their footer values are not
#: what Spark reads.
_FIRST_SAFE_DATE = dt.date(1900, 1, 1)


class FooterStats:
    """What :class:`lance_ops.ops.mergekeys.SourceBounds` reads of the
    statistics job's answer, from footers: the row count and per key column
    ``(min, max)`` (``(None, None)``: only nulls). No key sets; the bloom
    filter of an integer key is built by the target scan's tasks."""

    def __init__(self, rows: int, bounds: dict[str, tuple], files: dict[str, list] | None = None):
        self.rows = rows
        self.bounds = bounds
        self.key_sets: dict = {}
        #: integer key column -> [(local path, the file's column name)]
        self.files = files or {}
        #: (an upper bound: the rows -- what sizes the filter)
        self.distinct: dict = {c: rows for c in self.files}

    def key_filter(self, column: str):
        """Where the target scan's tasks build the bloom filter of an
        integer key column (:mod:`lance_ops.spark.sourcekeys`); None for
        other columns."""
        from ..format.keyfilter import filter_size
        from ..spark.sourcekeys import ParquetKeys

        nbytes = filter_size(self.rows) if column in self.files else None
        return ParquetKeys(tuple(self.files[column]), nbytes) if nbytes else None


def _arrow_type_of(dtype: T.DataType):
    import pyarrow as pa

    return {T.LongType: pa.int64(), T.IntegerType: pa.int32(), T.ShortType: pa.int16(),
            T.ByteType: pa.int8(), T.DateType: pa.date32()}.get(type(dtype))


def _local_path(uri: str) -> str | None:
    u = urlparse(uri)
    if u.scheme != "file" or u.netloc not in ("", "localhost"):
        return None
    return unquote(u.path)


def footer_stats(files: list[str], columns: dict[str, T.DataType]) -> FooterStats | None:
    """The row count of ``files`` and the bounds of ``columns`` (Spark name
    -> Spark type) from their Parquet footers; None where the footers do not
    say exactly (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..spark.sourcekeys import file_identity

    if len(files) > MAX_FILES:
        return None
    wanted = {}
    for name, dtype in columns.items():
        kind = _arrow_type_of(dtype)
        if kind is None:
            return None
        wanted[name] = kind
    rows = 0
    lo: dict = dict.fromkeys(columns)
    hi: dict = dict.fromkeys(columns)
    located: dict = {name: [] for name, kind in wanted.items() if pa.types.is_integer(kind)}
    for uri in files:
        path = _local_path(uri)
        if path is None:
            return None
        try:
            ident = file_identity(path)  # (before the footer: a file rewritten after it fails the tasks' check)
            meta = pq.ParquetFile(path).metadata
        except Exception:  # (not on this file system, or not readable here)
            return None
        arrow = meta.schema.to_arrow_schema()
        # Spark matches Parquet columns to its own by name, ignoring case
        # by default: a name that matches two file columns is not ours to read.
        index = {}
        for name, kind in wanted.items():
            hits = [i for i, f in enumerate(arrow) if f.name.lower() == name.lower()]
            exact = [i for i in hits if arrow[i].name == name]
            hits = exact or hits
            if len(hits) != 1 or arrow[hits[0]].type != kind:
                return None
            leaf = [j for j in range(meta.num_columns) if meta.schema.column(j).path == arrow[hits[0]].name]
            if len(leaf) != 1:
                return None
            index[name] = leaf[0]
            if name in located:
                located[name].append((path, arrow[hits[0]].name, *ident))
        rows += meta.num_rows
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            for name, j in index.items():
                st = group.column(j).statistics
                if st is None or not st.has_null_count:
                    return None
                if not st.has_min_max:
                    if st.null_count != group.num_rows:
                        return None
                    continue  # (only nulls here)
                x, y = st.min, st.max
                if wanted[name] == pa.date32() and x < _FIRST_SAFE_DATE:
                    return None
                lo[name] = x if lo[name] is None else min(lo[name], x)
                hi[name] = y if hi[name] is None else max(hi[name], y)
    return FooterStats(rows, {c: (lo[c], hi[c]) for c in columns}, located)


def narrow_enough(target_rows_in_range: int, source_rows: int) -> bool:
    """Whether footer bounds leave the target read small enough that the
    statistics job's finer pruning (key set, bloom filter) is not worth its
    Spark job: see :data:`RANGE_RATIO`."""
    return target_rows_in_range <= RANGE_RATIO * source_rows + SLACK_ROWS
