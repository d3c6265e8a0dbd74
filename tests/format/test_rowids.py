"""Row id / row version sequences: pylance's observed bytes, round trips, and
the segment kind the reference writer picks."""
import numpy as np
import pytest

from lance_ops.format import rowids
from lance_ops.format.proto import rowids_pb2


def seq_bytes(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr.replace(" ", ""))


@pytest.mark.parametrize(
    "hexstr,values",
    [
        ("0a 04 0a 02 10 05", list(range(5))),
        ("0a 09 1a 07 08 02 10 09 1a 01 41", [2, 8]),
        ("0a 11 12 0f 10 e8 07 1a 0a 0a 08 08 0a 12 04 00 00 ea 01", [i for i in range(1000) if i not in (10, 500)]),
        ("0a 10 22 0e 0a 0c 12 0a 00 00 14 00 28 00 3c 00 50 00", [0, 20, 40, 60, 80]),
    ],
)
def test_decode_and_encode_pylance_bytes(hexstr, values):
    data = seq_bytes(hexstr)
    assert rowids.decode_row_ids(data).tolist() == values
    # The reference writer's segment choice reproduces pylance's bytes.
    assert rowids.encode_row_ids([np.array(values, dtype=np.uint64)]) == data


def test_version_sequence_bytes():
    assert rowids.uniform_versions(1, 5) == seq_bytes("0a 08 0a 04 0a 02 10 05 10 01")
    assert rowids.decode_versions(seq_bytes("0a 08 0a 04 0a 02 10 05 10 01"), 5).tolist() == [1] * 5
    assert rowids.decode_versions(None, 3).tolist() == [1, 1, 1]


def test_version_runs_count_span_values_not_positions():
    # After compaction pylance keeps old offsets in spans (e.g. a bitmap of the
    # surviving offsets 3,5 of an old fragment): only the count matters.
    seq = rowids_pb2.RowDatasetVersionSequence()
    r = seq.runs.add()
    r.span.CopyFrom(rowids.encode_segment(np.array([3, 5], dtype=np.uint64)))
    r.version = 4
    r = seq.runs.add()
    r.span.CopyFrom(rowids.range_segment(100, 103))
    r.version = 7
    assert rowids.decode_versions(seq.SerializeToString(), 5).tolist() == [4, 4, 7, 7, 7]


def test_roundtrip_random_and_unsorted():
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 1000):
        vals = np.sort(rng.choice(10**6, size=n, replace=False)).astype(np.uint64)
        assert rowids.decode_row_ids(rowids.encode_row_ids([vals])).tolist() == vals.tolist()
    unsorted = np.array([5, 1, 9, 2], dtype=np.uint64)
    seg = rowids.encode_segment(unsorted)
    assert seg.WhichOneof("segment") == "array"
    assert rowids.decode_segment(seg).tolist() == [5, 1, 9, 2]
    big = np.array([0, 2**40, 2**41], dtype=np.uint64)
    assert rowids.decode_segment(rowids.encode_segment(big)).tolist() == big.tolist()
    versions = np.array([1, 1, 3, 3, 3, 2], dtype=np.uint64)
    assert rowids.decode_versions(rowids.encode_versions(versions), 6).tolist() == versions.tolist()


def test_contiguous_runs():
    runs = rowids.contiguous_runs(np.array([4, 6, 7, 8, 20], dtype=np.uint64))
    assert [r.tolist() for r in runs] == [[4], [6, 7, 8], [20]]


def test_values_at_offsets_equal_the_whole_sequence_indexed():
    """``decode_row_ids_at`` / ``decode_versions_at`` (an update reading a
    few rows of a big fragment) give exactly the full decode at those
    offsets, for every segment kind and run layout; a sequence that does
    not cover the fragment is a CorruptTableError either way."""
    from lance_ops.errors import CorruptTableError

    rng = np.random.default_rng(7)
    for case in range(60):
        chunks, start = [], 0
        for _ in range(rng.integers(1, 5)):
            n = int(rng.integers(1, 300))
            kind = rng.integers(0, 3)
            if kind == 0:  # a range
                chunks.append(np.arange(start, start + n, dtype=np.uint64))
            elif kind == 1:  # holes / bitmap / sorted array: what a sparse run encodes as
                chunks.append(np.sort(rng.choice(np.arange(start, start + 3 * n), n, replace=False)).astype(np.uint64))
            else:  # unsorted (an array segment)
                chunks.append(rng.permutation(np.arange(start, start + n)).astype(np.uint64))
            start += 3 * n + 5
        data = rowids.encode_row_ids(chunks)
        ids = rowids.decode_row_ids(data)
        offsets = np.sort(rng.choice(len(ids), int(rng.integers(1, len(ids) + 1)), replace=False))
        assert np.array_equal(rowids.decode_row_ids_at(data, len(ids), offsets), ids[offsets]), case
        per_row = np.repeat(rng.integers(1, 9, size=len(chunks)).astype(np.uint64), [len(c) for c in chunks])
        vdata = rowids.encode_versions(per_row)
        assert np.array_equal(rowids.decode_versions_at(vdata, len(per_row), offsets), per_row[offsets]), case
        with pytest.raises(CorruptTableError):
            rowids.decode_row_ids_at(data, len(ids) + 1, offsets)
        with pytest.raises(CorruptTableError):
            rowids.decode_versions_at(vdata, len(per_row) - 1, offsets[:1])
    assert list(rowids.decode_versions_at(None, 10, np.array([0, 9]))) == [1, 1]  # (no sequence: version 1)
    ranges = rowids.encode_row_ids([np.arange(100, 110, dtype=np.uint64), np.arange(5, 8, dtype=np.uint64)])
    assert list(rowids.decode_row_ids_at(ranges, 13, np.array([0, 9, 10, 12]))) == [100, 109, 5, 7]
