"""The fail-closed evaluation session (spec 30): vectors, order guards, refusals, replay, budget.

Also home of the deterministic synthetic *world* builder that
``test_session_store.py`` and ``test_session_crash.py`` import.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import pickle
import sqlite3
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sealeval.canonical import digest_openmed, encode_openmed
from sealeval.errors import SealevalError
from sealeval.manifest.sealed import seal_workflow_manifest
from sealeval.session import record as record_module
from sealeval.session import session as session_module
from sealeval.session import store as store_module
from sealeval.session.adjudication import BlindedPacket, MappingAudit
from sealeval.session.budget import (
    FeedbackBudgetDecision,
    FeedbackBudgetLedger,
    FeedbackBudgetPolicy,
    FeedbackBudgetSnapshot,
)
from sealeval.session.cases import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    evaluation_case_digest,
)
from sealeval.session.holdout import commit_holdout
from sealeval.session.record import ERROR_CODES, SessionRecord, SessionStep
from sealeval.session.session import (
    BudgetLedger,
    EvaluationSession,
    EvaluationSessionError,
    SessionFeedback,
    binding_digest,
    budget_key,
    budget_watermark,
)
from sealeval.session.store import SessionStore, SQLiteSessionStore
from support.refusals import CANARY, assert_refused
from support.session_world import (
    Clock,
    Providers,
    World,
    digest_of,
    make_ledger,
    make_world,
    open_session,
    session_key,
    session_kwargs,
)
from support.vectors import cases, decode_input

VECTORS = "openmed/session.json"


# ---------------------------------------------------------------------------
# The synthetic world (shared with the store and crash tests)


def error_of(action: Callable[[], object]) -> EvaluationSessionError:
    """Run ``action``, expect a fresh session error, and return it."""
    with pytest.raises(EvaluationSessionError) as caught:
        action()
    error = caught.value
    assert error.__cause__ is None
    assert error.__context__ is None
    assert str(error) == error.code
    assert error.code in ERROR_CODES
    return error


def code_of(action: Callable[[], object]) -> str:
    """Return the code of the session error ``action`` raises."""
    return error_of(action).code


# ---------------------------------------------------------------------------
# Golden vectors

_OVERRIDES = frozenset(
    {
        "runner_raises",
        "scores",
        "component_snapshot",
        "ledger",
        "ledger_record_raises",
        "clock_returns",
        "holdout_case_manifest",
        "canaries",
        "candidate_manifests",
    }
)
_SESSION_OPS = frozenset(
    {"verify", "run_cases", "run_forensics", "build_adjudication", "release_feedback", "run"}
)


class _RaisingLedger:
    """The scenario ledger, except that recording an attempt fails (after the claim)."""

    def __init__(self, inner: FeedbackBudgetLedger) -> None:
        self.inner = inner

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        return self.inner.policy_for(epoch_digest)

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        return self.inner.snapshot(epoch_digest, submission_digest)

    def record_official_attempt(
        self, epoch_digest: object, submission_digest: object, **_outcome: object
    ) -> FeedbackBudgetDecision:
        raise RuntimeError(CANARY)


class _NotAPolicyLedger(_RaisingLedger):
    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        return self.inner.policy_for(epoch_digest).to_dict()  # type: ignore[return-value]


class _VectorScenario:
    """Interprets one ``session.json`` scenario against a real SQLite file."""

    def __init__(self, case: Mapping[str, Any], tmp_path: Path) -> None:
        config = decode_input(case["input"]["config"])
        self.config = config
        self.manifest = seal_workflow_manifest(config["components"])
        self.cases = tuple(
            ComparisonCase(
                case_ref=item["case_ref"],
                source_evidence=tuple(SourceEvidence(**e) for e in item["source_evidence"]),
                candidate_outputs=item["candidate_outputs"],
            )
            for item in config["cases"]
        )
        self.case_digests = tuple(evaluation_case_digest(item) for item in self.cases)
        self.holdout_manifests = {"case": self.case_digests, **config["holdout_other_manifests"]}
        self.holdout = commit_holdout(config["holdout_version"], self.holdout_manifests)
        self.policy = FeedbackBudgetPolicy(
            epoch_digest=self.holdout.commitment_digest, **config["policy"]
        )
        self.ledger = FeedbackBudgetLedger([self.policy])
        clock = config["clock"]
        self.next_tick = clock["start"]
        self.step = clock["step"]
        self.calls: list[str] = []
        self.sessions: dict[str, EvaluationSession] = {}
        self.path: str = config.get("store", str(tmp_path / "sessions.sqlite3"))

    def clock(self) -> int:
        value = self.next_tick
        self.next_tick += self.step
        return value

    def open(self, op: Mapping[str, Any]) -> None:
        config = self.config
        overrides = decode_input(op.get("overrides", {}))
        unknown = set(overrides) - _OVERRIDES
        if unknown:
            pytest.fail(f"vector case shape not understood: overrides {sorted(unknown)}")
        scores = overrides.get("scores", config["scores"])
        outputs = config["runner_outputs"]
        runner_raises = overrides.get("runner_raises", False)
        calls = self.calls

        def runner(evidence: tuple[SourceEvidence, ...]) -> str:
            calls.append("runner")
            if runner_raises:
                raise RuntimeError(CANARY)
            return str(outputs[evidence[0].evidence_ref])

        def scorer(case: ComparisonCase, output: str) -> object:
            calls.append("scorer")
            return scores[case.case_ref]

        def review(packets: tuple[BlindedPacket, ...]) -> None:
            calls.append("review")

        snapshot = overrides.get("component_snapshot", config["components"])
        ledger: object = self.ledger
        if overrides.get("ledger") == "fresh":
            ledger = FeedbackBudgetLedger([self.policy])
        elif "ledger" in overrides:
            pytest.fail("vector case shape not understood: ledger override")
        if overrides.get("ledger_record_raises"):
            ledger = _RaisingLedger(self.ledger)
        clock: Callable[[], object] = self.clock
        if "clock_returns" in overrides:
            fixed = overrides["clock_returns"]
            clock = lambda: fixed  # noqa: E731
        holdout_manifests = dict(self.holdout_manifests)
        if "holdout_case_manifest" in overrides:
            holdout_manifests["case"] = overrides["holdout_case_manifest"]
        identity = config["candidate_identity"]
        candidate_manifests = overrides.get(
            "candidate_manifests",
            {
                name: self.manifest.manifest_digest
                if name == identity
                else config["reference_manifest_digest"]
                for name in self.cases[0].candidate_outputs
            },
        )
        store = SQLiteSessionStore(self.path)
        self.sessions[op["session"]] = EvaluationSession(
            session_key=op["session_key"],
            manifest=self.manifest,
            component_snapshot=lambda: snapshot,
            holdout=self.holdout,
            holdout_manifests=holdout_manifests,
            cases=self.cases,
            candidate_identity=identity,
            candidate_manifests=candidate_manifests,
            runner=runner,
            scorer=scorer,
            review=review,
            provider_digests=config["provider_digests"],
            rubric=tuple(RubricCriterion(**item) for item in config["rubric"]),
            conflict_of_interest=ConflictOfInterestMetadata(**config["conflict_of_interest"]),
            randomization_key=bytes.fromhex(config["randomization_key_hex"]),
            public_items=config["public_items"],
            shadow_items=config["shadow_items"],
            canaries=overrides.get("canaries", config["canaries"]),
            ledger=ledger,  # type: ignore[arg-type]
            store=store,
            clock=clock,
        )

    def perform(self, op: Mapping[str, Any]) -> object:
        self.calls.clear()
        try:
            if op["op"] == "open":
                self.open(op)
                return "ok"
            result = getattr(self.sessions[op["session"]], op["op"])()
        except EvaluationSessionError as caught:
            error = caught
        else:
            error = None
        if error is not None:
            assert error.__cause__ is None
            assert error.__context__ is None
            assert CANARY not in repr(error)
            return {"error_code": str(error)}
        if result is None:
            return "ok"
        assert isinstance(result, SessionFeedback)
        return result.to_dict()


@pytest.mark.parametrize("case", cases(VECTORS))
def test_session_vectors(case: dict[str, Any], tmp_path: Path) -> None:
    ops = case["input"].get("ops")
    expected = case["expected"]
    if set(case["input"]) != {"config", "ops"} or not isinstance(ops, list):
        pytest.fail("vector case shape not understood")
    if len(expected["ops"]) != len(ops):
        pytest.fail("vector case shape not understood")
    scenario = _VectorScenario(case, tmp_path)
    assert scenario.manifest.to_dict() == expected["manifest"]
    assert list(scenario.case_digests) == expected["evaluation_case_digests"]
    assert scenario.holdout.to_dict() == expected["holdout_commitment"]
    for op, outcome in zip(ops, expected["ops"], strict=True):
        if op["op"] != "open" and op["op"] not in _SESSION_OPS:
            pytest.fail("vector case shape not understood")
        assert (op["op"], op["session"]) == (outcome["op"], outcome["session"])
        result = scenario.perform(op)
        wanted = outcome["result"]
        if isinstance(wanted, dict) and "code" in wanted and isinstance(result, dict):
            result["code"] = result["error_code"]  # the bare message is the code
        # Canonical text: 1 and 1.0 differ, as they do on the wire.
        assert encode_openmed(result) == encode_openmed(outcome["result"]), op
        if "provider_calls" in outcome:
            assert scenario.calls == outcome["provider_calls"], op
        if "record" in outcome:
            assert scenario.sessions[op["session"]].record.to_json() == outcome["record"], op
    if "db_sessions" not in expected:
        # Only the refused store has no database to inspect.
        assert set(expected) == {"manifest", "evaluation_case_digests", "holdout_commitment", "ops"}
        assert not Path(scenario.path).exists() or scenario.path == ":memory:"
        return
    commitment = scenario.holdout.commitment_digest
    manifest_digest = scenario.manifest.manifest_digest
    assert budget_key(commitment, manifest_digest) == expected["budget_key"]
    snapshot = scenario.ledger.snapshot(commitment, manifest_digest)
    assert encode_openmed(snapshot.to_dict()) == encode_openmed(expected["ledger_snapshot"])
    with sqlite3.connect(scenario.path) as connection:
        sessions = connection.execute(
            "SELECT session_key, record FROM sessions ORDER BY session_key"
        ).fetchall()
        budgets = connection.execute(
            "SELECT budget_key, watermark, claim FROM budgets ORDER BY budget_key"
        ).fetchall()
        schema = connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall()
    connection.close()
    assert [list(row) for row in sessions] == expected["db_sessions"]
    assert [list(row) for row in budgets] == expected["db_budgets"]
    assert [row[0] for row in schema] == expected["db_schema"]


# ---------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def world() -> World:
    return make_world()


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSessionStore:
    return SQLiteSessionStore(tmp_path / "sessions.sqlite3")


@pytest.fixture
def ledger(world: World) -> FeedbackBudgetLedger:
    return make_ledger(world)


# ---------------------------------------------------------------------------
# The error class


def test_error_codes_are_the_thirty_closed_codes() -> None:
    assert len(ERROR_CODES) == 30
    assert list(ERROR_CODES) == sorted(ERROR_CODES)
    assert frozenset(ERROR_CODES) == EvaluationSessionError.codes
    assert issubclass(EvaluationSessionError, SealevalError)
    assert issubclass(EvaluationSessionError, ValueError)


@pytest.mark.parametrize("code", ERROR_CODES)
def test_error_message_is_the_bare_code(code: str) -> None:
    error = EvaluationSessionError(code)
    assert str(error) == code
    assert error.code == code
    assert error.args == (code,)
    assert repr(error) == f"EvaluationSessionError(code={code!r}, field=None)"
    clone = pickle.loads(pickle.dumps(error))
    assert (type(clone), clone.code) == (EvaluationSessionError, code)


@pytest.mark.parametrize(
    "code", ["unknown_code", CANARY, "", "Invalid_Digest", None, 7, b"invalid_digest", ["x"]]
)
def test_unknown_codes_collapse_to_component_failed(code: object) -> None:
    error = EvaluationSessionError(code)
    assert error.code == "component_failed"
    assert str(error) == "component_failed"
    assert CANARY not in repr(error)


def test_error_field_grammar_still_applies() -> None:
    with pytest.raises(RuntimeError):
        EvaluationSessionError("invalid_digest", CANARY + " with spaces")
    assert str(EvaluationSessionError("invalid_digest", "session_key")) == "invalid_digest"


def test_provider_errors_are_reexported() -> None:
    assert record_module.EvaluationSessionError is EvaluationSessionError
    assert store_module.EvaluationSessionError is EvaluationSessionError


# ---------------------------------------------------------------------------
# Happy path, feedback and the record


def test_run_releases_detailed_feedback(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    providers = Providers(world)
    session = open_session(world, store, session_key(1), ledger=ledger, providers=providers)
    assert session.cursor == 0
    assert session.record.steps == ()
    feedback = session.run()
    assert isinstance(feedback, SessionFeedback)
    assert feedback.decision.feedback_level == "detailed"
    assert feedback.decision.detailed_score == 0.5
    assert feedback.per_case_scores == (0.75, 0.25)
    assert feedback.session_digest == session.record.session_digest
    assert [step.phase for step in session.record.steps] == [
        "verified",
        "cases",
        "forensics",
        "adjudication",
        "release_claimed",
        "released",
    ]
    assert session.cursor == 6
    assert store.load(session_key(1)) == session.record
    assert providers.calls == ["runner", "scorer", "runner", "scorer", "review"]
    assert feedback.to_dict()["per_case_scores"] == [0.75, 0.25]
    assert "0.75" not in repr(feedback)
    assert "detailed" in repr(feedback)
    assert session.budget_key == budget_key(
        world.holdout.commitment_digest, world.manifest.manifest_digest
    )


def test_step_by_step_equals_run(world: World, tmp_path: Path) -> None:
    results = []
    for name in ("one", "two"):
        store = SQLiteSessionStore(tmp_path / f"{name}.sqlite3")
        session = open_session(world, store, session_key(1), ledger=make_ledger(world))
        if name == "one":
            feedback = session.run()
        else:
            assert session.verify() is None
            assert session.run_cases() is None
            assert session.run_forensics() is None
            assert session.build_adjudication() is None
            feedback = session.release_feedback()
        results.append((feedback.to_dict(), session.record.to_json()))
    assert results[0] == results[1]


def test_coarse_then_denied(world: World, store: SQLiteSessionStore) -> None:
    world = make_world(detailed_limit=0, rerun_limit=0, scores=(0.9, 0.8))
    ledger = make_ledger(world)
    first = open_session(world, store, session_key(1), ledger=ledger).run()
    assert first.decision.feedback_level == "coarse"
    assert first.decision.coarse_band == 2
    assert first.per_case_scores is None
    session = open_session(world, store, session_key(2), ledger=ledger)
    assert code_of(session.run) == "rerun_budget_exhausted"
    terminal = session.record.steps[-1]
    assert (terminal.phase, terminal.count, terminal.band) == ("budget_denied", 1, None)
    assert code_of(session.release_feedback) == "feedback_already_claimed"
    assert code_of(lambda: open_session(world, store, session_key(2), ledger=ledger)) == (
        "feedback_already_claimed"
    )


def test_runner_sees_only_source_evidence(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    providers = Providers(world)
    open_session(world, store, session_key(1), ledger=ledger, providers=providers).run()
    assert providers.seen_evidence == [case.source_evidence for case in world.cases]
    for evidence in providers.seen_evidence:
        assert isinstance(evidence, tuple)
        assert all(type(item) is SourceEvidence for item in evidence)


def test_reviewer_gets_blinded_packets_with_runner_outputs(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    providers = Providers(world)
    session = open_session(world, store, session_key(1), ledger=ledger, providers=providers)
    session.run()
    packets = providers.packets
    assert isinstance(packets, tuple)
    assert len(packets) == len(world.cases)
    texts = {candidate.content for packet in packets for candidate in packet.candidates}
    assert texts >= set(world.outputs.values())
    assert "Placeholder" not in texts
    for packet in packets:
        document = packet.to_json()
        assert world.candidate_identity not in document
        assert packet.packet_set_ref == session.session_key


def test_session_is_content_free_in_repr_and_refuses_pickling(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger)
    assert repr(session) == "EvaluationSession(steps=0, cursor=0)"
    with pytest.raises(TypeError):
        pickle.dumps(session)
    session.verify()
    assert repr(session) == "EvaluationSession(steps=1, cursor=1)"
    assert session.session_key == session_key(1)
    assert session.binding_digest == session.record.binding_digest


def test_integer_scores_become_floats(world: World, store: SQLiteSessionStore) -> None:
    world = make_world(scores=(1, 0))
    feedback = open_session(world, store, session_key(1), ledger=make_ledger(world)).run()
    assert feedback.per_case_scores == (1.0, 0.0)
    assert all(type(score) is float for score in feedback.per_case_scores)
    assert feedback.decision.detailed_score == 0.5


def test_mean_is_the_exactly_rounded_mean(store: SQLiteSessionStore) -> None:
    values = (0.1, 0.2, 0.3, 0.7, 1.0, 0.0, 0.9)
    world = make_world(scores=values)
    feedback = open_session(world, store, session_key(1), ledger=make_ledger(world)).run()
    assert feedback.decision.detailed_score == math.fsum(values) / len(values)


# ---------------------------------------------------------------------------
# Order guards (table-driven)

_METHODS = ("verify", "run_cases", "run_forensics", "build_adjudication", "release_feedback")
# expected code of each method, by the number of steps completed so far.
_GUARDS: dict[int, dict[str, str]] = {
    0: {
        "run_cases": "verification_required",
        "run_forensics": "execution_required",
        "build_adjudication": "forensics_required",
        "release_feedback": "forensics_required",
    },
    1: {
        "verify": "invalid_order",
        "run_forensics": "execution_required",
        "build_adjudication": "forensics_required",
        "release_feedback": "forensics_required",
    },
    2: {
        "verify": "invalid_order",
        "run_cases": "verification_required",
        "build_adjudication": "forensics_required",
        "release_feedback": "forensics_required",
    },
    3: {
        "verify": "invalid_order",
        "run_cases": "verification_required",
        "run_forensics": "execution_required",
        "release_feedback": "adjudication_required",
    },
    4: {
        "verify": "invalid_order",
        "run_cases": "verification_required",
        "run_forensics": "execution_required",
        "build_adjudication": "forensics_required",
    },
    6: {
        "verify": "invalid_order",
        "run_cases": "verification_required",
        "run_forensics": "execution_required",
        "build_adjudication": "forensics_required",
        "release_feedback": "feedback_already_claimed",
    },
}


@pytest.mark.parametrize(
    ("done", "method", "code"),
    [(done, method, code) for done, table in _GUARDS.items() for method, code in table.items()],
)
def test_order_guards(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    done: int,
    method: str,
    code: str,
) -> None:
    providers = Providers(world)
    session = open_session(world, store, session_key(1), ledger=ledger, providers=providers)
    for name in _METHODS[: min(done, 5)]:
        getattr(session, name)()
    before = session.record
    providers.calls.clear()
    assert code_of(getattr(session, method)) == code
    assert session.record == before
    assert store.load(session_key(1)) == before
    assert providers.calls == []


def test_guards_hold_after_a_failed_step(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    world.outputs["source-1"] = "   "
    session = open_session(world, store, session_key(1), ledger=ledger)
    session.verify()
    assert code_of(session.run_cases) == "invalid_output"
    assert session.cursor == 1
    assert code_of(session.run_forensics) == "execution_required"
    world.outputs["source-1"] = "fixed answer"
    session.run_cases()
    assert session.cursor == 2


# ---------------------------------------------------------------------------
# Construction refusals (table-driven, with the specified order)


def _not_callable() -> object:
    return "not callable"


_CONSTRUCTION: list[tuple[str, Callable[[World], dict[str, Any]], str]] = [
    ("key_not_digest", lambda w: {"session_key": "session-one"}, "invalid_digest"),
    ("key_uppercase", lambda w: {"session_key": "SHA256:" + "a" * 64}, "invalid_digest"),
    ("key_bytes", lambda w: {"session_key": b"sha256:" + b"a" * 64}, "invalid_digest"),
    (
        "providers_missing_review",
        lambda w: {"provider_digests": {"runner": digest_of("r"), "scorer": digest_of("s")}},
        "invalid_configuration",
    ),
    (
        "providers_extra",
        lambda w: {"provider_digests": {**w.provider_digests, "extra": digest_of("x")}},
        "invalid_configuration",
    ),
    ("providers_not_mapping", lambda w: {"provider_digests": [1]}, "invalid_configuration"),
    (
        "provider_digest_bad",
        lambda w: {"provider_digests": {**w.provider_digests, "runner": CANARY}},
        "invalid_digest",
    ),
    (
        "candidate_manifest_digest_bad",
        lambda w: {"candidate_manifests": {**w.candidate_manifests, "reference": CANARY}},
        "invalid_digest",
    ),
    (
        "candidate_manifests_not_mapping",
        lambda w: {"candidate_manifests": 3},
        "invalid_configuration",
    ),
    ("candidate_manifests_empty", lambda w: {"candidate_manifests": {}}, "invalid_configuration"),
    ("no_cases", lambda w: {"cases": ()}, "invalid_configuration"),
    ("cases_not_cases", lambda w: {"cases": ({"case_ref": "x"},)}, "invalid_configuration"),
    ("cases_not_sequence", lambda w: {"cases": "cases"}, "invalid_configuration"),
    (
        "candidate_manifest_differs",
        lambda w: {"candidate_manifests": {**w.candidate_manifests, "evaluated": digest_of("x")}},
        "invalid_configuration",
    ),
    ("identity_missing", lambda w: {"candidate_identity": "someone-else"}, "invalid_configuration"),
    ("identity_not_text", lambda w: {"candidate_identity": 5}, "invalid_configuration"),
    ("duplicate_case_refs", lambda w: {"cases": (*w.cases, w.cases[0])}, "invalid_configuration"),
    (
        "manifest_not_manifest",
        lambda w: {"manifest": w.manifest.to_dict()},
        "invalid_configuration",
    ),
    ("holdout_not_commitment", lambda w: {"holdout": w.holdout.to_dict()}, "invalid_configuration"),
    (
        "ledger_without_policy",
        lambda w: {
            "ledger": FeedbackBudgetLedger(
                [dataclasses.replace(w.policy, epoch_digest=digest_of("e"))]
            )
        },
        "invalid_configuration",
    ),
    ("ledger_not_ledger", lambda w: {"ledger": object()}, "invalid_configuration"),
    (
        "ledger_policy_not_policy",
        lambda w: {"ledger": _NotAPolicyLedger(make_ledger(w))},
        "invalid_configuration",
    ),
    (
        "providers_non_string_keys",
        lambda w: {"provider_digests": {1: digest_of("x"), **w.provider_digests}},
        "invalid_configuration",
    ),
    ("key_short", lambda w: {"randomization_key": b"k" * 31}, "invalid_configuration"),
    ("key_not_bytes", lambda w: {"randomization_key": "k" * 40}, "invalid_configuration"),
    ("key_bytearray", lambda w: {"randomization_key": bytearray(40)}, "invalid_configuration"),
    (
        "rubric_not_criteria",
        lambda w: {"rubric": ({"criterion_ref": "x"},)},
        "invalid_configuration",
    ),
    (
        "conflict_not_metadata",
        lambda w: {"conflict_of_interest": w.conflict.to_dict()},
        "invalid_configuration",
    ),
    ("public_not_strings", lambda w: {"public_items": (1,)}, "invalid_configuration"),
    ("shadow_text", lambda w: {"shadow_items": "one item"}, "invalid_configuration"),
    ("canaries_not_strings", lambda w: {"canaries": [b"x"]}, "invalid_configuration"),
    (
        "holdout_manifests_not_mapping",
        lambda w: {"holdout_manifests": [1]},
        "invalid_configuration",
    ),
    (
        "holdout_manifest_items_not_strings",
        lambda w: {"holdout_manifests": {**w.holdout_manifests, "label": (1,)}},
        "invalid_configuration",
    ),
    ("runner_not_callable", lambda w: {"runner": _not_callable()}, "invalid_configuration"),
    ("scorer_not_callable", lambda w: {"scorer": None}, "invalid_configuration"),
    ("review_not_callable", lambda w: {"review": 3}, "invalid_configuration"),
    ("snapshot_not_callable", lambda w: {"component_snapshot": {}}, "invalid_configuration"),
    ("clock_not_callable", lambda w: {"clock": 1000}, "invalid_configuration"),
    ("store_not_store", lambda w: {"store": object()}, "invalid_configuration"),
]


@pytest.mark.parametrize(
    ("overrides", "code"),
    [pytest.param(make, code, id=name) for name, make, code in _CONSTRUCTION],
)
def test_construction_refusals(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    overrides: Callable[[World], dict[str, Any]],
    code: str,
    tmp_path: Path,
) -> None:
    kwargs = {**session_kwargs(world, store, session_key(1), ledger=ledger), **overrides(world)}
    assert code_of(lambda: EvaluationSession(**kwargs)) == code
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as connection:
        assert connection.execute("SELECT COUNT(*) FROM sessions").fetchone() == (0,)
    connection.close()


def test_construction_order(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    bad_providers = {"runner": digest_of("r")}
    everything_bad = {
        "provider_digests": bad_providers,
        "candidate_manifests": {"evaluated": "nope"},
        "cases": (),
        "ledger": object(),
    }

    def attempt(key: str) -> str:
        kwargs = {**session_kwargs(world, store, key, ledger=ledger), **everything_bad}
        return code_of(lambda: EvaluationSession(**kwargs))

    # 1. the session key first
    assert attempt("bad") == "invalid_digest"
    # 2. the provider key set before any digest
    assert attempt(session_key(1)) == "invalid_configuration"
    # 3. digests before the cases and the ledger
    everything_bad["provider_digests"] = world.provider_digests
    assert attempt(session_key(1)) == "invalid_digest"
    # 4. then the cases, 5. then the ledger
    everything_bad["candidate_manifests"] = world.candidate_manifests
    assert attempt(session_key(1)) == "invalid_configuration"


def test_store_errors_keep_their_code_at_construction(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as connection:
        connection.execute(
            "INSERT INTO sessions (session_key, record) VALUES (?, ?)", (session_key(1), "{")
        )
    connection.close()
    assert (
        code_of(lambda: open_session(world, store, session_key(1), ledger=ledger))
        == "record_invalid"
    )


class _BrokenStore:
    """A store whose operations fail with a foreign exception carrying a canary."""

    def load(self, session_key: str) -> SessionRecord | None:
        raise OSError(CANARY)

    def save(self, record: SessionRecord, previous: SessionRecord | None) -> None:
        raise OSError(CANARY)

    def claim_release(self, *args: object) -> None:
        raise OSError(CANARY)

    def finish_release(self, *args: object) -> None:
        raise OSError(CANARY)


class _ForeignRecordStore(_BrokenStore):
    def load(self, session_key: str) -> SessionRecord | None:
        return SessionRecord(session_key=digest_of("another"), binding_digest=digest_of("b"))


def test_foreign_store_failures_become_store_failed(
    world: World, ledger: FeedbackBudgetLedger
) -> None:
    assert isinstance(_BrokenStore(), SessionStore)
    error = error_of(lambda: open_session(world, _BrokenStore(), session_key(1), ledger=ledger))
    assert error.code == "store_failed"
    assert CANARY not in repr(error)
    assert code_of(
        lambda: open_session(world, _ForeignRecordStore(), session_key(1), ledger=ledger)
    ) == ("store_failed")


def test_existing_record_rules(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    open_session(world, store, session_key(1), ledger=ledger).verify()
    other = make_world(tag="OTHER")
    assert code_of(
        lambda: open_session(other, store, session_key(1), ledger=make_ledger(other))
    ) == ("checkpoint_mismatch")
    reopened = open_session(world, store, session_key(1), ledger=ledger)
    assert len(reopened.record.steps) == 1
    assert reopened.cursor == 0


# ---------------------------------------------------------------------------
# Input verification


_SNAPSHOTS: list[tuple[str, Callable[[dict[str, str]], object], str]] = [
    ("drift", lambda c: {**c, "policy": digest_of("changed")}, "component_digest_mismatch"),
    (
        "missing",
        lambda c: {k: v for k, v in c.items() if k != "model"},
        "incomplete_evaluation_snapshot",
    ),
    ("extra", lambda c: {**c, "extra": digest_of("x")}, "invalid_evaluation_snapshot"),
    ("bad_digest", lambda c: {**c, "model": CANARY}, "invalid_evaluation_snapshot"),
    ("not_mapping", lambda c: [CANARY], "invalid_evaluation_snapshot"),
    (
        "missing_and_drift",
        lambda c: {**{k: v for k, v in c.items() if k != "model"}, "policy": digest_of("z")},
        "incomplete_evaluation_snapshot",
    ),
]


@pytest.mark.parametrize(
    ("make", "code"), [pytest.param(make, code, id=name) for name, make, code in _SNAPSHOTS]
)
@pytest.mark.parametrize("at", ["verify", "run_cases"])
def test_snapshot_refusals(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    make: Callable[[dict[str, str]], object],
    code: str,
    at: str,
) -> None:
    state = {"snapshot": dict(world.components)}
    session = open_session(
        world, store, session_key(1), ledger=ledger, component_snapshot=lambda: state["snapshot"]
    )
    if at == "run_cases":
        session.verify()
    state["snapshot"] = make(dict(world.components))
    assert_refused(error_of(getattr(session, at)), code)
    assert session.cursor == (0 if at == "verify" else 1)


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        ({"manifest_digest": digest_of("forged")}, "mutable_manifest"),
        ({"manifest_digest": "not-a-digest"}, "invalid_manifest"),
        ({"component_digests": {}}, "incomplete_manifest"),
    ],
)
def test_manifest_side_reasons_map_to_codes(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    tamper: dict[str, object],
    code: str,
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger)
    # The session verifies its private copy of the manifest; simulate in-memory tampering.
    binding = session._binding
    for name, value in tamper.items():
        object.__setattr__(binding.manifest, name, value)
    assert code_of(session.verify) == code


def test_caller_tampering_after_construction_changes_nothing(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    original_manifest = world.manifest.manifest_digest
    original_holdout = world.holdout.commitment_digest
    session = open_session(world, store, session_key(1), ledger=ledger)
    object.__setattr__(world.manifest, "manifest_digest", digest_of("forged"))
    object.__setattr__(world.holdout, "commitment_digest", digest_of("forged"))
    feedback = session.run()
    # The session ran to release on its private copies: the caller's edits reached nothing.
    assert feedback.decision.feedback_level == "detailed"
    assert feedback.session_digest == session.record.session_digest
    assert [step.phase for step in session.record.steps][-1] == "released"
    assert session.budget_key == budget_key(original_holdout, original_manifest)
    assert session.budget_key != budget_key(digest_of("forged"), digest_of("forged"))
    assert store.load(session_key(1)) == session.record


def _holdout_variants(world: World) -> dict[str, dict[str, Any]]:
    swapped = tuple(reversed(world.holdout_manifests["case"]))
    return {
        "case_order": {"holdout_manifests": {**world.holdout_manifests, "case": swapped}},
        "label_changed": {
            "holdout_manifests": {**world.holdout_manifests, "label": (digest_of("other"),)}
        },
        "kind_missing": {
            "holdout_manifests": {
                k: v for k, v in world.holdout_manifests.items() if k != "template"
            }
        },
        "kind_extra": {"holdout_manifests": {**world.holdout_manifests, "extra": ()}},
        "case_missing": {
            "holdout_manifests": {k: v for k, v in world.holdout_manifests.items() if k != "case"}
        },
        "other_commitment": {
            "holdout": commit_holdout(
                "epoch-1", {**world.holdout_manifests, "label": (digest_of("other"),)}
            )
        },
    }


@pytest.mark.parametrize(
    "variant",
    [
        "case_order",
        "label_changed",
        "kind_missing",
        "kind_extra",
        "case_missing",
        "other_commitment",
    ],
)
def test_holdout_refusals(world: World, store: SQLiteSessionStore, variant: str) -> None:
    overrides = _holdout_variants(world)[variant]
    if "holdout" in overrides:
        epoch = overrides["holdout"].commitment_digest
        ledger = FeedbackBudgetLedger([dataclasses.replace(world.policy, epoch_digest=epoch)])
    else:
        ledger = make_ledger(world)
    session = open_session(world, store, session_key(1), ledger=ledger, **overrides)
    assert code_of(session.verify) == "holdout_commitment_mismatch"


def test_tampered_private_holdout_is_refused(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger)
    holdout = session._binding.holdout
    object.__setattr__(holdout, "manifest_item_counts", {"case": 1})
    assert code_of(session.verify) == "holdout_commitment_mismatch"


# ---------------------------------------------------------------------------
# Provider failures and fallbacks


def _raise_canary(*_args: object) -> object:
    raise RuntimeError(CANARY)


def _raise_session_error(*_args: object) -> object:
    raise EvaluationSessionError("rerun_budget_exhausted")


@pytest.mark.parametrize(
    ("provider", "at", "code"),
    [
        ("component_snapshot", "verify", "verification_failed"),
        ("runner", "run_cases", "execution_failed"),
        ("scorer", "run_cases", "execution_failed"),
        ("review", "build_adjudication", "adjudication_failed"),
    ],
)
@pytest.mark.parametrize("failure", [_raise_canary, _raise_session_error])
def test_provider_exceptions_become_the_fallback_code(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    provider: str,
    at: str,
    code: str,
    failure: Callable[..., object],
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger, **{provider: failure})
    for name in _METHODS[: _METHODS.index(at)]:
        getattr(session, name)()
    assert_refused(error_of(getattr(session, at)), code)


def test_snapshot_failure_in_run_cases_is_execution_failed(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    state = {"fail": False}

    def snapshot() -> object:
        if state["fail"]:
            raise RuntimeError(CANARY)
        return dict(world.components)

    session = open_session(world, store, session_key(1), ledger=ledger, component_snapshot=snapshot)
    session.verify()
    state["fail"] = True
    assert code_of(session.run_cases) == "execution_failed"


@pytest.mark.parametrize(
    "output",
    [None, 5, b"bytes", "", "   ", "\n\t", "x" * 1_000_001, "\ud800 unpaired", ["list"]],
    ids=["none", "int", "bytes", "empty", "spaces", "whitespace", "too_long", "surrogate", "list"],
)
def test_invalid_outputs(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger, output: object
) -> None:
    providers = Providers(world)
    session = open_session(
        world, store, session_key(1), ledger=ledger, providers=providers, runner=lambda _e: output
    )
    session.verify()
    assert code_of(session.run_cases) == "invalid_output"
    assert providers.calls == []  # the scorer never saw the bad output


class _FloatSub(float):
    pass


class _IntSub(int):
    pass


@pytest.mark.parametrize(
    ("score", "accepted"),
    [
        (True, False),
        (False, False),
        ("0.5", False),
        (None, False),
        (float("nan"), False),
        (float("inf"), False),
        (float("-inf"), False),
        (-0.1, False),
        (-1, False),
        (1.0000000000000002, False),
        (2, False),
        (10**400, False),
        (complex(0.5), False),
        (0.0, True),
        (-0.0, True),
        (1.0, True),
        (1, True),
        (0, True),
        (_FloatSub(0.5), True),
        (_IntSub(1), True),
        (5e-324, True),
    ],
)
def test_score_validation(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    score: object,
    accepted: bool,
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger, scorer=lambda _c, _o: score)
    session.verify()
    if accepted:
        session.run_cases()
        feedback = open_session(
            world, store, session_key(1), ledger=ledger, scorer=lambda _c, _o: score
        ).run()
        assert feedback.per_case_scores is not None
        assert all(type(value) is float for value in feedback.per_case_scores)
    else:
        assert code_of(session.run_cases) == "invalid_score"


def test_output_empty_after_normalization_is_forensics_failed(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    world.outputs["source-0"] = "?!"
    session = open_session(world, store, session_key(1), ledger=ledger)
    session.verify()
    session.run_cases()
    assert code_of(session.run_forensics) == "forensics_failed"
    assert session.cursor == 2


def test_recused_reviewer_is_adjudication_failed(store: SQLiteSessionStore) -> None:
    world = make_world(status="recused")
    providers = Providers(world)
    session = open_session(
        world, store, session_key(1), ledger=make_ledger(world), providers=providers
    )
    assert code_of(session.run) == "adjudication_failed"
    assert "review" not in providers.calls
    assert session.cursor == 3


def test_failed_audit_is_adjudication_failed(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        session_module,
        "audit_mapping",
        lambda *_a: MappingAudit(packet_count=0, reason_codes=("mapping_mismatch",), valid=False),
    )
    providers = Providers(world)
    session = open_session(world, store, session_key(1), ledger=ledger, providers=providers)
    assert code_of(session.run) == "adjudication_failed"
    assert "review" not in providers.calls


@pytest.mark.parametrize(
    "value",
    [-1, True, False, 1.0, "1000", None, 2**63, lambda: 1],
    ids=["negative", "true", "false", "float", "text", "none", "too_big", "callable"],
)
def test_invalid_clock(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger, value: object
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger, clock=lambda: value)
    assert code_of(session.verify) == "invalid_clock"
    assert session.record.steps == ()


def test_raising_clock_is_invalid_clock(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger, clock=_raise_canary)
    error = error_of(session.verify)
    assert error.code == "invalid_clock"


def test_clock_zero_and_maximum_are_valid(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    ticks = iter([0, 2**63 - 1, 5, 6, 7, 8])
    session = open_session(world, store, session_key(1), ledger=ledger, clock=lambda: next(ticks))
    session.run()
    assert [step.tick for step in session.record.steps] == [0, 2**63 - 1, 5, 6, 7, 8]


# ---------------------------------------------------------------------------
# Never echo


def test_provider_canaries_never_reach_errors_chains_reprs_or_logs(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    for provider in ("component_snapshot", "runner", "scorer", "review", "clock"):
        session = open_session(
            world, store, session_key(provider), ledger=ledger, **{provider: _raise_canary}
        )
        with pytest.raises(EvaluationSessionError) as caught:
            session.run()
        errors.append(caught.value)
    failing = _RaisingLedger(ledger)
    session = open_session(world, store, session_key("ledger"), ledger=failing)
    with pytest.raises(EvaluationSessionError) as caught:
        session.run()
    errors.append(caught.value)
    with pytest.raises(EvaluationSessionError) as caught:
        open_session(world, _BrokenStore(), session_key("store"), ledger=ledger)
    errors.append(caught.value)
    assert [getattr(error, "code", None) for error in errors] == [
        "verification_failed",
        "execution_failed",
        "execution_failed",
        "adjudication_failed",
        "invalid_clock",
        "feedback_failed",
        "store_failed",
    ]
    for error in errors:
        chain: list[BaseException | None] = [error, error.__cause__, error.__context__]
        assert error.__cause__ is None
        assert error.__context__ is None
        rendered = "".join(traceback.format_exception(error))
        for text in (str(error), repr(error), rendered, repr(error.args)):
            assert CANARY not in text
        assert all(item is None or CANARY not in str(item) for item in chain)
    assert CANARY not in caplog.text


def test_errors_carry_no_context_even_inside_an_except_block(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    session = open_session(world, store, session_key(1), ledger=ledger, runner=_raise_canary)
    session.verify()
    try:
        raise KeyError("outer")
    except KeyError:
        with pytest.raises(EvaluationSessionError) as caught:
            session.run_cases()
    # The only context Python may attach is the caller's own exception, never the provider's.
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    assert not isinstance(caught.value.__context__, RuntimeError)


# ---------------------------------------------------------------------------
# Replay and drift


@pytest.mark.parametrize("completed", [1, 2, 3, 4])
def test_reopen_replays_and_releases_once(
    world: World, store: SQLiteSessionStore, completed: int
) -> None:
    ledger = make_ledger(world)
    clock = Clock()
    first = open_session(world, store, session_key(1), ledger=ledger, clock=clock)
    for name in _METHODS[:completed]:
        getattr(first, name)()
    stored_ticks = [step.tick for step in first.record.steps]
    providers = Providers(world)
    second = open_session(
        world, store, session_key(1), ledger=ledger, providers=providers, clock=clock
    )
    assert second.cursor == 0
    feedback = second.run()
    assert feedback.decision.official_attempts == 1
    assert [step.tick for step in second.record.steps[:completed]] == stored_ticks
    assert providers.calls == ["runner", "scorer", "runner", "scorer", "review"]
    assert (
        ledger.snapshot(
            world.holdout.commitment_digest, world.manifest.manifest_digest
        ).official_attempts
        == 1
    )
    # The stale first object can no longer write anything.
    assert code_of(getattr(first, _METHODS[completed])) == "record_conflict"
    assert (
        code_of(lambda: open_session(world, store, session_key(1), ledger=ledger))
        == "feedback_already_claimed"
    )


def test_replay_reads_no_clock(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    first = open_session(world, store, session_key(1), ledger=ledger)
    first.verify()
    first.run_cases()
    first.run_forensics()
    second = open_session(world, store, session_key(1), ledger=ledger, clock=lambda: -1)
    second.verify()
    second.run_cases()
    second.run_forensics()
    assert code_of(second.build_adjudication) == "invalid_clock"


def test_output_drift_on_replay_is_checkpoint_mismatch(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    first = open_session(world, store, session_key(1), ledger=ledger)
    first.verify()
    first.run_cases()
    world.outputs["source-0"] = "a different answer"
    second = open_session(world, store, session_key(1), ledger=ledger)
    second.verify()
    assert code_of(second.run_cases) == "checkpoint_mismatch"
    assert code_of(second.run_forensics) == "execution_required"


def _forged_chain(
    store: SQLiteSessionStore, real: SessionRecord, index: int, forged: SessionStep
) -> SessionRecord:
    """Write a record equal to ``real`` except step ``index``, through the store's CAS API."""
    key = digest_of(f"forged:{index}")
    record = SessionRecord(session_key=key, binding_digest=real.binding_digest)
    store.save(record, None)
    for position, step in enumerate(real.steps[:4]):
        advanced = record.with_step(forged if position == index else step)
        store.save(advanced, record)
        record = advanced
    return record


