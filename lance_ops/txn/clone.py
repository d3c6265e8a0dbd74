"""Shallow clones: a new table that reads another table's files in place.

``clone`` writes, as pylance's ``shallow_clone`` does, one manifest at the
target whose content is the source version's: the source's root becomes a
base path of the clone (the next free id; named after the source branch
when the source is a branch; ``is_dataset_root``), every file of the
source's own root -- data files, deletion files, indices -- points at it
(``base_id``), files the source itself reached through base paths keep
theirs, and the transaction is a ``Clone`` (shallow, ``ref_version``,
``ref_path``, ``ref_name`` = the source branch). The clone's first version
has the source version's number (pylance's numbering; Delta starts a clone at
version 0). Nothing is written under the source: it is only read.

The clone is a table of its own: writes to it put new files under its own
root, vacuum of the clone never removes the source's files (they are not
under its root). As with Delta's shallow clones, vacuuming the *source*
does not know the clone: once the source removes a version's files the clone
can no longer read them -- keep the source's retention longer than the
clone's life, or tag the cloned version in the source.
"""
from __future__ import annotations

from ..errors import TableExistsError
from ..format.manifest import encode_manifest_file
from ..format.naming import TRANSACTIONS_DIR
from ..format.proto import transaction_pb2
from ..storage.objectstore import ObjectStore
from ..storage.resolve import commit_handler
from .branches import branch_manifest
from .log import Snapshot, latest_or_none
from .operations import Clone, Transaction
from .refs import locate


def shallow_clone(source: Snapshot, target: ObjectStore, properties: dict | None = None) -> int:
    """Create a shallow clone of ``source`` at ``target`` (which must hold no
    table: TableExistsError); ``properties`` are set as table config keys of
    the clone. Returns the clone's version."""
    if latest_or_none(target) is not None:
        raise TableExistsError(f"a Lance table already exists at {target.root}; clone to a new location")
    branch = locate(source.store)[1]
    clone = transaction_pb2.Transaction.Clone(
        is_shallow=True, ref_version=source.version, ref_path=source.store.root
    )
    if branch is not None:
        clone.ref_name = branch
    txn = Transaction(source.version, Clone(clone))
    manifest, indices = branch_manifest(source, "", branch, txn)
    manifest.ClearField("branch")
    for k, v in (properties or {}).items():
        manifest.config[str(k)] = str(v)
    txn_bytes = txn.to_bytes()
    target.write_bytes(f"{TRANSACTIONS_DIR}/{txn.file_name}", txn_bytes)
    data = encode_manifest_file(manifest, txn_bytes, indices, source.file.dictionaries)
    if commit_handler(target).commit(source.version, source.naming, data) is None:
        raise TableExistsError(f"a Lance table was created at {target.root} while cloning into it")
    return source.version


__all__ = ["shallow_clone"]
