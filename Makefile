# lance_ops developer entry points. `make demo` and `make test` work on a fresh
# machine with Python >= 3.10 and Java 17 (`.ci/run` installs Java if missing).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup demo test test-fast test-slow bench protos lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,dev,pipelines]'
	rm -f $(VENV)/.installed-*
	touch $@

demo: setup
	$(PY) jobs/demo.py ./demo-data

test: setup
	$(PY) -m pytest -q tests

test-fast: setup
	$(PY) -m pytest -q tests -m "not multiprocess"

# Long randomized differential runs (not in `make test`).
test-slow: setup
	$(PY) -m pytest -q tests -m slow

bench: setup
	$(PY) benchmarks/run.py --out BENCHMARKS.md

protos: setup
	$(PY) scripts/gen_protos.py

lint: setup
	$(PY) -m ruff check lance_ops jobs sql airflow_dags tests benchmarks scripts

clean:
	rm -rf $(VENV) demo-data .pytest_cache
