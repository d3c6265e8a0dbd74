"""Idempotent writes: Delta's ``txnAppId`` / ``txnVersion``.

A job that appended and then failed before it could report success appends
again when it is retried; a streaming query that committed a micro-batch and
died before writing its checkpoint commits it again on restart. Delta's
answer, kept here: the writer names itself (``txnAppId``) and numbers its
writes (``txnVersion``, increasing); a write whose version is not newer than
the last one committed for that app id is skipped.

Where the watermark lives: the table config of the version the write
commits, key ``lance_ops.txn.<appId>`` = the version, written by the commit
itself (:func:`stamp`, from the transaction's properties) -- so a reader
finds it in O(1) in the latest manifest, and every later commit (ours or
pylance's, which copy the config forward) keeps it. pylance shows it in
``ds.config()``. The transaction also records them (history's
``operationParameters``: ``txnAppId``, ``txnVersion``).

The check is a pre-commit check (:func:`check`): it runs on the first
attempt and again after every rebase, against the version the write is about
to commit on, so two retries of one write racing each other cannot both
land -- the second rebases over the first, sees its watermark and stops.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError, LanceOpsError

#: Table config prefix of the per-app watermarks.
CONFIG_PREFIX = "lance_ops.txn."
#: Transaction properties naming the write (under the pipeline's parameter
#: prefix: history() shows them in operationParameters).
APP_ID_PROPERTY = "lance_ops.param.txnAppId"
VERSION_PROPERTY = "lance_ops.param.txnVersion"


@dataclass(frozen=True)
class TxnId:
    """One idempotent write: the writer's app id and this write's version."""

    app_id: str
    version: int

    @classmethod
    def of(cls, app_id, version) -> "TxnId | None":
        """From user arguments (both or neither); InvalidArgumentError when
        only one is given or they are malformed."""
        if app_id is None and version is None:
            return None
        if app_id is None or version is None:
            raise InvalidArgumentError("txnAppId and txnVersion go together: give both or neither")
        if not isinstance(app_id, str) or not app_id.strip():
            raise InvalidArgumentError(f"txnAppId must be a non-empty string, got {app_id!r}")
        try:
            number = int(version)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"txnVersion must be an integer, got {version!r}") from None
        if isinstance(version, bool) or number < 0 or str(number) != str(version).strip():
            raise InvalidArgumentError(f"txnVersion must be a non-negative integer, got {version!r}")
        return cls(app_id.strip(), number)

    @property
    def key(self) -> str:
        return CONFIG_PREFIX + self.app_id

    def properties(self) -> dict[str, str]:
        return {APP_ID_PROPERTY: self.app_id, VERSION_PROPERTY: str(self.version)}


def watermark(config, app_id: str) -> int | None:
    """The last version committed for ``app_id`` in a manifest's config."""
    value = dict(config).get(CONFIG_PREFIX + app_id)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class AlreadyCommitted(LanceOpsError):
    """Internal: the write's (app id, version) is not newer than the table's
    watermark -- the pipeline skips it (nothing committed, files removed)."""

    def __init__(self, txn: TxnId, committed: int):
        super().__init__(f"txnVersion {txn.version} of txnAppId {txn.app_id!r} is not newer than the last one "
                         f"committed ({committed}): skipped")
        self.txn = txn
        self.committed = committed


def is_done(snapshot, txn: TxnId | None) -> AlreadyCommitted | None:
    """Whether ``snapshot`` already holds ``txn`` (or a newer write of its app)."""
    if txn is None or snapshot is None:
        return None
    committed = watermark(snapshot.manifest.config, txn.app_id)
    if committed is not None and committed >= txn.version:
        return AlreadyCommitted(txn, committed)
    return None


def check(txn: TxnId):
    """The pre-commit check of an idempotent write."""

    def idempotent(ctx) -> None:
        done = is_done(ctx.base, txn)
        if done is not None:
            raise done

    return idempotent


def stamp(manifest, properties: dict) -> None:
    """Write the watermark of an idempotent write into the manifest it
    commits (called by the manifest build for every operation)."""
    app_id = properties.get(APP_ID_PROPERTY)
    version = properties.get(VERSION_PROPERTY)
    if app_id and version is not None:
        manifest.config[CONFIG_PREFIX + app_id] = str(version)
