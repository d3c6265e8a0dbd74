"""Paths stay inside the table on S3 (moto): a manifest naming a data file
outside the table's prefix is CorruptTableError whether or not it records
the file's size (before: another table's rows came back when the size was
absent), and a table URI with ``..`` is one prefix for metadata and data
(before: manifests under the literal ``sq/new/../t.lance/`` key, data files
under ``sq/t.lance/data/``)."""
from __future__ import annotations

import lance
import pytest

from lance_ops.errors import CorruptTableError
from lance_ops.txn.table import Table
from tests.format.test_paths import read_all
from tests.hostile import VARIANTS, make_pair, point_outside
from tests.objectstores import workload as wl


@pytest.mark.parametrize("keep_size", [True, False], ids=["size", "no-size"])
@pytest.mark.parametrize("variant", ["dotdot", "percent", "absolute", "uri"])
def test_a_data_file_outside_the_table_is_refused_on_s3(moto, tmp_path, variant, keep_size):
    opts = moto.options()
    victim, attacker, vfile = make_pair(f"s3://lance-ops/hostile-{variant}-{keep_size}-{tmp_path.name}", opts)
    point_outside(attacker, opts, VARIANTS[variant](victim, vfile), keep_size)
    with pytest.raises(CorruptTableError, match="reaches outside the table"):
        read_all(attacker, opts)
    with pytest.raises((OSError, ValueError), match="Not found"):  # pylance: one odd name, not found
        lance.dataset(attacker, storage_options=opts).to_table()


def test_a_table_uri_with_dots_is_one_prefix(moto, tmp_path):
    opts = moto.options()
    base = f"hostile-uri-{tmp_path.name}"
    t = wl.create(f"s3://lance-ops/{base}/new/../t.lance", opts, rows=3)
    wl.append(t, 1, [0])
    keys = [o["Key"] for o in moto.client("s3").list_objects_v2(Bucket="lance-ops", Prefix=base)["Contents"]]
    assert keys and all(k.startswith(f"{base}/t.lance/") for k in keys), keys
    assert {k.split("/")[2] for k in keys} >= {"_versions", "data", "_transactions"}
    normal = f"s3://lance-ops/{base}/t.lance"
    assert lance.dataset(normal, storage_options=opts).count_rows() == 4
    assert Table(normal, opts).version == Table(f"s3://lance-ops/{base}//new/./../t.lance/", opts).version == 2
