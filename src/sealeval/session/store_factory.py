"""Open a session store (and its ledger) from one ``--store`` location string.

``open_session_store(location)``:

* ``postgresql://...`` or ``postgres://...`` (scheme case-insensitive) →
  :class:`~sealeval.session.postgres_store.PostgresSessionStore`;
* any other ``scheme://...`` and libpq ``key=value`` connection strings
  (``host=... dbname=...``) → ``store_failed``: they are connection strings
  meant for another back end, and must never become a file name;
* anything else → :class:`~sealeval.session.store.SQLiteSessionStore` with its
  path rules (memory and temporary names refused, relative paths made
  absolute).

``open_budget_ledger(store, policies, durable=...)`` returns the ledger a
session on that store should charge: the durable ledger kept in the store's
database (:class:`~sealeval.session.durable_ledger.DurableBudgetLedger`, the
default), or the reference's in-memory
:class:`~sealeval.session.budget.FeedbackBudgetLedger`.

``read_session_store(location)`` reads every session record, every budget
row and (when the database holds a durable ledger) the ledger usage, without
writing anything: what ``sealeval session show`` lists, for either back end.

The location is never echoed: every failure is a bare
``EvaluationSessionError("store_failed")`` (a DSN may carry a password).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from sealeval.canonical import is_digest
from sealeval.errors import SealevalError
from sealeval.session.budget import FeedbackBudgetLedger, LedgerUsage
from sealeval.session.durable_ledger import (
    LEDGER_TABLES,
    DurableBudgetLedger,
    SQLiteCursor,
    read_ledger_usage,
)
from sealeval.session.postgres_store import (
    PostgresSessionStore,
    SqlCursor,
    ensure_tables,
)
from sealeval.session.record import EvaluationSessionError, SessionRecord
from sealeval.session.session import BudgetLedger
from sealeval.session.store import SCHEMA, SessionStore, SQLiteSessionStore
from sealeval.session.transaction import sqlite_read_snapshot

__all__ = [
    "POSTGRES_SCHEMES",
    "BudgetRow",
    "StoreListing",
    "is_postgres_location",
    "open_budget_ledger",
    "open_session_store",
    "read_session_store",
]

_T = TypeVar("_T")

#: The URI schemes that select the PostgreSQL store.
POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
_SCHEME: Final = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://")
# libpq keyword/value connection strings: "host=db dbname=x", "password = s", ...
_CONNINFO_KEYWORDS: Final = (
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "service",
    "sslmode",
    "options",
    "connect_timeout",
    "application_name",
    "target_session_attrs",
)
_CONNINFO: Final = re.compile(
    r"(?:^|\s)(?:" + "|".join(_CONNINFO_KEYWORDS) + r")\s*=", re.IGNORECASE
)
_DEFAULT_TIMEOUT: Final = 30.0


def is_postgres_location(location: object) -> bool:
    """Return whether ``location`` names the PostgreSQL store (a ``postgres[ql]://`` URI)."""
    if type(location) is not str:
        return False
    match = _SCHEME.match(location)
    return match is not None and match.group(1).lower() in POSTGRES_SCHEMES


def open_session_store(location: str, *, timeout: float = _DEFAULT_TIMEOUT) -> SessionStore:
    """Open the session store named by ``location`` (a PostgreSQL DSN or a SQLite path).

    Args:
        location: ``postgresql://user:password@host:port/dbname?...`` (or
            ``postgres://``) for a shared PostgreSQL database, else a SQLite
            database file path.
        timeout: seconds to wait for another writer's lock (both back ends).

    Raises:
        EvaluationSessionError: ``store_failed`` — not a string, a foreign
            URI scheme or ``key=value`` connection string, or any failure of
            the chosen store to open (see each store); never quoting the
            location.
    """
    if type(location) is not str:
        raise EvaluationSessionError("store_failed")
    match = _SCHEME.match(location)
    if match is not None and match.group(1).lower() in POSTGRES_SCHEMES:
        # libpq spells the scheme in lower case only.
        dsn = match.group(1).lower() + location[match.end(1) :]
        return PostgresSessionStore(dsn, timeout=timeout)
    if match is not None or _CONNINFO.search(location) is not None:
        raise EvaluationSessionError("store_failed")
    return SQLiteSessionStore(location, timeout=timeout)


def open_budget_ledger(
    store: SessionStore,
    policies: object = None,
    *,
    durable: bool = True,
    usage: LedgerUsage | None = None,
) -> BudgetLedger:
    """Return the ledger a session on ``store`` charges.

    Args:
        store: a store from :func:`open_session_store`.
        policies: the budget policies (``FeedbackBudgetPolicy`` sequence). For
            the durable ledger ``None`` means "the policies already stored".
        durable: ``True`` (default) for the :class:`DurableBudgetLedger` in the
            store's database; ``False`` for the reference's in-memory
            :class:`FeedbackBudgetLedger`, restored from ``usage``.
        usage: in-memory only: the exported usage to restore (the operator
            keeps it between runs); refused with the durable ledger.

    Raises:
        FeedbackBudgetError: policy validation (as either ledger).
        EvaluationSessionError: as :class:`DurableBudgetLedger`;
            ``invalid_configuration`` for ``usage`` with the durable ledger
            or a non-boolean ``durable``.
    """
    if type(durable) is not bool or (durable and usage is not None):
        raise EvaluationSessionError("invalid_configuration")
    if durable:
        return DurableBudgetLedger(store, policies)
    return FeedbackBudgetLedger(policies, usage)


# ---------------------------------------------------------------------------
# Read-only listing (``sealeval session show``)


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """One ``budgets`` row: the budget key, its watermark and the claiming session (or ``None``)."""

    budget_key: str
    watermark: str
    claim: str | None

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain document."""
        return {"budget_key": self.budget_key, "claim": self.claim, "watermark": self.watermark}


@dataclass(frozen=True, slots=True)
class StoreListing:
    """Everything a store holds, content-free: records, budget rows, durable ledger usage.

    Attributes:
        sessions: every session record (strictly parsed), by session key.
        budgets: every budget row, by budget key.
        ledger_usage: the durable ledger's usage of every pair, or ``None``
            when the database holds no durable ledger (in-memory deployments).
    """

    sessions: tuple[SessionRecord, ...]
    budgets: tuple[BudgetRow, ...]
    ledger_usage: LedgerUsage | None

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain document ``{budgets, ledger_usage, sessions}``."""
        usage = self.ledger_usage
        return {
            "budgets": [row.to_dict() for row in self.budgets],
            "ledger_usage": None if usage is None else usage.to_dict(),
            "sessions": [record.to_dict() for record in self.sessions],
        }


def _listing(cursor: SqlCursor, *, ledger: bool) -> StoreListing:
    records = []
    for key, text in cursor.fetchall(
        "SELECT session_key, record FROM sessions ORDER BY session_key"
    ):
        record = SessionRecord.from_json(text)
        if record.session_key != key:
            raise EvaluationSessionError("record_invalid")
        records.append(record)
    budgets = []
    for key, watermark, claim in cursor.fetchall(
        "SELECT budget_key, watermark, claim FROM budgets ORDER BY budget_key"
    ):
        if (
            not is_digest(key)
            or not is_digest(watermark)
            or not (claim is None or is_digest(claim))
        ):
            raise EvaluationSessionError("record_invalid")
        budgets.append(BudgetRow(key, watermark, claim))
    return StoreListing(
        sessions=tuple(records),
        budgets=tuple(budgets),
        ledger_usage=read_ledger_usage(cursor) if ledger else None,
    )


def _read_postgres(location: str, timeout: float) -> StoreListing:
    store = PostgresSessionStore(location, timeout=timeout, create=False)

    def operation(cursor: SqlCursor) -> StoreListing:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        names = [spec.name for spec in LEDGER_TABLES]
        found = cursor.fetchone(
            "SELECT count(*) FROM unnest(?::text[]) AS t(name) "
            "WHERE to_regclass(t.name) IS NOT NULL",
            (names,),
        )
        # A database with any ledger table must hold all of them, exactly.
        ledger = found is not None and int(found[0]) > 0
        if ledger:
            ensure_tables(cursor, LEDGER_TABLES, create=False)
        return _listing(cursor, ledger=ledger)

    try:
        return store.run_transaction(operation)
    finally:
        store.close()


def _read_sqlite(location: str, timeout: float) -> StoreListing:
    lowered = location.lower()
    if lowered.startswith("file:") or "mode=memory" in lowered or "\x00" in location:
        raise EvaluationSessionError("store_failed")
    path = Path(location).absolute()
    if not path.is_file():
        raise EvaluationSessionError("store_failed")
    with sqlite_read_snapshot(path, timeout) as connection:
        rows = connection.execute(
            "SELECT type, name, sql, tbl_name FROM sqlite_master WHERE tbl_name IN "
            "('sessions', 'budgets', 'ledger_policies', 'ledger_usage', 'ledger_approvals', "
            "'ledger_decisions')"
        ).fetchall()
        tables = {name: sql for kind, name, sql, _table in rows if kind == "table"}
        others = [kind for kind, _name, _sql, _table in rows if kind not in ("table", "index")]
        store_tables = {name: tables.get(name) for name in SCHEMA}
        ledger_tables = {spec.name: spec.ddl() for spec in LEDGER_TABLES}
        ledger = bool(set(tables) & set(ledger_tables))
        if store_tables != SCHEMA or others or (ledger and tables != {**SCHEMA, **ledger_tables}):
            raise EvaluationSessionError("store_failed")
        return _listing(SQLiteCursor(connection), ledger=ledger)


def _fresh(action: Callable[[], _T]) -> _T:
    """Run ``action``; re-raise sealeval errors fresh, anything else as ``store_failed``."""
    failure: tuple[type[SealevalError], str, str | None]
    try:
        return action()
    except SealevalError as error:
        failure = (type(error), error.code, error.field)
    except Exception:  # noqa: BLE001 - sqlite3/OS/driver errors may quote the location
        failure = (EvaluationSessionError, "store_failed", None)
    error_class, code, field = failure
    raise error_class(code, field) from None


def read_session_store(location: str, *, timeout: float = _DEFAULT_TIMEOUT) -> StoreListing:
    """Read a store without writing to it (``sealeval session show``), for either back end.

    A SQLite file is opened read-only (``mode=ro``; a missing file is
    refused, nothing is created); a PostgreSQL database must already hold
    the tables (nothing is created, one ``REPEATABLE READ`` snapshot, a
    read-only role with ``SELECT`` suffices). Location rules are those of
    :func:`open_session_store`.

    Raises:
        EvaluationSessionError: ``store_failed`` (not a sealeval store, a
            missing file, unreachable server, foreign schema),
            ``record_invalid`` (a session or budget row that does not parse
            strictly), ``budget_state_unverified`` (a ledger usage row that
            does not).
    """
    if type(location) is not str or type(timeout) not in (int, float) or not 0 <= timeout <= 3600:
        raise EvaluationSessionError("store_failed")
    match = _SCHEME.match(location)
    if match is not None and match.group(1).lower() in POSTGRES_SCHEMES:
        dsn = match.group(1).lower() + location[match.end(1) :]
        return _fresh(lambda: _read_postgres(dsn, float(timeout)))
    if match is not None or _CONNINFO.search(location) is not None:
        raise EvaluationSessionError("store_failed")
    return _fresh(lambda: _read_sqlite(location, float(timeout)))
