"""The commit loop: the one place a transaction becomes a version.

Data and deletion files are written before this runs. Then, per attempt:

1. ask the commit handler for the latest version n;
2. check the transaction of every version committed since we last looked
   against ours (:mod:`.conflicts`): rebase, or raise
   :class:`CommitConflictError` (retryable or not);
3. build the manifest of version n+1 on top of version n (:mod:`.build`);
4. run the pre-commit checks (:class:`Check`) -- on the first attempt and
   again after every rebase, against the manifest about to be committed;
5. write ``_transactions/{read_version}-{uuid}.txn``;
6. hand the manifest (inline transaction section included) to the commit
   handler's put-if-not-exists. If another writer took n+1 first, back off
   and go to 1;
7. write the version hint (best effort).

The conflict check runs before every attempt, the first included, so a stale
writer rebases before it writes anything. Nothing is ever overwritten: a
failed commit leaves at most an orphan ``.txn`` (and the operation's data
files, which :mod:`.pipeline` removes), never a partial version.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from ..errors import CommitConflictError
from ..format.features import check_writable
from ..format.manifest import ManifestFile, encode_manifest_file
from ..format.messages import copy_message
from ..format.naming import TRANSACTIONS_DIR, ManifestNaming, staged_manifest_path
from ..storage.objectstore import ObjectStore
from .bases import attach_bases
from .build import BuildContext, build_manifest
from .conflicts import Pending, check, rebase
from .log import Snapshot, TableLog, open_snapshot, remember
from .operations import Transaction

log = logging.getLogger(__name__)

#: pylance gives up after 20 lost races.
DEFAULT_MAX_ATTEMPTS = 20
#: Longest sleep after a lost race.
MAX_BACKOFF_S = 0.5


@dataclass
class NewTable:
    """How to create a table (the first commit at a location)."""

    stable_row_ids: bool = True
    data_format: str | None = None


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


@dataclass
class CheckContext:
    """What a pre-commit check sees: the transaction about to commit, the
    version it commits on top of (``base``, None for a new table) and the
    version it would create (``staged``: a snapshot of the built manifest,
    not committed -- nothing can read it by version)."""

    store: ObjectStore
    transaction: Transaction
    base: Snapshot | None
    staged: Snapshot
    #: How many rebases preceded this run of the checks.
    rebases: int = 0
    #: Scratch space a check may use across runs of one commit.
    state: dict = field(default_factory=dict)
    #: Transaction properties a check adds to the commit (e.g. a data-quality
    #: gate's result summary); written with the transaction, shown by history().
    properties: dict = field(default_factory=dict)
    _published: str | None = None

    def published_manifest(self) -> str:
        """The staged manifest written to ``_staging/`` (path relative to the
        root) so that other processes -- Spark executors reading the staged
        rows -- can open it. Readers of versions never see it; it is removed
        when the checks are done (vacuum removes leftovers)."""
        if self._published is None:
            mf = self.staged.file
            data = encode_manifest_file(copy_message(mf.manifest), mf.transaction_bytes, mf.indices)
            rel = staged_manifest_path(self.transaction.uuid, self.rebases)
            self.store.write_bytes(rel, data)
            self._published = rel
        return self._published

    def new_fragment_ids(self) -> list[int]:
        """Fragments of the staged version that the base does not have, or has
        with other data files (the rows this change writes)."""
        before = {f.id: list(f.files) for f in self.base.fragments} if self.base is not None else {}
        return [f.id for f in self.staged.fragments if before.get(f.id) != list(f.files)]


class Check(Protocol):
    """A pre-commit hook: raise (a LanceOpsError) to stop the commit. Runs on
    the first attempt and after every rebase, so it always judges the state
    that would actually be committed."""

    def __call__(self, ctx: CheckContext) -> None: ...


def commit(
    store: ObjectStore,
    txn: Transaction,
    *,
    new_table: NewTable | None = None,
    checks: Sequence[Check] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    on_rebase: Callable[[Transaction, Snapshot], None] | None = None,
) -> CommitResult:
    """Commit ``txn`` (read at ``txn.read_version``; 0 for a new table).

    ``new_table`` applies only when the location holds no table yet.
    ``on_rebase`` is told about every rebased transaction and the version it
    was rebased onto (the pipeline tracks the files a rebase wrote).
    """
    tlog = TableLog(store)
    handler = tlog.handler
    checked = txn.read_version
    concurrent = 0
    attempts = 0
    pending = Pending()
    latest: Snapshot | None = None
    attempt_started = time.monotonic()
    checked_at: int | None = None  # the concurrent-commit count the checks last saw
    state: dict = {}
    new_table = new_table or NewTable()
    while True:
        attempt_started = time.monotonic()
        top = handler.latest()
        latest_version = top.version if top else 0
        naming = top.naming if top else ManifestNaming.V2
        if latest_version > checked:
            for v in range(checked + 1, latest_version + 1):
                theirs = tlog.read_transaction(v)
                pending.add(v, theirs, txn, check(txn, theirs, v))
                concurrent += 1
            pending.raise_if_conflict(txn)
            checked = latest_version
            latest = open_snapshot(store, latest_version)
            txn = rebase(txn, pending, latest)
            if on_rebase is not None:
                on_rebase(txn, latest)
        elif latest_version and (latest is None or latest.version != latest_version):
            latest = open_snapshot(store, latest_version)
        if latest is not None:
            check_writable(latest.manifest, f"at {store.root}")

        new_version = latest_version + 1
        ctx = BuildContext(
            previous=latest,
            version=new_version,
            stable_row_ids=new_table.stable_row_ids,
            data_format=new_table.data_format,
            load_snapshot=lambda v: open_snapshot(store, v),
        )
        manifest, indices = build_manifest(ctx, txn)
        txn_bytes = txn.to_bytes()
        if checks and checked_at != concurrent:
            staged = Snapshot(store, new_version, ManifestFile(manifest, txn_bytes, indices, 0), naming)
            cctx = CheckContext(store, txn, latest, staged, rebases=concurrent, state=state)
            try:
                for c in checks:
                    c(cctx)
            finally:
                if cctx._published is not None:
                    store.delete(cctx._published)
            checked_at = concurrent
            if cctx.properties:
                txn.properties.update({str(k): str(v) for k, v in cctx.properties.items()})
                txn_bytes = txn.to_bytes()
        store.write_bytes(f"{TRANSACTIONS_DIR}/{txn.file_name}", txn_bytes)
        data = encode_manifest_file(manifest, txn_bytes, indices, ctx.dictionaries)
        try:
            loc = handler.commit(new_version, naming, data)
        except BaseException as e:
            # The put may or may not have happened: the caller must not delete
            # the files this transaction references.
            try:
                e.lance_ops_commit_unknown = True  # type: ignore[attr-defined]
            except AttributeError:
                pass
            raise
        if loc is not None:
            tlog.write_hint(new_version)
            mf = ManifestFile(manifest, txn_bytes, indices, len(data), ctx.dictionaries)
            attach_bases(store, manifest)
            remember(store, loc, mf)
            snap = Snapshot(store, new_version, mf, loc.naming)
            return CommitResult(snap, txn, concurrent, attempts)
        attempts += 1
        if attempts >= max_attempts:
            raise CommitConflictError(
                f"failed to commit {txn.operation.name} after {attempts} attempts: other writers "
                "kept committing first",
                retryable=True,
            )
        # Back off a random slice of a few attempt lengths. Commits serialize
        # on the manifest put, so the table's rate is one commit per attempt
        # at best: a short, capped backoff keeps a contender ready for the
        # next window, while jitter spreads them (pylance grows the slot to
        # 2^(k+2) attempt lengths, which leaves the table idle under 8
        # contenders on a busy machine).
        unit = max(0.005, 1.1 * (time.monotonic() - attempt_started))
        delay = min(MAX_BACKOFF_S, random.random() * (2 ** min(attempts, 2)) * unit)
        log.debug("lost the race for version %s; retrying in %.3fs", new_version, delay)
        time.sleep(delay)
