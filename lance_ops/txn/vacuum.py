"""vacuum(): remove old versions, then every file no remaining version needs.

Metadata work on the driver: listing, reading the manifests of the versions
it keeps, deleting -- plain object-store calls, issued from a small thread
pool. Linear in the number of versions and files: versions older than the
retention are found by a binary search over commit times (which follow
version order) and removed without reading their manifests; the files only
they referenced are unreferenced files older than the retention (a file is
written before the version naming it commits), removed as such. pylance's
cleanup reads every manifest.

Which versions are removed -- pylance's ``cleanup_old_versions(older_than=...)``
rules:

* a version whose manifest ``timestamp`` (commit time, not the file's mtime) is
  older than the retention;
* never the latest version, the handle's own version or anything newer (a
  stale handle never removes what it has not seen);
* never a tagged version (``_refs/tags``, tags of this branch only). pylance
  raises by default when a tagged version falls under the policy; we follow
  Delta's spirit instead: the tag is the user's explicit wish to keep that
  version, so it is silently kept, together with every file it references;
* a version another branch was created from (``parentVersion`` of a branch
  whose parent is this one) keeps its manifest, as pylance 14 keeps it; its
  files are judged like a removed version's (pylance 14 removes its
  transaction file; its data files stay while the branch reads them).

Branches (``tree/{name}/``, pylance's layout) read their parent's files
through base paths. Vacuum reads every version of every *other* branch of the
table (main included when vacuuming a branch) and never removes a file any of
them references, so no branch loses data however old its fork point is. Those
branches' own versions are never removed here: vacuum cleans one branch.

Which files are removed -- every file under the table's managed folders
(``data/``, ``_deletions/``, ``_transactions/``, ``_indices/``, at any depth,
whatever its name or suffix: data, deletion, transaction and index files, and
orphans such as a crashed upload's temporary object or a stray copy) that no
kept version references (an index file counts as referenced when its
directory ``_indices/{uuid}`` is):

* files referenced by a removed version only: always (they were committed, so
  no writer is still producing them);
* files referenced by no version at all (left by a failed or an in-flight
  write): only if their mtime is older than the retention (an unknown mtime
  never counts as old: a file whose age cannot be proven may belong to a
  commit in progress), so a concurrent
  writer's files that are not committed yet survive (a file whose mtime the
  store does not report is never considered old). pylance uses a fixed
  7-day age for these (or deletes them at any age with ``delete_unverified``);
  here the same retention governs versions and unreferenced files, as in
  Delta;
* outside the managed folders only temporary leftovers of interrupted
  writes older than the retention: everything under ``_staging/`` (staged
  manifests of checks that never finished, the journals of failed Spark
  writes), pylance's ``_versions/.tmp*``, ``*.tmp-{hex}`` files of our own
  write-then-rename in ``_versions/``, staged manifests
  ``_versions/{name}.manifest-{uuid}`` of external-store
  commits that lost their race or whose writer died before claiming (a
  committed staged manifest is finished -- copied to its final name -- by
  the listing that precedes this, so it is never a leftover).

Files are listed as a stream (page by page on S3) and judged one at a time.

Everything else stays: ``_refs/``, the version hint, ``tree/`` (branches
are vacuumed on their own), unknown files outside the managed folders
(pylance keeps unknown files everywhere; Delta and Iceberg remove orphans
under the table's data locations, which is what the managed folders are). A manifest
that cannot be decoded aborts vacuum before anything is deleted -- its
references are unknown, and guessing could delete live files.

Like Delta's, vacuum relies on the retention for concurrency: a writer whose
transaction runs longer than the retention, or a restore of a version being
removed at that moment, can lose files.

The retention must be at least :data:`MIN_RETENTION_HOURS` (Delta's
``retentionDurationCheck``): a shorter one can delete files of a commit in
progress or break readers of recent versions. The check is off when the Spark
conf :data:`RETENTION_CHECK_CONF` is ``false`` or the caller passes
``enforce=False``.
"""
from __future__ import annotations

