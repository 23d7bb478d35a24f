"""The durable session store (spec 30 section 5): SQLite schema, CAS, claims, content-freedom."""

from __future__ import annotations

import pickle
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sealeval.session import store as store_module
from sealeval.session.record import SessionRecord, SessionStep
from sealeval.session.store import (
    SCHEMA,
    SessionStore,
    SQLiteSessionStore,
    check_claim,
    check_finish,
    check_save,
)
from support.refusals import CANARY
from support.session_store import (
    BINDING,
    BUDGET,
    MARK_A,
    MARK_B,
    advance_to,
    record_chain,
    store_code,
    store_error,
)
from support.session_world import (
    Providers,
    digest_of,
    make_ledger,
    make_world,
    open_session,
    session_key,
)

KEY = session_key("store")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.sqlite3"


@pytest.fixture
def store(path: Path) -> SQLiteSessionStore:
    return SQLiteSessionStore(path)


def _rows(path: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql, args).fetchall()
    finally:
        connection.close()


def _execute(path: Path, sql: str, *args: object) -> None:
    connection = sqlite3.connect(path)
    try:
        with connection:
            connection.execute(sql, args)
    finally:
        connection.close()


# ---------------------------------------------------------------------------
# Opening


@pytest.mark.parametrize(
    "given",
    [
        "",
        ":memory:",
        ":MEMORY:",
        "file::memory:",
        "file::memory:?cache=shared",
        "file:sessions.db",
        "FILE:sessions.db",
        "file:sessions.db?mode=memory",
        "sessions.db?mode=memory",
        "   ",
        "bad\x00name",
        b"sessions.db",
        None,
        7,
    ],
)
def test_memory_and_temporary_names_are_refused(
    given: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_code(lambda: SQLiteSessionStore(given)) == "store_failed"  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("timeout", [-1, "5", None, 1e9])
def test_bad_timeouts_are_refused(path: Path, timeout: object) -> None:
    assert store_code(lambda: SQLiteSessionStore(path, timeout=timeout)) == "store_failed"  # type: ignore[arg-type]


def test_unopenable_files_are_store_failed(tmp_path: Path) -> None:
    assert store_code(lambda: SQLiteSessionStore(tmp_path)) == "store_failed"
    assert store_code(lambda: SQLiteSessionStore(tmp_path / "missing" / "x.db")) == "store_failed"
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(CANARY.encode() * 100)
    error = store_error(lambda: SQLiteSessionStore(garbage))
    assert str(error) == error.code == "store_failed"
    assert CANARY not in repr(error)
    assert str(tmp_path) not in repr(error)


def test_schema_is_created_exactly(path: Path, store: SQLiteSessionStore) -> None:
    tables = _rows(path, "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
    assert dict(tables) == SCHEMA
    assert SCHEMA == {
        "budgets": (
            "CREATE TABLE budgets "
            "(budget_key TEXT PRIMARY KEY, watermark TEXT NOT NULL, claim TEXT)"
        ),
        "sessions": "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT NOT NULL)",
    }
    # Reopening an existing database is fine and changes nothing.
    SQLiteSessionStore(path)
    assert (
        _rows(path, "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        == tables
    )
    assert isinstance(store, SessionStore)


def test_relative_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteSessionStore("relative.sqlite3")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    store.save(SessionRecord(session_key=KEY, binding_digest=BINDING), None)
    assert (tmp_path / "relative.sqlite3").exists()
    assert not (elsewhere / "relative.sqlite3").exists()


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE sessions (session_key TEXT PRIMARY KEY, record TEXT NOT NULL, extra TEXT)",
        "CREATE TABLE sessions (session_key TEXT, record TEXT)",
        "CREATE TABLE budgets (budget_key TEXT PRIMARY KEY, watermark TEXT, claim TEXT)",
        "CREATE VIEW sessions AS SELECT 1 AS session_key, 2 AS record",
    ],
)
def test_foreign_schemas_are_refused(path: Path, statement: str) -> None:
    _execute(path, statement)
    assert store_code(lambda: SQLiteSessionStore(path)) == "store_failed"


def test_triggers_on_our_tables_are_refused(path: Path, store: SQLiteSessionStore) -> None:
    _execute(
        path,
        "CREATE TRIGGER leak AFTER INSERT ON sessions BEGIN "
        "INSERT INTO budgets VALUES (new.session_key, new.record, NULL); END",
    )
    assert store_code(lambda: SQLiteSessionStore(path)) == "store_failed"


def test_repr_and_pickle_hide_nothing_sensitive(path: Path, store: SQLiteSessionStore) -> None:
    assert repr(store) == "SQLiteSessionStore(<path redacted>)"
    assert str(path) not in repr(store)
    clone = pickle.loads(pickle.dumps(store))
    records = record_chain(KEY)
    clone.save(records[0], None)
    assert store.load(KEY) == records[0]


# ---------------------------------------------------------------------------
# load / save


def test_load_missing_and_present(store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    assert store.load(KEY) is None
    store.save(records[0], None)
    assert store.load(KEY) == records[0]


@pytest.mark.parametrize("key", ["key", CANARY, None, KEY.upper(), b"sha256:" + b"0" * 64])
def test_load_refuses_non_digest_keys(store: SQLiteSessionStore, key: object) -> None:
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
        b"\x00\x01",
        42,
    ],
    ids=[
        "not_json",
        "empty",
        "null",
        "other_document",
        "tampered",
        "repeated_key",
        "other_session",
        "blob",
        "integer",
    ],
)
def test_load_refuses_invalid_stored_text(
    path: Path, store: SQLiteSessionStore, stored: object
) -> None:
    _execute(path, "INSERT INTO sessions (session_key, record) VALUES (?, ?)", KEY, stored)
    assert store_code(lambda: store.load(KEY)) == "record_invalid"


