"""The merge's bloom filter of source keys: equal keys (Spark's ``=``) hash
alike whatever their Arrow width or zone, members are never ruled out, and
false positives stay near the sizing."""
import datetime

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format import keyfilter as kf


@pytest.mark.parametrize("src,dst", [
    (pa.array([1, -7, 2**40, None], pa.int64()), pa.array([-7, 1, 3], pa.int32())),
    (pa.array(["", "ü", "abc" * 40, None]), pa.array(["ü", "", "ab", "abc" * 40], pa.large_string())),
    (pa.array([datetime.date(1969, 12, 31), datetime.date(2024, 2, 29)]), pa.array([datetime.date(2024, 2, 29)])),
    (pa.array([0, -1, 10**15], pa.timestamp("us", "UTC")), pa.array([-1, 10**15], pa.timestamp("us", "Asia/Tokyo"))),
])
def test_members_always_found(src, dst):
    f = kf.build(src, kf.filter_size(4))
    hit = kf.may_contain_each(f, dst).to_pylist()
    members = set(src.drop_null().to_pylist())
    for v, h in zip(dst.to_pylist(), hit):
        if v in members:
            assert h, v


def test_false_positives_and_nulls():
    keys = pa.array(np.arange(0, 2_000_000, 20), pa.int64())  # 100k keys
    f = kf.build(keys, kf.filter_size(len(keys)))
    probe = pa.array(np.arange(2_000_000), pa.int64())
    hit = np.asarray(kf.may_contain_each(f, probe).to_numpy(zero_copy_only=False))
    assert hit[::20].all()
    assert hit.sum() - len(keys) < 0.02 * (len(probe) - len(keys))
    assert kf.may_contain_each(f, pa.array([None, 0], pa.int64())).to_pylist() == [False, True]
    u = kf.union([kf.build(pa.array([1]), 8192), kf.build(pa.array([2]), 8192)])
    assert kf.may_contain_each(u, pa.array([1, 2])).to_pylist() == [True, True]
    assert kf.filter_size(10**9) is None