import logging
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ..errors import InvalidArgumentError
from ..format.deletion import deletion_path_of, has_deletion_file
from ..format.features import check_readable, check_writable
from ..format.manifest import ManifestFile
from ..format.naming import (
    DATA_DIR,
    DELETIONS_DIR,
    INDICES_DIR,
    STAGING_DIR,
    TRANSACTIONS_DIR,
    VERSIONS_DIR,
    index_dir,
)
from ..storage.objectstore import FileInfo, ObjectStore
from ..storage.resolve import commit_handler
from .log import TableLog, forget
from .refs import branch_root, dataset_root, list_branches, list_tags

log = logging.getLogger("lance_ops")

#: Delta's default ``deletedFileRetentionDuration`` (7 days), used as the floor.
MIN_RETENTION_HOURS = 168.0
#: Mirrors Delta's ``spark.databricks.delta.retentionDurationCheck.enabled``.
RETENTION_CHECK_CONF = "spark.lance_ops.vacuum.retentionDurationCheck.enabled"
#: Concurrent manifest reads / deletes (object stores serve one key per request).
IO_THREADS = 16


@dataclass
class VacuumPlan:
    """What one vacuum removes; paths are relative to the table root."""

    removed_versions: list[int] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        """Everything removed, manifests included, sorted."""
        return sorted(self.manifests + self.files)


def check_retention(retention_hours: float, enforce: bool) -> None:
    if retention_hours < 0:
        raise InvalidArgumentError(f"retentionHours must be >= 0, got {retention_hours!r}")
    if enforce and retention_hours < MIN_RETENTION_HOURS:
        raise InvalidArgumentError(
            f"retentionHours={retention_hours} is below the safety floor of {MIN_RETENTION_HOURS:g} "
            "hours: files of commits in progress and versions that readers may still use could be "
            f"deleted. If no other process writes or reads this table, set the Spark conf "
            f"{RETENTION_CHECK_CONF}=false or pass enforceRetentionDuration=False."
        )


#: Fragment fields naming row id / lineage files stored outside the manifest
#: (paths relative to the root; pylance 14 writes them inline).
_EXTERNAL_SEQUENCES = ("external_row_ids", "external_created_at_versions", "external_last_updated_at_versions")


def references(mf: ManifestFile, based: bool | None = False) -> set[str]:
    """Paths (relative to the root) of the files one version needs; an index is
    referenced as its directory ``_indices/{uuid}``.

    ``based`` selects by where a file lives: False (the default) the files
    under the version's own root, True the files it reaches through a base path
    (another table's or branch's root, ``base_id`` set), None both."""
    m = mf.manifest

    def wanted(msg) -> bool:
        return based is None or msg.HasField("base_id") == based

    out = set()
    for frag in m.fragments:
        out.update(f"{DATA_DIR}/{f.path}" for f in frag.files if wanted(f))
        if has_deletion_file(frag) and wanted(frag.deletion_file):
            out.add(deletion_path_of(frag.id, frag.deletion_file))
        if based is not True:
            out.update(getattr(frag, ext).path for ext in _EXTERNAL_SEQUENCES if frag.HasField(ext))
    if m.transaction_file and based is not True:
        out.add(f"{TRANSACTIONS_DIR}/{m.transaction_file}")
    out.update(index_dir(i.uuid.uuid) for i in mf.indices if wanted(i))
    return out


def _read_all(tlog: TableLog) -> list[tuple[int, str, ManifestFile]]:
    """(version, manifest path, manifest file) of every version, read
    concurrently."""
    listed = tlog.versions()
    with ThreadPoolExecutor(IO_THREADS) as pool:
        decoded = list(pool.map(tlog.read_manifest, listed))
    return [(loc.version, loc.path, mf) for loc, mf in zip(listed, decoded)]


def other_branch_references(root: ObjectStore, branches: dict[str, dict], this: str | None) -> set[str]:
    """What every version of every branch other than ``this`` (None: main)
    reaches through base paths -- the files of ours they may share. Keyed as
    :func:`references` keys our files: data file names are unique (uuids), so
    a name match is our file whichever spelling of our root a base path uses."""
    out: set[str] = set()
    others = [None] + list(branches) if this else list(branches)
    for name in others:
        if name == this:
            continue
        store = root if name is None else ObjectStore(branch_root(root.root, name), root.storage_options)
        for _v, _naming, mf in _read_all(TableLog(store)):
            out |= references(mf, based=True)
    return out


