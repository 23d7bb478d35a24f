"""The shared PostgreSQL store and the durable ledger under load and faults, with real processes.

* **Race**: 8 worker processes race 200 official attempts (distinct session
  keys, one budget key) against one database: exactly the budgeted number of
  feedbacks is released, every other attempt is refused with a closed code,
  and the stored usage equals the released decisions.
* **Kills**: a worker is killed with ``SIGKILL`` at every step boundary of a
  session (after each durable step, and before and after the ``COMMIT`` of the
  claim, the ledger decision and the finish); another process recovers. At
  most that attempt's feedback is lost, none is ever delivered twice.
* **Server restart**: the PostgreSQL server is restarted (``pg_ctl restart -m
  immediate``, a crash) while workers run sessions; afterwards every claim is
  released or locked, never ambiguous (the ledger audit finds no problem).

Workers are forked (``multiprocessing`` ``fork`` context) and open their own
store and ledger from the DSN; results come back through a ``SimpleQueue``,
whose ``put`` is written synchronously (a ``SIGKILL`` cannot lose a result
that was already put).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import secrets
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from sealeval.session.durable_ledger import DurableBudgetLedger
from sealeval.session.postgres_store import PostgresSessionStore
from sealeval.session.record import ERROR_CODES, EvaluationSessionError, SessionRecord
from sealeval.session.session import EvaluationSession
from sealeval.session.store import SessionStore
from sealeval.session.store_factory import open_session_store
from support.postgres import (
    PostgresUnavailableError,
    fresh_database,
    restart_server,
)
from support.session_store import pg_uri
from support.session_world import World, make_world, open_session, session_key

CTX = multiprocessing.get_context("fork")
WAIT = 180.0
WORKERS = 8
ATTEMPTS = 200
#: 1 + rerun_limit official attempts per pair: the budget of the race.
RERUN_LIMIT = 4
DETAILED_LIMIT = 2
BUDGET = 1 + RERUN_LIMIT
PHASES = ("verified", "cases", "forensics", "adjudication")


@pytest.fixture(scope="module")
def load_dsn(postgres_dsn: str) -> Iterator[str]:
    with fresh_database(postgres_dsn, "load") as dsn:
        yield dsn


@pytest.fixture
def location(load_dsn: str) -> str:
    """A ``postgresql://`` URI of a fresh schema in the module's database."""
    schema = f"l_{secrets.token_hex(6)}"
    with psycopg.connect(load_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    return pg_uri(load_dsn, schema=schema)


def _world(tag: str = "SYNTH", rerun_limit: int = RERUN_LIMIT) -> World:
    return make_world(tag=tag, detailed_limit=DETAILED_LIMIT, rerun_limit=rerun_limit)


def _pair(world: World) -> tuple[str, str]:
    return world.holdout.commitment_digest, world.manifest.manifest_digest


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _prepared(world: World, store: Any, ledger: Any, label: str) -> EvaluationSession:
    """A session that has run its first four steps (replaying whatever is stored)."""
    session = open_session(world, store, session_key(label), ledger=ledger)
    session.verify()
    session.run_cases()
    session.run_forensics()
    session.build_adjudication()
    return session


def _spawn(target: Callable[..., None], *args: Any) -> Any:
    process = CTX.Process(target=target, args=args)
    process.start()
    return process


def _join(processes: list[Any]) -> None:
    deadline = time.monotonic() + WAIT
    for process in processes:
        process.join(max(0.1, deadline - time.monotonic()))
        if process.is_alive():  # pragma: no cover - a hung worker is a failure
            process.kill()
            pytest.fail("worker process hung")


# ---------------------------------------------------------------------------
# 8 workers race 200 official attempts against one budget


def _release_with_retries(session: EvaluationSession) -> tuple[str, Any]:
    """Release, retrying while another session holds the budget claim (a closed code)."""
    for _retry in range(400):
        try:
            feedback = session.release_feedback()
        except EvaluationSessionError as error:
            if error.code != "budget_state_unverified":
                return ("refused", error.code)
            time.sleep(random.uniform(0.001, 0.01))
            continue
        decision = feedback.decision
        return ("released", (decision.feedback_level, decision.official_attempt_number))
    return ("refused", "budget_state_unverified")


def _racer(location: str, labels: list[str], barrier: Any, results: Any) -> None:
    world = _world()
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store)
    barrier.wait(WAIT)
    for label in labels:
        try:
            outcome = _release_with_retries(_prepared(world, store, ledger, label))
        except EvaluationSessionError as error:
            outcome = ("refused", error.code)
        results.put((label, *outcome))


