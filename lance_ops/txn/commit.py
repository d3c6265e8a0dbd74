"""The commit loop: the one place a transaction becomes a version.

Data and deletion files are written before this runs. Then, per attempt:

1. ask the commit handler for the latest version n;
2. check the transaction of every version committed since we last looked
   against ours (:mod:`.conflicts`): rebase, or raise
   :class:`CommitConflictError` (retryable or not);
3. build the manifest of version n+1 on top of version n (:mod:`.build`);
4. run the pre-commit checks (:class:`Check`) -- on the first attempt and
   again after every rebase, against the manifest about to be committed;
5. check that the files the change adds still exist (:mod:`.files`);
6. write ``_transactions/{read_version}-{uuid}.txn``;
7. hand the manifest (inline transaction section included) to the commit
   handler's put-if-not-exists. Refused because n+1 exists: if n+1 holds
   *our* transaction (the store applied the put and its answer was lost), the
   commit is done; else another writer took it -- back off and go to 1. A put
   that fails outright is settled the same way, by reading n+1 (putting
   again while it does not exist); if the store cannot be asked,
   :class:`CommitOutcomeUnknownError`. A change is never committed twice;
8. write the version hint (best effort).

The conflict check runs before every attempt, the first included, so a stale
writer rebases before it writes anything. Nothing is ever overwritten: a
failed commit leaves at most an orphan ``.txn`` (and the operation's data
files, which :mod:`.pipeline` removes once the commit is known not to have
happened), never a partial version.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from ..errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    InvalidArgumentError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from ..format.features import check_writable
from ..format.manifest import ManifestFile, encode_manifest_file
from ..format.messages import copy_message
from ..format.naming import TRANSACTIONS_DIR, ManifestNaming, staged_manifest_path
from ..storage.commit import ManifestLocation
from ..storage.objectstore import ObjectStore
from .bases import attach_bases
from .build import BuildContext, build_manifest
from .conflicts import Pending, check, rebase
from .files import committed_files, missing_files, snapshot_files
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


#: Rounds spent finding out whether a put whose answer was lost happened.
SETTLE_ATTEMPTS = 6
#: Longest sleep between two of those rounds.
MAX_SETTLE_BACKOFF_S = 2.0


@dataclass
class CommitState:
    """What a caller of :func:`commit` needs to know when it raises: whether
    a manifest put was in doubt at that moment (sent, its outcome not yet
    known). The pipeline keeps every file of a change whose commit was in
    doubt -- a committed version may name them. Besides a
    :class:`CommitOutcomeUnknownError` this covers interrupts (e.g.
    KeyboardInterrupt) that stop a put half way."""

    in_doubt: bool = False


def commit(
    store: ObjectStore,
    txn: Transaction,
    *,
    new_table: NewTable | None = None,
    checks: Sequence[Check] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    on_rebase: Callable[[Transaction, Snapshot], None] | None = None,
    state: CommitState | None = None,
) -> CommitResult:
    """Commit ``txn`` (read at ``txn.read_version``; 0 for a new table).

    ``new_table`` applies only when the location holds no table yet.
    ``on_rebase`` is told about every rebased transaction and the version it
    was rebased onto (the pipeline tracks the files a rebase wrote).

    A put-if-not-exists refused because the version exists is a lost race
    only if that version holds another transaction: when it holds ours (the
    store applied our put and its answer was lost, so a retry found the name
    taken) the commit succeeded. A put that fails outright is settled the
    same way (:func:`_settle`); when the store cannot tell,
    :class:`CommitOutcomeUnknownError` -- never a second copy of the change.
    """
    state = state if state is not None else CommitState()
    try:
        return _commit(store, txn, new_table, checks, max_attempts, on_rebase, state)
    except Exception as e:
        if state.in_doubt and not isinstance(e, CommitOutcomeUnknownError):
            raise _unknown(store, txn, None, e) from e
        raise


def _commit(store, txn, new_table, checks, max_attempts, on_rebase, state: CommitState) -> CommitResult:
    tlog = TableLog(store)
    handler = tlog.handler
    checked = txn.read_version
    concurrent = 0
    attempts = 0
    pending = Pending()
    latest: Snapshot | None = None
    checked_at: int | None = None  # the concurrent-commit count the checks last saw
    check_state: dict = {}
    new_table = new_table or NewTable()
    while True:
        attempt_started = time.monotonic()
        top = handler.latest()
        latest_version = top.version if top else 0
        naming = top.naming if top else ManifestNaming.V2
        if latest_version > checked:
            for v in range(checked + 1, latest_version + 1):
                theirs = tlog.read_transaction(v)
                if theirs is not None and theirs.uuid == txn.uuid:
                    # (a put of ours that was settled as lost cannot be here;
                    # kept as the last guard against committing twice)
                    log.warning("version %d of %s already holds transaction %s: committed", v, store.root, txn.uuid)
                    return _committed(store, tlog, txn, handler.location(v), concurrent, attempts)
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
            cctx = CheckContext(store, txn, latest, staged, rebases=concurrent, state=check_state)
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
        _check_files_exist(store, txn, latest)
        store.write_bytes(f"{TRANSACTIONS_DIR}/{txn.file_name}", txn_bytes)
        data = encode_manifest_file(manifest, txn_bytes, indices, ctx.dictionaries)
        state.in_doubt = True
        try:
            loc = handler.commit(new_version, naming, data)
            if loc is None:  # the name exists: whose commit is it?
                loc = _settle(store, tlog, txn, new_version, naming, data, None)
        except (UnsupportedFeatureError, InvalidArgumentError):
            state.in_doubt = False  # refused before anything was sent (e.g. the store ignores conditions)
            raise
        except Exception as e:
            log.warning("committing version %d of %s failed (%s: %s); finding out whether it happened",
                        new_version, store.root, type(e).__name__, e)
            loc = _settle(store, tlog, txn, new_version, naming, data, e)
        state.in_doubt = False
        if loc is not None:
            mf = ManifestFile(manifest, txn_bytes, indices, len(data), ctx.dictionaries)
            return _committed(store, tlog, txn, loc, concurrent, attempts, mf)
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


def _committed(store, tlog: TableLog, txn: Transaction, loc, concurrent: int, attempts: int,
               mf: ManifestFile | None = None) -> CommitResult:
    """The result of a commit that happened. What follows the commit point is
    best effort: a failure here must not make a committed change look failed
    (its caller would remove files the version names)."""
    try:
        tlog.write_hint(loc.version)
    except Exception:  # noqa: BLE001 - the hint is optional for every reader
        pass
    if mf is None:
        mf = tlog.read_manifest(loc)
    try:
        attach_bases(store, mf.manifest)
    except Exception as e:  # noqa: BLE001 - resolved again when the version is opened
        log.warning("version %d of %s is committed; resolving its base paths failed: %s", loc.version, store.root, e)
    remember(store, loc, mf)
    return CommitResult(Snapshot(store, loc.version, mf, loc.naming), txn, concurrent, attempts)


def _owner(tlog: TableLog, version: int, naming: ManifestNaming) -> str | None:
    """The uuid of the transaction committed as ``version`` ("" when it has
    none), or None when the version does not exist."""
    try:
        mf = tlog.read_manifest(version, naming)
    except TableNotFoundError:
        return None
    theirs = tlog.read_transaction(version, mf)
    return theirs.uuid if theirs is not None else ""


def _settle(store, tlog: TableLog, txn: Transaction, version: int, naming: ManifestNaming, data: bytes,
            error: Exception | None):
    """Whether our put of ``version`` happened, after it was refused because
    the name exists (``error`` None) or failed (``error``): our location if
    the version holds our transaction, None if another writer's. A version
    that does not exist after a failed put is put again -- safe, as a put of
    ours can only ever create ``version`` under its own name, and only once.
    Raises :class:`CommitOutcomeUnknownError` when the store cannot tell
    within :data:`SETTLE_ATTEMPTS` rounds."""
    handler = tlog.handler
    last = error
    for i in range(SETTLE_ATTEMPTS):
        if i:
            time.sleep(min(MAX_SETTLE_BACKOFF_S, 0.05 * 2 ** i) * (0.5 + random.random()))
        try:
            owner = _owner(tlog, version, naming)
            if owner is None:
                loc = handler.commit(version, naming, data)
                if loc is not None:
                    log.info("version %d of %s committed on a repeated put", version, store.root)
                    return loc
                owner = _owner(tlog, version, naming)
                if owner is None:
                    continue
            if owner != txn.uuid:
                return None
            log.info("version %d of %s holds our transaction %s: committed (the store's answer was lost)",
                     version, store.root, txn.uuid)
            return handler.location(version, naming) or ManifestLocation(version, naming.path(version), naming,
                                                                        len(data))
        except Exception as e:  # noqa: BLE001 - settled below or reported as unknown
            last = e
    raise _unknown(store, txn, version, last) from last


def _unknown(store, txn: Transaction, version: int | None, error: BaseException | None) -> CommitOutcomeUnknownError:
    what = f"version {version}" if version is not None else "the next version"
    cause = f" ({type(error).__name__}: {error})" if error is not None else ""
    return CommitOutcomeUnknownError(
        f"the outcome of committing {txn.operation.name} as {what} of {store.root} is unknown: the store "
        f"failed during the commit and could not be asked afterwards{cause}. Every file of the change is "
        f"kept. Find out with resolveCommit({txn.uuid!r}) (the version holding it, or None), or look for "
        "its transactionUuid in history(); do not re-run the change before that -- it could apply twice",
        version=version if version is not None else -1,
        transaction_uuid=txn.uuid,
        operation=txn.operation.name,
    )


def _check_files_exist(store, txn: Transaction, base: Snapshot | None) -> None:
    """Refuse to publish a version naming files that are gone (a vacuum run
    with its retention check overridden removed a write in progress): the
    change is prepared again instead (a retryable conflict)."""
    new = committed_files(txn.operation) - snapshot_files(base)
    missing = missing_files(store, new)
    if missing:
        raise CommitConflictError(
            f"{len(missing)} file(s) this {txn.operation.name} wrote were removed before it committed "
            f"(e.g. {store.path(missing[0])}): a vacuum with a retention shorter than this write's "
            "duration (enforceRetentionDuration=False) ran concurrently. Nothing was committed; the change "
            "is prepared again",
            retryable=True,
            prepare_again=True,
        )


def find_commit(store: ObjectStore, transaction_uuid: str, version: int | None = None) -> int | None:
    """The version that committed the transaction ``transaction_uuid``, or
    None if none did (how a :class:`CommitOutcomeUnknownError` is resolved).
    With ``version`` (the error's ``version``) one version is read: a change
    in doubt could only ever have become that version; otherwise every
    version is searched, newest first."""
    tlog = TableLog(store)
    if version is not None and version > 0:
        loc = tlog.handler.location(version)
        if loc is None:
            return None
        theirs = tlog.read_transaction(version, tlog.read_manifest(loc))
        return version if theirs is not None and theirs.uuid == transaction_uuid else None
    for loc in reversed(tlog.versions()):
        theirs = tlog.read_transaction(loc.version, tlog.read_manifest(loc))
        if theirs is not None and theirs.uuid == transaction_uuid:
            return loc.version
    return None
