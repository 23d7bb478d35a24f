"""The edge of the guarded loader: one transaction on an injected DB-API connection.

:func:`load_staged_batch` and :func:`rollback_loaded_batch` run every pure check
and the authorization first (:mod:`~sealeval.gates.omop.authorize`); only then
do they call the injected connection factory, write in one transaction with
parameterised SQL (:mod:`~sealeval.gates.omop.sql`), verify row counts and read
the rows back (digest comparison) before committing, and roll back on any
failure. :func:`create_omop_tables` and :func:`snapshot_omop_target` set up and
observe a target.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sealeval._transaction import RollbackFailedError, transaction
from sealeval.errors import CanonicalError
from sealeval.gates.omop.authorize import (
    Authorizer,
    Connector,
    DbConnection,
    DbCursor,
    LoadReceipt,
    gate_operation,
)
from sealeval.gates.omop.model import (
    OMOP_TABLES,
    TABLE_ORDER,
    Dialect,
    OmopLoaderError,
    OmopTable,
    Operation,
    check_dialect,
    omop_ddl,
)
from sealeval.gates.omop.sql import (
    UNREADABLE,
    from_db,
    sql_insert,
    sql_select,
    to_db,
)
from sealeval.gates.omop.stage import (
    OmopRow,
    StagedBatch,
    row_digest,
)

__all__ = [
    "create_omop_tables",
    "load_staged_batch",
    "rollback_loaded_batch",
    "snapshot_omop_target",
]

# ---------------------------------------------------------------------------
# The edge: one transaction on an injected DB-API connection


def _open(connect: Callable[[], object], dialect: Dialect) -> DbConnection:
    try:
        connection = connect()
    except Exception:  # noqa: BLE001 - driver errors may quote DSNs; never chained
        connection = None
    if connection is None or not all(
        callable(getattr(connection, name, None))
        for name in ("cursor", "commit", "rollback", "close")
    ):
        raise OmopLoaderError("connection_failed", "connect")
    autocommit = getattr(connection, "autocommit", None)
    if autocommit is True or (
        dialect == "sqlite"
        and autocommit is not False
        and getattr(connection, "isolation_level", "") is None
    ):
        close_quietly(connection)
        raise OmopLoaderError("autocommit_connection", "connect")
    opened: DbConnection = connection  # type: ignore[assignment]
    return opened


def close_quietly(connection: object) -> None:
    """Close a connection or cursor, ignoring any error (the outcome is already decided)."""
    with contextlib.suppress(Exception):  # closing is best effort; the outcome is decided
        connection.close()  # type: ignore[attr-defined]


def _readback_digest(table: OmopTable, record: Sequence[Any]) -> str | None:
    """Return the digest of one row read from the target, or ``None`` if unreadable."""
    values = {
        column.name: from_db(column, item)
        for column, item in zip(table.columns, record, strict=True)
    }
    if any(value is UNREADABLE for value in values.values()):
        return None
    try:
        return row_digest(table.name, values)
    except CanonicalError:
        return None


def _read_back(
    cursor: DbCursor, rows: Sequence[OmopRow], dialect: Dialect, *, lock: bool
) -> Iterator[str | None]:
    """Yield, per staged row, the digest of the target row with its key (``None``: absent)."""
    for row in rows:
        table = OMOP_TABLES[row.table]
        cursor.execute(sql_select(table, dialect, by_key=True, lock=lock), (row.primary_key,))
        found = cursor.fetchall()
        yield _readback_digest(table, found[0]) if len(found) == 1 else None


def _begin(connection: DbConnection, cursor: DbCursor, dialect: Dialect) -> None:
    """Take the write lock up front on SQLite (legacy mode starts transactions lazily)."""
    if dialect == "sqlite" and getattr(connection, "in_transaction", True) is False:
        cursor.execute("BEGIN IMMEDIATE", ())


def _insert_rows(connection: DbConnection, batch: StagedBatch, dialect: Dialect) -> int:
    cursor = connection.cursor()
    try:
        _begin(connection, cursor, dialect)
        written = 0
        for row in batch.rows:
            table = OMOP_TABLES[row.table]
            cursor.execute(
                sql_insert(table, dialect),
                tuple(to_db(column, row.values[column.name], dialect) for column in table.columns),
            )
            if cursor.rowcount != 1:
                raise OmopLoaderError("row_count_mismatch", "target")
            written += 1
        if written != len(batch.rows):
            raise OmopLoaderError("row_count_mismatch", "target")
        if tuple(_read_back(cursor, batch.rows, dialect, lock=False)) != batch.row_digests:
            raise OmopLoaderError("readback_mismatch", "target")
        return written
    finally:
        close_quietly(cursor)


def _delete_rows(connection: DbConnection, batch: StagedBatch, dialect: Dialect) -> int:
    cursor = connection.cursor()
    try:
        _begin(connection, cursor, dialect)
        if tuple(_read_back(cursor, batch.rows, dialect, lock=True)) != batch.row_digests:
            raise OmopLoaderError("target_changed", "target")
        deleted = 0
        for step in batch.rollback_plan:
            cursor.execute(step.statement(dialect), (step.key,))
            if cursor.rowcount != 1:
                raise OmopLoaderError("row_count_mismatch", "target")
            deleted += 1
        if deleted != len(batch.rows) or any(
            digest is not None for digest in _read_back(cursor, batch.rows, dialect, lock=False)
        ):
            raise OmopLoaderError("row_count_mismatch", "target")
        return deleted
    finally:
        close_quietly(cursor)


def _transact(
    connect: Callable[[], object],
    dialect: Dialect,
    work: Callable[[DbConnection], int],
) -> int:
    """Open one connection, run ``work`` in one transaction, commit or roll back, close."""
    connection = _open(connect, dialect)
    code: str
    try:
        with transaction(connection):
            return work(connection)
    except RollbackFailedError:  # the target state is then unknown
        code = "rollback_failed"
    except Exception as error:  # noqa: BLE001 - rolled back; mapped to a closed code
        code = error.code if isinstance(error, OmopLoaderError) else "write_failed"
    finally:
        close_quietly(connection)
    raise OmopLoaderError(code, "target") from None


def _guarded(
    batch: StagedBatch,
    operation: Operation,
    work: Callable[[DbConnection, StagedBatch, Dialect], int],
    *,
    authorize: Authorizer,
    connect: Connector,
    dialect: Dialect,
) -> LoadReceipt:
    """Gate ``operation`` (an approval bound to its preview), run ``work`` in one transaction."""
    checked, preview, checked_dialect = gate_operation(
        batch, authorize, connect, dialect, operation
    )
    affected = _transact(
        connect, checked_dialect, lambda connection: work(connection, checked, checked_dialect)
    )
    return LoadReceipt(
        operation=operation,
        dialect=checked_dialect,
        preview_digest=preview.preview_digest,
        batch_digest=checked.batch_digest,
        rollback_digest=checked.rollback_digest,
        rows_affected=affected,
    )


def load_staged_batch(
    batch: StagedBatch,
    *,
    authorize: Authorizer,
    connect: Connector,
    dialect: Dialect,
) -> LoadReceipt:
    """Load a staged batch into the target, only after an approval bound to its preview.

    Order: re-check the batch and its digests, check the dialect and the two
    callables, call ``authorize(batch.preview())``; only on an approval bound
    to that preview's digest call ``connect()`` once, insert every row with
    parameterised SQL in one transaction, check each insert affected one row,
    read the rows back and compare their digests with the staged ones, commit.
    Any failure rolls the transaction back. The connection is always closed.

    Raises:
        OmopLoaderError: ``batch: invalid_batch``, a batch digest code,
            ``dialect: unsupported_dialect``, ``authorize: invalid_authorizer``,
            ``connect: invalid_connector``, ``authorize: authorization_error`` /
            ``invalid_decision`` / ``authorization_refused`` /
            ``stale_authorization`` (no connection was opened), then
            ``connect: connection_failed`` / ``autocommit_connection``, or
            ``target: write_failed`` / ``row_count_mismatch`` /
            ``readback_mismatch`` (rolled back) / ``rollback_failed``.
    """
    return _guarded(
        batch, "insert", _insert_rows, authorize=authorize, connect=connect, dialect=dialect
    )


def rollback_loaded_batch(
    batch: StagedBatch,
    *,
    authorize: Authorizer,
    connect: Connector,
    dialect: Dialect,
) -> LoadReceipt:
    """Undo a loaded batch with its rollback plan, after re-checking ``rollback_digest``.

    Same gate as :func:`load_staged_batch` with the ``delete`` preview
    (:meth:`StagedBatch.rollback_preview`), so a load approval never
    authorizes a rollback. In one transaction it first reads the batch's rows
    back (locking them on PostgreSQL) and refuses with ``target: target_changed``
    unless the target holds exactly the staged rows, then runs the plan's
    DELETE statements (one row each) and checks that no row is left.

    Raises:
        OmopLoaderError: as :func:`load_staged_batch`, plus ``target: target_changed``.
    """
    return _guarded(
        batch, "delete", _delete_rows, authorize=authorize, connect=connect, dialect=dialect
    )


def create_omop_tables(connection: DbConnection, *, dialect: Dialect) -> None:
    """Create the four modelled tables on ``connection`` (:func:`omop_ddl`) and commit."""
    statements = omop_ddl(dialect)
    cursor = connection.cursor()
    try:
        for statement in statements:
            cursor.execute(statement, ())
    finally:
        close_quietly(cursor)
    connection.commit()


def snapshot_omop_target(connection: DbConnection, *, dialect: Dialect) -> tuple[str, ...]:
    """Return the sorted row digests of every row in the four modelled tables.

    Content-free: two snapshots are equal exactly when the tables hold the same
    multiset of rows (after normalization). Read-only; it does not commit.

    Raises:
        OmopLoaderError: ``target: snapshot_failed`` if a table cannot be read
            or holds a value the model cannot represent.
    """
    checked_dialect = check_dialect(dialect)
    digests: list[str] = []
    try:
        cursor = connection.cursor()
        try:
            for name in TABLE_ORDER:
                table = OMOP_TABLES[name]
                cursor.execute(sql_select(table, checked_dialect, by_key=False), ())
                for record in cursor.fetchall():
                    digest = _readback_digest(table, record)
                    if digest is None:
                        raise OmopLoaderError("snapshot_failed", "target")
                    digests.append(digest)
        finally:
            close_quietly(cursor)
    except OmopLoaderError:
        raise
    except Exception:  # noqa: BLE001 - driver errors may quote values; never chained
        raise OmopLoaderError("snapshot_failed", "target") from None
    return tuple(sorted(digests))
