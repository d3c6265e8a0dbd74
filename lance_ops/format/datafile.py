"""Data file IO through pylance's file codec (``lance.file`` only).

Writing: :class:`DataFileWriter` streams Arrow batches of some table fields into
one ``.lance`` file under ``data/`` and returns its ``DataFile`` message
(``fields`` and ``column_indices`` as pylance records them).

Reading: a fragment may hold a table column in any of its data files, under an
old name (renames keep field ids), tombstoned (-2) in one file and re-written in
another, or not at all (reads as nulls). :class:`FragmentDataReader` resolves
each requested table column to the file and file column that holds it by
*field id*, reads only the files and columns needed, row-aligned across files,
in bounded batches, and conforms the arrays to the table's current names and
types. Deletions and metadata columns are applied one level up
(:mod:`lance_ops.format.scan`).
"""
from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pyarrow as pa

from ..errors import (
    CorruptTableError,
    InvalidArgumentError,
    LanceOpsError,
    StorageIOError,
    UnsupportedFeatureError,
)
from .basepaths import data_file_location
from .legacy import LegacyFileReader, is_legacy, legacy_file_schema
from .naming import DATA_DIR, new_data_file_name
from .proto import table_pb2
from .schema import Field, Schema, data_file_field_ids, field_from_arrow, file_version_tuple

#: Aim for about this many bytes per batch when reading.
TARGET_BATCH_BYTES = 32 * 1024 * 1024
MAX_BATCH_ROWS = 65536
MIN_BATCH_ROWS = 1024


def _lance_file():
    # Imported lazily: keeps `import lance_ops.format` cheap and lets executors
    # load the codec only when they touch data.
    import lance.file as lf

    return lf


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


class DataFileWriter:
    """Writes one data file holding the given top-level table fields."""

    def __init__(self, store, fields: Sequence[Field], file_version: str, schema_metadata=None):
        if file_version_tuple(file_version) < (2, 0):
            raise UnsupportedFeatureError(
                f"writing Lance data files of legacy format version {file_version} is not "
                "supported (pylance's file codec writes 2.x files only)"
            )
        self.store = store
        self.fields = list(fields)
        self.file_version = file_version
        self.name = new_data_file_name()
        self.rel = f"{DATA_DIR}/{self.name}"
        self.arrow_schema = pa.schema(
            [f.to_arrow() for f in self.fields], metadata=schema_metadata or None
        )
        self._staging = store.codec_staging()
        with self._writing():
            self._uri = self._staging.writer_uri(self.rel)
            self._writer = _lance_file().LanceFileWriter(
                self._uri,
                self.arrow_schema,
                version=file_version,
                storage_options=store.codec_options or None,
            )
        self.num_rows = 0
        #: Top-level fields holding packed structs somewhere (see _for_packing).
        self._packed = {f.name for f in self.fields if any(x.is_packed_struct for x in f.walk())}

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if not batch.schema.equals(self.arrow_schema, check_metadata=False):
            batch = pa.RecordBatch.from_arrays(
                [batch.column(i) for i in range(batch.num_columns)], schema=self.arrow_schema
            )
        if self._packed:
            batch = pa.RecordBatch.from_arrays(
                [_for_packing(batch.column(i), f) if f.name in self._packed else batch.column(i)
                 for i, f in enumerate(self.fields)],
                schema=self.arrow_schema,
            )
        with self._writing():
            self._writer.write_batch(batch)
        self.num_rows += batch.num_rows

    @contextlib.contextmanager
    def _writing(self):
        """The codec's and the store's failures as StorageIOError naming the
        file (a task's caller sees which file, not a bare OSError)."""
        try:
            yield
        except (LanceOpsError, TypeError, ValueError):
            raise
        except OSError as e:
            raise StorageIOError(f"writing data file failed: {type(e).__name__}: {e}",
                                 self.store.path(self.rel)) from e

    def finish(self) -> table_pb2.DataFile:
        with self._writing():
            self._writer.close()
            size = int(self._writer.size_bytes or 0)
            self._staging.finish_write(self.rel, self._uri)
        version = file_version_tuple(self.file_version)
        ids = data_file_field_ids(self.fields, version)
        return table_pb2.DataFile(
            path=self.name,
            fields=ids,
            column_indices=list(range(len(ids))),
            file_major_version=version[0],
            file_minor_version=version[1],
            file_size_bytes=size,
        )

    def abort(self) -> None:
        try:
            self._writer.close()
        except Exception:
            pass
        try:
            self.store.delete(self.rel)
        except Exception:
            pass


