"""Aggregate release evidence: ``SliceEvidence`` and ``MetricEvidence``.

Wire document ``openmed.eval.agent_release_evidence.v1``. Both classes are
frozen and validate on construction in the order the contract specifies, so
the first failing check decides the ``<field>: <code>`` message. ``value`` is
stored as a float; interval bounds keep the caller's ``int``/``float`` type
(part of the wire contract: ``1`` and ``1.0`` digest differently).

Parsing from the mapping form is closed in sealeval: an unknown key is refused
(``metric: unknown_field`` / ``slice: unknown_field``) where the reference
ignores it (``docs/decisions/compat.md``). A missing key reads as ``null``, as
in the reference, and is then refused by the check for that field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sealeval._validate import check_closed
from sealeval.canonical import encode_openmed, is_digest
from sealeval.gates.registry import GateError, is_gate_reference

__all__ = ["EVIDENCE_SCHEMA", "METRIC_KEYS", "SLICE_KEYS", "MetricEvidence", "SliceEvidence"]

EVIDENCE_SCHEMA: Final = "openmed.eval.agent_release_evidence.v1"
_RATE_TOLERANCE: Final = 1e-12
#: The six keys of a slice document and the ten keys of an evidence document.
SLICE_KEYS: Final = frozenset(
    {"ci_lower", "ci_upper", "event_count", "sample_size", "slice_ref", "value"}
)
METRIC_KEYS: Final = frozenset(
    {
        "ci_lower",
        "ci_upper",
        "event_count",
        "evidence_digest",
        "limitations",
        "metric",
        "sample_size",
        "schema_version",
        "slices",
        "value",
    }
)

Number = int | float


def _is_number(value: object) -> bool:
    """Return whether ``value`` is a finite ``int`` or ``float`` (never a bool)."""
    kind = type(value)
    if kind is int:
        return True
    return kind is float and math.isfinite(value)  # type: ignore[arg-type]


def _is_count(value: object) -> bool:
    return type(value) is int


def _is_sequence(value: object) -> bool:
    return isinstance(value, list | tuple)


def _check_statistics(
    prefix: str,
    *,
    value: float,
    sample_size: int,
    event_count: object,
    ci_lower: object,
    ci_upper: object,
) -> None:
    """Apply the shared statistical checks with the ``metric``/``slice`` field prefix."""
    if event_count is None and ci_lower is None and ci_upper is None:
        raise GateError("count_or_interval_required", prefix)
    if event_count is not None and (
        not _is_count(event_count) or not 0 <= event_count <= sample_size  # type: ignore[operator]
    ):
        raise GateError("invalid_count", f"{prefix}.event_count")
    if (ci_lower is None) != (ci_upper is None):
        raise GateError("incomplete_interval", prefix)
    if ci_lower is not None:
        if not _is_number(ci_lower):
            raise GateError("invalid_number", f"{prefix}.ci_lower")
        if not _is_number(ci_upper):
            raise GateError("invalid_number", f"{prefix}.ci_upper")
        if not ci_lower <= value <= ci_upper:  # type: ignore[operator]
            raise GateError("interval_excludes_value", prefix)


def _rate_matches(value: float, event_count: int, sample_size: int) -> bool:
    return abs(value - event_count / sample_size) <= _RATE_TOLERANCE


@dataclass(frozen=True, slots=True)
class SliceEvidence:
    """Evidence for one pre-registered slice of a metric."""

    slice_ref: str
    value: float
    sample_size: int
    event_count: int | None = None
    ci_lower: Number | None = None
    ci_upper: Number | None = None

    def __post_init__(self) -> None:
        """Validate in the specified order."""
        if not is_gate_reference(self.slice_ref):
            raise GateError("invalid_reference", "slice_ref")
        if not _is_number(self.value):
            raise GateError("invalid_number", "value")
        if not _is_count(self.sample_size) or self.sample_size <= 0:
            raise GateError("invalid_count", "sample_size")
        object.__setattr__(self, "value", float(self.value))
        _check_statistics(
            "slice",
            value=self.value,
            sample_size=self.sample_size,
            event_count=self.event_count,
            ci_lower=self.ci_lower,
            ci_upper=self.ci_upper,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the slice document."""
        return {
            "ci_lower": self.ci_lower,
            "ci_upper": self.ci_upper,
            "event_count": self.event_count,
            "sample_size": self.sample_size,
            "slice_ref": self.slice_ref,
            "value": self.value,
        }

    @classmethod
    def from_dict(cls, document: object) -> SliceEvidence:
        """Parse the mapping form (closed: unknown keys are refused)."""
        if not isinstance(document, Mapping):
            raise GateError("invalid_item", "slices")
        check_closed(document, "slice", (), SLICE_KEYS, error=GateError)
        return cls(
            slice_ref=document.get("slice_ref"),  # type: ignore[arg-type]
            value=document.get("value"),  # type: ignore[arg-type]
            sample_size=document.get("sample_size"),  # type: ignore[arg-type]
            event_count=document.get("event_count"),
            ci_lower=document.get("ci_lower"),
            ci_upper=document.get("ci_upper"),
        )