def test_eight_workers_racing_200_attempts_release_exactly_the_budget(location: str) -> None:
    world = _world()
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store, [world.policy])
    labels = [f"race-{index}" for index in range(ATTEMPTS)]
    barrier = CTX.Barrier(WORKERS)
    results = CTX.SimpleQueue()
    workers = [
        _spawn(_racer, location, labels[index::WORKERS], barrier, results)
        for index in range(WORKERS)
    ]
    _join(workers)
    assert [worker.exitcode for worker in workers] == [0] * WORKERS
    outcomes = [results.get() for _ in range(ATTEMPTS)]
    assert results.empty()
    assert sorted(label for label, *_rest in outcomes) == sorted(labels)

    released = [detail for _label, kind, detail in outcomes if kind == "released"]
    refused = Counter(detail for _label, kind, detail in outcomes if kind == "refused")
    # Exactly the budget, never more: attempt numbers 1..budget, each once.
    assert len(released) == BUDGET
    assert sorted(number for _level, number in released) == list(range(1, BUDGET + 1))
    assert Counter(level for level, _number in released) == {
        "detailed": DETAILED_LIMIT,
        "coarse": BUDGET - DETAILED_LIMIT,
    }
    # Every other attempt is refused with a closed code.
    assert sum(refused.values()) == ATTEMPTS - BUDGET
    assert set(refused) <= {"rerun_budget_exhausted", "budget_state_unverified"}
    assert refused["rerun_budget_exhausted"] >= ATTEMPTS - BUDGET - WORKERS
    # The stored usage equals the released decisions.
    usage = ledger.usage(*_pair(world))
    assert (usage.official_attempts, usage.scored_attempts) == (BUDGET, BUDGET)
    assert usage.detailed_feedback_used == DETAILED_LIMIT
    status = ledger.budget_status(*_pair(world))
    assert (status.state, status.claim) == ("open", None)
    assert (status.released, status.denied) == (BUDGET, refused["rerun_budget_exhausted"])
    audit = ledger.audit()
    assert audit.problems == ()
    assert audit.sessions["released"] == BUDGET
    assert audit.sessions["budget_denied"] == refused["rerun_budget_exhausted"]


# ---------------------------------------------------------------------------
# SIGKILL at every step boundary

_ARMED: list[bool] = []


def _arm_commit_kill() -> None:
    """In this (child) process: the next psycopg COMMIT kills the process instead."""
    real = psycopg.Connection.commit

    def commit(self: psycopg.Connection[Any]) -> None:
        if _ARMED:
            _die()
        real(self)

    psycopg.Connection.commit = commit  # type: ignore[method-assign]


class _KillingStore:
    """The real store; the process dies at the chosen boundary of the chosen session."""

    def __init__(self, inner: SessionStore, boundary: str) -> None:
        self.inner = inner
        self.boundary = boundary

    def load(self, key: str) -> SessionRecord | None:
        return self.inner.load(key)

    def save(self, record: SessionRecord, previous: SessionRecord | None) -> None:
        self.inner.save(record, previous)
        if record.steps and record.steps[-1].phase == self.boundary:
            _die()

    def claim_release(self, *args: Any) -> None:
        self._around("claim", lambda: self.inner.claim_release(*args))

    def finish_release(self, *args: Any) -> None:
        self._around("finish", lambda: self.inner.finish_release(*args))

    def _around(self, step: str, action: Callable[[], None]) -> None:
        if self.boundary == f"{step}:before_commit":
            _ARMED.append(True)
        action()
        if self.boundary == f"{step}:after_commit":
            _die()


class _KillingLedger:
    """The durable ledger; the process dies before or after the decision's COMMIT."""

    def __init__(self, inner: DurableBudgetLedger, boundary: str) -> None:
        self.inner = inner
        self.boundary = boundary

    def policy_for(self, epoch: object) -> Any:
        return self.inner.policy_for(epoch)

    def snapshot(self, epoch: object, submission: object) -> Any:
        return self.inner.snapshot(epoch, submission)

    def record_official_attempt(self, epoch: object, submission: object, **outcome: Any) -> Any:
        if self.boundary == "decision:before_commit":
            _ARMED.append(True)
        decision = self.inner.record_official_attempt(epoch, submission, **outcome)
        if self.boundary == "decision:after_commit":
            _die()
        return decision


def _outcome(action: Callable[[], Any]) -> tuple[str, Any]:
    try:
        feedback = action()
    except EvaluationSessionError as error:
        return ("refused", error.code)
    return ("released", feedback.decision.official_attempt_number)


