"""The one commit-or-roll-back rule (``sealeval._transaction``) on real SQLite connections."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sealeval._transaction import RollbackFailedError, roll_back, transaction


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
    return connection


def _count(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute("SELECT COUNT(*) FROM t").fetchone()[0])
    finally:
        connection.close()


def test_success_commits(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    connection = _connect(path)
    connection.execute("BEGIN IMMEDIATE")
    with transaction(connection):
        connection.execute("INSERT INTO t VALUES (1)")
    connection.close()
    assert _count(path) == 1


def _fail_inside(path: Path, *, break_rollback: bool) -> tuple[BaseException, bool]:
    """Insert a row, raise inside :func:`transaction`; return what escaped and the open state."""
    connection = _connect(path)
    connection.execute("BEGIN IMMEDIATE")
    marker = LookupError("block")

    def failing_block() -> None:
        with transaction(connection):
            connection.execute("INSERT INTO t VALUES (1)")
            if break_rollback:
                connection.close()  # the rollback now fails: the target state is unknown
            raise marker

    with pytest.raises(BaseException) as caught:
        failing_block()
    still_open = False if break_rollback else connection.in_transaction
    connection.close()
    assert (caught.value is marker) is not break_rollback
    return caught.value, still_open


def test_failure_rolls_back_and_raises_the_same_error(tmp_path: Path) -> None:
    escaped, still_open = _fail_inside(tmp_path / "db.sqlite", break_rollback=False)
    assert isinstance(escaped, LookupError)
    assert not still_open
    assert _count(tmp_path / "db.sqlite") == 0


def test_a_failed_rollback_is_its_own_error_without_the_driver_message(tmp_path: Path) -> None:
    escaped, _ = _fail_inside(tmp_path / "db.sqlite", break_rollback=True)
    assert type(escaped) is RollbackFailedError
    assert str(escaped) == ""
    assert escaped.__cause__ is None
    assert escaped.__suppress_context__
    assert _count(tmp_path / "db.sqlite") == 0  # closing discarded the open transaction


def test_roll_back_reports_whether_it_rolled_back_and_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    connection = _connect(path)
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO t VALUES (1)")
    assert roll_back(connection) is True
    assert not connection.in_transaction
    connection.close()
    assert _count(path) == 0
    # a closed connection cannot roll back: False, the driver's error dropped
    assert roll_back(connection) is False
