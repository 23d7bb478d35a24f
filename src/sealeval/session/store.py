"""Durable session stores: the compare-and-swap interface and its SQLite implementation.

A session store holds one content-free :class:`~sealeval.session.record.SessionRecord`
per session key and one row per *budget key* (the holdout commitment digest
and manifest digest a feedback budget is charged to). Every write is a
compare-and-swap against the record the writer last saw, so two live session
objects (or processes) can never both advance the same session, and the
release of feedback is split in two durable transactions:

* :meth:`SessionStore.claim_release` appends the ``release_claimed`` step and
  locks the budget key *before* the ledger is touched, refusing when the
  budget row's watermark (a digest of the policy and the ledger's usage
  snapshot) differs from the caller's or another session holds the claim;
* :meth:`SessionStore.finish_release` appends the terminal step, stores the
  new watermark and unlocks the budget key.

A crash between the two leaves the claim in place: the feedback of that
attempt is lost, never delivered twice.

:class:`SessionStore` is the interface (a :class:`typing.Protocol`); the
transition rules every implementation must enforce are exposed as
:func:`check_save`, :func:`check_claim` and :func:`check_finish` so that other
back ends (a PostgreSQL store) apply exactly the same rules.
:class:`SQLiteSessionStore` is the reference implementation.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol, TypeVar, runtime_checkable

from sealeval.canonical import is_digest
from sealeval.session.record import EvaluationSessionError, SessionRecord
from sealeval.session.transaction import run_sqlite_transaction

__all__ = [
    "CLAIM_STEPS",
    "MAX_SAVED_STEPS",
    "SCHEMA",
    "EvaluationSessionError",
    "SQLiteSessionStore",
    "SessionStore",
    "check_claim",
    "check_finish",
    "check_save",
]

#: Most steps :meth:`SessionStore.save` may write (the rest go through the release flow).
MAX_SAVED_STEPS: Final = 4
#: Steps of a record after a successful claim.
CLAIM_STEPS: Final = 5
#: The SQLite schema, exactly as stored in ``sqlite_master`` (by table name).
SCHEMA: Final = {
    "budgets": (
        "CREATE TABLE budgets (budget_key TEXT PRIMARY KEY, watermark TEXT NOT NULL, claim TEXT)"
    ),
    "sessions": "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT NOT NULL)",
}
_DEFAULT_TIMEOUT: Final = 30.0

_T = TypeVar("_T")


@runtime_checkable
class SessionStore(Protocol):
    """The durable store an :class:`~sealeval.session.session.EvaluationSession` writes to.

    Every method raises :class:`EvaluationSessionError` only, with one of the
    codes ``invalid_digest``, ``record_invalid``, ``record_conflict``,
    ``budget_state_unverified`` or ``store_failed``, never carrying a
    submitted value. Every write is atomic: it either happens completely or
    not at all. Implementations must apply :func:`check_save`,
    :func:`check_claim` and :func:`check_finish` before writing.
    """

    def load(self, session_key: str) -> SessionRecord | None:
        """Return the stored record of ``session_key``, or ``None`` when there is none.

        Raises ``invalid_digest`` for a key that is not a digest and
        ``record_invalid`` when the stored text does not parse strictly or
        names another session key.
        """
        ...

    def save(self, record: SessionRecord, previous: SessionRecord | None) -> None:
        """Create (``previous`` is ``None``) or advance a record by one step.

        Creating inserts an empty record (``record_conflict`` if a row
        exists). Advancing replaces ``previous`` by ``record`` only if the
        stored text still equals ``previous``'s canonical JSON
        (``record_conflict`` otherwise), in one write-locking transaction.
        """
        ...

    def claim_release(
        self, previous: SessionRecord, claimed: SessionRecord, budget_key: str, watermark: str
    ) -> None:
        """Atomically store ``claimed`` (5 steps) and lock ``budget_key`` for this session.

        Compare-and-swap on the session row (``record_conflict``); when a
        budget row exists, its watermark must equal ``watermark`` and it must
        not be claimed (``budget_state_unverified``); then the budget row is
        upserted as ``(budget_key, watermark, claim = session key)``.
        """
        ...

    def finish_release(
        self, claimed: SessionRecord, finished: SessionRecord, budget_key: str, watermark: str
    ) -> None:
        """Atomically store ``finished`` (6 steps) and release the budget claim.

        Compare-and-swap on the session row (``record_conflict``); the
        budget row must be claimed by this session (``budget_state_unverified``);
        then its watermark becomes ``watermark`` and its claim ``NULL``.
        """
        ...


# ---------------------------------------------------------------------------
# Transition rules shared by every implementation


def _extends(record: object, previous: object) -> bool:
    """Return whether ``record`` is ``previous`` plus exactly one step."""
    return (
        type(record) is SessionRecord
        and type(previous) is SessionRecord
        and record.session_key == previous.session_key
        and record.binding_digest == previous.binding_digest
        and len(record.steps) == len(previous.steps) + 1
        and record.steps[:-1] == previous.steps
    )


def check_save(record: object, previous: object) -> None:
    """Check a :meth:`SessionStore.save` transition.

    Raises:
        EvaluationSessionError: ``record_invalid`` unless ``record`` is an
            empty record and ``previous`` is ``None``, or ``record`` extends
            ``previous`` by exactly one step (same key and binding, old steps
            as prefix) and has at most four steps.
    """
    if previous is None:
        if type(record) is not SessionRecord or record.steps:
            raise EvaluationSessionError("record_invalid")
        return
    if not _extends(record, previous) or len(record.steps) > MAX_SAVED_STEPS:  # type: ignore[attr-defined]
        raise EvaluationSessionError("record_invalid")


def _check_release_keys(budget_key: object, watermark: object) -> None:
    if not is_digest(budget_key) or not is_digest(watermark):
        raise EvaluationSessionError("invalid_digest")


def check_claim(previous: object, claimed: object, budget_key: object, watermark: object) -> None:
    """Check a :meth:`SessionStore.claim_release` transition.

    Raises:
        EvaluationSessionError: ``record_invalid`` unless ``claimed`` extends
            a four-step ``previous`` by the ``release_claimed`` step;
            ``invalid_digest`` for a budget key or watermark that is not a
            digest.
    """
    if not _extends(claimed, previous) or len(claimed.steps) != CLAIM_STEPS:  # type: ignore[attr-defined]
        raise EvaluationSessionError("record_invalid")
    _check_release_keys(budget_key, watermark)


def check_finish(claimed: object, finished: object, budget_key: object, watermark: object) -> None:
    """Check a :meth:`SessionStore.finish_release` transition.

    Raises:
        EvaluationSessionError: ``record_invalid`` unless ``finished``
            extends a five-step ``claimed`` by a terminal step;
            ``invalid_digest`` for a budget key or watermark that is not a
            digest.
    """
    if not _extends(finished, claimed) or len(claimed.steps) != CLAIM_STEPS:  # type: ignore[attr-defined]
        raise EvaluationSessionError("record_invalid")
    _check_release_keys(budget_key, watermark)


# ---------------------------------------------------------------------------
# SQLite


def _checked_path(path: object) -> str:
    """Return the absolute path of a durable database file; refuse memory and temporary names."""
    try:
        text = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        text = None
    if type(text) is not str or not text or "\x00" in text:
        raise EvaluationSessionError("store_failed")
    lowered = text.lower()
    if (
        lowered == ":memory:"
        or lowered.startswith("file:")
        or "mode=memory" in lowered
        or text.isspace()
    ):
        raise EvaluationSessionError("store_failed")
    return str(Path(text).absolute())


class SQLiteSessionStore:
    """A :class:`SessionStore` in one durable SQLite database file.

    Schema (created when absent, verified on every open)::

        CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT NOT NULL)
        CREATE TABLE budgets (budget_key TEXT PRIMARY KEY, watermark TEXT NOT NULL, claim TEXT)

    Every operation opens its own connection (so the object can be shared
    across threads and survives ``fork``), sets ``PRAGMA synchronous=FULL``
    and runs in one ``BEGIN IMMEDIATE`` transaction, which takes the write
    lock before anything is read: the compare-and-swap read and the write
    are atomic across processes. Concurrent writers wait up to ``timeout``
    seconds for the lock (then ``store_failed``).

    Only session keys, record JSON (digests, counts, ticks, bands), budget
    keys, watermarks and claims (session keys) are ever written, so neither
    the database nor its journal can hold text, outputs, scores, identities,
    paths or keys.

    Args:
        path: the database file (``str`` or path-like). The empty name,
            ``:memory:``, ``file:`` URIs and anything naming ``mode=memory``
            are refused: a session store must be durable.
        timeout: seconds to wait for another writer's lock.

    Raises:
        EvaluationSessionError: ``store_failed`` for a refused path, a file
            that cannot be opened or created, or a database whose
            ``sessions``/``budgets`` tables (or triggers on them) are not
            exactly sealeval's.
    """

    __slots__ = ("_path", "_timeout")

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = _DEFAULT_TIMEOUT) -> None:
        """Open (creating if needed) the database and check its schema."""
        self._path = _checked_path(path)
        if type(timeout) not in (int, float) or not 0 <= timeout <= 3600:
            raise EvaluationSessionError("store_failed")
        self._timeout = float(timeout)
        self._run(self._create_schema)

    def __repr__(self) -> str:
        """Show nothing of the path."""
        return "SQLiteSessionStore(<path redacted>)"

    @property
    def path(self) -> str:
        """The absolute path of the database file (never shown in ``repr`` or errors)."""
        return self._path

    @property
    def timeout(self) -> float:
        """The busy timeout, in seconds, of each connection."""
        return self._timeout

    def __reduce__(self) -> tuple[Callable[..., SQLiteSessionStore], tuple[str, float]]:
        """Pickle as (path, timeout): reopening re-checks the schema."""
        return (_reopen, (self._path, self._timeout))

    # -- plumbing ------------------------------------------------------------

    def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in one transaction; every failure becomes a fresh error."""
        return run_sqlite_transaction(
            self._path, self._timeout, operation, passes=EvaluationSessionError
        )

    @staticmethod
    def _create_schema(connection: sqlite3.Connection) -> None:
        for statement in SCHEMA.values():
            connection.execute(statement.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
        rows = connection.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ('sessions', 'budgets')"
        ).fetchall()
        tables = {name: sql for kind, name, sql in rows if kind == "table"}
        others = [kind for kind, _name, _sql in rows if kind not in ("table", "index")]
        if tables != SCHEMA or others:
            raise EvaluationSessionError("store_failed")

    @staticmethod
    def _compare(connection: sqlite3.Connection, previous: SessionRecord) -> None:
        """Check the compare half of compare-and-swap: the row must hold ``previous`` exactly."""
        row = connection.execute(
            "SELECT record FROM sessions WHERE session_key = ?", (previous.session_key,)
        ).fetchone()
        if row is None or row[0] != previous.to_json():
            raise EvaluationSessionError("record_conflict")

    @staticmethod
    def _swap(connection: sqlite3.Connection, record: SessionRecord) -> None:
        connection.execute(
            "UPDATE sessions SET record = ? WHERE session_key = ?",
            (record.to_json(), record.session_key),
        )

    # -- SessionStore ----------------------------------------------------------

    def load(self, session_key: str) -> SessionRecord | None:
        """Return the stored record of ``session_key`` (strictly parsed) or ``None``."""
        if not is_digest(session_key):
            raise EvaluationSessionError("invalid_digest")

        def operation(connection: sqlite3.Connection) -> SessionRecord | None:
            row = connection.execute(
                "SELECT record FROM sessions WHERE session_key = ?", (session_key,)
            ).fetchone()
            if row is None:
                return None
            if type(row[0]) is not str:
                raise EvaluationSessionError("record_invalid")
            record = SessionRecord.from_json(row[0])
            if record.session_key != session_key:
                raise EvaluationSessionError("record_invalid")
            return record

        return self._run(operation)

    def save(self, record: SessionRecord, previous: SessionRecord | None) -> None:
        """Insert an empty record or advance ``previous`` by one step (compare-and-swap)."""
        check_save(record, previous)

        def operation(connection: sqlite3.Connection) -> None:
            if previous is None:
                exists = connection.execute(
                    "SELECT 1 FROM sessions WHERE session_key = ?", (record.session_key,)
                ).fetchone()
                if exists is not None:
                    raise EvaluationSessionError("record_conflict")
                connection.execute(
                    "INSERT INTO sessions (session_key, record) VALUES (?, ?)",
                    (record.session_key, record.to_json()),
                )
                return
            self._compare(connection, previous)
            self._swap(connection, record)

        self._run(operation)

    def claim_release(
        self, previous: SessionRecord, claimed: SessionRecord, budget_key: str, watermark: str
    ) -> None:
        """Store the claimed record and lock the budget key, in one transaction."""
        check_claim(previous, claimed, budget_key, watermark)

        def operation(connection: sqlite3.Connection) -> None:
            self._compare(connection, previous)
            row = connection.execute(
                "SELECT watermark, claim FROM budgets WHERE budget_key = ?", (budget_key,)
            ).fetchone()
            if row is not None and (row[0] != watermark or row[1] is not None):
                raise EvaluationSessionError("budget_state_unverified")
            connection.execute(
                "INSERT INTO budgets (budget_key, watermark, claim) VALUES (?, ?, ?) "
                "ON CONFLICT (budget_key) DO UPDATE SET "
                "watermark = excluded.watermark, claim = excluded.claim",
                (budget_key, watermark, claimed.session_key),
            )
            self._swap(connection, claimed)

        self._run(operation)

    def finish_release(
        self, claimed: SessionRecord, finished: SessionRecord, budget_key: str, watermark: str
    ) -> None:
        """Store the terminal record, the new watermark, and release the claim."""
        check_finish(claimed, finished, budget_key, watermark)

        def operation(connection: sqlite3.Connection) -> None:
            self._compare(connection, claimed)
            row = connection.execute(
                "SELECT claim FROM budgets WHERE budget_key = ?", (budget_key,)
            ).fetchone()
            if row is None or row[0] != claimed.session_key:
                raise EvaluationSessionError("budget_state_unverified")
            self._swap(connection, finished)
            connection.execute(
                "UPDATE budgets SET watermark = ?, claim = NULL WHERE budget_key = ?",
                (watermark, budget_key),
            )

        self._run(operation)


def _reopen(path: str, timeout: float) -> SQLiteSessionStore:
    return SQLiteSessionStore(path, timeout=timeout)
