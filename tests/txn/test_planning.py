"""Compaction and vacuum planning as pure functions, table-driven.

Compaction cases are pylance 14's observed plans (docs/internals/format.md, maintenance):
fragment sizes / deleted rows in, groups of fragment ids out. Vacuum cases
are version facts (age, tags, forks, references) and candidate files in,
removed versions and files out.
"""
from __future__ import annotations

import pytest

from lance_ops.format.proto import table_pb2
from lance_ops.txn.compaction import CompactionOptions, plan_groups
from lance_ops.txn.vacuum import Candidate, VersionFacts, decide


def frag(i, rows, deleted=0):
    f = table_pb2.DataFragment(id=i, physical_rows=rows)
    if deleted:
        f.deletion_file.CopyFrom(table_pb2.DeletionFile(num_deleted_rows=deleted, id=1))
    return f


# (fragments as (rows, deleted), options, index coverage {id: names}, expected groups)
COMPACTION = [
    ("one fragment, nothing to merge", [(100, 0)], {}, {}, []),
    ("5% deleted is under the threshold", [(1000, 50)], {"target": 1000}, {}, []),
    ("20% deleted: rewritten alone", [(1000, 200), (1000, 0)], {"target": 1000}, {}, [[0]]),
    ("exactly at the threshold is not above it", [(1000, 100)], {"target": 1000}, {}, []),
    ("three small ones: one group", [(10, 0), (10, 0), (10, 0)], {}, {}, [[0, 1, 2]]),
    ("isolated small fragment between big ones", [(1000, 0), (10, 0), (1000, 0)], {"target": 1000}, {}, []),
    ("no cut at the target: 5 x 300 -> one group", [(300, 0)] * 5, {"target": 1000}, {}, [[0, 1, 2, 3, 4]]),
    ("deletions alone, materialize off", [(1000, 300), (1000, 0)], {"target": 1000, "materialize": False}, {}, []),
    ("deletions under a higher threshold", [(1000, 300), (1000, 0)], {"target": 1000, "threshold": 0.5}, {}, []),
    ("cuts by live rows", [(400, 134)] * 6, {"target": 500}, {}, [[0, 1], [2, 3], [4, 5]]),
    ("rest too small to stand alone joins the group", [(300, 0)] * 5, {"target": 600}, {}, [[0, 1], [2, 3, 4]]),
    ("index coverage splits bins", [(10, 0)] * 5, {}, {0: {"a"}, 1: {"a"}, 2: {"a"}}, [[0, 1, 2], [3, 4]]),
    ("a lone small fragment left by a coverage split is dropped", [(10, 0)] * 3, {}, {0: {"a"}, 1: {"a"}},
     [[0, 1]]),
    ("max source fragments keeps whole groups in order", [(10, 0)] * 3 + [(5000, 0)] + [(10, 0)] * 2,
     {"max_source": 3, "target": 1000}, {}, [[0, 1, 2]]),
    ("max source fragments smaller than any group: nothing", [(10, 0)] * 6, {"max_source": 3}, {}, []),
]


@pytest.mark.parametrize("name,frags,opts,cover,expected", COMPACTION, ids=[c[0] for c in COMPACTION])
def test_compaction_plan(name, frags, opts, cover, expected):
    fragments = [frag(i, r, d) for i, (r, d) in enumerate(frags)]
    options = CompactionOptions(
        target_rows_per_fragment=opts.get("target", 1024 * 1024),
        materialize_deletions=opts.get("materialize", True),
        materialize_deletions_threshold=opts.get("threshold", 0.1),
        max_source_fragments=opts.get("max_source"),
    )
    coverage = {k: frozenset(v) for k, v in cover.items()}
    groups = plan_groups(fragments, coverage, options)
    assert [[f.id for f in g] for g in groups] == expected


NOW = 1_000_000.0
DAY = 86400.0


def v(version, age_days, *refs):
    return VersionFacts(version, NOW - age_days * DAY, f"_versions/{version}.manifest", frozenset(refs))


def c(path, age_days, key="same"):
    return Candidate(path, NOW - age_days * DAY if age_days is not None else 0.0, path if key == "same" else key)


# (versions, candidates, kwargs, expected removed versions, expected removed files)
VACUUM = [
    ("old versions go with files only they reference",
     [v(1, 10, "data/a", "data/b"), v(2, 10, "data/b"), v(3, 0, "data/b", "data/c")],
     [c("data/a", 10), c("data/b", 10), c("data/c", 0)], {}, [1, 2], ["data/a"]),
    ("the handle's version and newer stay, however old",
     [v(1, 10, "data/a"), v(2, 10, "data/b"), v(3, 10, "data/c")],
     [c("data/a", 10), c("data/b", 10), c("data/c", 10)], {"upto": 2}, [1], ["data/a"]),
    ("a tagged version keeps its files",
     [v(1, 10, "data/a"), v(2, 10, "data/b"), v(3, 0, "data/c")],
     [c("data/a", 10), c("data/b", 10)], {"tagged": {1}}, [2], ["data/b"]),
    ("a fork point keeps its manifest; its files go unless a branch reads them",
     [v(1, 10, "data/a", "_transactions/t1"), v(2, 0, "data/b")],
     [c("data/a", 10), c("_transactions/t1", 10)], {"forked": {1}, "shared": {"data/a"}}, [], ["_transactions/t1"]),
    ("unreferenced files go only when older than the retention",
     [v(1, 0, "data/a")], [c("data/orphan-old", 2), c("data/orphan-new", 0.01), c("data/orphan-unknown", None)],
     {}, [], ["data/orphan-old"]),
    ("a file a removed version referenced goes whatever its mtime",
     [v(1, 10, "data/a"), v(2, 0)], [c("data/a", 0)], {}, [1], ["data/a"]),
    ("leftovers (no key) go by age",
     [v(1, 0)], [c("_versions/.tmp-x", 2, key=None), c("_versions/.tmp-y", 0, key=None)], {}, [], ["_versions/.tmp-x"]),
    ("index files are kept by their directory",
     [v(1, 10, "_indices/u1"), v(2, 0, "_indices/u2")],
     [c("_indices/u1/page.lance", 10, "_indices/u1"), c("_indices/u2/page.lance", 10, "_indices/u2")], {}, [1],
     ["_indices/u1/page.lance"]),
]


@pytest.mark.parametrize("name,versions,candidates,kw,removed,files", VACUUM, ids=[x[0] for x in VACUUM])
def test_vacuum_decision(name, versions, candidates, kw, removed, files):
    plan = decide(versions, candidates, upto=kw.get("upto", versions[-1].version), cutoff=NOW - DAY,
                  tagged=kw.get("tagged", set()), forked=kw.get("forked", set()), shared=kw.get("shared", set()))
    assert plan.removed_versions == removed
    assert plan.manifests == [f"_versions/{x}.manifest" for x in removed]
    assert sorted(plan.files) == sorted(files)
