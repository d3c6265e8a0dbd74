"""Test hook loaded by every Python process of a streaming test driver
(driver, Spark's Python workers) through PYTHONPATH: with
``LANCE_OPS_TEST_HOLD=<point>:<batch>:<marker file>`` the lance streaming
sink stops at ``point`` of micro-batch ``batch`` -- ``write`` (a task, before
it writes a data file), ``commit`` (the data files are written, nothing
committed), ``committed`` (the commit landed, Spark's checkpoint does not
know yet) -- writes the marker file and waits to be killed (kill -9 of the
whole driver)."""
import os

_HOLD = os.environ.get("LANCE_OPS_TEST_HOLD")
if _HOLD:
    import time

    point, batch, marker = _HOLD.split(":", 2)
    batch = int(batch)

    def _hold():
        with open(marker, "w") as f:
            f.write(f"{point} {batch} {os.getpid()}\n")
        time.sleep(3600)

    try:
        from lance_ops.spark import streaming as _s
    except Exception:  # not a process that can import lance_ops' Spark layer
        _s = None
    if _s is not None:
        _write, _commit = _s.LanceStreamWriter.write, _s.LanceStreamWriter.commit

        def write(self, iterator):

            it = iter(iterator)
            first = next(it, None)
            if first is not None and point == "write" and first.num_rows and first.column("id")[0].as_py() // 10 == batch:
                _hold()

            def chain():
                if first is not None:
                    yield first
                yield from it
            return _write(self, chain())

        def commit(self, messages, batchId):
            if point == "commit" and batchId == batch:
                _hold()
            out = _commit(self, messages, batchId)
            if point == "committed" and batchId == batch:
                _hold()
            return out

        _s.LanceStreamWriter.write = write
        _s.LanceStreamWriter.commit = commit
