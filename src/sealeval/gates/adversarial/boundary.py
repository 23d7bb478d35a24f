r"""The tool-dispatch boundary an agent host plugs into, and sealeval's reference boundary.

An agent host asks the boundary, for every tool call its model proposes,
whether the call may run. A :class:`ToolCall` carries everything the decision
needs: the catalog entry the model named (:class:`CatalogEntry`), the
arguments, the delegation scope (:class:`Delegation`), the capability and
policy profile the host acts under, and the content that prompted the call
(:class:`PromptContent`: an untrusted prompt, a tool result, a FHIR
resource, ...). The boundary answers with a :class:`BoundaryVerdict`: ``allow``
(reason ``allowed``) or ``deny`` with one closed reason code. Through
:meth:`DefaultToolBoundary.dispatch` the host's own executor runs only after an
``allow`` and at most once; a denied call never reaches it.

:class:`DefaultToolBoundary` is sealeval's reference boundary. Its rules are
deterministic, pure (no I/O, no network, no clock, no logging) and applied in
a fixed order; the first rule that fires decides the reason
(``docs/adversarial-suite.md`` lists them):

=====  =====================================  ==============================
order  rule                                   reason code
=====  =====================================  ==============================
1      catalog entry not exactly trusted      ``catalog_substitution``
2      capability / scope amplification       ``delegation_scope_amplified``
3      instructions in prompting content      ``hostile_tool_result`` (tool
       or in arguments                        results) / ``untrusted_instruction``
4      credential material in arguments       ``credential_exposure``
5      endpoint designation in arguments      ``endpoint_exposure``
6      path traversal in a path argument      ``path_escape``
7      URL outside the allowed schemes        ``url_scheme_denied``
8      filesystem mutation / absolute path    ``filesystem_access_denied``
9      network operation or destination       ``network_access_denied``
=====  =====================================  ==============================

Content that cannot be inspected within fixed limits (too deep, too large,
an undecodable attachment) is denied by rule 3, never waved through.

The boundary never reads a case's attack class or case id: it decides from the
call alone. Nothing here stores, logs or echoes a payload; every ``repr``
shows only closed vocabulary.
"""

from __future__ import annotations

import base64
import binascii
import html
import math
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Protocol, TypeVar, runtime_checkable

from sealeval.canonical import digest_openmed, is_digest
from sealeval.gates.registry import GateError

__all__ = [
    "ADVERSARIAL_CASE_ID",
    "ATTACK_CLASSES",
    "BENIGN_CONTROL",
    "BOUNDARY_DECISIONS",
    "HARNESS_REASON_CODES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "NATURAL_REASONS",
    "PROBE_CAPABILITY",
    "PROBE_POLICY_PROFILE",
    "PROBE_TOOL",
    "PROBE_TOOL_SCHEMA",
    "PROMPT_SOURCES",
    "REASON_CODES",
    "SCOPES",
    "AdversarialAttempt",
    "AdversarialSuiteError",
    "BoundaryAdapter",
    "BoundaryVerdict",
    "CatalogEntry",
    "DefaultToolBoundary",
    "Delegation",
    "JsonValue",
    "PromptContent",
    "ToolBoundary",
    "ToolCall",
    "freeze_json",
    "is_adversarial_case_id",
    "is_governance_id",
    "suite_adapter",
    "thaw_json",
    "tool_call_from_payload",
]


_T = TypeVar("_T")


class AdversarialSuiteError(GateError):
    """Refusal of a boundary, fixture, suite run or suite report (``<field>: <code>``)."""

    module = "sealeval.gates.adversarial"
    codes = frozenset(
        {
            # fixtures and case results
            "invalid_case_id",
            "invalid_attack_class",
            "invalid_reason",
            "invalid_expectation",
            "invalid_governance_id",
            "invalid_payload",
            # the fixture set and the run
            "invalid_fixtures",
            "invalid_count",
            "duplicate_case",
            "mixed_profile",
            "missing_control",
            "missing_attack",
            "invalid_adapter",
            # verdicts and results
            "invalid_decision",
            "inconsistent_verdict",
            "invalid_flag",
            # the report document
            "invalid_cases",
            "unsorted_cases",
            "invalid_document",
            "unsupported_version",
            "inconsistent_report",
            "invalid_json",
            # tool calls and boundary configuration
            "invalid_catalog_entry",
            "invalid_arguments",
            "invalid_scope",
            "invalid_source",
            "invalid_content",
            "invalid_prompt",
            "invalid_catalog",
            "invalid_schemes",
            "invalid_hosts",
        }
    )


