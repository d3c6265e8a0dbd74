"""vacuum beside pylance's ``cleanup_old_versions`` on the zoo's tables (a
shallow clone, a branched table, a legacy table, an indexed 2.2 table with a
tag): on two copies aged alike, both keep the same versions and the same
kinds of files in the same places, the table still reads equal, and a
clone's source is never touched."""
from __future__ import annotations

import datetime
import os

import lance
import pytest

from lance_ops.txn.table import Table
from tests.spark.test_vacuum import DAY, age_table, all_files, versions_of
from tests.zoo import copy_table, pylance_dataset


def shape(path) -> list:
    """Which kind of file is where (file names are random)."""
    return sorted((os.path.dirname(f), os.path.splitext(f)[1]) for f in all_files(path))


@pytest.mark.parametrize("name", ["clone", "branch", "legacy", "v22"])
def test_vacuum_keeps_what_pylance_cleanup_keeps(zoo, tmp_path, name):
    z = zoo[name]
    ours, ref = copy_table(z, str(tmp_path / "ours")), copy_table(z, str(tmp_path / "ref"))
    for t in (ours, ref):
        age_table(t.path, 10 * DAY)
        if t.branch:
            age_table(os.path.join(t.path, "tree", t.branch), 10 * DAY)
    source_before = {f: os.stat(os.path.join(z.source, f)).st_mtime for f in all_files(z.source)} if z.source else None
    expected_rows = pylance_dataset(ours).to_table().sort_by("id")

    Table(ours.path).vacuum(retentionHours=24, enforceRetentionDuration=False)
    lance.dataset(ref.path).cleanup_old_versions(
        older_than=datetime.timedelta(hours=24), error_if_tagged_old_versions=False)

    assert versions_of(ours.path) == versions_of(ref.path)
    assert shape(ours.path) == shape(ref.path)
    assert pylance_dataset(ours).to_table().sort_by("id") == expected_rows
    assert pylance_dataset(ours).validate() is None
    if z.source:
        assert {f: os.stat(os.path.join(z.source, f)).st_mtime for f in all_files(z.source)} == source_before
