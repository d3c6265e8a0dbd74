"""Running the code blocks of README.md and of the documentation site's pages
(docs/): sybil parses each page, and every fenced block runs in order, in one
namespace per page (blocks build on each other):

* ``python`` -- executed (sybil's evaluator; tracebacks point at the page's
  lines); ``spark`` is the test suite's session, ``tempfile.mkdtemp()`` lands
  in the test's temporary directory;
* ``sql`` -- the block as one script through ``lance_ops.sql(spark, text)``,
  every statement's result collected;
* ``sh`` -- each command line through bash (``$VAR``, ``$(...)`` and quotes as
  a shell reads them, the environment the page's Python blocks set), exit code
  0 unless the line ends in ``# exit N``; ``lance-ops`` commands that need
  Spark run in this process on the suite's session (``lance_ops.jobs.main``
  with the command line's arguments: the JVM start is the only difference),
  the others as the installed console script; ``make demo`` and ``make
  test`` are checked with ``make -n`` (see :func:`_check_make_target`).

A block preceded by ``<!-- write-file: PATH -->`` is a file the next blocks
use (a DAG, a table list, a module of feature functions): it is written to
PATH under the page's work directory, where the page's shell commands run.
A block that cannot run here says so in an HTML comment right before it,
``<!-- not-run: why -->``; ``test_site.py`` checks that every block of every
page is one of the above or carries such a reason. Each page runs isolated:
Spark SQL confs, temp views, streaming queries, the environment, the working
directory and the ``lance_ops`` logger are put back afterwards.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sybil import Document, Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LANGUAGES = ("python", "sql", "sh")
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<reason>.+?)\s*-->\s*$", re.MULTILINE)
WRITE_FILE = re.compile(r"<!--\s*write-file:\s*(?P<path>\S+)\s*-->\s*$", re.MULTILINE)


def all_pages() -> list[Path]:
    """README.md and every page of the site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def fenced_blocks(path: Path) -> list[tuple[int, str, str | None, str | None]]:
    """(line, language, not-run reason, write-file path) of every fenced block."""
    doc = Document(path.read_text(), str(path))
    out = []
    for region in FencedCodeBlockLexer(language=r"[^\n]*")(doc):
        line = doc.text.count("\n", 0, region.start) + 1
        out.append((line, region.lexemes["language"].strip(), _directive(NOT_RUN, doc.text, region.start),
                    _directive(WRITE_FILE, doc.text, region.start)))
    return out


def _directive(pattern: re.Pattern, text: str, start: int) -> str | None:
    """The argument of the ``pattern`` comment right before ``start``."""
    before = text[:start].rstrip()
    matches = list(pattern.finditer(before))
    if matches and matches[-1].end() == len(before):
        return matches[-1].group(1)
    return None


# ------------------------------------------------------------ evaluators
def evaluate_sql(example) -> None:
    import lance_ops

    spark = example.namespace["spark"]
    try:
        results = lance_ops.sql(spark, example.parsed, allResults=True)
        example.namespace["sql_results"] = [None if r is None else r.collect() for r in results]
    except Exception as e:
        raise AssertionError(f"{example.path}, line {example.line}: the sql block failed: {type(e).__name__}: {e}") from e


def _command_lines(source: str) -> list[str]:
    lines, cur = [], ""
    for raw in source.splitlines():
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        cur += raw
        if cur.strip() and not cur.strip().startswith("#"):
            lines.append(cur.strip())
        cur = ""
    return lines


def _expected_exit(line: str) -> tuple[str, int]:
    m = re.search(r"#\s*exit\s+(\d+)\s*$", line)
    return (line[: m.start()].rstrip(), int(m.group(1))) if m else (line, 0)


def _shell_env() -> dict:
    bin_dir = os.path.dirname(sys.executable)
    return dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _argv(line: str) -> list[str]:
    """The words bash makes of ``line`` (expansions included)."""
    r = subprocess.run(["bash", "-c", f"set -- {line}; for a in \"$@\"; do printf '%s\\0' \"$a\"; done"],
                       capture_output=True, text=True, env=_shell_env())
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\0")[:-1]


def _needs_spark(argv: list[str]) -> bool:
    from lance_ops.jobs.args import METADATA_COMMANDS

    words = [a for a in argv[1:] if not a.startswith("-")]
    return bool(words) and words[0] not in METADATA_COMMANDS and "--dry-run" not in argv and "--help" not in argv


@contextlib.contextmanager
def _logger_kept():
    logger = logging.getLogger("lance_ops")
    handlers, level = list(logger.handlers), logger.level
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)


def _run_jobs_in_process(argv: list[str]) -> tuple[int, str]:
    from lance_ops.jobs import main

    out = io.StringIO()
    with _logger_kept(), contextlib.redirect_stdout(out):
        code = main(argv[1:])
    return code, out.getvalue()


