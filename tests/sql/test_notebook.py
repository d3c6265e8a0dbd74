"""sql/maintenance.ipynb executed headlessly (nbclient + ipykernel) against a
real table, sql/examples.sql run end to end on a demo table, and the
%%lance_sql magic."""
import os
import shutil

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


def test_maintenance_notebook_runs_headless(spark, tmp_path):
    import nbformat  # (the test extra)
    from nbclient import NotebookClient

    p = str(tmp_path / "health.lance")
    demo_table(spark, p, rows=400)  # 4 fragments of 100
    t = LanceTable(spark, p)
    t.delete("id % 4 = 0 AND id < 200")  # fragments 0 and 1 lose a quarter of their rows
    t.createTag("loaded", 1)
    with open(os.path.join(ROOT, "sql", "maintenance.ipynb")) as f:
        nb = nbformat.read(f, as_version=4)
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    injected = nbformat.v4.new_code_cell(
        f"table_uri = {p!r}\ntarget_rows_per_fragment = 1000\nrun_vacuum = True\nrestore_version = 2\n"
        "stop_spark_at_end = True"
    )
    injected.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(params[0] + 1, injected)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    def outputs(fragment):
        cell = next(c for c in nb.cells if c.cell_type == "code" and fragment in c.source)
        return cell.outputs

    def text(fragment):
        return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") + o.get("data", {}).get("text/html", "")
                         for o in outputs(fragment))

    nbformat.write(nb, str(tmp_path / "executed.ipynb"))  # (kept for a failing run's post-mortem)
    detail = text("DESCRIBE DETAIL maintained")
    assert "lance" in detail and "maintained" in detail
    health = text("health = pd.DataFrame")
    assert "fragments" in health and "50 (12.5% of 400)" in health and "loaded -> v1" in health
    frags = text("DESCRIBE FRAGMENTS maintained")
    assert "0.25" in frags
    plots = [o for o in outputs("import matplotlib") if "image/png" in o.get("data", {})]
    assert len(plots) == 1
    optimized = text("OPTIMIZE maintained")
    assert "numFilesAdded" in optimized and "numFragmentsRemoved" in optimized
    assert "vacuumed:" in text("if run_vacuum")
    history = text("DESCRIBE HISTORY maintained")
    assert "OPTIMIZE" in history and "DELETE" in history  # Delta's words
    assert "Rewrite" in history and "Delete" in history  # the Lance transactions (lanceOperation)
    assert "Restore" not in history  # restored after the history cell
    assert "table_size_after_restore" in text("if restore_version is not None")
    assert "350" in text("AS live_rows")  # version 2: after the delete, before nothing else
    ds = lance.dataset(p)
    assert ds.count_rows() == 350
    assert [v["version"] for v in ds.versions()][-1] == ds.version
    assert LanceTable(spark, p).history(1).head().operation == "RESTORE"
    shutil.rmtree(p)
