"""``LanceTable``: the Delta-style facade over a Lance table.

Code written for Delta's ``DeltaTable`` runs on ``LanceTable`` with the
obvious renames: a handle opened without ``version=``/tag follows the table
(every read and every operation starts from the latest version at the time of
the call, as a ``DeltaTable`` does); one opened at a version or tag is a
pinned, read-only time-travel view. Methods return what Delta's return: a
DataFrame where Delta returns one (``merge().execute()``, ``optimize()
.executeCompaction()``, ``restoreToVersion``, ``detail()``, ``history()``,
``vacuum()``), and the :class:`~lance_ops.results.CommitInfo` where Delta
returns nothing (``delete``, ``update``, ...); ``t.lastCommit()`` is always
the CommitInfo of the handle's last write. Remaining differences from
Delta's Python API: docs/guide/delta.md.

Everything that needs no data processing is the Spark-free core's
(:class:`lance_ops.txn.table.Table`, ``t.table``); the operations Spark runs
are one module each in :mod:`lance_ops.ops`, which build a
``prepare(snapshot) -> StagedCommit`` for the core's staged-commit pipeline.
"""
from __future__ import annotations

from .errors import InvalidArgumentError
from .format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from .ops.common import labelled
from .results import CommitInfo
from .spark.credentials import publish as publish_credentials
from .spark.datasource import register
from .txn.log import Snapshot
from .txn.pipeline import DEFAULT_CONFLICT_RETRIES
from .txn.table import Table
from .txn.vacuum import RETENTION_CHECK_CONF

#: Spark conf with the default re-run budget of writes (``conflictRetries``).
CONFLICT_RETRIES_CONF = "spark.lance_ops.conflictRetries"


