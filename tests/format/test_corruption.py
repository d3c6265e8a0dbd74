"""The corruption fuzzer, Spark-free part (issue 18): every file kind x every
damage over a small pylance table; reads of the latest version, time travel
to every version and history() end in the right rows or a LanceOpsError
naming the damaged file (see tests/format/corruption_fuzz.py)."""
import pytest

from tests.format import corruption_fuzz as fz


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fuzz") / "base.lance")
    fz.build_base(path)
    fz.check_base(path)
    return path, fz.Reference(path)


def test_base_reads_like_pylance(base):
    path, ref = base
    for v in range(1, ref.latest + 1):
        got_v, got = fz.read_all(fz.ObjectStore(path), v)
        assert got_v == v and fz.same_rows(got, ref.rows[v])


def test_fuzz_every_kind_and_damage(base, tmp_path):
    path, ref = base
    results = fz.fuzz(path, ref, str(tmp_path), seeds=range(2))
    fz.write_report("format-fast", results)
    bad = fz.failures(results)
    assert not bad, "\n".join(bad)
    # every kind x damage ran and the fuzzer reached the checks it claims to
    table = fz.tally(results)
    assert len(table) == len(fz.KINDS) * len(fz.DAMAGES)


@pytest.mark.slow
def test_fuzz_thousands(base, tmp_path):
    path, ref = base
    results = fz.fuzz(path, ref, str(tmp_path), seeds=range(2, 52))
    fz.write_report("format-slow", results)
    bad = fz.failures(results)
    assert not bad, "\n".join(bad)
