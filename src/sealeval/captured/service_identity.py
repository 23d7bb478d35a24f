"""Hosted service identity: the closed descriptor a run against a hosted API carries.

A hosted run has no model artifact to hash, so it carries ``service_identity``
instead of ``artifact_digest`` (spec 12-service-identity.md). The descriptor
authenticates *what was declared* (provider, service, deployment, model names,
the exact request configuration via its digest, the harness that captured it)
and the UTC observation window; it does not identify weights.

:func:`validate_service_identity` checks, in order: object; closed schema
(``text512ns`` names, ``configuration`` ≤100 members, digest patterns,
timestamp pattern); canonical size ≤1 MiB; ``configuration_digest ==
digest(configuration)``; real calendar instants; ``started_at <= ended_at``.
:func:`evaluated_subject_digest` is the identity a comparison reports for a run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from sealeval._validate import (
    JsonValue,
    check_closed,
    check_digest,
    check_members,
    check_text,
    freeze_json,
    rebased,
    thaw_json,
)
from sealeval.canonical import digest_bytes, digest_invarlock, frozen_canonical
from sealeval.captured.errors import CapturedRunError

__all__ = [
    "MAX_IDENTITY_BYTES",
    "SERVICE_KIND",
    "Harness",
    "ObservationWindow",
    "ServiceIdentity",
    "evaluated_subject_digest",
    "validate_service_identity",
]

#: The only descriptor kind.
SERVICE_KIND: Final = "hosted_service"
#: Largest canonical size of a descriptor, in bytes (final LF included).
MAX_IDENTITY_BYTES: Final = 1_048_576
#: Longest ``text512ns`` value, in code points.
MAX_IDENTITY_TEXT: Final = 512

_MEMBERS: Final = frozenset(
    {
        "kind",
        "provider",
        "service",
        "deployment",
        "requested_model",
        "observed_model",
        "exposed_revision",
        "configuration",
        "configuration_digest",
        "harness",
        "observation_window",
    }
)
_HARNESS_MEMBERS: Final = frozenset({"name", "version", "source_digest"})
_WINDOW_MEMBERS: Final = frozenset({"started_at", "ended_at"})
# ASCII digits only (JSON Schema's \d); Python's \d would also match other scripts.
_TIMESTAMP: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?Z"
)


def _name(value: object, field_name: str, *, nullable: bool = False) -> str | None:
    """Check a ``text512ns`` value (1-512 code points, no C0/DEL, not all whitespace)."""
    if value is None and nullable:
        return None
    return check_text(
        value, field_name, max_length=MAX_IDENTITY_TEXT, blank=False, error=CapturedRunError
    )


def _check_timestamp_pattern(value: object, field_name: str) -> str:
    if type(value) is not str:
        raise CapturedRunError("invalid_type", field_name)
    if _TIMESTAMP.fullmatch(value) is None:
        raise CapturedRunError("invalid_timestamp", field_name)
    return value


def parse_utc_timestamp(value: object, field_name: str = "timestamp") -> datetime:
    """Parse ``YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z`` into an aware UTC datetime.

    Raises:
        CapturedRunError: ``invalid_type`` or ``invalid_timestamp`` (pattern
            mismatch, or not a real calendar instant such as Feb 30 or a leap
            second ``:60``).
    """
    text = _check_timestamp_pattern(value, field_name)
    match = _TIMESTAMP.fullmatch(text)
    assert match is not None
    year, month, day, hour, minute, second, fraction = match.groups()
    micro = int(fraction.ljust(6, "0")) if fraction else 0
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=UTC
        )
    except ValueError:
        raise CapturedRunError("invalid_timestamp", field_name) from None


@dataclass(frozen=True, slots=True, repr=False)
class Harness:
    """The harness that captured a hosted run: ``{name, version, source_digest}``."""

    name: str
    version: str
    source_digest: str

    def __post_init__(self) -> None:
        """Validate the three members."""
        _name(self.name, "harness.name")
        _name(self.version, "harness.version")
        check_digest(self.source_digest, "harness.source_digest", error=CapturedRunError)

    def __repr__(self) -> str:
        """Never show declared values."""
        return "Harness(...)"

    def to_dict(self) -> dict[str, str]:
        """Return the wire object."""
        return {"name": self.name, "version": self.version, "source_digest": self.source_digest}

    @classmethod
    def from_document(cls, document: object) -> Harness:
        """Build from a parsed ``harness`` object (closed)."""
        doc = check_closed(document, "harness", _HARNESS_MEMBERS, error=CapturedRunError)
        return cls(name=doc["name"], version=doc["version"], source_digest=doc["source_digest"])


@dataclass(frozen=True, slots=True, repr=False)
class ObservationWindow:
    """The UTC observation window ``{started_at, ended_at}`` (both inclusive, may be equal)."""

    started_at: str
    ended_at: str

    def __post_init__(self) -> None:
        """Check the pattern, the calendar and the order of both instants."""
        _check_timestamp_pattern(self.started_at, "observation_window.started_at")
        _check_timestamp_pattern(self.ended_at, "observation_window.ended_at")
        if self.start > self.end:
            raise CapturedRunError("reversed_window", "observation_window")

    def __repr__(self) -> str:
        """Show the class only."""
        return "ObservationWindow(...)"

    @property
    def start(self) -> datetime:
        """The start as an aware UTC datetime."""
        return parse_utc_timestamp(self.started_at, "observation_window.started_at")

    @property
    def end(self) -> datetime:
        """The end as an aware UTC datetime."""
        return parse_utc_timestamp(self.ended_at, "observation_window.ended_at")

    def to_dict(self) -> dict[str, str]:
        """Return the wire object."""
        return {"started_at": self.started_at, "ended_at": self.ended_at}


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ServiceIdentity:
    """A validated hosted-service descriptor (all members required, closed).

    Construction validates in the specified order and computes :attr:`digest`
    (``digest(descriptor)``, the run's evaluated subject). ``configuration`` is
    stored as a read-only JSON value. Use :meth:`create` to have
    ``configuration_digest`` computed for you.
    """

    provider: str
    service: str
    deployment: str
    requested_model: str
    observed_model: str | None
    exposed_revision: str | None
    configuration: Mapping[str, JsonValue]
    configuration_digest: str
    harness: Harness
    observation_window: ObservationWindow
    kind: str = SERVICE_KIND
    digest: str = field(init=False)
    canonical_size: int = field(init=False)

    def __post_init__(self) -> None:
        """Validate (schema, size, configuration digest, calendar, order); compute the digest."""
        if self.kind != SERVICE_KIND or type(self.kind) is not str:
            raise CapturedRunError("invalid_constant", "service_identity.kind")
        _name(self.provider, "service_identity.provider")
        _name(self.service, "service_identity.service")
        _name(self.deployment, "service_identity.deployment")
        _name(self.requested_model, "service_identity.requested_model")
        _name(self.observed_model, "service_identity.observed_model", nullable=True)
        _name(self.exposed_revision, "service_identity.exposed_revision", nullable=True)
        check_members(self.configuration, "service_identity.configuration", error=CapturedRunError)
        configuration = freeze_json(
            self.configuration, "service_identity.configuration", error=CapturedRunError
        )
        object.__setattr__(self, "configuration", configuration)
        check_digest(
            self.configuration_digest,
            "service_identity.configuration_digest",
            error=CapturedRunError,
        )
        if isinstance(self.harness, Mapping):
            object.__setattr__(self, "harness", _nested(Harness.from_document, self.harness))
        elif not isinstance(self.harness, Harness):
            raise CapturedRunError("invalid_type", "service_identity.harness")
        window = self.observation_window
        if isinstance(window, Mapping):
            doc = check_closed(
                window,
                "service_identity.observation_window",
                _WINDOW_MEMBERS,
                error=CapturedRunError,
            )
            for name in ("started_at", "ended_at"):
                _check_timestamp_pattern(doc[name], f"service_identity.observation_window.{name}")
        elif not isinstance(window, ObservationWindow):
            raise CapturedRunError("invalid_type", "service_identity.observation_window")
        data = frozen_canonical(self._document(), error=CapturedRunError)
        if len(data) > MAX_IDENTITY_BYTES:
            raise CapturedRunError("too_large", "service_identity")
        if self.configuration_digest != digest_invarlock(configuration):
            raise CapturedRunError(
                "configuration_digest_mismatch", "service_identity.configuration_digest"
            )
        if isinstance(window, Mapping):
            window = _nested(
                lambda doc: ObservationWindow(doc["started_at"], doc["ended_at"]), window
            )
            object.__setattr__(self, "observation_window", window)
        object.__setattr__(self, "digest", digest_bytes(data))
        object.__setattr__(self, "canonical_size", len(data))

    def __repr__(self) -> str:
        """Never show declared values; the digest identifies the descriptor."""
        return f"ServiceIdentity(digest={self.digest!r})"

    def __eq__(self, other: object) -> bool:
        """Compare by digest (canonical bytes)."""
        if not isinstance(other, ServiceIdentity):
            return NotImplemented
        return self.digest == other.digest

    def __hash__(self) -> int:
        """Hash by digest."""
        return hash(self.digest)

    def _document(self) -> dict[str, Any]:
        harness = self.harness
        window = self.observation_window
        return {
            "kind": self.kind,
            "provider": self.provider,
            "service": self.service,
            "deployment": self.deployment,
            "requested_model": self.requested_model,
            "observed_model": self.observed_model,
            "exposed_revision": self.exposed_revision,
            "configuration": self.configuration,
            "configuration_digest": self.configuration_digest,
            "harness": harness.to_dict() if isinstance(harness, Harness) else dict(harness),
            "observation_window": (
                window.to_dict() if isinstance(window, ObservationWindow) else dict(window)
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain wire object (deep copy)."""
        document = self._document()
        document["configuration"] = thaw_json(self.configuration)
        return document

    def to_canonical(self) -> bytes:
        """Return the canonical bytes (final LF included); their digest is :attr:`digest`."""
        return frozen_canonical(self._document(), error=CapturedRunError)

    @classmethod
    def from_document(cls, document: object) -> ServiceIdentity:
        """Build from a parsed descriptor object; see :func:`validate_service_identity`."""
        doc = check_closed(document, "service_identity", _MEMBERS, error=CapturedRunError)
        return cls(
            kind=doc["kind"],
            provider=doc["provider"],
            service=doc["service"],
            deployment=doc["deployment"],
            requested_model=doc["requested_model"],
            observed_model=doc["observed_model"],
            exposed_revision=doc["exposed_revision"],
            configuration=doc["configuration"],
            configuration_digest=doc["configuration_digest"],
            harness=doc["harness"],
            observation_window=doc["observation_window"],
        )

    @classmethod
    def create(
        cls,
        *,
        provider: str,
        service: str,
        deployment: str,
        requested_model: str,
        observed_model: str | None,
        exposed_revision: str | None,
        configuration: Mapping[str, object],
        harness: Harness | Mapping[str, object],
        observation_window: ObservationWindow | Mapping[str, object],
    ) -> ServiceIdentity:
        """Build a descriptor, computing ``configuration_digest`` from ``configuration``."""
        if not isinstance(configuration, Mapping):
            raise CapturedRunError("invalid_type", "service_identity.configuration")
        frozen = freeze_json(
            configuration, "service_identity.configuration", error=CapturedRunError
        )
        return cls(
            provider=provider,
            service=service,
            deployment=deployment,
            requested_model=requested_model,
            observed_model=observed_model,
            exposed_revision=exposed_revision,
            configuration=frozen,  # type: ignore[arg-type]
            configuration_digest=digest_invarlock(frozen),
            harness=harness,  # type: ignore[arg-type]
            observation_window=observation_window,  # type: ignore[arg-type]
        )


def _nested(build: Any, document: object) -> Any:
    """Build a nested descriptor part, rooting its error fields under ``service_identity``."""
    with rebased("service_identity", "service_identity", error=CapturedRunError):
        return build(document)


def validate_service_identity(value: object) -> ServiceIdentity:
    """Validate a hosted-service descriptor and return it typed.

    Args:
        value: a :class:`ServiceIdentity` (returned as is) or a parsed object.

    Raises:
        CapturedRunError: ``invalid_type`` (not an object), ``unknown_field``,
            ``missing_field``, ``invalid_constant`` (``kind``), ``invalid_text``,
            ``invalid_digest``, ``too_many_members`` (``configuration``),
            ``invalid_json_value``, ``too_large`` (over 1 MiB canonical),
            ``configuration_digest_mismatch``, ``invalid_timestamp``,
            ``reversed_window``.
    """
    if isinstance(value, ServiceIdentity):
        return value
    if not isinstance(value, Mapping):
        raise CapturedRunError("invalid_type", "service_identity")
    return ServiceIdentity.from_document(value)


class _Subject(Protocol):
    @property
    def artifact_digest(self) -> str | None: ...

    @property
    def service_identity(self) -> ServiceIdentity | None: ...


def evaluated_subject_digest(run: _Subject) -> str:
    """Return what a run's results are attributed to.

    ``digest(service_identity)`` for a hosted run, the run's ``artifact_digest``
    otherwise (a valid run always has exactly one of the two). Accepts a
    :class:`~sealeval.captured.run.Run` or a :class:`~sealeval.captured.run.RunHeader`.
    """
    if run.service_identity is not None:
        return run.service_identity.digest
    digest = run.artifact_digest
    if digest is None:
        raise CapturedRunError("artifact_digest_required", "artifact_digest")
    return digest
