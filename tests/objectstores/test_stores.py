"""Commit stores without Spark: URIs and options, the stores' protocol
details, tags through an external store, interop with pylance's tables, and
the number of requests per operation on the test server."""
from __future__ import annotations

import lance
import pytest

from lance_ops.errors import CommitStoreError, InvalidArgumentError, TableExistsError
from lance_ops.storage import ObjectStore, commit_handler
from lance_ops.storage.commit import ConditionalPutHandler
from lance_ops.storage.external import ExternalStoreHandler
from lance_ops.storage.objectstore import redact_options, redact_uri, resolve_uri
from lance_ops.storage.resolve import open_manifest_store
from lance_ops.storage.sqlite_store import path_of
from lance_ops.txn.table import Table
from tests.objectstores import workload as wl
from tests.objectstores.conftest import store_location
from tests.servers import SECRET_KEY


def test_s3_ddb_uri_is_an_s3_table_with_a_dynamodb_store():
    uri, opts = resolve_uri("s3+ddb://b/p/t.lance?ddbTableName=commits", {"aws_region": "r"})
    assert uri == "s3://b/p/t.lance" and opts == {"aws_region": "r", "commit_store": "dynamodb://commits"}
    for bad in ("s3+ddb://b/t.lance", "s3+ddb://b/t.lance?ddbTableName=", "s3+ddb://b/t?ddbTableName=a&x=1",
                "s3+ddb://b/t?table=a"):
        with pytest.raises(InvalidArgumentError, match="ddbTableName"):
            resolve_uri(bad, {})
    with pytest.raises(InvalidArgumentError, match="names the commit store"):
        resolve_uri("s3+ddb://b/t?ddbTableName=a", {"commit_store": "sqlite:///x.db"})


def test_secrets_are_redacted():
    shown = redact_options({"aws_secret_access_key": "S", "aws_session_token": "T", "aws_access_key_id": "K",
                            "commit_store": "postgresql://u:pw@127.0.0.1:5432/db", "aws_region": "r",
                            "azure_storage_account_key": "A", "google_service_account_key": "G"})
    assert shown == {"aws_secret_access_key": "***", "aws_session_token": "***", "aws_access_key_id": "K",
                     "commit_store": "postgresql://u:***@127.0.0.1:5432/db", "aws_region": "r",
                     "azure_storage_account_key": "***", "google_service_account_key": "***"}
    assert redact_uri("postgresql://u@127.0.0.1/db") == "postgresql://u@127.0.0.1/db"
    store = ObjectStore("s3://b/t.lance", {"aws_secret_access_key": SECRET_KEY, "aws_endpoint": "http://127.0.0.1:1"})
    assert SECRET_KEY not in repr(store) and "commit_store" not in store.codec_options


def test_sqlite_uris(tmp_path):
    assert path_of("sqlite:///var/lance/c.db") == "/var/lance/c.db"
    assert path_of("sqlite:////var/lance/c.db") == "/var/lance/c.db"
    assert path_of("sqlite").endswith("/.lance_ops/commits.db")
    for bad in ("sqlite://host/c.db", "sqlite:///"):
        with pytest.raises(CommitStoreError):
            path_of(bad)
    with pytest.raises(InvalidArgumentError, match="unknown commit store"):
        open_manifest_store("redis://x")


def test_handlers_chosen_by_options(moto, postgres, tmp_path):
    assert isinstance(commit_handler(ObjectStore("s3://lance-ops/x", moto.options())), ConditionalPutHandler)
    for kind in ("sqlite", "postgres", "dynamodb"):
        uri, opts = store_location(kind, moto, postgres, tmp_path, "h")
        handler = commit_handler(ObjectStore(uri, opts))
        assert isinstance(handler, ExternalStoreHandler)
    bad = moto.options(commit_store="dynamodb://no_such_table")
    with pytest.raises(CommitStoreError, match="no_such_table.*does not exist"):
        commit_handler(ObjectStore("s3://lance-ops/x", bad))


def test_postgres_password_never_shown():
    with pytest.raises(CommitStoreError) as err:
        commit_handler(ObjectStore("/tmp/x.lance", {"commit_store": "postgresql://u:hunter2@127.0.0.1:1/db"})).latest()
    assert "hunter2" not in str(err.value) and "u:***@" in str(err.value)