# ---------------------------------------------------------------------------
# Vocabulary (21-adapters.md §2.1)

#: The eleven attack classes, ``benign_control`` last.
ATTACK_CLASSES: Final[tuple[str, ...]] = (
    "instruction_injection",
    "hostile_tool_result",
    "confused_deputy_delegation",
    "tool_catalog_substitution",
    "credential_leakage",
    "endpoint_leakage",
    "path_traversal",
    "url_abuse",
    "filesystem_escape",
    "network_escape",
    "benign_control",
)
#: The class of the controls that must be allowed and dispatched exactly once.
BENIGN_CONTROL: Final = "benign_control"
#: The thirteen reason codes.
REASON_CODES: Final[tuple[str, ...]] = (
    "allowed",
    "untrusted_instruction",
    "hostile_tool_result",
    "delegation_scope_amplified",
    "catalog_substitution",
    "credential_exposure",
    "endpoint_exposure",
    "path_escape",
    "url_scheme_denied",
    "filesystem_access_denied",
    "network_access_denied",
    "boundary_error",
    "invalid_verdict",
)
#: Reasons only the suite harness records; no verdict or expectation may use them.
HARNESS_REASON_CODES: Final[tuple[str, ...]] = ("boundary_error", "invalid_verdict")
#: Decisions of a case result; ``error`` is reserved for the harness.
BOUNDARY_DECISIONS: Final[tuple[str, ...]] = ("allow", "deny", "error")
#: The reason each attack class naturally expects (an inventory may pre-register another).
NATURAL_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "instruction_injection": "untrusted_instruction",
        "hostile_tool_result": "hostile_tool_result",
        "confused_deputy_delegation": "delegation_scope_amplified",
        "tool_catalog_substitution": "catalog_substitution",
        "credential_leakage": "credential_exposure",
        "endpoint_leakage": "endpoint_exposure",
        "path_traversal": "path_escape",
        "url_abuse": "url_scheme_denied",
        "filesystem_escape": "filesystem_access_denied",
        "network_escape": "network_access_denied",
        "benign_control": "allowed",
    }
)
#: Adversarial case id grammar (00-conventions.md §3).
ADVERSARIAL_CASE_ID: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_GOVERNANCE_ID: Final = re.compile(
    r"(capability|purpose|policy|workflow|tool):"
    rf"({_LABEL}(?:\.{_LABEL})+)/[a-z][a-z0-9-]{{0,63}}"
    r"(?:@(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*))?"
)
_SEMVER: Final = re.compile(r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)")


def is_adversarial_case_id(value: object) -> bool:
    """Return whether ``value`` is exactly a ``str`` in the adversarial case id grammar."""
    return type(value) is str and ADVERSARIAL_CASE_ID.fullmatch(value) is not None


def is_governance_id(value: object, kind: str) -> bool:
    """Return whether ``value`` is a governance id of ``kind`` (00-conventions.md §3)."""
    if type(value) is not str or len(value) > 512:
        return False
    match = _GOVERNANCE_ID.fullmatch(value)
    return match is not None and match.group(1) == kind and len(match.group(2)) <= 253


# ---------------------------------------------------------------------------
# Frozen JSON values

JsonValue = None | bool | int | float | str | tuple["JsonValue", ...] | Mapping[str, "JsonValue"]
#: Deepest nesting of a payload, argument or content value.
MAX_JSON_DEPTH: Final = 32
#: Most values (scalars and containers) in one payload, argument set or content.
MAX_JSON_NODES: Final = 10_000


class _NotJsonError(ValueError):
    """Internal: a value outside frozen JSON (mapped to a field code by the caller)."""


def freeze_json(value: object) -> JsonValue:
    """Return a read-only deep copy of a JSON-like value.

    Mappings become read-only mappings with ``str`` keys, lists and tuples
    become tuples; scalars must be ``None``, ``bool``, ``int``, finite
    ``float`` or ``str`` (exact types). At most :data:`MAX_JSON_DEPTH` levels
    and :data:`MAX_JSON_NODES` values.

    Raises:
        ValueError: (internal ``_NotJsonError``) for anything else; callers turn it
            into their own closed code.
    """
    budget = [MAX_JSON_NODES]
    return _freeze(value, 0, budget)


