"""lance_ops errors raised inside Spark tasks, re-raised on the driver as
themselves (not as a Py4J / PythonException wrapper with a JVM stack trace)."""
from __future__ import annotations

import contextlib
import re

from .. import errors as E

_PATTERN = re.compile(r"lance_ops\.errors\.(\w+): (.*)")


@contextlib.contextmanager
def executor_errors():
    """Translate a task failure caused by a lance_ops error back to that error."""
    try:
        yield
    except E.LanceOpsError:
        raise
    except Exception as e:
        found = _PATTERN.search(str(e))
        cls = getattr(E, found.group(1), None) if found else None
        if isinstance(cls, type) and issubclass(cls, E.LanceOpsError):
            message = found.group(2).strip()
            if cls is E.CommitConflictError:
                raise cls(message, retryable=True) from None
            if cls is E.CorruptTableError:
                raise cls(message) from None
            raise cls(message) from None
        raise
