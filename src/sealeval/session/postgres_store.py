"""A shared PostgreSQL session store with exactly the SQLite store's semantics.

:class:`PostgresSessionStore` implements :class:`~sealeval.session.store.SessionStore`
on a PostgreSQL database (psycopg 3), so that several evaluator hosts can share
one budget authority. It keeps the SQLite store's two tables, column for
column::

    CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT NOT NULL)
    CREATE TABLE budgets (budget_key TEXT PRIMARY KEY, watermark TEXT NOT NULL, claim TEXT)

and its semantics: the shared transition checks (:func:`~sealeval.session.store.check_save`,
:func:`~sealeval.session.store.check_claim`,
:func:`~sealeval.session.store.check_finish`) run first, then one ``READ
COMMITTED`` transaction takes row locks (``SELECT ... FOR UPDATE``, or an
``INSERT ... ON CONFLICT DO NOTHING`` for rows that do not exist yet) before
it compares, so the compare and the swap of every write are atomic across
processes and hosts. Error codes are the SQLite store's: ``invalid_digest``,
``record_invalid``, ``record_conflict``, ``budget_state_unverified`` and
``store_failed``.

Failures: a transaction that fails *before* ``COMMIT`` is sent with a lost
connection, a serialization failure or a deadlock is retried from the start on
a fresh connection (at most three attempts; nothing of it was committed, so
the outcome is the one a single attempt would have had). A failing ``COMMIT``
is never retried: its outcome is unknown to the client, and the caller gets
``store_failed`` while the database holds either the whole transaction or
nothing of it. A lock wait longer than ``timeout`` is ``store_failed`` (the
SQLite store's busy timeout). No error carries anything from the DSN or from
the server's messages: every failure is a fresh
:class:`~sealeval.session.record.EvaluationSessionError` with a bare code.

Connections are pooled per store object and per process. After ``fork`` the
child never touches the parent's connections: an at-fork hook points their
sockets at ``/dev/null`` and forgets them, so neither process can disturb the
other's session.

psycopg is imported lazily: importing this module never requires it, and a
store cannot be opened without it (``store_failed``).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol, TypeVar

from sealeval._fs import point_at_null
from sealeval._transaction import roll_back
from sealeval.canonical import is_digest
from sealeval.session.record import EvaluationSessionError, SessionRecord
from sealeval.session.store import check_claim, check_finish, check_save
from sealeval.session.transaction import STORE_FAILED, Failure, failure_of, fresh_error

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "STORE_TABLES",
    "PostgresSessionStore",
    "SqlCursor",
    "TableSpec",
    "ensure_tables",
]

_T = TypeVar("_T")

_DEFAULT_TIMEOUT: Final = 30.0
#: Attempts of one transaction (the first plus two retries).
_ATTEMPTS: Final = 3
#: Seconds to wait before each attempt.
_BACKOFF: Final = (0.0, 0.05, 0.25)
#: Idle connections kept per store object.
_MAX_IDLE: Final = 4
#: ``pg_advisory_xact_lock`` key serialising schema creation (b"sealeval" as an integer).
_SCHEMA_LOCK: Final = 0x7365616C6576616C
#: SQLSTATEs that are clean failures of a statement, never retried.
_TIMEOUT_STATES: Final = frozenset({"55P03", "57014"})  # lock_not_available, query_canceled


class SqlCursor(Protocol):
    """One open transaction: portable SQL with ``?`` placeholders.

    ``FOR UPDATE`` row locks are honoured by PostgreSQL and dropped for
    SQLite, whose transactions hold the whole database's write lock.
    """

    def execute(self, statement: str, parameters: Sequence[object] = ()) -> int:
        """Run a statement; return the number of rows it changed."""
        ...

    def fetchone(self, statement: str, parameters: Sequence[object] = ()) -> tuple[Any, ...] | None:
        """Run a query; return its first row or ``None``."""
        ...

    def fetchall(self, statement: str, parameters: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run a query; return every row."""
        ...


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A sealeval table: ``TEXT`` columns, their nullability and the primary key.

    :meth:`ddl` renders the ``CREATE TABLE`` statement used by both back ends
    (for ``sessions`` and ``budgets`` it is exactly
    :data:`sealeval.session.store.SCHEMA`); PostgreSQL databases are verified
    against the same description through the system catalogs.
    """

    name: str
    columns: tuple[tuple[str, bool], ...]
    primary_key: tuple[str, ...]

    def ddl(self) -> str:
        """Return the ``CREATE TABLE`` statement."""
        parts = []
        for column, not_null in self.columns:
            if self.primary_key == (column,):
                parts.append(f"{column} TEXT PRIMARY KEY")
            else:
                parts.append(f"{column} TEXT NOT NULL" if not_null else f"{column} TEXT")
        if len(self.primary_key) > 1:
            parts.append(f"PRIMARY KEY ({', '.join(self.primary_key)})")
        return f"CREATE TABLE {self.name} ({', '.join(parts)})"

    def shape(self) -> tuple[tuple[tuple[str, str, bool], ...], tuple[str, ...]]:
        """Return ``((column, type, not null), ...), primary key`` as PostgreSQL reports them."""
        columns = tuple(
            (column, "text", not_null or column in self.primary_key)
            for column, not_null in self.columns
        )
        return columns, self.primary_key


#: The store's own tables (identical to the SQLite store's ``SCHEMA``).
STORE_TABLES: Final = (
    TableSpec("sessions", (("session_key", True), ("record", True)), ("session_key",)),
    TableSpec(
        "budgets", (("budget_key", True), ("watermark", True), ("claim", False)), ("budget_key",)
    ),
)


def _fail(code: str) -> NoReturn:
    raise EvaluationSessionError(code)


# ---------------------------------------------------------------------------
# The driver (imported lazily) and fork safety

_DRIVER: list[ModuleType] = []


def _driver() -> ModuleType:
    """Return the ``psycopg`` module; ``store_failed`` when it is not installed."""
    if not _DRIVER:
        try:
            import psycopg  # noqa: PLC0415 - optional dependency, imported on first use
        except ImportError:
            psycopg = None  # type: ignore[assignment]
        if psycopg is None:
            _fail("store_failed")
        _DRIVER.append(psycopg)
    return _DRIVER[0]


_STORES: weakref.WeakSet[PostgresSessionStore] = weakref.WeakSet()
#: Connections inherited through ``fork``: kept alive (their sockets now point at
#: /dev/null) so that finalising them can never send anything on the parent's socket.
_ORPHANS: list[object] = []


def _neutralise(connection: psycopg.Connection[Any]) -> None:
    """Point an inherited connection's socket descriptor at ``/dev/null`` (child side only)."""
    with contextlib.suppress(Exception):
        point_at_null(connection.fileno())


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._forget_inherited_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------
# The cursor adapter