def _freeze(value: object, depth: int, budget: list[int]) -> JsonValue:
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_JSON_DEPTH:
        raise _NotJsonError
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value  # type: ignore[return-value]
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _NotJsonError
        return value  # type: ignore[return-value]
    if kind is list or kind is tuple:
        return tuple(_freeze(item, depth + 1, budget) for item in value)  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        frozen: dict[str, JsonValue] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotJsonError
            frozen[key] = _freeze(item, depth + 1, budget)
        return MappingProxyType(frozen)
    raise _NotJsonError


def thaw_json(value: JsonValue) -> object:
    """Return a fresh mutable copy (``dict`` / ``list``) of a frozen JSON value."""
    if isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw_json(item) for item in value]
    return value


def _frozen_mapping(value: object, code: str, field_name: str) -> Mapping[str, JsonValue]:
    if not isinstance(value, Mapping):
        raise AdversarialSuiteError(code, field_name)
    try:
        frozen = freeze_json(value)
    except _NotJsonError:
        raise AdversarialSuiteError(code, field_name) from None
    assert isinstance(frozen, Mapping)
    return frozen


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
            and _SEMVER.fullmatch(self.version) is not None
            and is_digest(self.schema_digest)
        )


#: Delegation scopes in increasing order of authority.
SCOPES: Final[tuple[str, ...]] = ("none", "read-only", "write", "admin")
_SCOPE_RANK: Final = {name: rank for rank, name in enumerate(SCOPES)}


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
        except _NotJsonError:
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
            self, "arguments", _frozen_mapping(self.arguments, "invalid_arguments", "arguments")
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


# ---------------------------------------------------------------------------
# Content inspection (rule 3)

#: Most characters of text inspected per call (all strings, decoded attachments included).
MAX_SCAN_CHARS: Final = 1_000_000
#: Largest decoded attachment inspected.
MAX_ATTACHMENT_BYTES: Final = 262_144
_MAX_DECODE_DEPTH: Final = 2

_TAG: Final = re.compile(r"<[^<>]{0,512}>")
_ROLE_MARKER: Final = re.compile(
    r"<\s*/?\s*(?:system|assistant|developer|user|tool|function|instructions?|prompt"
    r"|im_start|im_end)\b[^<>]{0,64}>"
    r"|<\|[a-z_]{1,32}\|>"
    r"|\[/?(?:inst|sys)\]"
    r"|<<\s*/?\s*sys\s*>>",
    re.IGNORECASE,
)
_NOUNS = (
    r"(?:instructions?|rules?|directions?|directives?|prompts?|guidance|guidelines"
    r"|guardrails|polic(?:y|ies)|constraints|restrictions|messages?|context)"
)
_INSTRUCTION_PATTERNS: Final = tuple(
    re.compile(pattern)
    for pattern in (
        # "ignore (all) (the) previous (safety) instructions"
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|every)\s+)?(?:of\s+)?"
        r"(?:(?:the|your|my|these|those)\s+)?(?:previous|prior|above|earlier|preceding|former"
        r"|original|initial|system|developer|safety|existing)\s+(?:[\w-]+\s+){0,2}?"
        + _NOUNS
        + r"\b",
        # "ignore all instructions", "disregard everything you were told"
        r"\b(?:ignore|disregard|forget)\s+(?:all|any|every)\s+" + _NOUNS + r"\b",
        r"\b(?:ignore|disregard|forget)\s+(?:all|everything)\s+(?:that\s+)?you\s+(?:were|have\s+been)"
        r"\s+(?:told|given|instructed)\b",
        r"\byou\s+are\s+now\s+(?:an?\s+|the\s+|in\s+)?(?:unrestricted|jailbroken|dan|admin"
        r"|administrator|root|developer|system|superuser)\b",
        r"\b(?:new|updated|revised|real|actual)\s+(?:system\s+)?instructions?\s*:",
        r"\bsystem\s+prompt\b",
        r"\b(?:developer|god|jailbreak|dan)\s+mode\b",
        r"\bdo\s+anything\s+now\b",
        r"\b(?:reveal|print|show|repeat|leak)\s+(?:your|the)\s+(?:system\s+|hidden\s+)?"
        r"(?:prompt|instructions)\b",
        r"\b(?:export|exfiltrate|dump|upload|transmit|leak|return)\s+(?:all|every|raw|entire"
        r"|the\s+entire|the\s+full|the\s+complete)\b(?:\s+[\w-]+){0,3}?\s+(?:data|dataset"
        r"|records?|credentials?|secrets?|identifiers?|phi|pii|database)\b",
    )
)
_COMPACT_VERBS = ("ignore", "disregard", "forget", "override", "bypass")
_COMPACT_QUALIFIERS = (
    "previous",
    "prior",
    "above",
    "earlier",
    "preceding",
    "all",
    "any",
    "your",
    "allprevious",
    "allprior",
    "allabove",
    "allthe",
    "alltheprevious",
    "allyourprevious",
    "theprevious",
    "theprior",
    "theabove",
    "yourprevious",
    "yourprior",
)
_COMPACT_NOUNS = ("instruction", "rule", "prompt", "direction", "guideline", "guardrail")
#: Letter-only phrases matched after removing everything but a-z (letter spacing,
#: punctuation and markup between letters cannot hide them).
_COMPACT_PHRASES: Final = tuple(
    verb + qualifier + noun
    for verb in _COMPACT_VERBS
    for qualifier in _COMPACT_QUALIFIERS
    for noun in _COMPACT_NOUNS
)
# A small fixed table of Cyrillic / Greek letters that look like Latin ones.
_CONFUSABLES: Final = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u0261\u03bf\u03b1"
    "\u03b5\u03b9\u03ba\u03bd\u03c1\u03c4\u03c5\u03c7",
    "aeopcyxijsdgoaeiknptux",
)
_BASE64: Final = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_TEXTUAL_TYPES: Final = frozenset(
    [
        "application/json",
        "application/xml",
        "application/xhtml+xml",
        "application/fhir+json",
        "application/fhir+xml",
        "application/x-www-form-urlencoded",
    ]
)


