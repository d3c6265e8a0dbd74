"""The jobs as an installed package: a wheel built from the checkout,
installed into a fresh virtual environment, run from another directory as
``lance-ops`` and ``python -m lance_ops.jobs``, and through ``spark-submit``
with the entry file the installed package names -- stdout is the JSON
summary alone, also under spark-submit (whose Python driver has stderr merged
into stdout by Spark)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import lance
import pytest

from lance_ops import LanceTable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A venv with the wheel of the checkout (and the project venv's
    dependencies visible through a path entry: no download, no editable
    lance_ops -- .pth files of that directory are not processed)."""
    base = tmp_path_factory.mktemp("packaged")
    src = base / "src"
    src.mkdir()
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), src)
    shutil.copy(os.path.join(ROOT, "README.md"), src)
    shutil.copytree(os.path.join(ROOT, "lance_ops"), src / "lance_ops",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = base / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = list(wheels.glob("lance_ops-*.whl"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "project_deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return venv


def test_installed_command_runs_from_another_directory_and_through_spark_submit(installed, spark, tmp_path, processes):
    p = str(tmp_path / "t.lance")
    t = LanceTable.create(spark, p, spark.range(0, 40, 1, 4).selectExpr("id", "id * 2 AS x"), maxRowsPerFragment=10)
    t.delete("id < 5")
    expected = sorted(lance.dataset(p).to_table().to_pylist(), key=lambda r: r["id"])
    bin_dir = installed / "bin"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    where = subprocess.run([str(bin_dir / "python"), "-c", "import lance_ops; print(lance_ops.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(installed)) and not where.startswith(ROOT), where
    # the console script, a metadata command: no JVM
    r = subprocess.run([str(bin_dir / "lance-ops"), "health", "--table", p], cwd=elsewhere, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["sparkStarted"] is False and doc["tables"][0]["health"]["numFragments"] == 4
    assert "[lance_ops] health" in r.stderr  # progress on stderr
    # python -m lance_ops.jobs: the package's module
    r = subprocess.run([str(bin_dir / "python"), "-m", "lance_ops.jobs", "--help"], cwd=elsewhere, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "backfill" in r.stdout and "validate" in r.stdout
    entry = subprocess.run([str(bin_dir / "lance-ops"), "--print-entry-file"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert entry.startswith(str(installed)) and entry.endswith(os.path.join("lance_ops", "jobs", "__main__.py"))
    # spark-submit runs the installed entry file: a compaction, stdout = the JSON summary only
    py = str(bin_dir / "python")
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    r = subprocess.run([spark_submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                        "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
                        entry, "compact", "--table", p, "--target-rows", "100"],
                       cwd=elsewhere, env=dict(env, PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py, SPARK_LOCAL_IP="127.0.0.1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)  # the whole of stdout: one JSON document
    assert doc["command"] == "compact" and doc["status"] == "done" and doc["sparkStarted"] is True
    assert "[lance_ops] compact" in r.stderr and "Spark session ready" in r.stderr
    ds = lance.dataset(p)
    assert len(ds.get_fragments()) == 1 and ds.version == doc["tables"][0]["versionAfter"]
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["id"]) == expected
    # a usage error under spark-submit: exit 2 (spark-submit passes the code through), nothing on stdout
    r = subprocess.run([spark_submit, "--master", "local[1]", entry, "vacuum", "--table", p, "--retention-hours", "0"],
                       cwd=elsewhere, env=dict(env, PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py, SPARK_LOCAL_IP="127.0.0.1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == "" and "--no-retention-check" in r.stderr, (r.returncode, r.stdout)