class _PostgresCursor:
    """:class:`SqlCursor` over a psycopg cursor (``?`` becomes ``%s``)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, statement: str, parameters: Sequence[object] = ()) -> int:
        self._cursor.execute(statement.replace("?", "%s"), tuple(parameters))
        return self._cursor.rowcount

    def fetchone(self, statement: str, parameters: Sequence[object] = ()) -> tuple[Any, ...] | None:
        self._cursor.execute(statement.replace("?", "%s"), tuple(parameters))
        row: tuple[Any, ...] | None = self._cursor.fetchone()
        return row

    def fetchall(self, statement: str, parameters: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        self._cursor.execute(statement.replace("?", "%s"), tuple(parameters))
        rows: list[tuple[Any, ...]] = self._cursor.fetchall()
        return rows


def ensure_tables(cursor: SqlCursor, tables: Sequence[TableSpec], *, create: bool = True) -> None:
    """Create the missing ``tables`` (unless ``create`` is false) and verify all of them.

    PostgreSQL only. Runs under a transaction-scoped advisory lock so that
    concurrent first opens cannot race on ``CREATE TABLE``. A missing table
    is ``store_failed`` when ``create`` is false. A table that exists is not touched
    (a runtime role needs no ``CREATE`` privilege once the schema exists) and
    must be an ordinary table with exactly the specified ``text`` columns,
    nullability and primary key, without triggers, rules or row-level
    security.

    Raises:
        EvaluationSessionError: ``store_failed`` for a foreign definition.
    """
    cursor.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
    for spec in tables:
        found = cursor.fetchone(
            "SELECT c.relkind, c.relrowsecurity FROM pg_class c WHERE c.oid = to_regclass(?)",
            (spec.name,),
        )
        if found is None:
            if not create:
                _fail("store_failed")
            cursor.execute(spec.ddl())
            found = ("r", False)
        columns = cursor.fetchall(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "FROM pg_attribute a WHERE a.attrelid = to_regclass(?) "
            "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (spec.name,),
        )
        primary = cursor.fetchall(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) "
            "WHERE i.indrelid = to_regclass(?) AND i.indisprimary "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)",
            (spec.name,),
        )
        extras = cursor.fetchone(
            "SELECT (SELECT count(*) FROM pg_trigger t "
            "WHERE t.tgrelid = to_regclass(?) AND NOT t.tgisinternal), "
            "(SELECT count(*) FROM pg_rewrite r WHERE r.ev_class = to_regclass(?))",
            (spec.name, spec.name),
        )
        shape = (
            tuple((str(name), str(kind), bool(not_null)) for name, kind, not_null in columns),
            tuple(str(row[0]) for row in primary),
        )
        if (
            tuple(found) != ("r", False)
            or shape != spec.shape()
            or extras is None
            or tuple(extras) != (0, 0)
        ):
            _fail("store_failed")


# ---------------------------------------------------------------------------
# The store


class _Retry(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Internal: the attempt failed before COMMIT in a way that may be retried."""