@pytest.mark.parametrize(
    ("index", "field_name", "replacement", "at"),
    [
        (0, "count", 3, "verify"),
        (1, "digest", digest_of("x"), "run_cases"),
        (1, "count", 1, "run_cases"),
        (2, "digest", digest_of("x"), "run_forensics"),
        (2, "count", 9, "run_forensics"),
        (3, "digest", digest_of("x"), "build_adjudication"),
        (3, "count", 1, "build_adjudication"),
    ],
)
def test_forged_stored_steps_are_refused_before_side_effects(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    index: int,
    field_name: str,
    replacement: object,
    at: str,
) -> None:
    real = open_session(world, store, session_key(1), ledger=ledger)
    for name in _METHODS[:4]:
        getattr(real, name)()
    forged_step = real.record.steps[index]._replace(**{field_name: replacement})
    forged = _forged_chain(store, real.record, index, forged_step)
    providers = Providers(world)
    session = open_session(world, store, forged.session_key, ledger=ledger, providers=providers)
    for name in _METHODS[: _METHODS.index(at)]:
        getattr(session, name)()
    assert code_of(getattr(session, at)) == "checkpoint_mismatch"
    # The reviewer is never called for a mismatching adjudication step.
    assert "review" not in providers.calls
    assert store.load(forged.session_key) == forged


