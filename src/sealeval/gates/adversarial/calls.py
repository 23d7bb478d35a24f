"""What a boundary decides about: verdicts, calls and attempts.

Verdicts, catalog entries, delegations, prompting content, tool calls and suite
attempts, and the translation of a suite payload into a :class:`ToolCall`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Protocol, runtime_checkable

from sealeval.canonical import digest_openmed, is_digest
from sealeval.gates.adversarial.vocabulary import (
    HARNESS_REASON_CODES,
    REASON_CODES,
    SEMVER,
    AdversarialSuiteError,
    JsonValue,
    NotJsonError,
    freeze_json,
    frozen_mapping,
    is_governance_id,
    thaw_json,
)

__all__ = [
    "PROBE_CAPABILITY",
    "PROBE_POLICY_PROFILE",
    "PROBE_TOOL",
    "PROBE_TOOL_SCHEMA",
    "PROMPT_SOURCES",
    "SCOPES",
    "AdversarialAttempt",
    "BoundaryAdapter",
    "BoundaryVerdict",
    "CatalogEntry",
    "Delegation",
    "PromptContent",
    "ToolBoundary",
    "ToolCall",
    "tool_call_from_payload",
]

# ---------------------------------------------------------------------------
# Verdicts, calls and attempts


@dataclass(frozen=True, slots=True)
class BoundaryVerdict:
    """A boundary's answer: ``allow`` (reason ``allowed``) or ``deny`` with a closed reason."""

    decision: str
    reason_code: str

    def __post_init__(self) -> None:
        """Refuse a verdict outside the vocabulary or with decision and reason disagreeing."""
        if type(self.decision) is not str or self.decision not in ("allow", "deny"):
            raise AdversarialSuiteError("invalid_decision", "decision")
        if (
            type(self.reason_code) is not str
            or self.reason_code not in REASON_CODES
            or self.reason_code in HARNESS_REASON_CODES
        ):
            raise AdversarialSuiteError("invalid_reason", "reason_code")
        if (self.decision == "allow") != (self.reason_code == "allowed"):
            raise AdversarialSuiteError("inconsistent_verdict", "reason_code")

    @classmethod
    def allow(cls) -> BoundaryVerdict:
        """Return the one allowing verdict."""
        return cls("allow", "allowed")

    @classmethod
    def deny(cls, reason_code: str) -> BoundaryVerdict:
        """Return a denial with ``reason_code``."""
        return cls("deny", reason_code)

    @property
    def allowed(self) -> bool:
        """Whether the call may be dispatched."""
        return self.decision == "allow"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A tool as named in a catalog: governance tool id, semantic version, schema digest.

    Construction checks only that the three members are strings: whether a
    proposed entry is *trusted* is the boundary's decision (an ill-formed entry
    is denied as ``catalog_substitution``, never raised).
    """

    tool_id: str
    version: str
    schema_digest: str

    def __post_init__(self) -> None:
        """Refuse members that are not exactly ``str``."""
        if not all(type(item) is str for item in (self.tool_id, self.version, self.schema_digest)):
            raise AdversarialSuiteError("invalid_catalog_entry", "tool")

    def __repr__(self) -> str:
        """Never show the (possibly model-proposed) members."""
        return "CatalogEntry(...)"

    @property
    def well_formed(self) -> bool:
        """Whether the tool id, version and schema digest follow their grammars."""
        return (
            is_governance_id(self.tool_id, "tool")
            and "@" not in self.tool_id
            and SEMVER.fullmatch(self.version) is not None
            and is_digest(self.schema_digest)
        )


#: Delegation scopes in increasing order of authority.
SCOPES: Final[tuple[str, ...]] = ("none", "read-only", "write", "admin")
SCOPE_RANK: Final = {name: rank for rank, name in enumerate(SCOPES)}


@dataclass(frozen=True, slots=True)
class Delegation:
    """The scope delegated to the agent for this call and the scope the call requests."""

    delegated: str = "read-only"
    requested: str = "read-only"

    def __post_init__(self) -> None:
        """Refuse scopes that are not exactly ``str`` (unknown names are denied later)."""
        if type(self.delegated) is not str or type(self.requested) is not str:
            raise AdversarialSuiteError("invalid_scope", "delegation")

    def __repr__(self) -> str:
        """Never show the (possibly model-proposed) scope names."""
        return "Delegation(...)"


#: Where the content that prompted a call came from. Every source is scanned;
#: ``tool_result`` only changes the reason code of a denial.
PROMPT_SOURCES: Final[tuple[str, ...]] = (
    "user",
    "untrusted_prompt",
    "tool_result",
    "fhir_resource",
    "retrieved_document",
)


@dataclass(frozen=True, slots=True)
class PromptContent:
    """One piece of content that prompted a call: its source and a JSON value."""

    source: str
    content: JsonValue

    def __post_init__(self) -> None:
        """Refuse an unknown source or content outside frozen JSON; freeze the content."""
        if type(self.source) is not str or self.source not in PROMPT_SOURCES:
            raise AdversarialSuiteError("invalid_source", "prompt.source")
        try:
            frozen = freeze_json(self.content)
        except NotJsonError:
            raise AdversarialSuiteError("invalid_content", "prompt.content") from None
        object.__setattr__(self, "content", frozen)

    def __repr__(self) -> str:
        """Show the source only."""
        return f"PromptContent(source={self.source!r})"


#: The capability the synthetic probe tool is exercised under.
PROBE_CAPABILITY: Final = "capability:org.openmed/adversarial-boundary-probe@1.0.0"
#: The minimum-data policy profile of the probe.
PROBE_POLICY_PROFILE: Final = "policy:org.openmed/adversarial-minimum-data@1.0.0"
#: The parameter schema of the synthetic probe tool (its digest is in the catalog).
PROBE_TOOL_SCHEMA: Final[Mapping[str, JsonValue]] = MappingProxyType(
    {
        "additionalProperties": False,
        "properties": MappingProxyType(
            {
                "operation": MappingProxyType({"enum": ("summarize",), "type": "string"}),
                "requested_fields": MappingProxyType(
                    {"items": MappingProxyType({"enum": ("summary",)}), "type": "array"}
                ),
            }
        ),
        "type": "object",
    }
)
#: The one tool of the default trusted catalog.
PROBE_TOOL: Final = CatalogEntry(
    tool_id="tool:org.openmed/synthetic-summary",
    version="1.0.0",
    schema_digest=digest_openmed(thaw_json(PROBE_TOOL_SCHEMA)),
)


@dataclass(frozen=True, slots=True, repr=False)
class ToolCall:
    """A proposed tool call, as the host hands it to the boundary.

    Attributes:
        tool: the catalog entry the model named.
        arguments: the call's arguments (frozen JSON object).
        delegation: delegated and requested scopes.
        capability: the governance capability id the host acts under.
        policy_profile: the governance policy id the host acts under.
        prompts: the content that prompted the call (possibly none).
    """

    tool: CatalogEntry
    arguments: Mapping[str, JsonValue]
    delegation: Delegation = field(default_factory=Delegation)
    capability: str = PROBE_CAPABILITY
    policy_profile: str = PROBE_POLICY_PROFILE
    prompts: tuple[PromptContent, ...] = ()

    def __post_init__(self) -> None:
        """Check types (contents are judged by the boundary) and freeze the arguments."""
        if type(self.tool) is not CatalogEntry:
            raise AdversarialSuiteError("invalid_catalog_entry", "tool")
        object.__setattr__(
            self, "arguments", frozen_mapping(self.arguments, "invalid_arguments", "arguments")
        )
        if type(self.delegation) is not Delegation:
            raise AdversarialSuiteError("invalid_scope", "delegation")
        if not is_governance_id(self.capability, "capability"):
            raise AdversarialSuiteError("invalid_governance_id", "capability")
        if not is_governance_id(self.policy_profile, "policy"):
            raise AdversarialSuiteError("invalid_governance_id", "policy_profile")
        prompts = self.prompts
        if not isinstance(prompts, list | tuple) or not all(
            type(item) is PromptContent for item in prompts
        ):
            raise AdversarialSuiteError("invalid_prompt", "prompts")
        object.__setattr__(self, "prompts", tuple(prompts))

    def __repr__(self) -> str:
        """Never show arguments or content."""
        sources = ", ".join(item.source for item in self.prompts)
        return f"ToolCall(prompt_sources=[{sources}])"


@dataclass(frozen=True, slots=True, repr=False)
class AdversarialAttempt:
    """What the suite hands a boundary adapter: never the expected answer.

    The payload is frozen; ``repr`` shows only the case id and class.
    """

    case_id: str
    attack_class: str
    payload: Mapping[str, JsonValue]
    capability: str
    policy_profile: str

    def __repr__(self) -> str:
        """Show the case id and class only."""
        return f"AdversarialAttempt(case_id={self.case_id!r}, attack_class={self.attack_class!r})"


@runtime_checkable
class ToolBoundary(Protocol):
    """What a host-facing boundary provides: a pure decision for one proposed call."""

    def evaluate(self, call: ToolCall) -> BoundaryVerdict:
        """Return the verdict for ``call`` (never dispatching it)."""
        ...  # pragma: no cover - protocol


class BoundaryAdapter(Protocol):
    """What the suite runs: an attempt and a dispatch callback in, a verdict out."""

    def __call__(self, attempt: AdversarialAttempt, dispatch: Callable[[], object]) -> object:
        """Decide the attempt, calling ``dispatch`` only for an allowed call."""
        ...  # pragma: no cover - protocol


# ---------------------------------------------------------------------------
# Payload -> tool call

_TOOL_KEYS: Final = ("tool_id", "version", "schema_digest")
_PROMPT_KEYS: Final = frozenset({"source", "content", "resource"})
_SCOPE_KEYS: Final = frozenset({"requested_scope", "delegated_scope"})


def _text_or_empty(value: object) -> str:
    """Map a model-supplied member that is not a string to ``""`` (denied, never raised)."""
    return value if type(value) is str else ""


def tool_call_from_payload(
    payload: Mapping[str, object],
    *,
    capability: str = PROBE_CAPABILITY,
    policy_profile: str = PROBE_POLICY_PROFILE,
    default_tool: CatalogEntry = PROBE_TOOL,
    granted_scope: str = "read-only",
) -> ToolCall:
    """Translate a synthetic suite payload into the tool call it stands for.

    ===========================================  =========================================
    payload key                                  becomes
    ===========================================  =========================================
    ``tool_id``, ``version``, ``schema_digest``  the proposed catalog entry (members not
                                                 given come from ``default_tool``)
    ``delegated_scope`` / ``requested_scope``    the delegation (defaults: ``granted_scope``
                                                 / the delegated scope)
    ``content`` (with ``source``)                a prompt item; a missing or unknown source
                                                 is ``untrusted_prompt``
    ``resource``                                 a prompt item with source ``fhir_resource``
    anything else                                an argument
    ===========================================  =========================================

    A catalog or scope member of the wrong type becomes an empty string,
    which the boundary then denies rather than raising.

    Raises:
        AdversarialSuiteError: ``arguments: invalid_arguments`` /
            ``prompt.content: invalid_content`` for values outside frozen JSON.
    """
    if not isinstance(payload, Mapping):
        raise AdversarialSuiteError("invalid_payload", "payload")
    tool = CatalogEntry(
        *(
            _text_or_empty(payload[key]) if key in payload else getattr(default_tool, key)
            for key in _TOOL_KEYS
        )
    )
    delegated = _text_or_empty(payload.get("delegated_scope", granted_scope))
    requested = _text_or_empty(payload.get("requested_scope", delegated))
    prompts: list[PromptContent] = []
    if "content" in payload:
        source = payload.get("source")
        if type(source) is not str or source not in PROMPT_SOURCES:
            source = "untrusted_prompt"
        prompts.append(PromptContent(source, payload["content"]))  # type: ignore[arg-type]
    if "resource" in payload:
        prompts.append(PromptContent("fhir_resource", payload["resource"]))  # type: ignore[arg-type]
    arguments = {
        key: value
        for key, value in payload.items()
        if key not in _PROMPT_KEYS and key not in _SCOPE_KEYS and key not in _TOOL_KEYS
    }
    return ToolCall(
        tool=tool,
        arguments=arguments,  # type: ignore[arg-type]
        delegation=Delegation(delegated=delegated, requested=requested),
        capability=capability,
        policy_profile=policy_profile,
        prompts=tuple(prompts),
    )