def test_save_creates_and_advances(path: Path, store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 4)
    assert store.load(KEY) == records[4]
    assert _rows(path, "SELECT session_key, record FROM sessions") == [(KEY, records[4].to_json())]


def test_save_conflicts(store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    store.save(records[0], None)
    assert store_code(lambda: store.save(records[0], None)) == "record_conflict"
    store.save(records[1], records[0])
    # A stale writer: its previous record is no longer the stored one.
    assert store_code(lambda: store.save(records[1], records[0])) == "record_conflict"
    other = record_chain(session_key("never-saved"))
    assert store_code(lambda: store.save(other[1], other[0])) == "record_conflict"
    assert store.load(KEY) == records[1]


def test_save_conflicts_with_a_concurrently_changed_row(
    path: Path, store: SQLiteSessionStore
) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 1)
    forked = records[0].with_step(SessionStep("verified", digest_of("fork"), 1, 1, None))
    _execute(path, "UPDATE sessions SET record = ? WHERE session_key = ?", forked.to_json(), KEY)
    assert store_code(lambda: store.save(records[2], records[1])) == "record_conflict"


def test_save_transition_refusals(store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 2)
    other_binding = record_chain(KEY, binding=digest_of("other"))
    other_key = record_chain(session_key("other"))
    refused: list[tuple[object, object]] = [
        (records[1], None),  # creating with steps
        (records[3], records[1]),  # skipping a step
        (records[2], records[2]),  # not advancing
        (records[1], records[2]),  # going back
        (other_binding[3], records[2]),  # another binding
        (other_key[3], records[2]),  # another key
        (records[0].to_dict(), None),  # not a record
        (records[3], records[2].to_dict()),
        ("record", records[2]),
    ]
    for record, previous in refused:
        assert store_code(lambda r=record, p=previous: store.save(r, p)) == "record_invalid"  # type: ignore[misc]
    # The release flow owns steps 5 and 6.
    _advance_to_four = records[3]
    store.save(_advance_to_four, records[2])
    store.save(records[4], records[3])
    assert store_code(lambda: store.save(records[5], records[4])) == "record_invalid"
    assert store.load(KEY) == records[4]


def test_check_functions_are_reusable() -> None:
    records = record_chain(KEY)
    check_save(records[0], None)
    check_save(records[4], records[3])
    check_claim(records[4], records[5], BUDGET, MARK_A)
    check_finish(records[5], records[6], BUDGET, MARK_A)
    assert store_code(lambda: check_save(records[5], records[4])) == "record_invalid"
    assert (
        store_code(lambda: check_claim(records[3], records[4], BUDGET, MARK_A)) == "record_invalid"
    )
    assert store_code(lambda: check_claim(records[4], records[5], "x", MARK_A)) == "invalid_digest"
    assert store_code(lambda: check_claim(records[4], records[5], BUDGET, None)) == "invalid_digest"
    assert (
        store_code(lambda: check_finish(records[4], records[5], BUDGET, MARK_A)) == "record_invalid"
    )
    assert (
        store_code(lambda: check_finish(records[5], records[6], BUDGET, CANARY)) == "invalid_digest"
    )
    assert (
        store_code(lambda: check_finish(records[5], records[5], BUDGET, MARK_A)) == "record_invalid"
    )


