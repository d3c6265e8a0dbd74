"""``DirectoryNamespace``: the Lance Namespace spec's directory catalog, in
Python, on lance_ops' own table layer (no Spark, no pylance dataset API).

On-disk layout -- what pylance 14's ``lance.namespace.DirectoryNamespace``
writes and reads in its default (manifest) mode, so each opens what the other
made::

    {root}/__manifest/           a Lance table with one row per namespace and table
        object_id   string not null   the identifier joined by "$" (unenforced primary key)
        object_type string not null   "namespace" | "table"
        location    string            a table's directory, relative to the root
        metadata    string            a namespace's properties, compact JSON
        base_objects list<string>
    {root}/{name}.lance          a table of the root namespace
    {root}/{8 hex}_{ns$name}     a table of a nested namespace
    {root}/{dir}/.lance-reserved a declared table (its directory holds no data yet)

Tables of the root namespace are their directories, as pylance 14 finds
them (``dir_listing_enabled``, default on): table ``name`` is the directory
``{name}.lance`` holding a table, unless a ``.lance-deregistered`` marker in
it hides it -- manifest rows of root tables are written (as pylance writes
them) but not consulted. So a root table is created and registered only at
``{name}.lance``, deregistering one leaves the marker, and renaming one is
refused (its name is its directory's). With ``dir_listing_enabled=false``
root tables are rows like any other; with ``manifest_enabled=false`` the
listing is all there is (no child namespaces).

Every change rewrites ``__manifest``'s rows in one ``Overwrite`` commit (as
pylance does), which commits only if no other commit landed since the rows
were read -- otherwise the rows are read again and the change is redone, so
two writers never lose each other's registrations.

``register_table`` takes locations inside the root only (a relative path, or
an absolute one under the root), as pylance's does. ``rename_table`` (which
pylance 14 does not implement) renames the row; the table's files stay where
they are.

Errors are the spec's (``lance_namespace.TableNotFoundError``, ...); the
Spark front end turns them into ``lance_ops.errors``.
"""
from __future__ import annotations

import json
import uuid
from typing import Callable

import pyarrow as pa
from lance_namespace import (
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    CreateTableRequest,
    CreateTableResponse,
    DeclareTableRequest,
    DeclareTableResponse,
    DeregisterTableRequest,
    DeregisterTableResponse,
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    DescribeTableRequest,
    DescribeTableResponse,
    DropNamespaceRequest,
    DropNamespaceResponse,
    DropTableRequest,
    DropTableResponse,
    InvalidInputError,
    LanceNamespace,
    ListNamespacesRequest,
    ListNamespacesResponse,
    ListTablesRequest,
    ListTablesResponse,
    NamespaceAlreadyExistsError,
    NamespaceExistsRequest,
    NamespaceExistsResponse,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    RegisterTableRequest,
    RegisterTableResponse,
    RenameTableRequest,
    RenameTableResponse,
    TableAlreadyExistsError,
    TableExistsRequest,
    TableExistsResponse,
    TableNotFoundError,
    UnsupportedOperationError,
)

from ..errors import CommitConflictError
from ..format.scan import FragmentScan, scan_fragment
from ..format.schema import Schema
from ..format.writer import FragmentSink
from ..storage.objectstore import ObjectStore
from ..txn.commit import NewTable
from ..txn.log import Snapshot, TableLog, latest_or_none
from ..txn.operations import Overwrite
from ..txn.pipeline import StagedCommit, WriteOptions, execute
from .ids import check_part, object_id

MANIFEST = "__manifest"
NAMESPACE, TABLE = "namespace", "table"
RESERVED_MARKER = ".lance-reserved"
DEREGISTERED_MARKER = ".lance-deregistered"
PK_KEY = "lance-schema:unenforced-primary-key:position"
#: The ``__manifest`` table's columns, as pylance creates them.
MANIFEST_ARROW = pa.schema([
    pa.field("object_id", pa.string(), nullable=False, metadata={PK_KEY: "0"}),
    pa.field("object_type", pa.string(), nullable=False),
    pa.field("location", pa.string()),
    pa.field("metadata", pa.string()),
    pa.field("base_objects", pa.list_(pa.field("object_id", pa.string()))),
])
#: Re-runs of a manifest change that lost its race to another writer.
MANIFEST_RETRIES = 20


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def manifest_schema() -> Schema:
    schema = Schema.from_arrow(MANIFEST_ARROW)
    schema.fields[0].unenforced_primary_key = True
    return schema


