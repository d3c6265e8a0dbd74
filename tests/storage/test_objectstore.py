"""The fsspec store: URI handling, storage options, put-if-not-exists."""
import os
import threading

import pytest

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.format.naming import ManifestNaming
from lance_ops.storage import ObjectStore, commit_handler
from lance_ops.storage.commit import UnsafeStoreHandler
from lance_ops.storage.objectstore import normalize_uri, split_storage_options


def test_normalize_uri(tmp_path):
    assert normalize_uri(str(tmp_path)) == ("file", str(tmp_path))
    assert normalize_uri("file://" + str(tmp_path)) == ("file", str(tmp_path))
    assert normalize_uri("s3://bucket/t.lance/") == ("s3", "s3://bucket/t.lance")
    assert normalize_uri("memory://x/y") == ("memory", "memory://x/y")


def test_storage_options_split():
    fs, codec = split_storage_options("s3", {
        "aws_access_key_id": "K", "aws_secret_access_key": "S", "aws_endpoint": "http://127.0.0.1:9000", "region": "r",
        "fsspec.anon": "false", "lance.allow_http": "true",
    })
    assert fs == {"key": "K", "secret": "S", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "r"}, "anon": "false",
                  "use_listings_cache": False}
    assert codec == {"aws_access_key_id": "K", "aws_secret_access_key": "S", "aws_endpoint": "http://127.0.0.1:9000", "region": "r", "allow_http": "true"}


@pytest.mark.parametrize("uri", ["local", "memory://lance_ops-test/store"])
def test_put_if_not_exists_is_exclusive(tmp_path, uri):
    store = ObjectStore(str(tmp_path / "t") if uri == "local" else uri)
    wins = []

    def racer(i):
        if commit_handler(store).put_if_not_exists("_versions/x.manifest", f"writer {i}".encode()):
            wins.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    assert store.read_bytes("_versions/x.manifest") == f"writer {wins[0]}".encode()
    if uri == "local":  # no temp files left behind
        assert os.listdir(tmp_path / "t" / "_versions") == ["x.manifest"]


def test_commit_refused_without_atomic_create():
    store = ObjectStore.__new__(ObjectStore)
    ObjectStore.__init__(store, "memory://lance_ops-test/refuse")
    store.scheme, store.is_local = "gcs", False  # pretend: a store we cannot create atomically on
    assert isinstance(commit_handler(store), UnsafeStoreHandler)
    with pytest.raises(UnsupportedFeatureError, match="put-if-not-exists"):
        commit_handler(store).commit(1, ManifestNaming.V2, b"x")
    with pytest.raises(UnsupportedFeatureError, match="put-if-not-exists"):
        commit_handler(store).put_if_not_exists("_refs/tags/t.json", b"x")
