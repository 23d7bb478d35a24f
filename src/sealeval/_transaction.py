"""The one commit-or-roll-back rule on a DB-API connection, and the one rollback.

:func:`transaction` runs a block in one transaction on an open DB-API 2.0
connection (``sqlite3``, psycopg 3, or anything with ``commit`` and
``rollback``): the block's success is followed by ``commit()``; any exception
(a failing ``commit()`` included) by ``rollback()`` and the exception again.
A rollback that itself fails raises :class:`RollbackFailedError` instead (the
state of the target is then unknown), without the driver's message.

:func:`roll_back` is that rollback alone, for a caller that decides itself what
a failed attempt means: the PostgreSQL session store
(:mod:`sealeval.session.postgres_store`) rolls a failed attempt back, then
classifies the failure as retryable or not, and never rolls back after its own
``commit()``.

The transactional edges use them: the session stores' SQLite transactions
(:mod:`sealeval.session.transaction`), the PostgreSQL store's retry loop and
the guarded OMOP loader (:mod:`sealeval.gates.omop.load`). Opening, ``BEGIN``
variants and closing stay with the caller; mapping failures to closed codes
too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

__all__ = ["RollbackFailedError", "Transactional", "roll_back", "transaction"]


class Transactional(Protocol):
    """The part of a DB-API 2.0 connection a transaction needs."""

    def commit(self) -> object:
        """Commit the current transaction."""
        ...

    def rollback(self) -> object:
        """Roll the current transaction back."""
        ...


class RollbackFailedError(Exception):
    """The rollback after a failure failed: the target's state is unknown.

    Carries no message; the driver's error (which may quote SQL, a path or a
    DSN) is never attached.
    """


def roll_back(connection: Transactional) -> bool:
    """Roll the current transaction back; return whether that worked (never raises ``Exception``).

    A failed rollback (a lost connection, a driver error) returns ``False``
    and its error is dropped, message and all: the caller decides what an
    unknown state means for it.
    """
    try:
        connection.rollback()
    except Exception:  # noqa: BLE001 - any driver failure means "not rolled back"
        return False
    return True


@contextlib.contextmanager
def transaction(connection: Transactional) -> Iterator[None]:
    """Run the block in one transaction: commit on success, roll back on any exception.

    Raises:
        BaseException: whatever the block or ``commit()`` raised, after a
            successful ``rollback()``.
        RollbackFailedError: when that ``rollback()`` raised (no message, no
            cause, context suppressed: callers map it to their closed code and
            raise a fresh error outside any ``except`` block).
    """
    try:
        yield
        connection.commit()
    except BaseException:
        if roll_back(connection):
            raise
        raise RollbackFailedError from None
