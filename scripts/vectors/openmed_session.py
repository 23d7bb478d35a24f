"""Regenerator of openmed's ``session.json`` scenarios (openmed venv; public functions only).

A case describes a whole evaluation session as data (``input.config``) and a list of calls
(``input.ops``: ``open`` a session object, then call its public methods). ``run_session``
replays the scenario with openmed's public ``EvaluationSession`` and ``SQLiteSessionStore`` on
a fresh SQLite file, with the injected providers, clock and ledger the file's description
documents, and returns the document the reference's generator wrote: the sealed manifest,
the case digests, the holdout commitment, every call's result, provider calls and record,
the budget key, the ledger snapshot and the database rows.

``vary_session`` renames every digest (component digests and the session keys among them,
also inside overrides, so a drifted component stays the one that drifted), case and
evidence refs and candidate identities (also as the keys of scores, runner outputs,
candidate outputs and candidate manifests), the holdout version, the
randomization key (same length) and the clock's start; ``session_facts`` is what the
variation must keep: every call's outcome, provider calls, the record's phases, counts and
bands, the ledger snapshot and the database's shape.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmed.eval.governance.blinded_adjudication import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
)
from openmed.eval.governance.feedback_budget import FeedbackBudgetLedger, FeedbackBudgetPolicy
from openmed.eval.governance.holdout_commitment import commit_holdout_manifests
from openmed.eval.workflows.sealed_manifest import seal_workflow_manifest
from openmed.eval.workflows.session import (
    EvaluationSession,
    EvaluationSessionError,
    SQLiteSessionStore,
    evaluation_case_digest,
)
from renaming import DigestRenamer

Case = dict[str, Any]


def canonical(value: Any) -> str:
    """Return openmed's canonical JSON text (sorted keys, compact, ASCII escapes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def budget_key(commitment_digest: str, manifest_digest: str) -> str:
    """Return the budget key (spec 30 section 6: sha256 of ``[commitment, manifest]``).

    openmed does not export it; the replay of the shared file checks the derivation, and a
    scenario that claimed a release also shows the key in its ``budgets`` row.
    """
    text = canonical([commitment_digest, manifest_digest])
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


class RaisingLedger(FeedbackBudgetLedger):
    """The scenario's ledger, except that recording an attempt fails (after the claim)."""

    def __init__(self, inner: FeedbackBudgetLedger, policy: FeedbackBudgetPolicy) -> None:
        """Wrap ``inner``; ``policy`` is the ledger's one policy."""
        super().__init__([policy])
        self.inner = inner

    def snapshot(self, *arguments: Any, **options: Any) -> Any:
        """Return the wrapped ledger's snapshot."""
        return self.inner.snapshot(*arguments, **options)

    def record_official_attempt(self, *_arguments: Any, **_options: Any) -> Any:
        """Fail, as a ledger that crashed inside the call would."""
        raise RuntimeError("ledger failed")


