"""docs/guide/storage.md's code blocks, run against the suite's moto server
(S3 with conditional put) -- the page reads the endpoint, bucket and keys
from the environment, as a deployment would."""
from __future__ import annotations

from tests.docs.pages import ROOT, fenced_blocks, run_page

PAGE = ROOT / "docs/guide/storage.md"


def test_storage_page_runs(spark, moto, tmp_path, monkeypatch):
    opts = moto.options()
    monkeypatch.setenv("S3_ENDPOINT", moto.endpoint)
    monkeypatch.setenv("S3_BUCKET", "lance-ops")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", opts["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", opts["aws_secret_access_key"])
    ran = run_page(PAGE, spark, tmp_path)
    assert ran == sum(1 for b in fenced_blocks(PAGE) if b[2] is None) == 3
