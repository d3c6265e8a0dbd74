"""Where a table's files are: its own root, or a base path.

A manifest's ``base_paths`` list other roots the table reads files from: a
shallow clone reads its source's data files, a branch its parent's (and its
ancestors'). A data file, deletion file or index with ``base_id`` set lives
under that base path (``HasField`` matters: base id 0 is a valid id):

* a base path with ``is_dataset_root`` is another table's root: data files
  are under ``{base}/data/``, deletion files ``{base}/_deletions/``, indices
  ``{base}/_indices/`` (pylance's ``data_file_dir`` / ``dataset_dir_for_
  deletion`` / ``indice_files_dir``);
* otherwise it is a bare directory holding the data files themselves (and
  index directories); deletion files cannot live there.

Files without ``base_id`` are under the table's own root. Writers put every
new file under their own root: a base path is only ever read.

The store carries the base paths of the version it was opened at, already
resolved to root URIs (``store.bases``: id -> (URI, is_dataset_root); see
:mod:`lance_ops.txn.bases`); the functions here turn a file message into
(store, path relative to that store).
"""
from __future__ import annotations

from ..errors import CorruptTableError
from .naming import DATA_DIR, INDICES_DIR, deletion_file_path
from .paths import check_relative


def base_store(store, base_id: int, what: str):
    """The store rooted at base path ``base_id`` of ``store``'s table, and
    whether that base is a dataset root."""
    bases = getattr(store, "bases", None) or {}
    found = bases.get(int(base_id))
    if found is None:
        raise CorruptTableError(
            f"{what} names base path id {base_id}, which the table's manifest does not list "
            f"(known ids: {sorted(bases) or 'none'})",
            store.root,
        )
    uri, is_root = found
    cache = store.__dict__.setdefault("_base_stores", {})
    sub = cache.get(uri)
    if sub is None:
        sub = type(store)(uri, store.storage_options)
        cache[uri] = sub
    return sub, is_root


def data_file_location(store, data_file) -> tuple[object, str]:
    """(store, path relative to it) of a ``DataFile``; a path reaching
    outside its root is CorruptTableError (:mod:`.paths`)."""
    check_relative(data_file.path, "data file", store.root)
    if data_file.HasField("base_id"):
        sub, is_root = base_store(store, data_file.base_id, f"data file {data_file.path}")
        return sub, (f"{DATA_DIR}/{data_file.path}" if is_root else data_file.path)
    return store, f"{DATA_DIR}/{data_file.path}"


def deletion_file_location(store, fragment) -> tuple[object, str]:
    """(store, path relative to it) of a fragment's deletion file."""
    df = fragment.deletion_file
    rel = deletion_file_path(fragment.id, df.read_version, df.id, df.file_type == 1)
    if df.HasField("base_id"):
        sub, is_root = base_store(store, df.base_id, f"the deletion file of fragment {fragment.id}")
        if not is_root:
            raise CorruptTableError(
                f"the deletion file of fragment {fragment.id} names base path id {df.base_id}, "
                "which is not a dataset root",
                store.root,
            )
        return sub, rel
    return store, rel


def index_location(store, index) -> tuple[object, str]:
    """(store, directory relative to it) of an index's files."""
    import uuid

    name = str(uuid.UUID(bytes=bytes(index.uuid.uuid)))
    if index.HasField("base_id"):
        sub, is_root = base_store(store, index.base_id, f"index {index.name}")
        return sub, (f"{INDICES_DIR}/{name}" if is_root else name)
    return store, f"{INDICES_DIR}/{name}"