class Scenario:
    """One ``session.json`` scenario replayed against a real SQLite file."""

    def __init__(self, config: dict[str, Any], folder: Path) -> None:
        """Build the scenario's manifest, cases, holdout, ledger and clock from ``config``."""
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
        self.case_digests = [evaluation_case_digest(item) for item in self.cases]
        self.holdout_manifests = {"case": self.case_digests, **config["holdout_other_manifests"]}
        self.holdout = commit_holdout_manifests(config["holdout_version"], self.holdout_manifests)
        self.policy = FeedbackBudgetPolicy(
            epoch_digest=self.holdout.commitment_digest,
            detailed_feedback_limit=config["policy"]["detailed_feedback_limit"],
            rerun_limit=config["policy"]["rerun_limit"],
            coarse_score_boundaries=tuple(config["policy"]["coarse_score_boundaries"]),
        )
        self.ledger = FeedbackBudgetLedger([self.policy])
        self.tick = config["clock"]["start"]
        self.calls: list[str] = []
        self.sessions: dict[str, EvaluationSession] = {}
        self.path = config.get("store", str(folder / "sessions.sqlite3"))

    def clock(self) -> int:
        """Return start, start + step, ... on successive calls across the scenario."""
        value = self.tick
        self.tick += self.config["clock"]["step"]
        return value

    def open(self, op: dict[str, Any]) -> None:
        """Build session ``op["session"]`` (an override replaces a config entry for it)."""
        config = self.config
        overrides = op.get("overrides", {})
        scores = overrides.get("scores", config["scores"])
        outputs = config["runner_outputs"]
        raises = overrides.get("runner_raises", False)
        calls = self.calls

        def runner(evidence: tuple[SourceEvidence, ...]) -> str:
            calls.append("runner")
            if raises:
                raise RuntimeError("runner failed")
            return outputs[evidence[0].evidence_ref]

        def scorer(case: ComparisonCase, _output: str) -> Any:
            calls.append("scorer")
            return scores[case.case_ref]

        def review(_packets: Any) -> None:
            calls.append("review")

        snapshot = overrides.get("component_snapshot", config["components"])
        ledger = self.ledger
        if overrides.get("ledger") == "fresh":
            ledger = FeedbackBudgetLedger([self.policy])
        if overrides.get("ledger_record_raises"):
            ledger = RaisingLedger(self.ledger, self.policy)
        clock: Callable[[], int] = self.clock
        if "clock_returns" in overrides:
            fixed = overrides["clock_returns"]
            clock = lambda: fixed  # noqa: E731
        manifests = dict(self.holdout_manifests)
        if "holdout_case_manifest" in overrides:
            manifests["case"] = overrides["holdout_case_manifest"]
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
        self.sessions[op["session"]] = EvaluationSession(
            session_key=op["session_key"],
            manifest=self.manifest,
            component_snapshot=lambda: snapshot,
            holdout=self.holdout,
            holdout_manifests=manifests,
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
            ledger=ledger,
            store=SQLiteSessionStore(self.path),
            clock=clock,
        )

    def perform(self, op: dict[str, Any]) -> dict[str, Any]:
        """Run one op and return its expected entry (result, provider calls, record)."""
        self.calls.clear()
        entry: dict[str, Any] = {"op": op["op"], "session": op["session"]}
        try:
            if op["op"] == "open":
                self.open(op)
                result: Any = "ok"
            else:
                feedback = getattr(self.sessions[op["session"]], op["op"])()
                result = "ok"
                if feedback is not None:
                    scores = feedback.per_case_scores
                    result = {
                        "session_digest": feedback.session_digest,
                        "decision": feedback.decision.to_dict(),
                        "per_case_scores": None if scores is None else list(scores),
                    }
        except EvaluationSessionError as error:
            result = {"error_code": str(error)}
        entry["result"] = result
        if op["op"] != "open":
            entry["provider_calls"] = list(self.calls)
        if op["op"] != "open" or result == "ok":
            entry["record"] = self.sessions[op["session"]].record.to_json()
        return entry


def run_session(data: Any) -> dict[str, Any]:
    """Replay one ``session.json`` scenario and return its expected document."""
    with tempfile.TemporaryDirectory(prefix="openmed-session-") as folder:
        scenario = Scenario(data["config"], Path(folder))
        expected: dict[str, Any] = {
            "manifest": scenario.manifest.to_dict(),
            "evaluation_case_digests": scenario.case_digests,
            "holdout_commitment": scenario.holdout.to_dict(),
            "ops": [scenario.perform(op) for op in data["ops"]],
        }
        if scenario.path == ":memory:":
            return expected
        commitment = scenario.holdout.commitment_digest
        manifest = scenario.manifest.manifest_digest
        expected["budget_key"] = budget_key(commitment, manifest)
        expected["ledger_snapshot"] = scenario.ledger.snapshot(commitment, manifest).to_dict()
        connection = sqlite3.connect(scenario.path)
        try:
            sessions = connection.execute(
                "SELECT session_key, record FROM sessions ORDER BY session_key"
            ).fetchall()
            budgets = connection.execute(
                "SELECT budget_key, watermark, claim FROM budgets ORDER BY budget_key"
            ).fetchall()
            schema = connection.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
        finally:
            connection.close()
        expected["db_sessions"] = [list(row) for row in sessions]
        expected["db_budgets"] = [list(row) for row in budgets]
        expected["db_schema"] = [row[0] for row in schema]
        for row in budgets:  # the documented derivation is the store's key
            if row[0] != expected["budget_key"]:
                raise SystemExit("openmed/session.json: the budget key derivation differs")
        return expected


