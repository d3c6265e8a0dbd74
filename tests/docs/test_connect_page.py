"""docs/guide/spark-connect.md's code blocks: on the classic session in
`make test`'s first pass, and through a Spark Connect server in its Connect
pass (this file is in the Makefile's CONNECT_SUITES) -- the page shows which
path an operation takes on each."""
from __future__ import annotations

from tests.docs.pages import ROOT, fenced_blocks, run_page

PAGE = ROOT / "docs/guide/spark-connect.md"


def test_connect_page_runs(spark, tmp_path):
    ran = run_page(PAGE, spark, tmp_path)
    assert ran == sum(1 for b in fenced_blocks(PAGE) if b[2] is None) == 1
