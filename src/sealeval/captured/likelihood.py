"""Reference-continuation likelihood facts on records, and the evaluator ``source``.

A record may carry ``likelihood`` (spec 10-run-records.md §3): the natural-log
probability the evaluated model assigned to the record's reference
(``expected``) as a continuation of its input, with the token and UTF-8 byte
counts and digests binding the facts to the record, the run and the
configuration that produced them. :class:`LikelihoodFacts` enforces the closed
schema on construction; :func:`check_likelihood_binding` performs the
cross-checks against the record and its run (run validation calls it for every
record, in record order). The per-record value a comparison uses is
:attr:`LikelihoodFacts.nll_per_utf8_byte`.

:class:`Source` (``{name, version}``, the evaluator that produced a run) lives
here because likelihood facts repeat it; it is re-exported by
:mod:`sealeval.captured`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sealeval._validate import (
    JsonValue,
    check_closed,
    check_digest,
    check_text,
    freeze_json,
    rebased,
)
from sealeval.canonical import frozen_canonical, frozen_digest
from sealeval.captured.errors import CapturedRunError

if TYPE_CHECKING:
    from sealeval.captured.service_identity import ServiceIdentity

__all__ = ["BASIS", "LikelihoodFacts", "Source", "check_likelihood_binding"]

#: The only likelihood basis.
BASIS: Final = "reference_continuation"

_REQUIRED: Final = frozenset(
    {
        "basis",
        "logprob_sum",
        "token_count",
        "utf8_byte_count",
        "input_digest",
        "reference_digest",
        "artifact_digest",
        "configuration_digest",
        "tokenizer_digest",
        "source",
    }
)
_OPTIONAL: Final = frozenset({"service_identity_digest"})


@dataclass(frozen=True, slots=True, repr=False)
class Source:
    """The evaluator that produced a run: ``{name: text128, version: text128}``."""

    name: str
    version: str

    def __post_init__(self) -> None:
        """Check both members (1-128 code points, no C0 controls or DEL)."""
        check_text(self.name, "source.name", error=CapturedRunError)
        check_text(self.version, "source.version", error=CapturedRunError)

    def __repr__(self) -> str:
        """Never show declared values."""
        return "Source(...)"

    def to_dict(self) -> dict[str, str]:
        """Return the wire object."""
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_document(cls, document: object) -> Source:
        """Build from a parsed ``source`` object (closed); a :class:`Source` is returned as is."""
        if isinstance(document, Source):
            return document
        doc = check_closed(document, "source", ("name", "version"), error=CapturedRunError)
        return cls(name=doc["name"], version=doc["version"])


def _check_count(value: object, field: str) -> None:
    """Check an integer ≥1 that must be exact (``3.0`` is refused after the range check)."""
    if type(value) is int:
        if value < 1:
            raise CapturedRunError("out_of_range", field)
        return
    if type(value) is float and value.is_integer():
        if value < 1:
            raise CapturedRunError("out_of_range", field)
        raise CapturedRunError("not_exact_integer", field)
    raise CapturedRunError("invalid_type", field)


def _check_logprob(value: object, field: str) -> None:
    if type(value) is int:
        if value > 0:
            raise CapturedRunError("out_of_range", field)
        try:
            float(value)
        except OverflowError:
            raise CapturedRunError("out_of_range", field) from None
        return
    if type(value) is float:
        if not math.isfinite(value):
            raise CapturedRunError("invalid_json_value", field)
        if value > 0:
            raise CapturedRunError("out_of_range", field)
        return
    raise CapturedRunError("invalid_type", field)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class LikelihoodFacts:
    """Closed ``likelihood`` object of a record (basis ``reference_continuation``).

    ``service_identity_digest`` is ``None`` when absent (it is never ``null``
    on the wire). ``artifact_digest`` must be ``None`` exactly when
    ``service_identity_digest`` is present (hosted runs).
    """

    logprob_sum: int | float
    token_count: int
    utf8_byte_count: int
    input_digest: str
    reference_digest: str
    artifact_digest: str | None
    configuration_digest: str
    tokenizer_digest: str
    source: Source
    service_identity_digest: str | None = None
    basis: str = BASIS

    def __post_init__(self) -> None:
        """Enforce the closed schema (types, ranges, digests, the hosted coupling)."""
        if self.basis != BASIS or type(self.basis) is not str:
            raise CapturedRunError("invalid_constant", "likelihood.basis")
        _check_logprob(self.logprob_sum, "likelihood.logprob_sum")
        _check_count(self.token_count, "likelihood.token_count")
        _check_count(self.utf8_byte_count, "likelihood.utf8_byte_count")
        for name in ("input_digest", "reference_digest"):
            check_digest(getattr(self, name), f"likelihood.{name}", error=CapturedRunError)
        check_digest(
            self.artifact_digest,
            "likelihood.artifact_digest",
            nullable=True,
            error=CapturedRunError,
        )
        for name in ("configuration_digest", "tokenizer_digest"):
            check_digest(getattr(self, name), f"likelihood.{name}", error=CapturedRunError)
        with rebased("source", "likelihood.source", error=CapturedRunError):
            object.__setattr__(self, "source", Source.from_document(self.source))
        if self.service_identity_digest is not None:
            check_digest(
                self.service_identity_digest,
                "likelihood.service_identity_digest",
                error=CapturedRunError,
            )
            if self.artifact_digest is not None:
                raise CapturedRunError("artifact_digest_forbidden", "likelihood.artifact_digest")
        elif self.artifact_digest is None:
            raise CapturedRunError("artifact_digest_required", "likelihood.artifact_digest")

    def __repr__(self) -> str:
        """Show the class only."""
        return "LikelihoodFacts(...)"

    def __eq__(self, other: object) -> bool:
        """Compare canonical bytes (``1`` differs from ``1.0``)."""
        if not isinstance(other, LikelihoodFacts):
            return NotImplemented
        return frozen_canonical(self.to_dict(), error=CapturedRunError) == frozen_canonical(
            other.to_dict(), error=CapturedRunError
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def nll_per_utf8_byte(self) -> float:
        """``-logprob_sum / utf8_byte_count`` in binary64 (nats per UTF-8 byte of the reference)."""
        return -float(self.logprob_sum) / self.utf8_byte_count

    def to_dict(self) -> dict[str, Any]:
        """Return the wire object (``service_identity_digest`` only when present)."""
        document: dict[str, Any] = {
            "basis": self.basis,
            "logprob_sum": self.logprob_sum,
            "token_count": self.token_count,
            "utf8_byte_count": self.utf8_byte_count,
            "input_digest": self.input_digest,
            "reference_digest": self.reference_digest,
            "artifact_digest": self.artifact_digest,
            "configuration_digest": self.configuration_digest,
            "tokenizer_digest": self.tokenizer_digest,
            "source": self.source.to_dict(),
        }
        if self.service_identity_digest is not None:
            document["service_identity_digest"] = self.service_identity_digest
        return document

    @classmethod
    def from_document(cls, document: object) -> LikelihoodFacts:
        """Build from a parsed ``likelihood`` object (closed); facts are returned as is."""
        if isinstance(document, LikelihoodFacts):
            return document
        doc = check_closed(document, "likelihood", _REQUIRED, _OPTIONAL, error=CapturedRunError)
        if "service_identity_digest" in doc and doc["service_identity_digest"] is None:
            raise CapturedRunError("invalid_digest", "likelihood.service_identity_digest")
        return cls(
            basis=doc["basis"],
            logprob_sum=doc["logprob_sum"],
            token_count=doc["token_count"],
            utf8_byte_count=doc["utf8_byte_count"],
            input_digest=doc["input_digest"],
            reference_digest=doc["reference_digest"],
            artifact_digest=doc["artifact_digest"],
            configuration_digest=doc["configuration_digest"],
            tokenizer_digest=doc["tokenizer_digest"],
            source=doc["source"],
            service_identity_digest=doc.get("service_identity_digest"),
        )


# ---------------------------------------------------------------------------
# Cross-checks (spec 10 §3, in the specified order)


def check_reference(facts: LikelihoodFacts, expected: JsonValue, field: str) -> None:
    """Check steps 1-3: ``expected`` is non-empty text of exactly ``utf8_byte_count`` bytes."""
    if type(expected) is not str or not expected:
        raise CapturedRunError("likelihood_reference_not_text", field)
    if facts.utf8_byte_count != len(expected.encode("utf-8")):
        raise CapturedRunError("likelihood_byte_count_mismatch", f"{field}.utf8_byte_count")


def check_service(
    facts: LikelihoodFacts, service_identity: ServiceIdentity | None, field: str
) -> None:
    """Check step 4: hosted runs bind the descriptor and its configuration, others neither."""
    if service_identity is not None:
        if facts.service_identity_digest != service_identity.digest:
            raise CapturedRunError(
                "likelihood_binding_mismatch", f"{field}.service_identity_digest"
            )
        if facts.configuration_digest != service_identity.configuration_digest:
            raise CapturedRunError("likelihood_binding_mismatch", f"{field}.configuration_digest")
    elif facts.service_identity_digest is not None:
        raise CapturedRunError("likelihood_binding_mismatch", f"{field}.service_identity_digest")


def check_input(facts: LikelihoodFacts, input_value: JsonValue, field: str) -> None:
    """Check step 5: ``input_digest`` binds the captured (pre-projection) input."""
    if facts.input_digest != frozen_digest(input_value, error=CapturedRunError):
        raise CapturedRunError("likelihood_binding_mismatch", f"{field}.input_digest")


def check_tail(
    facts: LikelihoodFacts, expected: JsonValue, artifact_digest: str | None, field: str
) -> None:
    """Check step 6, record part: the reference digest and the run's artifact digest."""
    if facts.reference_digest != frozen_digest(expected, error=CapturedRunError):
        raise CapturedRunError("likelihood_binding_mismatch", f"{field}.reference_digest")
    if facts.artifact_digest != artifact_digest:
        raise CapturedRunError("likelihood_binding_mismatch", f"{field}.artifact_digest")


