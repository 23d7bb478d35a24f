"""A session world (clock, providers, ledger) shared by the session, store and crash tests.

Moved out of ``test_session_session.py`` so that no test module imports another."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sealeval.manifest.sealed import COMPONENTS, SealedWorkflowManifest, seal_workflow_manifest
from sealeval.session.adjudication import BlindedPacket
from sealeval.session.budget import (
    FeedbackBudgetLedger,
    FeedbackBudgetPolicy,
)
from sealeval.session.cases import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    evaluation_case_digest,
)
from sealeval.session.holdout import HoldoutCommitment, commit_holdout
from sealeval.session.session import (
    PROVIDER_NAMES,
    EvaluationSession,
)


def digest_of(label: str) -> str:
    """Return a deterministic digest for a label."""
    return "sha256:" + hashlib.sha256(label.encode("utf-8")).hexdigest()


def session_key(label: object) -> str:
    """Return a deterministic session key."""
    return digest_of(f"session-key:{label}")


@dataclass
class World:
    """Every input of a session except the providers, ledger, store and clock."""

    manifest: SealedWorkflowManifest
    components: dict[str, str]
    cases: tuple[ComparisonCase, ...]
    holdout_manifests: dict[str, tuple[str, ...]]
    holdout: HoldoutCommitment
    policy: FeedbackBudgetPolicy
    candidate_identity: str
    candidate_manifests: dict[str, str]
    provider_digests: dict[str, str]
    rubric: tuple[RubricCriterion, ...]
    conflict: ConflictOfInterestMetadata
    key: bytes
    public: tuple[str, ...]
    shadow: tuple[str, ...]
    canaries: tuple[str, ...]
    outputs: dict[str, str]
    scores: dict[str, Any]


def make_world(
    *,
    tag: str = "SYNTH",
    scores: tuple[Any, ...] = (0.75, 0.25),
    detailed_limit: int = 1,
    rerun_limit: int = 2,
    boundaries: tuple[float, ...] = (0.5, 0.8),
    identity: str = "evaluated",
    other: str = "reference",
    reviewer: str = "reviewer-1",
    key: bytes | None = None,
    status: str = "cleared",
) -> World:
    """Build a deterministic world; ``tag`` is embedded in every piece of text."""
    components = {name: digest_of(f"component:{name}") for name in COMPONENTS}
    manifest = seal_workflow_manifest(components)
    built = []
    outputs: dict[str, str] = {}
    score_map: dict[str, Any] = {}
    for index, score in enumerate(scores):
        evidence_ref = f"source-{index}"
        built.append(
            ComparisonCase(
                case_ref=f"case-{index}",
                source_evidence=(
                    SourceEvidence(
                        evidence_ref=evidence_ref, content=f"{tag} patient note {index}"
                    ),
                ),
                candidate_outputs={identity: "Placeholder", other: f"{tag} reference {index}"},
            )
        )
        outputs[evidence_ref] = f"{tag} candidate answer {index}"
        score_map[f"case-{index}"] = score
    case_digests = tuple(evaluation_case_digest(case) for case in built)
    holdout_manifests = {
        "case": case_digests,
        "label": (digest_of("label"),),
        "template": (digest_of("template"),),
        "randomization": (digest_of("randomization"),),
    }
    holdout = commit_holdout("epoch-1", holdout_manifests)
    policy = FeedbackBudgetPolicy(
        epoch_digest=holdout.commitment_digest,
        detailed_feedback_limit=detailed_limit,
        rerun_limit=rerun_limit,
        coarse_score_boundaries=boundaries,
    )
    return World(
        manifest=manifest,
        components=components,
        cases=tuple(built),
        holdout_manifests=holdout_manifests,
        holdout=holdout,
        policy=policy,
        candidate_identity=identity,
        candidate_manifests={identity: manifest.manifest_digest, other: digest_of("other")},
        provider_digests={name: digest_of(f"provider:{name}") for name in sorted(PROVIDER_NAMES)},
        rubric=(
            RubricCriterion(
                criterion_ref="grounding", question="Grounded?", minimum_score=1, maximum_score=5
            ),
        ),
        conflict=ConflictOfInterestMetadata(
            reviewer_ref=reviewer, declaration_digest=digest_of("declaration"), status=status
        ),
        key=key if key is not None else bytes(range(1, 41)),
        public=(f"{tag} public fixture",),
        shadow=(f"{tag} shadow item",),
        canaries=(f"{tag} canary string",),
        outputs=outputs,
        scores=score_map,
    )


class Providers:
    """Recording runner / scorer / reviewer / snapshot for a world."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.calls: list[str] = []
        self.packets: tuple[BlindedPacket, ...] = ()
        self.seen_evidence: list[object] = []

    def runner(self, evidence: tuple[SourceEvidence, ...]) -> object:
        self.calls.append("runner")
        self.seen_evidence.append(evidence)
        return self.world.outputs[evidence[0].evidence_ref]

    def scorer(self, case: ComparisonCase, output: str) -> object:
        self.calls.append("scorer")
        return self.world.scores[case.case_ref]

    def review(self, packets: tuple[BlindedPacket, ...]) -> None:
        self.calls.append("review")
        self.packets = packets

    def snapshot(self) -> object:
        return dict(self.world.components)


class Clock:
    """A clock returning start, start + 1, ... across every session that shares it."""

    def __init__(self, start: int = 1000) -> None:
        self.next = start

    def __call__(self) -> int:
        value = self.next
        self.next += 1
        return value


def make_ledger(world: World) -> FeedbackBudgetLedger:
    """Return a fresh in-memory ledger with the world's policy."""
    return FeedbackBudgetLedger([world.policy])


def session_kwargs(
    world: World,
    store: object,
    key: str,
    *,
    ledger: object,
    providers: Providers | None = None,
    clock: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Return the keyword arguments of an :class:`EvaluationSession`."""
    providers = providers if providers is not None else Providers(world)
    return {
        "session_key": key,
        "manifest": world.manifest,
        "component_snapshot": providers.snapshot,
        "holdout": world.holdout,
        "holdout_manifests": world.holdout_manifests,
        "cases": world.cases,
        "candidate_identity": world.candidate_identity,
        "candidate_manifests": world.candidate_manifests,
        "runner": providers.runner,
        "scorer": providers.scorer,
        "review": providers.review,
        "provider_digests": world.provider_digests,
        "rubric": world.rubric,
        "conflict_of_interest": world.conflict,
        "randomization_key": world.key,
        "public_items": world.public,
        "shadow_items": world.shadow,
        "canaries": world.canaries,
        "ledger": ledger,
        "store": store,
        "clock": clock if clock is not None else Clock(),
    }


def open_session(
    world: World,
    store: object,
    key: str,
    *,
    ledger: object,
    providers: Providers | None = None,
    clock: Callable[[], object] | None = None,
    **overrides: Any,
) -> EvaluationSession:
    """Construct a session over ``world`` with optional argument overrides."""
    kwargs = session_kwargs(world, store, key, ledger=ledger, providers=providers, clock=clock)
    kwargs.update(overrides)
    return EvaluationSession(**kwargs)