# ---------------------------------------------------------------------------
# claim_release / finish_release


def test_claim_and_finish(path: Path, store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 4)
    store.claim_release(records[4], records[5], BUDGET, MARK_A)
    assert store.load(KEY) == records[5]
    assert _rows(path, "SELECT budget_key, watermark, claim FROM budgets") == [
        (BUDGET, MARK_A, KEY)
    ]
    store.finish_release(records[5], records[6], BUDGET, MARK_B)
    assert store.load(KEY) == records[6]
    assert _rows(path, "SELECT budget_key, watermark, claim FROM budgets") == [
        (BUDGET, MARK_B, None)
    ]
    # A second session on the same budget key with the stored watermark may claim.
    second = record_chain(session_key("second"))
    advance_to(store, second, 4)
    store.claim_release(second[4], second[5], BUDGET, MARK_B)
    assert _rows(path, "SELECT claim FROM budgets") == [(second[0].session_key,)]


def test_claim_refusals_leave_everything_unchanged(path: Path, store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 4)
    _execute(path, "INSERT INTO budgets VALUES (?, ?, NULL)", BUDGET, MARK_A)
    # A reset or changed ledger: the watermark differs.
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_B)) == (
        "budget_state_unverified"
    )
    assert store.load(KEY) == records[4]
    # Claimed by another session (a crash between claim and finish).
    _execute(path, "UPDATE budgets SET claim = ?", session_key("crashed"))
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_A)) == (
        "budget_state_unverified"
    )
    assert store.load(KEY) == records[4]
    assert _rows(path, "SELECT watermark, claim FROM budgets") == [(MARK_A, session_key("crashed"))]


def test_claim_compare_and_swap(store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 4)
    store.claim_release(records[4], records[5], BUDGET, MARK_A)
    # The loser of a race (same session) sees a conflict, not a second claim.
    assert store_code(lambda: store.claim_release(records[4], records[5], BUDGET, MARK_A)) == (
        "record_conflict"
    )


def test_claim_and_finish_transition_refusals(store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 4)
    assert store_code(lambda: store.claim_release(records[3], records[4], BUDGET, MARK_A)) == (
        "record_invalid"
    )
    assert (
        store_code(lambda: store.claim_release(records[4], records[5], "x", MARK_A))
        == "invalid_digest"
    )
    assert store_code(lambda: store.finish_release(records[4], records[5], BUDGET, MARK_A)) == (
        "record_invalid"
    )
    assert store_code(lambda: store.finish_release(records[5], records[6], BUDGET, "x")) == (
        "invalid_digest"
    )


def test_finish_refusals(path: Path, store: SQLiteSessionStore) -> None:
    records = record_chain(KEY)
    advance_to(store, records, 4)
    store.claim_release(records[4], records[5], BUDGET, MARK_A)
    # Not our claim / no budget row.
    assert store_code(
        lambda: store.finish_release(records[5], records[6], digest_of("other"), MARK_B)
    ) == ("budget_state_unverified")
    _execute(path, "UPDATE budgets SET claim = ?", session_key("thief"))
    assert store_code(lambda: store.finish_release(records[5], records[6], BUDGET, MARK_B)) == (
        "budget_state_unverified"
    )
    _execute(path, "UPDATE budgets SET claim = ?", KEY)
    # A stale claimed record.
    forked = records[4].with_step(SessionStep("release_claimed", digest_of("f"), 1, 1, None))
    assert store_code(
        lambda: store.finish_release(forked, forked.with_step(records[6].steps[5]), BUDGET, MARK_B)
    ) == ("record_conflict")
    store.finish_release(records[5], records[6], BUDGET, MARK_B)
    assert store_code(lambda: store.finish_release(records[5], records[6], BUDGET, MARK_B)) == (
        "record_conflict"
    )


# ---------------------------------------------------------------------------
# Transactions, durability settings and error hygiene