class LanceTable:
    """A Lance table at ``uri`` (any local path or fsspec URI)."""

    def __init__(self, spark, uri: str, version: int | str | None = None, storage_options: dict | None = None,
                 branch: str | None = None):
        """``storage_options`` (pylance's names: endpoint, region, keys,
        ``commit_store``, ...) override the session's
        ``spark.lance_ops.storage.<key>`` confs."""
        from .spark.session import storage_options as session_storage_options

        register(spark)
        self._spark = spark
        retries = int(spark.conf.get(CONFLICT_RETRIES_CONF, str(DEFAULT_CONFLICT_RETRIES)))
        #: The Spark-free core of this handle (history, tags, vacuum, ...).
        self.table = Table(uri, session_storage_options(spark, storage_options), version, branch=branch,
                           conflictRetries=retries)
        # credentials reach the executors as a handle, never as logged text
        publish_credentials(spark, self.table.store)
        #: The alias merge conditions use for this table (``alias()``).
        self._alias: str | None = None
        #: The table's name where it was opened or created by one (``detail()``).
        self._name: str | None = None

    def alias(self, aliasName: str) -> "LanceTable":
        """This table under an alias, for merge conditions and ``set`` keys
        (``t.alias("events").merge(src.alias("updates"), "events.id =
        updates.id")``). The returned handle shares this one's state."""
        from .ops import args

        args.string(aliasName, "'aliasName' in alias")
        other = object.__new__(LanceTable)
        other.__dict__.update(self.__dict__)
        other._alias = aliasName
        return other

    # ------------------------------------------------------------ opening
    @classmethod
    def forPath(cls, spark, uri: str, version: int | str | None = None, storage_options: dict | None = None,
                branch: str | None = None) -> "LanceTable":
        return cls(spark, uri, version=version, storage_options=storage_options, branch=branch)

    @classmethod
    def forName(cls, spark, tableOrViewName: str, version: int | str | None = None,
                storage_options: dict | None = None, branch: str | None = None) -> "LanceTable":
        """Delta's ``forName``: the table a name stands for -- a name of the
        Lance Namespace catalog configured in Spark conf (``db.events``,
        ``lance.db.events``, or a table of its root namespace; see
        :mod:`lance_ops.spark.catalogs`), or a name this session registered
        (``CREATE TABLE name USING lance LOCATION ...``). TableNotFoundError
        when neither knows it."""
        from .errors import TableNotFoundError
        from .namespace.ids import parse_name
        from .spark import catalogs
        from .spark.sessionnames import registered_uri

        register(spark)
        parts = parse_name(tableOrViewName)
        uri, options = None, {}
        if len(parts) == 1:
            uri = registered_uri(spark, parts[0])
        if uri is None:
            if catalogs.split(spark, parts) is None:
                raise TableNotFoundError(
                    f"no table named {tableOrViewName!r}: this session registered no such name and no Lance Namespace "
                    f"is configured ({catalogs.PREFIX}lance.impl = dir | rest, with .root or .uri)"
                )
            uri, options = catalogs.describe(spark, parts)
        opts = {**options, **(storage_options or {})}
        t = cls(spark, uri, version=version, storage_options=opts or None, branch=branch)
        t._name = tableOrViewName
        return t

    @classmethod
    def isLanceTable(cls, spark, uri: str, storage_options: dict | None = None) -> bool:
        """Whether ``uri`` holds a Lance table (a damaged one raises)."""
        from .spark.session import storage_options as session_storage_options

        return Table.exists(uri, session_storage_options(spark, storage_options))

    @classmethod
    def create(
        cls,
        spark=None,
        uri: str | None = None,
        df=None,
        mode: str = "create",
        stableRowIds: bool = True,
        maxRowsPerFragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
        storage_options: dict | None = None,
        commitProperties: dict | None = None,
        properties: dict | None = None,
    ) -> "LanceTable":
        """Create a table from ``df`` (``mode="overwrite"`` replaces an existing
        one). Returns a handle; ``handle.lastCommit()`` is the CommitInfo.
        ``properties`` (extension) sets table config keys in the same commit
        (``ds.config()`` in pylance).

        ``LanceTable.create(spark)`` -- no location, no rows -- is Delta's
        table builder instead: ``.location(...)`` / ``.tableName(...)``,
        ``.addColumn(...)`` / ``.addColumns(schema)``, ``.property(k, v)``,
        ``.comment(...)``, ``.execute()`` (an empty table with that schema);
        see also :meth:`createIfNotExists`, :meth:`replace`,
        :meth:`createOrReplace`."""
        if uri is None and df is None:
            return cls._builder(spark, "create")
        if uri is None or df is None:
            raise InvalidArgumentError(
                "LanceTable.create(spark, uri, df) creates a table from rows; LanceTable.create(spark) (no uri, "
                "no df) is the table builder"
            )
        from .ops.write import write_dataframe
        from .spark.session import storage_options as session_storage_options
        from .spark.write import must_not_exist
        from .storage.objectstore import ObjectStore
        from .txn.commit import NewTable
        from .txn.log import latest_or_none
        from .txn.pipeline import WriteOptions, execute

        if mode not in ("create", "overwrite"):
            raise InvalidArgumentError(f"create mode must be 'create' or 'overwrite', got {mode!r}")
        register(spark)
        storage_options = session_storage_options(spark, storage_options)
        store = ObjectStore(uri, storage_options)
        publish_credentials(spark, store)
        prepare = write_dataframe(store, df, mode, stable_row_ids=stableRowIds, max_rows_per_fragment=maxRowsPerFragment,
                                  properties=properties)
        options = WriteOptions(
            checks=[must_not_exist] if mode == "create" else [],
            commit_properties=commitProperties,
            retries=int(spark.conf.get(CONFLICT_RETRIES_CONF, str(DEFAULT_CONFLICT_RETRIES))),
            new_table=NewTable(stable_row_ids=stableRowIds),
        )
        options.operation = "CREATE TABLE AS SELECT" if mode == "create" else "CREATE OR REPLACE TABLE AS SELECT"
        info = execute(store, latest_or_none(store), labelled(spark, mode, store.root, prepare), options)
        t = cls(spark, uri, storage_options=storage_options)
        t.table.lastCommit = info
        return t

    @classmethod
    def _builder(cls, spark, mode: str):
        from pyspark.sql import SparkSession

        from .ops.create import LanceTableBuilder

        spark = spark if spark is not None else SparkSession.getActiveSession()
        if spark is None:
            raise InvalidArgumentError("no Spark session: pass one, LanceTable.create(spark)")

        def register_session_name(spark, name, location, storage_options):
            from .spark.sessionnames import register_name

            register_name(spark, name, location, storage_options)

        return LanceTableBuilder(
            spark, mode, lambda location, options: cls(spark, location, storage_options=options),
            register_session_name, int(spark.conf.get(CONFLICT_RETRIES_CONF, str(DEFAULT_CONFLICT_RETRIES))),
        )

    @classmethod
    def createIfNotExists(cls, spark=None):
        """Delta's builder that creates the table unless one exists there
        (``CREATE TABLE IF NOT EXISTS``)."""
        return cls._builder(spark, "createIfNotExists")

    @classmethod
    def replace(cls, spark=None):
        """Delta's builder that replaces an existing table (an error if there
        is none): a new version with the new schema, empty."""
        return cls._builder(spark, "replace")

    @classmethod
    def createOrReplace(cls, spark=None):
        """Delta's builder that creates the table or replaces the one there."""
        return cls._builder(spark, "createOrReplace")

    # ------------------------------------------------------------ state
    @property
    def uri(self) -> str:
        return self.table.uri

    @property
    def version(self) -> int:
        return self.table.version

    @property
    def branch(self) -> str | None:
        """The branch this handle reads (None: main)."""
        return self.table.branch

    @property
    def schema(self):
        from .spark.types import spark_schema

        return spark_schema(self.snapshot.schema)

    @property
    def snapshot(self) -> Snapshot:
        return self.table.snapshot

    @property
    def _store(self):
        return self.table.store

    @property
    def conflictRetries(self) -> int:
        """Re-runs allowed on retryable conflicts (default: the Spark conf
        ``spark.lance_ops.conflictRetries``, else 10)."""
        return self.table.conflictRetries

    @conflictRetries.setter
    def conflictRetries(self, n: int) -> None:
        self.table.conflictRetries = int(n)

    def lastCommit(self) -> CommitInfo | None:
        """CommitInfo of the last write through this handle (None before any):
        the version it made (None: it changed nothing), ``readVersion``,
        ``operation``, ``retries`` and the metrics history() shows."""
        return self.table.lastCommit

    def refresh(self) -> "LanceTable":
        """Read the latest version now (a handle without ``version=`` does so
        on every call anyway; refused on time-travel handles)."""
        self.table.refresh()
        return self

    def count(self) -> int:
        """Live rows (physical minus deleted), from metadata only."""
        return self.table.count()

    def toDF(self, withRowId: bool = False, withRowAddr: bool = False, withLineage: bool = False, columns=None,
             filter=None):  # noqa: A002 (the DataFrame method's name)
        """The table at this handle's version as a DataFrame. ``columns``
        (extension) reads only those columns. ``filter`` (extension; a Spark
        SQL string or Column, or a list of them: conjuncts): the rows where it
        is true -- ``toDF().where(filter)``,
        but the read tasks already drop the rows it rules out with Arrow
        (Spark's semantics; ``spark.lance_ops.arrowEval.enabled``), so only
        matching rows cross into the JVM."""
        from .ops.read import read_dataframe
        from .spark.frames import as_column

        conjuncts = None if filter is None else list(filter) if isinstance(filter, (list, tuple)) else [filter]
        snap = self.snapshot
        df = read_dataframe(
            self._spark, self._store, snap.version, columns=columns,
            with_row_id=withRowId, with_row_addr=withRowAddr, with_lineage=withLineage,
            row_filter=conjuncts,
        )
        for c in conjuncts or ():
            df = df.where(as_column(c))
        return df

    def history(self, limit: int | None = None):
        """One row per version, newest first (Delta's DESCRIBE HISTORY columns:
        version, timestamp, operation -- Delta's word: WRITE, MERGE, OPTIMIZE,
        ... --, readVersion, operationParameters, operationMetrics,
        userMetadata, isolationLevel, isBlindAppend, engineInfo; and Lance's:
        lanceOperation -- the transaction type --, writer, transactionUuid)."""
        from .spark.types import HISTORY_SCHEMA

        rows = self.table.history(limit)
        return self._spark.createDataFrame([tuple(r[f.name] for f in HISTORY_SCHEMA.fields) for r in rows], HISTORY_SCHEMA)

    def detail(self):
        """Delta's DESCRIBE DETAIL: a one-row DataFrame (format "lance", id,
        name, description, location, createdAt, lastModified, numFiles,
        sizeInBytes, properties, ...) then Lance's columns (version,
        numFragments, numRows, numDeletedRows, feature flags,
        dataFormatVersion, nextRowId, maxFragmentId, schema with field ids,
        ...). ``t.table.detail()`` is the same as a dict."""
        from .ops.shapes import detail_frame

        return detail_frame(self._spark, self.table.detail(), self._name)

    def properties(self) -> dict[str, str]:
        """The table config (pylance's ``ds.config()``)."""
        return self.table.properties()

    def fragments(self):
        """One row per fragment of this version, from metadata only (no
        Spark job): fragment_id, physical_rows, deleted_rows, live_rows,
        deleted_ratio, num_data_files, size_in_bytes, data_file_versions,
        tombstoned_fields, has_deletion_file (``DESCRIBE FRAGMENTS`` in SQL;
        the Spark-free ``Table.fragments()`` has each file's details)."""
        from .ops.shapes import FRAGMENTS

        rows = [
            (f["id"], f["physicalRows"], f["deletedRows"], f["liveRows"], float(f["deletedRatio"]), f["numDataFiles"],
             f["sizeInBytes"], ",".join(f["dataFileVersions"]), f["tombstonedFields"], f["hasDeletionFile"])
            for f in self.table.fragments()
        ]
        return self._spark.createDataFrame(rows, FRAGMENTS)

    def sql(self, text: str, tables: dict | None = None, commitProperties: dict | None = None, allResults: bool = False):
        """Run SQL where this table is named ``this`` (at this handle's
        version: a time-travel handle reads that version and refuses writes),
        e.g. ``t.sql("DELETE FROM this WHERE x > 5")``; see
        :func:`lance_ops.sql`."""
        from .sql.script import run_script

        return run_script(self._spark, text, LanceTable, {"this": self, **(tables or {})}, commitProperties,
                          allResults)

    def changes(self, startVersion: int | None = None, endVersion: int | None = None, withRowId: bool = False,
                withLineage: bool = False, startingTimestamp=None, endingTimestamp=None):
        """The change feed of versions (startVersion, endVersion] with Delta's
        rows and columns: the table's columns, ``_change_type`` (insert,
        update_preimage, update_postimage, delete), ``_commit_version``,
        ``_commit_timestamp``. ``endVersion`` defaults to this handle's
        version. ``startingTimestamp`` / ``endingTimestamp`` (strings in the
        session time zone, or datetimes) instead of versions: from the first
        version committed at or after the start, to the last committed at or
        before the end. ``withRowId`` / ``withLineage`` add ``_rowid`` / the
        lineage columns. Computed from row lineage, deletion files and time
        travel (no extra files); needs stable row ids. See
        :mod:`lance_ops.txn.changefeed`."""
        from .ops.changes import changes

        return changes(self._spark, self._store, self.snapshot, startVersion, endVersion, with_row_id=withRowId,
                       with_lineage=withLineage,
                       starting_timestamp=None if startingTimestamp is None else self._session_timestamp(startingTimestamp),
                       ending_timestamp=None if endingTimestamp is None else self._session_timestamp(endingTimestamp))

    # ------------------------------------------------------------ writes
    def _writable(self) -> None:
        self.table.writable()

    def _run(self, name: str, prepare, commitProperties: dict | None = None, expectations=None,
             start: Snapshot | None = None, operation: str | None = None,
             txnAppId: str | None = None, txnVersion: int | None = None) -> CommitInfo:
        """Commit ``prepare``'s change through the core's pipeline, starting
        from ``start`` (the snapshot the operation planned on), its Spark jobs
        labelled with the operation and the version they read; ``operation``
        is the history's (Delta's) word for it; ``expectations`` adds the
        data-quality gate (:mod:`lance_ops.ops.quality`); ``txnAppId`` /
        ``txnVersion`` make it an idempotent write (Delta's: skipped when the
        table already holds it; :mod:`lance_ops.txn.idempotence`)."""
        checks = []
        if expectations is not None:
            from .ops.quality import expectations_check

            checks.append(expectations_check(self._spark, expectations))
        return self.table.execute(labelled(self._spark, name, self.uri, prepare), commitProperties=commitProperties,
                                  checks=checks, start=start, operation=operation, txnAppId=txnAppId,
                                  txnVersion=txnVersion)

    def append(self, df, allowMissingColumns: bool = False, expectations=None,
               commitProperties: dict | None = None, txnAppId: str | None = None,
               txnVersion: int | None = None) -> CommitInfo:
        """Append ``df``'s rows. ``allowMissingColumns=True`` lets ``df`` leave
        out nullable columns: the new fragments have no data file for them and
        read them as NULL until ``backfill`` computes them. ``expectations``:
        a great_expectations suite the new rows must pass before the commit.
        The table's CHECK constraints are enforced in the writing tasks.
        ``txnAppId`` / ``txnVersion`` (every write takes them): an idempotent
        write, skipped when the table already holds that version of that app
        (``CommitInfo.skipped``; Delta's semantics)."""
        from .ops.write import write_dataframe

        self._writable()
        snap = self.snapshot
        prepare = write_dataframe(self._store, df, "append", allow_missing=allowMissingColumns)
        return self._run("append", prepare, commitProperties, expectations, start=snap, operation="WRITE",
                         txnAppId=txnAppId, txnVersion=txnVersion)

    def overwrite(self, df, expectations=None, commitProperties: dict | None = None, txnAppId: str | None = None,
                  txnVersion: int | None = None) -> CommitInfo:
        from .ops.write import write_dataframe

        self._writable()
        snap = self.snapshot
        return self._run("overwrite", write_dataframe(self._store, df, "overwrite"), commitProperties, expectations,
                         start=snap, operation="WRITE", txnAppId=txnAppId, txnVersion=txnVersion)

    def delete(self, condition=None, commitProperties: dict | None = None, txnAppId: str | None = None,
               txnVersion: int | None = None) -> CommitInfo:
        """Delete rows matching ``condition`` (Spark SQL string or Column; None
        deletes every row). Writes deletion files only; a delete matching no
        row commits nothing (``version`` None)."""
        from .ops import args
        from .ops.delete import delete

        args.condition(condition)
        self._writable()
        snap = self.snapshot
        return self._run("delete", delete(self._spark, snap, condition), commitProperties, start=snap,
                         operation="DELETE", txnAppId=txnAppId, txnVersion=txnVersion)

    def update(self, condition=None, set: dict | None = None, commitProperties: dict | None = None,  # noqa: A002 (Delta's name)
               expectations=None, txnAppId: str | None = None, txnVersion: int | None = None) -> CommitInfo:
        """Set columns of rows matching ``condition`` (None: all rows) to new
        values (Spark SQL strings or Columns); an update matching no row
        commits nothing (``version`` None)."""
        from .ops import args
        from .ops.update import update

        args.column_mapping(set, "'set'")  # (first, as Delta: update({...}) says set is missing)
        args.condition(condition)
        self._writable()
        snap = self.snapshot
        return self._run("update", update(self._spark, snap, condition, set), commitProperties, expectations,
                         start=snap, operation="UPDATE", txnAppId=txnAppId, txnVersion=txnVersion)

    def merge(self, source, condition):
        """Delta's merge builder. The target's alias is ``t`` unless
        :meth:`alias` named it; the source's is ``s`` unless the condition
        qualifies it otherwise (``source.alias("updates")``)."""
        from .ops.merge import MergeBuilder

        return MergeBuilder(self, source, condition, self._alias)

    # ------------------------------------------------------------ maintenance
    def optimize(self):
        """Delta's optimize builder: ``t.optimize().executeCompaction(...)``."""
        from .ops.compact import OptimizeBuilder

        return OptimizeBuilder(self)

    # -------------------------------------------------------- data evolution
    def addColumns(self, source, readColumns=None, outputSchema=None, on=None,
                   commitProperties: dict | None = None, expectations=None) -> CommitInfo:
        """Add columns without rewriting the table: ``{"z": "x * 2"}`` (Spark SQL
        over existing columns), ``fn, readColumns=[...], outputSchema="z long"``
        (an Arrow batch function run on executors), ``df, on="id"`` (columns
        computed elsewhere, joined by key; also ``"_rowid"`` / ``"_rowaddr"``)
        or a schema -- a StructType or DDL ``"c int COMMENT 'why', d string"``
        -- for null-filled typed columns (field metadata such as the comment
        kept). Each way writes one column file per fragment."""
        from .ops.evolve import add_columns

        self._writable()
        snap = self.snapshot
        prepare = add_columns(self._spark, snap, source, read_columns=readColumns, output_schema=outputSchema, on=on)
        return self._run("addColumns", prepare, commitProperties, expectations, start=snap, operation="ADD COLUMNS")

    def backfill(self, source, readColumns=None, outputSchema=None, where=None, fragmentsPerCommit: int | None = None,
                 expectations=None, commitProperties: dict | None = None, advanceWatermark: bool = True,
                 fillNulls: bool = False, txnAppId: str | None = None, txnVersion: int | None = None) -> CommitInfo:
        """Compute existing columns where they are missing: ``{"g": "f0 * 2"}``
        (Spark SQL) or ``fn, readColumns=[...], outputSchema="g double"`` (an
        Arrow batch function). Fragments with no data file for the columns get
        one (a ``DataReplacement``, as pylance commits it); with ``where`` only
        matching rows are recomputed (``Update`` REWRITE_COLUMNS elsewhere).
        ``fragmentsPerCommit`` commits in batches (resumable; a re-run is a
        no-op); the watermark ``lance_ops.feature.<column>.version`` is
        advanced at the end (``advanceWatermark=False``: left to the caller,
        e.g. a scheduler that validates first). Returns the CommitInfo of the last commit with
        the metrics of all (``numCommits``, ``watermark``); ``version`` None
        when there was nothing to do. ``fillNulls=True`` also recomputes rows
        whose column is NULL in fragments that have it (rows appended with
        the column explicitly NULL). ``txnAppId`` / ``txnVersion``: skipped
        when the table already holds it; its last commit records it. See
        :mod:`lance_ops.ops.backfill`."""
        from .ops.backfill import Backfill

        self._writable()
        return Backfill(self, source, readColumns, outputSchema, where, fragmentsPerCommit, expectations,
                        commitProperties, advanceWatermark, fillNulls, txn=(txnAppId, txnVersion)).run()

    def featureStatus(self, column: str) -> dict:
        """Metadata-only state of a feature column: watermark, data version,
        fragments lacking the column, and whether a backfill has work
        (``pending``) -- what the Airflow sensor pokes."""
        from .txn.watermarks import feature_status

        return feature_status(self.snapshot, column)

    # ---------------------------------------------------------- constraints
    def addConstraint(self, name: str, expression: str, commitProperties: dict | None = None) -> CommitInfo:
        """Add a Delta-style CHECK constraint (Spark SQL, must be true for every
        row: false or NULL violates it). Existing rows are validated first
        (ConstraintViolationError if some break it); from then on every
        lance_ops write enforces it inside its write tasks."""
        from .ops.constraints import add_constraint

        self._writable()
        snap = self.snapshot
        return self._run("addConstraint", add_constraint(self._spark, snap, name, expression), commitProperties,
                         start=snap, operation="ADD CONSTRAINT")

    def dropConstraint(self, name: str, ifExists: bool = False, commitProperties: dict | None = None) -> CommitInfo | None:
        from .ops.constraints import drop_constraint

        self._writable()
        snap = self.snapshot
        prepare = drop_constraint(snap, name, ifExists)
        if prepare is None:
            return None
        return self.table.execute(prepare, commitProperties=commitProperties, start=snap, operation="DROP CONSTRAINT")

    # ------------------------------------------------------------ indices
    def createIndex(self, column, indexType: str = "ZONEMAP", name: str | None = None,
                    commitProperties: dict | None = None) -> CommitInfo:
        """Build a scalar index on ``column`` in executors and commit it as a
        ``CreateIndex`` (pylance lists and uses it). ``name`` defaults to
        ``<column>_idx``; an index of that name is replaced. ``column`` may be
        a list: one index per column, all from one scan (one Spark job) and
        one commit."""
        from .ops.indices import create_index

        self._writable()
        snap = self.snapshot
        return self._run("createIndex", create_index(self._spark, snap, column, indexType, name),
                         commitProperties, start=snap, operation="CREATE INDEX")

    def dropIndex(self, name: str, commitProperties: dict | None = None) -> CommitInfo:
        from .ops.indices import drop_index

        self._writable()
        snap = self.snapshot
        return self.table.execute(drop_index(snap, name), commitProperties=commitProperties, start=snap,
                                  operation="DROP INDEX")

    def listIndices(self) -> list[dict]:
        """This version's indices: name, type, columns, fragmentIds (+ uuid,
        datasetVersion)."""
        from .ops.indices import list_indices

        return list_indices(self.snapshot)

    def constraints(self) -> dict[str, str]:
        """CHECK constraints of this version: name -> SQL."""
        return self.table.constraints()

    def rewriteColumns(self, columns: dict, condition=None, commitProperties: dict | None = None,
                       expectations=None) -> CommitInfo:
        """Recompute existing columns (for rows matching ``condition``; others keep
        their values) by writing new data files holding just those columns; the
        old field ids are tombstoned (-2) in the old files."""
        from .ops.evolve import rewrite_columns

        self._writable()
        snap = self.snapshot
        return self._run("rewriteColumns", rewrite_columns(self._spark, snap, columns, condition), commitProperties,
                         expectations, start=snap, operation="REWRITE COLUMNS")

    def dropColumns(self, columns, commitProperties: dict | None = None) -> CommitInfo:
        """Drop columns (dotted paths for struct fields): metadata only."""
        import json

        from .ops.columns import drop_columns_schema, project
        from .ops.constraints import refuse_constrained

        self._writable()
        snap = self.snapshot
        cols = [columns] if isinstance(columns, str) else list(columns)
        refuse_constrained(self._spark, snap, cols, "drop")
        prepare = project(snap, lambda s: drop_columns_schema(s, cols), {"columns": json.dumps(cols)})
        return self._run("dropColumns", prepare, commitProperties, start=snap, operation="DROP COLUMNS")

    def renameColumn(self, old: str, new: str, commitProperties: dict | None = None) -> CommitInfo:
        """Rename a column (dotted path for a struct field): metadata only."""
        from .ops.columns import project, rename_column_schema
        from .ops.constraints import refuse_constrained

        self._writable()
        snap = self.snapshot
        refuse_constrained(self._spark, snap, [old], "rename")
        prepare = project(snap, lambda s: rename_column_schema(s, old, new), {"oldColumnPath": old, "newColumnPath": new})
        return self._run("renameColumn", prepare, commitProperties, start=snap, operation="RENAME COLUMN")

    def setProperties(self, properties: dict, commitProperties: dict | None = None) -> CommitInfo:
        """Set table config keys (an ``UpdateConfig`` commit; pylance reads
        them in ``ds.config()``)."""
        return self.table.setProperties(properties, commitProperties)

    def unsetProperties(self, keys, commitProperties: dict | None = None, ifExists: bool = True) -> CommitInfo:
        """Remove table config keys (``ifExists=False``: a key that is not set
        raises InvalidArgumentError, as Delta's UNSET TBLPROPERTIES)."""
        return self.table.unsetProperties(keys, commitProperties, ifExists=ifExists)

    # ------------------------------------------------- vacuum, restore, tags
    def vacuum(self, retentionHours: float | None = None, dryRun: bool = False,
               enforceRetentionDuration: bool = True):
        """Remove versions committed more than ``retentionHours`` ago (default
        168; never the latest, a tagged version, nor a version a branch was
        created from), then the data, deletion, transaction and index files
        no kept version of any branch references. Files that no version
        references at all (failed or in-flight writes) are removed only once
        their mtime is older than the retention. Returns a DataFrame of the
        removed files' full paths (``path``; Delta returns an empty one),
        ``dryRun=True`` only lists them (the Spark-free ``t.table.vacuum()``
        returns them as a list).

        A retention below 168 hours raises InvalidArgumentError unless the Spark
        conf ``spark.lance_ops.vacuum.retentionDurationCheck.enabled`` is
        "false" or ``enforceRetentionDuration=False`` (extension) is passed: a
        short retention can delete the files of a commit in progress. Refused
        on time-travel handles. Details: :mod:`lance_ops.txn.vacuum`."""
        from .ops.shapes import vacuum_frame

        removed = self.vacuumFiles(retentionHours, dryRun, enforceRetentionDuration)
        return vacuum_frame(self._spark, self.uri, removed)

    def vacuumFiles(self, retentionHours: float | None = None, dryRun: bool = False,
                    enforceRetentionDuration: bool = True) -> list[str]:
        """:meth:`vacuum`, returning the removed paths relative to the table
        root, sorted (jobs and the CLI)."""
        hours = 168 if retentionHours is None else retentionHours
        check = self._spark.conf.get(RETENTION_CHECK_CONF, "true").strip().lower() != "false"
        return self.table.vacuum(hours, dryRun, enforceRetentionDuration=check and enforceRetentionDuration)

    def resolveCommit(self, transactionUuid: str, version: int | None = None) -> int | None:
        """The version that committed transaction ``transactionUuid`` or None:
        settles a :class:`~lance_ops.errors.CommitOutcomeUnknownError`
        (``t.resolveCommit(e.transaction_uuid, e.version)``)."""
        return self.table.resolveCommit(transactionUuid, version)

    def restoreToVersion(self, version: int | str, commitProperties: dict | None = None):
        """Commit a new version whose content is ``version``'s (a version number
        or, extension, a tag name); later versions stay in the history. Row
        ids issued since are never reused (``nextRowId``/``maxFragmentId``
        keep the latest values, as pylance). Returns Delta's RESTORE metrics
        (one row: table_size_after_restore, num_of_files_after_restore,
        num_removed_files, num_restored_files, removed_files_size,
        restored_files_size); ``t.lastCommit()`` is the CommitInfo. A missing
        version or tag raises TableNotFoundError."""
        from .errors import ArgumentTypeError
        from .ops.shapes import restore_frame

        if isinstance(version, bool) or not isinstance(version, (int, str)):
            raise ArgumentTypeError(f"version needs to be an int (or a tag name) but got {type(version)!r}")
        return restore_frame(self._spark, self.table.restoreToVersion(version, commitProperties))

    def restoreToTimestamp(self, timestamp: str, commitProperties: dict | None = None):
        """Restore the latest version committed at or before ``timestamp``
        ("yyyy-MM-dd" or "yyyy-MM-dd HH:mm:ss[.ffffff]", a Spark SQL
        timestamp in the session time zone; also a datetime). A timestamp
        before the earliest kept version, or after the latest commit, raises
        InvalidArgumentError (as Delta). Returns Delta's RESTORE metrics."""
        from .ops.restore import version_at

        version = version_at(self._spark, self.table, timestamp)
        return self.restoreToVersion(version, commitProperties)

    def createTag(self, name: str, version: int | str | None = None) -> None:
        """Name a version (default: this handle's). Tags live in
        ``_refs/tags/{name}.json``, readable by pylance; a tagged version is
        kept by vacuum. An existing name raises TableExistsError, a missing
        version TableNotFoundError, a bad name InvalidArgumentError. Tags
        commit no version, so this also works on time-travel handles."""
        self.table.createTag(name, version)

    def deleteTag(self, name: str) -> None:
        """Delete a tag (TableNotFoundError if it does not exist). The version
        it named stays until vacuum removes it."""
        self.table.deleteTag(name)

    def listTags(self, details: bool = False) -> dict:
        """Tag name -> version. With ``details=True`` (extension): tag name ->
        the tag file's content (version, createdAt, updatedAt, manifestSize,
        branch, metadata)."""
        return self.table.listTags(details)

    # -------------------------------------------------------------- branches
    def createBranch(self, name: str, version: int | str | None = None) -> "LanceTable":
        """Fork branch ``name`` from a version of this handle's branch (default:
        this handle's version; or a tag of it), in pylance's layout
        (``tree/{name}/``, ``_refs/branches/{name}.json``); returns a handle on
        the new branch. An existing name raises TableExistsError, a bad one
        InvalidArgumentError."""
        self.table.createBranch(name, version)
        return LanceTable(self._spark, self.table.root.uri, storage_options=self.table.root.storage_options,
                          branch=name)

    def listBranches(self) -> dict:
        """Branch name -> {"parentBranch", "parentVersion", "createdAt",
        "metadata"} (pylance's and ours alike; main is not listed)."""
        return self.table.listBranches()

    def deleteBranch(self, name: str) -> None:
        """Delete a branch and the files only it has (refused while another
        branch forked from it or a tag names one of its versions, as pylance)."""
        self.table.deleteBranch(name)

    # ---------------------------------------------------------------- clones
    def clone(self, target: str, isShallow: bool = True, replace: bool = False, properties: dict | None = None,
              storage_options: dict | None = None) -> "LanceTable":
        """Delta's ``clone``: a shallow clone of this handle's version at
        ``target`` (a new Lance table whose manifest reaches this table's
        files through a base path, as pylance's ``shallow_clone``; nothing
        is written here). Returns a handle on the clone. ``properties``:
        table config keys of the clone. Deep clones (``isShallow=False``) and
        replacing an existing table raise UnsupportedFeatureError."""
        return self._clone(None, target, isShallow, replace, properties, storage_options)

    def cloneAtVersion(self, version: int | str, target: str, isShallow: bool = True, replace: bool = False,
                       properties: dict | None = None, storage_options: dict | None = None) -> "LanceTable":
        """``clone`` of ``version`` (a number or a tag) of this handle's branch."""
        return self._clone(version, target, isShallow, replace, properties, storage_options)

    def cloneAtTimestamp(self, timestamp, target: str, isShallow: bool = True, replace: bool = False,
                         properties: dict | None = None, storage_options: dict | None = None) -> "LanceTable":
        """``clone`` of the latest version committed at or before ``timestamp``
        (a string in the session time zone, as Delta reads it, or a datetime)."""
        from .txn.timetravel import version_at

        return self._clone(version_at(self._store, self._session_timestamp(timestamp)), target, isShallow,
                           replace, properties, storage_options)

    def _session_timestamp(self, when):
        """A timestamp string read by Spark in the session time zone (as Delta
        reads one) as an aware datetime; datetimes pass through."""
        import datetime

        if not isinstance(when, str):
            return when
        row = self._spark.sql("SELECT unix_micros(CAST(:ts AS TIMESTAMP)) AS us", args={"ts": when}).head()
        if row is None or row[0] is None:
            raise InvalidArgumentError(f"{when!r} is not a timestamp")
        return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=int(row[0]))

    def _clone(self, version, target, isShallow, replace, properties, storage_options) -> "LanceTable":
        from .errors import UnsupportedFeatureError

        if not isShallow:
            raise UnsupportedFeatureError(
                "deep clones are not supported (as in open-source Delta): clone(target, isShallow=True) "
                "makes a shallow clone that reads this table's files in place"
            )
        if replace and LanceTable.isLanceTable(self._spark, target, storage_options or self._store.storage_options):
            raise UnsupportedFeatureError(
                f"clone(..., replace=True) into the existing table {target}: replacing a table by a clone is not "
                "supported; clone to a new location"
            )
        if properties is not None and not isinstance(properties, dict):
            raise TypeError(f"properties must be a dict, got {type(properties).__name__}")
        handle = self.table.clone(target, version, properties, storage_options)
        return LanceTable(self._spark, handle.uri, storage_options=handle.store.storage_options)

    def __repr__(self) -> str:
        on = f", branch={self.branch!r}" if self.branch else ""
        return f"LanceTable({self.uri!r}, version={self.version}{on})"


__all__ = ["LanceTable"]
