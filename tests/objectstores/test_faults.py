"""kill -9 of a writer after each step of an external-store commit (stage,
claim, copy, flip): the next reader finishes a claimed commit or refuses
with a clear error; nothing committed is lost; leftovers are ignored and
vacuumed."""
from __future__ import annotations

import lance
import pytest

from lance_ops.errors import CorruptTableError
from lance_ops.storage import ObjectStore, commit_handler
from lance_ops.txn.log import TableLog
from lance_ops.txn.table import Table
from tests.objectstores import workload as wl
from tests.objectstores.conftest import run_writers, store_location

# step -> whether the killed commit is committed (the claim is the commit point)
STEPS = {"stage": False, "claim": True, "copy": True, "flip": True}


def staged_files(store) -> list[str]:
    return sorted(i.name for i in store.list_dir("_versions") if ".manifest-" in i.name)


@pytest.mark.parametrize("step", list(STEPS))
def test_writer_killed_after_step(step, store_kind, moto, postgres, tmp_path, processes):
    uri, options = store_location(store_kind, moto, postgres, tmp_path, f"kill-{step}")
    wl.create(uri, options, rows=2)
    (rc, recs, _err), = run_writers(uri, options, [(7, 1, ["--kill-after", step])]).values()
    assert rc == -9 and recs == []
    store = ObjectStore(uri, options)
    raw = ObjectStore(uri.split("?")[0].replace("s3+ddb://", "s3://"), moto.options())
    if step != "flip":
        assert len(staged_files(raw)) == 1  # the killed writer's staged manifest
    # The next reader (a fresh handle) finishes a claimed commit before loading.
    t = Table(uri, options)
    committed = STEPS[step]
    assert t.version == (2 if committed else 1)
    rows = {(r["writer"], r["seq"]) for r in lance.dataset(uri, storage_options=options).to_table().to_pylist()}
    assert rows == ({(-1, 0), (-1, 1), (7, 0)} if committed else {(-1, 0), (-1, 1)})
    assert TableLog(store).handler.kv.latest(commit_handler(store).base).path.endswith(".manifest") or not committed
    if committed:
        assert staged_files(raw) == [] or step == "flip" and len(staged_files(raw)) == 1
    # The table keeps committing; versions stay contiguous.
    wl.append(t, 8, [0])
    assert [loc.version for loc in TableLog(store).versions()] == list(range(1, t.version + 1))
    # Leftover staged files go with vacuum (any age with retention 0).
    t.vacuum(retentionHours=0, enforceRetentionDuration=False)
    assert staged_files(raw) == []
    assert Table(uri, options).count() == len(rows) + 1


def test_reader_refuses_a_claimed_version_whose_manifest_is_gone(moto, postgres, tmp_path, processes):
    uri, options = store_location("sqlite", moto, postgres, tmp_path, "gone")
    wl.create(uri, options, rows=2)
    (rc, _recs, _err), = run_writers(uri, options, [(7, 1, ["--kill-after", "claim"])]).values()
    assert rc == -9
    store = ObjectStore(uri, options)
    (staged,) = staged_files(store)
    store.delete(f"_versions/{staged}")
    with pytest.raises(CorruptTableError, match="committed in sqlite.*refusing to load"):
        Table(uri, options)
    # Version 1 (committed before) is still there and readable by number.
    assert Table(uri, options, version=1).count() == 2
