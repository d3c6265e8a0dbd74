"""mkdocs hooks of the documentation site (mkdocs.yml ``hooks:``).

``<!-- conflict-rules -->`` in a page becomes the conflict rule table,
rendered at build time from :data:`lance_ops.txn.conflicts.RULES` itself (and
the cells outside it: ``SPECIAL_CELLS``, ``ALWAYS_COMPATIBLE``,
``COMPATIBLE_COMMITS``), so the site cannot drift from the code that decides
commits. ``lance_ops.txn`` imports without pyspark.
"""
from __future__ import annotations

import inspect
import os
import re
import sys

MARKER = "<!-- conflict-rules -->"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _conflicts():
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from lance_ops.txn import conflicts

    return conflicts


def _cell(value) -> str:
    if callable(value):
        return f"[`{value.__name__}`](#{_anchor(value)})"
    return f"**{value.name}**" if value.name in ("RETRY", "FAIL") else value.name


def _anchor(fn) -> str:
    return "rule-" + fn.__name__.replace("_", "-")


def _doc(fn) -> str:
    """The rule's docstring (reST roles made Markdown), or -- a rule without
    one -- its source, which is then the whole explanation."""
    doc = inspect.getdoc(fn)
    if doc:
        doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", " ".join(doc.split()))
        return doc.replace("``", "`")
    src = inspect.getsource(fn).rstrip()
    return "```python\n" + src + "\n```"


def render_rules() -> str:
    """The rule table and the meaning of each named rule, as Markdown."""
    c = _conflicts()
    cols = list(c.COLUMNS)
    out = ["| ours \\ theirs | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    functions = []
    for ours, cells in c.RULES.items():
        out.append(f"| **{ours}** | " + " | ".join(_cell(v) for v in cells) + " |")
        for v in cells:
            if callable(v) and v not in functions:
                functions.append(v)
    out += ["", "Operations outside the table:", ""]
    out.append("- committed concurrently, never a conflict (theirs): "
               + ", ".join(f"`{k}`" for k in sorted(c.ALWAYS_COMPATIBLE))
               + " — ours is rebased if it is a Delete or Update, else commits as is;")
    out.append("- compatible with everything when we commit them (ours): "
               + ", ".join(f"`{k}`" for k in sorted(c.COMPATIBLE_COMMITS)) + ";")
    for (ours, theirs), v in c.SPECIAL_CELLS.items():
        if callable(v) and v not in functions:
            functions.append(v)
        out.append(f"- `{ours}` after `{theirs}`: {_cell(v)};")
    out.append("- any other operation, an unknown one, or a missing transaction: **RETRY**.")
    out += ["", "### Named rules", "",
            "A cell that depends on which fragments, fields or keys both touched is a function of both "
            "transactions; its docstring, or its code where it has none:", ""]
    for fn in functions:
        out += [f"#### `{fn.__name__}` {{#{_anchor(fn)}}}", "", _doc(fn), ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files):  # noqa: ARG001 (mkdocs' signature)
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render_rules())
    return markdown
