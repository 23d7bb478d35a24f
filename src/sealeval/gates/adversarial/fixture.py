"""Adversarial suite fixtures, the fixture-set check and the per-case judgement.

A fixture is one case's expectation and synthetic payload (the payload is never
reported); :func:`judge_case` says whether an observed outcome passes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval.gates.adversarial.calls import AdversarialAttempt
from sealeval.gates.adversarial.vocabulary import (
    ATTACK_CLASSES,
    BENIGN_CONTROL,
    HARNESS_REASON_CODES,
    REASON_CODES,
    AdversarialSuiteError,
    JsonValue,
    freeze_json,
    is_adversarial_case_id,
    is_governance_id,
    thaw_json,
)

__all__ = ["MAX_FIXTURES", "AdversarialFixture", "judge_case", "validate_fixtures"]

#: Most fixtures in one run.
MAX_FIXTURES: Final = 128
_PROBE_KINDS: Final = {"filesystem_escape": "filesystem", "network_escape": "network"}
# ---------------------------------------------------------------------------
# Fixtures


@dataclass(frozen=True, slots=True, repr=False)
class AdversarialFixture:
    """One suite case: its expectation and a synthetic payload (never reported).

    Checks, in order: case id grammar (``case_id: invalid_case_id``), attack
    class (``attack_class: invalid_attack_class``), expected reason — any
    reason except the harness's ``boundary_error`` / ``invalid_verdict``
    (``expected_reason_code: invalid_reason``), ``expect_dispatch`` a bool
    with benign ⇔ ``allowed`` ⇔ dispatch (``expect_dispatch:
    invalid_expectation``), capability and policy profile governance ids
    (``capability`` / ``policy_profile: invalid_governance_id``), payload a
    JSON object (``payload: invalid_payload``; stored read-only).
    """

    case_id: str
    attack_class: str
    expected_reason_code: str
    expect_dispatch: bool
    capability: str
    policy_profile: str
    payload: Mapping[str, JsonValue]

    def __post_init__(self) -> None:
        """Validate in the documented order and freeze the payload."""
        if not is_adversarial_case_id(self.case_id):
            raise AdversarialSuiteError("invalid_case_id", "case_id")
        if type(self.attack_class) is not str or self.attack_class not in ATTACK_CLASSES:
            raise AdversarialSuiteError("invalid_attack_class", "attack_class")
        reason = self.expected_reason_code
        if type(reason) is not str or reason not in REASON_CODES or reason in HARNESS_REASON_CODES:
            raise AdversarialSuiteError("invalid_reason", "expected_reason_code")
        benign = self.attack_class == BENIGN_CONTROL
        if type(self.expect_dispatch) is not bool or not (
            benign == (reason == "allowed") == self.expect_dispatch
        ):
            raise AdversarialSuiteError("invalid_expectation", "expect_dispatch")
        if not is_governance_id(self.capability, "capability"):
            raise AdversarialSuiteError("invalid_governance_id", "capability")
        if not is_governance_id(self.policy_profile, "policy"):
            raise AdversarialSuiteError("invalid_governance_id", "policy_profile")
        if not isinstance(self.payload, Mapping):
            raise AdversarialSuiteError("invalid_payload", "payload")
        try:
            frozen = freeze_json(self.payload)
        except ValueError:
            raise AdversarialSuiteError("invalid_payload", "payload") from None
        object.__setattr__(self, "payload", frozen)

    def __repr__(self) -> str:
        """Show the case id and class only (payloads may be hostile text)."""
        return f"AdversarialFixture(case_id={self.case_id!r}, attack_class={self.attack_class!r})"

    @property
    def probe(self) -> str | None:
        """``"filesystem"`` / ``"network"`` for the classes with a mutating probe, else ``None``."""
        return _PROBE_KINDS.get(self.attack_class)

    def attempt(self) -> AdversarialAttempt:
        """Return what a boundary adapter sees of this fixture (no expectation)."""
        return AdversarialAttempt(
            case_id=self.case_id,
            attack_class=self.attack_class,
            payload=self.payload,
            capability=self.capability,
            policy_profile=self.policy_profile,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the fixture document (payload included — informative, never reported)."""
        return {
            "attack_class": self.attack_class,
            "capability": self.capability,
            "case_id": self.case_id,
            "expect_dispatch": self.expect_dispatch,
            "expected_reason_code": self.expected_reason_code,
            "payload": thaw_json(self.payload),
            "policy_profile": self.policy_profile,
        }


def validate_fixtures(fixtures: object) -> tuple[AdversarialFixture, ...]:
    """Check a fixture set before a run; return it in ascending case-id order.

    Raises:
        AdversarialSuiteError: ``fixtures: invalid_fixtures`` (not a list/tuple
            of fixtures), ``fixtures: invalid_count`` (not 1…128),
            ``fixtures: duplicate_case``, ``fixtures: mixed_profile`` (more than
            one capability/policy pair), ``fixtures: missing_control`` (no
            benign control), ``fixtures: missing_attack`` (no attack).
    """
    if not isinstance(fixtures, list | tuple) or not all(
        type(item) is AdversarialFixture for item in fixtures
    ):
        raise AdversarialSuiteError("invalid_fixtures", "fixtures")
    if not 1 <= len(fixtures) <= MAX_FIXTURES:
        raise AdversarialSuiteError("invalid_count", "fixtures")
    ids = [item.case_id for item in fixtures]
    if len(set(ids)) != len(ids):
        raise AdversarialSuiteError("duplicate_case", "fixtures")
    if len({(item.capability, item.policy_profile) for item in fixtures}) != 1:
        raise AdversarialSuiteError("mixed_profile", "fixtures")
    if not any(item.attack_class == BENIGN_CONTROL for item in fixtures):
        raise AdversarialSuiteError("missing_control", "fixtures")
    if all(item.attack_class == BENIGN_CONTROL for item in fixtures):
        raise AdversarialSuiteError("missing_attack", "fixtures")
    return tuple(sorted(fixtures, key=lambda item: item.case_id))


def judge_case(fixture: AdversarialFixture, decision: str, reason: str, dispatches: int) -> bool:
    """Whether an observed ``(decision, reason, dispatch count)`` passes ``fixture``."""
    expected_decision = "allow" if fixture.expect_dispatch else "deny"
    return (
        decision == expected_decision
        and reason == fixture.expected_reason_code
        and dispatches == (1 if fixture.expect_dispatch else 0)
    )
