"""What write operations return."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CommitInfo:
    """The outcome of a write.

    ``version`` is the version the write committed (None if it committed
    nothing); ``readVersion`` the version it read; ``operation`` the transaction
    type ("Append", "Delete", "Update", ...); ``retries`` how many concurrent
    commits it had to reconcile with (rebased over, or re-ran the operation
    because of); ``metrics`` operation-specific counts (numInsertedRows,
    numDeletedRows, numAddedFragments, bytesWritten, ...).

    ``retries`` = ``rebases`` + ``reruns``: ``rebases`` counts the concurrent
    commits this one was checked against and rebased over (no work redone),
    ``reruns`` how many times the operation was prepared again on a newer
    version (after a retryable conflict, or to finish a partial compaction).
    """

    version: int | None
    readVersion: int
    operation: str
    retries: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    rebases: int = 0
    reruns: int = 0
    #: Why nothing was committed when the write was an idempotent one the
    #: table already holds (``txnAppId`` / ``txnVersion``); None otherwise.
    skipped: str | None = None

    @property
    def committed(self) -> bool:
        return self.version is not None