def _for_packing(arr: pa.Array, f: Field) -> pa.Array:
    """``arr`` (table field ``f``) as pylance's packed-struct encoders take it.

    They store one validity for the whole struct: a child with a validity of
    its own is refused ("Per-value compression not yet supported for block
    type Nullable") or makes the codec panic. Arrays read back from a Lance
    file carry child validity under every null struct; those bitmaps are
    dropped. A child null inside a non-null struct cannot be stored at all
    (pylance 14 cannot write it either): InvalidArgumentError."""
    if not pa.types.is_struct(arr.type) or not f.children:
        return arr
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([_for_packing(c, f) for c in arr.chunks], type=arr.type)
    if arr.offset:
        arr = pa.concat_arrays([arr])  # (children below start at 0)
    struct_null = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    children = []
    for i, child_field in enumerate(f.children):
        child = arr.field(i)
        if f.is_packed_struct and child.null_count:
            child_null = child.is_null().to_numpy(zero_copy_only=False)
            if struct_null is None or (child_null & ~struct_null).any():
                raise InvalidArgumentError(
                    f"packed struct column {f.name!r}: field {child_field.name!r} is null in a row whose struct "
                    "is not; Lance's packed struct encoding stores one validity for the whole struct (pylance 14 "
                    "cannot write this either). Fill the field, or use an unpacked struct column."
                )
            child = _without_validity(child)
        elif not f.is_packed_struct:
            child = _for_packing(child, child_field)
        children.append(child)
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(arr.type), mask=mask)


def _without_validity(arr: pa.Array) -> pa.Array:
    """``arr`` with no validity bitmap of its own (values under it kept)."""
    t = arr.type
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([arr.field(i) for i in range(t.num_fields)], fields=list(t))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return type(arr).from_arrays(arr.offsets, arr.values, type=t)
    if pa.types.is_fixed_size_list(t):
        return pa.FixedSizeListArray.from_arrays(arr.values.slice(arr.offset * t.list_size, len(arr) * t.list_size), type=t)
    return pa.Array.from_buffers(t, len(arr), [None] + arr.buffers()[1:], offset=arr.offset)


# ---------------------------------------------------------------------------
# File schemas annotated with table field ids
# ---------------------------------------------------------------------------

_SCHEMA_CACHE: "OrderedDict[str, tuple[pa.Schema, int]]" = OrderedDict()
#: (store root, path, recorded size) -> URI the codec reads (after the size check).
_URI_CACHE: "OrderedDict[tuple, str]" = OrderedDict()
_SCHEMA_CACHE_LOCK = threading.Lock()
_SCHEMA_CACHE_SIZE = 4096


#: Codec messages that mean "a valid file this codec cannot decode" rather
#: than damage.
_UNSUPPORTED_MARKERS = ("unknown lance storage version", "not supported", "unsupported", "not implemented")
#: Codec messages that mean the store could not be reached or answered with
#: an error (after the codec's own retries): not damage.
_TRANSPORT_MARKERS = ("error sending request", "connection", "timed out", "timeout", "dispatch failure",
                      "service unavailable", "slowdown", "internal error", "broken pipe", "reset by peer",
                      "max_retries", "after retries", "retries exhausted")


def codec_error(e: BaseException, uri: str, data_file: table_pb2.DataFile | None = None) -> Exception:
    """The lance_ops error for a codec failure on ``uri``: a valid file the
    codec cannot decode (a newer file version, an encoding it lacks) is
    UnsupportedFeatureError naming the file, its version and what to do;
    anything else is damage (CorruptTableError)."""
    msg = str(e)
    if any(m in msg.lower() for m in _TRANSPORT_MARKERS):
        return StorageIOError(f"reading data file failed in the store: {msg}", uri)
    if any(m in msg.lower() for m in _UNSUPPORTED_MARKERS):
        version = (
            f"{data_file.file_major_version}.{data_file.file_minor_version}" if data_file is not None else "unknown"
        )
        try:
            import lance

            codec = f"pylance {lance.__version__}"
        except Exception:  # pragma: no cover
            codec = "pylance"
        return UnsupportedFeatureError(
            f"data file {uri} (Lance file format version {version}) uses a layout {codec}'s file codec cannot "
            f"decode ({msg}); read it with the Lance version that wrote it, or upgrade pylance and lance_ops"
        )
    return CorruptTableError(f"cannot read data file: {msg}", uri)


