"""The one home of ledger logic and store transactions.

``sealeval.session.budget.record_official_attempt`` is the single
implementation of recording an attempt (the in-memory and the durable ledger
delegate to it); ``sealeval.session.transaction`` holds the one SQLite
``BEGIN IMMEDIATE`` helper and the fresh-error rule every store follows.
"""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest

import sealeval
from sealeval.errors import CanonicalError, SealevalError
from sealeval.session.budget import (
    FeedbackBudgetError,
    FeedbackBudgetPolicy,
    SubmissionUsage,
    record_official_attempt,
)
from sealeval.session.record import EvaluationSessionError
from sealeval.session.transaction import (
    STORE_FAILED,
    failure_of,
    fresh_error,
    run_sqlite_transaction,
    sqlite_transaction,
)

CANARY = "CANARY-txn-4e1d"
EPOCH = "sha256:" + "e0" * 32
FAILURE = "sha256:" + "fa" * 32
PACKAGE = Path(sealeval.__file__).resolve().parent


def _policy(rerun_limit: int = 1) -> FeedbackBudgetPolicy:
    return FeedbackBudgetPolicy(
        epoch_digest=EPOCH,
        detailed_feedback_limit=1,
        rerun_limit=rerun_limit,
        coarse_score_boundaries=(0.5,),
    )


# ---------------------------------------------------------------------------
# record_official_attempt


def test_an_accepted_attempt_is_written_once() -> None:
    written: list[SubmissionUsage] = []
    decision = record_official_attempt(
        _policy(), SubmissionUsage(), score=0.75, write=written.append
    )
    assert decision.accepted
    assert [usage.official_attempts for usage in written] == [1]
    assert written[0].scored_attempts == 1


def test_a_denied_attempt_writes_nothing() -> None:
    written: list[SubmissionUsage] = []
    policy = _policy(rerun_limit=0)
    first = record_official_attempt(policy, SubmissionUsage(), score=0.5, write=written.append)
    assert first.accepted
    denied = record_official_attempt(policy, written[0], score=0.5, write=written.append)
    assert not denied.accepted
    assert denied.reason_code == "rerun_budget_exhausted"
    assert len(written) == 1


@pytest.mark.parametrize(
    ("request_fields", "code", "field"),
    [
        pytest.param({}, "require_exactly_one", "attempt_outcome", id="no-outcome"),
        pytest.param(
            {"score": 0.5, "infrastructure_failure_digest": FAILURE},
            "require_exactly_one",
            "attempt_outcome",
            id="both-outcomes",
        ),
        pytest.param({"score": 1.5}, "invalid", "score", id="score-out-of-range"),
        pytest.param(
            {"infrastructure_failure_digest": CANARY},
            "invalid_digest",
            "infrastructure_failure_digest",
            id="failure-not-a-digest",
        ),
    ],
)
def test_a_refused_request_writes_nothing(
    request_fields: dict[str, object], code: str, field: str
) -> None:
    written: list[SubmissionUsage] = []
    with pytest.raises(FeedbackBudgetError) as raised:
        record_official_attempt(
            _policy(),
            SubmissionUsage(),
            write=written.append,
            **request_fields,  # type: ignore[arg-type]
        )
    assert (raised.value.code, raised.value.field) == (code, field)
    assert CANARY not in str(raised.value)
    assert written == []


def _decide_calls(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "decide_official_attempt"
    )


def test_one_module_decides_and_writes_attempts() -> None:
    """Outside the budget core, a ledger only validates a request with the core."""
    budget_files = sorted((PACKAGE / "session").rglob("*.py"))
    callers = {path.name: _decide_calls(path) for path in budget_files if _decide_calls(path)}
    # The budget core's record_official_attempt, and the durable ledger's
    # request pre-check (against empty usage, nothing written).
    assert set(callers) <= {"core.py", "budget.py", "durable_ledger.py"}
    assert callers.get("durable_ledger.py", 0) <= 1


# ---------------------------------------------------------------------------
# the SQLite transaction helper


def _table(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (v TEXT)")


def _rows(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("SELECT v FROM t")]
    finally:
        connection.close()


def test_a_transaction_commits_on_success(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    _table(path)
    result = run_sqlite_transaction(
        str(path), 1.0, lambda c: c.execute("INSERT INTO t VALUES ('a')").rowcount
    )
    assert result == 1
    assert _rows(path) == ["a"]


def test_a_transaction_rolls_back_and_raises_fresh(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    _table(path)

    def operation(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO t VALUES ('a')")
        raise EvaluationSessionError("record_conflict")

    with pytest.raises(EvaluationSessionError) as raised:
        run_sqlite_transaction(str(path), 1.0, operation)
    assert raised.value.code == "record_conflict"
    assert raised.value.__cause__ is None
    assert raised.value.__context__ is None
    assert _rows(path) == []


def test_a_database_failure_becomes_store_failed_without_the_path(tmp_path: Path) -> None:
    path = tmp_path / CANARY / "db.sqlite3"  # the folder does not exist: sqlite3 fails
    with pytest.raises(EvaluationSessionError) as raised:
        run_sqlite_transaction(str(path), 1.0, lambda _c: None)
    assert raised.value.code == "store_failed"
    assert CANARY not in str(raised.value)
    assert raised.value.__cause__ is None
    assert raised.value.__context__ is None


def test_only_the_passed_families_keep_their_code(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    _table(path)

    def operation(_connection: sqlite3.Connection) -> None:
        raise CanonicalError("invalid_json")

    with pytest.raises(CanonicalError):
        run_sqlite_transaction(str(path), 1.0, operation)
    with pytest.raises(EvaluationSessionError) as raised:
        run_sqlite_transaction(str(path), 1.0, operation, passes=EvaluationSessionError)
    assert raised.value.code == "store_failed"


def test_the_transaction_holds_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    _table(path)
    with sqlite_transaction(str(path), 1.0) as connection:
        connection.execute("INSERT INTO t VALUES ('a')")
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            with pytest.raises(sqlite3.OperationalError):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
    assert _rows(path) == ["a"]


def test_failure_of_and_fresh_error() -> None:
    error = FeedbackBudgetError("invalid", "score")
    failure = failure_of(error)
    assert failure == (FeedbackBudgetError, "invalid", "score")
    again = fresh_error(failure)
    assert type(again) is FeedbackBudgetError
    assert (again.code, again.field) == ("invalid", "score")
    assert again is not error
    assert failure_of(OSError(CANARY)) == STORE_FAILED
    assert failure_of(error, passes=EvaluationSessionError) == STORE_FAILED
    assert isinstance(fresh_error(STORE_FAILED), SealevalError)


def _begins(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.Constant)
        and node.value in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")
        for node in ast.walk(tree)
    )


def test_no_store_opens_a_transaction_by_hand() -> None:
    """Only the transaction module (and the OMOP loader's injected connection) begin or commit."""
    openers = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.parent.name != "omop" and _begins(path)
    )
    assert openers == ["session/transaction.py"]
