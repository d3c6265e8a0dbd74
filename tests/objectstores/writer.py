"""A writer process for the concurrency and fault tests.

    python -m tests.objectstores.writer URI WRITER COUNT [--kill-after STEP] [--pylance]
                                        [--appends-only] [--store-faults SEED]

Storage options come from the environment (``LANCE_OPS_TEST_STORAGE``, JSON),
never the command line. lance_ops writers make COUNT mixed commits --
append 1 row, append 1 row, delete the fragment appended just before, set a
table property, and again (``--appends-only``: append, set a property) --
and print one JSON line per commit: ``{"i", "kind", "ok", "error"}``, with
the transaction uuid and version of a CommitOutcomeUnknownError, and
``"unexpected": true`` for an error that is not a LanceOpsError.
``--pylance`` makes pylance appends instead (``lance.write_dataset``).
``--kill-after STEP`` kills the process (SIGKILL) right after that step of
its first external-store commit (stage, claim, copy, flip).
``--store-faults SEED`` makes the external manifest store (SQLite,
PostgreSQL) fail now and then, before or after applying a request.
"""
from __future__ import annotations

import json
import os
import random
import signal
import sys

KINDS = ["append", "append", "delete", "property"]
APPEND_KINDS = ["append", "append", "property"]


def kill_after(step: str) -> None:
    from lance_ops.storage.external import ExternalStoreHandler

    original = getattr(ExternalStoreHandler, f"_{step}")

    def patched(self, *args):
        out = original(self, *args)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(ExternalStoreHandler, f"_{step}", patched)


def store_faults(seed: int, rate: float = 0.08) -> None:
    """Every external manifest store request fails with probability
    ``rate``: half of them before reaching the store, half after it applied
    the request (the answer lost)."""
    from lance_ops.errors import CommitStoreError
    from lance_ops.storage import postgres_store, sqlite_store
    from lance_ops.storage.external import ManifestStore

    assert postgres_store and sqlite_store  # (imported: their classes are ManifestStore's subclasses)

    rng = random.Random(seed)

    def faulty(name, original):
        def call(self, *args, **kwargs):
            x = rng.random()
            if x < rate / 2:
                raise CommitStoreError(f"injected: {name} did not reach the store")
            out = original(self, *args, **kwargs)
            if x < rate:
                raise CommitStoreError(f"injected: {name} applied, its answer lost")
            return out
        return call

    for cls in ManifestStore.__subclasses__():
        for name in ("get", "latest", "since", "put_if_not_exists", "put_if_exists"):
            if name in cls.__dict__:
                setattr(cls, name, faulty(name, cls.__dict__[name]))


def lance_ops_writer(uri: str, options: dict, writer: int, count: int, kinds: list[str]) -> None:
    from lance_ops.errors import CommitOutcomeUnknownError, LanceOpsError
    from lance_ops.txn.table import Table
    from tests.objectstores import workload as wl

    table = None
    last_fragment = None
    for i in range(count):
        kind = kinds[i % len(kinds)]
        rec = {"i": i, "kind": kind, "ok": False, "error": None}
        try:
            if table is None:
                table = Table(uri, options)
            table.refresh()
            if kind == "append":
                last_fragment = wl.append(table, writer, [i])
            elif kind == "delete":
                wl.delete_fragment(table, last_fragment)
                rec["seq"] = i - 1
            else:
                wl.set_property(table, f"writer.{writer}", str(i))
            rec["ok"] = True
            rec["version"] = table.lastCommit.version  # (the handle itself follows the table)
        except CommitOutcomeUnknownError as e:
            rec.update(error=type(e).__name__, uuid=e.transaction_uuid, version=e.version, message=str(e)[:300])
        except LanceOpsError as e:
            rec["error"] = type(e).__name__
            rec["message"] = str(e)[:300]
        except Exception as e:  # noqa: BLE001 - reported: lance_ops let a foreign error through
            rec.update(error=type(e).__name__, message=str(e)[:300], unexpected=True)
        print(json.dumps(rec), flush=True)


def pylance_writer(uri: str, options: dict, writer: int, count: int) -> None:
    import lance

    from tests.objectstores import workload as wl

    for i in range(count):
        rec = {"i": i, "kind": "append", "ok": False, "error": None}
        try:
            ds = lance.write_dataset(wl.batch(writer, [i]), uri, mode="append", storage_options=options)
            rec["ok"] = True
            rec["version"] = ds.version
        except Exception as e:  # pylance raises OSError subclasses for conflicts
            rec["error"] = type(e).__name__
            rec["message"] = str(e)[:300]
        print(json.dumps(rec), flush=True)


def main(argv: list[str]) -> None:
    uri, writer, count = argv[0], int(argv[1]), int(argv[2])
    options = json.loads(os.environ["LANCE_OPS_TEST_STORAGE"])
    if "--kill-after" in argv:
        kill_after(argv[argv.index("--kill-after") + 1])
    if "--store-faults" in argv:
        store_faults(int(argv[argv.index("--store-faults") + 1]) * 1000 + writer)
    if "--pylance" in argv:
        pylance_writer(uri, options, writer, count)
    else:
        lance_ops_writer(uri, options, writer, count, APPEND_KINDS if "--appends-only" in argv else KINDS)


if __name__ == "__main__":
    main(sys.argv[1:])