def _doomed(location: str, boundary: str, results: Any) -> None:
    _arm_commit_kill()
    world = _world()
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store)
    results.put(
        ("before", _outcome(open_session(world, store, session_key("a"), ledger=ledger).run))
    )
    killing = _KillingStore(store, boundary)
    session = open_session(
        world, killing, session_key("k"), ledger=_KillingLedger(ledger, boundary)
    )
    results.put(("killed", _outcome(session.run)))  # reached only if no kill happened


def _recover(location: str, results: Any) -> None:
    world = _world()
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store)
    for label in ("k", "b"):
        try:
            session = open_session(world, store, session_key(label), ledger=ledger)
        except EvaluationSessionError as error:
            results.put((label, ("refused", error.code)))
            continue
        results.put((label, _outcome(session.run)))


BOUNDARIES = (
    *PHASES,
    "claim:before_commit",
    "claim:after_commit",
    "decision:before_commit",
    "decision:after_commit",
    "finish:before_commit",
    "finish:after_commit",
)
#: boundary -> (the killed attempt's fate, whether its charge was committed)
FATES = {
    **dict.fromkeys((*PHASES, "claim:before_commit"), ("replayed", False)),
    "claim:after_commit": ("locked_undecided", False),
    "decision:before_commit": ("locked_undecided", False),
    "decision:after_commit": ("locked_decided", True),
    "finish:before_commit": ("locked_decided", True),
    "finish:after_commit": ("released_unseen", True),
}


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_sigkill_at_every_step_boundary_loses_at_most_that_feedback(
    location: str, boundary: str
) -> None:
    world = _world()
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store, [world.policy])
    results = CTX.SimpleQueue()
    doomed = _spawn(_doomed, location, boundary, results)
    _join([doomed])
    assert doomed.exitcode == -signal.SIGKILL
    reported = [results.get()]
    assert results.empty()
    assert reported == [("before", ("released", 1))]
    recovery = _spawn(_recover, location, results)
    _join([recovery])
    assert recovery.exitcode == 0
    recovered = dict([results.get(), results.get()])

    fate, charged = FATES[boundary]
    stored = store.load(session_key("k"))
    assert stored is not None
    status = ledger.budget_status(*_pair(world))
    delivered = [("a", 1)]
    if fate == "replayed":
        # Nothing durable about the release had happened: the replay releases once.
        assert recovered == {"k": ("released", 2), "b": ("released", 3)}
        delivered += [("k", 2), ("b", 3)]
        assert (status.state, status.snapshot.official_attempts) == ("open", 3)
    elif fate == "released_unseen":
        # Released in the database, but the process died before handing it over.
        assert [step.phase for step in stored.steps][-1] == "released"
        assert recovered == {
            "k": ("refused", "feedback_already_claimed"),
            "b": ("released", 3),
        }
        delivered += [("b", 3)]
        assert (status.state, status.snapshot.official_attempts) == ("open", 3)
    else:
        # Locked: that attempt's feedback is lost, nobody can release on the budget key.
        assert len(stored.steps) == 5
        assert recovered == {
            "k": ("refused", "feedback_already_claimed"),
            "b": ("refused", "budget_state_unverified"),
        }
        assert (status.state, status.claim) == ("locked", session_key("k"))
        assert status.claim_decided is charged
        assert status.snapshot.official_attempts == 1 + charged
        assert ledger.audit().sessions[fate] == 1
    # Never duplicated: each delivered feedback has its own session and attempt number.
    assert len({label for label, _number in delivered}) == len(delivered)
    assert len({number for _label, number in delivered}) == len(delivered)
    # At most that attempt's feedback lost: charges = delivered + (1 if it was charged).
    expected_charges = len(delivered) + (1 if charged and fate != "replayed" else 0)
    assert ledger.usage(*_pair(world)).official_attempts == expected_charges
    assert ledger.audit().problems == ()


# ---------------------------------------------------------------------------
# A server restart in the middle of a run


RESTART_TAGS = ("R1", "R2", "R3", "R4", "R5", "R6")
#: Retries of one session key while another session holds its budget claim.
CLAIM_RETRIES = 40


