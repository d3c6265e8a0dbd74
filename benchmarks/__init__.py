"""Benchmarks for lance_ops against its peers (Spark's Parquet, pylance, ...).

``python benchmarks/run.py --out BENCHMARKS.md`` runs every ``bench_<name>.py``
suite in this package on one Spark session; see ``benchmarks/README.md``.
"""