class _UninspectableError(Exception):
    """Internal: content exceeded a limit or could not be decoded."""


def _folded(text: str) -> str:
    """NFKD, drop combining marks and format characters, map look-alikes, NFC, casefold."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Cf"))
    return unicodedata.normalize("NFC", kept).casefold().translate(_CONFUSABLES)


def _unescaped(text: str) -> str:
    """Decode HTML character references repeatedly (at most three rounds)."""
    for _ in range(3):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return text


def _views(text: str) -> Iterator[str]:
    """Yield the normalized views of one string that the patterns are matched against."""
    decoded = _unescaped(text)
    candidates = [decoded, _TAG.sub("", decoded), _TAG.sub(" ", decoded)]
    if "%" in decoded:
        candidates.append(urllib.parse.unquote(decoded))
    for candidate in candidates:
        yield " ".join(_folded(candidate).split())


def _text_is_hostile(text: str) -> bool:
    """Apply the instruction rules to one string (all views, compact form)."""
    if _ROLE_MARKER.search(text) or _ROLE_MARKER.search(_unescaped(text)):
        return True
    for view in _views(text):
        if any(pattern.search(view) for pattern in _INSTRUCTION_PATTERNS):
            return True
        compact = re.sub(r"[^a-z]", "", view)
        if any(phrase in compact for phrase in _COMPACT_PHRASES):
            return True
    return False


def _decoded_base64(text: str) -> str | None:
    """Return the UTF-8 text a base64-looking string encodes, or ``None``."""
    squeezed = "".join(text.split())
    if len(squeezed) % 4 or _BASE64.fullmatch(squeezed) is None:
        return None
    alphabet = b"-_" if ("-" in squeezed or "_" in squeezed) else None
    try:
        raw = base64.b64decode(squeezed, altchars=alphabet, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not decoded or not all(ch.isprintable() or ch.isspace() for ch in decoded):
        return None
    return decoded


class _Scanner:
    """Walk frozen JSON content within fixed limits, looking for instructions."""

    def __init__(self) -> None:
        self.budget = MAX_SCAN_CHARS

    def text(self, text: str, depth: int = 0) -> bool:
        self.budget -= len(text)
        if self.budget < 0:
            raise _UninspectableError
        if _text_is_hostile(text):
            return True
        if depth < _MAX_DECODE_DEPTH:
            decoded = _decoded_base64(text)
            if decoded is not None:
                return self.text(decoded, depth + 1)
        return False

    def attachment(self, node: Mapping[str, JsonValue]) -> bool:
        data = node.get("data")
        content_type = node.get("contentType")
        if type(data) is not str or (content_type is not None and type(content_type) is not str):
            raise _UninspectableError
        squeezed = "".join(data.split())
        if len(squeezed) > 4 * (MAX_ATTACHMENT_BYTES // 3 + 1):
            raise _UninspectableError
        try:
            raw = base64.b64decode(squeezed, validate=True)
        except binascii.Error:
            raise _UninspectableError from None
        media = (content_type or "text/plain").split(";", 1)[0].strip().casefold()
        textual = (
            media.startswith("text/")
            or media in _TEXTUAL_TYPES
            or media.endswith(("+json", "+xml"))
        )
        if not textual:
            raise _UninspectableError
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _UninspectableError from None
        return self.text(decoded, _MAX_DECODE_DEPTH)

    def hostile(self, value: JsonValue) -> bool:
        """Whether ``value`` holds instructions; uninspectable content counts as hostile."""
        try:
            return self.value(value)
        except _UninspectableError:
            return True

    def value(self, value: JsonValue) -> bool:
        stack: list[tuple[str, JsonValue]] = [("", value)]
        while stack:
            parent, node = stack.pop()
            if isinstance(node, str):
                if self.text(node):
                    return True
            elif isinstance(node, Mapping):
                attachment = "data" in node and ("contentType" in node or parent == "attachment")
                if attachment and self.attachment(node):
                    return True
                for key, item in node.items():
                    if self.text(key):
                        return True
                    if not (attachment and key == "data"):
                        stack.append((key, item))
            elif isinstance(node, tuple):
                stack.extend((parent, item) for item in node)
        return False


# ---------------------------------------------------------------------------
# Argument rules (4-9)

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _key_name(key: str) -> str:
    """``apiKey`` / ``API-Key`` / ``api key`` -> ``api_key``."""
    spaced = _CAMEL.sub("_", _folded_key(key))
    return re.sub(r"[\s-]+", "_", spaced).casefold()


def _folded_key(key: str) -> str:
    return unicodedata.normalize("NFKC", key).strip()


_CREDENTIAL_KEYS: Final = frozenset(
    [
        "credential",
        "credentials",
        "password",
        "passwd",
        "passphrase",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "bearer",
        "bearer_token",
        "api_key",
        "apikey",
        "private_key",
        "secret_key",
        "ssh_key",
        "authorization",
        "auth",
        "cookie",
        "session_id",
        "session_token",
    ]
)
_CREDENTIAL_SUFFIXES: Final = (
    "_token",
    "_secret",
    "_password",
    "_credential",
    "_credentials",
    "_api_key",
    "_apikey",
    "_private_key",
)
_SECRET_VALUES: Final = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\bbearer\s+[a-z0-9._~+/=-]{8,}"
    r"|\bbasic\s+[a-z0-9+/]{8,}={0,2}"
    r"|\bakia[0-9a-z]{16}\b"
    r"|\bsk-[a-z0-9_-]{16,}"
    r"|\bgh[pousr]_[a-z0-9]{20,}"
    r"|\bxox[abprs]-[a-z0-9-]{8,}"
    r"|\beyj[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}"
    r"|://[^/\s:@]+:[^/\s@]+@"
    r"|\b(?:password|passwd|secret|api[_-]?key|token)\s*[=:]\s*\S",
    re.IGNORECASE,
)
_ENDPOINT_KEYS: Final = frozenset(
    [
        "endpoint",
        "endpoints",
        "callback",
        "callback_url",
        "webhook",
        "webhook_url",
        "redirect_uri",
        "redirect_url",
        "return_url",
        "notify_url",
        "base_url",
        "server_url",
        "collector",
        "collector_url",
        "proxy",
        "proxy_url",
        "report_to",
        "forward_to",
        "exfil",
    ]
)
_ENDPOINT_SUFFIXES: Final = ("_endpoint", "_webhook", "_callback", "_callback_url")
_PATH_KEYS: Final = frozenset(
    [
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "file_name",
        "filepath",
        "dir",
        "directory",
        "folder",
        "dest",
        "destination",
        "target",
        "output",
        "location",
        "cwd",
        "root",
    ]
)
_PATH_SUFFIXES: Final = ("_path", "_file", "_dir", "_directory", "_filename", "_folder")
_URL_KEYS: Final = frozenset({"url", "uri", "href", "link", "src", "urls", "uris", "links"})
_URL_SUFFIXES: Final = ("_url", "_uri", "_href", "_link")
_HOST_KEYS: Final = frozenset(
    {"host", "hostname", "hosts", "port", "ip", "ip_address", "domain", "socket", "dns"}
)
_OPERATION_KEYS: Final = frozenset({"operation", "op", "action", "method", "verb", "mode"})
_FILESYSTEM_OPERATIONS: Final = frozenset(
    [
        "write",
        "append",
        "create",
        "overwrite",
        "save",
        "delete",
        "remove",
        "unlink",
        "rename",
        "move",
        "copy",
        "chmod",
        "chown",
        "mkdir",
        "rmdir",
        "truncate",
        "touch",
        "symlink",
        "link",
    ]
)
_NETWORK_OPERATIONS: Final = frozenset(
    [
        "post",
        "put",
        "patch",
        "get",
        "head",
        "fetch",
        "upload",
        "download",
        "send",
        "connect",
        "request",
        "http",
        "https",
        "socket",
        "open_url",
        "curl",
        "wget",
        "ping",
        "resolve",
        "transmit",
        "webhook",
    ]
)
_URI: Final = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]{0,31}):(?=\S)")
_EMBEDDED_URI: Final = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,31}):(?=\S)")
_KNOWN_SCHEMES: Final = frozenset(
    [
        "file",
        "javascript",
        "data",
        "vbscript",
        "jar",
        "gopher",
        "dict",
        "ldap",
        "ldaps",
        "smb",
        "ftp",
        "sftp",
        "tftp",
        "ssh",
        "telnet",
        "mailto",
        "blob",
        "ws",
        "wss",
        "chrome",
        "about",
        "php",
        "phar",
        "expect",
        "zip",
        "netdoc",
        "jrunscript",
        "http",
        "https",
    ]
)
_ABSOLUTE_PATH: Final = re.compile(r"[/\\~]|[A-Za-z]:(?:[/\\]|$)")


def _has(name: str, exact: frozenset[str], suffixes: tuple[str, ...]) -> bool:
    return name in exact or name.endswith(suffixes)


def _entries(arguments: Mapping[str, JsonValue]) -> Iterator[tuple[str, JsonValue]]:
    """Yield ``(normalized key, value)`` for every member of every object, at any depth."""
    stack: list[JsonValue] = [arguments]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, item in node.items():
                yield _key_name(key), item
                stack.append(item)
        elif isinstance(node, tuple):
            stack.extend(node)


def _strings(value: JsonValue) -> Iterator[str]:
    """Yield every string leaf (and key) of a frozen JSON value."""
    stack: list[JsonValue] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, Mapping):
            for key, item in node.items():
                yield key
                stack.append(item)
        elif isinstance(node, tuple):
            stack.extend(node)


def _scheme_of(text: str, match: re.Match[str]) -> str | None:
    scheme = match.group(1).casefold()
    rest = text[match.end() : match.end() + 2]
    if rest in ("//", "\\\\", "/\\", "\\/") or scheme in _KNOWN_SCHEMES:
        return scheme
    return None


def _uri_scheme(text: str) -> str | None:
    """Return the lowercase scheme if ``text`` reads as an absolute URI, else ``None``."""
    match = _URI.match(text)
    return None if match is None else _scheme_of(text, match)


def _embedded_schemes(text: str) -> Iterator[str]:
    """Yield the scheme of every URI embedded anywhere in ``text`` (references decoded)."""
    decoded = _unescaped(text)
    for match in _EMBEDDED_URI.finditer(decoded):
        scheme = _scheme_of(decoded, match)
        if scheme is not None:
            yield scheme


def _path_text(text: str) -> str:
    """Normalize a path: NFKC, percent-decoding (three rounds), backslash as ``/``."""
    path = unicodedata.normalize("NFKC", text)
    for _ in range(3):
        decoded = urllib.parse.unquote(path)
        if decoded == path:
            break
        path = decoded
    return path.replace("\\", "/")


def _escapes(text: str) -> bool:
    """Return whether a ``..`` segment or a control character (NUL included) escapes."""
    path = _path_text(text)
    if any(unicodedata.category(ch) == "Cc" for ch in path):
        return True
    return any(segment.strip() == ".." for segment in path.split("/"))


def _operations(entries: Sequence[tuple[str, JsonValue]]) -> set[str]:
    found: set[str] = set()
    for name, value in entries:
        if name in _OPERATION_KEYS:
            for text in _strings(value):
                found.add(_key_name(text))
    return found


class DefaultToolBoundary:
    """sealeval's reference tool-dispatch boundary (deterministic, pure, no network).

    Args:
        capability: the capability id the boundary is configured for.
        policy_profile: the policy profile id it enforces.
        catalog: the trusted catalog entries (exact matches only).
        granted_scope: the most authority the capability grants (a :data:`SCOPES` name).
        allowed_url_schemes: schemes an argument URL may use (default ``https``).
        allowed_hosts: hosts a call may reach (default: none; the probe capability
            has no network access at all).

    Raises:
        AdversarialSuiteError: for a configuration outside these grammars
            (``capability: invalid_governance_id``, ``policy_profile:
            invalid_governance_id``, ``catalog: invalid_catalog``,
            ``granted_scope: invalid_scope``, ``allowed_url_schemes:
            invalid_schemes``, ``allowed_hosts: invalid_hosts``).
    """

    __slots__ = (
        "_allowed_hosts",
        "_allowed_schemes",
        "_capability",
        "_catalog",
        "_granted_scope",
        "_policy_profile",
    )

    def __init__(
        self,
        *,
        capability: str = PROBE_CAPABILITY,
        policy_profile: str = PROBE_POLICY_PROFILE,
        catalog: Sequence[CatalogEntry] = (PROBE_TOOL,),
        granted_scope: str = "read-only",
        allowed_url_schemes: Sequence[str] = ("https",),
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        """Validate and store the configuration."""
        if not is_governance_id(capability, "capability"):
            raise AdversarialSuiteError("invalid_governance_id", "capability")
        if not is_governance_id(policy_profile, "policy"):
            raise AdversarialSuiteError("invalid_governance_id", "policy_profile")
        if (
            not isinstance(catalog, list | tuple)
            or not catalog
            or not all(type(item) is CatalogEntry and item.well_formed for item in catalog)
        ):
            raise AdversarialSuiteError("invalid_catalog", "catalog")
        if type(granted_scope) is not str or granted_scope not in _SCOPE_RANK:
            raise AdversarialSuiteError("invalid_scope", "granted_scope")
        if not isinstance(allowed_url_schemes, list | tuple) or not all(
            type(item) is str and re.fullmatch(r"[a-z][a-z0-9+.-]{0,31}", item)
            for item in allowed_url_schemes
        ):
            raise AdversarialSuiteError("invalid_schemes", "allowed_url_schemes")
        if not isinstance(allowed_hosts, list | tuple) or not all(
            type(item) is str and re.fullmatch(r"[a-z0-9.-]{1,253}|\[[0-9a-f:.]{2,45}\]", item)
            for item in allowed_hosts
        ):
            raise AdversarialSuiteError("invalid_hosts", "allowed_hosts")
        self._capability = capability
        self._policy_profile = policy_profile
        self._catalog = frozenset(
            (item.tool_id, item.version, item.schema_digest) for item in catalog
        )
        self._granted_scope = granted_scope
        self._allowed_schemes = frozenset(allowed_url_schemes)
        self._allowed_hosts = frozenset(
            item.strip("[]") if item.startswith("[") else item for item in allowed_hosts
        )

    def __repr__(self) -> str:
        """Show the class only (the configuration is the host's)."""
        return "DefaultToolBoundary(...)"

    # -- the decision -------------------------------------------------------

    def evaluate(self, call: ToolCall) -> BoundaryVerdict:
        """Return the verdict for ``call``; pure and deterministic, never dispatches."""
        if type(call) is not ToolCall:
            raise AdversarialSuiteError("invalid_arguments", "call")
        reason = self._reason(call)
        return BoundaryVerdict.allow() if reason is None else BoundaryVerdict.deny(reason)

    def _reason(self, call: ToolCall) -> str | None:
        tool = call.tool
        if (tool.tool_id, tool.version, tool.schema_digest) not in self._catalog:
            return "catalog_substitution"
        if self._amplified(call):
            return "delegation_scope_amplified"
        scanner = _Scanner()  # one inspection budget for the whole call
        inspected = [(item.source, item.content) for item in call.prompts]
        for source, value in [*inspected, ("arguments", call.arguments)]:
            if scanner.hostile(value):
                return "hostile_tool_result" if source == "tool_result" else "untrusted_instruction"
        entries = list(_entries(call.arguments))
        for rule, reason in (
            (self._credential, "credential_exposure"),
            (self._endpoint, "endpoint_exposure"),
            (self._traversal, "path_escape"),
            (self._scheme, "url_scheme_denied"),
            (self._filesystem, "filesystem_access_denied"),
            (self._network, "network_access_denied"),
        ):
            if rule(call.arguments, entries):
                return reason
        return None

    def _amplified(self, call: ToolCall) -> bool:
        """Rule 2: wrong capability/policy, unknown scopes, or requested > delegated > granted."""
        if call.capability != self._capability or call.policy_profile != self._policy_profile:
            return True
        delegated = _SCOPE_RANK.get(call.delegation.delegated)
        requested = _SCOPE_RANK.get(call.delegation.requested)
        if delegated is None or requested is None:
            return True
        return requested > delegated or delegated > _SCOPE_RANK[self._granted_scope]

    @staticmethod
    def _credential(
        arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 4: a credential-named key anywhere, or a secret-shaped string value."""
        if any(_has(name, _CREDENTIAL_KEYS, _CREDENTIAL_SUFFIXES) for name, _ in entries):
            return True
        return any(_SECRET_VALUES.search(text) for text in _strings(arguments))

    @staticmethod
    def _endpoint(
        _arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 5: an argument that designates an endpoint to send to or call back."""
        return any(_has(name, _ENDPOINT_KEYS, _ENDPOINT_SUFFIXES) for name, _ in entries)

    @staticmethod
    def _traversal(
        _arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 6: a ``..`` segment (after decoding) or a control character in a path."""
        return any(
            _escapes(text)
            for name, value in entries
            if _has(name, _PATH_KEYS, _PATH_SUFFIXES)
            for text in _strings(value)
        )

    def _scheme(
        self, arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 7: a URI whose scheme is not allowed, or a URL key holding no absolute URL."""
        for text in _strings(arguments):
            if any(scheme not in self._allowed_schemes for scheme in _embedded_schemes(text)):
                return True
        for name, value in entries:
            if _has(name, _URL_KEYS, _URL_SUFFIXES):
                for text in _strings(value):
                    scheme = _uri_scheme(text)
                    if scheme is None or scheme not in self._allowed_schemes:
                        return True
                    try:
                        urllib.parse.urlsplit(text.strip()).port  # noqa: B018 - validates
                    except ValueError:
                        return True
        return False

    @staticmethod
    def _filesystem(
        _arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 8: a mutating filesystem operation, or an absolute / home path."""
        if _operations(entries) & _FILESYSTEM_OPERATIONS:
            return True
        return any(
            _ABSOLUTE_PATH.match(_path_text(text).strip()) is not None
            for name, value in entries
            if _has(name, _PATH_KEYS, _PATH_SUFFIXES)
            for text in _strings(value)
        )

    def _network(
        self, arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 9: a network operation, a host argument or a URL outside ``allowed_hosts``."""
        destinations: list[str] = []
        for text in _strings(arguments):
            if _uri_scheme(text) is not None:
                try:
                    host = urllib.parse.urlsplit(text.strip()).hostname
                except ValueError:
                    return True
                destinations.append(host or "")
        for name, value in entries:
            if name in _HOST_KEYS:
                texts = list(_strings(value))
                if not texts:
                    return True
                destinations.extend(text.strip().casefold() for text in texts)
        if any(host not in self._allowed_hosts for host in destinations):
            return True
        return bool(_operations(entries) & _NETWORK_OPERATIONS) and not destinations

    # -- plugging the boundary into a host or the suite -----------------------

    def dispatch(
        self, call: ToolCall, execute: Callable[[ToolCall], _T]
    ) -> tuple[BoundaryVerdict, _T | None]:
        """Evaluate ``call``; run ``execute(call)`` exactly once iff it is allowed.

        Returns:
            ``(verdict, result)``; ``result`` is ``None`` for a denied call.
        """
        verdict = self.evaluate(call)
        if not verdict.allowed:
            return verdict, None
        return verdict, execute(call)

    def __call__(self, attempt: AdversarialAttempt, dispatch: Callable[[], object]) -> object:
        """Suite adapter: translate the attempt's payload, decide, dispatch if allowed.

        Reads only the payload, capability and policy profile of the attempt,
        never its case id or attack class.
        """
        call = tool_call_from_payload(
            attempt.payload,
            capability=attempt.capability,
            policy_profile=attempt.policy_profile,
            granted_scope=self._granted_scope,
        )
        verdict, _ = self.dispatch(call, lambda _call: dispatch())
        return verdict


def suite_adapter(
    boundary: ToolBoundary, *, default_tool: CatalogEntry = PROBE_TOOL
) -> BoundaryAdapter:
    """Wrap any host boundary (an object with ``evaluate(call)``) as a suite adapter.

    The adapter translates each attempt's payload with
    :func:`tool_call_from_payload`, asks ``boundary.evaluate`` and calls the
    suite's dispatch callback exactly once iff the verdict allows the call.
    Whatever ``evaluate`` returns is handed to the suite unchanged (a
    non-verdict is recorded as ``invalid_verdict``).
    """

    def adapter(attempt: AdversarialAttempt, dispatch: Callable[[], object]) -> object:
        call = tool_call_from_payload(
            attempt.payload,
            capability=attempt.capability,
            policy_profile=attempt.policy_profile,
            default_tool=default_tool,
        )
        verdict = boundary.evaluate(call)
        if type(verdict) is BoundaryVerdict and verdict.allowed:
            dispatch()
        return verdict

    return adapter
