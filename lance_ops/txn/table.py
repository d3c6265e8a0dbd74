"""``Table``: the Spark-free core of a Lance table handle.

Everything that needs no data processing -- opening a version, history,
detail, tags, restore, vacuum, table properties -- works here without a Spark
session, for Airflow sensors, CLIs and notebooks that only look.
:class:`lance_ops.LanceTable` wraps one ``Table`` (``LanceTable.table``) and
adds the operations Spark runs.

A handle opened without a version (or tag) *follows the table*, as a Delta
``DeltaTable`` does: every read and every write starts from the latest version
at the time of the call (:attr:`Table.snapshot`); writes landing while an
operation runs are rebased over as usual, and the version an operation read
is its ``readVersion``. A handle opened at a version or tag is a pinned,
read-only time-travel view.

Every write, here and in ``LanceTable``, goes through :meth:`Table.execute`:
the staged-commit pipeline (:mod:`.pipeline`) with this handle's pre-commit
checks and conflict-retry budget.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from ..errors import InvalidArgumentError, ReadOnlyVersionError, TableNotFoundError
from ..results import CommitInfo
from ..storage.objectstore import ObjectStore
from .commit import Check, NewTable
from .constraints import CONSTRAINT_PREFIX, constraints_of
from .history import detail, first_version, history_rows
from .idempotence import TxnId, watermark
from .log import Snapshot, TableLog, open_snapshot
from .operations import UpdateConfig
from .pipeline import DEFAULT_CONFLICT_RETRIES, StagedCommit, WriteOptions, execute
from .refs import (
    branch_file,
    branch_store,
    delete_tag,
    list_branches,
    list_tags,
    locate,
    resolve_ref,
    resolve_version,
    tag_versions,
)
from .versions import create_tag


class Table:
    """A Lance table at ``uri`` (a local path or fsspec URI), read at
    ``version`` (a number or tag name; None: the latest, followed) of
    ``branch`` (None or "main": the main branch; a tag names its own branch).
    A handle opened at a version is a read-only time-travel view."""

    def __init__(self, uri: str, storage_options: dict | None = None, version: int | str | None = None,
                 *, branch: str | None = None, conflictRetries: int = DEFAULT_CONFLICT_RETRIES):
        opened = ObjectStore(uri, storage_options)
        # ``uri`` may be a branch's own directory (``{root}/tree/{name}``)
        root, here = locate(opened)
        if branch is None and here is not None:
            branch = here
        branch, number = resolve_ref(root, branch, version)
        #: The table's main root (tags and branch files live there).
        self.root = root
        #: The branch this handle reads (None: main).
        self.branch = branch
        self.store = opened if branch == here else branch_store(root, branch)
        if branch is not None and branch != here and not root.exists(branch_file(branch)):
            raise TableNotFoundError(f"branch {branch!r} does not exist in {root.root}")
        self.pinned = version is not None
        self._snapshot: Snapshot = open_snapshot(self.store, number)
        #: Re-runs allowed on retryable conflicts.
        self.conflictRetries = int(conflictRetries)
        #: Pre-commit checks run by every write of this handle (after every
        #: rebase too): ``check(CheckContext)`` raises to stop a commit.
        self.checks: list[Check] = []
        #: CommitInfo of the last write through this handle.
        self.lastCommit: CommitInfo | None = None

    @classmethod
    def exists(cls, uri: str, storage_options: dict | None = None) -> bool:
        """Whether ``uri`` holds a Lance table. Only "no table here" answers
        False; a damaged or unreachable table raises."""
        try:
            return TableLog(ObjectStore(uri, storage_options)).exists()
        except (TableNotFoundError, FileNotFoundError):
            return False

    # ----------------------------------------------------------------- state
    @property
    def snapshot(self) -> Snapshot:
        """The version this handle reads now: a time-travel handle's own; for
        any other, the latest at the time of the call (one question to the
        commit handler; a version already read is not fetched again). An
        operation takes it once and works on that snapshot throughout."""
        if not self.pinned:
            self._snapshot = open_snapshot(self.store, None)
        return self._snapshot

    @snapshot.setter
    def snapshot(self, snap: Snapshot) -> None:
        self._snapshot = snap

    @property
    def uri(self) -> str:
        return self.store.root

    @property
    def version(self) -> int:
        return self.snapshot.version

    @property
    def schema(self):
        """The table's columns as a pyarrow schema."""
        return self.snapshot.schema.to_arrow()

    def count(self) -> int:
        """Live rows (physical minus deleted), from metadata only."""
        return self.snapshot.num_rows()

    def refresh(self) -> "Table":
        """Read the latest version of this handle's branch now (a handle that
        follows the table does so on every call anyway; refused on
        time-travel handles)."""
        self.writable()
        self._snapshot = open_snapshot(self.store, None)
        return self

    def history(self, limit: int | None = None) -> list[dict]:
        """One dict per version, newest first: version, timestamp, operation,
        readVersion, operationParameters, operationMetrics, userMetadata,
        writer, transactionUuid. A time-travel handle sees its version and
        older."""
        return history_rows(self.store, limit, upto=self._snapshot.version if self.pinned else None)

    def detail(self) -> dict[str, Any]:
        """The version's metadata as a dict: location, version, timestamp,
        createdAt, id, numFiles, sizeInBytes, numFragments, numRows,
        numDeletedRows, feature flags, dataFormatVersion, nextRowId,
        maxFragmentId, numIndices, config, schema (fields with ids), branch
        (``LanceTable.detail()`` is the same as Delta's one-row DataFrame)."""
        out = detail(self.snapshot)
        out.update(first_version(self.store))
        out["branch"] = self.branch
        return out

    def txnVersion(self, txnAppId: str) -> int | None:
        """The last ``txnVersion`` committed for ``txnAppId`` (None: none),
        as of this handle's version."""
        return watermark(self.snapshot.manifest.config, txnAppId)

    def properties(self) -> dict[str, str]:
        """The table config (pylance's ``ds.config()``)."""
        return dict(self.snapshot.manifest.config)

    def fragments(self) -> list[dict]:
        """One dict per fragment of this version, from metadata only (the
        health of a table): id, physicalRows, deletedRows, liveRows,
        deletedRatio, dataFiles (each file's path, size, format version and
        tombstoned field slots), numDataFiles, sizeInBytes,
        dataFileVersions (distinct "major.minor"), tombstonedFields (field
        slots replaced by -2, i.e. data left behind by rewriteColumns),
        hasDeletionFile."""
        out = []
        for f in self.snapshot.fragments:
            deleted = f.deletion_file.num_deleted_rows if f.HasField("deletion_file") else 0
            files = [
                {"path": df.path, "sizeInBytes": int(df.file_size_bytes),
                 "version": f"{df.file_major_version}.{df.file_minor_version}",
                 "tombstonedFields": sum(1 for x in df.fields if x == -2)}
                for df in f.files
            ]
            out.append({
                "id": int(f.id),
                "physicalRows": int(f.physical_rows),
                "deletedRows": int(deleted),
                "liveRows": int(f.physical_rows - deleted),
                "deletedRatio": (deleted / f.physical_rows) if f.physical_rows else 0.0,
                "dataFiles": files,
                "numDataFiles": len(files),
                "sizeInBytes": sum(x["sizeInBytes"] for x in files),
                "dataFileVersions": sorted({x["version"] for x in files}),
                "tombstonedFields": sum(x["tombstonedFields"] for x in files),
                "hasDeletionFile": f.HasField("deletion_file"),
            })
        return out

    # ------------------------------------------------------------------ tags
    def listTags(self, details: bool = False) -> dict:
        """Tag name -> version of the tags of this handle's branch
        (``details=True``: every tag of the table, name -> the tag file's
        content, whose ``branch`` says which branch it names)."""
        return list_tags(self.store) if details else tag_versions(self.store)

    def createTag(self, name: str, version: int | str | None = None) -> None:
        """Name a version of this handle's branch (default: this handle's).
        Commits no version, so it also works on time-travel handles."""
        create_tag(self.store, name, self.version if version is None else version)

    def deleteTag(self, name: str) -> None:
        delete_tag(self.store, name)

    # -------------------------------------------------------------- branches
    def createBranch(self, name: str, version: int | str | None = None) -> "Table":
        """Fork branch ``name`` from a version of this handle's branch
        (default: this handle's version; a tag of this branch works too), in
        pylance's layout; returns a handle on the new branch."""
        from .branches import create_branch

        source = self.snapshot if version is None else open_snapshot(self.store, resolve_version(self.store, version))
        create_branch(source, name)
        return Table(self.root.uri, self.root.storage_options, branch=name, conflictRetries=self.conflictRetries)

    def listBranches(self) -> dict[str, dict]:
        """Branch name -> {"parentBranch", "parentVersion", "createdAt",
        "metadata"} (main is not listed)."""
        from .branches import branch_info

        return {name: branch_info(doc) for name, doc in list_branches(self.root).items()}

    def deleteBranch(self, name: str) -> None:
        """Delete a branch and its own files (refused while another branch
        forked from it or a tag names one of its versions)."""
        from .branches import delete_branch

        if name == self.branch:
            raise InvalidArgumentError(f"cannot delete branch {name!r} through a handle on it")
        delete_branch(self.root, name)

    # ---------------------------------------------------------------- clones
    def clone(self, target: str, version: int | str | None = None, properties: dict | None = None,
              storage_options: dict | None = None) -> "Table":
        """Shallow-clone a version of this handle's branch (default: this
        handle's; a number or a tag) to a new table at ``target`` that reads
        this table's files in place (pylance's ``shallow_clone``); returns a
        handle on the clone. ``storage_options`` default to this table's.
        See :mod:`.clone`."""
        from .clone import shallow_clone

        source = self.snapshot if version is None else open_snapshot(self.store, resolve_version(self.store, version))
        options = self.store.storage_options if storage_options is None else storage_options
        shallow_clone(source, ObjectStore(target, options), properties)
        return Table(target, options, conflictRetries=self.conflictRetries)

    # ---------------------------------------------------------------- writes
    def writable(self) -> None:
        if self.pinned:
            raise ReadOnlyVersionError(
                f"this handle reads version {self.version} (time travel) and is read-only; open the "
                "table without a version to write"
            )

    def execute(self, prepare: Callable[[Snapshot | None], StagedCommit | None], *,
                commitProperties: dict | None = None, checks=(), new_table: NewTable | None = None,
                start: Snapshot | None = None, operation: str | None = None,
                txnAppId: str | None = None, txnVersion: int | None = None) -> CommitInfo:
        """Run one write through the staged-commit pipeline, starting from
        ``start`` (the snapshot the caller planned on; default: the latest).
        ``operation`` is the history's name for it (Delta's word: "DELETE",
        "MERGE", ...; :mod:`.history`). ``txnAppId`` / ``txnVersion``: an
        idempotent write, skipped (nothing committed, ``CommitInfo.skipped``
        says why) when the table already holds that version of that app
        (:mod:`lance_ops.txn.idempotence`)."""
        self.writable()
        options = WriteOptions(
            checks=[*self.checks, *checks], commit_properties=commitProperties, retries=self.conflictRetries,
            new_table=new_table, operation=operation, txn=TxnId.of(txnAppId, txnVersion),
        )
        info = execute(self.store, start if start is not None else self.snapshot, prepare, options)
        if info.version is not None:
            self._snapshot = open_snapshot(self.store, info.version)
        self.lastCommit = info
        return info

    def resolveCommit(self, transactionUuid: str, version: int | None = None) -> int | None:
        """The version that committed transaction ``transactionUuid``, or None
        if none did: how a :class:`~lance_ops.errors.CommitOutcomeUnknownError`
        is settled once the store answers again (pass the error's
        ``transaction_uuid`` and ``version``; without ``version`` every
        version of this branch is searched)."""
        from .commit import find_commit

        return find_commit(self.store, transactionUuid, version)

    def restoreToVersion(self, version: int | str, commitProperties: dict | None = None) -> CommitInfo:
        """Commit a new version whose content is ``version``'s (a number or a
        tag). Later versions stay in the history; row and fragment ids issued
        since are never reused (as pylance 14)."""
        from .restore import stage_restore

        self.writable()
        start = self.snapshot
        staged = stage_restore(self.store, start, version)  # a bad version fails before any commit
        return self.execute(lambda snap: staged, commitProperties=commitProperties, start=start, operation="RESTORE")

    def setProperties(self, properties: dict, commitProperties: dict | None = None) -> CommitInfo:
        """Set table config keys (an ``UpdateConfig`` commit, read back by
        pylance's ``ds.config()``)."""
        if not isinstance(properties, dict) or not properties:
            raise InvalidArgumentError("setProperties needs a non-empty dict of str -> str")
        updates = {str(k): str(v) for k, v in properties.items()}
        _no_constraint_keys(updates)
        params = {"properties": json.dumps(updates)}
        return self.execute(lambda snap: StagedCommit(UpdateConfig(config_updates=(updates, False)), {}, params),
                            commitProperties=commitProperties, operation="SET TBLPROPERTIES")

    def unsetProperties(self, keys, commitProperties: dict | None = None, ifExists: bool = True) -> CommitInfo:
        """Remove table config keys (``ifExists=False``: a missing key is an
        error, as Delta's UNSET TBLPROPERTIES without IF EXISTS)."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        if not keys:
            raise InvalidArgumentError("unsetProperties needs at least one key")
        _no_constraint_keys(keys)
        missing = [k for k in keys if k not in self.snapshot.manifest.config]
        if missing and not ifExists:
            raise InvalidArgumentError(f"table properties {missing} are not set")
        updates = {str(k): None for k in keys}
        params = {"properties": json.dumps([str(k) for k in keys]), "ifExists": str(bool(ifExists)).lower()}
        return self.execute(lambda snap: StagedCommit(UpdateConfig(config_updates=(updates, False)), {}, params),
                            commitProperties=commitProperties, operation="UNSET TBLPROPERTIES")

    def constraints(self) -> dict[str, str]:
        """CHECK constraints of this version: name -> Spark SQL expression
        (added with ``LanceTable.addConstraint``)."""
        return constraints_of(self.snapshot.manifest.config)

    def vacuum(self, retentionHours: float = 168, dryRun: bool = False, enforceRetentionDuration: bool = True) -> list[str]:
        """Remove versions committed more than ``retentionHours`` ago and the
        files no kept version (of any branch) references; see
        :mod:`lance_ops.txn.vacuum`. Returns the removed paths (relative to
        the table root, sorted); ``dryRun=True`` only lists them."""
        from .vacuum import vacuum

        self.writable()
        # (a handle following the table keeps the latest: the one vacuum lists)
        return vacuum(self.store, None, retentionHours, dryRun, enforce=enforceRetentionDuration)

    def __repr__(self) -> str:
        on = f", branch={self.branch!r}" if self.branch else ""
        return f"Table({self.uri!r}, version={self.version}{on})"


def _no_constraint_keys(keys) -> None:
    bad = [k for k in keys if str(k).startswith(CONSTRAINT_PREFIX)]
    if bad:
        raise InvalidArgumentError(
            f"{bad}: CHECK constraints are set with addConstraint / dropConstraint (which validate the "
            "table's rows), not as plain properties"
        )