@pytest.mark.parametrize("kind", ["conditional", "sqlite", "postgres", "dynamodb"])
def test_tags_through_each_store(kind, moto, postgres, tmp_path):
    uri, opts = store_location(kind, moto, postgres, tmp_path, "tags")
    t = wl.create(uri, opts)
    wl.append(t, 1, [0])
    t.createTag("one", 1)
    with pytest.raises(TableExistsError):
        t.createTag("one", 2)
    t.deleteTag("one")
    t.createTag("one", 2)  # the name is free again
    assert t.listTags() == {"one": 2}
    assert lance.dataset(uri, storage_options=opts).tags.list()["one"]["version"] == 2


@pytest.mark.parametrize("kind", ["conditional", "dynamodb"])
def test_pylance_tables_work_with_us(kind, moto, postgres, tmp_path):
    uri, opts = store_location(kind, moto, postgres, tmp_path, "pl")
    for i in range(3):
        lance.write_dataset(wl.batch(0, [i]), uri, storage_options=opts, mode="append" if i else "create")
    t = Table(uri, opts)
    assert t.version == 3
    wl.append(t, 1, [9])
    lance.write_dataset(wl.batch(0, [3]), uri, storage_options=opts, mode="append")
    assert Table(uri, opts).version == 5
    got = sorted((r["writer"], r["seq"]) for r in lance.dataset(uri, storage_options=opts).to_table().to_pylist())
    assert got == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 9)]


def test_v1_named_table_on_s3(moto):
    uri = "s3://lance-ops/v1-names.lance"
    opts = moto.options()
    for i in range(12):  # "10.manifest" sorts before "2.manifest"
        lance.write_dataset(wl.batch(0, [i]), uri, storage_options=opts, mode="append" if i else "create",
                            enable_v2_manifest_paths=False)
    t = Table(uri, opts)
    assert t.version == 12
    wl.append(t, 1, [0])
    assert lance.dataset(uri, storage_options=opts).version == 13
    assert [v["version"] for v in lance.dataset(uri, storage_options=opts).versions()] == list(range(1, 14))


def test_requests_per_operation(moto):
    """Latest-version discovery costs one list request however many versions
    there are (V2 names sort newest first); a 1-row append costs 6 requests
    on S3 with conditional put (data file, transaction, manifest, a HEAD
    checking the data file is still there, and two lists: the latest version
    when the call starts -- a handle follows the table -- and again when it
    commits)."""
    uri = "s3://lance-ops/requests.lance"
    opts = moto.options()
    t = wl.create(uri, opts)
    for i in range(25):
        wl.append(t, 1, [i])
    moto.counts(reset=True)
    assert commit_handler(ObjectStore(uri, opts)).latest().version == 26
    assert moto.counts(reset=True) == {"s3.LIST": 1}
    wl.append(t, 1, [99])
    assert moto.counts(reset=True) == {"s3.PUT": 3, "s3.LIST": 2, "s3.HEAD": 1}
    Table(uri, opts, version=5)
    assert moto.counts(reset=True) == {"s3.HEAD": 1, "s3.GET": 1}
    # history(limit=n): the first listing page and n manifests, however many versions
    fresh = Table(uri, opts)
    moto.counts(reset=True)
    assert [h["version"] for h in fresh.history(limit=2)] == [27, 26]
    counts = moto.counts(reset=True)
    assert counts["s3.LIST"] == 1 and counts.get("s3.GET", 0) <= 2 and set(counts) <= {"s3.LIST", "s3.GET"}, counts
    # history pages through the listing (1 request per 1000 versions) and reads each manifest
    assert len(t.history()) == 27
    counts = moto.counts(reset=True)
    assert counts["s3.LIST"] == 1 and counts["s3.GET"] <= 2 * 27
    # vacuum streams the listings: one request per directory page (and one
    # for the branches that may read this table's files)
    t.vacuum(retentionHours=0, enforceRetentionDuration=False, dryRun=True)
    counts = moto.counts(reset=True)
    assert counts["s3.LIST"] <= 9, counts