class _TracingConnect:
    """Wraps ``sqlite3.connect`` in the store module and records every statement."""

    def __init__(self, real: Callable[..., sqlite3.Connection]) -> None:
        self.real = real
        self.statements: list[str] = []
        self.on_statement: Callable[[str, str], None] | None = None
        self.pragmas: list[str] = []

    def __call__(self, database: str, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = self.real(database, *args, **kwargs)
        for pragma in self.pragmas:
            connection.execute(pragma)

        def trace(statement: str) -> None:
            self.statements.append(statement)
            if self.on_statement is not None:
                self.on_statement(database, statement)

        connection.set_trace_callback(trace)
        return connection


@pytest.fixture
def tracing(monkeypatch: pytest.MonkeyPatch) -> _TracingConnect:
    tracer = _TracingConnect(sqlite3.connect)
    monkeypatch.setattr(store_module.sqlite3, "connect", tracer)
    return tracer


def test_every_operation_is_one_immediate_synchronous_transaction(
    path: Path, tracing: _TracingConnect
) -> None:
    store = SQLiteSessionStore(path)
    records = record_chain(KEY)
    operations: list[Callable[[], object]] = [
        lambda: store.save(records[0], None),
        lambda: store.save(records[1], records[0]),
        lambda: store.load(KEY),
    ]
    for operation in operations:
        tracing.statements.clear()
        operation()
        assert tracing.statements[0] == "PRAGMA synchronous=FULL"
        assert tracing.statements[1] == "BEGIN IMMEDIATE"
        assert tracing.statements[-1] == "COMMIT"
    tracing.statements.clear()
    assert store_code(lambda: store.save(records[1], records[0])) == "record_conflict"
    assert tracing.statements[-1] == "ROLLBACK"


def test_sqlite_errors_become_fresh_store_failed(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteSessionStore(path)

    def broken(*_args: object, **_kwargs: object) -> sqlite3.Connection:
        raise sqlite3.OperationalError(CANARY + str(path))

    monkeypatch.setattr(store_module.sqlite3, "connect", broken)
    error = store_error(lambda: store.load(KEY))
    assert str(error) == error.code == "store_failed"
    assert CANARY not in repr(error)
    assert str(path) not in str(error)


def test_a_locked_database_times_out_as_store_failed(path: Path) -> None:
    store = SQLiteSessionStore(path, timeout=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        assert store_code(lambda: store.save(record_chain(KEY)[0], None)) == "store_failed"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    store.save(record_chain(KEY)[0], None)


# ---------------------------------------------------------------------------
# Content-freedom: a full session whose every input carries canaries

_TEXT_CANARY = "CANARYTEXT-9d1e"
_IDENTITY_CANARY = "cand-CANARYID-51f0"
_OTHER_CANARY = "ref-CANARYID-77aa"
_REVIEWER_CANARY = "rev-CANARYREV-3c2b"
_KEY_CANARY = b"KEYCANARY-0123456789-abcdefghijklmnopq"
_SCORES = (0.7182818, 0.3141592)


def _canaries(tmp_path: Path) -> list[bytes]:
    mean = sum(_SCORES) / len(_SCORES)
    texts = [
        _TEXT_CANARY,
        _IDENTITY_CANARY,
        _OTHER_CANARY,
        _REVIEWER_CANARY,
        "Placeholder",
        "patient note",
        "candidate answer",
        "Grounded?",
        str(tmp_path),
        *(repr(score) for score in (*_SCORES, mean)),
        *(f"{score:.6f}" for score in (*_SCORES, mean)),
    ]
    return [text.encode("utf-8") for text in texts] + [_KEY_CANARY, _KEY_CANARY.hex().encode()]


def _run_canary_sessions(path: Path) -> None:
    world = make_world(
        tag=_TEXT_CANARY,
        scores=_SCORES,
        identity=_IDENTITY_CANARY,
        other=_OTHER_CANARY,
        reviewer=_REVIEWER_CANARY,
        key=_KEY_CANARY,
    )
    ledger = make_ledger(world)
    store = SQLiteSessionStore(path)
    providers = Providers(world)
    first = open_session(world, store, session_key("canary-1"), ledger=ledger, providers=providers)
    feedback = first.run()
    assert feedback.per_case_scores == _SCORES
    # Packets really carried the texts the database must not hold.
    assert any(_TEXT_CANARY in packet.to_json() for packet in providers.packets)
    open_session(world, store, session_key("canary-2"), ledger=ledger).run()
    # A failed, a crashed-after-claim and a replayed session too.
    world.outputs["source-0"] = "?!"
    assert store_code(open_session(world, store, session_key("canary-3"), ledger=ledger).run) == (
        "forensics_failed"
    )


def _assert_content_free(path: Path, blobs: dict[str, bytes], canaries: list[bytes]) -> None:
    assert blobs, "nothing to scan"
    for name, blob in blobs.items():
        for canary in canaries:
            assert canary not in blob, (name, canary)
    # Every stored value is a digest, a count, a tick or a band.
    for key, text in _rows(path, "SELECT session_key, record FROM sessions"):
        record = SessionRecord.from_json(text)
        assert record.session_key == key
        assert set(record.to_dict()) == {
            "binding_digest",
            "schema_version",
            "session_digest",
            "session_key",
            "steps",
        }
    for row in _rows(path, "SELECT budget_key, watermark, claim FROM budgets"):
        assert all(
            value is None or (value.startswith("sha256:") and len(value) == 71) for value in row
        )


def _files(path: Path) -> dict[str, bytes]:
    found = {}
    for candidate in path.parent.iterdir():
        if candidate.name.startswith(path.name):
            found[candidate.name] = candidate.read_bytes()
    return found


def test_database_and_wal_are_content_free(tmp_path: Path) -> None:
    path = tmp_path / "wal.sqlite3"
    SQLiteSessionStore(path)
    keeper = sqlite3.connect(path, isolation_level=None)
    try:
        assert keeper.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        # An open read transaction keeps the WAL file (no final checkpoint, no reset).
        keeper.execute("BEGIN")
        keeper.execute("SELECT COUNT(*) FROM sessions").fetchone()
        _run_canary_sessions(path)
        blobs = _files(path)
        assert blobs.get(path.name + "-wal"), "the WAL must hold the transactions"
        # The scan is meaningful: the WAL holds the records we wrote.
        assert session_key("canary-1").encode() in blobs[path.name + "-wal"]
        _assert_content_free(path, blobs, _canaries(tmp_path))
    finally:
        keeper.execute("ROLLBACK")
        keeper.close()


def test_database_and_persisted_rollback_journal_are_content_free(
    tmp_path: Path, tracing: _TracingConnect
) -> None:
    path = tmp_path / "persist.sqlite3"
    tracing.pragmas.append("PRAGMA journal_mode=PERSIST")
    _run_canary_sessions(path)
    blobs = _files(path)
    assert blobs.get(path.name + "-journal"), "PERSIST keeps the journal file"
    _assert_content_free(path, blobs, _canaries(tmp_path))


def test_rollback_journals_copied_mid_transaction_are_content_free(
    tmp_path: Path, tracing: _TracingConnect
) -> None:
    path = tmp_path / "delete.sqlite3"
    copies = tmp_path / "journal-copies"
    copies.mkdir()

    def copy_journal(database: str, statement: str) -> None:
        journal = Path(database + "-journal")
        if statement == "COMMIT" and journal.exists():
            shutil.copyfile(journal, copies / f"{len(list(copies.iterdir())):04d}")

    tracing.on_statement = copy_journal
    _run_canary_sessions(path)
    blobs = {f"copy-{item.name}": item.read_bytes() for item in copies.iterdir()}
    assert len(blobs) >= 10, "every write transaction leaves a journal to inspect"
    assert any(session_key("canary-1").encode() in blob for blob in blobs.values())
    blobs.update(_files(path))
    _assert_content_free(path, blobs, _canaries(tmp_path))


def test_claim_happens_before_the_ledger_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "order.sqlite3"
    world = make_world()
    ledger = make_ledger(world)
    store = SQLiteSessionStore(path)
    seen: list[object] = []

    class WatchingLedger:
        def policy_for(self, epoch: object) -> Any:
            return ledger.policy_for(epoch)

        def snapshot(self, epoch: object, submission: object) -> Any:
            return ledger.snapshot(epoch, submission)

        def record_official_attempt(self, epoch: object, submission: object, **outcome: Any) -> Any:
            seen.extend(_rows(path, "SELECT claim FROM budgets"))
            seen.append(len(SQLiteSessionStore(path).load(session_key(1)).steps))  # type: ignore[union-attr]
            return ledger.record_official_attempt(epoch, submission, **outcome)

    open_session(world, store, session_key(1), ledger=WatchingLedger()).run()
    assert seen == [(session_key(1),), 5]


def test_store_exposes_its_path_but_never_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "canary-private-name.db"
    store = SQLiteSessionStore(path, timeout=2.5)
    assert store.path == str(path.absolute())
    assert store.timeout == 2.5
    assert "canary" not in repr(store)