def test_two_live_objects_conflict(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    a = open_session(world, store, session_key(1), ledger=ledger)
    b = open_session(world, store, session_key(1), ledger=ledger)
    a.verify()
    assert code_of(b.verify) == "record_conflict"
    assert b.cursor == 0
    for name in _METHODS[1:]:
        getattr(a, name)()  # a carries on; b must reopen


def test_reentrant_call_from_a_provider_is_invalid_order(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    seen: list[str] = []
    holder: dict[str, EvaluationSession] = {}

    def review(_packets: object) -> None:
        try:
            holder["session"].release_feedback()
        except EvaluationSessionError as error:
            seen.append(error.code)

    holder["session"] = open_session(world, store, session_key(1), ledger=ledger, review=review)
    holder["session"].run()
    assert seen == ["invalid_order"]


def test_concurrent_threads_on_one_object(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    gate = threading.Event()
    release = threading.Event()

    def slow_snapshot() -> object:
        gate.set()
        release.wait(5)
        return dict(world.components)

    session = open_session(
        world, store, session_key(1), ledger=ledger, component_snapshot=slow_snapshot
    )
    worker = threading.Thread(target=session.verify)
    worker.start()
    assert gate.wait(5)
    assert code_of(session.verify) == "invalid_order"
    release.set()
    worker.join(5)
    assert session.cursor == 1


# ---------------------------------------------------------------------------
# The release flow and the budget


def test_ledger_failure_after_claim_locks_the_budget(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger, tmp_path: Path
) -> None:
    session = open_session(world, store, session_key(1), ledger=_RaisingLedger(ledger))
    assert code_of(session.run) == "feedback_failed"
    assert [step.phase for step in session.record.steps][-1] == "release_claimed"
    assert code_of(session.release_feedback) == "feedback_already_claimed"
    assert (
        code_of(lambda: open_session(world, store, session_key(1), ledger=ledger))
        == "feedback_already_claimed"
    )
    other = open_session(world, store, session_key(2), ledger=ledger)
    assert code_of(other.run) == "budget_state_unverified"
    assert len(other.record.steps) == 4
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as connection:
        claims = connection.execute("SELECT claim FROM budgets").fetchall()
    connection.close()
    assert claims == [(session_key(1),)]


class _ScriptedLedger(_RaisingLedger):
    """The real ledger, with hooks that misbehave at chosen calls."""

    def __init__(self, inner: FeedbackBudgetLedger, **behaviour: Any) -> None:
        super().__init__(inner)
        self.behaviour = behaviour
        self.snapshots = 0
        self.policies = 0

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        self.policies += 1
        if self.policies in self.behaviour.get("bad_policies", ()):
            return "not a policy"  # type: ignore[return-value]
        return self.inner.policy_for(epoch_digest)

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        self.snapshots += 1
        if self.snapshots in self.behaviour.get("bad_snapshots", ()):
            return "not a snapshot"  # type: ignore[return-value]
        return self.inner.snapshot(epoch_digest, submission_digest)

    def record_official_attempt(
        self, epoch_digest: object, submission_digest: object, **outcome: object
    ) -> FeedbackBudgetDecision:
        if "decision" in self.behaviour:
            return self.behaviour["decision"]  # type: ignore[no-any-return]
        return self.inner.record_official_attempt(epoch_digest, submission_digest, **outcome)


@pytest.mark.parametrize(
    ("behaviour", "claimed"),
    [
        ({"bad_snapshots": (1,)}, False),
        ({"bad_snapshots": (2,)}, True),
        ({"decision": "not a decision"}, True),
        ({"bad_policies": (2,)}, False),
        ({"bad_policies": (3,)}, True),
    ],
    ids=[
        "snapshot_before_claim",
        "snapshot_after_decision",
        "bad_decision",
        "policy_before_claim",
        "policy_after_decision",
    ],
)
def test_misbehaving_ledgers_are_feedback_failed(
    world: World,
    store: SQLiteSessionStore,
    ledger: FeedbackBudgetLedger,
    behaviour: dict[str, Any],
    claimed: bool,
) -> None:
    scripted = _ScriptedLedger(ledger, **behaviour)
    session = open_session(world, store, session_key(1), ledger=scripted)
    for name in _METHODS[:4]:
        getattr(session, name)()
    assert code_of(session.release_feedback) == "feedback_failed"
    assert len(session.record.steps) == (5 if claimed else 4)


def test_fresh_ledger_after_restart_is_refused(world: World, store: SQLiteSessionStore) -> None:
    open_session(world, store, session_key(1), ledger=make_ledger(world)).run()
    session = open_session(world, store, session_key(2), ledger=make_ledger(world))
    assert code_of(session.run) == "budget_state_unverified"
    assert len(session.record.steps) == 4


def test_changed_policy_is_refused(world: World, store: SQLiteSessionStore) -> None:
    open_session(world, store, session_key(1), ledger=make_ledger(world)).run()
    changed = dataclasses.replace(world.policy, rerun_limit=9)
    ledger = FeedbackBudgetLedger([changed])
    # Same session key: the policy is bound, so the binding differs.
    assert (
        code_of(lambda: open_session(world, store, session_key(1), ledger=ledger))
        == "checkpoint_mismatch"
    )
    # A new session: the watermark (policy + usage) differs from the stored one.
    assert (
        code_of(open_session(world, store, session_key(2), ledger=ledger).run)
        == "budget_state_unverified"
    )


def test_reset_before_any_release_is_undetectable(world: World, store: SQLiteSessionStore) -> None:
    """Documented limit: without a budget row, a reset ledger cannot be told from a new one."""
    commitment, manifest = world.holdout.commitment_digest, world.manifest.manifest_digest
    used = make_ledger(world)
    used.record_official_attempt(commitment, manifest, score=0.5)  # usage outside any session
    reset = make_ledger(world)  # ... then lost
    feedback = open_session(world, store, session_key(1), ledger=reset).run()
    assert feedback.decision.official_attempt_number == 1  # the lost attempt is not noticed
    # Once a release is recorded, any other reset is detected.
    late = open_session(world, store, session_key(2), ledger=make_ledger(world))
    assert code_of(late.run) == "budget_state_unverified"


def test_persistent_ledger_usage_carries_over(world: World, store: SQLiteSessionStore) -> None:
    ledger = make_ledger(world)
    open_session(world, store, session_key(1), ledger=ledger).run()
    restored = FeedbackBudgetLedger([world.policy], usage=ledger.export_usage())
    feedback = open_session(world, store, session_key(2), ledger=restored).run()
    assert feedback.decision.official_attempts == 2
    assert feedback.decision.feedback_level == "coarse"


def test_budget_helpers(world: World) -> None:
    commitment = world.holdout.commitment_digest
    manifest = world.manifest.manifest_digest
    assert budget_key(commitment, manifest) == digest_openmed([commitment, manifest])
    assert code_of(lambda: budget_key("x", manifest)) == "invalid_digest"
    ledger = make_ledger(world)
    snapshot = ledger.snapshot(commitment, manifest)
    assert budget_watermark(world.policy, snapshot) == digest_openmed(
        {"policy": world.policy.to_dict(), "usage": snapshot.to_dict()}
    )
    assert code_of(lambda: budget_watermark(world.policy, "x")) == "invalid_configuration"  # type: ignore[arg-type]
    assert isinstance(ledger, BudgetLedger)


# ---------------------------------------------------------------------------
# The binding digest


def _binding_inputs(world: World) -> dict[str, Any]:
    return {
        "manifest": world.manifest,
        "holdout": world.holdout,
        "holdout_manifests": world.holdout_manifests,
        "cases": world.cases,
        "candidate_identity": world.candidate_identity,
        "candidate_manifests": world.candidate_manifests,
        "provider_digests": world.provider_digests,
        "feedback_policy": world.policy,
        "rubric": world.rubric,
        "conflict_of_interest": world.conflict,
        "randomization_key": world.key,
        "public_items": world.public,
        "shadow_items": world.shadow,
        "canaries": world.canaries,
    }


def test_binding_digest_matches_the_session_and_ignores_the_session_key(
    world: World, store: SQLiteSessionStore, ledger: FeedbackBudgetLedger
) -> None:
    expected = binding_digest(**_binding_inputs(world))
    for label in (1, 2):
        assert (
            open_session(world, store, session_key(label), ledger=ledger).binding_digest == expected
        )


def test_binding_digest_refusals(world: World) -> None:
    inputs = _binding_inputs(world)
    other_policy = dataclasses.replace(world.policy, epoch_digest=digest_of("e"))
    assert code_of(lambda: binding_digest(**{**inputs, "feedback_policy": other_policy})) == (
        "invalid_configuration"
    )
    assert (
        code_of(lambda: binding_digest(**{**inputs, "provider_digests": {}}))
        == "invalid_configuration"
    )
    assert (
        code_of(lambda: binding_digest(**{**inputs, "candidate_manifests": {"x": "y"}}))
        == "invalid_digest"
    )


def _other_case(world: World) -> ComparisonCase:
    case = world.cases[0]
    return ComparisonCase(
        case_ref=case.case_ref,
        source_evidence=(SourceEvidence(evidence_ref="source-0", content="changed"),),
        candidate_outputs=dict(case.candidate_outputs),
    )


def _mutations(world: World) -> dict[str, Callable[[str], dict[str, Any]]]:
    """One way of changing each binding input, parameterized by a text."""
    return {
        "manifest": lambda t: {
            "manifest": seal_workflow_manifest({**world.components, "model": digest_of(t)}),
            "candidate_manifests": {
                **world.candidate_manifests,
                "evaluated": seal_workflow_manifest(
                    {**world.components, "model": digest_of(t)}
                ).manifest_digest,
            },
        },
        "holdout": lambda t: {
            "holdout": commit_holdout(
                "v-" + hashlib.sha256(t.encode()).hexdigest()[:8], world.holdout_manifests
            ),
        },
        "holdout_manifests": lambda t: {
            "holdout_manifests": {**world.holdout_manifests, "label": (digest_of(t),)}
        },
        "cases": lambda t: {"cases": (_other_case(world), *world.cases[1:])},
        "candidate_identity": lambda t: {
            "candidate_identity": "reference",
            "candidate_manifests": {
                "reference": world.manifest.manifest_digest,
                "evaluated": digest_of(t),
            },
        },
        "candidate_manifests": lambda t: {
            "candidate_manifests": {**world.candidate_manifests, "reference": digest_of(t)}
        },
        "provider_digests": lambda t: {
            "provider_digests": {**world.provider_digests, "review": digest_of(t)}
        },
        "feedback_policy": lambda t: {
            "feedback_policy": dataclasses.replace(world.policy, rerun_limit=len(t) + 3)
        },
        "rubric": lambda t: {
            "rubric": (
                RubricCriterion(criterion_ref="c", question=t, minimum_score=0, maximum_score=1),
            )
        },
        "conflict_of_interest": lambda t: {
            "conflict_of_interest": dataclasses.replace(
                world.conflict, declaration_digest=digest_of(t)
            )
        },
        "randomization_key": lambda t: {"randomization_key": hashlib.sha512(t.encode()).digest()},
        "public_items": lambda t: {"public_items": (*world.public, t)},
        "shadow_items": lambda t: {"shadow_items": (t,)},
        "canaries": lambda t: {"canaries": (*world.canaries, t)},
    }


_BINDING_WORLD = make_world()
_BINDING_BASE = binding_digest(**_binding_inputs(_BINDING_WORLD))
_BINDING_FIELDS = sorted(_mutations(_BINDING_WORLD))


def test_every_binding_input_is_covered() -> None:
    assert set(_BINDING_FIELDS) == set(_binding_inputs(_BINDING_WORLD))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(_BINDING_FIELDS),
    text=st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1, max_size=12),
)
def test_changing_any_binding_input_changes_the_digest(name: str, text: str) -> None:
    world = _BINDING_WORLD
    inputs = {**_binding_inputs(world), **_mutations(world)[name](text)}
    if name == "holdout":
        inputs["feedback_policy"] = dataclasses.replace(
            world.policy, epoch_digest=inputs["holdout"].commitment_digest
        )
    assert binding_digest(**inputs) != _BINDING_BASE


def test_binding_digest_is_the_specified_document() -> None:
    world = _BINDING_WORLD
    expected = digest_openmed(
        {
            "manifest": world.manifest.to_dict(),
            "holdout": world.holdout.to_dict(),
            "holdout_manifests": {k: list(v) for k, v in world.holdout_manifests.items()},
            "cases": [evaluation_case_digest(case) for case in world.cases],
            "candidate_identity": world.candidate_identity,
            "candidate_manifests": world.candidate_manifests,
            "providers": world.provider_digests,
            "feedback_policy": world.policy.to_dict(),
            "rubric": [criterion.to_dict() for criterion in world.rubric],
            "conflict": world.conflict.to_dict(),
            # A plain SHA-256 of the raw key bytes (documented weakness, kept for compatibility).
            "key_digest": "sha256:" + hashlib.sha256(world.key).hexdigest(),
            "public": list(world.public),
            "shadow": list(world.shadow),
            "canaries": list(world.canaries),
        }
    )
    assert binding_digest(**_binding_inputs(world)) == expected == _BINDING_BASE