def check_source(facts: LikelihoodFacts, source: Source, field: str) -> None:
    """Check step 6, last part: the facts repeat the run's ``source`` exactly."""
    if facts.source != source:
        raise CapturedRunError("likelihood_binding_mismatch", f"{field}.source")


def check_likelihood_binding(
    facts: LikelihoodFacts,
    *,
    input_value: JsonValue,
    expected: JsonValue,
    source: Source,
    artifact_digest: str | None,
    service_identity: ServiceIdentity | None,
    field: str = "likelihood",
) -> None:
    """Cross-check a record's likelihood facts against the record and its run.

    Run validation calls this for every record; nothing needs to call it on a
    validated :class:`~sealeval.captured.run.Run`.

    Args:
        facts: the record's facts.
        input_value: the captured input — the record's ``input``, or for a
            projected record the retained original
            ``context.input_projection.source.input``.
        expected: the record's ``expected``.
        source: the run's ``source``.
        artifact_digest: the run's ``artifact_digest``.
        service_identity: the run's descriptor (hosted runs) or ``None``.
        field: the field name errors are rooted at.

    Raises:
        CapturedRunError: ``likelihood_reference_not_text``,
            ``likelihood_byte_count_mismatch`` or ``likelihood_binding_mismatch``
            (the field names the binding), first failure in the specified order.
    """
    input_value = freeze_json(input_value, f"{field}.input_digest", error=CapturedRunError)
    expected = freeze_json(expected, f"{field}.reference_digest", error=CapturedRunError)
    check_bound_facts(
        facts,
        input_value=input_value,
        expected=expected,
        source=source,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        field=field,
    )


def check_bound_facts(
    facts: LikelihoodFacts,
    *,
    input_value: JsonValue,
    expected: JsonValue,
    source: Source,
    artifact_digest: str | None,
    service_identity: ServiceIdentity | None,
    field: str,
) -> None:
    """Run :func:`check_likelihood_binding` on frozen values (record attributes)."""
    check_reference(facts, expected, field)
    check_service(facts, service_identity, field)
    check_input(facts, input_value, field)
    check_tail(facts, expected, artifact_digest, field)
    check_source(facts, source, field)


def facts_from(value: object, field: str) -> LikelihoodFacts:
    """Return typed facts from facts or a parsed object, errors rooted at ``field``."""
    if isinstance(value, LikelihoodFacts):
        return value
    if not isinstance(value, Mapping):
        raise CapturedRunError("invalid_type", field)
    with rebased("likelihood", field, error=CapturedRunError):
        return LikelihoodFacts.from_document(value)
