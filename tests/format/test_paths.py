"""Paths in a manifest stay inside the table (issue: a ``../`` data file path
returned another table's rows). Every variant -- ``../``, percent-encoded
dots, absolute paths, URIs; size recorded or not -- is CorruptTableError on
read; pylance refuses them too. Table URIs are normalised once."""
from __future__ import annotations

import lance
import pytest

from lance_ops.errors import CorruptTableError, InvalidArgumentError
from lance_ops.format.paths import escape_reason
from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.storage import ObjectStore
from lance_ops.storage.objectstore import normalize_uri
from lance_ops.txn.log import open_snapshot
from tests.hostile import VARIANTS, make_pair, point_outside


@pytest.mark.parametrize("path,bad", [
    ("abc.lance", False), ("sub/abc.lance", False), ("a%20b.lance", False), ("...lance", False),
    ("../x.lance", True), ("a/../../x", True), ("./x", True), ("a//b", True), ("", True), ("/etc/passwd", True),
    ("%2e%2e/x", True), ("%2E%2e/x", True), ("a%2f..%2fb", True), ("s3://b/k", True), ("file:///x", True),
    ("C:\\x", True), ("a\\..\\b", True), ("a\x00b", True),
])
def test_escape_reasons(path, bad):
    assert (escape_reason(path) is not None) == bad, path


def read_all(uri, options=None):
    store = ObjectStore(uri, options)
    snap = open_snapshot(store)
    out = []
    for frag in snap.fragments:
        for b in scan_fragment(store, snap.schema, FragmentScan(frag, snap.schema.names, [])):
            out += b.to_pylist()
    return out


@pytest.mark.parametrize("keep_size", [True, False], ids=["size", "no-size"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_data_file_outside_the_table_is_refused(tmp_path, variant, keep_size):
    victim, attacker, vfile = make_pair(str(tmp_path))
    assert sorted(r["id"] for r in read_all(attacker)) == [7, 8]
    point_outside(attacker, None, VARIANTS[variant](victim, vfile), keep_size)
    with pytest.raises(CorruptTableError, match="reaches outside the table"):
        read_all(attacker)
    with pytest.raises((OSError, ValueError), match="Not found"):  # pylance: one odd name, not found
        lance.dataset(attacker).to_table()


@pytest.mark.parametrize("uri,root", [
    ("s3://b/sq/new/../t.lance", "s3://b/sq/t.lance"), ("s3://b//sq///t.lance/", "s3://b/sq/t.lance"),
    ("s3://b/./t.lance", "s3://b/t.lance"), ("memory://x/a/../t.lance", "memory://x/t.lance"),
    ("gs://b/a/b/../../t.lance", "gs://b/t.lance"),
])
def test_table_uris_are_normalised_once(uri, root):
    assert normalize_uri(uri)[1] == root


@pytest.mark.parametrize("uri", ["s3://b/..", "s3://b/a/../../t.lance", "s3://b/x/%2e%2e/t.lance"])
def test_table_uris_reaching_above_the_bucket_are_refused(uri):
    with pytest.raises(InvalidArgumentError):
        ObjectStore(uri)


def test_a_local_table_opened_through_dots_is_one_table(tmp_path):
    (tmp_path / "new").mkdir()
    victim, attacker, _ = make_pair(str(tmp_path))
    via = f"{tmp_path}/new/../attacker.lance"
    assert ObjectStore(via).root == attacker
    assert sorted(r["id"] for r in read_all(via)) == [7, 8]