def _ident(request) -> list[str]:
    return list(request.id or [])


class DirectoryNamespace(LanceNamespace):
    """A directory of Lance tables (``root``: a local path or an fsspec URI;
    ``storage.<key>``: storage options; ``manifest_enabled``,
    ``dir_listing_enabled``: as pylance's)."""

    def __init__(self, **properties):
        props = {str(k): str(v) for k, v in properties.items()}
        root = props.get("root")
        if not root:
            raise InvalidInputError("a directory namespace needs a root (property 'root')")
        self.storage_options = {k[len("storage."):]: v for k, v in props.items() if k.startswith("storage.")}
        self.store = ObjectStore(root.rstrip("/") or "/", self.storage_options)
        self.manifest_enabled = _truthy(props.get("manifest_enabled", "true"))
        self.dir_listing = _truthy(props.get("dir_listing_enabled", "true"))

    def namespace_id(self) -> str:
        return f"DirectoryNamespace {{ root: {self.store.root!r} }}"

    def __repr__(self) -> str:
        return f"lance_ops.DirectoryNamespace({self.store.root!r})"

    # ------------------------------------------------------------ locations
    @property
    def root(self) -> str:
        return self.store.root

    def uri_of(self, location: str) -> str:
        """The URI of a location as rows store it (relative to the root)."""
        if "://" in location or location.startswith("/"):
            return location
        return f"{self.store.root.rstrip('/')}/{location}"

    def relative(self, location: str) -> str:
        """``location`` relative to the root (InvalidInputError if outside it)."""
        if "://" not in location and not location.startswith("/"):
            rel = location.strip("/")
        else:
            other = ObjectStore(location, self.storage_options)
            base = self.store.root.rstrip("/") + "/"
            if other.scheme != self.store.scheme or not other.root.startswith(base):
                raise InvalidInputError(
                    f"Absolute paths outside the root are not allowed for register_table: {location} is not "
                    f"under {self.store.root} (the directory namespace keeps its tables under its root, as pylance's)"
                )
            rel = other.root[len(base):]
        if not rel or rel.startswith("..") or "/../" in f"/{rel}/":
            raise InvalidInputError(f"invalid table location {location!r}")
        return rel

    def check_new(self, ident: list[str]) -> None:
        """TableAlreadyExistsError if ``ident`` names a table,
        NamespaceNotFoundError if its namespace does not exist."""
        if len(ident) > 1 and not self.manifest_enabled:
            raise UnsupportedOperationError(
                f"Multi-level table IDs are only supported when manifest mode is enabled, but got: {ident}")
        try:
            self._locate(ident)
        except TableNotFoundError:
            if len(ident) > 1 and self.manifest_enabled:
                self._require_namespace(self.rows(), ident[:-1])
            return
        raise TableAlreadyExistsError(f"Table already exists: {object_id(ident)}")

    def new_location(self, ident: list[str]) -> str:
        """Where a new table ``ident`` goes (relative): ``{name}.lance`` in
        the root namespace, ``{8 hex}_{ns$name}`` below it (pylance's names)."""
        if len(ident) == 1:
            return f"{ident[0]}.lance"
        return f"{uuid.uuid4().hex[:8]}_{object_id(ident)}"

    def _table_store(self, rel: str) -> ObjectStore:
        return ObjectStore(self.uri_of(rel), self.storage_options)

    # ----------------------------------------------------------------- rows
    def _manifest_store(self) -> ObjectStore:
        return ObjectStore(f"{self.store.root.rstrip('/')}/{MANIFEST}", self.storage_options)

    def rows(self) -> list[dict]:
        """The ``__manifest`` rows (none when there is no manifest yet)."""
        if not self.manifest_enabled:
            return []
        return read_rows(latest_or_none(self._manifest_store()))

    def _change(self, change: Callable[[list[dict]], list[dict] | None]) -> None:
        """Apply ``change`` (rows -> new rows, or None: nothing to do; it may
        raise) to the manifest and commit it, redone on the latest rows when
        another writer committed first."""
        if not self.manifest_enabled:
            raise UnsupportedOperationError("this operation needs manifest mode (manifest_enabled=true)")
        store = self._manifest_store()
        commit_rows(store, change)

    def _row(self, rows: list[dict], oid: str, kind: str | None = None) -> dict | None:
        for r in rows:
            if r["object_id"] == oid and (kind is None or r["object_type"] == kind):
                return r
        return None

    def _namespace_exists(self, rows, ident: list[str]) -> bool:
        return not ident or self._row(rows, object_id(ident), NAMESPACE) is not None

    def _require_namespace(self, rows, ident: list[str]) -> None:
        if not self._namespace_exists(rows, ident):
            raise NamespaceNotFoundError(f"Namespace not found: {object_id(ident)}")

    # ------------------------------------------------------ directory listing
    def _by_listing(self, ident: list[str]) -> bool:
        """Whether table ``ident`` is found by listing (a root table while
        directory listing is on, or any table without a manifest)."""
        return (self.dir_listing and len(ident) == 1) or not self.manifest_enabled

    def _listed(self) -> dict[str, str]:
        """Root-namespace tables found by listing: name -> relative location
        (``{name}.lance`` directories holding a table, without a
        deregistration marker)."""
        out = {}
        for name in _child_dirs(self.store):
            if not name.endswith(".lance"):
                continue
            table = name[: -len(".lance")]
            sub = self._table_store(name)
            if not table or sub.exists(DEREGISTERED_MARKER) or not TableLog(sub).exists():
                continue
            out[table] = name
        return out

    # ------------------------------------------------------------- namespaces
    def list_namespaces(self, request: ListNamespacesRequest) -> ListNamespacesResponse:
        parent = _ident(request)
        rows = self.rows()
        self._require_namespace(rows, parent)
        prefix = object_id(parent) + "$" if parent else ""
        names = sorted(
            r["object_id"][len(prefix):] for r in rows
            if r["object_type"] == NAMESPACE and r["object_id"].startswith(prefix)
            and "$" not in r["object_id"][len(prefix):]
        )
        return ListNamespacesResponse(namespaces=_limit(names, request.limit))

    def describe_namespace(self, request: DescribeNamespaceRequest) -> DescribeNamespaceResponse:
        ident = _ident(request)
        if not ident:
            return DescribeNamespaceResponse(properties={})
        row = self._row(self.rows(), object_id(ident), NAMESPACE)
        if row is None:
            raise NamespaceNotFoundError(f"Namespace not found: {object_id(ident)}")
        return DescribeNamespaceResponse(properties=json.loads(row["metadata"]) if row["metadata"] else None)

    def namespace_exists(self, request: NamespaceExistsRequest) -> NamespaceExistsResponse:
        self._require_namespace(self.rows(), _ident(request))
        return NamespaceExistsResponse()

    def create_namespace(self, request: CreateNamespaceRequest) -> CreateNamespaceResponse:
        ident = _ident(request)
        if not ident:
            raise NamespaceAlreadyExistsError("Namespace already exists: the root namespace")
        for p in ident:
            _check(p)
        if not self.manifest_enabled:
            raise UnsupportedOperationError("Child namespaces are only supported when manifest mode is enabled")
        exist_ok = str(request.mode or "").lower() in ("exist_ok", "existok", "exist-ok")
        props = dict(request.properties or {})

        def change(rows):
            self._require_namespace(rows, ident[:-1])
            oid = object_id(ident)
            if self._row(rows, oid) is not None:
                if exist_ok and self._row(rows, oid, NAMESPACE) is not None:
                    return None
                raise NamespaceAlreadyExistsError(f"Namespace already exists: {oid}")
            meta = json.dumps(props, separators=(",", ":")) if props else None
            return rows + [_new_row(oid, NAMESPACE, None, meta)]

        self._change(change)
        return CreateNamespaceResponse(properties=props or None)

    def drop_namespace(self, request: DropNamespaceRequest) -> DropNamespaceResponse:
        ident = _ident(request)
        if not ident:
            raise InvalidInputError("the root namespace cannot be dropped")

        def change(rows):
            oid = object_id(ident)
            if self._row(rows, oid, NAMESPACE) is None:
                raise NamespaceNotFoundError(f"Namespace not found: {oid}")
            children = [r for r in rows if r["object_id"].startswith(oid + "$")]
            if children:
                raise NamespaceNotEmptyError(f"Namespace not empty: '{oid}' (contains {len(children)} child objects)")
            return [r for r in rows if r["object_id"] != oid]

        self._change(change)
        return DropNamespaceResponse()

    # ---------------------------------------------------------------- tables
    def list_tables(self, request: ListTablesRequest) -> ListTablesResponse:
        ns = _ident(request)
        rows = self.rows()
        self._require_namespace(rows, ns)
        if not ns and self._by_listing(["_"]):
            return ListTablesResponse(tables=_limit(sorted(self._listed()), request.limit))
        prefix = object_id(ns) + "$" if ns else ""
        names = {
            r["object_id"][len(prefix):] for r in rows
            if r["object_type"] == TABLE and r["object_id"].startswith(prefix)
            and "$" not in r["object_id"][len(prefix):]
            and (request.include_declared is not False or not self._declared_only(r["location"]))
        }
        return ListTablesResponse(tables=_limit(sorted(names), request.limit))

    def _declared_only(self, location: str | None) -> bool:
        return bool(location) and not TableLog(self._table_store(location)).exists()

    def _locate(self, ident: list[str]) -> tuple[str, bool]:
        """(relative location, has a manifest row) of table ``ident``."""
        if not ident:
            raise InvalidInputError("a table identifier has at least one part")
        if self._by_listing(ident):
            listed = self._listed() if len(ident) == 1 else {}
            if ident[0] in listed:
                return listed[ident[0]], False
            raise TableNotFoundError(f"Table not found: {object_id(ident)}")
        rows = self.rows()
        row = self._row(rows, object_id(ident), TABLE)
        if row is not None:
            return row["location"], True
        if not self._namespace_exists(rows, ident[:-1]):
            raise NamespaceNotFoundError(f"Namespace not found: {object_id(ident[:-1])}")
        raise TableNotFoundError(f"Table not found: {object_id(ident)}")

    def describe_table(self, request: DescribeTableRequest) -> DescribeTableResponse:
        ident = _ident(request)
        rel, _ = self._locate(ident)
        uri = self.uri_of(rel)
        declared = self._declared_only(rel) if request.check_declared else None
        return DescribeTableResponse(table=ident[-1], namespace=ident[:-1], location=uri, table_uri=uri,
                                     storage_options=self.storage_options or None, is_only_declared=declared)

    def table_exists(self, request: TableExistsRequest) -> TableExistsResponse:
        self._locate(_ident(request))
        return TableExistsResponse()

    def register_table(self, request: RegisterTableRequest) -> RegisterTableResponse:
        ident = _ident(request)
        for p in ident:
            _check(p)
        rel = self.relative(request.location)
        if self._by_listing(ident) and ident[0] in self._listed():
            raise TableAlreadyExistsError(f"Table already exists: {object_id(ident)}")
        self._insert_table(ident, rel, replace_marker=True)
        return RegisterTableResponse(location=rel)

    def record_table(self, ident: list[str], location: str) -> None:
        """Record a table just written at ``location`` (from
        :meth:`new_location`) under ``ident`` -- what ``create_table`` does
        after writing, for tables another writer (Spark) wrote."""
        self._insert_table(ident, self.relative(location), replace_marker=True)

    def _insert_table(self, ident: list[str], rel: str, replace_marker: bool = False) -> None:
        if self._by_listing(ident):
            if rel != f"{ident[0]}.lance":
                raise InvalidInputError(
                    f"a table of the root namespace is its directory: {ident[0]!r} must be at "
                    f"{ident[0]}.lance, not {rel!r} (pylance finds root tables by listing)"
                )
            sub = self._table_store(rel)
            if replace_marker and sub.exists(DEREGISTERED_MARKER):
                sub.delete(DEREGISTERED_MARKER)
        if not self.manifest_enabled:
            return

        def change(rows):
            self._require_namespace(rows, ident[:-1])
            oid = object_id(ident)
            if self._row(rows, oid) is not None:
                if self._by_listing(ident):
                    return None  # (a root table's row is only pylance's record of it)
                raise TableAlreadyExistsError(f"Table already exists: {object_id(ident)}")
            return rows + [_new_row(oid, TABLE, rel, None)]

        self._change(change)

    def declare_table(self, request: DeclareTableRequest) -> DeclareTableResponse:
        ident = _ident(request)
        for p in ident:
            _check(p)
        rel = self.relative(request.location) if request.location else self.new_location(ident)
        store = self._table_store(rel)
        if TableLog(store).exists():
            raise TableAlreadyExistsError(f"Table already exists: a Lance table is at {store.root}")
        store.write_bytes(RESERVED_MARKER, b"")
        try:
            self._insert_table(ident, rel)
        except BaseException:
            store.delete(RESERVED_MARKER)
            store.remove_empty_dirs("")
            raise
        return DeclareTableResponse(location=self.uri_of(rel), storage_options=self.storage_options or None)

    def create_table(self, request: CreateTableRequest, request_data: bytes) -> CreateTableResponse:
        """Create table ``id`` from Arrow IPC stream data (a Lance table of its
        rows, written with lance_ops' own writer), then register it."""
        ident = _ident(request)
        for p in ident:
            _check(p)
        self.check_new(ident)
        rel = self.new_location(ident)
        reader = pa.ipc.open_stream(request_data)
        store = self._table_store(rel)
        info = write_new_table(store, Schema.from_arrow(reader.schema), list(reader))
        try:
            self._insert_table(ident, rel)
        except BaseException:
            purge(store)
            raise
        return CreateTableResponse(location=self.uri_of(rel), version=info)

    def deregister_table(self, request: DeregisterTableRequest) -> DeregisterTableResponse:
        ident = _ident(request)
        rel = self._remove_row(ident, deregister=True)
        return DeregisterTableResponse(id=ident, location=self.uri_of(rel))

    def drop_table(self, request: DropTableRequest) -> DropTableResponse:
        """Deregister table ``id`` and delete its files."""
        ident = _ident(request)
        rel = self._remove_row(ident, deregister=False)
        purge(self._table_store(rel))
        return DropTableResponse(id=ident, location=self.uri_of(rel))

    def _remove_row(self, ident: list[str], deregister: bool) -> str:
        if self._by_listing(ident):
            rel, _ = self._locate(ident)
            if deregister:
                self._table_store(rel).write_bytes(DEREGISTERED_MARKER, b"")
            if self.manifest_enabled:
                oid = object_id(ident)
                self._change(lambda rows: [r for r in rows if r["object_id"] != oid]
                             if self._row(rows, oid) is not None else None)
            return rel
        found: dict = {}

        def change(rows):
            oid = object_id(ident)
            row = self._row(rows, oid, TABLE)
            if row is None:
                if not self._namespace_exists(rows, ident[:-1]):
                    raise NamespaceNotFoundError(f"Namespace not found: {object_id(ident[:-1])}")
                raise TableNotFoundError(f"Table not found: {oid}")
            found["rel"] = row["location"]
            return [r for r in rows if r is not row]

        self._change(change)
        return found["rel"]

    def rename_table(self, request: RenameTableRequest) -> RenameTableResponse:
        """Rename table ``id`` to ``new_table_name`` (in ``new_namespace_id``,
        default: its own namespace). Only the row changes: the files stay."""
        ident = _ident(request)
        new_ns = list(request.new_namespace_id) if request.new_namespace_id is not None else ident[:-1]
        new = [*new_ns, request.new_table_name]
        for p in new:
            _check(p)

        if self._by_listing(ident) or self._by_listing(new):
            raise UnsupportedOperationError(
                "a table of the root namespace is named by its directory ({name}.lance): it cannot be renamed "
                "into or out of the root namespace; keep tables to rename in a namespace"
            )

        def change(rows):
            oid, new_oid = object_id(ident), object_id(new)
            self._require_namespace(rows, new_ns)
            if self._row(rows, new_oid) is not None:
                raise TableAlreadyExistsError(f"Table already exists: {new_oid}")
            row = self._row(rows, oid, TABLE)
            if row is None:
                raise TableNotFoundError(f"Table not found: {oid}")
            return [r for r in rows if r is not row] + [{**row, "object_id": new_oid}]

        self._change(change)
        return RenameTableResponse()


