# lance_ops developer entry points. `make demo` and `make test` work on a fresh
# machine with Python >= 3.10 and Java 17 (`.ci/run` installs Java if missing).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup thin-client demo test test-unit test-connect test-fast test-slow bench protos lint docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,dev,pipelines]'
	rm -f $(VENV)/.installed-*
	touch $@

# A second environment for the thin-client test: the JVM-free Spark Connect
# client (pyspark-client) and lance_ops, WITHOUT pyspark (the two packages
# must never share an environment: pyspark-client's files overwrite pyspark's).
THIN ?= .venv-thin
THIN_PINS := pyspark-client==4.2.0 pylance==14.0.2 pyarrow==26.0.1 protobuf==7.36.2 pyroaring==1.2.0 xxhash==4.1.0 \
	fsspec==2026.9.0 numpy==2.4.6 pandas==2.3.3 sqlglot==30.30.0 grpcio==1.85.1 grpcio-status==1.85.1 \
	googleapis-common-protos==1.76.0 zstandard==0.25.0
THIN_STAMP := $(THIN)/.installed-$(shell echo '$(THIN_PINS)' | cat - pyproject.toml | cksum | cut -d' ' -f1)

thin-client: $(THIN_STAMP)

$(THIN_STAMP): pyproject.toml
	test -x $(THIN)/bin/python || $(PYTHON) -m venv $(THIN)
	$(THIN)/bin/python -m pip install -q $(THIN_PINS)
	$(THIN)/bin/python -m pip install -q --no-deps -e .
	$(THIN)/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('pyspark.core') is not None)"
	rm -f $(THIN)/.installed-*
	touch $@

demo: setup
	$(PY) jobs/demo.py ./demo-data

# Test tiers: markers applied from the fixtures a test uses (tests/conftest.py):
# spark (a JVM), connect (a Spark Connect server), servers (moto, PostgreSQL,
# the fault proxy, Spark Connect, a Spark cluster, Airflow), system (processes
# of its own). A test with none of them is a unit test.
UNIT := not (spark or connect or servers or system or slow)

# The suites whose code paths differ under Spark Connect (no analyzed plan or
# JVM handle: the evaluation path DML, merge and backfill choose, column
# analysis, pushed filters and data skipping; errors crossing the Connect
# boundary; the data source's reads, writes and streams from a Connect client;
# the SQL front end's session names and catalogs; DeltaTable handles and
# writes from other threads; the docs' Spark Connect page), run again with
# the `spark` fixture a Spark Connect session (a server started by the run on
# 127.0.0.1, stopped by PID):
# a process of its own, since a Connect session switches a whole Python
# process to Connect mode. Spark-free behaviour (tags, restore, history,
# vacuum, the commit loop under concurrency) and Spark jobs the server runs
# exactly as a local session does (compaction, indices) are not repeated.
CONNECT_SUITES := tests/spark/test_write_interop.py tests/spark/test_read_pylance.py tests/spark/test_dml.py \
	tests/spark/test_merge_semantics.py tests/sql/test_statements.py tests/spark/test_evolution.py \
	tests/spark/test_skipping.py tests/spark/test_errors.py tests/spark/test_streaming.py \
	tests/spark/test_catalog.py tests/delta_compat/test_deltatable_api.py \
	tests/docs/test_connect_page.py

# `make test` (what CI runs): the whole suite -- every tier -- and, alongside
# it, the Connect pass (scripts/test_passes.sh). The classic pass runs on
# TEST_WORKERS pytest-xdist workers (each its own local[2] Spark session and
# servers; a file's tests stay on one worker, sharing its module fixtures,
# and the files using the Spark Connect server share the worker's one;
# files in the order tests/conftest.py gives them, heaviest tiers first).
TEST_WORKERS ?= 2
XDIST := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder,)

test: setup thin-client
	scripts/test_passes.sh $(PY) "$(XDIST)" $(CONNECT_SUITES)

# No JVM, no server, no subprocess: the fast loop (about a minute).
test-unit: setup
	$(PY) -m pytest -q tests -m "$(UNIT)"

test-connect: setup
	LANCE_OPS_TEST_CONNECT=1 $(PY) -m pytest -q -m "connect and not slow" $(CONNECT_SUITES)

# Everything but the tests that start processes of their own.
test-fast: setup
	$(PY) -m pytest -q tests -m "not system and not slow" $(XDIST)

# Long randomized differential runs (not in `make test`).
test-slow: setup
	$(PY) -m pytest -q tests -m slow

bench: setup
	$(PY) benchmarks/run.py --out BENCHMARKS.md

protos: setup
	$(PY) scripts/gen_protos.py

# ruff, then the architecture: the layer order, no import cycles (function-level
# imports count) and no pyspark below lance_ops.spark -- the import-linter
# contracts in pyproject.toml.
lint: setup
	$(PY) -m ruff check lance_ops jobs sql airflow_dags tests benchmarks scripts
	$(VENV)/bin/lint-imports

# The documentation site (mkdocs.yml, docs/) into site/; --strict: any warning
# (a broken link or anchor, a docstring mkdocstrings cannot read) fails it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) demo-data .pytest_cache site