def _timestamp(mf: ManifestFile) -> float:
    """Commit time in epoch seconds; a manifest without one counts as ancient
    (as in pylance)."""
    ts = mf.manifest.timestamp
    return ts.seconds + ts.nanos / 1e9 if mf.manifest.HasField("timestamp") else 0.0


def _is_leftover(name: str) -> bool:
    """A temporary file of an interrupted write: pylance's ``.tmp*`` commit
    files, ours ``{name}.tmp-{hex}`` (:meth:`ObjectStore.write_bytes`), staged
    manifests ``{name}.manifest-{uuid}`` (external-store commits)."""
    return name.startswith(".tmp") or ".tmp-" in name or ".manifest-" in name


#: The folders whose files only versions give a purpose: every file in them
#: (at any depth, whatever its name or suffix) that no kept version
#: references is an orphan once older than the retention -- a crashed
#: upload's temporary object, a stray copy, a file of a writer that died
#: before committing -- as Delta's VACUUM and Iceberg's
#: ``remove_orphan_files`` judge files. Nothing outside them is touched.
MANAGED_DIRS = (DATA_DIR, DELETIONS_DIR, TRANSACTIONS_DIR, INDICES_DIR)


def _candidates(store: ObjectStore) -> Iterator[tuple[str, FileInfo, str | None]]:
    """(path, info, reference key) of every file vacuum may remove. The key is
    what :func:`references` calls the file (an index file: its directory
    ``_indices/{uuid}``); None for temporary leftovers in ``_versions/`` and
    ``_staging/``, which no version ever references."""
    for directory in MANAGED_DIRS:
        for rel, info in store.walk_files(directory):
            parts = rel.split("/")
            if directory == INDICES_DIR and len(parts) > 2:
                yield rel, info, "/".join(parts[:2])
            else:
                yield rel, info, rel
    # manifests of checks that never finished, and what failed writes left in
    # their journals (_staging/journal/<id>/...: entries, the CLOSED marker)
    for rel, info in store.walk_files(STAGING_DIR):
        yield rel, info, None
    for info in store.list_dir(VERSIONS_DIR):
        if _is_leftover(info.name):
            yield f"{VERSIONS_DIR}/{info.name}", info, None


@dataclass(frozen=True)
class VersionFacts:
    """What the decision needs of one version: its commit time (epoch s),
    manifest path and the files it references (:func:`references`; None when
    the manifest was not read: a version older than the retention, whose
    files are judged by the kept versions' references and their age)."""

    version: int
    timestamp: float
    path: str
    references: frozenset | None


@dataclass(frozen=True)
class Candidate:
    """A file vacuum may remove: path, mtime (0 = unknown) and the key
    versions reference it by (None: a temporary leftover)."""

    path: str
    mtime: float
    key: str | None


def decide(
    versions: list[VersionFacts],
    candidates: Iterable[Candidate],
    *,
    upto: int,
    cutoff: float,
    tagged: set[int] = frozenset(),
    forked: set[int] = frozenset(),
    shared: set[str] = frozenset(),
) -> VacuumPlan:
    """The vacuum decision, a pure function (the rules are the module
    docstring's): versions older than ``cutoff`` below ``upto`` go unless
    tagged (``forked`` ones keep their manifest); a candidate goes when no
    kept version (nor another branch: ``shared``) references it and either a
    removed version did or its mtime is older than ``cutoff``."""
    plan = VacuumPlan()
    kept: set[str] = set(shared)
    removed: set[str] = set()
    for v in versions:
        if v.version < upto and v.version not in tagged and v.timestamp < cutoff:
            removed |= v.references or frozenset()
            if v.version not in forked:
                plan.removed_versions.append(v.version)
                plan.manifests.append(v.path)
        else:
            if v.references is None:
                raise ValueError(f"version {v.version} is kept: its references are needed")
            kept |= v.references
    for c in candidates:
        if c.key not in kept and (c.key in removed or 0 < c.mtime < cutoff):
            plan.files.append(c.path)
    return plan


def _first_recent(tlog: TableLog, listed, cutoff: float, until: int) -> int:
    """The index of the first of ``listed[:until]`` committed at or after
    ``cutoff`` (``until`` if none): a binary search over commit times, which
    follow version order -- O(log n) manifest reads, so vacuum stays linear in
    the number of versions (pylance's cleanup reads every manifest)."""
    lo, hi = 0, until
    while lo < hi:
        mid = (lo + hi) // 2
        if _timestamp(tlog.read_manifest(listed[mid])) < cutoff:
            lo = mid + 1
        else:
            hi = mid
    return lo