def _check(part: str) -> None:
    try:
        check_part(part)
    except ValueError as e:
        raise InvalidInputError(str(e)) from None


def _limit(names: list[str], limit) -> list[str]:
    return names[: int(limit)] if limit else names


def _new_row(oid: str, kind: str, location: str | None, metadata: str | None) -> dict:
    return {"object_id": oid, "object_type": kind, "location": location, "metadata": metadata, "base_objects": None}


def _child_dirs(store: ObjectStore) -> list[str]:
    try:
        entries = store.fs.ls(store.path(), detail=True)
    except FileNotFoundError:
        return []
    return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")


# ------------------------------------------------------------ table layer
def read_rows(snap: Snapshot | None) -> list[dict]:
    """Every live row of a (small) table version as dicts."""
    if snap is None:
        return []
    names = snap.schema.names
    out: list[dict] = []
    for frag in snap.fragments:
        for batch in scan_fragment(snap.store, snap.schema, FragmentScan(frag, names)):
            out.extend(batch.to_pylist())
    return out


def _batch(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{f.name: r.get(f.name) for f in MANIFEST_ARROW} for r in rows], schema=MANIFEST_ARROW
    )


def commit_rows(store: ObjectStore, change: Callable[[list[dict]], list[dict] | None]) -> None:
    """Replace the rows of the manifest table at ``store`` by ``change(rows)``
    in one Overwrite that commits only on the version the rows were read from."""

    def prepare(snap: Snapshot | None) -> StagedCommit | None:
        new_rows = change(read_rows(snap))
        if new_rows is None:
            return None
        schema = snap.schema if snap is not None else manifest_schema()
        version = snap.data_format_version if snap is not None else "2.2"
        frags = _write_fragments(store, schema, version, [_batch(new_rows)] if new_rows else [])
        read = snap.version if snap is not None else 0

        def unchanged(ctx) -> None:
            base = ctx.base.version if ctx.base is not None else 0
            if base != read:
                err = CommitConflictError(
                    f"{store.root} changed (version {base}) since its rows were read (version {read})",
                    retryable=True, conflicting_version=base,
                )
                err.prepare_again = True
                raise err

        return StagedCommit(Overwrite(frags, schema), {}, {"mode": "overwrite"}, checks=[unchanged])

    execute(store, latest_or_none(store), prepare,
            WriteOptions(retries=MANIFEST_RETRIES, new_table=NewTable(stable_row_ids=False, data_format="2.2")))


