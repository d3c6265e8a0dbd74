"""Scalar index files pylance 14 writes, read for data skipping.

Only what pruning needs, read through ``lance.file``:

* **ZONEMAP** (``zonemap.lance``, one row per zone): ``min``, ``max`` (null
  when the zone holds only nulls), ``null_count``, ``nan_count``,
  ``fragment_id``, ``zone_start``, ``zone_length``; schema metadata
  ``rows_per_zone`` (8192). Checked against pylance 14.0.2: ``zone_start`` is
  the physical offset of the zone's first live row and ``zone_length`` the
  physical span to its last one (deleted rows at build time inside the span
  count), the counts cover live rows only; float ``max`` is NaN when the zone
  holds a NaN (total order), ``min`` NaN when it holds only NaNs.
* **BITMAP** (``bitmap_page_lookup.lance``): ``keys`` and ``bitmaps`` (a
  serialized row address tree map per key, see
  :func:`lance_ops.format.indexremap.decode_row_addr_map`); a null key holds
  the null rows.
* **BLOOMFILTER** (``bloomfilter.lance``): per zone ``fragment_id``,
  ``zone_start``, ``zone_length``, ``has_null`` and a split-block bloom filter
  over xxhash64 (:mod:`.bloom`): ``IS NULL`` prunes by ``has_null``, ``=``
  and ``IN`` by probing the filters.

* **BTREE** (``page_lookup.lance`` + ``page_data.lance``): ``page_data``
  holds every (value, row id / address) pair sorted by value (nulls first,
  floats in total order), cut into pages of ``batch_size`` (4096) rows;
  ``page_lookup`` holds each page's first and last value (``min`` is null when
  the page starts with nulls), ``null_count`` and ``page_idx``. A page is
  judged like a zone; the ids of the pages that may match are then read (only
  those rows of ``page_data``) to find the fragments holding them.

What the stats mean for a predicate is :mod:`lance_ops.format.pruning`'s
business; this module only turns files into zones: columnar
(:func:`read_zone_arrays`, what planning uses) or :class:`Zone` lists (tests,
BTREE pages, BITMAP keys).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from .basepaths import index_location
from .proto import table_pb2
from .zonearrays import ZoneArrays

ZONEMAP = "ZoneMapIndexDetails"
BITMAP = "BitmapIndexDetails"
BLOOMFILTER = "BloomFilterIndexDetails"
BTREE = "BTreeIndexDetails"

#: Index type name (as users and pylance's list_indices spell it) by details type.
TYPE_NAMES = {ZONEMAP: "ZONEMAP", BITMAP: "BITMAP", BLOOMFILTER: "BLOOMFILTER", BTREE: "BTREE"}

ZONEMAP_FILE = "zonemap.lance"
BITMAP_FILE = "bitmap_page_lookup.lance"
BLOOMFILTER_FILE = "bloomfilter.lance"


def index_kind(index: table_pb2.IndexMetadata) -> str:
    return index.index_details.type_url.rsplit(".", 1)[-1] if index.HasField("index_details") else ""


def covered_fragments(index: table_pb2.IndexMetadata) -> set[int]:
    """Fragments the index covers (its manifest fragment bitmap)."""
    return set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()


@dataclass(frozen=True)
class Zone:
    """Statistics of rows [start, end) of one fragment. ``min``/``max``: python
    values in the comparison domain of :mod:`pruning` (None: no non-null value
    was seen); ``has_null``: a null may be there."""

    fragment_id: int
    start: int
    end: int
    min: object = None
    max: object = None
    null_count: int = 0
    nan_count: int = 0
    #: A bloom filter zone's SBBF bytes (:mod:`.bloom`), None for zone maps.
    bloom: bytes | None = None


#: Index files read lately, by (store root, index directory, file): an index
#: directory is named by the index's UUID and never rewritten, so every
#: operation planning over the same index (each delete / update / read of a
#: table) reuses the table instead of opening the file again; a zone map's
#: or bloom filter's columns (:func:`read_zone_arrays`, views of that table
#: plus a few words per zone) are kept alongside. Bounded (16 indices).
_TABLES: dict = {}
_TABLES_MAX = 32


def _read_table(store, index, file_name: str) -> pa.Table:
    src, directory = index_location(store, index)
    return _cached((src.root, directory, file_name), lambda: _read_table_uncached(src, directory, file_name))


def _cached(key, build):
    value = _TABLES.get(key)
    if value is None:
        value = _TABLES[key] = build()
        while len(_TABLES) > _TABLES_MAX:
            _TABLES.pop(next(iter(_TABLES)), None)
    return value


def _read_table_uncached(src, directory: str, file_name: str) -> pa.Table:
    import lance.file as lf

    uri = src.codec_staging().reader_uri(f"{directory}/{file_name}")
    reader = lf.LanceFileReader(uri, storage_options=src.codec_options or None)
    table = reader.read_all().to_table()
    schema = reader.metadata().schema
    return table.replace_schema_metadata(schema.metadata)


def read_null_map(store, index) -> dict:
    """A bloom filter file's null rows (fragment id -> offsets; global buffer
    1, "null_bitmap", as pylance 14 writes it); {} when it has none."""
    import lance.file as lf

    from .indexremap import decode_row_addr_map

    src, directory = index_location(store, index)
    uri = src.codec_staging().reader_uri(f"{directory}/{BLOOMFILTER_FILE}")
    reader = lf.LanceFileReader(uri, storage_options=src.codec_options or None)
    if (reader.metadata().schema.metadata or {}).get(b"null_bitmap") != b"1":
        return {}
    return decode_row_addr_map(reader.read_global_buffer(1))


def stat_values(arr: pa.ChunkedArray | pa.Array) -> list:
    """Python values of a min/max column, timestamps as integer microseconds
    since the epoch (truncated as Spark truncates finer units: monotone, so
    bounds stay bounds), durations likewise."""
    t = arr.type
    if pa.types.is_timestamp(t):
        arr = arr.cast(pa.timestamp("us", t.tz), safe=False).cast(pa.int64())
    elif pa.types.is_date64(t):
        arr = arr.cast(pa.date32(), safe=False)
    return arr.to_pylist()


def read_zonemap(store, index) -> list[Zone]:
    """A ZONEMAP's zones as objects (tests; planning uses
    :func:`read_zone_arrays`)."""
    return zonemap_zones(_read_table(store, index, ZONEMAP_FILE))


def zonemap_zones(t: pa.Table) -> list[Zone]:
    mins, maxs = stat_values(t.column("min")), stat_values(t.column("max"))
    cols = [t.column(c).to_pylist() for c in ("null_count", "nan_count", "fragment_id", "zone_start", "zone_length")]
    return [
        Zone(int(frag), int(start), int(start) + int(length), lo, hi, int(nulls), int(nans))
        for lo, hi, nulls, nans, frag, start, length in zip(mins, maxs, *cols)
    ]


def read_zone_arrays(store, index):
    """A ZONEMAP's or BLOOMFILTER's zones as columns
    (:class:`.zonearrays.ZoneArrays`: what planning uses; no object per
    zone), cached with the file's table."""
    kind = index_kind(index)
    file_name = ZONEMAP_FILE if kind == ZONEMAP else BLOOMFILTER_FILE
    src, directory = index_location(store, index)

    def build():
        t = _read_table(store, index, file_name)
        return ZoneArrays.from_zonemap(t) if kind == ZONEMAP else ZoneArrays.from_bloomfilter(t)

    return _cached((src.root, directory, file_name, "arrays"), build)


