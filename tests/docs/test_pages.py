"""Every code block of README.md and of the documentation site runs
(tests/docs/pages.py says how each kind of block is executed). One test per
page: a page's blocks build on each other, in one namespace. A page with
shell blocks starts processes (the ``processes`` fixture: tier ``system``);
the pages whose blocks need a test server run next to that server's tests
(``SPECIAL``)."""
from __future__ import annotations

import pytest

from tests.docs.pages import SPECIAL, all_pages, fenced_blocks, page_id, run_page


def _pages(with_commands: bool) -> list:
    return [p for p in all_pages()
            if page_id(p) not in SPECIAL and _runnable(p)
            and any(lang == "sh" and reason is None for _, lang, reason, _ in fenced_blocks(p)) == with_commands]


def _runnable(path) -> int:
    return sum(1 for _, _, reason, _ in fenced_blocks(path) if reason is None)


@pytest.mark.parametrize("path", _pages(with_commands=False), ids=page_id)
def test_page_runs(path, spark, tmp_path):
    assert run_page(path, spark, tmp_path) == _runnable(path)


@pytest.mark.parametrize("path", _pages(with_commands=True), ids=page_id)
def test_page_with_commands_runs(path, spark, processes, tmp_path):
    assert run_page(path, spark, tmp_path) == _runnable(path)
