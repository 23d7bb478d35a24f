"""The session both session benchmarks run (``bench/store.py``, ``bench/session_scale.py``).

One home for what they share: the digest of a label, the holdout commitment
and budget policy of a set of cases, and the :class:`EvaluationSession` with
its fixed providers (runner from a table of outputs, no-op review, rubric,
conflict-of-interest metadata, overlap sentences and canary).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sealeval.canonical import digest_openmed
from sealeval.manifest.sealed import SealedWorkflowManifest
from sealeval.session.budget import FeedbackBudgetPolicy
from sealeval.session.cases import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    evaluation_case_digest,
)
from sealeval.session.holdout import HoldoutCommitment, commit_holdout
from sealeval.session.session import EvaluationSession

__all__ = ["bench_digest", "build_session", "holdout_and_policy"]


def bench_digest(label: str) -> str:
    """Return a fixed digest naming ``label`` (components, providers, keys)."""
    return digest_openmed(["bench", label])


def holdout_and_policy(
    cases: Sequence[ComparisonCase], *, rerun_limit: int
) -> tuple[dict[str, tuple[str, ...]], HoldoutCommitment, FeedbackBudgetPolicy]:
    """Return the holdout manifests, their commitment and the budget policy of ``cases``."""
    manifests = {
        "case": tuple(evaluation_case_digest(case) for case in cases),
        "label": (bench_digest("label"),),
        "template": (bench_digest("template"),),
        "randomization": (bench_digest("randomization"),),
    }
    holdout = commit_holdout("bench-epoch", manifests)
    policy = FeedbackBudgetPolicy(
        epoch_digest=holdout.commitment_digest,
        detailed_feedback_limit=1,
        rerun_limit=rerun_limit,
        coarse_score_boundaries=(0.5, 0.8),
    )
    return manifests, holdout, policy


def build_session(
    *,
    key: str,
    manifest: SealedWorkflowManifest,
    components: Mapping[str, str],
    cases: tuple[ComparisonCase, ...],
    holdout: HoldoutCommitment,
    holdout_manifests: Mapping[str, tuple[str, ...]],
    outputs: Mapping[str, str],
    scorer: Callable[[ComparisonCase, str], float],
    ledger: Any,
    store: Any,
    clock: Callable[[], int],
) -> EvaluationSession:
    """Return the benchmark's session: ``outputs`` by evidence ref, review a no-op."""
    return EvaluationSession(
        session_key=key,
        manifest=manifest,
        component_snapshot=lambda: dict(components),
        holdout=holdout,
        holdout_manifests=dict(holdout_manifests),
        cases=cases,
        candidate_identity="candidate",
        candidate_manifests={
            "candidate": manifest.manifest_digest,
            "reference": bench_digest("reference-manifest"),
        },
        runner=lambda evidence: outputs[evidence[0].evidence_ref],
        scorer=scorer,
        review=lambda _packets: None,
        provider_digests={name: bench_digest(name) for name in ("runner", "scorer", "review")},
        rubric=(
            RubricCriterion(
                criterion_ref="grounding", question="Grounded?", minimum_score=1, maximum_score=5
            ),
        ),
        conflict_of_interest=ConflictOfInterestMetadata(
            reviewer_ref="reviewer",
            declaration_digest=bench_digest("declaration"),
            status="cleared",
        ),
        randomization_key=secrets.token_bytes(32),
        public_items=("public fixture sentence for overlap checks",),
        shadow_items=("shadow item sentence for overlap checks",),
        canaries=("canary-string-bench-0001",),
        ledger=ledger,
        store=store,
        clock=clock,
    )
