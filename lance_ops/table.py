"""``LanceTable``: the Delta-style facade over a Lance table.

A handle reads one version (``t.version``). Writes start from that version,
commit through the conflict-checking commit loop, and move the handle to the
version they created. A handle opened with an explicit ``version`` (or tag)
is a read-only time-travel view. Each method is a thin call into
:mod:`lance_ops.ops`.
"""
from __future__ import annotations

from typing import Any

from .errors import TableNotFoundError
from .ops.common import DEFAULT_CONFLICT_RETRIES
from .results import CommitInfo
from .spark.datasource import register, resolve_snapshot
from .spark.write import refuse_time_travel
from .storage.objectstore import ObjectStore
from .txn.log import Snapshot


class LanceTable:
    """A Lance table at ``uri`` (any local path or fsspec URI)."""

    def __init__(self, spark, uri: str, version: int | str | None = None, storage_options: dict | None = None):
        register(spark)
        self._spark = spark
        self._store = ObjectStore(uri, storage_options)
        self._pinned = version is not None
        self._snapshot: Snapshot = resolve_snapshot(self._store, version)
        #: CommitInfo of the last write through this handle (None before any).
        self.lastCommit: CommitInfo | None = None
        #: Re-runs allowed on retryable conflicts (delete, update, merge ...);
        #: default from the Spark conf ``spark.lance_ops.conflictRetries`` (10).
        self.conflictRetries = int(spark.conf.get("spark.lance_ops.conflictRetries", str(DEFAULT_CONFLICT_RETRIES)))

    # ------------------------------------------------------------ opening
    @classmethod
    def forPath(cls, spark, uri: str, version: int | str | None = None, storage_options: dict | None = None) -> "LanceTable":
        return cls(spark, uri, version=version, storage_options=storage_options)

    @classmethod
    def isLanceTable(cls, spark, uri: str, storage_options: dict | None = None) -> bool:
        from .txn.log import TableLog

        try:
            return TableLog(ObjectStore(uri, storage_options)).exists()
        except Exception:
            return False

    @classmethod
    def create(
        cls,
        spark,
        uri: str,
        df,
        mode: str = "create",
        stableRowIds: bool = True,
        maxRowsPerFragment: int = 1_048_576,
        storage_options: dict | None = None,
    ) -> "LanceTable":
        """Create a table from ``df`` (``mode="overwrite"`` replaces an existing
        one). Returns a handle at the new version; ``handle.lastCommit`` holds
        the CommitInfo."""
        from .ops.write import write_dataframe

        register(spark)
        store = ObjectStore(uri, storage_options)
        if mode not in ("create", "overwrite"):
            from .errors import InvalidArgumentError

            raise InvalidArgumentError(f"create mode must be 'create' or 'overwrite', got {mode!r}")
        info = write_dataframe(
            spark, store, df, mode, stable_row_ids=stableRowIds, max_rows_per_fragment=maxRowsPerFragment
        )
        t = cls(spark, uri, storage_options=storage_options)
        t.lastCommit = info
        return t

    # ------------------------------------------------------------ state
    @property
    def uri(self) -> str:
        return self._store.root

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def schema(self):
        from .spark.types import spark_schema

        return spark_schema(self._snapshot.schema)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def refresh(self) -> "LanceTable":
        """Move this handle to the latest version (not for time-travel handles)."""
        refuse_time_travel(self._pinned, self.version)
        self._snapshot = resolve_snapshot(self._store, None)
        return self

    def count(self) -> int:
        """Live rows (physical minus deleted), from metadata only."""
        return self._snapshot.num_rows()

    def toDF(self, withRowId: bool = False, withRowAddr: bool = False, withLineage: bool = False, columns=None):
        """The table at this handle's version as a DataFrame. ``columns``
        (extension) reads only those columns."""
        from .ops.read import read_dataframe

        return read_dataframe(
            self._spark, self._store, self.version, columns=columns,
            with_row_id=withRowId, with_row_addr=withRowAddr, with_lineage=withLineage,
        )

    def history(self, limit: int | None = None):
        from .ops.info import HISTORY_SCHEMA, history_rows

        rows = history_rows(self._store, limit, upto=self.version if self._pinned else None)
        return self._spark.createDataFrame(rows, HISTORY_SCHEMA)

    def detail(self) -> dict[str, Any]:
        from .ops.info import detail

        return detail(self._snapshot)

    def changes(self, startVersion: int, endVersion: int | None = None):
        """Rows inserted or updated in versions (startVersion, endVersion] as a
        DataFrame: the table's columns, ``_rowid``, the lineage columns and
        ``_change_type`` ("insert" or "update"). ``endVersion`` defaults to
        this handle's version. Computed from row lineage at ``endVersion``, so
        it needs stable row ids; deleted rows are not reported (see
        :mod:`lance_ops.ops.changes` for the caveats)."""
        from .ops.changes import changes

        return changes(self._spark, self._store, self._snapshot, startVersion, endVersion)

    # ------------------------------------------------------------ writes
    def _moved(self, info: CommitInfo) -> CommitInfo:
        if info.version is not None:
            self._snapshot = resolve_snapshot(self._store, info.version)
        self.lastCommit = info
        return info

    def _writable(self) -> None:
        refuse_time_travel(self._pinned, self.version)

    def append(self, df) -> CommitInfo:
        from .ops.write import write_dataframe

        self._writable()
        return self._moved(write_dataframe(self._spark, self._store, df, "append", snapshot=self._snapshot))

    def overwrite(self, df) -> CommitInfo:
        from .ops.write import write_dataframe

        self._writable()
        return self._moved(write_dataframe(self._spark, self._store, df, "overwrite", snapshot=self._snapshot))

    def delete(self, condition=None) -> CommitInfo:
        """Delete rows matching ``condition`` (Spark SQL string or Column; None
        deletes every row). Writes deletion files only."""
        from .ops.delete import delete

        self._writable()
        return self._moved(delete(self._spark, self._store, self._snapshot, condition, self.conflictRetries))

    def update(self, condition=None, set: dict | None = None) -> CommitInfo:  # noqa: A002 (Delta's name)
        """Set columns of rows matching ``condition`` (None: all rows) to new
        values (Spark SQL strings or Columns)."""
        from .ops.update import update

        self._writable()
        return self._moved(update(self._spark, self._store, self._snapshot, condition, set or {}, self.conflictRetries))

    def merge(self, source, condition):
        """A Delta-style merge builder: target alias ``t``, source alias ``s``."""
        from .ops.merge import MergeBuilder

        return MergeBuilder(self, source, condition)

    # ------------------------------------------------------------ maintenance
    def optimize(self):
        """Delta's optimize builder: ``t.optimize().executeCompaction(...)``."""
        from .ops.compact import OptimizeBuilder

        return OptimizeBuilder(self)

    # -------------------------------------------------------- data evolution
    def addColumns(self, source, readColumns=None, outputSchema=None, on=None) -> CommitInfo:
        """Add columns without rewriting the table: ``{"z": "x * 2"}`` (Spark SQL
        over existing columns), ``fn, readColumns=[...], outputSchema="z long"``
        (an Arrow batch function run on executors) or ``df, on="id"`` (columns
        computed elsewhere, joined by key; also ``"_rowid"`` / ``"_rowaddr"``)."""
        from .ops.evolve import add_columns

        self._writable()
        info = add_columns(
            self._spark, self._store, self._snapshot, source, self.conflictRetries,
            read_columns=readColumns, output_schema=outputSchema, on=on,
        )
        return self._moved(info)

    def rewriteColumns(self, columns: dict, condition=None) -> CommitInfo:
        """Recompute existing columns (for rows matching ``condition``; others keep
        their values) by writing new data files holding just those columns; the
        old field ids are tombstoned (-2) in the old files."""
        from .ops.evolve import rewrite_columns

        self._writable()
        return self._moved(rewrite_columns(self._spark, self._store, self._snapshot, columns, condition, self.conflictRetries))

    def dropColumns(self, columns) -> CommitInfo:
        """Drop columns (dotted paths for struct fields): metadata only."""
        from .ops.columns import drop_columns_schema, project

        self._writable()
        cols = [columns] if isinstance(columns, str) else list(columns)
        info = project(
            self._spark, self._store, self._snapshot, lambda snap: drop_columns_schema(snap, cols),
            "dropColumns", {"columns": ", ".join(cols)}, self.conflictRetries,
        )
        return self._moved(info)

    def renameColumn(self, old: str, new: str) -> CommitInfo:
        """Rename a column (dotted path for a struct field): metadata only."""
        from .ops.columns import project, rename_column_schema

        self._writable()
        info = project(
            self._spark, self._store, self._snapshot, lambda snap: rename_column_schema(snap, old, new),
            "renameColumn", {"from": old, "to": new}, self.conflictRetries,
        )
        return self._moved(info)

    # ------------------------------------------------- vacuum, restore, tags
    def vacuum(self, retentionHours: float = 168, dryRun: bool = False, enforceRetentionDuration: bool = True) -> list[str]:
        """Remove versions committed more than ``retentionHours`` ago (never the
        latest, this handle's version or newer, nor a tagged version -- tagged
        versions are silently kept, with their files), then the data, deletion,
        transaction and index files no kept version references. Files that no
        version references at all (failed or in-flight writes) are removed only
        once their mtime is older than the retention. Returns the removed paths,
        relative to the table root, sorted; ``dryRun=True`` only lists them.

        A retention below 168 hours raises InvalidArgumentError unless the Spark
        conf ``spark.lance_ops.vacuum.retentionDurationCheck.enabled`` is
        "false" or ``enforceRetentionDuration=False`` (extension) is passed: a
        short retention can delete the files of a commit in progress. Refused
        on time-travel handles. Details: :mod:`lance_ops.ops.vacuum`."""
        from .ops.vacuum import RETENTION_CHECK_CONF, vacuum

        self._writable()
        check = self._spark.conf.get(RETENTION_CHECK_CONF, "true").strip().lower() != "false"
        return vacuum(self._store, self.version, retentionHours, dryRun, enforce=check and enforceRetentionDuration)

    def restoreToVersion(self, version: int | str) -> CommitInfo:
        """Commit a new version whose content is ``version``'s (a version number
        or a tag name); later versions stay in the history. Row ids issued
        since are never reused (``nextRowId``/``maxFragmentId`` keep the latest
        values, as pylance). A missing version or tag raises
        TableNotFoundError."""
        from .ops.restore import restore

        self._writable()
        return self._moved(restore(self._store, self._snapshot, version))

    def createTag(self, name: str, version: int | str | None = None) -> None:
        """Name a version (default: this handle's). Tags live in
        ``_refs/tags/{name}.json``, readable by pylance; a tagged version is
        kept by vacuum. An existing name raises TableExistsError, a missing
        version TableNotFoundError, a bad name InvalidArgumentError. Tags
        commit no version, so this also works on time-travel handles."""
        from .ops.tags import create_tag

        create_tag(self._store, name, self.version if version is None else version)

    def deleteTag(self, name: str) -> None:
        """Delete a tag (TableNotFoundError if it does not exist). The version
        it named stays until vacuum removes it."""
        from .txn.refs import delete_tag

        delete_tag(self._store, name)

    def listTags(self, details: bool = False) -> dict:
        """Tag name -> version. With ``details=True`` (extension): tag name ->
        the tag file's content (version, createdAt, updatedAt, manifestSize,
        branch, metadata)."""
        from .ops.tags import tag_versions
        from .txn.refs import list_tags

        return list_tags(self._store) if details else tag_versions(self._store)

    def __repr__(self) -> str:
        return f"LanceTable({self.uri!r}, version={self.version})"


__all__ = ["LanceTable", "TableNotFoundError"]
