"""A durable feedback ledger kept in the session store's own database.

:class:`DurableBudgetLedger` is a :class:`~sealeval.session.session.BudgetLedger`
whose budget policies, per-pair usage and per-claim decisions live in the same
database as the sessions (a :class:`~sealeval.session.store.SQLiteSessionStore`
file or a :class:`~sealeval.session.postgres_store.PostgresSessionStore`
database), so that a restart, a second host or a crash can neither reset usage
nor release feedback twice. It reuses the pure core of
:mod:`sealeval.session.budget` (:func:`~sealeval.session.budget.decide_official_attempt`,
:func:`~sealeval.session.budget.decide_failure_approval`,
:func:`~sealeval.session.budget.budget_snapshot`), so its answers are the
in-memory ledger's.

Tables (all ``TEXT``, created when absent, verified on every open)::

    CREATE TABLE ledger_policies (epoch_digest TEXT PRIMARY KEY, policy TEXT NOT NULL)
    CREATE TABLE ledger_usage (epoch_digest TEXT NOT NULL, submission_digest TEXT NOT NULL,
        usage TEXT NOT NULL, PRIMARY KEY (epoch_digest, submission_digest))
    CREATE TABLE ledger_approvals (approval_digest TEXT PRIMARY KEY,
        epoch_digest TEXT NOT NULL, submission_digest TEXT NOT NULL)
    CREATE TABLE ledger_decisions (session_key TEXT PRIMARY KEY, budget_key TEXT NOT NULL,
        watermark TEXT NOT NULL, phase TEXT NOT NULL, decision TEXT NOT NULL)

``policy`` and ``usage`` hold canonical ``openmed.eval.feedback_budget_policy.v1``
and ``sealeval.feedback_budget_usage.v1`` documents; a decision row holds the
claiming session key, the budget key, the watermark the claim was made
against, the terminal phase (``released`` / ``budget_denied``) and the
*digest* of the decision document (the digest the session's terminal step
carries), never a score.

**The claim is the unit of charge.** The session's release flow is unchanged
(claim the budget key in the store, record the attempt, finish). The ledger's
:meth:`DurableBudgetLedger.record_official_attempt` runs in one transaction
that locks the budget row, verifies that it is claimed, that the claim has no
decision yet, that the claiming session's record stands at
``release_claimed`` with the digest of the current usage snapshot and that
the row's watermark is the watermark of the current policy and usage; only
then does it run the pure core, write the new usage and insert the claim's
decision row. Usage therefore changes only by consuming a claim, at most once
per claim, and a crash leaves every session in one of four unambiguous states:

* claim not committed — nothing happened (the session replays and releases);
* claim committed, no decision row — locked, *not* charged (feedback lost);
* decision row committed, claim still held — locked, charged (feedback lost);
* claim released — finished (the terminal step carries the decision digest).

Errors: lookups and the core raise :class:`~sealeval.session.budget.FeedbackBudgetError`
exactly as :class:`~sealeval.session.budget.FeedbackBudgetLedger` does
(``epoch_digest: invalid_digest``, ``epoch_digest: unknown``, ...); the
database raises :class:`~sealeval.session.record.EvaluationSessionError` with
``store_failed`` (I/O, foreign schema), ``budget_state_unverified`` (no claim,
a claim already decided, a claim or watermark that does not match the stored
usage, a stored policy that differs from the one supplied, a stored row that
does not parse) or ``invalid_configuration`` (not a supported store). Nothing
submitted or stored is ever quoted.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, Protocol, TypeVar

from sealeval.canonical import digest_openmed, is_digest
from sealeval.session.budget import (
    FailureApproval,
    FeedbackBudgetDecision,
    FeedbackBudgetError,
    FeedbackBudgetLedger,
    FeedbackBudgetPolicy,
    FeedbackBudgetSnapshot,
    LedgerUsage,
    SubmissionUsage,
    budget_snapshot,
    decide_failure_approval,
    decide_official_attempt,
    record_official_attempt,
)
from sealeval.session.postgres_store import (
    PostgresSessionStore,
    SqlCursor,
    TableSpec,
    ensure_tables,
)
from sealeval.session.record import TERMINAL_PHASES, EvaluationSessionError, SessionRecord
from sealeval.session.session import budget_key, budget_watermark
from sealeval.session.store import CLAIM_STEPS, SessionStore, SQLiteSessionStore
from sealeval.session.transaction import run_sqlite_transaction

__all__ = [
    "AUDIT_PROBLEMS",
    "BUDGET_STATES",
    "LEDGER_TABLES",
    "SESSION_STATES",
    "BudgetStatus",
    "DurableBudgetLedger",
    "LedgerAudit",
    "SQLiteCursor",
    "read_ledger_usage",
]

_T = TypeVar("_T")

#: The ledger's tables, created next to ``sessions`` and ``budgets``.
LEDGER_TABLES: Final = (
    TableSpec("ledger_policies", (("epoch_digest", True), ("policy", True)), ("epoch_digest",)),
    TableSpec(
        "ledger_usage",
        (("epoch_digest", True), ("submission_digest", True), ("usage", True)),
        ("epoch_digest", "submission_digest"),
    ),
    TableSpec(
        "ledger_approvals",
        (("approval_digest", True), ("epoch_digest", True), ("submission_digest", True)),
        ("approval_digest",),
    ),
    TableSpec(
        "ledger_decisions",
        (
            ("session_key", True),
            ("budget_key", True),
            ("watermark", True),
            ("phase", True),
            ("decision", True),
        ),
        ("session_key",),
    ),
)
#: States of a budget key (:attr:`BudgetStatus.state`).
BUDGET_STATES: Final = ("unused", "open", "locked", "unverified")
#: States of a session in an audit (:attr:`LedgerAudit.sessions`).
SESSION_STATES: Final = (
    "in_progress",
    "locked_undecided",
    "locked_decided",
    "released",
    "budget_denied",
)
#: Problem codes of an audit (:attr:`LedgerAudit.problems`).
AUDIT_PROBLEMS: Final = (
    "claim_dangling",
    "claim_missing",
    "decision_mismatch",
    "decision_missing",
    "decision_orphaned",
    "record_invalid",
    "row_invalid",
    "usage_mismatch",
    "watermark_mismatch",
)
_EMPTY_USAGE: Final = SubmissionUsage()


def _fail(code: str) -> NoReturn:
    raise EvaluationSessionError(code)


def _unverified() -> NoReturn:
    raise EvaluationSessionError("budget_state_unverified")


# ---------------------------------------------------------------------------
# Back ends: one transaction on the store's database


class _Backend(Protocol):
    def run(self, operation: Callable[[SqlCursor], _T]) -> _T: ...

    def ensure_schema(self, cursor: SqlCursor) -> None: ...


class _PostgresBackend:
    __slots__ = ("_store",)

    def __init__(self, store: PostgresSessionStore) -> None:
        self._store = store

    def run(self, operation: Callable[[SqlCursor], _T]) -> _T:
        return self._store.run_transaction(operation)

    def ensure_schema(self, cursor: SqlCursor) -> None:
        ensure_tables(cursor, LEDGER_TABLES)


class SQLiteCursor:
    """:class:`~sealeval.session.postgres_store.SqlCursor` over a SQLite connection.

    ``FOR UPDATE`` is dropped: a SQLite transaction already holds the whole
    database's lock.
    """

    __slots__ = ("_connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Wrap an open connection (its transaction is the caller's)."""
        self._connection = connection

    def _run(self, statement: str, parameters: Sequence[object]) -> sqlite3.Cursor:
        return self._connection.execute(statement.replace(" FOR UPDATE", ""), tuple(parameters))

    def execute(self, statement: str, parameters: Sequence[object] = ()) -> int:
        """Run a statement; return the number of rows it changed."""
        return self._run(statement, parameters).rowcount

    def fetchone(self, statement: str, parameters: Sequence[object] = ()) -> tuple[Any, ...] | None:
        """Run a query; return its first row or ``None``."""
        row: tuple[Any, ...] | None = self._run(statement, parameters).fetchone()
        return row

    def fetchall(self, statement: str, parameters: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run a query; return every row."""
        rows: list[tuple[Any, ...]] = self._run(statement, parameters).fetchall()
        return rows


class _SQLiteBackend:
    """Transactions on the SQLite store's file, exactly as the store runs its own."""

    __slots__ = ("_path", "_timeout")

    def __init__(self, path: str, timeout: float) -> None:
        self._path = path
        self._timeout = timeout

    def run(self, operation: Callable[[SqlCursor], _T]) -> _T:
        return run_sqlite_transaction(
            self._path, self._timeout, lambda connection: operation(SQLiteCursor(connection))
        )

    def ensure_schema(self, cursor: SqlCursor) -> None:
        expected = {spec.name: spec.ddl() for spec in LEDGER_TABLES}
        for statement in expected.values():
            cursor.execute(statement.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
        names = ", ".join("?" for _ in expected)
        rows = cursor.fetchall(
            f"SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ({names})",  # noqa: S608 - placeholders only
            tuple(expected),
        )
        tables = {name: sql for kind, name, sql in rows if kind == "table"}
        others = [kind for kind, _name, _sql in rows if kind not in ("table", "index")]
        if tables != expected or others:
            _fail("store_failed")


def _backend_for(store: object) -> _Backend:
    if isinstance(store, PostgresSessionStore):
        return _PostgresBackend(store)
    if isinstance(store, SQLiteSessionStore):
        return _SQLiteBackend(store.path, store.timeout)
    _fail("invalid_configuration")


# ---------------------------------------------------------------------------
# Result documents


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """The durable state of one budget key (content-free: digests and counts).

    Attributes:
        budget_key: sha256 of canonical ``[epoch digest, submission digest]``.
        state: ``unused`` (no budget row yet), ``open`` (unclaimed, and its
            watermark is the watermark of the stored policy and usage),
            ``locked`` (claimed: a release is in flight or crashed) or
            ``unverified`` (unclaimed, but the watermark does not match the
            stored usage: the database was partially restored or written by
            another ledger; every claim is refused).
        claim: the session key holding the claim, or ``None``.
        claim_decided: whether that claim already has its decision row
            (``True``: charged; ``False``: not charged).
        released: decisions recorded as ``released`` on this budget key.
        denied: decisions recorded as ``budget_denied``.
        snapshot: the usage snapshot of the pair.
    """

    budget_key: str
    state: str
    claim: str | None
    claim_decided: bool
    released: int
    denied: int
    snapshot: FeedbackBudgetSnapshot

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain document."""
        return {
            "budget_key": self.budget_key,
            "claim": self.claim,
            "claim_decided": self.claim_decided,
            "denied": self.denied,
            "released": self.released,
            "snapshot": self.snapshot.to_dict(),
            "state": self.state,
        }


@dataclass(frozen=True, slots=True)
class LedgerAudit:
    """A consistent cross-check of sessions, budget rows, decisions and usage.

    Attributes:
        sessions: count of sessions per state of :data:`SESSION_STATES`:
            ``in_progress`` (at most four steps), ``locked_undecided`` /
            ``locked_decided`` (claimed, without / with a decision row),
            ``released`` and ``budget_denied`` (finished).
        problems: sorted ``(problem code, digest)`` pairs; empty when every
            claim is unambiguously released or locked. Codes
            (:data:`AUDIT_PROBLEMS`): ``claim_missing`` (a claimed session
            holds no budget row), ``claim_dangling`` (a budget row claimed by
            a session that is not at ``release_claimed``),
            ``decision_missing`` (a finished session without a decision row),
            ``decision_mismatch`` (the terminal step differs from its decision
            row), ``decision_orphaned`` (a decision row without a claimed or
            finished session), ``usage_mismatch`` (a pair's official attempts
            differ from its released decisions), ``watermark_mismatch`` (a
            budget row's watermark differs from the stored usage),
            ``record_invalid`` / ``row_invalid`` (a stored row that does not
            parse).
    """

    sessions: Mapping[str, int]
    problems: tuple[tuple[str, str], ...] = field(default=())

    @property
    def consistent(self) -> bool:
        """Whether the audit found no problem."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain document."""
        return {
            "consistent": self.consistent,
            "problems": [list(problem) for problem in self.problems],
            "sessions": dict(self.sessions),
        }


# ---------------------------------------------------------------------------
# Row parsing (every stored row is re-checked; a row that does not verify is
# an unverifiable budget state, never a crash or a quoted value)


def _stored_policy(text: object, epoch: str) -> FeedbackBudgetPolicy:
    policy: FeedbackBudgetPolicy | None
    try:
        policy = FeedbackBudgetPolicy.from_json(text)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - any parse failure is the same refusal
        policy = None
    if policy is None or policy.epoch_digest != epoch or policy.to_json() != text:
        _unverified()
    return policy


def _stored_usage(text: object) -> SubmissionUsage:
    usage: SubmissionUsage | None
    try:
        usage = SubmissionUsage.from_json(text)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - any parse failure is the same refusal
        usage = None
    if usage is None or usage.to_json() != text:
        _unverified()
    return usage


def _checked_snapshot(
    policy: FeedbackBudgetPolicy, usage: SubmissionUsage
) -> FeedbackBudgetSnapshot:
    """Return the snapshot; stored usage its policy could not produce is unverifiable."""
    snapshot: FeedbackBudgetSnapshot | None
    try:
        snapshot = budget_snapshot(policy, usage)
    except FeedbackBudgetError:
        snapshot = None
    if snapshot is None:
        _unverified()
    return snapshot


def _digest_argument(value: object, field_name: str) -> str:
    if not is_digest(value):
        raise FeedbackBudgetError("invalid_digest", field_name)
    return value  # type: ignore[return-value]


class _UsedApprovals:
    """``Container[str]`` of the approval digests used anywhere in the ledger (a query)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: SqlCursor) -> None:
        self._cursor = cursor

    def __contains__(self, approval: object) -> bool:
        row = self._cursor.fetchone(
            "SELECT 1 FROM ledger_approvals WHERE approval_digest = ?", (approval,)
        )
        return row is not None


# ---------------------------------------------------------------------------
# The ledger


class DurableBudgetLedger:
    """A :class:`~sealeval.session.session.BudgetLedger` stored with the sessions.

    Pass the *same* store object to the session: the ledger works on that
    store's database (for SQLite the same file, for PostgreSQL the same
    connection pool), creating its four tables when absent.

    Args:
        store: a :class:`~sealeval.session.store.SQLiteSessionStore` or a
            :class:`~sealeval.session.postgres_store.PostgresSessionStore`.
        policies: the budget policies to install (a non-empty sequence with
            distinct epochs, validated as for
            :class:`~sealeval.session.budget.FeedbackBudgetLedger`). A policy
            whose epoch is already stored must be identical to the stored one.
            ``None`` uses the stored policies (at least one must exist).

    Raises:
        FeedbackBudgetError: ``policies: invalid_sequence | invalid_policy |
            duplicate_epoch | empty``.
        EvaluationSessionError: ``invalid_configuration`` (not a supported
            store), ``budget_state_unverified`` (a supplied policy differs
            from the stored one, or a stored policy does not verify),
            ``store_failed`` (I/O, foreign ledger tables).
    """

    __slots__ = ("_backend",)

    def __init__(self, store: SessionStore, policies: object = None) -> None:
        """Open the ledger tables in ``store``'s database and install ``policies``."""
        self._backend = _backend_for(store)
        supplied = None if policies is None else FeedbackBudgetLedger(policies).policies

        def install(cursor: SqlCursor) -> None:
            self._backend.ensure_schema(cursor)
            for policy in supplied or ():
                text = policy.to_json()
                cursor.execute(
                    "INSERT INTO ledger_policies (epoch_digest, policy) VALUES (?, ?) "
                    "ON CONFLICT (epoch_digest) DO NOTHING",
                    (policy.epoch_digest, text),
                )
                row = cursor.fetchone(
                    "SELECT policy FROM ledger_policies WHERE epoch_digest = ?",
                    (policy.epoch_digest,),
                )
                if row is None or row[0] != text:
                    _unverified()
            if not self._policies(cursor):
                raise FeedbackBudgetError("empty", "policies")

        self._backend.run(install)

    def __repr__(self) -> str:
        """Show nothing of the store's location."""
        return "DurableBudgetLedger(<store>)"

    # -- lookups -----------------------------------------------------------------

    @staticmethod
    def _policies(cursor: SqlCursor) -> tuple[FeedbackBudgetPolicy, ...]:
        rows = cursor.fetchall(
            "SELECT epoch_digest, policy FROM ledger_policies ORDER BY epoch_digest"
        )
        return tuple(_stored_policy(text, epoch) for epoch, text in rows)

    @staticmethod
    def _policy(cursor: SqlCursor, epoch: str) -> FeedbackBudgetPolicy:
        row = cursor.fetchone("SELECT policy FROM ledger_policies WHERE epoch_digest = ?", (epoch,))
        if row is None:
            raise FeedbackBudgetError("unknown", "epoch_digest")
        return _stored_policy(row[0], epoch)

    @staticmethod
    def _usage(
        cursor: SqlCursor, epoch: str, submission: str, *, lock: bool = False
    ) -> SubmissionUsage:
        statement = (
            "SELECT usage FROM ledger_usage WHERE epoch_digest = ? AND submission_digest = ?"
        )
        row = cursor.fetchone(statement + " FOR UPDATE" if lock else statement, (epoch, submission))
        return _EMPTY_USAGE if row is None else _stored_usage(row[0])

    @staticmethod
    def _locked_budget(cursor: SqlCursor, key: str) -> tuple[Any, ...] | None:
        return cursor.fetchone(
            "SELECT watermark, claim FROM budgets WHERE budget_key = ? FOR UPDATE", (key,)
        )

    @staticmethod
    def _write_usage(
        cursor: SqlCursor, epoch: str, submission: str, usage: SubmissionUsage
    ) -> None:
        cursor.execute(
            "INSERT INTO ledger_usage (epoch_digest, submission_digest, usage) VALUES (?, ?, ?) "
            "ON CONFLICT (epoch_digest, submission_digest) DO UPDATE SET usage = excluded.usage",
            (epoch, submission, usage.to_json()),
        )

    @staticmethod
    def _pair(epoch_digest: object, submission_digest: object) -> tuple[str, str]:
        return (
            _digest_argument(epoch_digest, "epoch_digest"),
            _digest_argument(submission_digest, "submission_digest"),
        )

    @property
    def policies(self) -> tuple[FeedbackBudgetPolicy, ...]:
        """Return the stored policies, ordered by epoch digest."""
        return self._backend.run(self._policies)

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        """Return the stored policy of an epoch.

        Raises:
            FeedbackBudgetError: ``epoch_digest: invalid_digest`` or
                ``epoch_digest: unknown``.
        """
        epoch = _digest_argument(epoch_digest, "epoch_digest")
        return self._backend.run(lambda cursor: self._policy(cursor, epoch))

    def usage(self, epoch_digest: object, submission_digest: object) -> SubmissionUsage:
        """Return a pair's stored usage (all zero for an unknown submission)."""
        epoch, submission = self._pair(epoch_digest, submission_digest)

        def operation(cursor: SqlCursor) -> SubmissionUsage:
            policy = self._policy(cursor, epoch)
            usage = self._usage(cursor, epoch, submission)
            _checked_snapshot(policy, usage)
            return usage

        return self._backend.run(operation)

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        """Return the snapshot document of a pair (what the session's watermark hashes).

        Raises:
            FeedbackBudgetError: ``epoch_digest: invalid_digest``,
                ``submission_digest: invalid_digest``, ``epoch_digest: unknown``.
        """
        epoch, submission = self._pair(epoch_digest, submission_digest)

        def operation(cursor: SqlCursor) -> FeedbackBudgetSnapshot:
            policy = self._policy(cursor, epoch)
            return _checked_snapshot(policy, self._usage(cursor, epoch, submission))

        return self._backend.run(operation)

    def export_usage(self) -> LedgerUsage:
        """Return every pair's stored usage as one ``LedgerUsage`` (for anchors and backups)."""
        return self._backend.run(read_ledger_usage)

    # -- writes ------------------------------------------------------------------

    def record_official_attempt(
        self,
        epoch_digest: object,
        submission_digest: object,
        *,
        score: object = None,
        infrastructure_failure_digest: object = None,
    ) -> FeedbackBudgetDecision:
        """Consume the budget key's release claim: decide one official attempt and store it.

        In one transaction: the budget row of ``budget_key(epoch,
        submission)`` is locked and must be claimed, the claim must have no
        decision yet, the claiming session must stand at ``release_claimed``
        with the digest of the current snapshot, and the row's watermark must
        be the watermark of the current policy and usage. Then the pure core
        decides, the new usage (when accepted) and the claim's decision row
        are written, and the transaction commits.

        Raises:
            FeedbackBudgetError: ``epoch_digest: invalid_digest``,
                ``submission_digest: invalid_digest``, ``epoch_digest:
                unknown``, then the request refusals of
                :func:`~sealeval.session.budget.decide_official_attempt`
                (``attempt_outcome: require_exactly_one``, ``score: invalid``,
                ``infrastructure_failure_digest: invalid_digest``), then
                ``infrastructure_failure_digest: already_recorded``.
            EvaluationSessionError: ``budget_state_unverified`` when the
                budget key is not claimed, the claim is already decided, or
                the claim or watermark does not match the stored usage;
                ``store_failed``.
        """
        epoch, submission = self._pair(epoch_digest, submission_digest)
        key = budget_key(epoch, submission)

        def operation(cursor: SqlCursor) -> FeedbackBudgetDecision:
            policy = self._policy(cursor, epoch)
            # Validate the request with the core itself before looking at any state.
            decide_official_attempt(
                policy,
                _EMPTY_USAGE,
                score=score,
                infrastructure_failure_digest=infrastructure_failure_digest,
            )
            budget = self._locked_budget(cursor, key)
            if budget is None or budget[1] is None:
                _unverified()
            watermark, claim = budget
            decided = cursor.fetchone(
                "SELECT 1 FROM ledger_decisions WHERE session_key = ?", (claim,)
            )
            claimant = cursor.fetchone(
                "SELECT record FROM sessions WHERE session_key = ?", (claim,)
            )
            if decided is not None or claimant is None:
                _unverified()
            record = self._claimed_record(claimant[0], claim)
            usage = self._usage(cursor, epoch, submission, lock=True)
            snapshot = _checked_snapshot(policy, usage)
            if (
                watermark != budget_watermark(policy, snapshot)
                or record.steps[-1].digest != snapshot.digest()
            ):
                _unverified()
            decision = record_official_attempt(
                policy,
                usage,
                score=score,
                infrastructure_failure_digest=infrastructure_failure_digest,
                write=lambda new_usage: self._write_usage(cursor, epoch, submission, new_usage),
            )
            cursor.execute(
                "INSERT INTO ledger_decisions "
                "(session_key, budget_key, watermark, phase, decision) VALUES (?, ?, ?, ?, ?)",
                (
                    claim,
                    key,
                    watermark,
                    TERMINAL_PHASES[0] if decision.accepted else TERMINAL_PHASES[1],
                    digest_openmed(decision.to_dict()),
                ),
            )
            return decision

        return self._backend.run(operation)

    @staticmethod
    def _claimed_record(text: object, claim: str) -> SessionRecord:
        record: SessionRecord | None
        try:
            record = SessionRecord.from_json(text)  # type: ignore[arg-type]
        except EvaluationSessionError:
            record = None
        if record is None or record.session_key != claim or len(record.steps) != CLAIM_STEPS:
            _unverified()
        return record

    def approve_infrastructure_failure(
        self,
        epoch_digest: object,
        submission_digest: object,
        failure_digest: object,
        operator_approval_digest: object,
    ) -> FailureApproval:
        """Approve a recorded infrastructure failure and re-stamp the budget row's watermark.

        In one transaction: when the budget key has a row, it must be
        unclaimed and its watermark must be that of the current usage; the
        pure core approves; the usage, the approval digest (unique across the
        whole ledger) and the budget row's new watermark are written, so
        sessions can go on claiming the budget key.

        Raises:
            FeedbackBudgetError: lookup errors, ``failure_digest:
                invalid_digest``, ``operator_approval_digest:
                invalid_digest``, then ``failure_digest: not_recorded |
                already_approved`` and ``operator_approval_digest:
                already_used``.
            EvaluationSessionError: ``budget_state_unverified`` (claimed or
                unverifiable budget row), ``store_failed``.
        """
        epoch, submission = self._pair(epoch_digest, submission_digest)
        key = budget_key(epoch, submission)

        def operation(cursor: SqlCursor) -> FailureApproval:
            policy = self._policy(cursor, epoch)
            _digest_argument(failure_digest, "failure_digest")
            approval_digest = _digest_argument(operator_approval_digest, "operator_approval_digest")
            budget = self._locked_budget(cursor, key)
            if budget is None:
                # Create the budget row first, so that a concurrent claim serialises on it.
                current = _checked_snapshot(policy, self._usage(cursor, epoch, submission))
                cursor.execute(
                    "INSERT INTO budgets (budget_key, watermark, claim) VALUES (?, ?, NULL) "
                    "ON CONFLICT (budget_key) DO NOTHING",
                    (key, budget_watermark(policy, current)),
                )
                budget = self._locked_budget(cursor, key)
            usage = self._usage(cursor, epoch, submission, lock=True)
            snapshot = _checked_snapshot(policy, usage)
            if (
                budget is None
                or budget[1] is not None
                or budget[0] != budget_watermark(policy, snapshot)
            ):
                _unverified()
            approval, new_usage = decide_failure_approval(
                policy,
                usage,
                failure_digest=failure_digest,
                operator_approval_digest=approval_digest,
                used_approval_digests=_UsedApprovals(cursor),
            )
            inserted = cursor.execute(
                "INSERT INTO ledger_approvals (approval_digest, epoch_digest, submission_digest) "
                "VALUES (?, ?, ?) ON CONFLICT (approval_digest) DO NOTHING",
                (approval_digest, epoch, submission),
            )
            if inserted != 1:  # a concurrent approval used it first
                raise FeedbackBudgetError("already_used", "operator_approval_digest")
            self._write_usage(cursor, epoch, submission, new_usage)
            cursor.execute(
                "UPDATE budgets SET watermark = ? WHERE budget_key = ?",
                (budget_watermark(policy, budget_snapshot(policy, new_usage)), key),
            )
            return approval

        return self._backend.run(operation)

    # -- inspection ----------------------------------------------------------------

    def budget_status(self, epoch_digest: object, submission_digest: object) -> BudgetStatus:
        """Return the durable state of a pair's budget key (see :class:`BudgetStatus`)."""
        epoch, submission = self._pair(epoch_digest, submission_digest)
        key = budget_key(epoch, submission)

        def operation(cursor: SqlCursor) -> BudgetStatus:
            policy = self._policy(cursor, epoch)
            snapshot = _checked_snapshot(policy, self._usage(cursor, epoch, submission))
            budget = cursor.fetchone(
                "SELECT watermark, claim FROM budgets WHERE budget_key = ?", (key,)
            )
            phases = dict(
                cursor.fetchall(
                    "SELECT phase, count(*) FROM ledger_decisions WHERE budget_key = ? "
                    "GROUP BY phase",
                    (key,),
                )
            )
            claim: str | None = None
            decided = False
            if budget is None:
                state = "unused"
            elif budget[1] is not None:
                state, claim = "locked", budget[1]
                decided = (
                    cursor.fetchone(
                        "SELECT 1 FROM ledger_decisions WHERE session_key = ?", (claim,)
                    )
                    is not None
                )
            elif budget[0] == budget_watermark(policy, snapshot):
                state = "open"
            else:
                state = "unverified"
            return BudgetStatus(
                budget_key=key,
                state=state,
                claim=claim,
                claim_decided=decided,
                released=int(phases.get(TERMINAL_PHASES[0], 0)),
                denied=int(phases.get(TERMINAL_PHASES[1], 0)),
                snapshot=snapshot,
            )

        return self._backend.run(operation)

    def verify_not_behind(self, anchor: LedgerUsage) -> None:
        """Refuse a database whose usage is behind an anchor exported earlier.

        ``anchor`` is a :meth:`export_usage` result kept outside the database
        (write-once storage). Every anchored pair must still have at least
        its official, scored and detailed counts, its failure digests as a
        prefix and its approvals: usage only ever grows, so a database
        restored to an older state fails here.

        Raises:
            FeedbackBudgetError: ``usage: invalid_document`` (not a ``LedgerUsage``).
            EvaluationSessionError: ``budget_state_unverified`` (behind),
                ``store_failed``.
        """
        if not isinstance(anchor, LedgerUsage):
            raise FeedbackBudgetError("invalid_document", "usage")
        current = self.export_usage().entries
        for pair, old in anchor.entries.items():
            new = current.get(pair, _EMPTY_USAGE)
            failures = new.infrastructure_failure_digests
            if (
                new.official_attempts < old.official_attempts
                or new.scored_attempts < old.scored_attempts
                or new.detailed_feedback_used < old.detailed_feedback_used
                or failures[: len(old.infrastructure_failure_digests)]
                != old.infrastructure_failure_digests
                or not old.approved_failures.items() <= new.approved_failures.items()
            ):
                _unverified()

    def audit(self) -> LedgerAudit:
        """Cross-check every session, budget row, decision row and usage row (one snapshot).

        On PostgreSQL the audit reads in one ``REPEATABLE READ`` transaction;
        on SQLite under the database's write lock.
        """
        postgres = isinstance(self._backend, _PostgresBackend)
        return self._backend.run(lambda cursor: _audit(cursor, postgres=postgres))


def read_ledger_usage(cursor: SqlCursor) -> LedgerUsage:
    """Read every ``ledger_usage`` row of an open transaction as one ``LedgerUsage``.

    Raises:
        EvaluationSessionError: ``budget_state_unverified`` for a row that does
            not parse strictly or digests that are not digests, or approval
            digests shared by two pairs.
    """
    rows = cursor.fetchall(
        "SELECT epoch_digest, submission_digest, usage FROM ledger_usage "
        "ORDER BY epoch_digest, submission_digest"
    )
    entries = {(epoch, submission): _stored_usage(text) for epoch, submission, text in rows}
    exported: LedgerUsage | None
    try:
        exported = LedgerUsage(entries=entries)
    except FeedbackBudgetError:
        exported = None
    if exported is None:
        _unverified()
    return exported


# ---------------------------------------------------------------------------
# Audit


def _label(value: object, table: str) -> str:
    """Name a stored row in a problem: its digest key, else only its table (never its text)."""
    return value if is_digest(value) else table  # type: ignore[return-value]


def _parsed_records(
    rows: list[tuple[Any, ...]], problems: set[tuple[str, str]]
) -> dict[str, SessionRecord]:
    records: dict[str, SessionRecord] = {}
    for key, text in rows:
        try:
            record: SessionRecord | None = SessionRecord.from_json(text)
        except EvaluationSessionError:
            record = None
        if record is None or record.session_key != key:
            problems.add(("record_invalid", _label(key, "sessions")))
            continue
        records[key] = record
    return records


def _session_state(
    key: str,
    record: SessionRecord,
    decision: tuple[Any, ...] | None,
    claims: Container[str],
    problems: set[tuple[str, str]],
) -> str:
    """Classify one session and note what contradicts its decision row or claim."""
    steps = len(record.steps)
    if steps < CLAIM_STEPS:
        if decision is not None:
            problems.add(("decision_orphaned", key))
        return "in_progress"
    if steps == CLAIM_STEPS:
        if key not in claims:
            problems.add(("claim_missing", key))
        return "locked_decided" if decision is not None else "locked_undecided"
    terminal = record.steps[-1]
    if decision is None:
        problems.add(("decision_missing", key))
    elif (decision[2], decision[3]) != (terminal.phase, terminal.digest):
        problems.add(("decision_mismatch", key))
    return terminal.phase


def _audit(cursor: SqlCursor, *, postgres: bool) -> LedgerAudit:
    if postgres:  # SQLite's write lock already gives one consistent snapshot
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    problems: set[tuple[str, str]] = set()
    records = _parsed_records(cursor.fetchall("SELECT session_key, record FROM sessions"), problems)
    budgets = cursor.fetchall("SELECT budget_key, watermark, claim FROM budgets")
    decisions = {
        row[0]: row[1:]
        for row in cursor.fetchall(
            "SELECT session_key, budget_key, watermark, phase, decision FROM ledger_decisions"
        )
    }
    claims = {claim: key for key, _watermark, claim in budgets if claim is not None}
    counts = dict.fromkeys(SESSION_STATES, 0)
    for key, record in records.items():
        counts[_session_state(key, record, decisions.get(key), claims, problems)] += 1
    for claim, key in claims.items():
        claimant = records.get(claim)
        if claimant is None or len(claimant.steps) != CLAIM_STEPS:
            problems.add(("claim_dangling", key))
    problems.update(("decision_orphaned", key) for key in decisions if key not in records)
    expected = _audit_usage(cursor, decisions, problems)
    for key, watermark, claim in budgets:
        # A decided claim still holds the watermark it was made against; a
        # budget key without usage was never charged (nothing to compare).
        decided = decisions.get(claim)
        wanted = decided[1] if decided is not None else expected.get(key, watermark)
        if watermark != wanted:
            problems.add(("watermark_mismatch", key))
    return LedgerAudit(sessions=counts, problems=tuple(sorted(problems)))


def _audit_usage(
    cursor: SqlCursor,
    decisions: Mapping[str, tuple[Any, ...]],
    problems: set[tuple[str, str]],
) -> dict[str, str]:
    """Check every usage row against the released decisions; return budget key -> watermark."""
    released: dict[str, int] = {}
    for key, _watermark, phase, _digest in decisions.values():
        if phase == TERMINAL_PHASES[0]:
            released[key] = released.get(key, 0) + 1
    policies: dict[str, FeedbackBudgetPolicy] = {}
    for epoch, text in cursor.fetchall("SELECT epoch_digest, policy FROM ledger_policies"):
        with contextlib.suppress(EvaluationSessionError):
            policies[epoch] = _stored_policy(text, epoch)
    expected: dict[str, str] = {}
    for epoch, submission, text in cursor.fetchall(
        "SELECT epoch_digest, submission_digest, usage FROM ledger_usage"
    ):
        policy = policies.get(epoch)
        snapshot: FeedbackBudgetSnapshot | None = None
        if policy is not None and is_digest(submission):
            with contextlib.suppress(EvaluationSessionError):
                snapshot = _checked_snapshot(policy, _stored_usage(text))
        if policy is None or snapshot is None:
            problems.add(("row_invalid", _label(epoch, "ledger_usage")))
            continue
        key = budget_key(epoch, submission)
        expected[key] = budget_watermark(policy, snapshot)
        if snapshot.official_attempts != released.get(key, 0):
            problems.add(("usage_mismatch", key))
    problems.update(("usage_mismatch", key) for key in released if key not in expected)
    return expected
