"""Spark Connect vs classic: one representative operation of each suite,
timed through a Connect session beside the run's classic session.

Goal (from the Spark Connect issue): a Connect operation costs at most 10% +
0.3 s more than the classic one. The Connect server (``local[2]``, the same
driver memory and session confs as the classic session) is started here on
127.0.0.1 with pyspark's ``sbin/start-connect-server.sh`` (``tests/servers``'
``ConnectServer``, shared with tests/connect) and stopped by PID; the Connect
client runs in a child process (``connect_client.py``), because a Connect
session switches a whole Python process to Connect mode.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from . import connect_ops, data
from .harness import SPARK_CONF, Context, Result, Section

TITLE = "Spark Connect: each suite's operations through Connect vs classic"
GOAL = 1.1
SLACK = 0.3
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class ConnectClient:
    """The child process holding the Connect session (see connect_client.py)."""

    def __init__(self, url: str, log_path: str):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "connect_client.py"), url], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=dict(os.environ, PYTHONPATH=ROOT))
        self._read()  # {"ready": true}

    def _read(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.log.flush()
                with open(self.log_path, errors="replace") as f:
                    tail = f.read()[-4000:]
                raise RuntimeError(f"the Connect client exited (rc {self.proc.poll()}):\n{tail}")
            at = line.find(connect_client_prefix())  # (after any progress output on the line)
            if at >= 0:
                return json.loads(line[at + len(connect_client_prefix()):])

    def request(self, req: dict):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        out = self._read()
        if not out.get("ok"):
            raise RuntimeError(f"Connect client: {req}\n{out.get('error')}")
        return out["value"]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(60)
        except Exception:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self.log.close()


def connect_client_prefix() -> str:
    from . import connect_client

    return connect_client.PREFIX


def run(ctx: Context) -> Section:
    from lance_ops.spark.session import DEFAULT_CONF
    from tests.servers import ConnectServer

    from .bench_compaction import FRAGMENTS
    from .bench_dml import _merge_source

    spark = ctx.spark
    ds = data.shared_dataset(spark, ctx.data_dir, ctx.rows)
    per_fragment = max(1, ds.rows // FRAGMENTS)
    bases = {"read": data.lance_ops_table(spark, ds), "table": data.lance_ops_table(spark, ds),
             "fragments": data.small_fragments_table(spark, ds, per_fragment, "lance_ops")}
    params = {"parquet": ds.parquet, "rows": ds.rows, "merge_source": _merge_source(ctx, ds)["parquet"],
              "compact_target": per_fragment * 10}
    section = Section(TITLE, _description(ds, ctx, per_fragment))
    work = ctx.scratch("connect-server")
    os.makedirs(work)
    server = ConnectServer(work, conf={**DEFAULT_CONF, **SPARK_CONF}).start()
    client = None
    try:
        client = ConnectClient(server.url, os.path.join(work, "client.log"))
        # First use of each code path on both sides, untimed.
        connect_ops.warm_up(spark, ctx.scratch("connect-warmup-classic.lance"))
        client.request({"warmup": ctx.scratch("connect-warmup-connect.lance")})
        paths = {"classic": ctx.scratch("connect-classic.lance"), "connect": ctx.scratch("connect-connect.lance")}
        for op in connect_ops.OPS:
            if op.base == "read":
                where = {side: bases["read"] for side in paths}
                setup = None
            else:
                where = paths
                setup = lambda side, op=op: data.fresh_copy(bases[op.base], paths[side])  # noqa: E731
            t = ctx.interleave(
                {
                    "classic": lambda op=op, where=where: op.run(spark, where["classic"], params),
                    "connect": lambda op=op, where=where: client.request(
                        {"op": op.name, "path": where["connect"], "params": params}),
                },
                warmup=op.base == "read",
                setup=setup,
            )
            section.add(Result(f"{op.suite}: {op.name}", t["connect"], "classic", t["classic"], "time", GOAL,
                               _agree(op, t["classic"].value, t["connect"].value), slack=SLACK))
    finally:
        if client is not None:
            client.close()
        server.stop()
    section.note(ctx.memory_note() + " (the classic session; the Connect server is a JVM of its own)")
    return section


def _agree(op: connect_ops.Op, classic, connect) -> str:
    """Both sides must produce the same result (else the comparison is void);
    returns what the Connect run did differently, for the notes."""
    if isinstance(classic, float):
        if not math.isclose(classic, connect, rel_tol=1e-9):
            raise RuntimeError(f"{op.name}: classic {classic!r}, Connect {connect!r}")
        return ""
    c, r = _comparable(classic), _comparable(connect)
    if json.loads(json.dumps(c)) != json.loads(json.dumps(r)):
        raise RuntimeError(f"{op.name}: classic {c} != Connect {r}")
    said = ["same version and metrics"]
    how = connect.get("planInspection") or connect.get("metrics", {}).get("planInspection")
    if how:
        said.append(f"Connect plan inspection: {how}")
    paths = [d.get("metrics", {}).get("evaluation") for d in (classic, connect)]
    if paths[0] != paths[1]:
        said.append(f"evaluation {paths[0]} (classic) vs {paths[1]} (Connect)")
    return "; ".join(said)


#: Metrics that follow how the work was done, not what it did: the bytes of
#: data files depend on how Spark split the input into tasks; under Connect
#: update/rewriteColumns/addColumns evaluate on Spark (no analyzed plan
#: object), whose scan counts rows differently and whose tasks follow the
#: scan's partitions (the Arrow path runs one wave of one task per slot), so
#: the rewritten rows land in another number of new fragments / files. And
#: pylance 14's file encoder is not byte-deterministic: the same Arrow batches
#: written twice -- in one process or in fresh ones -- give files a few
#: hundred bytes apart (measured: 250,000 rows, 4 sizes within 0.01 %), so no
#: byte count or file size can agree exactly.
PATH_METRICS = {"bytesWritten", "numOutputBytes", "numAddedBytes", "minFileSize", "maxFileSize", "p25FileSize",
                "p50FileSize", "p75FileSize", "evaluation", "planInspection", "numRowsScanned",
                "numFragmentsScanned", "numFragmentsSkipped", "numAddedFragments", "numAddedFiles"}


def _comparable(result: dict) -> dict:
    out = {k: v for k, v in result.items() if k != "planInspection"}
    if isinstance(out.get("metrics"), dict):
        out["metrics"] = {k: v for k, v in out["metrics"].items() if k not in PATH_METRICS}
    return out


def _description(ds: data.Dataset, ctx: Context, per_fragment: int) -> str:
    return f"""\
