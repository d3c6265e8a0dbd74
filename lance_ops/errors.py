"""The errors lance_ops raises.

Every error derives from :class:`LanceOpsError` and carries a message a user can
act on. A failed call never leaves a new table version behind: errors are raised
before the manifest of the next version is written, and files written before the
failure are orphans that ``vacuum`` removes.

Bad Spark SQL (in a condition, a ``set`` value, an expression) is not wrapped:
Spark's own ``AnalysisException`` / ``ParseException`` surfaces unchanged.
"""
from __future__ import annotations


class LanceOpsError(Exception):
    """Base class of every lance_ops error."""


class TableNotFoundError(LanceOpsError):
    """The location holds no Lance table (no manifest in ``_versions/``), or the
    requested version / tag does not exist."""


class TableExistsError(LanceOpsError):
    """``create(mode="create")`` on a location that already holds a table."""


class SchemaMismatchError(LanceOpsError):
    """Written data does not match the table schema (missing, extra or
    differently typed columns), or a column operation names a column that does
    not exist / already exists."""


class UnsupportedFeatureError(LanceOpsError):
    """The table uses a feature this version of lance_ops does not implement: an
    unknown reader/writer feature flag, an unknown data file version, an Arrow
    type with no Spark equivalent."""


class CorruptTableError(LanceOpsError):
    """A manifest, transaction or deletion file cannot be decoded. ``path`` names
    the file."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message if path is None or path in message else f"{message} ({path})")
        self.path = path


class CommitConflictError(LanceOpsError):
    """A concurrent commit conflicts with this one.

    ``retryable`` is True when re-running the operation on the new latest version
    can succeed (e.g. a concurrent delete touched the same rows), False when the
    operations are incompatible (e.g. the table was overwritten or restored).
    """

    def __init__(self, message: str, retryable: bool, conflicting_version: int | None = None,
                 prepare_again: bool = False):
        super().__init__(message)
        self.retryable = retryable
        self.conflicting_version = conflicting_version
        #: A retry must prepare the change again (its files are stale), even
        #: for a change that could otherwise be committed again as it is.
        self.prepare_again = prepare_again


class CommitOutcomeUnknownError(LanceOpsError):
    """The store failed while the manifest of ``version`` was being committed,
    and lance_ops could not find out afterwards whether that commit happened
    (the store stayed unreachable). The change may or may not be version
    ``version``; it is never committed twice.

    Every file the change wrote is kept (a committed version may name them).
    Find out later with ``table.resolveCommit(e.transaction_uuid)`` (the
    version that holds the transaction, or None: not committed), or in
    ``history()``'s ``transactionUuid`` column. Not retried by lance_ops:
    re-running the change before resolving it may apply it twice."""

    def __init__(self, message: str, version: int, transaction_uuid: str, operation: str | None = None):
        super().__init__(message)
        self.version = version
        self.transaction_uuid = transaction_uuid
        self.operation = operation


class StorageIOError(LanceOpsError, OSError):
    """Reading or writing a file of the table failed in the store (after the
    store client's own retries): ``path`` names the file. Nothing was
    committed by the failing call (unless it is a
    :class:`CommitOutcomeUnknownError`)."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message if path is None or path in message else f"{message} ({path})")
        self.path = path


class CommitStoreError(LanceOpsError):
    """The external manifest store (``commit_store``) cannot be reached or is
    not set up as lance_ops needs it (a missing DynamoDB table, a wrong key
    schema, a refused connection). Credentials never appear in the message."""


class ReadOnlyVersionError(LanceOpsError):
    """A write was attempted through a handle opened at an older version or a tag
    (time travel is read-only)."""


class InvalidArgumentError(LanceOpsError, ValueError):
    """An argument is out of range or inconsistent (also a ``ValueError``)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type -- ``update(set=1)``, ``merge(src, 1)``,
    ``set={"v": 1}`` -- raised when the method is called, as Delta's Python
    API does (also a ``TypeError``)."""


class OperationCancelledError(LanceOpsError):
    """The operation's Spark job was cancelled (``lance_ops.cancel(spark)``,
    ``spark.interruptTag("lance_ops-<operation>")`` under Spark Connect, or
    the job group from the Spark UI) before it committed: no new version;
    files it had written stay unreferenced until ``vacuum`` removes them.
    ``operation`` names the operation (``"addColumns"``)."""

    def __init__(self, message: str, operation: str | None = None):
        super().__init__(message)
        self.operation = operation


class DuplicateMatchError(LanceOpsError):
    """A merge matched one target row with several source rows and more than
    one of them would modify it (Delta raises the same error)."""


class SqlParseError(LanceOpsError, ValueError):
    """A SQL statement given to :func:`lance_ops.sql` does not parse.

    ``line`` and ``column`` (1-based) locate the offending ``token`` in the
    whole text (a script's later statements count lines from its start);
    ``reason`` says what was expected."""

    def __init__(self, line: int, column: int, token: str, reason: str = "syntax error"):
        self.line, self.column, self.token, self.reason = int(line), int(column), token, reason
        super().__init__(f"{reason} at line {self.line}, column {self.column}, near {token!r}")


class ConstraintViolationError(LanceOpsError):
    """A written row breaks a table CHECK constraint (``addConstraint``): the
    expression was false or NULL for it (Delta's rule: it must be true).
    ``constraint`` names the constraint, ``expression`` is its SQL and ``row``
    a sample violating row (column -> value, as text). Nothing was committed;
    the files the write produced were removed."""

    def __init__(self, message: str, constraint: str | None = None, expression: str | None = None,
                 row: dict | None = None):
        super().__init__(message)
        self.constraint = constraint
        self.expression = expression
        self.row = row


class DataQualityError(LanceOpsError):
    """A great_expectations suite given as ``expectations=`` failed on the rows
    a write was about to commit. ``result`` is GX's validation result (an
    ``ExpectationSuiteValidationResult``; ``result.to_json_dict()`` for the
    details). Nothing was committed; the files written were removed."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


class ArrowEvalFallback(LanceOpsError):
    """Internal: a task evaluating SQL with Arrow met a row where Spark raises
    (ANSI mode: overflow, division by zero, cast overflow). The operation
    never surfaces it: it reruns on its Spark path, which raises Spark's own
    error (or, had Arrow been over-cautious, succeeds)."""


class WorkerEnvironmentError(LanceOpsError):
    """Spark's Python workers would run an interpreter that cannot import
    lance_ops and its dependencies (pylance, pyarrow): found in the driver,
    before any job, instead of as a bare ``No module named ...`` from an
    executor. Point ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) at an
    interpreter that has them."""