def _write_fragments(store: ObjectStore, schema: Schema, file_version: str, batches) -> list:
    sink = FragmentSink(store, schema, file_version)
    out = []
    try:
        for b in batches:
            out.extend(sink.write(b))
        out.extend(sink.finish())
    except BaseException:
        sink.abort()
        raise
    return out


def write_new_table(store: ObjectStore, schema: Schema, batches, stable_row_ids: bool = True) -> int:
    """Create a table of ``batches`` at ``store`` (which must hold none);
    returns its version."""
    def must_be_new(ctx) -> None:
        if ctx.base is not None:
            raise TableAlreadyExistsError(f"Table already exists: a Lance table is at {store.root}")

    def prepare(snap):
        if snap is not None:
            raise TableAlreadyExistsError(f"Table already exists: a Lance table is at {store.root}")
        return StagedCommit(Overwrite(_write_fragments(store, schema, "2.2", batches), schema), {}, {"mode": "create"})

    info = execute(store, latest_or_none(store), prepare,
                   WriteOptions(checks=[must_be_new], new_table=NewTable(stable_row_ids=stable_row_ids)))
    return int(info.version)


def purge(store: ObjectStore) -> None:
    """Delete every file of the table at ``store`` (and its directory)."""
    for rel, _info in list(store.walk_files("")):
        store.delete(rel)
    if store.is_local:
        import shutil

        shutil.rmtree(store.path(), ignore_errors=True)


__all__ = ["DirectoryNamespace", "MANIFEST", "read_rows", "commit_rows", "write_new_table", "purge", "manifest_schema"]
