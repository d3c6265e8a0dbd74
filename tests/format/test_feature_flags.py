"""Feature flags, bit by bit: lance_ops reads a table only if it meets every
reader obligation and writes one only if it meets every writer obligation
(the table in :data:`lance_ops.format.features.FLAGS`), and a refused write
leaves no new version.

For reference, what pylance 14.0.2 does with each bit (set in both flag
words of a table it wrote): it reads and writes 128 and 2048 (and drops them
on its next commit), needs 256 / 1024 / 16384 together with content it
checks, refuses 64, 512, 4096, 8192. :func:`test_pylance_refuses_what_we_refuse`
pins the bits where both refuse; lance_ops is stricter on 128, 1024, 2048 and
32768 (it cannot meet those writer obligations).
"""
from __future__ import annotations

import shutil

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.format.features import FLAGS, KNOWN_READER_FLAGS, KNOWN_WRITER_FLAGS
from lance_ops.format.manifest import encode_manifest_file
from lance_ops.txn.table import Table
from tests.helpers import manifest_files, read_manifest

#: Every bit up to 2^15 but 2 (stable row ids needs row ids in every
#: fragment: tested with real tables elsewhere).
BITS = [1 << i for i in range(16) if i != 1]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("flags") / "t.lance")
    lance.write_dataset(pa.table({"a": [1, 2, 3]}), p)
    return p


def with_bit(base, tmp_path, bit, words=("reader", "writer")) -> str:
    p = str(tmp_path / f"t{bit}")
    shutil.copytree(base, p)
    mf = read_manifest(p)
    for w in words:
        setattr(mf.manifest, f"{w}_feature_flags", getattr(mf.manifest, f"{w}_feature_flags") | bit)
    path = manifest_files(p)[mf.manifest.version]
    with open(path, "wb") as f:
        f.write(encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices))
    return p


def test_the_table_names_every_bit_once():
    bits = [f.bit for f in FLAGS]
    assert len(bits) == len(set(bits)) and all(b & (b - 1) == 0 for b in bits)
    # the well-understood, content-derived bits are fully supported
    for b in (1, 2, 8, 16):
        assert b & KNOWN_READER_FLAGS and b & KNOWN_WRITER_FLAGS


@pytest.mark.parametrize("bit", BITS)
def test_read_and_write_follow_the_table(base, tmp_path, bit):
    flag = {f.bit: f for f in FLAGS}.get(bit)
    readable = flag is not None and flag.read
    writable = flag is not None and flag.write
    p = with_bit(base, tmp_path, bit)
    if not readable:
        with pytest.raises(UnsupportedFeatureError, match=f"{bit} "):
            Table(p)
        return
    t = Table(p)
    assert t.count() == 3
    before = t.version
    if writable:
        t.setProperties({"k": "v"})
        assert Table(p).version == before + 1
    else:
        with pytest.raises(UnsupportedFeatureError, match="can read it but not write it"):
            t.setProperties({"k": "v"})
        assert Table(p).version == before  # refused before anything was committed


@pytest.mark.parametrize("bit", [64, 512, 4096, 8192])
def test_pylance_refuses_what_we_refuse(base, tmp_path, bit):
    p = with_bit(base, tmp_path, bit)
    with pytest.raises((OSError, ValueError), match="cannot be read by this version"):
        lance.dataset(p).to_table()
    with pytest.raises(UnsupportedFeatureError):
        Table(p)
