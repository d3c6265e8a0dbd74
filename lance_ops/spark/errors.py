"""lance_ops errors raised inside Spark tasks, re-raised on the driver (or a
Spark Connect client) as themselves, with their fields.

Spark hands a Python task's failure to the driver as text (the worker's
traceback inside a ``PythonException`` / Py4J / gRPC error). Re-parsing an
error's *message* from that text loses its fields and breaks on messages
with newlines, so executor entry points are wrapped by :func:`executor_task`:
a lance_ops error raised inside is re-raised as :class:`ExecutorError`, whose
message carries the error as data -- class name and fields, JSON, base64,
between two markers. :func:`executor_errors` (driver side) finds the payload
anywhere in the failure's text and raises the original class with its
original message and fields (``retryable``, ``conflicting_version``,
``path``...).
"""
from __future__ import annotations

import base64
import contextlib
import functools
import inspect
import json
import re

from .. import errors as E

_BEGIN, _END = "<<lance_ops-error:", ":lance_ops-error>>"
_PAYLOAD = re.compile(re.escape(_BEGIN) + r"([A-Za-z0-9+/=]+)" + re.escape(_END))
#: Error attributes carried across (besides the message).
FIELDS = ("retryable", "conflicting_version", "path", "constraint", "expression", "row")


class ExecutorError(RuntimeError):
    """A lance_ops error raised in a Spark task, on its way to the driver."""


def encode(error: E.LanceOpsError) -> str:
    doc = {
        "class": type(error).__name__,
        "message": str(error),
        "fields": {k: getattr(error, k) for k in FIELDS if hasattr(error, k)},
    }
    return _BEGIN + base64.b64encode(json.dumps(doc).encode()).decode() + _END


def decode(text: str) -> E.LanceOpsError | None:
    """The lance_ops error whose payload appears in ``text`` (None: none)."""
    found = _PAYLOAD.search(text or "")
    if not found:
        return None
    try:
        doc = json.loads(base64.b64decode(found.group(1)))
    except ValueError:
        return None
    cls = getattr(E, doc.get("class", ""), None)
    if not (isinstance(cls, type) and issubclass(cls, E.LanceOpsError)):
        cls = E.LanceOpsError
    err = cls.__new__(cls)
    Exception.__init__(err, doc.get("message", ""))
    for k, v in (doc.get("fields") or {}).items():
        setattr(err, k, v)
    if cls is E.CommitConflictError:
        err.retryable = bool(getattr(err, "retryable", True))
        err.conflicting_version = getattr(err, "conflicting_version", None)
    if cls in (E.CorruptTableError, E.StorageIOError):
        err.path = getattr(err, "path", None)
    return err


def _storage_error(e: OSError) -> E.StorageIOError:
    """A store failure in a task (s3fs, the codec, the file system) as the
    lance_ops error naming the file where the error knows it."""
    path = e.filename if isinstance(getattr(e, "filename", None), str) else None
    return E.StorageIOError(f"{type(e).__name__}: {e}", path)


def _reraise(e: E.LanceOpsError):
    raise ExecutorError(f"{type(e).__name__}: {e} {encode(e)}") from e


def executor_task(fn):
    """Wrap an executor entry point (a ``mapInArrow`` / ``applyInArrow``
    function, generator or not) so lance_ops errors travel as data. The
    wrapper keeps the number of positional parameters: PySpark tells UDF
    kinds apart by it (``getfullargspec`` does not follow ``__wrapped__``)."""
    arity = len(inspect.signature(fn).parameters)
    if inspect.isgeneratorfunction(fn):

        def gen(args):
            try:
                yield from fn(*args)
            except E.LanceOpsError as e:
                _reraise(e)
            except OSError as e:
                _reraise(_storage_error(e))

        wrappers = {1: lambda a: gen((a,)), 2: lambda a, b: gen((a, b))}
    else:

        def call(args):
            try:
                return fn(*args)
            except E.LanceOpsError as e:
                _reraise(e)
            except OSError as e:
                _reraise(_storage_error(e))

        wrappers = {1: lambda a: call((a,)), 2: lambda a, b: call((a, b))}
    if arity not in wrappers:
        raise TypeError(f"executor_task wraps functions of 1 or 2 parameters, not {arity}")
    return functools.wraps(fn)(wrappers[arity])


@contextlib.contextmanager
def executor_errors():
    """Driver side: a Spark job failure caused by a lance_ops error in a task
    becomes that error again."""
    try:
        yield
    except E.LanceOpsError:
        raise
    except Exception as e:
        err = decode(str(e))
        if err is None:
            raise
        raise err from None
