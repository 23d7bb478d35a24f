"""The one home of the session stores' transaction rules.

* :func:`sqlite_transaction` — one ``BEGIN IMMEDIATE`` transaction on a SQLite
  file (``synchronous=FULL``): commit on success, roll back on any exception
  (the rule of :func:`sealeval._transaction.transaction`, which the OMOP
  loader uses too; a failed rollback becomes ``store_failed``).
  The SQLite session store and the durable ledger on its file both use it.
* :func:`sqlite_read_snapshot` — one read-only transaction (``mode=ro``) on a
  SQLite file, always rolled back: a consistent snapshot for listings.
* :func:`run_sqlite_transaction` — run an operation in such a transaction and
  turn every failure into a fresh error.
* :func:`failure_of` / :func:`fresh_error` — the fresh-error rule every
  store back end follows (PostgreSQL included): an error of the families the
  caller lets through is raised again as a new error of the same class, code
  and field; anything else (driver, OS, SQL) becomes
  ``EvaluationSessionError("store_failed")``. The new error is raised outside
  any ``except`` block, so it has neither ``__cause__`` nor ``__context__``:
  a driver message (which may quote a path, a DSN or SQL) never travels with it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar
from urllib.parse import quote

from sealeval._transaction import transaction
from sealeval.errors import SealevalError
from sealeval.session.record import EvaluationSessionError

__all__ = [
    "STORE_FAILED",
    "Failure",
    "failure_of",
    "fresh_error",
    "run_sqlite_transaction",
    "sqlite_read_snapshot",
    "sqlite_transaction",
]

_T = TypeVar("_T")

#: ``(error class, code, field)`` of an error to raise afresh.
Failure = tuple[type[SealevalError], str, str | None]
#: What every database, connection or OS failure becomes.
STORE_FAILED: Final[Failure] = (EvaluationSessionError, "store_failed", None)


def failure_of(error: BaseException, passes: type[SealevalError] = SealevalError) -> Failure:
    """Return the failure to raise for ``error``: its own if a ``passes``, else ``store_failed``."""
    if isinstance(error, passes):
        return (type(error), error.code, error.field)
    return STORE_FAILED


def fresh_error(failure: Failure) -> SealevalError:
    """Return a new error from ``failure``; raise it ``from None`` outside any ``except`` block."""
    error_class, code, field = failure
    return error_class(code, field)


@contextlib.contextmanager
def sqlite_transaction(path: str, timeout: float) -> Iterator[sqlite3.Connection]:
    """Yield a connection inside ``BEGIN IMMEDIATE``; commit on success, else roll back.

    ``BEGIN IMMEDIATE`` takes the database's write lock at once (waiting up to
    ``timeout`` seconds for another writer), so a read-check-write sequence in
    the transaction cannot interleave with another one.
    """
    connection = sqlite3.connect(path, timeout=timeout, isolation_level=None, uri=False)
    try:
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("BEGIN IMMEDIATE")
        with transaction(connection):
            yield connection
    finally:
        connection.close()


@contextlib.contextmanager
def sqlite_read_snapshot(path: Path, timeout: float) -> Iterator[sqlite3.Connection]:
    """Yield a read-only connection (``mode=ro``) inside one transaction, always rolled back."""
    connection = sqlite3.connect(
        f"file:{quote(str(path))}?mode=ro", uri=True, timeout=timeout, isolation_level=None
    )
    try:
        connection.execute("BEGIN")
        yield connection
    finally:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        connection.close()


def run_sqlite_transaction(
    path: str,
    timeout: float,
    operation: Callable[[sqlite3.Connection], _T],
    *,
    passes: type[SealevalError] = SealevalError,
) -> _T:
    """Run ``operation`` in one :func:`sqlite_transaction`; every failure becomes a fresh error.

    Raises:
        SealevalError: a ``passes`` error ``operation`` raised, fresh (same
            class, code and field); ``EvaluationSessionError("store_failed")``
            for anything else (sqlite3 and OS errors may quote paths or SQL).
    """
    failure: Failure
    try:
        with sqlite_transaction(path, timeout) as connection:
            return operation(connection)
    except Exception as error:  # noqa: BLE001 - mapped to a closed code, never chained
        failure = failure_of(error, passes)
    # Raised outside the except block: neither __cause__ nor __context__.
    raise fresh_error(failure) from None
