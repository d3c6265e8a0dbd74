"""sql/maintenance.ipynb executed by papermill's command line against a real
table, sql/examples.sql run end to end on a demo table, and the
%%lance_sql magic."""
import os
import shutil
import subprocess
import sys

import lance

import lance_ops
from lance_ops import LanceTable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def demo_table(spark, path, rows=2000):
    """The demo's table (jobs/demo.py's columns), small."""
    events = spark.range(0, rows).selectExpr(
        "id", "id % 7 as user_id", "cast(rand(1) * 100 as double) as score", "concat('event-', cast(id as string)) as name")
    LanceTable.create(spark, path, events, maxRowsPerFragment=rows // 4)


def test_examples_sql_runs_end_to_end(spark, tmp_path, monkeypatch):
    demo = tmp_path / "demo-data"
    demo_table(spark, str(demo / "events.lance"))
    monkeypatch.chdir(tmp_path)
    with open(os.path.join(ROOT, "sql", "examples.sql")) as f:
        script = f.read()
    results = lance_ops.sql(spark, script, allResults=True)
    from lance_ops.sql.grammar import parse_script

    assert len(results) == len(parse_script(script)) >= 30
    copy = str(demo / "sql-examples.lance")
    ds = lance.dataset(copy)
    # the last statements: RESTORE TABLE events TO VERSION AS OF 1, then a count
    assert results[-1].head().rows_after_restore == 2000 == ds.count_rows()
    history = [h["lanceOperation"] for h in LanceTable(spark, copy).table.history()]
    assert history[0] == "Restore" and history[-1] == "Overwrite"
    assert {"Delete", "Update", "Merge", "Project", "Rewrite", "UpdateConfig", "Append"} <= set(history)
    assert lance.dataset(str(demo / "events.lance")).version == 1  # the demo table itself is only read


class FakeShell:
    """What the magic uses of IPython's shell."""

    def __init__(self):
        self.user_ns = {"t": None}
        self.magics = {}

    def register_magic_function(self, fn, magic_kind, magic_name):
        self.magics[(magic_kind, magic_name)] = fn

    def var_expand(self, text, depth=0):
        return text.format(**self.user_ns)


def test_magic_runs_a_script_and_shows_the_last_result(spark, tmp_path):
    p = str(tmp_path / "m.lance")
    demo_table(spark, p, rows=40)
    shell = FakeShell()
    shell.user_ns["t"] = p
    lance_ops.load_ipython_extension(shell)
    magic = shell.magics[("cell", "lance_sql")]
    out = magic("--limit 3 --out last", "DELETE FROM lance.`{t}` WHERE id < 10;\nSELECT id FROM lance.`{t}` ORDER BY id")
    assert list(out["id"]) == [10, 11, 12]  # a pandas frame: IPython shows it as a table
    assert shell.user_ns["last"].count() == 30
    assert magic("", "ALTER TABLE lance.`{t}` SET TBLPROPERTIES ('k' = 'v')") is None  # nothing to show


def test_maintenance_notebook_runs_under_papermill(spark, tmp_path, processes):
    """sql/maintenance.ipynb as a scheduler runs it: the papermill command
    line with parameters; OPTIMIZE only when asked (here: not), a real vacuum
    and a restore; the health plot over versions rendered and saved as PNG."""
    import base64
    import struct

    import nbformat  # (the test extra)

    p = str(tmp_path / "health.lance")
    demo_table(spark, p, rows=400)  # 4 fragments of 100
    t = LanceTable(spark, p)
    t.delete("id % 4 = 0 AND id < 200")  # fragments 0 and 1 lose a quarter of their rows
    t.createTag("loaded", 1)
    out = tmp_path / "executed.ipynb"
    papermill = os.path.join(os.path.dirname(sys.executable), "papermill")
    r = subprocess.run([papermill, os.path.join(ROOT, "sql", "maintenance.ipynb"), str(out),
                        "-p", "table_uri", p, "-p", "target_rows_per_fragment", "1000", "-p", "run_vacuum", "True",
                        "-p", "retain_hours", "0", "-p", "enforce_retention", "False", "-p", "restore_version", "2",
                        "-p", "stop_spark_at_end", "True", "--cwd", str(tmp_path), "--kernel", "python3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    nb = nbformat.read(str(out), as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)

    def outputs(fragment):
        cell = next(c for c in nb.cells if c.cell_type == "code" and fragment in c.source
                    and "injected-parameters" not in c.metadata.get("tags", []))
        return cell.outputs

    def text(fragment):
        return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") + o.get("data", {}).get("text/html", "")
                         for o in outputs(fragment))

    detail = text("DESCRIBE DETAIL maintained")
    assert "lance" in detail and "maintained" in detail
    health = text("health = pd.DataFrame")
    assert "fragments" in health and "50 (12.5% of 400)" in health and "loaded -> v1" in health
    assert "0.25" in text("DESCRIBE FRAGMENTS maintained")
    # the plot: health over versions (1: created, 2: the delete), saved as PNG files
    plots = [o["data"]["image/png"] for o in outputs("import matplotlib") if "image/png" in o.get("data", {})]
    assert len(plots) == 1
    for i, data in enumerate(plots):
        png = base64.b64decode(data)
        (tmp_path / f"health_{i}.png").write_bytes(png)
        width, height = struct.unpack(">II", png[16:24])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and width > 600 and height > 150 and len(png) > 10_000
    trend = text("import matplotlib")
    assert "deleted ratio" in trend and "0.125" in trend  # version 2's ratio, in the table under the plot
    optimize = text("if run_optimize")
    assert "OPTIMIZE not run" in optimize and "compaction recommended" in optimize
    assert "vacuumed:" in text("if run_vacuum")
    history = text("DESCRIBE HISTORY maintained")
    assert "DELETE" in history and "Delete" in history  # Delta's words, the Lance transaction (lanceOperation)
    assert "OPTIMIZE" not in history and "Rewrite" not in history  # no compaction: run_optimize was False
    assert "Restore" not in history  # restored after the history cell
    assert "table_size_after_restore" in text("if restore_version is not None")
    assert "350" in text("AS live_rows")  # version 2: after the delete
    ds = lance.dataset(p)
    assert ds.count_rows() == 350
    assert [v["version"] for v in ds.versions()] == [1, 2, 3] == [1, 2, ds.version]  # the tagged v1 kept
    assert LanceTable(spark, p).history(1).head().operation == "RESTORE"
    shutil.rmtree(p)