def is_codec_failure(e: BaseException) -> bool:
    """True for what the codec raises on bad bytes: any ``Exception``, and
    ``pyo3_runtime.PanicException`` (a Rust panic; it derives from
    ``BaseException``, so ``except Exception`` misses it). Never
    ``KeyboardInterrupt`` / ``SystemExit`` / ``GeneratorExit``."""
    if isinstance(e, Exception):
        return True
    return type(e).__name__ == "PanicException"


def data_file_uri(where, rel: str, data_file: table_pb2.DataFile) -> str:
    """The URI the codec should read data file ``rel`` of store ``where``
    from, after checking the object against ``DataFile.file_size_bytes``
    (when recorded, as pylance does):

    * the same size: the object itself;
    * smaller, or missing: CorruptTableError naming the file (truncated,
      deleted, or replaced by another file);
    * larger (bytes appended after the file's end): a local copy of the
      recorded prefix -- pylance reads the footer at the recorded size, and
      ``lance.file.LanceFileReader`` cannot be given a size or a byte range,
      so the codec reads the prefix from a staged copy. Only damaged tables
      pay for that copy.

    A file replaced by another of *exactly* the recorded size cannot be told
    apart here (nor by pylance); its row count is still checked against the
    fragment's (:class:`FragmentDataReader`)."""
    recorded = int(data_file.file_size_bytes or 0)
    staging = where.codec_staging()
    key = (where.root, rel, recorded)
    with _SCHEMA_CACHE_LOCK:
        hit = _URI_CACHE.get(key)
    if hit is not None:
        return hit
    if "\x00" in rel:  # (a damaged manifest: no file system takes this name)
        raise CorruptTableError(f"the manifest names a data file with a NUL byte in its path: {rel!r}")
    try:
        actual = where.size(rel) if recorded else None
    except FileNotFoundError as e:
        raise CorruptTableError("data file named by the manifest is missing", where.path(rel)) from e
    if actual is None or actual == recorded:
        try:
            uri = staging.reader_uri(rel)
        except FileNotFoundError as e:
            raise CorruptTableError("data file named by the manifest is missing", where.path(rel)) from e
    elif actual < recorded:
        raise CorruptTableError(
            f"data file is {actual} bytes but the manifest records {recorded} (truncated or replaced)",
            where.path(rel),
        )
    else:
        uri = staging.prefix_uri(rel, recorded)
    with _SCHEMA_CACHE_LOCK:
        _URI_CACHE[key] = uri
        if len(_URI_CACHE) > _SCHEMA_CACHE_SIZE:
            _URI_CACHE.popitem(last=False)
    return uri


def file_arrow_schema(uri: str, storage_options, data_file: table_pb2.DataFile | None = None) -> pa.Schema:
    """Arrow schema of a data file (cached: data files are immutable)."""
    return _file_info(uri, storage_options, data_file)[0]


def _file_info(uri: str, storage_options, data_file: table_pb2.DataFile | None = None,
               name: str | None = None, opened: dict | None = None) -> tuple[pa.Schema, int]:
    """(Arrow schema, row count) of a data file (cached); errors name ``name``
    (the file in the table) or ``uri``. A reader opened to learn them goes
    into ``opened[uri]`` for the caller to read with (an open costs about
    as much as reading a small file)."""
    with _SCHEMA_CACHE_LOCK:
        s = _SCHEMA_CACHE.get(uri)
        if s is not None:
            _SCHEMA_CACHE.move_to_end(uri)
            return s
    try:
        reader = _lance_file().LanceFileReader(uri, storage_options=storage_options or None)
        meta = reader.metadata()
        s = (meta.schema, int(meta.num_rows))
        if opened is not None:
            opened[uri] = reader
    except BaseException as e:  # OSError / ValueError / RuntimeError / a Rust panic
        if not is_codec_failure(e):
            raise
        raise codec_error(e, name or uri, data_file) from e
    with _SCHEMA_CACHE_LOCK:
        _SCHEMA_CACHE[uri] = s
        if len(_SCHEMA_CACHE) > _SCHEMA_CACHE_SIZE:
            _SCHEMA_CACHE.popitem(last=False)
    return s


