"""Release evidence for ``recovery_correctness_rate`` from executed recovery cases (openmed 3.1).

A *recovery evidence case* is one pre-registered crash-recovery scenario that
was executed: the checkpoint the planner recovered from, the decision it
made, and an independently declared golden decision. A case is *correct*
exactly when the two decisions are identical documents — so a correct
refusal for human review counts as correct, and a "successful" resume where
the golden decision is a refusal does not.

:func:`recovery_release_evidence` checks the run (``21-adapters.md`` §3.3, in
order): absent cases → no evidence; ``completed`` not exactly ``True`` →
``failed_run``; ``synthetic`` not a bool → ``invalid_provenance``; the
pre-registered inventory of case digests, then the cases' own digests, under
the inventory rules (``missing_inventory`` / ``invalid_case_digest`` /
``duplicate_case``); the two sets must be equal (``incomplete_run``); no two
cases may share a checkpoint (``duplicate_run``). It then counts one
observation per case, ordered by case digest, sliced by checkpoint phase.
The ``evidence_digest`` binds the digest envelope
(:func:`recovery_source_envelope`). Every refusal is an
:class:`~sealeval.gates.adapters.errors.AgentReleaseAdapterError` whose
message is the bare code. Pure: no I/O, no logging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.canonical import is_digest
from sealeval.gates.adapters.counting import count_evidence
from sealeval.gates.adapters.errors import AgentReleaseAdapterError
from sealeval.gates.adapters.inventory import case_inventory
from sealeval.gates.evidence import MetricEvidence
from sealeval.gates.recovery.checkpoint import RecoveryCheckpoint
from sealeval.gates.recovery.decision import RecoveryDecision
from sealeval.gates.recovery.vocabulary import RecoveryError

__all__ = [
    "RECOVERY_METRIC",
    "RECOVERY_SOURCE_KIND",
    "RECOVERY_SOURCE_SCHEMA",
    "RecoveryEvidenceCase",
    "recovery_release_evidence",
    "recovery_source_envelope",
]

#: The gate metric this adapter provides evidence for.
RECOVERY_METRIC: Final = "recovery_correctness_rate"
#: Schema string and kind of the digest envelope.
RECOVERY_SOURCE_SCHEMA: Final = "openmed.eval.agent_release_source.v1"
RECOVERY_SOURCE_KIND: Final = "recovery"
_CASE_KEYS: Final = frozenset({"case_digest", "checkpoint", "decision", "expected_decision"})


def _refuse(code: str) -> AgentReleaseAdapterError:
    return AgentReleaseAdapterError(code)


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryEvidenceCase:
    """One executed recovery case: checkpoint, executed decision and golden decision.

    Construction checks, in order: ``case_digest`` is a digest
    (``invalid_case_digest``); the three objects have the right types
    (``invalid_recovery_case``); both decisions were made for this checkpoint
    (``checkpoint_mismatch``).
    """

    case_digest: str
    checkpoint: RecoveryCheckpoint
    decision: RecoveryDecision
    expected_decision: RecoveryDecision

    def __post_init__(self) -> None:
        """Validate in the specified order."""
        if not is_digest(self.case_digest):
            raise _refuse("invalid_case_digest")
        if (
            type(self.checkpoint) is not RecoveryCheckpoint
            or type(self.decision) is not RecoveryDecision
            or type(self.expected_decision) is not RecoveryDecision
        ):
            raise _refuse("invalid_recovery_case")
        digest = self.checkpoint.checkpoint_digest
        if (
            self.decision.source_checkpoint_digest != digest
            or self.expected_decision.source_checkpoint_digest != digest
        ):
            raise _refuse("checkpoint_mismatch")

    @property
    def phase(self) -> str:
        """The checkpoint phase (the case's slice)."""
        return self.checkpoint.phase

    @property
    def correct(self) -> bool:
        """Whether the executed decision is identical to the golden decision."""
        return self.decision.to_json() == self.expected_decision.to_json()

    def to_dict(self) -> dict[str, Any]:
        """Return the case document as it enters the digest envelope."""
        return {
            "case_digest": self.case_digest,
            "checkpoint": self.checkpoint.to_dict(),
            "decision": self.decision.to_dict(),
            "expected_decision": self.expected_decision.to_dict(),
        }

    @classmethod
    def from_dict(cls, document: object) -> RecoveryEvidenceCase:
        """Parse a case document (closed) with the adapter's codes.

        A non-mapping case or a wrong key set, or a checkpoint / decision
        document the data model refuses, is ``invalid_recovery_case`` (the
        data-model refusal, itself content-free, is kept as the cause);
        non-mapping members are passed through and refused by construction.
        """
        if not isinstance(document, Mapping) or set(document) != _CASE_KEYS:
            raise _refuse("invalid_recovery_case")
        if not is_digest(document["case_digest"]):
            raise _refuse("invalid_case_digest")
        try:
            checkpoint = _member(document["checkpoint"], RecoveryCheckpoint.from_dict)
            decision = _member(document["decision"], RecoveryDecision.from_dict)
            expected = _member(document["expected_decision"], RecoveryDecision.from_dict)
        except RecoveryError as error:
            raise _refuse("invalid_recovery_case") from error
        return cls(
            case_digest=document["case_digest"],
            checkpoint=checkpoint,
            decision=decision,
            expected_decision=expected,
        )

    def __repr__(self) -> str:
        """Show the phase, correctness and the computed checkpoint digest only."""
        return (
            f"RecoveryEvidenceCase(phase={self.phase!r}, correct={self.correct!r}, "
            f"checkpoint_digest={self.checkpoint.checkpoint_digest!r})"
        )


def _member(value: object, parse: Any) -> Any:
    return parse(value) if isinstance(value, Mapping) else value


def _validated(
    cases: object, expected_case_digests: object, completed: object, synthetic: object
) -> tuple[tuple[RecoveryEvidenceCase, ...], frozenset[str], bool] | None:
    """Apply §3.3 steps 1-7; return the cases ordered by case digest (or ``None``)."""
    if cases is None:
        return None
    if completed is not True:
        raise _refuse("failed_run")
    if type(synthetic) is not bool:
        raise _refuse("invalid_provenance")
    inventory = case_inventory(expected_case_digests)
    if not isinstance(cases, list | tuple) or not all(
        type(case) is RecoveryEvidenceCase for case in cases
    ):
        raise _refuse("invalid_recovery_case")
    if case_inventory([case.case_digest for case in cases]) != inventory:
        raise _refuse("incomplete_run")
    checkpoints = {case.checkpoint.checkpoint_digest for case in cases}
    if len(checkpoints) != len(cases):
        raise _refuse("duplicate_run")
    ordered = tuple(sorted(cases, key=lambda case: case.case_digest))
    return ordered, inventory, synthetic


def _envelope(
    ordered: Sequence[RecoveryEvidenceCase], inventory: frozenset[str], synthetic: bool
) -> dict[str, Any]:
    return {
        "cases": [case.to_dict() for case in ordered],
        "completed": True,
        "expected_case_digests": sorted(inventory),
        "kind": RECOVERY_SOURCE_KIND,
        "schema_version": RECOVERY_SOURCE_SCHEMA,
        "synthetic": synthetic,
    }


def recovery_source_envelope(
    cases: Sequence[RecoveryEvidenceCase] | None,
    *,
    expected_case_digests: Sequence[str],
    completed: bool = True,
    synthetic: bool = True,
) -> dict[str, Any] | None:
    """Return the digest envelope :func:`recovery_release_evidence` hashes (``None`` if absent).

    ``{"schema_version": "openmed.eval.agent_release_source.v1", "kind":
    "recovery", "completed": true, "synthetic": <bool>,
    "expected_case_digests": [sorted], "cases": [case documents by case
    digest]}``. Same checks and refusals as :func:`recovery_release_evidence`.
    """
    checked = _validated(cases, expected_case_digests, completed, synthetic)
    return None if checked is None else _envelope(*checked)


def recovery_release_evidence(
    cases: Sequence[RecoveryEvidenceCase] | None,
    *,
    expected_case_digests: Sequence[str],
    completed: bool = True,
    synthetic: bool = True,
) -> tuple[MetricEvidence, ...]:
    """Return the ``recovery_correctness_rate`` evidence of an executed recovery run.

    Args:
        cases: the executed cases (a list or tuple), or ``None`` (absent: no
            evidence, so the gate fails closed as ``missing_evidence``).
        expected_case_digests: the pre-registered inventory of case digests.
        completed: must be exactly ``True``.
        synthetic: whether the cases are synthetic (adds ``synthetic_only``).

    Returns:
        ``()`` for absent cases, else one count evidence: per case (ordered by
        case digest) the slice is the checkpoint phase and the event is
        "executed decision identical to the golden decision"; limitations
        ``host_supplied_golden`` then ``synthetic_only`` if synthetic.

    Raises:
        AgentReleaseAdapterError: ``failed_run``, ``invalid_provenance``,
            ``missing_inventory``, ``invalid_case_digest``, ``duplicate_case``,
            ``invalid_recovery_case``, ``incomplete_run``, ``duplicate_run``.
    """
    checked = _validated(cases, expected_case_digests, completed, synthetic)
    if checked is None:
        return ()
    ordered, inventory, is_synthetic = checked
    envelope = _envelope(ordered, inventory, is_synthetic)
    limitations = (
        ("host_supplied_golden", "synthetic_only") if is_synthetic else ("host_supplied_golden",)
    )
    evidence = count_evidence(
        RECOVERY_METRIC,
        [(case.phase, case.correct) for case in ordered],
        envelope=envelope,
        limitations=limitations,
    )
    return (evidence,)
