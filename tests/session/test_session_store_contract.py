"""One contract suite for every session store: SQLite and PostgreSQL, with both ledgers.

Every test taking the ``backend`` fixture runs twice, once on a SQLite file and
once on a real PostgreSQL server (``tests/support/postgres.py``; each PostgreSQL test
gets its own schema through ``search_path``). Stores are opened through
:func:`open_session_store`, exactly as the CLI opens them. Backend-specific
tests (DSN hygiene, pooling, retries, fork safety, SQLite path rules) follow
the contract.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import pickle
import secrets
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jsonschema import Draft202012Validator
from psycopg import sql
from referencing import Registry, Resource

from sealeval.canonical import digest_openmed
from sealeval.session import durable_ledger as durable_module
from sealeval.session import postgres_store as postgres_module
from sealeval.session.budget import (
    FeedbackBudgetError,
    FeedbackBudgetLedger,
    FeedbackBudgetPolicy,
    LedgerUsage,
    SubmissionUsage,
)
from sealeval.session.durable_ledger import (
    AUDIT_PROBLEMS,
    BUDGET_STATES,
    LEDGER_TABLES,
    SESSION_STATES,
    DurableBudgetLedger,
)
from sealeval.session.postgres_store import STORE_TABLES, PostgresSessionStore
from sealeval.session.record import EvaluationSessionError, SessionRecord, SessionStep
from sealeval.session.session import BudgetLedger, budget_key, budget_watermark
from sealeval.session.store import SCHEMA, SessionStore, SQLiteSessionStore
from sealeval.session.store_factory import (
    BudgetRow,
    is_postgres_location,
    open_budget_ledger,
    open_session_store,
    read_session_store,
)
from support.postgres import fresh_database
from support.refusals import CANARY
from support.session_store import (
    BINDING,
    BUDGET,
    MARK_A,
    MARK_B,
    advance_to,
    pg_uri,
    record_chain,
    store_code,
    store_error,
)
from support.session_world import (
    Clock,
    Providers,
    World,
    digest_of,
    make_ledger,
    make_world,
    open_session,
    session_key,
)
from support.vectors import PROJECT_ROOT

KEY = session_key("contract")
CONTRACTS = PROJECT_ROOT / "contracts"


# ---------------------------------------------------------------------------
# Back ends


@dataclass
class Backend:
    """One store back end under test, with raw access to its rows."""

    kind: str
    location: str
    connect: Callable[[], Any]
    dsn: str = ""
    schema: str = ""
    opened: list[Any] = field(default_factory=list)

    def store(self, **kwargs: Any) -> SessionStore:
        store = open_session_store(self.location, **kwargs)
        self.opened.append(store)
        return store

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.kind == "postgres" else statement

    def rows(self, statement: str, *args: object) -> list[tuple[Any, ...]]:
        connection = self.connect()
        try:
            return [tuple(row) for row in connection.execute(self._sql(statement), args).fetchall()]
        finally:
            connection.close()

    def execute(self, statement: str, *args: object) -> None:
        connection = self.connect()
        try:
            connection.execute(self._sql(statement), args)
            connection.commit()
        finally:
            connection.close()

    def tables(self) -> list[str]:
        if self.kind == "sqlite":
            return [
                row[0] for row in self.rows("SELECT name FROM sqlite_master WHERE type='table'")
            ]
        return [
            row[0]
            for row in self.rows(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        ]

    def close(self) -> None:
        for store in self.opened:
            if isinstance(store, PostgresSessionStore):
                store.close()


@pytest.fixture(scope="module")
def contract_dsn(postgres_dsn: str) -> Iterator[str]:
    with fresh_database(postgres_dsn, "contract") as dsn:
        yield dsn


def _sqlite_backend(path: Path) -> Backend:
    return Backend("sqlite", str(path), lambda: sqlite3.connect(path))


def _postgres_backend(dsn: str) -> Backend:
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    return Backend(
        "postgres",
        pg_uri(dsn, schema=schema),
        lambda: psycopg.connect(dsn, options=f"-c search_path={schema}"),
        dsn=dsn,
        schema=schema,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        chosen = _sqlite_backend(tmp_path / "sessions.sqlite3")
    else:
        chosen = _postgres_backend(request.getfixturevalue("contract_dsn"))
    yield chosen
    chosen.close()


@pytest.fixture
def pg(contract_dsn: str) -> Iterator[Backend]:
    chosen = _postgres_backend(contract_dsn)
    yield chosen
    chosen.close()


# ---------------------------------------------------------------------------
# Helpers


def _budget_message(action: Callable[[], object]) -> str:
    return str(store_error(action, FeedbackBudgetError))


def _dump(backend: Backend, *tables: str) -> dict[str, list[tuple[Any, ...]]]:
    return {table: sorted(backend.rows(f"SELECT * FROM {table}")) for table in tables}


def _pair(world: World) -> tuple[str, str]:
    return world.holdout.commitment_digest, world.manifest.manifest_digest


def _run(world: World, store: SessionStore, label: object, ledger: object, **kwargs: Any) -> Any:
    """Run one full session; return its feedback document or its error code."""
    try:
        session = open_session(world, store, session_key(label), ledger=ledger, **kwargs)
        return session.run().to_dict()
    except EvaluationSessionError as error:
        return error.code


# ---------------------------------------------------------------------------
# Schema


def test_postgres_tables_are_the_sqlite_schema() -> None:
    assert {spec.name: spec.ddl() for spec in STORE_TABLES} == SCHEMA
    assert LEDGER_TABLES[1].ddl() == (
        "CREATE TABLE ledger_usage (epoch_digest TEXT NOT NULL, submission_digest TEXT NOT NULL, "
        "usage TEXT NOT NULL, PRIMARY KEY (epoch_digest, submission_digest))"
    )


def test_opening_creates_the_schema_and_reopening_changes_nothing(backend: Backend) -> None:
    store = backend.store()
    assert isinstance(store, SessionStore)
    assert sorted(backend.tables()) == ["budgets", "sessions"]
    world = make_world()
    DurableBudgetLedger(store, [world.policy])
    expected = sorted(["budgets", "sessions", *(spec.name for spec in LEDGER_TABLES)])
    assert sorted(backend.tables()) == expected
    if backend.kind == "sqlite":
        ddl = dict(backend.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        assert ddl == {spec.name: spec.ddl() for spec in (*STORE_TABLES, *LEDGER_TABLES)}
    before = _dump(backend, *expected)
    DurableBudgetLedger(backend.store(), None)
    assert _dump(backend, *expected) == before


_FOREIGN = {
    "extra_column": (
        "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT NOT NULL, x TEXT)"
    ),
    "nullable": "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT)",
    "no_primary_key": "CREATE TABLE sessions (session_key TEXT NOT NULL, record TEXT NOT NULL)",
    "view": "CREATE VIEW sessions AS SELECT 'a' AS session_key, 'b' AS record",
    "budgets": "CREATE TABLE budgets (budget_key TEXT PRIMARY KEY, watermark TEXT, claim TEXT)",
}


@pytest.mark.parametrize("name", sorted(_FOREIGN))
def test_foreign_schemas_are_refused(backend: Backend, name: str) -> None:
    backend.execute(_FOREIGN[name])
    assert store_code(backend.store) == "store_failed"


def test_postgres_refuses_foreign_types_triggers_rules_and_row_security(pg: Backend) -> None:
    pg.store()
    pg.execute(
        "CREATE FUNCTION leak() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$"
    )
    variants = [
        "ALTER TABLE sessions ALTER COLUMN record TYPE varchar(10000)",
        "CREATE TRIGGER leak BEFORE INSERT ON sessions FOR EACH ROW EXECUTE FUNCTION leak()",
        "CREATE RULE leak AS ON INSERT TO budgets DO ALSO NOTHING",
        "ALTER TABLE budgets ENABLE ROW LEVEL SECURITY",
    ]
    undo = [
        "ALTER TABLE sessions ALTER COLUMN record TYPE text",
        "DROP TRIGGER leak ON sessions",
        "DROP RULE leak ON budgets",
        "ALTER TABLE budgets DISABLE ROW LEVEL SECURITY",
    ]
    for change, revert in zip(variants, undo, strict=True):
        pg.execute(change)
        assert store_code(pg.store) == "store_failed", change
        pg.execute(revert)
        pg.store()


def test_foreign_ledger_tables_are_refused(backend: Backend) -> None:
    store = backend.store()
    backend.execute("CREATE TABLE ledger_usage (epoch_digest TEXT PRIMARY KEY, usage TEXT)")
    world = make_world()
    assert store_code(lambda: DurableBudgetLedger(store, [world.policy])) == "store_failed"


# ---------------------------------------------------------------------------
# load / save


def test_load_missing_and_present(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    assert store.load(KEY) is None
    store.save(records[0], None)
    assert store.load(KEY) == records[0]


@pytest.mark.parametrize("key", ["key", CANARY, None, KEY.upper(), b"sha256:" + b"0" * 64])
def test_load_refuses_non_digest_keys(backend: Backend, key: object) -> None:
    store = backend.store()
    assert store_code(lambda: store.load(key)) == "invalid_digest"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "stored",
    [
        "{",
        "",
        "null",
        '{"a":1}',
        record_chain(KEY)[2].to_json().replace("verified", "cases"),
        record_chain(KEY)[2].to_json()[:-1] + ',"steps":[]}',
        record_chain(session_key("other"))[2].to_json(),
        CANARY,
    ],
    ids=["not_json", "empty", "null", "other", "tampered", "repeated_key", "other_key", "canary"],
)
def test_load_refuses_invalid_stored_text(backend: Backend, stored: str) -> None:
    store = backend.store()
    backend.execute("INSERT INTO sessions (session_key, record) VALUES (?, ?)", KEY, stored)
    error = store_error(lambda: store.load(KEY))
    assert error.code == "record_invalid"
    assert CANARY not in repr(error)


def test_save_creates_and_advances(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 4)
    assert store.load(KEY) == records[4]
    assert backend.rows("SELECT session_key, record FROM sessions") == [(KEY, records[4].to_json())]


def test_save_conflicts(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    store.save(records[0], None)
    assert store_code(lambda: store.save(records[0], None)) == "record_conflict"
    store.save(records[1], records[0])
    assert store_code(lambda: store.save(records[1], records[0])) == "record_conflict"
    other = record_chain(session_key("never-saved"))
    assert store_code(lambda: store.save(other[1], other[0])) == "record_conflict"
    assert store.load(KEY) == records[1]
    forked = records[0].with_step(SessionStep("verified", digest_of("fork"), 1, 1, None))
    backend.execute("UPDATE sessions SET record = ? WHERE session_key = ?", forked.to_json(), KEY)
    assert store_code(lambda: store.save(records[2], records[1])) == "record_conflict"


def test_save_transition_refusals(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 2)
    refused: list[tuple[object, object]] = [
        (records[1], None),
        (records[3], records[1]),
        (records[2], records[2]),
        (records[1], records[2]),
        (record_chain(KEY, binding=digest_of("other"))[3], records[2]),
        (record_chain(session_key("other"))[3], records[2]),
        (records[0].to_dict(), None),
        (records[3], records[2].to_dict()),
    ]
    for record, previous in refused:
        assert store_code(lambda r=record, p=previous: store.save(r, p)) == "record_invalid"  # type: ignore[misc]
    store.save(records[3], records[2])
    store.save(records[4], records[3])
    assert store_code(lambda: store.save(records[5], records[4])) == "record_invalid"
    assert store.load(KEY) == records[4]


# ---------------------------------------------------------------------------
# claim_release / finish_release


def test_claim_and_finish(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 4)
    store.claim_release(records[4], records[5], BUDGET, MARK_A)
    assert store.load(KEY) == records[5]
    assert backend.rows("SELECT budget_key, watermark, claim FROM budgets") == [
        (BUDGET, MARK_A, KEY)
    ]
    store.finish_release(records[5], records[6], BUDGET, MARK_B)
    assert store.load(KEY) == records[6]
    assert backend.rows("SELECT budget_key, watermark, claim FROM budgets") == [
        (BUDGET, MARK_B, None)
    ]
    second = record_chain(session_key("second"))
    advance_to(store, second, 4)
    store.claim_release(second[4], second[5], BUDGET, MARK_B)
    assert backend.rows("SELECT claim FROM budgets") == [(second[0].session_key,)]


def test_claim_refusals_leave_everything_unchanged(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 4)
    backend.execute("INSERT INTO budgets VALUES (?, ?, NULL)", BUDGET, MARK_A)
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_B)) == (
        "budget_state_unverified"
    )
    assert store.load(KEY) == records[4]
    backend.execute("UPDATE budgets SET claim = ?", session_key("crashed"))
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_A)) == (
        "budget_state_unverified"
    )
    assert store.load(KEY) == records[4]
    assert backend.rows("SELECT watermark, claim FROM budgets") == [
        (MARK_A, session_key("crashed"))
    ]


def test_claim_compare_and_swap_and_transition_refusals(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 4)
    assert store_code(lambda: store.claim_release(records[3], records[4], BUDGET, MARK_A)) == (
        "record_invalid"
    )
    assert store_code(lambda: store.claim_release(records[4], records[5], "x", MARK_A)) == (
        "invalid_digest"
    )
    assert store_code(lambda: store.finish_release(records[4], records[5], BUDGET, MARK_A)) == (
        "record_invalid"
    )
    assert store_code(lambda: store.finish_release(records[5], records[6], BUDGET, "x")) == (
        "invalid_digest"
    )
    store.claim_release(records[4], records[5], BUDGET, MARK_A)
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_A)) == (
        "record_conflict"
    )


def test_finish_refusals(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 4)
    store.claim_release(records[4], records[5], BUDGET, MARK_A)
    assert store_code(
        lambda: store.finish_release(records[5], records[6], digest_of("other"), MARK_B)
    ) == ("budget_state_unverified")
    backend.execute("UPDATE budgets SET claim = ?", session_key("thief"))
    assert store_code(lambda: store.finish_release(records[5], records[6], BUDGET, MARK_B)) == (
        "budget_state_unverified"
    )
    backend.execute("UPDATE budgets SET claim = ?", KEY)
    forked = records[4].with_step(SessionStep("release_claimed", digest_of("f"), 1, 1, None))
    assert store_code(
        lambda: store.finish_release(forked, forked.with_step(records[6].steps[5]), BUDGET, MARK_B)
    ) == ("record_conflict")
    store.finish_release(records[5], records[6], BUDGET, MARK_B)
    assert store_code(lambda: store.finish_release(records[5], records[6], BUDGET, MARK_B)) == (
        "record_conflict"
    )


def test_a_held_lock_times_out_as_store_failed(backend: Backend) -> None:
    store = backend.store(timeout=0.2)
    records = record_chain(KEY)
    advance_to(store, records, 1)
    blocker = backend.connect()
    try:
        if backend.kind == "sqlite":
            blocker.isolation_level = None
            blocker.execute("BEGIN IMMEDIATE")
        else:
            blocker.execute("SELECT record FROM sessions FOR UPDATE").fetchall()
        assert store_code(lambda: store.save(records[2], records[1])) == "store_failed"
    finally:
        if backend.kind == "postgres":
            blocker.rollback()
        else:
            blocker.execute("ROLLBACK")
        blocker.close()
    store.save(records[2], records[1])


def test_a_dropped_table_is_store_failed(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    advance_to(store, records, 4)
    backend.execute("DROP TABLE budgets")
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_A)) == (
        "store_failed"
    )
    assert store.load(KEY) == records[4]
    world = make_world()
    ledger = DurableBudgetLedger(store, [world.policy])
    backend.execute("DROP TABLE ledger_usage")
    assert store_code(lambda: ledger.snapshot(*_pair(world))) == "store_failed"


# ---------------------------------------------------------------------------
# Identical semantics: the same scripted sessions leave identical rows


class _RaisingLedger:
    """Records nothing: the process "crashes" after the claim (feedback_failed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def policy_for(self, epoch: object) -> Any:
        return self.inner.policy_for(epoch)

    def snapshot(self, epoch: object, submission: object) -> Any:
        return self.inner.snapshot(epoch, submission)

    def record_official_attempt(self, *_args: object, **_kwargs: object) -> Any:
        raise RuntimeError(CANARY)


def _scripted(backend: Backend, *, durable: bool) -> tuple[list[Any], dict[str, Any]]:
    world = make_world()
    store = backend.store()
    ledger = open_budget_ledger(store, [world.policy], durable=durable)
    clock = Clock()
    results = [_run(world, store, label, ledger, clock=clock) for label in range(5)]
    # A second host: its own store object and ledger (in memory: a fresh, empty one).
    other_store = backend.store()
    other = open_budget_ledger(other_store, [world.policy], durable=durable)
    results.append(_run(world, other_store, "host-2", other, clock=clock))
    # A crash after the claim, then everyone on the budget key is refused.
    results.append(_run(world, store, "crash", _RaisingLedger(ledger), clock=clock))
    results.append(_run(world, store, "after-crash", ledger, clock=clock))
    tables = ["sessions", "budgets"]
    if durable:
        tables += [spec.name for spec in LEDGER_TABLES]
    return results, _dump(backend, *tables)


@pytest.mark.parametrize("durable", [False, True], ids=["memory_ledger", "durable_ledger"])
def test_sqlite_and_postgres_leave_identical_rows(
    tmp_path: Path, pg: Backend, durable: bool
) -> None:
    sqlite_results, sqlite_rows = _scripted(
        _sqlite_backend(tmp_path / "s.sqlite3"), durable=durable
    )
    postgres_results, postgres_rows = _scripted(pg, durable=durable)
    assert postgres_results == sqlite_results
    assert postgres_rows == sqlite_rows
    codes = [result for result in sqlite_results if isinstance(result, str)]
    if durable:
        # The second host goes on from the shared usage: three releases, then denials.
        assert [type(result) for result in sqlite_results[:3]] == [dict] * 3
        assert sqlite_results[3:6] == ["rerun_budget_exhausted"] * 3
    else:
        # Every in-memory ledger starts from zero: the second host is refused.
        assert sqlite_results[5] == "budget_state_unverified"
    assert codes[-2:] == ["feedback_failed", "budget_state_unverified"]


def test_racing_threads_release_once(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    sessions = []
    for label in ("a", "a", "b"):
        session = open_session(world, store, session_key(label), ledger=ledger)
        for step in (session.verify, session.run_cases, session.run_forensics):
            step()
        session.build_adjudication()
        sessions.append(session)
    barrier = threading.Barrier(len(sessions))
    results: list[Any] = [None] * len(sessions)

    def race(index: int) -> None:
        barrier.wait()
        try:
            results[index] = sessions[index].release_feedback().decision.feedback_level
        except EvaluationSessionError as error:
            results[index] = error.code

    threads = [threading.Thread(target=race, args=(index,)) for index in range(len(sessions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    released = [result for result in results if result in ("detailed", "coarse")]
    assert 1 <= len(released) <= 2, results
    assert set(results) - {"detailed", "coarse"} <= {
        "record_conflict",
        "feedback_already_claimed",
        "budget_state_unverified",
    }
    assert (
        ledger.usage(*_pair(world)).official_attempts
        == len(released)
        == (ledger.budget_status(*_pair(world)).released)
    )
    assert ledger.audit().consistent


# ---------------------------------------------------------------------------
# The durable ledger


def test_durable_usage_survives_restarts_and_is_shared_by_hosts(backend: Backend) -> None:
    world = make_world(detailed_limit=1, rerun_limit=1)
    first = backend.store()
    assert isinstance(DurableBudgetLedger(first, [world.policy]), BudgetLedger)
    feedback = _run(world, first, 1, DurableBudgetLedger(first))
    assert feedback["decision"]["feedback_level"] == "detailed"
    # A "restart": new store and ledger objects, policies read from the database.
    second = backend.store()
    restarted = DurableBudgetLedger(second)
    assert restarted.policies == (world.policy,)
    assert restarted.usage(*_pair(world)).official_attempts == 1
    feedback = _run(world, second, 2, restarted)
    assert feedback["decision"]["feedback_level"] == "coarse"
    # The budget is spent for every host and every restart.
    assert _run(world, first, 3, DurableBudgetLedger(first)) == "rerun_budget_exhausted"
    assert _run(world, second, 4, restarted) == "rerun_budget_exhausted"
    status = restarted.budget_status(*_pair(world))
    assert status.to_dict() == {
        "budget_key": budget_key(*_pair(world)),
        "claim": None,
        "claim_decided": False,
        "denied": 2,
        "released": 2,
        "snapshot": restarted.snapshot(*_pair(world)).to_dict(),
        "state": "open",
    }
    assert (status.released, status.denied, status.claim) == (2, 2, None)
    assert status.snapshot.official_attempts == 2
    assert restarted.audit().to_dict() == {
        "consistent": True,
        "problems": [],
        "sessions": {
            "budget_denied": 2,
            "in_progress": 0,
            "locked_decided": 0,
            "locked_undecided": 0,
            "released": 2,
        },
    }


def test_durable_answers_equal_the_in_memory_ledger(backend: Backend, tmp_path: Path) -> None:
    world = make_world(detailed_limit=2, rerun_limit=3, scores=(0.9, 0.5))
    store = backend.store()
    durable = DurableBudgetLedger(store, [world.policy])
    memory = make_ledger(world)
    memory_store = SQLiteSessionStore(tmp_path / "memory.sqlite3")
    clock_a, clock_b = Clock(), Clock()
    for label in range(6):
        left = _run(world, store, label, durable, clock=clock_a)
        right = _run(world, memory_store, label, memory, clock=clock_b)
        assert left == right
    assert durable.snapshot(*_pair(world)) == memory.snapshot(*_pair(world))
    assert durable.export_usage() == memory.export_usage()


def test_policies_are_installed_once_and_never_changed(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    assert _budget_message(lambda: DurableBudgetLedger(store)) == "policies: empty"
    assert _budget_message(lambda: DurableBudgetLedger(store, [])) == "policies: empty"
    assert _budget_message(lambda: DurableBudgetLedger(store, "x")) == "policies: invalid_sequence"
    assert _budget_message(lambda: DurableBudgetLedger(store, [1])) == "policies: invalid_policy"
    assert _budget_message(lambda: DurableBudgetLedger(store, [world.policy] * 2)) == (
        "policies: duplicate_epoch"
    )
    ledger = DurableBudgetLedger(store, [world.policy])
    DurableBudgetLedger(store, [world.policy])
    changed = FeedbackBudgetPolicy(
        epoch_digest=world.policy.epoch_digest,
        detailed_feedback_limit=99,
        rerun_limit=99,
        coarse_score_boundaries=(0.5,),
    )
    assert store_code(lambda: DurableBudgetLedger(store, [changed])) == "budget_state_unverified"
    other = FeedbackBudgetPolicy(
        epoch_digest=digest_of("epoch-2"),
        detailed_feedback_limit=0,
        rerun_limit=0,
        coarse_score_boundaries=(0.5,),
    )
    DurableBudgetLedger(store, [other])
    assert set(ledger.policies) == {world.policy, other}
    assert ledger.policy_for(other.epoch_digest) == other
    assert _budget_message(lambda: ledger.policy_for("x")) == "epoch_digest: invalid_digest"
    assert _budget_message(lambda: ledger.policy_for(digest_of("nope"))) == "epoch_digest: unknown"
    assert _budget_message(lambda: ledger.snapshot(world.policy.epoch_digest, CANARY)) == (
        "submission_digest: invalid_digest"
    )
    assert store_code(lambda: DurableBudgetLedger(object(), [world.policy])) == (  # type: ignore[arg-type]
        "invalid_configuration"
    )
    assert repr(ledger) == "DurableBudgetLedger(<store>)"


def _claimed(world: World, store: SessionStore, ledger: Any, label: str) -> Any:
    session = open_session(world, store, session_key(label), ledger=ledger)
    session.verify()
    session.run_cases()
    session.run_forensics()
    session.build_adjudication()
    snapshot = ledger.snapshot(*_pair(world))
    watermark = budget_watermark(world.policy, snapshot)
    claimed = session.record.with_step(
        SessionStep("release_claimed", snapshot.digest(), 1, 5000, None)
    )
    store.claim_release(session.record, claimed, session.budget_key, watermark)
    return claimed, watermark


def test_recording_requires_an_undecided_matching_claim(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    epoch, submission = _pair(world)
    record = ledger.record_official_attempt
    # Request refusals come first, as in the in-memory ledger.
    assert _budget_message(lambda: record(epoch, submission)) == (
        "attempt_outcome: require_exactly_one"
    )
    assert _budget_message(lambda: record(epoch, submission, score=1.5)) == "score: invalid"
    assert _budget_message(lambda: record(epoch, submission, score=True)) == "score: invalid"
    assert _budget_message(
        lambda: record(epoch, submission, infrastructure_failure_digest=CANARY)
    ) == ("infrastructure_failure_digest: invalid_digest")
    assert _budget_message(lambda: record(digest_of("x"), submission, score=0.5)) == (
        "epoch_digest: unknown"
    )
    assert _budget_message(lambda: record(epoch, None, score=0.5)) == (
        "submission_digest: invalid_digest"
    )
    # No claim on the budget key: nothing is charged.
    assert store_code(lambda: record(epoch, submission, score=0.5)) == "budget_state_unverified"
    claimed, watermark = _claimed(world, store, ledger, "a")
    key = budget_key(epoch, submission)
    # A watermark that no longer matches the usage (a partial restore).
    backend.execute("UPDATE budgets SET watermark = ?", MARK_A)
    assert store_code(lambda: record(epoch, submission, score=0.5)) == "budget_state_unverified"
    backend.execute("UPDATE budgets SET watermark = ?", watermark)
    # A claim by a session that is not at release_claimed.
    backend.execute("UPDATE budgets SET claim = ?", session_key("ghost"))
    assert store_code(lambda: record(epoch, submission, score=0.5)) == "budget_state_unverified"
    backend.execute("UPDATE budgets SET claim = ?", claimed.session_key)
    # A claimant whose stored record no longer parses.
    backend.execute(
        "UPDATE sessions SET record = ? WHERE session_key = ?", CANARY, claimed.session_key
    )
    assert store_code(lambda: record(epoch, submission, score=0.5)) == "budget_state_unverified"
    backend.execute(
        "UPDATE sessions SET record = ? WHERE session_key = ?",
        claimed.to_json(),
        claimed.session_key,
    )
    decision = record(epoch, submission, score=0.5)
    assert decision.accepted
    assert decision.detailed_score == 0.5
    # The claim is consumed: a second recording is refused, usage counts one.
    assert store_code(lambda: record(epoch, submission, score=0.5)) == "budget_state_unverified"
    assert ledger.usage(epoch, submission).official_attempts == 1
    assert backend.rows(
        "SELECT session_key, budget_key, watermark, phase, decision FROM ledger_decisions"
    ) == [(claimed.session_key, key, watermark, "released", digest_openmed(decision.to_dict()))]
    status = ledger.budget_status(epoch, submission)
    assert (status.state, status.claim, status.claim_decided) == (
        "locked",
        claimed.session_key,
        True,
    )
    audit = ledger.audit()
    assert audit.consistent
    assert audit.sessions["locked_decided"] == 1


def test_the_claimant_must_match_the_snapshot(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    session = open_session(world, store, session_key("s"), ledger=ledger)
    for step in (session.verify, session.run_cases, session.run_forensics):
        step()
    session.build_adjudication()
    snapshot = ledger.snapshot(*_pair(world))
    wrong = session.record.with_step(SessionStep("release_claimed", digest_of("x"), 1, 1, None))
    store.claim_release(
        session.record, wrong, session.budget_key, budget_watermark(world.policy, snapshot)
    )
    assert store_code(lambda: ledger.record_official_attempt(*_pair(world), score=0.5)) == (
        "budget_state_unverified"
    )
    assert ledger.budget_status(*_pair(world)).claim_decided is False


def test_crash_states_are_never_ambiguous(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    epoch, submission = _pair(world)
    assert ledger.budget_status(epoch, submission).state == "unused"
    assert _run(world, store, "first", ledger)["decision"]["official_attempts"] == 1
    assert ledger.budget_status(epoch, submission).state == "open"
    # Crash after the claim: locked, not charged.
    claimed, _watermark = _claimed(world, store, ledger, "crash")
    status = ledger.budget_status(epoch, submission)
    assert (status.state, status.claim, status.claim_decided) == (
        "locked",
        claimed.session_key,
        False,
    )
    assert status.snapshot.official_attempts == 1
    audit = ledger.audit()
    assert audit.consistent
    assert audit.sessions["locked_undecided"] == 1
    # Then the decision commits but the finish never does: locked, charged.
    ledger.record_official_attempt(epoch, submission, score=0.75)
    status = ledger.budget_status(epoch, submission)
    assert (status.state, status.claim_decided, status.snapshot.official_attempts) == (
        "locked",
        True,
        2,
    )
    assert ledger.audit().sessions["locked_decided"] == 1
    assert ledger.audit().consistent
    # Every later session on the budget key is refused; the crashed one too.
    assert _run(world, store, "later", ledger) == "budget_state_unverified"
    assert _run(world, store, "crash", ledger) == "feedback_already_claimed"
    assert set(BUDGET_STATES) == {"unused", "open", "locked", "unverified"}


def test_audit_and_status_detect_partial_rollbacks(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    epoch, submission = _pair(world)
    for label in range(2):
        _run(world, store, label, ledger)
    saved = _dump(backend, "ledger_usage", "ledger_decisions")
    _run(world, store, 2, ledger)
    key = budget_key(epoch, submission)
    # Roll the ledger tables back, but not the sessions and budget rows.
    backend.execute("DELETE FROM ledger_usage")
    backend.execute("DELETE FROM ledger_decisions")
    for epoch_digest, submission_digest, usage in saved["ledger_usage"]:
        backend.execute(
            "INSERT INTO ledger_usage VALUES (?, ?, ?)", epoch_digest, submission_digest, usage
        )
    for row in saved["ledger_decisions"]:
        backend.execute("INSERT INTO ledger_decisions VALUES (?, ?, ?, ?, ?)", *row)
    assert ledger.budget_status(epoch, submission).state == "unverified"
    problems = ledger.audit().problems
    assert ("decision_missing", session_key(2)) in problems
    assert ("watermark_mismatch", key) in problems
    # Nothing can be released on an unverifiable budget key.
    assert _run(world, store, 3, ledger) == "budget_state_unverified"
    # More tampering the audit names (and never quotes).
    backend.execute(
        "UPDATE ledger_decisions SET decision = ? WHERE session_key = ?", MARK_A, session_key(0)
    )
    backend.execute(
        "INSERT INTO ledger_decisions VALUES (?, ?, ?, 'released', ?)",
        session_key("ghost"),
        key,
        MARK_A,
        MARK_B,
    )
    backend.execute("INSERT INTO budgets VALUES (?, ?, ?)", digest_of("b2"), MARK_A, session_key(1))
    backend.execute("INSERT INTO sessions VALUES (?, ?)", session_key("bad"), CANARY)
    young = SessionRecord(session_key=session_key("young"), binding_digest=BINDING)
    backend.execute("INSERT INTO sessions VALUES (?, ?)", young.session_key, young.to_json())
    backend.execute(
        "INSERT INTO ledger_decisions VALUES (?, ?, ?, 'budget_denied', ?)",
        young.session_key,
        key,
        MARK_A,
        MARK_B,
    )
    backend.execute(
        "INSERT INTO ledger_usage VALUES (?, ?, ?)", digest_of("e"), digest_of("s"), CANARY
    )
    found = {problem[0] for problem in ledger.audit().problems}
    assert found >= {
        "decision_mismatch",
        "decision_orphaned",
        "claim_dangling",
        "record_invalid",
        "row_invalid",
        "usage_mismatch",
        "watermark_mismatch",
    }
    assert found <= set(AUDIT_PROBLEMS)
    assert CANARY not in json.dumps(ledger.audit().to_dict())


def test_audit_finds_a_claimed_session_without_its_claim(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    claimed, _watermark = _claimed(world, store, ledger, "lost")
    backend.execute("UPDATE budgets SET claim = NULL")
    assert ledger.audit().problems == (("claim_missing", claimed.session_key),)
    assert ledger.audit().sessions == dict.fromkeys(SESSION_STATES, 0) | {"locked_undecided": 1}


def test_corrupt_ledger_rows_are_unverified(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    _run(world, store, 1, ledger)
    epoch, submission = _pair(world)
    usage = backend.rows("SELECT usage FROM ledger_usage")[0][0]
    for tampered in (
        CANARY,
        usage.replace('"official_attempts":1', '"official_attempts":0'),
        usage + " ",
    ):
        backend.execute("UPDATE ledger_usage SET usage = ?", tampered)
        for action in (
            lambda: ledger.snapshot(epoch, submission),
            lambda: ledger.usage(epoch, submission),
            ledger.export_usage,
        ):
            error = store_error(action)
            assert error.code == "budget_state_unverified"
            assert CANARY not in repr(error)
    # Usage its policy could never produce (detail not spent first).
    inconsistent = SubmissionUsage(official_attempts=1, scored_attempts=1, detailed_feedback_used=0)
    backend.execute("UPDATE ledger_usage SET usage = ?", inconsistent.to_json())
    assert store_code(lambda: ledger.snapshot(epoch, submission)) == "budget_state_unverified"
    backend.execute("UPDATE ledger_usage SET usage = ?", usage)
    policy = backend.rows("SELECT policy FROM ledger_policies")[0][0]
    # A valid but different policy: refused against the supplied one, and by the watermark.
    raised = policy.replace('"rerun_limit":2', '"rerun_limit":9')
    backend.execute("UPDATE ledger_policies SET policy = ?", raised)
    assert (
        store_code(lambda: DurableBudgetLedger(store, [world.policy])) == "budget_state_unverified"
    )
    assert ledger.budget_status(epoch, submission).state == "unverified"
    backend.execute("UPDATE ledger_policies SET policy = ?", policy.replace("{", "{ ", 1))
    assert store_code(lambda: ledger.policy_for(epoch)) == "budget_state_unverified"
    backend.execute("UPDATE ledger_policies SET policy = ?", CANARY)
    assert store_code(lambda: ledger.snapshot(epoch, submission)) == "budget_state_unverified"
    backend.execute("UPDATE ledger_policies SET policy = ?", policy)
    assert ledger.snapshot(epoch, submission).official_attempts == 1


def test_infrastructure_failures_and_approvals(backend: Backend) -> None:
    world = make_world(detailed_limit=1, rerun_limit=0)
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    epoch, submission = _pair(world)
    failure, approval = digest_of("failure"), digest_of("approval")
    approve = ledger.approve_infrastructure_failure
    assert _budget_message(lambda: approve(epoch, submission, "x", approval)) == (
        "failure_digest: invalid_digest"
    )
    assert _budget_message(lambda: approve(epoch, submission, failure, CANARY)) == (
        "operator_approval_digest: invalid_digest"
    )
    assert _budget_message(lambda: approve(epoch, submission, failure, approval)) == (
        "failure_digest: not_recorded"
    )
    # A refused approval leaves nothing behind (not even a budget row).
    assert ledger.budget_status(epoch, submission).state == "unused"
    # A failed attempt is recorded against a claim, like any official attempt.
    claimed, _watermark = _claimed(world, store, ledger, "infra")
    assert (
        store_code(lambda: approve(epoch, submission, failure, approval))
        == "budget_state_unverified"
    )
    decision = ledger.record_official_attempt(
        epoch, submission, infrastructure_failure_digest=failure
    )
    assert (decision.accepted, decision.feedback_level, decision.attempts_remaining) == (
        True,
        "none",
        0,
    )
    terminal = claimed.with_step(
        SessionStep("released", digest_openmed(decision.to_dict()), 1, 5001, None)
    )
    store.finish_release(
        claimed,
        terminal,
        budget_key(epoch, submission),
        budget_watermark(world.policy, ledger.snapshot(epoch, submission)),
    )
    # Exhausted: a session is denied ...
    assert _run(world, store, "denied", ledger) == "rerun_budget_exhausted"
    # ... until the operator approves the failure: the row is re-stamped, sessions go on.
    result = approve(epoch, submission, failure, approval)
    assert (result.approved_failure_replacements, result.attempts_remaining) == (1, 1)
    assert ledger.budget_status(epoch, submission).state == "open"
    assert _budget_message(lambda: approve(epoch, submission, failure, approval)) == (
        "failure_digest: already_approved"
    )
    assert _run(world, store, "after-approval", ledger)["decision"]["feedback_level"] == "detailed"
    # The approval digest is spent across the whole ledger.
    other_submission = digest_of("other-submission")
    assert _budget_message(lambda: approve(epoch, other_submission, failure, approval)) == (
        "failure_digest: not_recorded"
    )
    usage = ledger.usage(epoch, submission)
    assert usage.approved_failures == {failure: approval}
    assert ledger.audit().consistent
    # Unverifiable budget rows are never re-stamped.
    backend.execute("UPDATE budgets SET watermark = ?", MARK_A)
    assert store_code(lambda: approve(epoch, submission, digest_of("f2"), digest_of("a2"))) == (
        "budget_state_unverified"
    )


def test_approval_digests_are_unique_across_the_ledger(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = make_world(rerun_limit=2)
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    epoch, submission = _pair(world)
    approval, failure = digest_of("approval"), digest_of("f")
    backend.execute(
        "INSERT INTO ledger_approvals VALUES (?, ?, ?)", approval, epoch, digest_of("elsewhere")
    )

    def finish_by_hand() -> None:
        watermark = budget_watermark(world.policy, ledger.snapshot(epoch, submission))
        backend.execute("UPDATE budgets SET claim = NULL, watermark = ?", watermark)

    _claimed(world, store, ledger, "infra")
    ledger.record_official_attempt(epoch, submission, infrastructure_failure_digest=failure)
    finish_by_hand()
    assert _budget_message(
        lambda: ledger.approve_infrastructure_failure(epoch, submission, failure, approval)
    ) == ("operator_approval_digest: already_used")
    # A concurrent approval that used the digest after the check: the insert decides.
    monkeypatch.setattr(durable_module._UsedApprovals, "__contains__", lambda _self, _item: False)
    assert _budget_message(
        lambda: ledger.approve_infrastructure_failure(epoch, submission, failure, approval)
    ) == ("operator_approval_digest: already_used")
    monkeypatch.undo()
    # Two pairs sharing an approval digest cannot be exported.
    shared = SubmissionUsage(
        official_attempts=1,
        infrastructure_failure_digests=(failure,),
        approved_failures={failure: approval},
    ).to_json()
    for pair in ("p1", "p2"):
        backend.execute("INSERT INTO ledger_usage VALUES (?, ?, ?)", epoch, digest_of(pair), shared)
    assert store_code(ledger.export_usage) == "budget_state_unverified"
    backend.execute("DELETE FROM ledger_usage WHERE submission_digest <> ?", submission)
    # A failure digest is recorded once per pair.
    _claimed(world, store, ledger, "infra-2")
    assert _budget_message(
        lambda: ledger.record_official_attempt(
            epoch, submission, infrastructure_failure_digest=failure
        )
    ) == ("infrastructure_failure_digest: already_recorded")
    assert ledger.budget_status(epoch, submission).claim_decided is False


def test_exported_usage_matches_its_schemas_and_anchors_detect_rollback(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    memory = make_ledger(world)
    assert ledger.export_usage() == LedgerUsage()
    _run(world, store, 1, ledger)
    anchor = ledger.export_usage()
    ledger.verify_not_behind(anchor)
    ledger.verify_not_behind(LedgerUsage())
    _run(world, store, 2, ledger)
    later = ledger.export_usage()
    ledger.verify_not_behind(anchor)
    usage_validator, ledger_validator = _validator("usage"), _validator("ledger_usage")
    for document in (anchor, later, memory.export_usage()):
        assert list(ledger_validator.iter_errors(document.to_dict())) == []
        for entry in document.to_dict()["entries"]:
            assert list(usage_validator.iter_errors(entry["usage"])) == []
    stored = [json.loads(row[0]) for row in backend.rows("SELECT usage FROM ledger_usage")]
    assert stored
    for document in stored:
        assert list(usage_validator.iter_errors(document)) == []
    # Restoring the database to the anchor's state is caught by a later anchor.
    (epoch, submission), _usage = next(iter(anchor.entries.items()))
    backend.execute(
        "UPDATE ledger_usage SET usage = ?", anchor.entries[(epoch, submission)].to_json()
    )
    assert store_code(lambda: ledger.verify_not_behind(later)) == "budget_state_unverified"
    assert _budget_message(lambda: ledger.verify_not_behind(later.to_dict())) == (  # type: ignore[arg-type]
        "usage: invalid_document"
    )


def _validator(kind: str) -> Draft202012Validator:
    names = {
        "usage": "sealeval.feedback_budget_usage.v1",
        "ledger_usage": "sealeval.feedback_budget_ledger_usage.v1",
    }
    resources = []
    for name in names.values():
        document = json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))
        resources.append((document["$id"], Resource.from_contents(document)))
    schema = json.loads((CONTRACTS / f"{names[kind]}.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, registry=Registry().with_resources(resources))


def test_usage_schemas_refuse_what_the_library_refuses() -> None:
    usage, ledger = _validator("usage"), _validator("ledger_usage")
    good = SubmissionUsage(
        official_attempts=2,
        scored_attempts=1,
        detailed_feedback_used=1,
        infrastructure_failure_digests=(digest_of("f"),),
        approved_failures={digest_of("f"): digest_of("a")},
    ).to_dict()
    assert usage.is_valid(good)
    for broken in (
        {**good, "extra": 1},
        {**good, "official_attempts": -1},
        {**good, "schema_version": "sealeval.feedback_budget_usage.v2"},
        {**good, "infrastructure_failure_digests": [digest_of("f")] * 2},
        {**good, "approved_failures": {"x": digest_of("a")}},
        {key: value for key, value in good.items() if key != "scored_attempts"},
    ):
        assert not usage.is_valid(broken)
    entry = {"epoch_digest": digest_of("e"), "submission_digest": digest_of("s"), "usage": good}
    document = {"entries": [entry], "schema_version": "sealeval.feedback_budget_ledger_usage.v1"}
    assert ledger.is_valid(document)
    assert LedgerUsage.from_dict(document).to_dict() == document
    assert not ledger.is_valid({**document, "entries": [{**entry, "extra": 1}]})
    assert not ledger.is_valid({**document, "entries": [{**entry, "usage": {**good, "x": 1}}]})


# ---------------------------------------------------------------------------
# Content-freedom: canaries everywhere in the inputs, nowhere in the database

_TEXT_CANARY = "CANARYTEXT-9d1e"
_IDENTITY_CANARY = "cand-CANARYID-51f0"
_REVIEWER_CANARY = "rev-CANARYREV-3c2b"
_KEY_CANARY = b"KEYCANARY-0123456789-abcdefghijklmnopq"
_SCORES = (0.7182818, 0.3141592)


def _canaries() -> list[str]:
    mean = sum(_SCORES) / len(_SCORES)
    return [
        _TEXT_CANARY,
        _IDENTITY_CANARY,
        _REVIEWER_CANARY,
        "Placeholder",
        "patient note",
        "candidate answer",
        "Grounded?",
        _KEY_CANARY.decode(),
        _KEY_CANARY.hex(),
        *(repr(score) for score in (*_SCORES, mean)),
        *(f"{score:.6f}" for score in (*_SCORES, mean)),
    ]


def test_every_row_is_content_free(backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world = make_world(
        tag=_TEXT_CANARY,
        scores=_SCORES,
        identity=_IDENTITY_CANARY,
        reviewer=_REVIEWER_CANARY,
        key=_KEY_CANARY,
    )
    store = backend.store()
    ledger = DurableBudgetLedger(store, [world.policy])
    providers = Providers(world)
    feedback = _run(world, store, "c1", ledger, providers=providers)
    assert tuple(feedback["per_case_scores"]) == _SCORES
    assert any(_TEXT_CANARY in packet.to_json() for packet in providers.packets)
    _run(world, store, "c2", ledger)
    _run(world, store, "c3", _RaisingLedger(ledger))
    canaries = _canaries()
    if backend.kind == "postgres":
        password = str(psycopg.conninfo.conninfo_to_dict(backend.dsn).get("password", ""))
        canaries += [backend.location] + ([password] if password else [])
        for table in backend.tables():
            for canary in canaries:
                hits = backend.rows(
                    f"SELECT count(*) FROM {table} t WHERE strpos(t::text, ?) > 0",
                    canary,
                )
                assert hits == [(0,)], (table, canary)
        assert backend.rows("SELECT count(*) FROM sessions") == [(3,)]
    else:
        path = Path(backend.location)
        blobs = {
            item.name: item.read_bytes()
            for item in path.parent.iterdir()
            if item.name.startswith(path.name)
        }
        assert session_key("c1").encode() in blobs[path.name]
        for name, blob in blobs.items():
            for canary in canaries:
                assert canary.encode() not in blob, (name, canary)
    # Every stored value is a digest, a record, a policy or a usage document.
    for key, text in backend.rows("SELECT session_key, record FROM sessions"):
        assert SessionRecord.from_json(text).session_key == key
    for row in backend.rows("SELECT * FROM budgets") + backend.rows(
        "SELECT * FROM ledger_decisions"
    ):
        assert all(
            value is None or value.startswith("sha256:") or value in ("released", "budget_denied")
            for value in row
        )
    for epoch, text in backend.rows("SELECT * FROM ledger_policies"):
        assert FeedbackBudgetPolicy.from_json(text).epoch_digest == epoch
    for _epoch, _submission, text in backend.rows("SELECT * FROM ledger_usage"):
        assert SubmissionUsage.from_json(text).to_json() == text
    for canary in canaries:
        assert canary not in caplog.text


# ---------------------------------------------------------------------------
# Opening stores: routing, DSN hygiene, SQLite path rules


def test_locations_are_routed_by_scheme(tmp_path: Path, pg: Backend) -> None:
    assert isinstance(pg.store(), PostgresSessionStore)
    upper = "POSTGRESQL" + pg.location[len("postgresql") :]
    assert isinstance(open_session_store(upper), PostgresSessionStore)
    short = "postgres" + pg.location[len("postgresql") :]
    assert isinstance(open_session_store(short), PostgresSessionStore)
    assert isinstance(open_session_store(str(tmp_path / "a.sqlite3")), SQLiteSessionStore)
    assert is_postgres_location(" postgres://x")
    assert not is_postgres_location("sessions.db")
    assert not is_postgres_location(None)


@pytest.mark.parametrize(
    "location",
    [
        f"mysql://user:{CANARY}@db/x",
        f"sqlite://{CANARY}.db",
        f"host=db dbname=x password={CANARY}",
        f"dbname = x user={CANARY}",
        f"postgresql://user:{CANARY}@[::1",
        f"postgresql://user:{CANARY}@127.0.0.1:1/db?connect_timeout=2",
        f"postgresql://user:{CANARY}@127.0.0.1:1/db?sslmode={CANARY}",
        "",
        ":memory:",
        "file:x.db",
        None,
        b"sessions.db",
    ],
    ids=[
        "mysql",
        "sqlite_uri",
        "conninfo",
        "conninfo_spaces",
        "malformed_uri",
        "refused_port",
        "bad_option",
        "empty",
        "memory",
        "file_uri",
        "none",
        "bytes",
    ],
)
def test_unusable_locations_are_store_failed_without_echo(
    location: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.chdir(tmp_path)
    error = store_error(lambda: open_session_store(location))  # type: ignore[arg-type]
    assert error.code == "store_failed"
    assert CANARY not in str(error) + repr(error) + caplog.text
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_password_never_echoes(pg: Backend, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    location = pg_uri(pg.dsn, password=CANARY)
    error = store_error(lambda: open_session_store(location))
    assert error.code == "store_failed"
    assert CANARY not in str(error) + repr(error) + caplog.text


def test_postgres_store_refuses_bad_arguments_and_pickling(
    pg: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pg.store()
    assert repr(store) == "PostgresSessionStore(<dsn redacted>)"
    assert "password" not in repr(store)
    with pytest.raises(TypeError):
        pickle.dumps(store)
    for timeout in (-1, "5", None, 1e9, True):
        assert (
            store_code(lambda t=timeout: PostgresSessionStore(pg.location, timeout=t))
            == "store_failed"
        )  # type: ignore[misc]
    for dsn in ("", "   ", "x\x00y", None, 5):
        assert store_code(lambda d=dsn: PostgresSessionStore(d)) == "store_failed"  # type: ignore[misc]
    # Without psycopg installed the store cannot be opened (and says only that).
    monkeypatch.setattr(postgres_module, "_DRIVER", [])
    monkeypatch.setitem(sys.modules, "psycopg", None)
    assert store_code(lambda: PostgresSessionStore(pg.location)) == "store_failed"


def test_open_budget_ledger_choices(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    assert isinstance(open_budget_ledger(store, [world.policy]), DurableBudgetLedger)
    memory = open_budget_ledger(store, [world.policy], durable=False, usage=LedgerUsage())
    assert isinstance(memory, FeedbackBudgetLedger)
    assert store_code(lambda: open_budget_ledger(store, [world.policy], usage=LedgerUsage())) == (
        "invalid_configuration"
    )
    assert store_code(lambda: open_budget_ledger(store, [world.policy], durable=1)) == (  # type: ignore[arg-type]
        "invalid_configuration"
    )


# ---------------------------------------------------------------------------
# Read-only listing (sealeval session show)


def _snapshot_files(backend: Backend) -> dict[str, bytes]:
    if backend.kind != "sqlite":
        return {}
    path = Path(backend.location)
    return {item.name: item.read_bytes() for item in sorted(path.parent.iterdir())}


def test_read_session_store_lists_everything_and_writes_nothing(backend: Backend) -> None:
    world = make_world()
    store = backend.store()
    # Without a durable ledger: no ledger usage (another epoch: ledgers never share a budget key).
    memory_world = make_world(tag="MEMORY")
    _run(memory_world, store, "memory", make_ledger(memory_world))
    listing = read_session_store(backend.location)
    assert [record.session_key for record in listing.sessions] == [session_key("memory")]
    assert listing.ledger_usage is None
    ledger = DurableBudgetLedger(store, [world.policy])
    claimed, watermark = _claimed(world, store, ledger, "claimed")
    tables = ["sessions", "budgets", *(spec.name for spec in LEDGER_TABLES)]
    before, files = _dump(backend, *tables), _snapshot_files(backend)
    listing = read_session_store(backend.location, timeout=5)
    assert _dump(backend, *tables) == before
    assert _snapshot_files(backend) == files
    assert sorted(record.session_key for record in listing.sessions) == sorted(
        [session_key("memory"), claimed.session_key]
    )
    assert listing.sessions == tuple(sorted(listing.sessions, key=lambda r: r.session_key))
    key = budget_key(*_pair(world))
    assert BudgetRow(key, watermark, claimed.session_key) in listing.budgets
    assert len(listing.budgets) == 2
    assert list(listing.budgets) == sorted(listing.budgets, key=lambda row: row.budget_key)
    assert listing.ledger_usage == LedgerUsage()
    document = listing.to_dict()
    assert {"budget_key": key, "claim": claimed.session_key, "watermark": watermark} in (
        document["budgets"]
    )
    assert document["ledger_usage"] == LedgerUsage().to_dict()
    assert claimed.to_dict() in document["sessions"]


def test_read_session_store_refusals(backend: Backend) -> None:
    store = backend.store()
    records = record_chain(KEY)
    store.save(records[0], None)
    backend.execute("INSERT INTO sessions VALUES (?, ?)", session_key("bad"), CANARY)
    error = store_error(lambda: read_session_store(backend.location))
    assert (error.code, CANARY in repr(error)) == ("record_invalid", False)
    backend.execute("DELETE FROM sessions WHERE session_key = ?", session_key("bad"))
    backend.execute("INSERT INTO sessions VALUES (?, ?)", session_key("bad"), records[0].to_json())
    assert store_code(lambda: read_session_store(backend.location)) == "record_invalid"
    backend.execute("DELETE FROM sessions WHERE session_key = ?", session_key("bad"))
    backend.execute("INSERT INTO budgets VALUES (?, ?, ?)", BUDGET, CANARY, None)
    assert store_code(lambda: read_session_store(backend.location)) == "record_invalid"
    backend.execute("DELETE FROM budgets")
    world = make_world()
    DurableBudgetLedger(store, [world.policy])
    backend.execute("INSERT INTO ledger_usage VALUES (?, ?, ?)", *_pair(world), CANARY)
    assert store_code(lambda: read_session_store(backend.location)) == "budget_state_unverified"
    backend.execute("DROP TABLE ledger_usage")
    assert store_code(lambda: read_session_store(backend.location)) == "store_failed"
    for bad in (None, f"mysql://u:{CANARY}@h/d", f"host=h password={CANARY}"):
        error = store_error(lambda b=bad: read_session_store(b))  # type: ignore[misc]
        assert (error.code, CANARY in str(error) + repr(error)) == ("store_failed", False)
    assert store_code(lambda: read_session_store(backend.location, timeout=-1)) == "store_failed"


def test_read_session_store_never_creates_a_store(tmp_path: Path, pg: Backend) -> None:
    for name in ("missing.sqlite3", "file:x.db", "x.db?mode=memory", ":memory:", "bad\x00"):
        assert store_code(lambda n=name: read_session_store(str(tmp_path / n))) == "store_failed"
    (tmp_path / "dir.sqlite3").mkdir()
    assert store_code(lambda: read_session_store(str(tmp_path / "dir.sqlite3"))) == "store_failed"
    foreign = tmp_path / "foreign.sqlite3"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE sessions (a TEXT)")
    assert store_code(lambda: read_session_store(str(foreign))) == "store_failed"
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(CANARY.encode() * 200)
    error = store_error(lambda: read_session_store(str(garbage)))
    assert (error.code, CANARY in str(error) + repr(error)) == ("store_failed", False)
    assert sorted(item.name for item in tmp_path.iterdir()) == [
        "dir.sqlite3",
        "foreign.sqlite3",
        "garbage.sqlite3",
    ]
    # PostgreSQL: an empty schema stays empty.
    assert store_code(lambda: read_session_store(pg.location)) == "store_failed"
    assert store_code(lambda: PostgresSessionStore(pg.location, create=False)) == "store_failed"
    assert store_code(lambda: PostgresSessionStore(pg.location, create=1)) == "store_failed"  # type: ignore[arg-type]
    assert pg.tables() == []


# ---------------------------------------------------------------------------
# Least privilege: what the runtime and read-only roles of docs/sessions.md need


def test_least_privilege_roles_are_enough(pg: Backend) -> None:
    world = make_world()
    DurableBudgetLedger(pg.store(), [world.policy])  # the owner creates tables and policies
    suffix = secrets.token_hex(4)
    runtime, reader, password = f"rt_{suffix}", f"ro_{suffix}", secrets.token_hex(16)
    schema = sql.Identifier(pg.schema)
    grants = [
        "GRANT USAGE ON SCHEMA {schema} TO {runtime}, {reader}",
        "GRANT SELECT, INSERT, UPDATE ON {schema}.sessions, {schema}.budgets, "
        "{schema}.ledger_usage TO {runtime}",
        "GRANT SELECT, INSERT ON {schema}.ledger_decisions, {schema}.ledger_approvals TO {runtime}",
        "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {runtime}, {reader}",
    ]
    names = {"schema": schema, "runtime": sql.Identifier(runtime), "reader": sql.Identifier(reader)}
    with psycopg.connect(pg.dsn, autocommit=True) as admin:
        for role in (runtime, reader):
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)
                )
            )
        for grant in grants:
            admin.execute(sql.SQL(grant).format(**names))
    try:
        store = open_session_store(
            pg_uri(pg.dsn, schema=pg.schema, user=runtime, password=password)
        )
        ledger = DurableBudgetLedger(store)
        results = [_run(world, store, label, ledger) for label in range(4)]
        assert [type(result) for result in results[:3]] == [dict] * 3
        assert results[3] == "rerun_budget_exhausted"
        # The runtime role cannot install or change policies, nor delete anything.
        other = FeedbackBudgetPolicy(
            epoch_digest=digest_of("epoch-2"),
            detailed_feedback_limit=0,
            rerun_limit=0,
            coarse_score_boundaries=(0.5,),
        )
        assert store_code(lambda: DurableBudgetLedger(store, [other])) == "store_failed"
        assert isinstance(store, PostgresSessionStore)
        for statement in ("DELETE FROM sessions", "TRUNCATE budgets", "CREATE TABLE x (y TEXT)"):
            assert store_code(
                lambda s=statement: store.run_transaction(lambda c: c.execute(s))
            ) == ("store_failed")
        # The read-only role can inspect (show, status, audit) but never write.
        reading = open_session_store(
            pg_uri(pg.dsn, schema=pg.schema, user=reader, password=password)
        )
        inspector = DurableBudgetLedger(reading)
        assert inspector.audit().consistent
        assert inspector.budget_status(*_pair(world)).released == 3
        assert inspector.snapshot(*_pair(world)).official_attempts == 3
        assert reading.load(session_key(0)) is not None
        listing = read_session_store(
            pg_uri(pg.dsn, schema=pg.schema, user=reader, password=password)
        )
        assert len(listing.sessions) == 4
        fresh = SessionRecord(session_key=session_key("new"), binding_digest=BINDING)
        assert store_code(lambda: reading.save(fresh, None)) == "store_failed"
        for opened in (store, reading):
            opened.close()
    finally:
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            for role in (runtime, reader):
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# ---------------------------------------------------------------------------
# PostgreSQL transactions: pooling, retries, commit outcomes, fork safety


def _backend_pid(store: PostgresSessionStore) -> int:
    row = store.run_transaction(lambda cursor: cursor.fetchone("SELECT pg_backend_pid()"))
    assert row is not None
    return int(row[0])


def test_a_lost_pooled_connection_is_replaced_transparently(pg: Backend) -> None:
    store = pg.store()
    assert isinstance(store, PostgresSessionStore)
    records = record_chain(KEY)
    store.save(records[0], None)
    pid = _backend_pid(store)
    assert _backend_pid(store) == pid  # pooled
    pg.execute("SELECT pg_terminate_backend(?)", pid)
    store.save(records[1], records[0])
    assert store.load(KEY) == records[1]
    assert _backend_pid(store) != pid


def test_retries_are_bounded_and_only_before_commit(
    pg: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pg.store()
    assert isinstance(store, PostgresSessionStore)
    monkeypatch.setattr(postgres_module, "_BACKOFF", (0.0, 0.0, 0.0))
    calls: list[str] = []

    def flaky(error: Exception, times: int) -> Callable[[Any], str]:
        def operation(_cursor: Any) -> str:
            calls.append("op")
            if len(calls) <= times:
                raise error
            return "done"

        return operation

    # Serialization failures and deadlocks are retried (nothing was committed) ...
    assert store.run_transaction(flaky(psycopg.errors.SerializationFailure(CANARY), 1)) == "done"
    assert len(calls) == 2
    calls.clear()
    assert store.run_transaction(flaky(psycopg.errors.DeadlockDetected(CANARY), 2)) == "done"
    assert len(calls) == 3
    # ... a bounded number of times.
    calls.clear()
    assert (
        store_code(lambda: store.run_transaction(flaky(psycopg.OperationalError(CANARY), 9)))
        == "store_failed"
    )
    assert len(calls) == 3
    # Lock timeouts, cancellations and other server errors are never retried.
    for error in (
        psycopg.errors.LockNotAvailable(CANARY),
        psycopg.errors.QueryCanceled(CANARY),
        psycopg.errors.InsufficientPrivilege(CANARY),
        ValueError(CANARY),
    ):
        calls.clear()
        assert store_code(lambda e=error: store.run_transaction(flaky(e, 9))) == "store_failed"  # type: ignore[misc]
        assert len(calls) == 1
    # A sealeval error keeps its class, code and field, raised fresh.
    calls.clear()
    refusal = FeedbackBudgetError("unknown", "epoch_digest")
    assert (
        _budget_message(lambda: store.run_transaction(flaky(refusal, 9))) == "epoch_digest: unknown"
    )
    # A failing COMMIT has an unknown outcome: store_failed at once, never retried.
    commits: list[int] = []
    real_commit = psycopg.Connection.commit

    def failing_commit(self: psycopg.Connection[Any]) -> None:
        commits.append(1)
        self.rollback()
        raise psycopg.OperationalError(CANARY)

    monkeypatch.setattr(psycopg.Connection, "commit", failing_commit)
    records = record_chain(KEY)
    assert store_code(lambda: store.save(records[0], None)) == "store_failed"
    assert len(commits) == 1
    # A connection whose session set-up fails is closed, never pooled.
    assert store_code(lambda: PostgresSessionStore(pg.location)) == "store_failed"
    monkeypatch.setattr(psycopg.Connection, "commit", real_commit)
    assert store.load(KEY) is None


def _child_uses_store(store: PostgresSessionStore, queue: Any) -> None:
    queue.put((_backend_pid(store), store.load(KEY) is not None))


def test_forked_children_never_share_the_parents_connection(pg: Backend) -> None:
    store = pg.store()
    assert isinstance(store, PostgresSessionStore)
    records = record_chain(KEY)
    store.save(records[0], None)
    parent_pid = _backend_pid(store)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child_uses_store, args=(store, queue))
    process.start()
    child_pid, found = queue.get(timeout=30)
    process.join(30)
    assert process.exitcode == 0
    assert found is True
    assert child_pid != parent_pid
    # The parent's pooled connection survived the child's exit untouched.
    assert _backend_pid(store) == parent_pid
    store.save(records[1], records[0])