def zone_arrays(zones: list, arrow_type: pa.DataType) -> ZoneArrays:
    """:class:`Zone` objects as :class:`.zonearrays.ZoneArrays` (tests,
    hand-made indices); bounds of ``arrow_type``, or the bloom filters when
    a bound is :data:`UNKNOWN`."""
    cols = [np.array([getattr(z, k) for z in zones], dtype=np.int64)
            for k in ("fragment_id", "start", "end", "null_count", "nan_count")]
    if any(z.min is UNKNOWN or z.max is UNKNOWN for z in zones):
        blooms = pa.array([z.bloom for z in zones], pa.binary())
        return ZoneArrays(*cols, bloom=blooms)
    t = arrow_type
    if pa.types.is_timestamp(t):
        t = pa.int64()  # (Zone bounds: integer microseconds)
    elif pa.types.is_floating(t):
        t = pa.float64()
    return ZoneArrays(*cols, pa.array([z.min for z in zones], t), pa.array([z.max for z in zones], t))


def read_bloomfilter_zones(store, index) -> list[Zone]:
    """Zones of a bloom filter index: their null flag and filter bytes
    (min/max unknown: the sentinel ``UNKNOWN``). A file whose filters were
    sized otherwise than :mod:`.bloom` assumes (other item count /
    probability metadata) still probes right: the size is the bytes' length."""
    return bloomfilter_zones(_read_table(store, index, BLOOMFILTER_FILE))


