"""The commit loop.

Data and deletion files are written before this runs. Then, per attempt:

1. list ``_versions/`` for the latest version n;
2. check the transaction of every version committed since we last looked
   against ours (:mod:`.conflicts`): rebase, or raise
   :class:`CommitConflictError` (retryable or not);
3. build the manifest of version n+1 on top of version n (:mod:`.build`);
4. write ``_transactions/{read_version}-{uuid}.txn``;
5. put-if-not-exists the manifest of version n+1 (inline transaction section
   included). If another writer took n+1 first, back off and go to 1;
6. write the version hint (best effort).

The check runs before every attempt, the first included, so a stale writer
rebases before it writes anything. Nothing is ever overwritten: a failed commit
leaves at most an orphan ``.txn`` (and the operation's data files), which
``vacuum`` removes.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

from ..errors import CommitConflictError
from ..format.features import check_writable
from ..format.manifest import ManifestFile, encode_manifest_file
from ..format.naming import TRANSACTIONS_DIR, ManifestNaming
from ..storage.objectstore import ObjectStore
from .build import BuildContext, build_manifest
from .conflicts import Pending, check, rebase
from .log import Snapshot, TableLog, open_snapshot
from .operations import Transaction

log = logging.getLogger(__name__)

#: pylance gives up after 20 lost races.
DEFAULT_MAX_ATTEMPTS = 20


@dataclass
class CommitResult:
    snapshot: Snapshot
    transaction: Transaction
    #: Concurrent commits this one was checked and rebased over.
    concurrent: int
    #: Lost manifest races.
    attempts: int

    @property
    def version(self) -> int:
        return self.snapshot.version


def commit(
    store: ObjectStore,
    txn: Transaction,
    *,
    stable_row_ids: bool = False,
    data_format: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> CommitResult:
    """Commit ``txn`` (read at ``txn.read_version``; 0 for a new table).

    ``stable_row_ids`` and ``data_format`` only apply when creating a table.
    """
    tlog = TableLog(store)
    checked = txn.read_version
    concurrent = 0
    attempts = 0
    pending = Pending()
    latest: Snapshot | None = None
    started = time.monotonic()
    unit = None
    while True:
        manifests = tlog.manifests()
        latest_version = manifests[-1][0] if manifests else 0
        naming = manifests[-1][1] if manifests else ManifestNaming.V2
        if latest_version > checked:
            for v in range(checked + 1, latest_version + 1):
                theirs = tlog.read_transaction(v)
                pending.add(v, theirs, txn, check(txn, theirs, v))
                concurrent += 1
            pending.raise_if_conflict(txn)
            checked = latest_version
            latest = open_snapshot(store, latest_version)
            txn = rebase(txn, pending, latest)
        elif latest_version and (latest is None or latest.version != latest_version):
            latest = open_snapshot(store, latest_version)
        if latest is not None:
            check_writable(latest.manifest, f"at {store.root}")

        new_version = latest_version + 1
        ctx = BuildContext(
            previous=latest,
            version=new_version,
            stable_row_ids=stable_row_ids,
            data_format=data_format,
            load_snapshot=lambda v: open_snapshot(store, v),
        )
        manifest, indices = build_manifest(ctx, txn)
        txn_bytes = txn.to_bytes()
        store.write_bytes(f"{TRANSACTIONS_DIR}/{txn.file_name}", txn_bytes)
        data = encode_manifest_file(manifest, txn_bytes, indices)
        if store.put_if_not_exists(naming.path(new_version), data):
            tlog.write_hint(new_version)
            mf = ManifestFile(manifest, txn_bytes, indices, len(data))
            snap = Snapshot(store, new_version, mf, naming)
            return CommitResult(snap, txn, concurrent, attempts)
        attempts += 1
        if attempts >= max_attempts:
            raise CommitConflictError(
                f"failed to commit {txn.operation.name} after {attempts} attempts: other writers "
                "kept committing first",
                retryable=True,
            )
        if unit is None:
            unit = max(0.005, 1.1 * (time.monotonic() - started))
        delay = random.random() * (2 ** min(attempts + 1, 6)) * unit
        log.debug("lost the race for version %s; retrying in %.3fs", new_version, delay)
        time.sleep(min(delay, 2.0))
