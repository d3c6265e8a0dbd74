"""restoreToVersion(): make an older version (or a tagged one) the latest again.

One ``Restore`` transaction, committed on top of the latest version: the new
version's content is version ``v``'s (fragments with their deletion files, row
ids and lineage, schema, indices, config), while ``max_fragment_id`` and
``next_row_id`` stay at the latest version's high-water marks, as pylance 14
does -- ids handed out by the versions being undone are never reissued. The
versions after ``v`` stay in the history and readable; their files go only
when vacuum removes those versions. A Restore commits over any concurrent
commit (it replaces the content wholesale), so there is nothing to retry.
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .log import Snapshot, open_snapshot
from .operations import Restore
from .pipeline import StagedCommit
from .refs import resolve_version


def _data_files(snapshot: Snapshot) -> dict[str, int]:
    """Data file path -> size in bytes."""
    return {f.path: f.file_size_bytes for frag in snapshot.fragments for f in frag.files}


def restore_metrics(current: Snapshot, target: Snapshot) -> dict:
    """Delta's RESTORE metrics, relative to the version the handle reads."""
    now, then = _data_files(current), _data_files(target)
    removed = now.keys() - then.keys()
    restored = then.keys() - now.keys()
    return {
        "tableSizeAfterRestore": sum(then.values()),
        "numOfFilesAfterRestore": len(then),
        "numRemovedFiles": len(removed),
        "numRestoredFiles": len(restored),
        "removedFilesSize": sum(now[p] for p in removed),
        "restoredFilesSize": sum(then[p] for p in restored),
        "numRowsAfterRestore": target.num_rows(),
    }


def stage_restore(store, snapshot: Snapshot, version: int | str) -> StagedCommit:
    """A Restore of ``version`` (a version number or a tag name), to commit on
    top of the latest version. A missing version or tag raises
    TableNotFoundError before anything is written."""
    if version is None:
        raise InvalidArgumentError("restoreToVersion needs a version number or a tag name")
    target = open_snapshot(store, resolve_version(store, version))
    params = {"version": target.version}
    if str(version) != str(target.version):
        params["tag"] = version
    return StagedCommit(Restore(target.version), restore_metrics(snapshot, target), params)
