"""A writer process for the concurrency and fault tests.

    python -m tests.objectstores.writer URI WRITER COUNT [--kill-after STEP] [--pylance]

Storage options come from the environment (``LANCE_OPS_TEST_STORAGE``, JSON),
never the command line. lance_ops writers make COUNT mixed commits --
append 1 row, append 1 row, delete the fragment appended just before, set a
table property, and again -- and print one JSON line per commit:
``{"i", "kind", "ok", "error"}``. ``--pylance`` makes pylance appends instead
(``lance.write_dataset``). ``--kill-after STEP`` kills the process (SIGKILL)
right after that step of its first external-store commit (stage, claim,
copy, flip).
"""
from __future__ import annotations

import json
import os
import signal
import sys

KINDS = ["append", "append", "delete", "property"]


def kill_after(step: str) -> None:
    from lance_ops.storage.external import ExternalStoreHandler

    original = getattr(ExternalStoreHandler, f"_{step}")

    def patched(self, *args):
        out = original(self, *args)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(ExternalStoreHandler, f"_{step}", patched)


def lance_ops_writer(uri: str, options: dict, writer: int, count: int) -> None:
    from lance_ops.errors import LanceOpsError
    from lance_ops.txn.table import Table
    from tests.objectstores import workload as wl

    table = Table(uri, options)
    last_fragment = None
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        rec = {"i": i, "kind": kind, "ok": False, "error": None}
        try:
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
        except LanceOpsError as e:
            rec["error"] = type(e).__name__
            rec["message"] = str(e)[:300]
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
    if "--pylance" in argv:
        pylance_writer(uri, options, writer, count)
    else:
        lance_ops_writer(uri, options, writer, count)


if __name__ == "__main__":
    main(sys.argv[1:])
