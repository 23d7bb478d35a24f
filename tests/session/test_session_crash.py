"""Crashes and races with real processes: SIGKILL at every step boundary, racing claims.

Every scenario runs the session in a child process (``multiprocessing`` with
the ``fork`` start method) against one SQLite file; the child kills itself
with ``SIGKILL`` from an injected store or provider hook at the chosen
point, then *another* child process reopens the store and reports what it
sees. Results travel back as plain data through a queue.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sealeval.session.record import SessionRecord
from sealeval.session.session import EvaluationSessionError
from sealeval.session.store import SQLiteSessionStore
from support.session_world import (
    Clock,
    Providers,
    World,
    make_ledger,
    make_world,
    open_session,
    session_key,
)

CTX = multiprocessing.get_context("fork")
WAIT = 20.0
PHASES = ("verified", "cases", "forensics", "adjudication", "release_claimed")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _KillingStore:
    """A real SQLite store that SIGKILLs the process right after a chosen durable write."""

    def __init__(self, path: str, crash_after: str | None) -> None:
        self.inner = SQLiteSessionStore(path)
        self.crash_after = crash_after

    def load(self, key: str) -> SessionRecord | None:
        return self.inner.load(key)

    def save(self, record: SessionRecord, previous: SessionRecord | None) -> None:
        self.inner.save(record, previous)
        if record.steps and record.steps[-1].phase == self.crash_after:
            _die()

    def claim_release(self, *args: Any) -> None:
        self.inner.claim_release(*args)
        if self.crash_after == "release_claimed":
            _die()

    def finish_release(self, *args: Any) -> None:
        self.inner.finish_release(*args)


class _DyingLedger:
    """The real ledger, except that the process dies while recording the attempt."""

    def __init__(self, world: World) -> None:
        self.inner = make_ledger(world)

    def policy_for(self, epoch: object) -> Any:
        return self.inner.policy_for(epoch)

    def snapshot(self, epoch: object, submission: object) -> Any:
        return self.inner.snapshot(epoch, submission)

    def record_official_attempt(self, epoch: object, submission: object, **outcome: Any) -> Any:
        self.inner.record_official_attempt(epoch, submission, **outcome)
        _die()


def _outcome(action: Callable[[], Any]) -> dict[str, Any]:
    """Run ``action`` and describe its result as plain data."""
    try:
        result = action()
    except EvaluationSessionError as error:
        return {"error": error.code}
    return {"ok": None if result is None else result.to_dict()}


def _child(queue: Any, job: Callable[[], dict[str, Any]]) -> None:
    try:
        queue.put(job())
    except BaseException as error:
        queue.put({"crashed_with": type(error).__name__})


def _in_process(job: Callable[[], dict[str, Any]]) -> tuple[int | None, dict[str, Any] | None]:
    """Run ``job`` in a forked child; return its exit code and reported result (if any)."""
    queue = CTX.Queue()
    process = CTX.Process(target=_child, args=(queue, job))
    process.start()
    process.join(WAIT)
    if process.is_alive():  # pragma: no cover - a hung child is a failure
        process.kill()
        pytest.fail("child process hung")
    result = queue.get(timeout=1) if not queue.empty() else None
    queue.close()
    return process.exitcode, result


def _run_until_crash(
    path: str, label: str, crash_after: str | None, **overrides: Any
) -> dict[str, Any]:
    world = make_world()
    store = _KillingStore(path, crash_after)
    ledger = overrides.pop("ledger", None) or make_ledger(world)
    session = open_session(world, store, session_key(label), ledger=ledger, **overrides)
    return _outcome(session.run)


def _recover(path: str, label: str) -> dict[str, Any]:
    """Reopen in a new process with a fresh ledger (the old one died with its process)."""
    world = make_world()
    providers = Providers(world)
    store = SQLiteSessionStore(path)
    try:
        session = open_session(
            world, store, session_key(label), ledger=make_ledger(world), providers=providers
        )
    except EvaluationSessionError as error:
        return {"open": error.code}
    result = _outcome(session.run)
    result["calls"] = providers.calls
    result["record"] = session.record.to_json()
    return result


def _budget_rows(path: str) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT budget_key, watermark, claim FROM budgets").fetchall()
    finally:
        connection.close()


def _stored(path: str, label: str) -> SessionRecord | None:
    return SQLiteSessionStore(path).load(session_key(label))


# ---------------------------------------------------------------------------
# Crashes at every step boundary


@pytest.mark.parametrize("crash_after", PHASES[:4])
def test_crash_before_the_claim_replays_and_releases_exactly_once(
    tmp_path: Path, crash_after: str
) -> None:
    path = str(tmp_path / "sessions.sqlite3")
    code, result = _in_process(lambda: _run_until_crash(path, "s", crash_after))
    assert code == -signal.SIGKILL
    assert result is None
    stored = _stored(path, "s")
    assert stored is not None
    assert stored.steps[-1].phase == crash_after
    completed = len(stored.steps)

    code, recovered = _in_process(lambda: _recover(path, "s"))
    assert code == 0
    assert recovered is not None
    feedback = recovered["ok"]
    assert feedback["decision"]["official_attempt_number"] == 1
    assert feedback["decision"]["feedback_level"] == "detailed"
    final = SessionRecord.from_json(recovered["record"])
    assert final.steps[:completed] == stored.steps  # replayed, ticks kept
    assert [step.phase for step in final.steps][-1] == "released"
    assert feedback["session_digest"] == final.session_digest
    # Providers were called again for the replayed steps (they must be deterministic).
    assert recovered["calls"] == ["runner", "scorer", "runner", "scorer", "review"]
    [(_key, _watermark, claim)] = _budget_rows(path)
    assert claim is None

    # Exactly once: any further process is refused.
    code, again = _in_process(lambda: _recover(path, "s"))
    assert (code, again) == (0, {"open": "feedback_already_claimed"})


@pytest.mark.parametrize("where", ["store_claim", "ledger"])
def test_crash_after_the_claim_locks_the_budget(tmp_path: Path, where: str) -> None:
    path = str(tmp_path / "sessions.sqlite3")
    world = make_world()

    def crash() -> dict[str, Any]:
        if where == "ledger":
            return _run_until_crash(path, "s", None, ledger=_DyingLedger(world))
        return _run_until_crash(path, "s", "release_claimed")

    code, result = _in_process(crash)
    assert (code, result) == (-signal.SIGKILL, None)
    stored = _stored(path, "s")
    assert stored is not None
    assert stored.steps[-1].phase == "release_claimed"
    assert [row[2] for row in _budget_rows(path)] == [session_key("s")]

    # Lost feedback, never duplicate feedback: the same session is refused ...
    code, same = _in_process(lambda: _recover(path, "s"))
    assert (code, same) == (0, {"open": "feedback_already_claimed"})
    # ... and every other session on the budget key too, with no unlock path.
    code, other = _in_process(lambda: _recover(path, "other"))
    assert code == 0
    assert other is not None
    assert other["error"] == "budget_state_unverified"
    assert len(SessionRecord.from_json(other["record"]).steps) == 4
    assert [row[2] for row in _budget_rows(path)] == [session_key("s")]


def test_crash_inside_the_reviewer_repeats_reviewer_io(tmp_path: Path) -> None:
    """Documented limit: the reviewer runs before the adjudication step is durable."""
    path = str(tmp_path / "sessions.sqlite3")

    def dying_review(_packets: object) -> None:
        _die()

    code, result = _in_process(lambda: _run_until_crash(path, "s", None, review=dying_review))
    assert (code, result) == (-signal.SIGKILL, None)
    stored = _stored(path, "s")
    assert stored is not None
    assert stored.steps[-1].phase == "forensics"
    code, recovered = _in_process(lambda: _recover(path, "s"))
    assert code == 0
    assert recovered is not None
    assert "ok" in recovered
    assert recovered["calls"].count("review") == 1  # the packets are shown a second time


# ---------------------------------------------------------------------------
# Races between processes


def _prepare_at_adjudication(path: str, labels: list[str]) -> None:
    world = make_world()
    store = SQLiteSessionStore(path)
    for label in labels:
        session = open_session(
            world, store, session_key(label), ledger=make_ledger(world), clock=Clock()
        )
        session.verify()
        session.run_cases()
        session.run_forensics()
        session.build_adjudication()


def _racer(path: str, label: str, barrier: Any) -> dict[str, Any]:
    world = make_world()
    session = open_session(
        world, SQLiteSessionStore(path), session_key(label), ledger=make_ledger(world)
    )
    session.verify()
    session.run_cases()
    session.run_forensics()
    session.build_adjudication()
    barrier.wait(WAIT)
    return _outcome(session.release_feedback)


def _race(path: str, labels: list[str]) -> list[dict[str, Any]]:
    barrier = CTX.Barrier(len(labels))
    queue = CTX.Queue()
    processes = [
        CTX.Process(target=_child, args=(queue, lambda label=label: _racer(path, label, barrier)))
        for label in labels
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=WAIT) for _ in processes]
    for process in processes:
        process.join(WAIT)
        assert process.exitcode == 0
    queue.close()
    return results


@pytest.mark.parametrize("round_number", range(3))
def test_two_processes_claiming_the_same_session(tmp_path: Path, round_number: int) -> None:
    path = str(tmp_path / f"race-{round_number}.sqlite3")
    _prepare_at_adjudication(path, ["s"])
    results = _race(path, ["s", "s"])
    winners = [result for result in results if "ok" in result]
    losers = [result for result in results if "error" in result]
    assert len(winners) == 1, results
    assert len(losers) == 1, results
    assert losers[0]["error"] in {"record_conflict", "feedback_already_claimed"}
    stored = _stored(path, "s")
    assert stored is not None
    assert stored.session_digest == winners[0]["ok"]["session_digest"]
    assert [row[2] for row in _budget_rows(path)] == [None]


@pytest.mark.parametrize("round_number", range(3))
def test_two_sessions_racing_for_one_budget(tmp_path: Path, round_number: int) -> None:
    path = str(tmp_path / f"budget-race-{round_number}.sqlite3")
    _prepare_at_adjudication(path, ["a", "b"])
    results = _race(path, ["a", "b"])
    winners = [result for result in results if "ok" in result]
    losers = [result for result in results if "error" in result]
    assert len(winners) == 1, results
    assert [loser["error"] for loser in losers] == ["budget_state_unverified"]
    records = [_stored(path, label) for label in ("a", "b")]
    assert sorted(len(record.steps) for record in records if record is not None) == [4, 6]
    assert [row[2] for row in _budget_rows(path)] == [None]
