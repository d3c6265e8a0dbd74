"""Commit latency and concurrent throughput on every commit store, vs pylance
on the same stores.

For each store: 50 sequential commits of a 1-row append (data file included,
one table handle, as a streaming job commits) -- p50 and p95 latency, and the
requests per commit counted by the S3/DynamoDB server -- and 8 committer
processes making 10 appends each at once (throughput, commits lost).
pylance (``lance.write_dataset(mode="append")``) runs the same on the same
moto server, with conditional put and through ``s3+ddb://``, and on the local
file system. Servers (moto for S3 and DynamoDB, PostgreSQL) run on 127.0.0.1
in child processes, started and stopped here; the Spark session is not used.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .harness import Context, Result, Section, Timing

TITLE = "Commits: latency and concurrent throughput per commit store, vs pylance"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEQUENTIAL = 50
COMMITTERS = 8
EACH = 10


def _percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def _sequential(append, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        append(i)
        out.append(time.perf_counter() - t0)
    return out


def _concurrent(uri: str, options: dict, engine: str) -> tuple[float, int, list[str]]:
    """(seconds from the common start to the last finish, commits made,
    errors) of COMMITTERS processes x EACH appends."""
    env = dict(os.environ, LANCE_OPS_BENCH_STORAGE=json.dumps(options), PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "commit_worker.py"), uri, str(100 + w), str(EACH),
                               engine], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for w in range(COMMITTERS)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {engine} committer did not start")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    return elapsed, sum(r["ok"] for r in results), [e for r in results for e in r["errors"]]


def run(ctx: Context) -> Section:
    import lance

    from lance_ops.txn.table import Table
    from tests.objectstores import workload as wl
    from tests.servers import MotoServer, PostgresServer

    section = Section(TITLE, __doc__.split("\n\n", 1)[1].replace("\n", " ").strip())
    work = tempfile.mkdtemp(prefix="lance_ops-bench-commits-")
    moto = MotoServer(work).start()
    pg = PostgresServer(work).start()
    try:
        moto.create_bucket("bench")
        moto.create_ddb_table("bench_commits")
        s3 = moto.options()
        local_dir = ctx.scratch("commits")
        os.makedirs(local_dir, exist_ok=True)
        stores = {
            "local FS": (os.path.join(local_dir, "{}.lance"), {}, "pylance local FS"),
            "S3 conditional put": ("s3://bench/cp-{}.lance", s3, "pylance S3 conditional put"),
            "S3 + SQLite": ("s3://bench/sqlite-{}.lance", dict(s3, commit_store=f"sqlite:///{work}/commits.db"), None),
            "S3 + PostgreSQL": ("s3://bench/pg-{}.lance", dict(s3, commit_store=pg.uri), None),
            "S3 + DynamoDB": ("s3+ddb://bench/ddb-{}.lance?ddbTableName=bench_commits", s3, "pylance s3+ddb"),
        }
        peers = {"pylance local FS": (os.path.join(local_dir, "pylance-{}.lance"), {}),
                 "pylance S3 conditional put": ("s3://bench/pylance-cp-{}.lance", s3),
                 "pylance s3+ddb": ("s3+ddb://bench/pylance-ddb-{}.lance?ddbTableName=bench_commits", s3)}
        measured: dict[str, dict] = {}

        def measure(name: str, pattern: str, options: dict, engine: str) -> dict:
            seq_uri, conc_uri = pattern.format("seq"), pattern.format("conc")
            if engine == "pylance":
                for uri in (seq_uri, conc_uri):
                    lance.write_dataset(wl.batch(-1, [0]), uri, storage_options=options or None)

                def append(i):
                    lance.write_dataset(wl.batch(0, [i]), seq_uri, mode="append", storage_options=options or None)
            else:
                for uri in (seq_uri, conc_uri):
                    wl.create(uri, options, rows=1)
                table = Table(seq_uri, options)

                def append(i):
                    wl.append(table, 0, [i])
            append(-1)  # warm: connections, the first request of each kind
            moto.counts(reset=True)
            lat = _sequential(append, SEQUENTIAL)
            counts = moto.counts(reset=True)
            elapsed, made, errors = _concurrent(conc_uri, options, engine)
            final = lance.dataset(conc_uri, storage_options=options or None)
            # lost: a commit reported as made that is not in the table
            lost = made - (final.version - 1)
            assert lost == 0 and final.count_rows() == 1 + made, (name, final.version, made)
            m = {"p50": statistics.median(lat), "p95": _percentile(lat, 0.95), "mean": statistics.fmean(lat),
                 "requests": sum(counts.values()) / SEQUENTIAL, "counts": counts, "conc_s": elapsed,
                 "made": made, "lost": lost, "failed": COMMITTERS * EACH - made, "errors": errors}
            print(f"  {name}: p50 {m['p50'] * 1000:.1f} ms, p95 {m['p95'] * 1000:.1f} ms, "
                  f"{m['requests']:.1f} requests/commit, {COMMITTERS}x{EACH} in {elapsed:.2f}s, lost {lost}",
                  flush=True)
            measured[name] = m
            return m

        for peer, (pattern, options) in peers.items():
            measure(peer, pattern, options, "pylance")
        for name, (pattern, options, _peer) in stores.items():
            measure(name, pattern, options, "lance_ops")

        def reqs(m):
            return ", ".join(f"{k} {v / SEQUENTIAL:g}" for k, v in sorted(m["counts"].items()))

        for name, (_pattern, _options, peer) in stores.items():
            m = measured[name]
            p = measured.get(peer) if peer else None
            note = (f"p50 {m['p50'] * 1000:.1f} ms, p95 {m['p95'] * 1000:.1f} ms; {m['requests']:.1f} requests/commit "
                    f"({reqs(m) or 'none'})")
            if p:
                note += (f"; peer p50 {p['p50'] * 1000:.1f} ms, p95 {p['p95'] * 1000:.1f} ms, {p['requests']:.1f} "
                         f"requests/commit ({reqs(p) or 'none'})")
            section.add(Result(f"p50 commit latency, 1-row append: {name}", Timing([m["p50"]]),
                               peer if p else None, Timing([p["p50"]]) if p else None, kind="time",
                               goal=1.5 if p else None, notes=note))
        for name in [*stores, *peers]:
            m = measured[name]
            one = Timing([m["mean"]])  # seconds per commit, one committer
            many = Timing([m["conc_s"] / max(m["made"], 1)])  # seconds per commit, 8 committers
            note = (f"{COMMITTERS} committers x {EACH}: {m['made']} commits in {m['conc_s']:.2f}s "
                    f"({m['made'] / m['conc_s']:.1f}/s vs {1 / m['mean']:.1f}/s alone), lost {m['lost']}, "
                    f"failed {m['failed']}")
            if m["errors"]:
                note += f"; errors: {sorted(set(e.split(':')[0] for e in m['errors']))}"
            section.add(Result(f"{COMMITTERS} committers vs 1 (s per commit): {name}", many, "1 committer", one,
                               kind="rate", goal=0.5 if name in stores else None, notes=note))
        section.note("Latency is per commit from the caller's side: writing the 1-row data file, finding the "
                     "latest version, the conflict check, the transaction file and the manifest put (and, with "
                     "an external store, the staged manifest, the store's put-if-not-exists, the copy to the "
                     "final name and the flip). pylance's write_dataset also opens the dataset on every call.")
        section.note("Requests are counted by the moto server (S3 and DynamoDB); PostgreSQL and SQLite "
                     "statements are not counted. moto serves requests from one Python process on this 2-core "
                     "machine, so concurrent runs are bound by it and by the 8 processes' CPU.")
        section.note("'8 committers vs 1': ratio = (seconds per commit alone) / (seconds per commit with 8 "
                     "processes committing at once), i.e. the 8 committers' combined rate as a fraction of one "
                     "committer's; every run checks that the table has exactly one version per successful commit "
                     "('lost' counts successful commits missing from it); 'failed' counts appends that raised (gave up after "
                     "their retries).")
    finally:
        moto.stop()
        pg.stop()
    return section