The same operation on the same table (a fresh copy of the cached {ds.rows:,}-row lance_ops table of
{data.FILES} fragments before every run; compaction: the {ds.rows // per_fragment}-fragment table of the compaction
suite), once through the run's classic session and once through a Spark Connect session, interleaved
in the same run. The Connect server is a second `local[2]` JVM on this machine with the same driver
memory and session confs, started by this suite on 127.0.0.1 and stopped by PID; the Connect client
runs in a child process (a Connect session turns a whole Python process into Connect mode), and each
Connect timing includes its request to that process (well under a millisecond). Both sides first run
every kind of operation once on a tiny table (untimed); reads also get one untimed warm-up run.

- foundation: `toDF(columns=["id","f0"]).where("{connect_ops.DELETE}").selectExpr("sum(f0)")`, and appending
  `spark.read.parquet(...).where("{connect_ops.APPEND_FILTER}")`;
- dml: delete `{connect_ops.DELETE}`, update `f0 = f0 + 1` where `{connect_ops.UPDATE}`, merge upsert (the DML suite's source);
- evolution: `addColumns({{"g": "f0 * 2"}})`, `addColumns(fn, readColumns=["f0"], outputSchema="g double")`,
  `rewriteColumns({{"f1": "f1 * 2"}})`;
- compaction: `executeCompaction(targetRowsPerFragment={per_fragment * 10:,})`;
- commits: a 1-row `append` (the commit path through Spark);
- sql: `lance_ops.sql(spark, "DELETE FROM lance.`...` WHERE {connect_ops.DELETE}")`.

Every pair is checked to agree (same sum; same version, read version, operation and metrics).
In the table, "lance_ops s" is the Connect run and "peer s" the classic one;
*time* = Connect s / classic s; goal: Connect ≤ classic × {GOAL:g} + {SLACK:g} s. Best of {ctx.repeat} runs."""