@dataclass
class FileNode:
    """A field of a data file's own schema, annotated with the table field id it
    holds (-2 tombstoned / -1 unknown)."""

    name: str
    arrow_field: pa.Field
    id: int = -1
    children: list["FileNode"] = field(default_factory=list)
    #: Names from the file's top-level column down to this node, through
    #: struct parents only (None below a list/map: read with the parent).
    path: tuple[str, ...] | None = None

    def leaf_ids(self) -> set[int]:
        if not self.children:
            return {self.id}
        out: set[int] = set()
        for c in self.children:
            out |= c.leaf_ids()
        return out


def _annotated(arrow_schema: pa.Schema, data_file: table_pb2.DataFile, table: Schema) -> list[FileNode]:
    """:func:`annotate_file_schema`, remembered on the table schema object
    for every file of the same shape (a table of thousands of small
    fragments has a handful of shapes; the nodes are never changed after)."""
    cache = table.__dict__.setdefault("_file_annotations", {})
    key = (arrow_schema, tuple(data_file.fields), data_file.file_major_version, data_file.file_minor_version)
    nodes = cache.get(key)
    if nodes is None:
        nodes = annotate_file_schema(arrow_schema, data_file, table)
        if len(cache) < 256:
            cache[key] = nodes
    return nodes


def annotate_file_schema(
    arrow_schema: pa.Schema, data_file: table_pb2.DataFile, table: Schema
) -> list[FileNode]:
    """Attach ``DataFile.fields`` ids to the file's own schema tree."""
    lance_fields = [field_from_arrow(f) for f in arrow_schema]
    nodes = [_to_node(af, lf, (af.name,)) for af, lf in zip(arrow_schema, lance_fields)]
    ids = list(data_file.fields)
    version = (data_file.file_major_version, data_file.file_minor_version)
    order: list[tuple[FileNode, Field]] = []
    if version >= (2, 1):
        for node, lf in zip(nodes, lance_fields):
            order.extend(_leaf_pairs(node, lf))
    else:
        for node, lf in zip(nodes, lance_fields):
            order.extend(_preorder_pairs(node, lf, skip_packed=version >= (2, 0)))
    if len(order) != len(ids):
        raise CorruptTableError(
            f"data file {data_file.path} lists {len(ids)} field ids but its schema has "
            f"{len(order)} columns"
        )
    for (node, _), fid in zip(order, ids):
        node.id = fid
    parents = table.parent_ids()
    for node in nodes:
        _derive_parent_ids(node, parents)
    return nodes


def _to_node(af: pa.Field, lf: Field, path: tuple[str, ...] | None) -> FileNode:
    node = FileNode(af.name, af, path=path)
    t = af.type
    if lf.children:
        if pa.types.is_struct(t):
            node.children = [
                _to_node(t.field(i), c, None if path is None else path + (t.field(i).name,))
                for i, c in enumerate(lf.children)
            ]
        elif pa.types.is_map(t):
            entries = pa.field("entries", pa.struct([t.key_field, t.item_field]), nullable=False)
            node.children = [_to_node(entries, lf.children[0], None)]
        else:  # list / large_list / fixed_size_list of struct
            node.children = [_to_node(t.value_field, lf.children[0], None)]
    return node


def _leaf_pairs(node: FileNode, lf: Field):
    if not lf.children or lf.is_packed_struct:
        yield node, lf
        return
    for cn, cl in zip(node.children, lf.children):
        yield from _leaf_pairs(cn, cl)


