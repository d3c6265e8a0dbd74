"""A journal of the data files a Spark job's tasks wrote, so a job that fails
part-way leaves none behind.

When one task of a write raises (a CHECK constraint violation, typically),
Spark cancels the others, but tasks that already finished have written their
files and returned their metadata to a job whose result nobody collects: the
driver never learns their names. Writes that expect such failures run inside
:func:`journaled`: each task that finishes records the files it wrote under
``_staging/journal/<token>/`` before returning, and if the job fails the
driver deletes every recorded file (and the journal). Used by writes that
enforce constraints and by the Arrow-evaluated DML tasks (a damaged file or
an ANSI error row met by one task must not leave the finished tasks' files
behind); elsewhere an unexpected failure leaves orphans that ``vacuum``
removes.
"""
from __future__ import annotations

import contextlib
import json
import logging
import uuid

log = logging.getLogger("lance_ops")
JOURNAL_DIR = "_staging/journal"


CLOSED = "CLOSED"


def record(store, token: str | None, paths: list[str]) -> None:
    """Executor side, after ``paths`` (relative to the root) are written:
    remember them; if the job has already failed (the driver closed the
    journal), delete them and stop. With the driver closing *before* it lists
    (:func:`journaled`), every file is removed by one side or the other."""
    if not token or not paths:
        return
    base = f"{JOURNAL_DIR}/{token}"
    store.write_bytes(f"{base}/{uuid.uuid4().hex}.json", json.dumps(paths).encode())
    if store.exists(f"{base}/{CLOSED}"):
        for p in paths:
            store.delete(p)
        from ..errors import LanceOpsError

        raise LanceOpsError("the write this task belongs to has failed; its files were removed")


def _entries(store, token: str):
    return [rel for rel, _ in store.walk_files(f"{JOURNAL_DIR}/{token}") if not rel.endswith("/" + CLOSED)]


@contextlib.contextmanager
def journaled(store, enabled: bool = True):
    """Yields a token for the tasks (None when not ``enabled``)."""
    if not enabled:
        yield None
        return
    token = uuid.uuid4().hex
    try:
        yield token
    except BaseException:
        try:
            store.write_bytes(f"{JOURNAL_DIR}/{token}/{CLOSED}", b"")
            for rel in _entries(store, token):
                for p in json.loads(store.read_bytes(rel)):
                    store.delete(p)
                store.delete(rel)
            # (CLOSED stays until tasks still running have seen it: vacuum
            # removes _staging leftovers)
        except Exception as e:  # cleanup must not hide the real error
            log.warning("could not remove the files of a failed write (journal %s): %s", token, e)
        raise
    for rel in _entries(store, token):
        store.delete(rel)
    store.remove_empty_dirs(f"{JOURNAL_DIR}/{token}")
