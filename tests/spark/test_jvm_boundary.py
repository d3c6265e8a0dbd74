"""One module reaches into the JVM: lance_ops/spark/jvm.py. Nothing else in
the package, the jobs, the DAGs, the SQL scripts or the benchmarks may name ``sparkContext``, ``_jdf``,
``_jvm``, ``_jc`` or RDDs -- they do not exist under Spark Connect."""
from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALLOWED = {os.path.join("lance_ops", "spark", "jvm.py")}
FORBIDDEN = {"sparkContext", "_jdf", "_jvm", "_jc", "_jsc", "_sc", "rdd", "parallelize", "SparkContext",
             "statusTracker", "setJobGroup", "setLocalProperty", "getLocalProperty", "setLogLevel"}


def _python_files():
    for top in ("lance_ops", "jobs", "airflow_dags", "sql", "benchmarks"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def _parse(source: str, path: str) -> ast.AST:
    """``ast.parse``, once more when CPython 3.11 fails it with "AST
    constructor recursion depth mismatch": its AST conversion keeps the
    recursion depth in state every thread shares (CPython gh-106905), so a
    parse racing one on another thread -- a background
    thread an in-process Airflow test of this worker left running -- can
    fail although the source is fine."""
    for attempt in range(3):
        try:
            return ast.parse(source, path)
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == 2:
                raise


def _uses(path: str) -> list[str]:
    with open(os.path.join(ROOT, path)) as f:
        tree = _parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            for a in node.names:
                if a.name.split(".")[-1] in FORBIDDEN:
                    found.append(f"{path}:{node.lineno} imports {a.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in FORBIDDEN:
            name = node.value  # getattr(x, "sparkContext")
        if name in FORBIDDEN:
            found.append(f"{path}:{node.lineno} {name}")
    return found


def test_only_jvm_module_touches_the_jvm():
    files = list(_python_files())
    assert os.path.join("lance_ops", "spark", "jvm.py") in files and len(files) > 50
    bad = [u for f in files if f not in ALLOWED for u in _uses(f)]
    assert not bad, "JVM / RDD access outside lance_ops/spark/jvm.py:\n" + "\n".join(bad)


def test_the_check_catches_a_use(tmp_path):
    # (a check that cannot fail is no check)
    p = tmp_path / "x.py"
    p.write_text("def f(spark):\n    return spark.sparkContext.parallelize([1])\n"
                 "def g(df):\n    return getattr(df, '_jdf')\n")
    global ROOT
    old, ROOT = ROOT, str(tmp_path)
    try:
        assert len(_uses("x.py")) == 3
    finally:
        ROOT = old
