"""The Connect side of the ``connect`` suite: ``python connect_client.py
sc://127.0.0.1:PORT``, driven over stdin/stdout by ``bench_connect.py``.

A Connect session switches the whole Python process to Connect mode, so it
cannot share the benchmark process with the classic session. This process
opens one Connect session, says ``ready``, then runs one operation of
:mod:`benchmarks.connect_ops` per request line (JSON ``{"op", "path",
"params"}``; ``{"warmup": path}``), answering each with one JSON line on
stdout prefixed by ``@@`` (Spark's own output goes to stderr)."""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PREFIX = "@@ "


def reply(obj) -> None:
    sys.stdout.write(PREFIX + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def main(url: str) -> None:
    from benchmarks import connect_ops
    from lance_ops.spark import jvm
    from lance_ops.spark.session import remote_session

    spark = remote_session(url, "lance_ops-benchmarks-connect")
    try:
        assert jvm.is_connect(spark), type(spark)
        reply({"ready": True})
        for line in sys.stdin:
            req = json.loads(line)
            if req.get("quit"):
                break
            try:
                start = time.perf_counter()
                if "warmup" in req:
                    connect_ops.warm_up(spark, req["warmup"])
                    value = None
                else:
                    value = connect_ops.BY_NAME[req["op"]].run(spark, req["path"], req["params"])
                reply({"ok": True, "value": value, "seconds": time.perf_counter() - start})
            except Exception:
                reply({"ok": False, "error": traceback.format_exc()})
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
