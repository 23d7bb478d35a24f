"""Sealed workflow manifests and their fail-closed evaluation-start verification.

Wire contract: ``openmed.eval.workflow_sealed_manifest.v1`` and
``openmed.eval.workflow_sealed_manifest_verification.v1`` (openmed canonical
JSON profile). A manifest holds exactly eight component digests and a
``manifest_digest`` over them; nothing else, so it is content-free by
construction.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sealeval._validate import check_closed, decode_document
from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.errors import ManifestError

__all__ = [
    "COMPONENTS",
    "MANIFEST_SCHEMA",
    "REASON_CODES",
    "VERIFICATION_SCHEMA",
    "ManifestVerification",
    "SealedWorkflowManifest",
    "seal_workflow_manifest",
    "verify_at_evaluation_start",
]

MANIFEST_SCHEMA: Final = "openmed.eval.workflow_sealed_manifest.v1"
VERIFICATION_SCHEMA: Final = "openmed.eval.workflow_sealed_manifest_verification.v1"
#: The eight governed components, in the fixed "component order".
COMPONENTS: Final = (
    "container",
    "model",
    "policy",
    "post_processing",
    "prompt",
    "threshold",
    "tokenizer",
    "tool_inventory",
)
_COMPONENT_SET: Final = frozenset(COMPONENTS)
_TOP_LEVEL: Final = frozenset({"component_digests", "manifest_digest", "schema_version"})
#: Closed reason codes of a verification, in documentation order.
REASON_CODES: Final = (
    "eligible",
    "incomplete_manifest",
    "invalid_manifest",
    "mutable_manifest",
    "incomplete_evaluation_snapshot",
    "invalid_evaluation_snapshot",
    "component_digest_mismatch",
)


def _derive_manifest_digest(components: Mapping[str, str]) -> str:
    return digest_openmed(
        {"component_digests": dict(components), "schema_version": MANIFEST_SCHEMA}
    )


def _checked_components(component_digests: object) -> dict[str, str]:
    """Apply the sealing checks in the specified order and return a plain copy."""
    component_digests = check_closed(
        component_digests,
        "component_digests",
        COMPONENTS,
        error=ManifestError,
        type_code="invalid_mapping",
        unknown_code="invalid_keys",
        missing_code="invalid_keys",
    )
    if len(component_digests) != len(COMPONENTS):
        raise ManifestError("invalid_keys", "component_digests")
    for name in COMPONENTS:
        if not is_digest(component_digests[name]):
            raise ManifestError("invalid_digest", f"component_digests.{name}")
    return {name: component_digests[name] for name in COMPONENTS}


@dataclass(frozen=True, slots=True)
class SealedWorkflowManifest:
    """A sealed, immutable record of the eight component digests.

    Construction re-checks everything: the schema string, the exact component
    set, every digest, and ``manifest_digest`` against the recomputed seal.
    ``component_digests`` is a read-only mapping.
    """

    component_digests: Mapping[str, str]
    manifest_digest: str
    schema_version: str = field(default=MANIFEST_SCHEMA)

    def __post_init__(self) -> None:
        """Validate in the specified order; an invalid manifest cannot exist."""
        if self.schema_version != MANIFEST_SCHEMA or type(self.schema_version) is not str:
            raise ManifestError("unsupported_version", "schema_version")
        components = _checked_components(self.component_digests)
        if not is_digest(self.manifest_digest):
            raise ManifestError("invalid_digest", "manifest_digest")
        if self.manifest_digest != _derive_manifest_digest(components):
            raise ManifestError("payload_mismatch", "manifest_digest")
        object.__setattr__(self, "component_digests", types.MappingProxyType(components))

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "component_digests": dict(self.component_digests),
            "manifest_digest": self.manifest_digest,
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> SealedWorkflowManifest:
        """Build from a parsed document, refusing unknown or missing fields."""
        document = check_closed(
            document,
            "manifest",
            sorted(_TOP_LEVEL),
            error=ManifestError,
            type_code="invalid_document",
            missing_prefix="",
        )
        return cls(
            component_digests=document["component_digests"],
            manifest_digest=document["manifest_digest"],
            schema_version=document["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> SealedWorkflowManifest:
        """Strictly parse a manifest document and re-check its seal."""
        return cls.from_dict(decode_document(data, "manifest", error=ManifestError))


def seal_workflow_manifest(component_digests: object) -> SealedWorkflowManifest:
    """Seal exactly the eight governed component digests.

    Raises:
        ManifestError: ``component_digests: invalid_mapping``,
            ``component_digests: invalid_keys`` or
            ``component_digests.<component>: invalid_digest`` (first in
            component order).
    """
    components = _checked_components(component_digests)
    return SealedWorkflowManifest(
        component_digests=components, manifest_digest=_derive_manifest_digest(components)
    )


@dataclass(frozen=True, slots=True)
class ManifestVerification:
    """Result of :func:`verify_at_evaluation_start`; never carries submitted values."""

    eligible_for_sealed_results: bool
    reason_codes: tuple[str, ...]
    affected_components: tuple[str, ...]
    schema_version: str = VERIFICATION_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "affected_components": list(self.affected_components),
            "eligible_for_sealed_results": self.eligible_for_sealed_results,
            "reason_codes": list(self.reason_codes),
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


class _Findings:
    """Ordered, de-duplicated reasons and the affected component set."""

    def __init__(self) -> None:
        self.reasons: dict[str, None] = {}
        self.affected: set[str] = set()

    def add(self, reason: str, components: Iterable[str] = ()) -> None:
        self.reasons.setdefault(reason, None)
        self.affected.update(components)


def _check_sealed_components(sealed: Mapping[str, Any], found: _Findings) -> None:
    """Check step 5a-c: missing, extra and malformed sealed components."""
    missing = [name for name in COMPONENTS if name not in sealed]
    if missing:
        found.add("incomplete_manifest", missing)
    if set(sealed) - _COMPONENT_SET:
        found.add("invalid_manifest")
    bad = [name for name in COMPONENTS if name in sealed and not is_digest(sealed[name])]
    if bad:
        found.add("invalid_manifest", bad)


def _check_seal(stated: object, sealed: Mapping[str, Any] | None, found: _Findings) -> None:
    """Check step 6: the stated manifest digest against the sealed components."""
    if stated is None:
        found.add("incomplete_manifest")
    elif not is_digest(stated):
        found.add("invalid_manifest")
    elif (
        sealed is not None
        and set(sealed) == _COMPONENT_SET
        and all(is_digest(sealed[name]) for name in COMPONENTS)
        and stated != _derive_manifest_digest({name: sealed[name] for name in COMPONENTS})
    ):
        found.add("mutable_manifest")


def _check_manifest_side(manifest: object, found: _Findings) -> Mapping[str, Any] | None:
    """Apply steps 1-6 of the specified algorithm; return the sealed components if known."""
    if isinstance(manifest, SealedWorkflowManifest):
        manifest = manifest.to_dict()
    if not isinstance(manifest, Mapping):
        found.add("invalid_manifest")
        return None
    if not set(manifest) >= _TOP_LEVEL:
        found.add("incomplete_manifest")
    if set(manifest) - _TOP_LEVEL:
        found.add("invalid_manifest")
    if manifest.get("schema_version") != MANIFEST_SCHEMA or (
        type(manifest.get("schema_version")) is not str
    ):
        found.add("invalid_manifest")
    sealed = manifest.get("component_digests")
    if isinstance(sealed, Mapping):
        _check_sealed_components(sealed, found)
    else:
        found.add("incomplete_manifest")
        sealed = None
    _check_seal(manifest.get("manifest_digest"), sealed, found)
    return sealed


def _check_snapshot_side(
    snapshot: object, sealed: Mapping[str, Any] | None, found: _Findings
) -> None:
    """Apply steps 7-11 of the specified algorithm."""
    if not isinstance(snapshot, Mapping):
        found.add("invalid_evaluation_snapshot")
        return
    missing = [name for name in COMPONENTS if name not in snapshot]
    if missing:
        found.add("incomplete_evaluation_snapshot", missing)
    if set(snapshot) - _COMPONENT_SET:
        found.add("invalid_evaluation_snapshot")
    bad = [name for name in COMPONENTS if name in snapshot and not is_digest(snapshot[name])]
    if bad:
        found.add("invalid_evaluation_snapshot", bad)
    if sealed is None:
        return
    changed = [
        name
        for name in COMPONENTS
        if name in snapshot
        and name in sealed
        and is_digest(snapshot[name])
        and is_digest(sealed[name])
        and snapshot[name] != sealed[name]
    ]
    if changed:
        found.add("component_digest_mismatch", changed)


def verify_at_evaluation_start(manifest: object, component_digests: object) -> ManifestVerification:
    """Compare a sealed manifest with a fresh component snapshot; never raises.

    Args:
        manifest: a :class:`SealedWorkflowManifest` or any value (usually a
            parsed manifest document).
        component_digests: the fresh snapshot (usually a mapping of the eight
            component names to digests).

    Returns:
        The verification; ``eligible_for_sealed_results`` is true only when
        the reason list is exactly ``["eligible"]``.
    """
    found = _Findings()
    try:
        sealed = _check_manifest_side(manifest, found)
        _check_snapshot_side(component_digests, sealed, found)
    except Exception:  # noqa: BLE001 - hostile mappings must not make verification raise
        found.add("invalid_manifest")
    reasons = tuple(found.reasons) or ("eligible",)
    return ManifestVerification(
        eligible_for_sealed_results=reasons == ("eligible",),
        reason_codes=reasons,
        affected_components=tuple(sorted(found.affected)),
    )