def _preorder_pairs(node: FileNode, lf: Field, skip_packed: bool):
    yield node, lf
    if skip_packed and (lf.is_packed_struct or lf.logical_type.startswith("fixed_size_list")):
        return
    for cn, cl in zip(node.children, lf.children):
        yield from _preorder_pairs(cn, cl, skip_packed)


def _derive_parent_ids(node: FileNode, parents: dict[int, int]) -> None:
    """2.1+ files do not list parent ids: a parent holds the table field that is
    the parent of its children's fields."""
    for c in node.children:
        _derive_parent_ids(c, parents)
    if node.children and node.id == -1:
        for c in node.children:
            if c.id >= 0 and c.id in parents and parents[c.id] >= 0:
                node.id = parents[c.id]
                return


# ---------------------------------------------------------------------------
# Column plans
# ---------------------------------------------------------------------------


@dataclass
class _FromFile:
    """Take file column ``name`` of file ``file_idx`` and conform it."""

    file_idx: int
    node: FileNode
    target: Field


@dataclass
class _StructFromParts:
    """Assemble a struct whose children live in different files."""

    target: Field
    children: list
    validity: _FromFile | None


@dataclass
class _Nulls:
    target: Field


def _plan_field(target: Field, candidates: list[tuple[int, FileNode]]):
    """Plan for table field ``target`` given file nodes holding its id."""
    if not candidates:
        return _Nulls(target)
    if not target.children or target.is_packed_struct:
        file_idx, node = candidates[-1]  # the newest file wins
        return _FromFile(file_idx, node, target)
    # A candidate covering the whole subtree is read as one column.
    want = {f.id for f in target.walk() if not f.children or f.is_packed_struct}
    for file_idx, node in reversed(candidates):
        if want <= node.leaf_ids():
            return _FromFile(file_idx, node, target)
    if target.logical_type != "struct":
        # A list/map split across files cannot happen (one leaf column chain).
        file_idx, node = candidates[-1]
        return _FromFile(file_idx, node, target)
    children = []
    for child in target.children:
        sub = [(i, c) for i, n in candidates for c in n.children if c.id == child.id]
        children.append(_plan_field(child, sub))
    i, n = candidates[0]
    return _StructFromParts(target, children, _FromFile(i, n, target))


def conform(arr: pa.Array, node: FileNode, target: Field) -> pa.Array:
    """``arr`` (read as file field ``node``) as table field ``target``: current
    names, current type, children matched by field id (missing ones null)."""
    want = target.arrow_type()
    if arr.type == want:
        return arr
    t = arr.type
    if pa.types.is_struct(want) and pa.types.is_struct(t):
        flat = arr.flatten()
        by_id = {c.id: (j, c) for j, c in enumerate(node.children)}
        cols = []
        for child in target.children:
            hit = by_id.get(child.id)
            if hit is None:
                cols.append(pa.nulls(len(arr), child.arrow_type()))
            else:
                cols.append(conform(flat[hit[0]], hit[1], child))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(cols, fields=[c.to_arrow() for c in target.children], mask=mask)
    if (pa.types.is_list(want) and pa.types.is_list(t)) or (
        pa.types.is_large_list(want) and pa.types.is_large_list(t)
    ):
        ctor = pa.ListArray if pa.types.is_list(want) else pa.LargeListArray
        values = conform(arr.values, node.children[0], target.children[0]) if target.children else arr.values
        mask = arr.is_null() if arr.null_count else None
        return ctor.from_arrays(arr.offsets, values, type=want, mask=mask)
    if pa.types.is_fixed_size_list(want) and pa.types.is_fixed_size_list(t) and target.children:
        values = conform(arr.flatten(), node.children[0], target.children[0])
        mask = arr.is_null() if arr.null_count else None
        return pa.FixedSizeListArray.from_arrays(values, type=want, mask=mask)
    try:
        return arr.cast(want)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return arr.view(want)


