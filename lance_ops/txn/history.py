"""history() and detail(): metadata only, read without Spark.

``history()`` has one row per version, newest first, built from each version's
manifest (timestamp) and transaction (operation, read version, parameters),
as Delta's DESCRIBE HISTORY: ``operation`` in Delta's words (WRITE, DELETE,
UPDATE, MERGE, OPTIMIZE, RESTORE, ADD COLUMNS, ... -- what lance_ops recorded
when it committed, or derived from the transaction for versions other writers
made), ``operationParameters`` with Delta's names (``mode``, ``predicate``,
``matchedPredicates``, ...), and the Lance transaction type in a column of
its own, ``lanceOperation`` (pylance sees that transaction).
Metrics are what lance_ops recorded in the transaction's properties (Delta's
names, the same keys as the write's ``CommitInfo.metrics``); for versions
written by pylance they are derived from the transaction (added / removed
fragments) where that is possible. ``userMetadata`` holds the transaction
properties that are neither lance_ops' nor pylance's own: the
``commitProperties`` a writer passed (job names, Airflow run ids).
"""
from __future__ import annotations

import datetime
import json

from ..errors import CorruptTableError
from ..format.schema import Field, Schema
from .log import Snapshot, TableLog
from .operations import Append, Delete, Merge, Overwrite, Project, Rewrite, Transaction, Update, UpdateConfig
from .pipeline import METRIC_PREFIX, OPERATION_KEY, PARAM_PREFIX, RESERVED_PROPERTY_PREFIXES

#: Columns of a history row, in order (Delta's, then Lance's own).
HISTORY_COLUMNS = (
    "version", "timestamp", "operation", "readVersion", "operationParameters", "operationMetrics",
    "userMetadata", "writer", "transactionUuid", "lanceOperation", "isolationLevel", "isBlindAppend", "engineInfo",
)

#: Delta's name for the guarantee Lance's conflict rules give (blind appends
#: commit over anything, other writes conflict on what they read and changed):
#: WriteSerializable, Delta's default.
ISOLATION_LEVEL = "WriteSerializable"

#: Delta's word for a version another writer made, by Lance transaction type
#: (Merge and Project are refined by the schema change they made).
DELTA_OPERATIONS = {
    "Append": "WRITE", "Overwrite": "WRITE", "Delete": "DELETE", "Update": "UPDATE", "Rewrite": "OPTIMIZE",
    "Restore": "RESTORE", "CreateIndex": "CREATE INDEX", "ReserveFragments": "RESERVE FRAGMENTS",
    "DataReplacement": "DATA REPLACEMENT", "Clone": "SHALLOW CLONE", "UpdateBases": "UPDATE BASES",
    "UpdateMemWalState": "UPDATE MEM WAL STATE", "Merge": "CHANGE COLUMN", "Project": "CHANGE COLUMN",
    "UpdateConfig": "SET TBLPROPERTIES",
}


