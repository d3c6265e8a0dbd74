"""The corruption fuzzer through Spark (issue 18): a damaged pylance table
read by the Spark data source (errors cross from executors as their
lance_ops class) and changed by a delete. A delete ends in the right rows
or a LanceOpsError naming the damaged file, and a failed delete leaves the
table's files byte-for-byte unchanged. Most combinations run Spark-free in
tests/format/test_corruption.py; here a handful, more under ``slow``."""
import os
import random

import pytest

from lance_ops import LanceTable
from lance_ops.errors import LanceOpsError
from lance_ops.spark.errors import decode
from tests.format import corruption_fuzz as fz

#: (kind, damage) run in make test: the damages that reach data and deletion
#: files through executors, and metadata damage the driver meets first.
FAST = [("data", "replace"), ("data", "append"), ("deletion_arrow", "replace")]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sfuzz") / "base.lance")
    fz.build_base(path)
    return path, fz.Reference(path)


def tree_bytes(path):
    """Every file of the table, but the write journal's CLOSED markers: a
    failed job leaves one under ``_staging/journal/`` so that tasks still
    running remove their own files (scratch, not table state; vacuum removes it)."""
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            if n == "CLOSED" and "_staging" in os.path.relpath(p, path).split(os.sep):
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = f.read()
    return out


def spark_error(e: BaseException):
    """The lance_ops error a Spark failure carries (itself on the driver)."""
    return e if isinstance(e, LanceOpsError) else decode(str(e))


def spark_case(spark, base, ref, work, kind, how, seed, id_files=False):
    """Damage, read through the data source, delete; returns (read, delete)
    outcomes."""
    rng = random.Random(f"spark/{kind}/{how}/{seed}")
    path = os.path.join(work, f"{kind}-{how}-{seed}")
    fz.shutil.copytree(base, path)
    rel = rng.choice(fz.id_data_files(base) if id_files and kind == "data" else ref.kinds[kind])
    desc = fz.damage(path, rel, kind, how, rng, ref.kinds[kind])
    where = f"{kind}/{how} {rel} ({desc})"

    # read: the latest version through the Spark data source
    try:
        t = LanceTable(spark, path)
        version = t.version
        got = fz.pa.Table.from_pylist([r.asDict() for r in t.toDF().collect()]).sort_by("id")
        expected = ref.rows[version]
        read = "right" if fz.same_rows(got, expected) else (
            "as-pylance" if fz.same_rows(got, fz.pylance_rows(path, version)) else "wrong")
    except BaseException as e:  # noqa: BLE001 (classified)
        err = spark_error(e)
        read = fz.classify_error(err if err is not None else e, rel, kind, how)
        version = None

    # delete: right rows after it, or an error and the table untouched
    before = tree_bytes(path)
    try:
        t = LanceTable(spark, path)
        read_version = t.version
        t.delete(fz.DELETE_SQL)
    except BaseException as e:  # noqa: BLE001 (classified)
        err = spark_error(e)
        deleted = fz.classify_error(err if err is not None else e, rel, kind, how)
        now = tree_bytes(path)
        if now != before:
            deleted = "wrong"  # a failed delete changed the table
            where += f": failed delete ({type(e).__name__}) changed " + ", ".join(
                sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k)))
    else:
        # the delete committed: the right rows are left (the ids; the other
        # columns may still sit in the damaged file, which reads refuse)
        _, after = fz.read_all(fz.ObjectStore(path), columns=["id"])
        want = fz.after_delete(ref.rows[read_version]).select(["id"])
        if fz.same_rows(after, want):
            deleted = "right"
        elif read == "as-pylance" and fz.same_rows(
                after, fz.after_delete(fz.pylance_rows(path, read_version)).select(["id"])):
            deleted = "as-pylance"
        else:
            deleted = "wrong"
            where += f": delete committed {after.num_rows} rows, want {want.num_rows}"
    fz.shutil.rmtree(path, ignore_errors=True)
    return {"_kind": kind, "_how": how, "_file": rel, "_damage": desc, "read": (read, where),
            "delete": (deleted, where)}


def only(cases):
    """FAST narrowed by $LANCE_OPS_FUZZ_ONLY ("kind/damage,..."), for debugging."""
    want = os.environ.get("LANCE_OPS_FUZZ_ONLY")
    return [c for c in cases if not want or "/".join(c) in want.split(",")]


def test_spark_read_and_delete_on_damaged_tables(spark, base, tmp_path):
    path, ref = base
    results = [spark_case(spark, path, ref, str(tmp_path), kind, how, 0, id_files=True)
               for kind, how in only(FAST)]
    fz.write_report("spark-fast", results)
    bad = fz.failures(results)
    assert not bad, "\n".join(bad)
    # the cases exercise both outcomes: refusals and right answers
    outcomes = {r[c][0] for r in results for c in ("read", "delete")}
    assert {"right", "error"} <= outcomes


@pytest.mark.slow
def test_spark_fuzz_slow(spark, base, tmp_path):
    path, ref = base
    results = [spark_case(spark, path, ref, str(tmp_path), kind, how, seed)
               for seed in range(3) for kind in fz.KINDS for how in fz.DAMAGES]
    fz.write_report("spark-slow", results)
    bad = fz.failures(results)
    assert not bad, "\n".join(bad)


def test_a_data_file_outside_the_table_is_refused_through_spark(spark, tmp_path):
    """A manifest whose data file path climbs out of the table (``../``) into
    another table: the Spark read fails with CorruptTableError (from the
    executor, as itself) instead of returning the other table's rows."""
    from lance_ops.errors import CorruptTableError
    from tests.hostile import VARIANTS, make_pair, point_outside

    victim, attacker, vfile = make_pair(str(tmp_path))
    point_outside(attacker, None, VARIANTS["dotdot"](victim, vfile), keep_size=False)
    with pytest.raises(Exception) as e:
        LanceTable(spark, attacker).toDF().collect()
    err = spark_error(e.value)
    assert isinstance(err, CorruptTableError) and "reaches outside the table" in str(err)
