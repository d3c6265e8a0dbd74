"""The documentation site itself: every fenced block of README.md and
docs/ is one the page runner executes (python, sql, sh, or a file a
``write-file`` comment names) or says why it does not run; every page is in
the site's navigation; the conflict rule table is rendered from
``lance_ops.txn.conflicts.RULES``."""
from __future__ import annotations

import importlib.util

import yaml

from lance_ops.txn import conflicts
from tests.docs.pages import DOCS, LANGUAGES, ROOT, SPECIAL, all_pages, fenced_blocks, page_id

_spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)


def test_every_block_runs_or_says_why_not():
    bad = [f"{page_id(p)}:{line} ({lang or 'no language'})"
           for p in all_pages() for line, lang, reason, write in fenced_blocks(p)
           if reason is None and write is None and lang not in LANGUAGES]
    assert not bad, "blocks neither run nor marked <!-- not-run: why -->: " + ", ".join(bad)
    for p in all_pages():
        for line, _, reason, _ in fenced_blocks(p):
            assert reason is None or len(reason) > 20, f"{page_id(p)}:{line}: say why the block does not run"


def test_the_pages_with_servers_have_their_tests():
    for page, test in SPECIAL.items():
        assert (ROOT / page).exists() and (ROOT / test).exists(), (page, test)
        assert page_id(ROOT / page) in (ROOT / test).read_text()


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for v in node for p in _nav_pages(v)]


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    nav = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == nav


def test_the_conflict_table_is_rendered_from_the_rules():
    table = hooks.render_rules()
    for ours, cells in conflicts.RULES.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| **{ours}** |"))
        assert row.count("|") == len(conflicts.COLUMNS) + 2
        for cell in cells:
            assert (cell.__name__ if callable(cell) else cell.name) in row
    page = (DOCS / "internals" / "conflicts.md").read_text()
    assert hooks.MARKER in page
    assert table in hooks.on_page_markdown(page, None, None, None)


def test_the_readme_links_resolve():
    import re

    text = (ROOT / "README.md").read_text()
    links = [t for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if "://" not in t]
    assert links and all((ROOT / t).exists() for t in links), [t for t in links if not (ROOT / t).exists()]
    # every page of the site is one link away from the README (the index, or a page it links)
    linked = {t for t in links if t.startswith("docs/")}
    assert {"docs/getting-started.md", "docs/reference/index.md"} <= linked
