"""Shared plumbing of the operations: metrics in transaction properties,
CommitInfo from a commit result, automatic re-runs on retryable conflicts."""
from __future__ import annotations

import logging
import random
import time
from typing import Callable, TypeVar

from ..errors import CommitConflictError
from ..results import CommitInfo
from ..txn.commit import CommitResult

log = logging.getLogger("lance_ops")

#: Transaction property prefixes for what history() shows (pylance keeps
#: unknown transaction properties untouched).
PARAM_PREFIX = "lance_ops.param."
METRIC_PREFIX = "lance_ops.metric."
DEFAULT_CONFLICT_RETRIES = 10

R = TypeVar("R")


def properties(parameters: dict | None = None, metrics: dict | None = None) -> dict[str, str]:
    out = {}
    for k, v in (parameters or {}).items():
        if v is not None:
            out[PARAM_PREFIX + k] = str(v)
    for k, v in (metrics or {}).items():
        if v is not None:
            out[METRIC_PREFIX + k] = str(v)
    return out


def commit_info(result: CommitResult, read_version: int, metrics: dict, reruns: int = 0) -> CommitInfo:
    return CommitInfo(
        version=result.version,
        readVersion=read_version,
        operation=result.transaction.operation.name,
        retries=result.concurrent + reruns,
        metrics=dict(metrics),
    )


def with_conflict_retries(run: Callable[[int], R], retries: int = DEFAULT_CONFLICT_RETRIES, timeout: float = 300.0) -> R:
    """Call ``run(attempt)``; on a *retryable* CommitConflictError re-run it (it
    re-reads the latest version) up to ``retries`` times with jittered
    exponential backoff. Incompatible conflicts and exhaustion raise."""
    start = time.monotonic()
    attempt = 0
    while True:
        try:
            return run(attempt)
        except CommitConflictError as e:
            if not e.retryable or attempt >= retries or time.monotonic() - start > timeout:
                if e.retryable and attempt >= retries:
                    raise CommitConflictError(
                        f"{e} -- gave up after {attempt} re-run(s) (conflictRetries={retries})",
                        retryable=True,
                        conflicting_version=e.conflicting_version,
                    ) from e
                raise
            attempt += 1
            delay = min(5.0, 0.05 * (2 ** min(attempt, 6))) * (0.5 + random.random())
            log.info("retryable conflict (%s); re-running on the latest version in %.2fs", e, delay)
            time.sleep(delay)