def _execute(plan, batches: list[pa.RecordBatch], n: int) -> pa.Array:
    if isinstance(plan, _Nulls):
        return pa.nulls(n, plan.target.arrow_type())
    if isinstance(plan, _FromFile):
        arr = _column_at(batches[plan.file_idx], plan.node)
        return conform(arr, plan.node, plan.target)
    children = [_execute(c, batches, n) for c in plan.children]
    mask = None
    if plan.validity is not None:
        v = _column_at(batches[plan.validity.file_idx], plan.validity.node)
        mask = v.is_null() if v.null_count else None
    fields = [c.to_arrow() for c in plan.target.children]
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _column_at(batch: pa.RecordBatch, node: FileNode) -> pa.Array:
    """The array of file node ``node`` inside a batch of its file (nodes below the
    top level are found through their struct parents)."""
    arr = batch.column(node.path[0])
    for name in node.path[1:]:
        idx = arr.type.get_field_index(name)
        arr = arr.flatten()[idx]
    return arr


# ---------------------------------------------------------------------------
# Fragment reader
# ---------------------------------------------------------------------------


class FragmentDataReader:
    """Reads table columns of one fragment, physical rows (deleted ones
    included), in aligned batches."""

    def __init__(self, store, schema: Schema, fragment: table_pb2.DataFragment, columns: Sequence[str]):
        self.store = store
        self.schema = schema
        self.fragment = fragment
        self.targets = [schema.field(c) for c in columns]
        self.physical_rows = fragment.physical_rows
        self._plans = []
        #: (uri, file columns) of the files read; a legacy file's "uri" is
        #: (store, path, DataFile) for :class:`LegacyFileReader`.
        self._files: list[tuple[object, list[str]]] = []
        #: codec URI -> the file's path in the table (for errors)
        self._names: dict[str, str] = {}
        #: codec URI -> (reader of every column, the file's column names):
        #: opened while planning, read with when those are the columns read
        self._opened: dict[str, tuple[object, list[str]]] = {}
        self._build_plans()

    def _build_plans(self) -> None:
        files = list(self.fragment.files)
        wanted_ids: set[int] = set()
        for t in self.targets:
            wanted_ids |= {f.id for f in t.walk()}
        annotated: list[list[FileNode] | None] = []
        uris: list[str | None] = []
        for df in files:
            if not wanted_ids & set(df.fields):
                annotated.append(None)
                uris.append(None)
                continue
            where, rel = data_file_location(self.store, df)
            if is_legacy(df):
                # (the pylance codec reads 2.x files only)
                uri = (where, rel, df)
                arrow_schema = legacy_file_schema(where, rel, df)
            else:
                uri = data_file_uri(where, rel, df)
                opened: dict = {}
                arrow_schema, num_rows = _file_info(uri, where.codec_options, df, where.path(rel), opened)
                if uri in opened:
                    self._opened[uri] = (opened[uri], arrow_schema.names)
                if self.physical_rows and num_rows != self.physical_rows:
                    raise CorruptTableError(
                        f"data file holds {num_rows} rows but fragment {self.fragment.id} has "
                        f"{self.physical_rows} (replaced by another file?)",
                        where.path(rel),
                    )
            try:
                nodes = _annotated(arrow_schema, df, self.schema)
            except CorruptTableError as e:
                raise CorruptTableError(str(e), where.path(rel)) from e
            annotated.append(nodes)
            uris.append(uri)
            self._names[uri if isinstance(uri, str) else rel] = where.path(rel)
        used: dict[int, set[str]] = {}
        for t in self.targets:
            cands = [
                (i, n) for i, nodes in enumerate(annotated) if nodes for n in nodes if n.id == t.id
            ]
            plan = _plan_field(t, cands)
            self._plans.append(plan)
            for p in _plan_sources(plan):
                used.setdefault(p.file_idx, set()).add(p.node.path[0])
        # Compact file indices to just the files we read.
        remap = {}
        for i in sorted(used):
            remap[i] = len(self._files)
            order = [n.name for n in annotated[i] if n.name in used[i]]
            self._files.append((uris[i], order))
        for plan in self._plans:
            for p in _plan_sources(plan):
                p.file_idx = remap[p.file_idx]

    def batch_rows(self) -> int:
        """Rows per batch for about TARGET_BATCH_BYTES of the columns read."""
        total_bytes = sum(df.file_size_bytes for df in self.fragment.files)
        if not total_bytes or not self.physical_rows:
            return MAX_BATCH_ROWS
        per_row = max(1, total_bytes // self.physical_rows)
        return int(min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, TARGET_BATCH_BYTES // per_row)))

    def read(self, start: int = 0, end: int | None = None, batch_rows: int | None = None) -> Iterator[pa.RecordBatch]:
        """Batches covering physical rows ``[start, end)`` with the requested
        columns under their table names and types."""
        end = self.physical_rows if end is None else min(end, self.physical_rows)
        if end <= start:
            return iter(())
        return self._stream(lambda reader, b: reader.read_range(start, end - start, batch_size=b), end - start, batch_rows)

    def take(self, offsets, batch_rows: int | None = None) -> Iterator[pa.RecordBatch]:
        """Batches of the rows at ``offsets`` (sorted physical offsets), in order."""
        offsets = [int(x) for x in offsets]
        if not offsets:
            return iter(())
        return self._stream(lambda reader, b: reader.take_rows(offsets, batch_size=b), len(offsets), batch_rows)

    def _stream(self, rows_of, total: int, batch_rows: int | None) -> Iterator[pa.RecordBatch]:
        """``rows_of(reader, batch_rows)`` over every needed file, row-aligned,
        conformed to the table's columns (all-null columns when no file holds
        any requested column)."""
        batch_rows = batch_rows or self.batch_rows()
        schema = pa.schema([t.to_arrow() for t in self.targets])
        if not self._files:
            for s in range(0, total, batch_rows):
                n = min(batch_rows, total - s)
                arrays = [_execute(p, [], n) for p in self._plans]
                yield pa.RecordBatch.from_arrays(arrays, schema=schema) if self.targets else _empty_batch(n)
            return
        lf = _lance_file()
        iters = []
        for uri, cols in self._files:
            if isinstance(uri, tuple):  # a legacy file: (store, path, DataFile)
                iters.append(rows_of(LegacyFileReader(*uri, columns=cols), batch_rows).to_batches())
                continue
            try:
                reader, every = self._opened.pop(uri, (None, None))
                if reader is None or list(cols) != list(every):
                    reader = lf.LanceFileReader(uri, storage_options=self.store.codec_options or None, columns=cols)
                iters.append(_checked(rows_of(reader, batch_rows).to_batches(), self._names.get(uri, uri)))
            except BaseException as e:
                if not is_codec_failure(e) or isinstance(e, LanceOpsError):
                    raise
                raise codec_error(e, self._names.get(uri, uri)) from e
        names = ", ".join(self._names.get(u if isinstance(u, str) else u[1], str(u)) for u, _ in self._files)
        for batches in _aligned(iters, names):
            n = batches[0].num_rows
            try:
                arrays = [_execute(p, batches, n) for p in self._plans]
            except BaseException as e:
                # decoded values that do not fit the table's types: damage
                if not is_codec_failure(e) or isinstance(e, LanceOpsError):
                    raise
                raise CorruptTableError(f"data of fragment {self.fragment.id} does not match the table "
                                        f"schema: {e}", names) from e
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _checked(batches, uri: str) -> Iterator[pa.RecordBatch]:
    """``batches`` with codec failures while decoding (panics included)
    turned into lance_ops errors naming the file."""
    it = iter(batches)
    while True:
        try:
            b = next(it)
        except StopIteration:
            return
        except BaseException as e:
            if not is_codec_failure(e) or isinstance(e, LanceOpsError):
                raise
            raise codec_error(e, uri) from e
        yield b


def _empty_batch(n: int) -> pa.RecordBatch:
    """A batch with ``n`` rows and no columns."""
    return pa.RecordBatch.from_pydict({"_": pa.nulls(n)}).drop_columns(["_"])


def _plan_sources(plan) -> list[_FromFile]:
    if isinstance(plan, _FromFile):
        return [plan]
    if isinstance(plan, _StructFromParts):
        out = [] if plan.validity is None else [plan.validity]
        for c in plan.children:
            out.extend(_plan_sources(c))
        return out
    return []


def _aligned(iters: list, names: str = "") -> Iterator[list[pa.RecordBatch]]:
    """Zip batch streams of several files of one fragment, re-chunking when their
    batch boundaries differ."""
    if len(iters) == 1:
        for b in iters[0]:
            yield [b]
        return
    pending: list[list[pa.RecordBatch]] = [[] for _ in iters]
    have = [0] * len(iters)
    done = [False] * len(iters)
    while True:
        for i, it in enumerate(iters):
            while not done[i] and have[i] == 0:
                try:
                    b = next(it)
                except StopIteration:
                    done[i] = True
                    break
                if b.num_rows:
                    pending[i].append(b)
                    have[i] += b.num_rows
        if any(h == 0 for h in have):
            if any(have):
                raise CorruptTableError("data files of one fragment have different row counts", names or None)
            return
        n = min(have)
        out = []
        for i in range(len(iters)):
            out.append(_take_rows(pending[i], n))
            have[i] -= n
        yield out


def _take_rows(pending: list[pa.RecordBatch], n: int) -> pa.RecordBatch:
    """Pop the first ``n`` rows off a list of batches."""
    first = pending[0]
    if first.num_rows == n:
        pending.pop(0)
        return first
    if first.num_rows > n:
        pending[0] = first.slice(n)
        return first.slice(0, n)
    parts, got = [], 0
    while got < n:
        b = pending[0]
        need = n - got
        if b.num_rows <= need:
            parts.append(pending.pop(0))
            got += b.num_rows
        else:
            parts.append(b.slice(0, need))
            pending[0] = b.slice(need)
            got = n
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


class WholeFileLayout:
    """The one data-file layout :func:`read_whole_file` reads directly: a
    single 2.x file holding exactly the table's columns, all flat (no struct,
    list or map), in schema order -- what pylance and lance_ops write for a
    table whose schema never changed, the layout of the many tiny fragments
    streaming and CDC writers leave. ``None`` from :meth:`of` when the schema
    has nested columns (every fragment takes :class:`FragmentDataReader`)."""

    def __init__(self, schema: Schema, file_version: str):
        self.arrow = pa.schema([f.to_arrow() for f in schema.fields])
        self.field_ids = tuple(data_file_field_ids(schema.fields, file_version_tuple(file_version)))
        self.column_indices = tuple(range(len(self.field_ids)))

    @classmethod
    def of(cls, schema: Schema, file_version: str) -> "WholeFileLayout | None":
        if not schema.fields or any(f.children for f in schema.fields):
            return None
        return cls(schema, file_version)

    def holds(self, fragment: table_pb2.DataFragment) -> bool:
        """The fragment is one file of this layout (its field ids and column
        order; the file's own Arrow schema is checked when it is read)."""
        if len(fragment.files) != 1:
            return False
        df = fragment.files[0]
        return (not is_legacy(df) and tuple(df.fields) == self.field_ids
                and tuple(df.column_indices) in (self.column_indices, ()))


def read_whole_file(store, layout: WholeFileLayout, fragment: table_pb2.DataFragment) -> pa.Table | None:
    """Every physical row of a fragment ``layout.holds``, under the table's
    column names, read with one codec call and no per-column planning (the
    per-fragment Python of :class:`FragmentDataReader` costs more than a
    25-row file's read); ``None`` when the file's own schema is not the
    table's (a column renamed, say): the caller reads it the general way.
    The same checks as the general reader: the object's size against the
    manifest, the file's row count against the fragment's, codec failures
    as lance_ops errors naming the file."""
    df = fragment.files[0]
    where, rel = data_file_location(store, df)
    uri = data_file_uri(where, rel, df)
    try:
        reader = _lance_file().LanceFileReader(uri, storage_options=where.codec_options or None)
        table = reader.read_all(batch_size=max(1, fragment.physical_rows)).to_table()
    except BaseException as e:
        if not is_codec_failure(e) or isinstance(e, LanceOpsError):
            raise
        raise codec_error(e, where.path(rel), df) from e
    if not table.schema.equals(layout.arrow, check_metadata=False):
        if table.schema.names != layout.arrow.names or table.schema.types != layout.arrow.types:
            return None
        table = pa.Table.from_arrays(table.columns, schema=layout.arrow)  # (nullability only, as the general reader)
    if table.num_rows != fragment.physical_rows:
        raise CorruptTableError(
            f"data file holds {table.num_rows} rows but fragment {fragment.id} has "
            f"{fragment.physical_rows} (replaced by another file?)",
            where.path(rel),
        )
    return table