def plan_vacuum(store: ObjectStore, upto: int | None, retention_hours: float) -> VacuumPlan:
    """Gather the facts and :func:`decide`. Reads the manifests of the kept
    versions only -- those committed within the retention (found by a binary
    search over commit times), the handle's version and newer, tagged
    versions -- (an unreadable one raises CorruptTableError before anything
    is decided); older versions are removed unread, and the files they alone
    referenced go with every other unreferenced file older than the retention
    (a file is written before the version that names it commits). ``upto`` is
    the handle's version: it and newer versions are kept (None: the latest
    listed -- a handle that follows the table)."""
    cutoff = time.time() - retention_hours * 3600.0
    tlog = TableLog(store)
    listed = tlog.versions()
    if not listed:
        return VacuumPlan()
    if upto is None:
        upto = listed[-1].version
    latest = tlog.read_manifest(listed[-1])
    # vacuum is a write: refused on the latest version's unknown writer flags
    check_writable(latest.manifest, f"at {store.root}")
    this = latest.manifest.branch or None  # vacuum cleans this branch (None: main)
    root = dataset_root(store, this)
    branches = list_branches(root)
    tagged = {int(doc["version"]) for doc in list_tags(root).values() if (doc.get("branch") or None) == this}
    forked = {int(doc["parentVersion"]) for doc in branches.values() if (doc.get("parentBranch") or None) == this}
    below_upto = sum(1 for loc in listed if loc.version < upto)
    first_kept = _first_recent(tlog, listed, cutoff, min(below_upto, len(listed) - 1))
    read = [loc for i, loc in enumerate(listed) if i >= first_kept or loc.version in tagged]
    with ThreadPoolExecutor(IO_THREADS) as pool:
        manifests = dict(zip((loc.version for loc in read), pool.map(tlog.read_manifest, read)))
    facts = []
    for loc in listed:
        mf = manifests.get(loc.version)
        if mf is None:
            facts.append(VersionFacts(loc.version, float("-inf"), loc.path, None))
            continue
        check_readable(mf.manifest, f"at {store.root}")
        facts.append(VersionFacts(loc.version, _timestamp(mf), loc.path, frozenset(references(mf, based=None))))
    return decide(
        facts,
        (Candidate(rel, info.mtime, key) for rel, info, key in _candidates(store)),
        upto=upto,
        cutoff=cutoff,
        tagged=tagged,
        forked=forked,
        shared=other_branch_references(root, branches, this),
    )



def vacuum(store: ObjectStore, version: int | None, retention_hours: float | None, dry_run: bool,
           enforce: bool) -> list[str]:
    """Remove (or with ``dry_run`` only list) what :func:`plan_vacuum` selects
    (``retention_hours=None``: the default, :data:`MIN_RETENTION_HOURS`).

    Manifests go first: if vacuum is interrupted, the files they referenced are
    left unreferenced with old mtimes and the next vacuum removes them, while
    no remaining version ever points at a deleted file.
    """
    if retention_hours is None:
        retention_hours = MIN_RETENTION_HOURS
    check_retention(retention_hours, enforce)
    plan = plan_vacuum(store, version, retention_hours)
    if dry_run:
        return plan.paths
    handler = commit_handler(store)
    for v in plan.removed_versions:
        forget(store, v)
    removals = [lambda v=v, p=p: handler.remove_version(v, p) for v, p in zip(plan.removed_versions, plan.manifests)]
    removals += [lambda f=f: store.delete(f) for f in plan.files]
    if store.is_local:  # an unlink is ~10 us: a thread pool's hand-off costs more than it saves
        for remove in removals:
            remove()
    else:  # object stores: one request per file, concurrent
        with ThreadPoolExecutor(IO_THREADS) as pool:
            list(pool.map(lambda remove: remove(), removals))
    for d in sorted({posixpath.dirname(p) for p in plan.files if p.startswith(STAGING_DIR + "/")}, reverse=True):
        store.remove_empty_dirs(d)  # (local file systems: a failed write's journal directory)
    log.info("vacuum %s: removed %d version(s) and %d file(s)", store.root, len(plan.removed_versions), len(plan.files))
    return plan.paths
