"""Structured Streaming: the ``lance`` sink and source.

**Sink** -- ``df.writeStream.format("lance").option("checkpointLocation", c)
.start(uri)``: every micro-batch is one commit (``outputMode("append")``: an
Append; ``"complete"``: an Overwrite), written by the batch's tasks and
committed by Spark's sink commit with the batch id as an idempotent write
(:mod:`lance_ops.txn.idempotence`): app id = the ``txnAppId`` option, else
the streaming query's id (read from the checkpoint's ``metadata`` file, as
Delta's sink uses it), version = the batch id. A batch committed before a
crash that Spark replays after restart (the commit landed, the checkpoint's
commit log did not) is skipped and its new files removed -- never written
twice. History shows ``outputMode``, ``queryId`` and ``epochId``.

**Source** -- ``spark.readStream.format("lance").load(uri)``: offsets are
positions in the table's versions, ``{"version": v, "index": k, "snapshot":
b}`` -- everything before version ``v`` was delivered, and the first ``k``
units of version ``v``'s change set. A unit is one fragment: with
``snapshot`` the fragments of the version the query started at (its whole
content, as Delta's source starts), else the fragments version ``v`` added.
With ``readChangeFeed`` the stream is the change feed (Delta's rows and
columns, :mod:`lance_ops.txn.changefeed`): the table at the start as
inserts, then every version's changes -- deletes and updates included, one
unit per version. Options (Delta's names): ``startingVersion`` (a number: changes from that
version on, or ``latest``), ``startingTimestamp``, ``maxFilesPerTrigger`` /
``maxRowsPerTrigger`` (read limits; one unit at least), ``skipChangeCommits``
(versions that changed or deleted rows deliver nothing), ``ignoreDeletes``
(the same for deletes only). Versions that rewrote data without changing it
(compaction, a backfill's DataReplacement, Project, UpdateConfig, indices)
deliver nothing, nor does addColumns (the stream's columns are fixed when
it starts: restart it to read new columns); a version that deleted, updated
or replaced rows fails the
query with :class:`~lance_ops.errors.UnsupportedFeatureError` unless those
options say to skip it, as in Delta. Each micro-batch opens only the
manifests of the versions it covers.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from pyspark.sql import types as T
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..format.proto import table_pb2
from ..format.scan import FragmentScan, live_rows, scan_fragment
from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from ..storage.objectstore import ObjectStore
from ..txn.idempotence import TxnId
from ..txn.log import TableLog, latest_or_none, open_snapshot
from ..txn.operations import (
    Append,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Project,
    ReserveFragments,
    Rewrite,
    UpdateConfig,
)
from .errors import executor_task
from .types import spark_arrow_schema, to_spark_batch

# ------------------------------------------------------------------- sink


def _options(options) -> dict:
    return {k.lower(): v for k, v in dict(options).items()}


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


@dataclass
class StreamFragments(WriterCommitMessage):
    """What one task of a micro-batch wrote: serialized fragments."""

    fragments: list[bytes]


def _storage(options) -> dict:
    return {k[len("storage."):]: v for k, v in dict(options).items() if k.lower().startswith("storage.")}


def query_app_id(checkpoint: str | None, storage: dict) -> str:
    """The app id of a streaming query's writes: its query id from the
    checkpoint's ``metadata`` file (kept across restarts), else a digest of
    the checkpoint location."""
    if not checkpoint:
        raise InvalidArgumentError(
            "a lance streaming sink needs a checkpointLocation (or the txnAppId option): without one a restarted "
            "query could not tell which micro-batches it already committed"
        )
    try:
        doc = json.loads(ObjectStore(checkpoint, storage).read_bytes("metadata").decode().splitlines()[0])
        if doc.get("id"):
            return f"stream-{doc['id']}"
    except Exception:  # noqa: BLE001 - a location we cannot read: the digest below
        pass
    return "stream-" + hashlib.sha256(checkpoint.rstrip("/").encode()).hexdigest()[:32]


class LanceStreamWriter(DataSourceStreamArrowWriter):
    """One commit per micro-batch (see the module docstring)."""

    def __init__(self, options, schema: T.StructType, overwrite: bool):
        from .write import plan_write

        opts = _options(options)
        path = opts.get("path")
        if not path:
            raise InvalidArgumentError("the lance streaming sink needs a path: .start(uri)")
        storage = _storage(options)
        self.store = ObjectStore(path, storage)
        self.output_mode = "complete" if overwrite else "append"
        self.app_id = opts.get("txnappid") or query_app_id(opts.get("checkpointlocation"), storage)
        self.query_id = self.app_id[len("stream-"):] if self.app_id.startswith("stream-") else self.app_id
        snapshot = latest_or_none(self.store)
        self.plan = plan_write(
            self.store, schema, "overwrite" if overwrite else "append", snapshot=snapshot,
            stable_row_ids=_truthy(opts.get("stablerowids", True)),
            max_rows_per_fragment=int(opts.get("maxrowsperfragment") or DEFAULT_MAX_ROWS_PER_FRAGMENT),
            allow_missing=_truthy(opts.get("allowmissingcolumns", False)),
        )
        if snapshot is not None:
            from ..txn.constraints import constraints_of

            if constraints_of(snapshot.manifest.config):
                raise InvalidArgumentError(
                    f"the table at {path} has CHECK constraints {sorted(constraints_of(snapshot.manifest.config))}; "
                    "the streaming sink cannot evaluate them in its tasks -- write each batch with "
                    "LanceTable(spark, uri).append(df, txnAppId=..., txnVersion=batchId) in foreachBatch"
                )

    @executor_task
    def write(self, iterator):
        from .write import write_task

        return StreamFragments(list(write_task(self.plan, iterator)))

    def commit(self, messages, batchId: int) -> None:
        from dataclasses import replace

        from ..txn.pipeline import WriteOptions, execute
        from .write import must_not_exist, new_table, staged_write

        frags = [f for m in messages if m is not None for f in m.fragments]
        latest = latest_or_none(self.store)
        plan = self.plan
        if latest is not None and not plan.exists:  # the first batch created the table
            plan = replace(plan, exists=True, read_version=latest.version)
        staged = staged_write(plan, frags)
        staged.parameters = {"mode": plan.mode, "outputMode": self.output_mode, "queryId": self.query_id,
                             "epochId": str(batchId)}
        checks = [] if latest is not None else [must_not_exist]
        info = execute(self.store, latest, lambda snap: staged,
                       WriteOptions(checks=checks, new_table=new_table(plan), txn=TxnId(self.app_id, int(batchId))))
        if info.skipped:  # a replayed batch: its new files are nobody's
            self.abort(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        for m in messages:
            if m is None:
                continue
            for b in m.fragments:
                for df in table_pb2.DataFragment.FromString(b).files:
                    self.store.delete(f"data/{df.path}")


# ----------------------------------------------------------------- source

#: Operations that change no row: their versions deliver nothing.
_NO_ROWS = (Rewrite, DataReplacement, Project, UpdateConfig, CreateIndex, ReserveFragments)


def _same_rows(before, after) -> bool:
    """Whether two versions' fragments hold the same rows (ids, row counts,
    deletions): what a Merge that only adds columns leaves."""
    def rows(frags):
        return sorted((f.id, f.physical_rows, live_rows(f)) for f in frags)
    return rows(before) == rows(after)


class StreamPartition(InputPartition):
    """Fragments (version, serialized fragment) one task reads."""

    def __init__(self, units: list[tuple[int, bytes]]):
        super().__init__(len(units))
        self.units = units


class LanceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema: T.StructType):
        opts = _options(options)
        if not opts.get("path"):
            raise InvalidArgumentError("the lance streaming source needs a path: .load(uri)")
        self.store = ObjectStore(opts["path"], _storage(options))
        self.log = TableLog(self.store)
        self.columns = [f.name for f in schema.fields]
        self.arrow_target = spark_arrow_schema(schema)
        self.skip_changes = _truthy(opts.get("skipchangecommits", False))
        self.ignore_deletes = _truthy(opts.get("ignoredeletes", False)) or self.skip_changes
        self.max_files = int(opts["maxfilespertrigger"]) if opts.get("maxfilespertrigger") else None
        self.max_rows = int(opts["maxrowspertrigger"]) if opts.get("maxrowspertrigger") else None
        #: readChangeFeed: every version delivers its change rows (Delta's
        #: _change_type / _commit_version / _commit_timestamp columns)
        self.cdf = _truthy(opts.get("readchangefeed", False))
        self.starting = opts.get("startingversion")
        self.starting_ts = opts.get("startingtimestamp")
        latest = open_snapshot(self.store)
        self.schema_version = latest.version
        self.lance_schema = latest.schema
        self.stable_row_ids = latest.stable_row_ids
        if self.cdf and not self.stable_row_ids:
            raise UnsupportedFeatureError(
                f"the change feed needs stable row ids ({self.store.root} has none): without them rows have no "
                "identity across versions. Create the table with stableRowIds=True."
            )
        self._manifests: dict[int, object] = {}
        #: trigger(availableNow=True): no version after this one is read
        self._until: int | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self.log.latest_version() or 0

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_manifests"] = {}
        state["log"] = None
        return state

    # -- offsets
    def initialOffset(self) -> dict:
        latest = self.log.latest_version() or 0
        if self.starting is not None and str(self.starting).lower() == "latest":
            return {"version": latest + 1, "index": 0, "snapshot": False}
        if self.starting is not None:
            try:
                v = int(self.starting)
            except ValueError:
                raise InvalidArgumentError(f"startingVersion must be a version number or 'latest', got {self.starting!r}") from None
            if v < 1 or v > latest + 1:
                raise InvalidArgumentError(f"startingVersion {v} is outside the table's versions 1..{latest}")
            return {"version": v, "index": 0, "snapshot": False}
        if self.starting_ts is not None:
            return {"version": self._version_at(self.starting_ts), "index": 0, "snapshot": False}
        return {"version": latest, "index": 0, "snapshot": True}

    def _version_at(self, ts: str) -> int:
        import datetime

        from ..txn.history import _timestamp

        when = datetime.datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        for loc in self.log.versions():
            stamp = _timestamp(self._manifest(loc.version).manifest)
            if stamp is not None and stamp >= when:
                return loc.version
        raise InvalidArgumentError(f"startingTimestamp {ts} is after the table's latest commit")

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, ReadMaxRows

        if self.max_files:
            return ReadMaxFiles(self.max_files)
        if self.max_rows:
            return ReadMaxRows(self.max_rows)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        from pyspark.sql.streaming.datasource import ReadMaxFiles, ReadMaxRows

        latest = self.log.latest_version() or 0
        if self._until is not None:
            latest = min(latest, self._until)
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        pos = dict(start)
        files = rows = 0
        while pos["version"] <= latest:
            units = self._units(pos["version"], pos["snapshot"])
            for i in range(pos["index"], len(units)):
                n = live_rows(units[i]) if isinstance(units[i], table_pb2.DataFragment) else 0
                if (max_files is not None and files >= max_files) or (
                        max_rows is not None and files and rows + n > max_rows):
                    return {**pos, "index": i}
                files += 1
                rows += n
            pos = {"version": pos["version"] + 1, "index": 0, "snapshot": False}
        return pos

    def reportLatestOffset(self):
        latest = self.log.latest_version()
        return {"version": (latest or 0) + 1, "index": 0, "snapshot": False}

    def partitions(self, start: dict, end: dict):
        units: list[tuple[int, bytes]] = []
        changed: list[int] = []
        pos = dict(start)
        while (pos["version"], pos["index"]) < (end["version"], end["index"]):
            if self.cdf and not pos["snapshot"]:
                changed.append(pos["version"])
            else:
                frags = self._units(pos["version"], pos["snapshot"])
                stop = end["index"] if pos["version"] == end["version"] else len(frags)
                units += [(pos["version"], f.SerializeToString()) for f in frags[pos["index"]:stop]]
            pos = {"version": pos["version"] + 1, "index": 0, "snapshot": False}
        parts: list = [StreamPartition([u]) for u in units]
        if changed:
            from ..txn.changefeed import plan_feed
            from .changefeed import group_items

            plan = plan_feed(self.store, changed[0] - 1, changed[-1])
            parts += [p for p in group_items(plan.items, bases=plan.store.bases) if p.items]
        return parts

    @executor_task
    def read(self, partition):
        if not isinstance(partition, StreamPartition):  # a change feed partition
            yield from self._read_changes(partition)
            return
        for version, data in partition.units:
            frag = table_pb2.DataFragment.FromString(data)
            if self.cdf:  # the table as the stream started: every row an insert
                yield from self._as_inserts(version, frag)
                continue
            scan = FragmentScan(frag, self.columns, [], stable_row_ids=self.stable_row_ids)
            for batch in scan_fragment(self.store, self.lance_schema, scan):
                if batch.num_rows:
                    yield to_spark_batch(batch, self.arrow_target)

    def _feed_columns(self) -> list[str]:
        from ..txn.changefeed import CDF_COLUMNS

        return [c for c in self.columns if c not in CDF_COLUMNS]

    def _as_inserts(self, version: int, frag):
        import numpy as np
        import pyarrow as pa

        from ..txn.changefeed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, INSERT

        micros = self._commit_micros(version)
        scan = FragmentScan(frag, self._feed_columns(), [], stable_row_ids=True)
        for batch in scan_fragment(self.store, self.lance_schema, scan):
            n = batch.num_rows
            if not n:
                continue
            cols = {name: batch.column(name) for name in batch.schema.names}
            cols[CHANGE_TYPE] = pa.array([INSERT] * n, pa.string())
            cols[COMMIT_VERSION] = pa.array(np.full(n, version, dtype=np.int64))
            cols[COMMIT_TIMESTAMP] = pa.array(np.full(n, micros, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC"))
            yield to_spark_batch(pa.RecordBatch.from_arrays([cols[c] for c in self.columns], names=self.columns),
                                 self.arrow_target)

    def _commit_micros(self, version: int) -> int:
        m = self._manifest(version).manifest
        return m.timestamp.seconds * 1_000_000 + m.timestamp.nanos // 1000 if m.HasField("timestamp") else 0

    def _read_changes(self, partition):
        from .changefeed import change_batches

        store = ObjectStore(self.store.uri, self.store.storage_options)
        store.bases = dict(partition.bases)
        yield from change_batches(store, self.lance_schema, partition.items, self._feed_columns(), self.columns,
                                  self.arrow_target)

    def commit(self, end: dict) -> None:
        pass

    # -- what a version delivers
    def _manifest(self, version: int):
        if self.log is None:
            self.log = TableLog(self.store)
        found = self._manifests.get(version)
        if found is None:
            found = self.log.read_manifest(version)
            self._manifests[version] = found
            while len(self._manifests) > 64:
                self._manifests.pop(next(iter(self._manifests)))
        return found

    def _units(self, version: int, snapshot: bool) -> list:
        """The fragments version ``version`` delivers, in id order."""
        mf = self._manifest(version)
        frags = sorted(mf.manifest.fragments, key=lambda f: f.id)
        if snapshot:
            return [f for f in frags if live_rows(f)]
        if self.cdf:  # a version's change set is one unit: its changed fragments
            return [mf.manifest]
        if version == 1:
            return [f for f in frags if live_rows(f)]
        txn = self.log.read_transaction(version, mf)
        op = txn.operation if txn is not None else None
        if isinstance(op, _NO_ROWS):
            return []
        prev = self._manifest(version - 1).manifest
        if isinstance(op, Append):
            before = prev.max_fragment_id if prev.HasField("max_fragment_id") else max((f.id for f in prev.fragments), default=-1)
            return [f for f in frags if f.id > before and live_rows(f)]
        if isinstance(op, Merge) and _same_rows(prev.fragments, frags):
            return []  # new columns for the same rows (addColumns): nothing to deliver
        if isinstance(op, Delete) and self.ignore_deletes:
            return []
        if self.skip_changes:
            return []
        what = op.name if op is not None else "an unknown transaction"
        raise UnsupportedFeatureError(
            f"version {version} of {self.store.root} changed existing rows ({what}); a lance stream delivers "
            "appended rows only. Restart the query with the option skipChangeCommits=true to skip such versions"
            + (" (or ignoreDeletes=true for deletes)" if isinstance(op, Delete) else "")
            + ", or from a later startingVersion"
        )