class Names:
    """Seeded, consistent renaming of one scenario's plain ids (case, evidence, candidate)."""

    def __init__(self, seed: int, case_name: str) -> None:
        """Start an empty renaming drawn from ``seed`` and the case's name."""
        self.random = random.Random(f"session-{seed}-{case_name}")
        self.seed = seed
        self.names: dict[str, str] = {}

    def __call__(self, old: str) -> str:
        """Return the new name of ``old`` (distinct names stay distinct)."""
        if old not in self.names:
            taken = set(self.names.values())
            new = old
            while new == old or new in taken:
                new = f"{old}-s{self.seed}-{self.random.randrange(16**4):04x}"
            self.names[old] = new
        return self.names[old]


def rename_keys(mapping: Any, names: Names) -> Any:
    """Return ``mapping`` with every key renamed (a non-mapping is returned as it is)."""
    if not isinstance(mapping, dict):
        return mapping
    return {names(key): value for key, value in mapping.items()}


def vary_session(case: Case, seed: int, _cases: list[Case]) -> Any:
    """Return a scenario's input with other digests, ids, holdout version, key and clock."""
    given = DigestRenamer(seed).rename(case["input"])
    config = given["config"]
    names = Names(seed, case["name"])
    draw = random.Random(f"session-key-{seed}-{config['randomization_key_hex']}")
    config["candidate_identity"] = names(config["candidate_identity"])
    for item in config["cases"]:
        item["case_ref"] = names(item["case_ref"])
        item["candidate_outputs"] = rename_keys(item["candidate_outputs"], names)
        for evidence in item["source_evidence"]:
            evidence["evidence_ref"] = names(evidence["evidence_ref"])
    config["runner_outputs"] = rename_keys(config["runner_outputs"], names)
    config["scores"] = rename_keys(config["scores"], names)
    for op in given["ops"]:
        for key in ("scores", "candidate_manifests"):
            if key in op.get("overrides", {}):
                op["overrides"][key] = rename_keys(op["overrides"][key], names)
    config["holdout_version"] = f"{config['holdout_version']}-s{seed}"
    length = len(config["randomization_key_hex"]) // 2
    config["randomization_key_hex"] = draw.randbytes(length).hex()
    config["clock"] = {
        **config["clock"],
        "start": config["clock"]["start"] + draw.randrange(1, 10**6),
    }
    return given


def session_facts(expected: dict[str, Any]) -> Any:
    """Return what a scenario's variation must keep (outcomes, calls, phases, counts, bands)."""

    def steps(record: str) -> Any:
        return [
            [phase, count, band]
            for phase, _digest, count, _tick, band in json.loads(record)["steps"]
        ]

    ops = []
    for entry in expected["ops"]:
        result = entry["result"]
        if isinstance(result, dict) and "decision" in result:
            result = {"decision": result["decision"], "scores": result["per_case_scores"]}
        fact = {"op": entry["op"], "result": result, "calls": entry.get("provider_calls")}
        if "record" in entry:
            fact["steps"] = steps(entry["record"])
        ops.append(fact)
    return {
        "ops": ops,
        "snapshot": expected.get("ledger_snapshot"),
        "sessions": sorted(
            json.dumps(steps(record)) for _key, record in expected.get("db_sessions", [])
        ),
        "claims": [claim is None for _key, _mark, claim in expected.get("db_budgets", [])],
        "schema": expected.get("db_schema"),
        "counts": expected["holdout_commitment"]["manifest_item_counts"],
    }