def evaluate_sh(example) -> None:
    for line in _command_lines(example.parsed):
        command, expected = _expected_exit(line)
        where = f"{example.path}, line {example.line}: {command}"
        words = shlex.split(command, comments=True)
        if words[:1] == ["make"]:
            _check_make_target(words[1:])
            continue
        argv = _argv(command) if command.startswith("lance-ops ") else []
        if argv and argv[0] == "lance-ops" and _needs_spark(argv):
            code, stdout = _run_jobs_in_process(argv)
            stderr = ""
        else:
            r = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=_shell_env(),
                               cwd=example.namespace["__workdir__"], timeout=600)
            code, stdout, stderr = r.returncode, r.stdout, r.stderr
        assert code == expected, f"{where}\nexit {code}, expected {expected}\n{stdout[-2000:]}\n{stderr[-3000:]}"
        if argv and argv[0] == "lance-ops" and "--help" not in argv and "--print-entry-file" not in argv:
            if expected != 2:  # a usage error prints nothing on stdout
                doc = json.loads(stdout)  # stdout is one JSON document and nothing else
                assert doc["exitCode"] == expected, (where, doc)
        example.namespace["sh_stdout"] = stdout


#: What each make target of the pages must run (checked with ``make -n``).
MAKE_RECIPES = {"demo": "jobs/demo.py", "test": "scripts/test_passes.sh"}


def _check_make_target(words: list[str]) -> None:
    """``make demo`` / ``make test`` are checked, not run: ``make test`` is
    the run these blocks are part of (it cannot run inside itself) and
    ``make demo`` takes over a minute on its own JVM (100k rows, every
    feature) and stops its Spark session when done. ``make -n`` proves that
    the target and its prerequisites resolve and that its recipe runs what
    the page says."""
    (target,) = words
    r = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert MAKE_RECIPES[target] in r.stdout, r.stdout


class _Plain:
    """The blocks no directive precedes (those run as their language)."""

    def __init__(self, parser):
        self.parser = parser

    def __call__(self, document):
        for region in self.parser(document):
            if not any(_directive(p, document.text, region.start) for p in (NOT_RUN, WRITE_FILE)):
                yield region


def write_files(document):
    """``<!-- write-file: PATH -->`` before a block (of any language): the
    block is a file the next blocks use -- a DAG, a YAML table list, a
    feature module --, written to ``PATH`` under the page's work directory
    (``cwd`` of its shell commands)."""
    for region in FencedCodeBlockLexer(language=r"[^\n]*")(document):
        path = _directive(WRITE_FILE, document.text, region.start)
        if path is not None:
            region.parsed = (path, str(region.lexemes["source"]))
            region.evaluator = _write_file
            yield region


def _write_file(example) -> None:
    rel, text = example.parsed
    dest = Path(example.namespace["__workdir__"]) / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)


SYBIL = Sybil(parsers=[
    _Plain(PythonCodeBlockParser()),
    _Plain(CodeBlockParser(language="sql", evaluator=evaluate_sql)),
    _Plain(CodeBlockParser(language="sh", evaluator=evaluate_sh)),
    write_files,
])


# ------------------------------------------------------------ isolation
@contextlib.contextmanager
def isolated(spark, tmp_path):
    """Whatever a page changes outside its tables is put back."""
    env = dict(os.environ)
    cwd = os.getcwd()
    tempdir = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    confs = _confs(spark)
    views = _temp_views(spark)
    try:
        with _logger_kept():
            yield
    finally:
        for q in spark.streams.active:
            q.stop()
        for name in _temp_views(spark) - views:
            spark.catalog.dropTempView(name)
        _restore_confs(spark, confs)
        tempfile.tempdir = tempdir
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)


def _confs(spark) -> dict:
    return dict(spark.conf.getAll)


def _restore_confs(spark, before: dict) -> None:
    now = _confs(spark)
    for k, v in now.items():
        if before.get(k) == v:
            continue
        with contextlib.suppress(Exception):
            if k in before:
                spark.conf.set(k, before[k])
            else:
                spark.conf.unset(k)


def _temp_views(spark) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if t.isTemporary}


def run_page(path: Path, spark, tmp_path, **namespace) -> int:
    """Run every block of ``path`` in order; returns how many ran."""
    document = SYBIL.parse(path)
    work = Path(tmp_path) / "work"
    work.mkdir(exist_ok=True)
    document.namespace.update(spark=spark, __workdir__=str(work), **namespace)
    n = 0
    with isolated(spark, tmp_path):
        for example in document.examples():
            t0 = time.monotonic()
            example.evaluate()
            print(f"{page_id(path)}:{example.line}: {time.monotonic() - t0:.2f} s")  # (pytest -s shows them)
            n += 1
    return n


#: Pages whose blocks need a test server, and the test file that runs them
#: there (reusing that directory's servers: moto, Airflow's metadata DB; the
#: Connect pass's server).
SPECIAL = {
    "docs/guide/storage.md": "tests/objectstores/test_docs_storage.py",
    "docs/operations/airflow.md": "tests/airflow/test_docs_airflow.py",
    # classic in `make test`'s first pass, then through Spark Connect (CONNECT_SUITES)
    "docs/guide/spark-connect.md": "tests/docs/test_connect_page.py",
}