def _timestamp(m) -> datetime.datetime | None:
    if not m.HasField("timestamp"):
        return None
    # Exact integer arithmetic, truncated to microseconds as pylance does: a
    # float here rounds some commits up by 1 us, after a timestamp that names them.
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return epoch + datetime.timedelta(seconds=m.timestamp.seconds, microseconds=m.timestamp.nanos // 1000)


def history_rows(store, limit: int | None = None, upto: int | None = None) -> list[dict]:
    """One dict per version (newest first) with :data:`HISTORY_COLUMNS`;
    ``upto`` hides versions newer than a time-travel handle's."""
    log = TableLog(store)
    if limit is not None and upto is None:
        versions = log.handler.newest(limit)  # (S3: the first keys only; nothing but n manifests read)
    else:
        versions = [loc for loc in log.versions() if upto is None or loc.version <= upto]
        versions.reverse()
        if limit is not None:
            versions = versions[: max(0, limit)]
    rows = []
    for loc in versions:
        v = loc.version
        mf = log.read_manifest(loc)
        if mf.manifest.version != v:
            # (a manifest copied over another version's: open_snapshot refuses it too)
            raise CorruptTableError(f"manifest file of version {v} says it is version {mf.manifest.version}",
                                    store.path(loc.path))
        m = mf.manifest
        txn = log.read_transaction(v, mf)
        row = dict.fromkeys(HISTORY_COLUMNS)
        writer = f"{m.writer_version.library} {m.writer_version.version}".strip()
        row.update(version=v, timestamp=_timestamp(m), operationParameters={}, operationMetrics={}, userMetadata={},
                   writer=writer, engineInfo=writer, isolationLevel=ISOLATION_LEVEL)
        if txn is not None:
            params, metrics, user = _describe(txn)
            changes = {}
            if isinstance(txn.operation, (Merge, Project)) and v > 1:
                changes = _schema_changes(log, v - 1, m)
                params = {**changes, **params}
            ours = txn.properties.get(OPERATION_KEY)
            operation = ours or _delta_operation(txn, changes)
            if not ours:
                params = _delta_parameters(txn, params)
            row.update(operation=operation, readVersion=txn.read_version, operationParameters=params,
                       operationMetrics=metrics, userMetadata=user, transactionUuid=txn.uuid,
                       lanceOperation=txn.operation.name, isBlindAppend=isinstance(txn.operation, Append))
        rows.append(row)
    return rows


def _delta_operation(txn: Transaction, changes: dict) -> str:
    """Delta's word for a version lance_ops did not name (pylance's, or one
    committed before lance_ops recorded names)."""
    op = txn.operation
    if isinstance(op, (Merge, Project)):
        if "addedColumns" in changes:
            return "ADD COLUMNS"
        if "droppedColumns" in changes:
            return "DROP COLUMNS"
        if "renamedColumns" in changes:
            return "RENAME COLUMN"
    if isinstance(op, UpdateConfig):
        entries = [v for m in (op.config_updates,) if m for v in m[0].values()]
        if entries and all(v is None for v in entries):
            return "UNSET TBLPROPERTIES"
    return DELTA_OPERATIONS.get(op.name, op.name.upper())


def _delta_parameters(txn: Transaction, params: dict) -> dict:
    """Delta's parameter names for a version another writer made."""
    op = txn.operation
    out = dict(params)
    if isinstance(op, Append):
        out.setdefault("mode", "Append")
    elif isinstance(op, Overwrite):
        out.setdefault("mode", "Overwrite")
    elif isinstance(op, Delete) and "predicate" in out and not str(out["predicate"]).startswith("["):
        out["predicate"] = json.dumps([out["predicate"]] if out["predicate"] else [])
    return out


def _schema_changes(log: TableLog, previous: int, manifest) -> dict[str, str]:
    """Columns a schema change added, dropped or renamed (by field id), compared
    with the version before -- also for versions other writers made."""
    try:
        prev = log.read_manifest(previous).manifest
    except Exception:
        return {}
    if prev.version != previous:
        return {}
    before = Schema.from_proto(prev.fields)
    after = Schema.from_proto(manifest.fields)
    old, new = {f.id: f.name for f in before.fields}, {f.id: f.name for f in after.fields}
    out = {}
    added = [n for i, n in new.items() if i not in old]
    dropped = [n for i, n in old.items() if i not in new]
    renamed = [f"{old[i]} -> {n}" for i, n in new.items() if i in old and old[i] != n]
    for key, names in (("addedColumns", added), ("droppedColumns", dropped), ("renamedColumns", renamed)):
        if names:
            out[key] = ", ".join(names)
    return out


def _describe(txn: Transaction) -> tuple[dict, dict, dict]:
    params = {k: str(v) for k, v in txn.operation.parameters().items()}
    metrics: dict[str, str] = {}
    user: dict[str, str] = {}
    for k, v in txn.properties.items():
        if k.startswith(PARAM_PREFIX):
            params[k[len(PARAM_PREFIX):]] = v
        elif k.startswith(METRIC_PREFIX):
            metrics[k[len(METRIC_PREFIX):]] = v
        elif k == "__lance_commit_message":
            params["commitMessage"] = v
        elif not k.startswith(RESERVED_PROPERTY_PREFIXES):
            user[k] = v
    if not metrics:
        metrics = _derived_metrics(txn)
    return params, metrics, user


def _derived_metrics(txn: Transaction) -> dict[str, str]:
    op = txn.operation
    if isinstance(op, (Append, Overwrite)):
        return {
            "numAddedFragments": str(len(op.fragments)),
            "numInsertedRows": str(sum(f.physical_rows for f in op.fragments)),
        }
    if isinstance(op, Delete):
        return {
            "numRemovedFragments": str(len(op.deleted_fragment_ids)),
            "numUpdatedFragments": str(len(op.updated_fragments)),
        }
    if isinstance(op, Update):
        return {
            "numRemovedFragments": str(len(op.removed_fragment_ids)),
            "numUpdatedFragments": str(len(op.updated_fragments)),
            "numAddedFragments": str(len(op.new_fragments)),
        }
    if isinstance(op, Rewrite):
        return {
            "numRemovedFragments": str(sum(len(g.old_fragments) for g in op.groups)),
            "numAddedFragments": str(sum(len(g.new_fragments) for g in op.groups)),
        }
    if isinstance(op, Merge):
        return {"numFragments": str(len(op.fragments))}
    return {}


def field_dict(f: Field) -> dict:
    d = {
        "name": f.name,
        "id": f.id,
        "type": f.logical_type,
        "nullable": f.nullable,
    }
    if f.metadata:
        d["metadata"] = {k: v.decode("utf-8", "replace") for k, v in f.metadata.items()}
    if f.children:
        d["children"] = [field_dict(c) for c in f.children]
    return d


def first_version(store) -> dict:
    """``createdAt`` (the timestamp of the earliest version kept) and ``id``
    (the uuid of version 1's transaction: the table's identity, None once
    vacuum removed version 1) -- what Delta's DESCRIBE DETAIL shows."""
    log = TableLog(store)
    versions = log.versions()
    if not versions:
        return {"createdAt": None, "id": None}
    first = versions[0]
    mf = log.read_manifest(first)
    out = {"createdAt": _timestamp(mf.manifest), "id": None}
    if first.version == 1:
        try:
            txn = log.read_transaction(1, mf)
        except Exception:  # (a damaged transaction file must not break detail())
            txn = None
        out["id"] = txn.uuid if txn is not None else None
    return out


def detail(snapshot: Snapshot) -> dict:
    m = snapshot.manifest
    size = 0
    files = 0
    for frag in snapshot.fragments:
        for df in frag.files:
            size += df.file_size_bytes
            files += 1
    ts = _timestamp(m)
    return {
        "location": snapshot.store.root,
        "version": snapshot.version,
        "timestamp": ts,
        "numFiles": files,
        "numFragments": len(snapshot.fragments),
        "numRows": snapshot.num_rows(),
        "numDeletedRows": snapshot.num_deleted_rows(),
        "sizeInBytes": size,
        "readerFeatureFlags": int(m.reader_feature_flags),
        "writerFeatureFlags": int(m.writer_feature_flags),
        "stableRowIds": snapshot.stable_row_ids,
        "dataFormatVersion": snapshot.data_format_version,
        "nextRowId": int(m.next_row_id),
        "maxFragmentId": int(m.max_fragment_id) if m.HasField("max_fragment_id") else None,
        "numIndices": len(snapshot.indices),
        "config": dict(m.config),
        "manifestNaming": snapshot.naming.value,
        "writerVersion": f"{m.writer_version.library} {m.writer_version.version}".strip(),
        "schema": [field_dict(f) for f in snapshot.schema.fields],
    }
