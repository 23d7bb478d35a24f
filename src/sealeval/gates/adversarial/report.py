"""The suite report (``openmed.agent.adversarial_suite.v1``) and its case results.

Closed codes, counts and booleans only — never a payload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.canonical import decode, encode_openmed
from sealeval.errors import CanonicalError
from sealeval.gates.adversarial.vocabulary import (
    ATTACK_CLASSES,
    BOUNDARY_DECISIONS,
    HARNESS_REASON_CODES,
    REASON_CODES,
    AdversarialSuiteError,
    is_adversarial_case_id,
)

__all__ = ["SUITE_SCHEMA", "AdversarialCaseResult", "AdversarialSuiteReport"]

#: Schema string of the suite report.
SUITE_SCHEMA: Final = "openmed.agent.adversarial_suite.v1"
_CASE_KEYS: Final = frozenset(
    {"attack_class", "case_id", "decision", "dispatch_count", "passed", "reason_code"}
)
_REPORT_KEYS: Final = frozenset({"case_count", "cases", "passed", "passed_count", "schema_version"})
# ---------------------------------------------------------------------------
# The report


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


@dataclass(frozen=True, slots=True)
class AdversarialCaseResult:
    """The observed outcome of one case (content-free).

    ``passed`` is the judgement of whoever built the result; the evidence
    adapter re-judges every case against the pre-registered inventory and
    refuses any disagreement, whatever ``passed`` claims.
    """

    case_id: str
    attack_class: str
    decision: str
    reason_code: str
    dispatch_count: int
    passed: bool

    def __post_init__(self) -> None:
        """Refuse values outside the vocabularies or a decision contradicting its reason."""
        if not is_adversarial_case_id(self.case_id):
            raise AdversarialSuiteError("invalid_case_id", "case_id")
        if type(self.attack_class) is not str or self.attack_class not in ATTACK_CLASSES:
            raise AdversarialSuiteError("invalid_attack_class", "attack_class")
        if type(self.decision) is not str or self.decision not in BOUNDARY_DECISIONS:
            raise AdversarialSuiteError("invalid_decision", "decision")
        reason = self.reason_code
        if type(reason) is not str or reason not in REASON_CODES:
            raise AdversarialSuiteError("invalid_reason", "reason_code")
        if (self.decision == "error") != (reason in HARNESS_REASON_CODES) or (
            self.decision == "allow"
        ) != (reason == "allowed"):
            raise AdversarialSuiteError("inconsistent_verdict", "reason_code")
        if not _is_count(self.dispatch_count):
            raise AdversarialSuiteError("invalid_count", "dispatch_count")
        if type(self.passed) is not bool:
            raise AdversarialSuiteError("invalid_flag", "passed")

    def to_dict(self) -> dict[str, Any]:
        """Return the case document."""
        return {
            "attack_class": self.attack_class,
            "case_id": self.case_id,
            "decision": self.decision,
            "dispatch_count": self.dispatch_count,
            "passed": self.passed,
            "reason_code": self.reason_code,
        }

    @classmethod
    def from_dict(cls, document: object) -> AdversarialCaseResult:
        """Parse a case document (closed: exactly the six keys, ``cases: invalid_cases``)."""
        if not isinstance(document, Mapping) or set(document) != _CASE_KEYS:
            raise AdversarialSuiteError("invalid_cases", "cases")
        return cls(
            case_id=document["case_id"],
            attack_class=document["attack_class"],
            decision=document["decision"],
            reason_code=document["reason_code"],
            dispatch_count=document["dispatch_count"],
            passed=document["passed"],
        )


@dataclass(frozen=True, slots=True)
class AdversarialSuiteReport:
    """The suite report ``openmed.agent.adversarial_suite.v1``.

    ``cases`` must hold unique case ids in ascending order
    (:meth:`from_results` sorts). ``case_count``, ``passed_count`` and
    ``passed`` (at least one case and all passed) are derived.
    """

    cases: tuple[AdversarialCaseResult, ...]
    schema_version: str = SUITE_SCHEMA

    def __post_init__(self) -> None:
        """Refuse another schema, non-results, duplicate or unsorted case ids."""
        if type(self.schema_version) is not str or self.schema_version != SUITE_SCHEMA:
            raise AdversarialSuiteError("unsupported_version", "schema_version")
        cases = self.cases
        if not isinstance(cases, list | tuple) or not all(
            type(item) is AdversarialCaseResult for item in cases
        ):
            raise AdversarialSuiteError("invalid_cases", "cases")
        ids = [item.case_id for item in cases]
        if len(set(ids)) != len(ids):
            raise AdversarialSuiteError("duplicate_case", "cases")
        if ids != sorted(ids):
            raise AdversarialSuiteError("unsorted_cases", "cases")
        object.__setattr__(self, "cases", tuple(cases))

    @classmethod
    def from_results(cls, results: Sequence[AdversarialCaseResult]) -> AdversarialSuiteReport:
        """Build a report from results in any order (sorted by case id)."""
        if not isinstance(results, list | tuple) or not all(
            type(item) is AdversarialCaseResult for item in results
        ):
            raise AdversarialSuiteError("invalid_cases", "cases")
        return cls(cases=tuple(sorted(results, key=lambda item: item.case_id)))

    @property
    def case_count(self) -> int:
        """Number of cases."""
        return len(self.cases)

    @property
    def passed_count(self) -> int:
        """Number of cases that passed."""
        return sum(1 for item in self.cases if item.passed)

    @property
    def passed(self) -> bool:
        """At least one case, and every case passed."""
        return bool(self.cases) and all(item.passed for item in self.cases)

    def to_dict(self) -> dict[str, Any]:
        """Return the report document."""
        return {
            "case_count": self.case_count,
            "cases": [item.to_dict() for item in self.cases],
            "passed": self.passed,
            "passed_count": self.passed_count,
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> AdversarialSuiteReport:
        """Parse a stored report strictly.

        Raises:
            AdversarialSuiteError: ``report: invalid_document`` (not a mapping
                with exactly the five keys), ``schema_version:
                unsupported_version``, ``cases: invalid_cases`` (not an array of
                closed case objects), any case refusal, ``cases:
                duplicate_case`` / ``cases: unsorted_cases``, and ``report:
                inconsistent_report`` when ``case_count``, ``passed_count`` or
                ``passed`` differ from what the cases give.
        """
        if not isinstance(document, Mapping) or set(document) != _REPORT_KEYS:
            raise AdversarialSuiteError("invalid_document", "report")
        schema = document["schema_version"]
        if type(schema) is not str or schema != SUITE_SCHEMA:
            raise AdversarialSuiteError("unsupported_version", "schema_version")
        cases = document["cases"]
        if not isinstance(cases, list | tuple):
            raise AdversarialSuiteError("invalid_cases", "cases")
        report = cls(cases=tuple(AdversarialCaseResult.from_dict(item) for item in cases))
        if (
            type(document["case_count"]) is not int
            or document["case_count"] != report.case_count
            or type(document["passed_count"]) is not int
            or document["passed_count"] != report.passed_count
            or type(document["passed"]) is not bool
            or document["passed"] != report.passed
        ):
            raise AdversarialSuiteError("inconsistent_report", "report")
        return report

    @classmethod
    def from_json(cls, text: object) -> AdversarialSuiteReport:
        """Parse report text with the strict decoder (``report: invalid_json``), then strictly."""
        if not isinstance(text, str | bytes):
            raise AdversarialSuiteError("invalid_json", "report")
        try:
            document = decode(text)
        except CanonicalError:
            raise AdversarialSuiteError("invalid_json", "report") from None
        return cls.from_dict(document)
