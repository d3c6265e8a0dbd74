"""Every code block of README.md and of the documentation site runs
(tests/docs/pages.py says how each kind of block is executed). One test per
page: a page's blocks build on each other, in one namespace. The pages whose
blocks need a test server run next to that server's tests (``SPECIAL``)."""
from __future__ import annotations

import pytest

from tests.docs.pages import SPECIAL, all_pages, fenced_blocks, page_id, run_page

PAGES = [p for p in all_pages() if page_id(p) not in SPECIAL and fenced_blocks(p)]


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_page_runs(path, spark, tmp_path):
    ran = run_page(path, spark, tmp_path)
    assert ran == sum(1 for b in fenced_blocks(path) if b[2] is None)
