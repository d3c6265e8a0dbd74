"""The staged-commit pipeline every write goes through.

    prepare(snapshot) -> StagedCommit -> checks -> commit (rebase / re-run) -> CommitInfo

* **prepare** does the work (Spark jobs, data and deletion files written) and
  returns a :class:`StagedCommit`: the operation, metrics and parameters.
  Nothing is visible yet.
* **checks** (pre-commit hooks: constraints, data-quality gates, "the table
  must not exist") run inside the commit loop, on the first attempt and again
  after every rebase (:func:`lance_ops.txn.commit.commit`).
* **commit** rebases over compatible concurrent commits; on a *retryable*
  conflict the whole change is prepared again on the latest version (a
  re-run), up to ``retries`` times with jittered backoff; an incompatible
  conflict raises.
* Files a change wrote and did not commit (a failed or re-run attempt, groups
  a partial compaction dropped, deletion files a rebase superseded) are
  removed here -- the one place that does -- and only once the commit is
  known not to have happened: when its outcome is in doubt
  (:class:`~lance_ops.errors.CommitOutcomeUnknownError`, or an interrupt
  during the manifest put) every file stays (a committed version may name
  them; vacuum removes them if it was not).

This module imports no Spark: Spark-backed operations pass a ``prepare`` that
runs their jobs.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..errors import CommitConflictError, CommitOutcomeUnknownError, InvalidArgumentError
from ..format.features import check_writable
from ..results import CommitInfo
from .commit import Check, CommitResult, CommitState, NewTable, commit
from .files import operation_files, snapshot_files
from .idempotence import AlreadyCommitted, TxnId, is_done
from .idempotence import check as idempotence_check
from .log import Snapshot, open_snapshot
from .operations import Operation, Rewrite, Transaction

log = logging.getLogger("lance_ops")

DEFAULT_CONFLICT_RETRIES = 10
#: Transaction property prefixes of what lance_ops records for history()
#: (pylance keeps unknown transaction properties untouched).
PARAM_PREFIX = "lance_ops.param."
METRIC_PREFIX = "lance_ops.metric."
#: Transaction property naming the operation in Delta's words ("MERGE",
#: "OPTIMIZE", ...) for history(); the transaction type stays Lance's.
OPERATION_KEY = "lance_ops.operation"
#: Keys a user's commit properties may not use (ours, and pylance's own).
RESERVED_PROPERTY_PREFIXES = ("lance_ops.", "__lance")


@dataclass
class CommitFlow:
    """How the pipeline treats a staged change beyond committing it -- all
    decided when the change was prepared; nothing here runs a Spark job.

    ``before`` are operations committed first, in order, each on the version
    the previous one made (a merge with schema evolution adds the new
    columns); ``finish(results)`` may then adjust the operation or metrics
    from their results. ``rerun_after(result)`` says whether a committed
    change left work behind (a partial compaction) and the pipeline should
    prepare again on the new version; ``metrics_after(result)`` recomputes
    the metrics from the committed transaction (after a rebase narrowed it).
    ``reusable``: the change does not depend on the version it read (an
    overwrite): on a retryable conflict it is committed again on the latest
    version as it is (unless the conflict says it must be prepared again:
    ``CommitConflictError.prepare_again``). ``empty``: nothing to commit (an
    update or delete that matched no row): the CommitInfo (version None)
    carries the metrics."""

    before: list[Operation] = field(default_factory=list)
    finish: Callable[[list[CommitResult]], None] | None = None
    rerun_after: Callable[[CommitResult], bool] | None = None
    metrics_after: Callable[[CommitResult], dict] | None = None
    reusable: bool = False
    empty: bool = False


class StagedCommit:
    """A prepared change: its files are written, nothing is visible.

    Six fields: ``operation``; its ``metrics`` and ``parameters`` (history);
    ``extra_files`` written for it that the operation does not reference
    (e.g. index files: removed if it fails); pre-commit ``checks`` of this
    change (run with the write's own, after every rebase: e.g. "the
    constraints I enforced are still the table's"); and its ``flow``
    (:class:`CommitFlow`). The flow's settings are also accepted as keyword
    arguments (``StagedCommit(op, metrics, params, reusable=True)``)."""

    __slots__ = ("operation", "metrics", "parameters", "extra_files", "checks", "flow")

    def __init__(self, operation: Operation, metrics: dict | None = None, parameters: dict | None = None, *,
                 extra_files: list[str] | None = None, checks: list | None = None, flow: CommitFlow | None = None,
                 **flow_settings):
        self.operation = operation
        self.metrics = {} if metrics is None else metrics
        self.parameters = {} if parameters is None else parameters
        self.extra_files = [] if extra_files is None else extra_files
        self.checks = [] if checks is None else checks
        self.flow = flow if flow is not None else CommitFlow(**flow_settings)
        if flow is not None and flow_settings:
            raise TypeError("give the flow or its settings, not both")

    def __repr__(self) -> str:
        return f"StagedCommit({self.operation.name}, metrics={self.metrics}, flow={self.flow})"


@dataclass
class WriteOptions:
    """How one write commits: the pre-commit checks, the user's commit
    properties, how many re-runs a retryable conflict may cost, and what a
    first commit creates."""

    checks: Sequence[Check] = ()
    commit_properties: dict | None = None
    retries: int = DEFAULT_CONFLICT_RETRIES
    new_table: NewTable | None = None
    timeout: float = 300.0
    #: An idempotent write (Delta's txnAppId / txnVersion): skipped when the
    #: table already holds it (:mod:`.idempotence`).
    txn: TxnId | None = None
    #: The operation in Delta's words, recorded for history() (None: derived
    #: from the transaction type when history is read).
    operation: str | None = None


def properties(parameters: dict | None = None, metrics: dict | None = None, user: dict | None = None,
               operation: str | None = None) -> dict[str, str]:
    """Transaction properties: lance_ops' parameters and metrics under their
    prefixes, the operation's name, the user's commit properties as given."""
    out = {}
    for k, v in (user or {}).items():
        out[k] = v
    if operation:
        out[OPERATION_KEY] = operation
    for k, v in (parameters or {}).items():
        if v is not None:
            out[PARAM_PREFIX + k] = str(v)
    for k, v in (metrics or {}).items():
        if v is not None:
            out[METRIC_PREFIX + k] = str(v)
    return out


def check_commit_properties(props) -> dict[str, str]:
    """``commitProperties`` as a str -> str dict (keys not reserved)."""
    if props is None:
        return {}
    if not isinstance(props, dict):
        raise InvalidArgumentError("commitProperties must be a dict of str -> str")
    out = {}
    for k, v in props.items():
        if not isinstance(k, str) or not k:
            raise InvalidArgumentError(f"commitProperties keys must be non-empty strings, got {k!r}")
        if k.startswith(RESERVED_PROPERTY_PREFIXES):
            raise InvalidArgumentError(
                f"commitProperties key {k!r} uses a reserved prefix {RESERVED_PROPERTY_PREFIXES}"
            )
        out[k] = v if isinstance(v, str) else str(v)
    return out


# ------------------------------------------------------------------- files
def _remove(store, paths) -> None:
    for rel in sorted(paths):
        try:
            if rel.startswith("_indices/"):
                for sub, _info in list(store.walk_files(rel)):
                    store.delete(sub)
            else:
                store.delete(rel)
        except Exception as e:  # cleanup must not hide the real outcome
            log.warning("could not remove %s of a change that did not commit: %s", rel, e)


# ----------------------------------------------------------------- running
def execute(
    store,
    start: Snapshot | None,
    prepare: Callable[[Snapshot | None], StagedCommit | None],
    options: WriteOptions | None = None,
) -> CommitInfo:
    """Prepare and commit one change (see the module docstring). ``start`` is
    the version to prepare the first attempt on (None: the location holds no
    table yet); re-runs prepare on the latest version. ``prepare`` returning
    None means there is nothing to commit."""
    options = options or WriteOptions()
    user = check_commit_properties(options.commit_properties)
    if options.txn is not None:
        done = is_done(start, options.txn)
        if done is not None:  # known at once: nothing prepared
            return _skipped(start, done)
        options = dataclasses.replace(options, checks=[*options.checks, idempotence_check(options.txn)])
    began = time.monotonic()
    reruns = rebases = 0
    first_read = start.version if start is not None else 0
    committed: list[CommitResult] = []
    totals: dict = {}
    empty_op = ""
    snap = start
    staged: StagedCommit | None = None
    while True:
        if snap is not None:
            check_writable(snap.manifest, f"at {store.root}")
        if staged is None or not staged.flow.reusable:
            staged = prepare(snap)
            if staged is None:
                break
            if staged.flow.empty:
                _accumulate(totals, staged.metrics)
                empty_op = staged.operation.name
                break
            owned = operation_files(staged.operation) - snapshot_files(snap) | set(staged.extra_files)
        read_version = snap.version if snap is not None else 0
        state = CommitState()
        try:
            results, concurrent = _commit_staged(store, staged, read_version, user, options, owned, state)
        except CommitConflictError as e:
            gave_up = not e.retryable or reruns >= options.retries or time.monotonic() - began > options.timeout
            if e.prepare_again:
                staged.flow.reusable = False
            if not staged.flow.reusable or gave_up:
                _remove(store, owned)
            if gave_up:
                if committed:  # an earlier round committed (partial compaction): report it
                    log.warning("stopping after %d commit(s): %s", len(committed), e)
                    break
                if e.retryable and reruns >= options.retries:
                    raise CommitConflictError(
                        f"{e} -- gave up after {reruns} re-run(s) (conflictRetries={options.retries})",
                        retryable=True,
                        conflicting_version=e.conflicting_version,
                    ) from e
                raise
            reruns += 1
            delay = min(5.0, 0.05 * (2 ** min(reruns, 6))) * (0.5 + random.random())
            log.info("retryable conflict (%s); %s on the latest version in %.2fs", e,
                     "committing again" if staged.flow.reusable else "re-running", delay)
            time.sleep(delay)
            snap = open_snapshot(store)
            continue
        except AlreadyCommitted as done:
            _remove(store, owned)
            if committed:
                break
            return _skipped(snap, done)
        except CommitOutcomeUnknownError:
            raise  # every file stays: the version may name them
        except BaseException:
            if not state.in_doubt:
                _remove(store, owned)
            raise
        final = results[-1]
        _remove(store, owned - operation_files(final.transaction.operation))  # superseded or dropped
        committed.extend(results)
        rebases += concurrent
        metrics = staged.flow.metrics_after(final) if staged.flow.metrics_after else staged.metrics
        _accumulate(totals, metrics)
        if staged.flow.rerun_after is not None and staged.flow.rerun_after(final):
            reruns += 1
            snap, staged = final.snapshot, None
            continue
        break
    if not committed:
        return CommitInfo(version=None, readVersion=first_read, operation=empty_op, metrics=totals)
    last = committed[-1]
    return CommitInfo(
        version=last.version,
        readVersion=first_read,
        operation=last.transaction.operation.name,
        retries=rebases + reruns,
        metrics=totals,
        rebases=rebases,
        reruns=reruns,
    )


def _commit_staged(store, staged: StagedCommit, read_version: int, user: dict, options: WriteOptions,
                   owned: set[str], state: CommitState) -> tuple[list[CommitResult], int]:
    """Commit ``before`` then the main operation. Returns the results and how
    many other writers' commits were rebased over (our own ``before``
    commits, which the main transaction may have read past, not counted)."""
    results: list[CommitResult] = []
    base = read_version
    for op in staged.flow.before:
        txn = Transaction(base, op, properties=properties(staged.parameters, None, user, None))
        results.append(commit(store, txn, new_table=options.new_table, state=state))
        base = results[-1].version
    if staged.flow.finish is not None:
        staged.flow.finish(results)
    # The main transaction reads the version it was prepared from, unless a
    # preceding commit of ours changed what it builds on (schema evolution).
    main_read = read_version if not staged.flow.before or isinstance(staged.operation, Rewrite) else base
    txn = Transaction(
        main_read, staged.operation,
        properties={**properties(staged.parameters, staged.metrics, user, options.operation),
                    **(options.txn.properties() if options.txn else {})},
    )

    def on_rebase(t: Transaction, latest: Snapshot) -> None:
        if _ids_taken(t.operation, latest):
            renumber(t.operation, latest)  # (a concurrent commit used our fragment ids)
        # a rebase may write files (merged deletion vectors) and adopt other
        # writers' (never ours to remove)
        owned.update(operation_files(t.operation) - snapshot_files(latest))

    results.append(
        commit(store, txn, new_table=options.new_table, checks=[*options.checks, *staged.checks], on_rebase=on_rebase,
               state=state)
    )
    if main_read == read_version:
        return results, results[-1].concurrent - len(staged.flow.before)
    return results, sum(r.concurrent for r in results)


def _skipped(snap: Snapshot | None, done: AlreadyCommitted) -> CommitInfo:
    log.info("%s", done)
    return CommitInfo(version=None, readVersion=snap.version if snap is not None else 0, operation="",
                      skipped=str(done))
def max_fragment_id(snap: Snapshot) -> int:
    """The fragment id high-water mark of a version (pylance's rule when the
    manifest never recorded one: the largest id present, -1 for none)."""
    m = snap.manifest
    if m.HasField("max_fragment_id"):
        return int(m.max_fragment_id)
    return max((int(f.id) for f in snap.fragments), default=-1)


def number_new_fragments(rewrite: Rewrite, base: Snapshot) -> None:
    """Number a Rewrite's new fragments after the high-water mark of
    ``base`` -- one version per compaction: the ids are taken in the Rewrite's
    own commit, where pylance commits a ReserveFragments first. The caller
    writes what depends on them (remapped index files) while preparing."""
    next_id = max_fragment_id(base) + 1
    for f in (f for g in rewrite.groups for f in g.new_fragments):
        f.id = next_id
        next_id += 1


def renumber(rewrite: Rewrite, latest: Snapshot) -> None:
    """A rebase found the Rewrite's fragment ids taken by a concurrent
    commit: number them again after ``latest``'s high-water mark -- metadata
    only. Index files written for the old ids (remapped row addresses, zone
    maps) cannot follow without another Spark job, which never runs inside
    the commit phase: such a change is prepared again instead."""
    if rewrite.rewritten_indices:
        raise CommitConflictError(
            "a concurrent commit took the fragment ids this compaction's rewritten index files hold; "
            "it is prepared again on the latest version",
            retryable=True,
            prepare_again=True,
        )
    number_new_fragments(rewrite, latest)


def _ids_taken(op: Operation, latest: Snapshot) -> bool:
    """Whether a Rewrite's new fragment ids are at or below the high-water
    mark of the version it is about to commit on."""
    if not isinstance(op, Rewrite):
        return False
    ids = [f.id for g in op.groups for f in g.new_fragments]
    return bool(ids) and min(ids) <= max_fragment_id(latest)


def _accumulate(totals: dict, metrics: dict) -> None:
    for k, v in metrics.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(totals.get(k, 0), (int, float)):
            totals[k] = totals.get(k, 0) + v
        else:
            totals[k] = v