def _restart_worker(location: str, worker: int, stop: Any, results: Any) -> None:
    """Run sessions until stopped, cycling through the budget keys (one per tag).

    When the server is away (``store_failed``, or ``invalid_configuration``
    when the ledger's policy lookup at construction fails), the same session
    key is reopened and replayed. When another session holds the budget claim
    (``budget_state_unverified``) the key is retried a while, then given up:
    a claim locked by the crash stays locked forever, by design.
    """
    worlds = [_world(tag, rerun_limit=10_000) for tag in RESTART_TAGS]
    store: SessionStore | None = None
    ledger: DurableBudgetLedger | None = None
    failures = 0
    attempt = 0
    while not stop.is_set():
        index = (worker + attempt) % len(RESTART_TAGS)
        world, label = worlds[index], f"{RESTART_TAGS[index]}-{worker}-{attempt}"
        outcome: tuple[str, Any] = ("gave_up", "stopped")
        claim_retries = 0
        while not stop.is_set():
            try:
                if store is None or ledger is None:
                    store = open_session_store(location, timeout=5)
                    ledger = DurableBudgetLedger(store)
                session = open_session(world, store, session_key(label), ledger=ledger)
                outcome = _outcome(session.run)
            except EvaluationSessionError as error:
                outcome = ("refused", error.code)
            code = outcome[1] if outcome[0] == "refused" else None
            if code in ("store_failed", "invalid_configuration"):
                failures += 1
            elif code != "budget_state_unverified" or claim_retries >= CLAIM_RETRIES:
                break
            claim_retries += code == "budget_state_unverified"
            time.sleep(0.05)
        results.put((label, *outcome))
        attempt += 1
    results.put(("failures", worker, failures))


def _released_sessions(ledger: DurableBudgetLedger) -> int:
    return int(ledger.audit().sessions["released"])


def _server_start(store: SessionStore) -> object:
    assert isinstance(store, PostgresSessionStore)
    row = store.run_transaction(lambda cursor: cursor.fetchone("SELECT pg_postmaster_start_time()"))
    assert row is not None
    return row[0]


def _drain(results: Any, into: list[Any]) -> None:
    while not results.empty():
        into.append(results.get())


def test_a_server_restart_leaves_every_claim_released_or_locked(location: str) -> None:
    worlds = [_world(tag, rerun_limit=10_000) for tag in RESTART_TAGS]
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store, [world.policy for world in worlds])
    stop = CTX.Event()
    results = CTX.SimpleQueue()
    count = 6
    workers = [_spawn(_restart_worker, location, index, stop, results) for index in range(count)]
    items: list[Any] = []

    def wait_for_releases(minimum: int) -> None:
        """Drain results (workers must never block on a full pipe) until ``minimum`` releases."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            _drain(results, items)
            try:
                if _released_sessions(ledger) >= minimum:
                    return
            except EvaluationSessionError:
                pass  # the server is restarting
            time.sleep(0.05)

    try:
        wait_for_releases(12)
        before = _released_sessions(ledger)
        started = _server_start(store)
        try:
            # A crash, and the server stays away longer than the store's retries.
            restart_server("immediate", down_for=1.0)
        except PostgresUnavailableError:  # pragma: no cover - external server
            pytest.skip("the server is external (SEALEVAL_TEST_POSTGRES_DSN): cannot restart it")
        wait_for_releases(before + 12)
    finally:
        stop.set()
        deadline = time.monotonic() + WAIT
        while any(worker.is_alive() for worker in workers) and time.monotonic() < deadline:
            _drain(results, items)
            time.sleep(0.02)
        _join(workers)
        _drain(results, items)
    assert [worker.exitcode for worker in workers] == [0] * count
    outcomes = [item for item in items if item[0] != "failures"]
    failures = sum(item[2] for item in items if item[0] == "failures")
    # The restart really happened in the middle of the run and interrupted it.
    assert _server_start(store) != started
    assert failures > 0
    released = [(label, number) for label, kind, number in outcomes if kind == "released"]
    # Whatever was not released was refused with a closed code (or stopped by the test).
    others = {(kind, detail) for _label, kind, detail in outcomes if kind != "released"}
    assert {kind for kind, _detail in others} <= {"refused", "gave_up"}
    assert {detail for kind, detail in others if kind == "refused"} <= set(ERROR_CODES)
    # Never ambiguous: every claim is released (with its decision) or locked.
    audit = DurableBudgetLedger(open_session_store(location)).audit()
    assert audit.problems == ()
    assert audit.sessions["released"] >= len(released) > 24
    # Nothing was delivered twice.
    assert len({label for label, _number in released}) == len(released)
    per_world: dict[str, list[int]] = {}
    for label, number in released:
        per_world.setdefault(label.split("-")[0], []).append(number)
    for numbers in per_world.values():
        assert len(set(numbers)) == len(numbers)
    for world in worlds:
        status = ledger.budget_status(*_pair(world))
        assert status.state in ("open", "locked")
        assert status.snapshot.official_attempts == status.released
        if status.state == "locked":
            assert status.claim is not None