@dataclass(frozen=True, slots=True)
class MetricEvidence:
    """Aggregate evidence for one gate metric, bound to its source by ``evidence_digest``."""

    metric: str
    value: float
    sample_size: int
    evidence_digest: str
    slices: tuple[SliceEvidence, ...]
    limitations: tuple[str, ...]
    event_count: int | None = None
    ci_lower: Number | None = None
    ci_upper: Number | None = None
    schema_version: str = field(default=EVIDENCE_SCHEMA)

    def __post_init__(self) -> None:
        """Validate in the specified order; invalid evidence cannot exist."""
        if self.schema_version != EVIDENCE_SCHEMA or type(self.schema_version) is not str:
            raise GateError("unsupported_version", "schema_version")
        if not is_gate_reference(self.metric):
            raise GateError("invalid_reference", "metric")
        if not _is_number(self.value):
            raise GateError("invalid_number", "value")
        if not _is_count(self.sample_size) or self.sample_size <= 0:
            raise GateError("invalid_count", "sample_size")
        if not is_digest(self.evidence_digest):
            raise GateError("invalid_digest", "evidence_digest")
        value = float(self.value)
        object.__setattr__(self, "value", value)
        _check_statistics(
            "metric",
            value=value,
            sample_size=self.sample_size,
            event_count=self.event_count,
            ci_lower=self.ci_lower,
            ci_upper=self.ci_upper,
        )
        is_rate = self.metric.endswith("_rate")
        if is_rate and not _rate_matches(value, self.event_count or 0, self.sample_size):
            raise GateError("rate_count_mismatch", "metric")
        self._check_slices(is_rate)
        self._check_limitations()

    def _check_slices(self, is_rate: bool) -> None:
        slices = self.slices
        if (
            not _is_sequence(slices)
            or not slices
            or not all(type(item) is SliceEvidence for item in slices)
        ):
            raise GateError("invalid_sequence", "slices")
        refs = [item.slice_ref for item in slices]
        if len(set(refs)) != len(refs):
            raise GateError("duplicate_reference", "slices")
        if is_rate and not all(
            item.event_count is not None
            and _rate_matches(item.value, item.event_count, item.sample_size)
            for item in slices
        ):
            raise GateError("rate_count_mismatch", "slices")
        object.__setattr__(self, "slices", tuple(slices))

    def _check_limitations(self) -> None:
        limitations = self.limitations
        if not _is_sequence(limitations):
            raise GateError("invalid_sequence", "limitations")
        if not limitations:
            raise GateError("empty", "limitations")
        if not all(is_gate_reference(item) for item in limitations):
            raise GateError("invalid_reference", "limitation")
        object.__setattr__(self, "limitations", tuple(limitations))

    def to_dict(self) -> dict[str, Any]:
        """Return the evidence document (all ten keys, slices in given order)."""
        return {
            "ci_lower": self.ci_lower,
            "ci_upper": self.ci_upper,
            "event_count": self.event_count,
            "evidence_digest": self.evidence_digest,
            "limitations": list(self.limitations),
            "metric": self.metric,
            "sample_size": self.sample_size,
            "schema_version": self.schema_version,
            "slices": [item.to_dict() for item in self.slices],
            "value": self.value,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> MetricEvidence:
        """Parse the mapping form in the specified order (closed: unknown keys refused)."""
        document = check_closed(
            document, "metric", (), METRIC_KEYS, error=GateError, type_code="invalid_document"
        )
        slices = document.get("slices")
        limitations = document.get("limitations")
        if not isinstance(slices, list | tuple):
            raise GateError("invalid_sequence", "slices")
        if not isinstance(limitations, list | tuple):
            raise GateError("invalid_sequence", "limitations")
        if not all(isinstance(item, Mapping) for item in slices):
            raise GateError("invalid_item", "slices")
        parsed = tuple(SliceEvidence.from_dict(item) for item in slices)
        schema = document.get("schema_version")
        return cls(
            schema_version="" if schema is None else schema,
            metric=document.get("metric"),  # type: ignore[arg-type]
            value=document.get("value"),  # type: ignore[arg-type]
            sample_size=document.get("sample_size"),  # type: ignore[arg-type]
            evidence_digest=document.get("evidence_digest"),  # type: ignore[arg-type]
            slices=parsed,
            limitations=tuple(limitations),
            event_count=document.get("event_count"),
            ci_lower=document.get("ci_lower"),
            ci_upper=document.get("ci_upper"),
        )