class PostgresSessionStore:
    """A :class:`~sealeval.session.store.SessionStore` in a shared PostgreSQL database.

    Opening connects, creates the ``sessions`` and ``budgets`` tables when
    absent (under an advisory lock) and verifies them: exactly the SQLite
    store's columns, ``text`` typed, the same primary keys, no triggers, no
    rules, no row-level security (``store_failed`` otherwise).

    Every operation runs in one ``READ COMMITTED`` transaction that locks the
    rows it compares (``SELECT ... FOR UPDATE``; a budget row that does not
    exist yet is created with ``INSERT ... ON CONFLICT DO NOTHING``, which
    blocks a concurrent creator until this transaction ends). Each connection
    sets ``lock_timeout`` to ``timeout`` and raises ``synchronous_commit`` to
    ``on`` when the server has it ``off``, so a returned write is durable.

    Only session keys, record JSON, budget keys, watermarks and claims are
    ever written, exactly as in the SQLite store.

    Args:
        dsn: a libpq connection string (``postgresql://...`` URI or
            ``key=value`` form). It is kept privately, never shown by
            ``repr``, never put in an error, and the object cannot be pickled
            (that would copy the password).
        timeout: seconds to wait for a row lock and (at least 2 s) for a
            connection when the DSN sets no ``connect_timeout``; 0 to 3600.
        create: create missing tables (default); ``False`` refuses a
            database without them (``store_failed``) and writes nothing, for
            read-only inspection.

    Raises:
        EvaluationSessionError: ``store_failed`` for a DSN that is not a
            non-empty string or does not parse, psycopg missing, a server
            that cannot be reached or refuses the role, or a foreign schema.
    """

    __slots__ = ("__weakref__", "_conninfo", "_idle", "_live", "_lock", "_timeout")

    _idle: list[psycopg.Connection[Any]]
    _live: set[psycopg.Connection[Any]]

    def __init__(self, dsn: str, *, timeout: float = _DEFAULT_TIMEOUT, create: bool = True) -> None:
        """Parse the DSN, connect, create and verify the schema."""
        if (
            type(timeout) not in (int, float)
            or not 0 <= timeout <= 3600
            or type(create) is not bool
        ):
            _fail("store_failed")
        self._timeout = float(timeout)
        self._conninfo = self._checked_conninfo(dsn, self._timeout)
        self._lock = threading.Lock()
        self._idle = []
        self._live = set()
        _STORES.add(self)
        self.run_transaction(lambda cursor: ensure_tables(cursor, STORE_TABLES, create=create))

    @staticmethod
    def _checked_conninfo(dsn: object, timeout: float) -> str:
        if type(dsn) is not str or not dsn.strip() or "\x00" in dsn:
            _fail("store_failed")
        driver = _driver()
        conninfo: str | None
        try:
            parsed = driver.conninfo.conninfo_to_dict(dsn)
            extra = (
                {}
                if "connect_timeout" in parsed
                else {"connect_timeout": max(2, math.ceil(timeout))}
            )
            conninfo = driver.conninfo.make_conninfo(dsn, **extra)
        except Exception:  # noqa: BLE001 - the parser's message may quote the DSN
            conninfo = None
        if conninfo is None:
            _fail("store_failed")
        return conninfo

    def __repr__(self) -> str:
        """Show nothing of the DSN."""
        return "PostgresSessionStore(<dsn redacted>)"

    def __reduce__(self) -> NoReturn:
        """Refuse pickling: the DSN may carry a password. Open a store in the child instead."""
        raise TypeError("PostgresSessionStore cannot be pickled")

    def close(self) -> None:
        """Close the idle pooled connections (the store stays usable and reconnects)."""
        with self._lock:
            idle, self._idle = self._idle, []
            for connection in idle:
                self._live.discard(connection)
        for connection in idle:
            with contextlib.suppress(Exception):
                connection.close()

    def __del__(self) -> None:
        """Close every connection of this process when the store is collected."""
        live: set[Any] = getattr(self, "_live", set())
        for connection in list(live):
            with contextlib.suppress(Exception):
                connection.close()

    # -- connections -----------------------------------------------------------

    def _forget_inherited_connections(self) -> None:
        """In a forked child: disown the parent's connections without closing them."""
        self._lock = threading.Lock()
        for connection in self._live:
            _neutralise(connection)
            _ORPHANS.append(connection)
        self._live = set()
        self._idle = []

    def _connect(self) -> psycopg.Connection[Any]:
        driver = _driver()
        connection: psycopg.Connection[Any] = driver.connect(self._conninfo, autocommit=False)
        try:
            milliseconds = max(1, round(self._timeout * 1000))
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, false), "
                    "current_setting('synchronous_commit')",
                    (f"{milliseconds}ms",),
                )
                row = cursor.fetchone()
                if row is None or row[1] == "off":
                    cursor.execute("SET synchronous_commit TO on")
            connection.commit()
        except BaseException:
            connection.close()
            raise
        with self._lock:
            self._live.add(connection)
        return connection

    def _acquire(self) -> psycopg.Connection[Any]:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _release(self, connection: psycopg.Connection[Any], *, reusable: bool) -> None:
        driver = _driver()
        idle = driver.pq.TransactionStatus.IDLE
        with self._lock:
            if (
                reusable
                and connection in self._live
                and not connection.closed
                and connection.info.transaction_status == idle
                and len(self._idle) < _MAX_IDLE
            ):
                self._idle.append(connection)
                return
            self._live.discard(connection)
        with contextlib.suppress(Exception):
            connection.close()

    # -- transactions ----------------------------------------------------------

    def run_transaction(self, operation: Callable[[SqlCursor], _T]) -> _T:
        """Run ``operation`` in one ``READ COMMITTED`` transaction and commit it.

        The durable ledger uses this to update its tables in the store's
        database. ``operation`` may be run more than once (see the module
        documentation) and must not have effects outside the transaction.

        Raises:
            SealevalError: an error ``operation`` raised, fresh (same class,
                code and field); ``EvaluationSessionError("store_failed")``
                for every database or connection failure.
        """
        failure: Failure = STORE_FAILED
        for delay in _BACKOFF[:_ATTEMPTS]:
            if delay:
                time.sleep(delay)
            try:
                return self._attempt(operation)
            except _Retry:
                continue
            except Exception as error:  # noqa: BLE001 - driver errors may quote the DSN or the server
                failure = failure_of(error)
            break
        # Raised outside the except blocks: neither __cause__ nor __context__.
        raise fresh_error(failure) from None

    def _attempt(self, operation: Callable[[SqlCursor], _T]) -> _T:
        driver = _driver()
        try:
            connection = self._acquire()
        except Exception:  # noqa: BLE001 - cannot connect (yet): retry, then store_failed
            raise _Retry from None
        reusable = False
        try:
            try:
                with connection.cursor() as cursor:
                    result = operation(_PostgresCursor(cursor))
            except BaseException as error:
                roll_back(connection)  # a failed rollback: the classification below decides
                if isinstance(error, driver.OperationalError) and (
                    getattr(error, "sqlstate", None) not in _TIMEOUT_STATES
                ):
                    # Connection lost, serialization failure, deadlock: nothing committed.
                    raise _Retry from None
                reusable = not connection.closed and not isinstance(error, driver.Error)
                raise
            # Beyond this point the outcome may be unknown: never retried.
            connection.commit()
            reusable = True
            return result
        finally:
            self._release(connection, reusable=reusable)

    # -- compare-and-swap helpers ------------------------------------------------

    @staticmethod
    def _compare(cursor: SqlCursor, previous: SessionRecord) -> None:
        row = cursor.fetchone(
            "SELECT record FROM sessions WHERE session_key = ? FOR UPDATE",
            (previous.session_key,),
        )
        if row is None or row[0] != previous.to_json():
            _fail("record_conflict")

    @staticmethod
    def _swap(cursor: SqlCursor, record: SessionRecord) -> None:
        cursor.execute(
            "UPDATE sessions SET record = ? WHERE session_key = ?",
            (record.to_json(), record.session_key),
        )

    # -- SessionStore ------------------------------------------------------------

    def load(self, session_key: str) -> SessionRecord | None:
        """Return the stored record of ``session_key`` (strictly parsed) or ``None``."""
        if not is_digest(session_key):
            _fail("invalid_digest")

        def operation(cursor: SqlCursor) -> SessionRecord | None:
            row = cursor.fetchone(
                "SELECT record FROM sessions WHERE session_key = ?", (session_key,)
            )
            if row is None:
                return None
            record = SessionRecord.from_json(row[0])
            if record.session_key != session_key:
                _fail("record_invalid")
            return record

        return self.run_transaction(operation)

    def save(self, record: SessionRecord, previous: SessionRecord | None) -> None:
        """Insert an empty record or advance ``previous`` by one step (compare-and-swap)."""
        check_save(record, previous)

        def operation(cursor: SqlCursor) -> None:
            if previous is None:
                inserted = cursor.execute(
                    "INSERT INTO sessions (session_key, record) VALUES (?, ?) "
                    "ON CONFLICT (session_key) DO NOTHING",
                    (record.session_key, record.to_json()),
                )
                if inserted != 1:
                    _fail("record_conflict")
                return
            self._compare(cursor, previous)
            self._swap(cursor, record)

        self.run_transaction(operation)

    def claim_release(
        self, previous: SessionRecord, claimed: SessionRecord, budget_key: str, watermark: str
    ) -> None:
        """Store the claimed record and lock the budget key, in one transaction."""
        check_claim(previous, claimed, budget_key, watermark)

        def operation(cursor: SqlCursor) -> None:
            self._compare(cursor, previous)
            created = cursor.execute(
                "INSERT INTO budgets (budget_key, watermark, claim) VALUES (?, ?, ?) "
                "ON CONFLICT (budget_key) DO NOTHING",
                (budget_key, watermark, claimed.session_key),
            )
            if created != 1:
                row = cursor.fetchone(
                    "SELECT watermark, claim FROM budgets WHERE budget_key = ? FOR UPDATE",
                    (budget_key,),
                )
                if row is None or row[0] != watermark or row[1] is not None:
                    _fail("budget_state_unverified")
                cursor.execute(
                    "UPDATE budgets SET watermark = ?, claim = ? WHERE budget_key = ?",
                    (watermark, claimed.session_key, budget_key),
                )
            self._swap(cursor, claimed)

        self.run_transaction(operation)

    def finish_release(
        self, claimed: SessionRecord, finished: SessionRecord, budget_key: str, watermark: str
    ) -> None:
        """Store the terminal record, the new watermark, and release the claim."""
        check_finish(claimed, finished, budget_key, watermark)

        def operation(cursor: SqlCursor) -> None:
            self._compare(cursor, claimed)
            row = cursor.fetchone(
                "SELECT claim FROM budgets WHERE budget_key = ? FOR UPDATE", (budget_key,)
            )
            if row is None or row[0] != claimed.session_key:
                _fail("budget_state_unverified")
            self._swap(cursor, finished)
            cursor.execute(
                "UPDATE budgets SET watermark = ?, claim = NULL WHERE budget_key = ?",
                (watermark, budget_key),
            )

        self.run_transaction(operation)