def bloomfilter_zones(t: pa.Table) -> list[Zone]:
    cols = [t.column(c).to_pylist() for c in ("fragment_id", "zone_start", "zone_length", "has_null")]
    data = t.column("bloom_filter_data").to_pylist() if "bloom_filter_data" in t.column_names else [None] * t.num_rows
    return [
        Zone(int(f), int(s), int(s) + int(n), UNKNOWN, UNKNOWN, 1 if h else 0, 0,
             bytes(b) if b and len(b) % 32 == 0 else None)
        for f, s, n, h, b in zip(*cols, data)
    ]


class _Unknown:
    def __repr__(self):
        return "UNKNOWN"


#: A bound that is not known (bloom filter zones): every value may be there.
UNKNOWN = _Unknown()


@dataclass
class BitmapIndex:
    """Keys (python values in the comparison domain) and, per key, fragment
    id -> offsets (None: the whole fragment)."""

    keys: list
    maps: list[dict]
    key_type: pa.DataType


def read_bitmap(store, index) -> BitmapIndex:
    from .indexremap import decode_row_addr_map

    t = _read_table(store, index, BITMAP_FILE)
    keys = stat_values(t.column("keys"))
    maps = [decode_row_addr_map(raw) if raw is not None else {} for raw in t.column("bitmaps").to_pylist()]
    return BitmapIndex(keys, maps, t.schema.field("keys").type)


BTREE_LOOKUP_FILE = "page_lookup.lance"
BTREE_DATA_FILE = "page_data.lance"


@dataclass
class BTreePages:
    """A BTREE's pages as zones (``start``/``end``: the page's rows in
    ``page_data.lance``) and a reader of the ids of chosen pages."""

    zones: list[Zone]
    store: object
    index: object
    arrow_type: pa.DataType

    def read_ids(self, pages: list[Zone], keep=None):
        """The (unsorted) uint64 row addresses of ``pages``; with ``keep``
        (values -> boolean mask) only those of the rows it keeps."""
        import lance.file as lf
        import numpy as np

        src, directory = index_location(self.store, self.index)
        uri = src.codec_staging().reader_uri(f"{directory}/{BTREE_DATA_FILE}")
        columns = ["ids"] if keep is None else ["values", "ids"]
        reader = lf.LanceFileReader(uri, storage_options=src.codec_options or None, columns=columns)
        rows = reader.metadata().num_rows  # (the last page is short)
        ranges: list[list[int]] = []
        for z in sorted(pages, key=lambda z: z.start):
            if ranges and ranges[-1][1] == z.start:
                ranges[-1][1] = min(z.end, rows)
            elif z.start < rows:
                ranges.append([z.start, min(z.end, rows)])
        parts = []
        for a, b in ranges:
            t = reader.read_range(a, b - a, batch_size=65536).to_table()
            ids = t.column("ids")
            if keep is not None:
                ids = ids.filter(keep(t.column("values")))
            parts.append(ids.to_numpy())
        return np.concatenate(parts).astype(np.uint64) if parts else np.empty(0, dtype=np.uint64)


def read_btree(store, index) -> BTreePages | None:
    """The pages of a BTREE index; None for a layout this does not know
    (a range-partitioned one, other batch metadata)."""
    t = _read_table(store, index, BTREE_LOOKUP_FILE)
    meta = t.schema.metadata or {}
    if meta.get(b"range_partitioned", b"false") != b"false" or not {"min", "max", "null_count", "page_idx"} <= set(
            t.column_names):
        return None
    batch = int(meta.get(b"batch_size", b"4096"))
    mins, maxs = stat_values(t.column("min")), stat_values(t.column("max"))
    zones = []
    for lo, hi, nulls, page in zip(mins, maxs, t.column("null_count").to_pylist(), t.column("page_idx").to_pylist()):
        start = int(page) * batch
        zones.append(Zone(int(page), start, start + batch, lo, hi, int(nulls), 0))
    return BTreePages(zones, store, index, t.schema.field("min").type)


__all__ = [
    "ZONEMAP", "BITMAP", "BLOOMFILTER", "BTREE", "TYPE_NAMES", "Zone", "UNKNOWN", "BitmapIndex", "BTreePages",
    "read_btree",
    "index_kind", "covered_fragments", "read_zonemap", "read_zone_arrays", "read_bloomfilter_zones", "read_bitmap", "stat_values",
]
