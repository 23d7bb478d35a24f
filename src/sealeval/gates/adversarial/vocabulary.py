"""The adversarial suite's closed vocabulary (21-adapters.md §2.1).

Its error, attack classes, reason codes, identifier grammars and the frozen JSON
values payloads are stored as.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from sealeval import _validate
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
    "REASON_CODES",
    "AdversarialSuiteError",
    "JsonValue",
    "freeze_json",
    "is_adversarial_case_id",
    "is_governance_id",
    "thaw_json",
]


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
SEMVER: Final = re.compile(r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)")


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


class NotJsonError(ValueError):
    """Internal: a value outside frozen JSON (mapped to a field code by the caller)."""


class FrozenJsonError(GateError):
    """The toolkit's refusal in :func:`freeze_json`; never escapes (becomes ``NotJsonError``)."""

    codes = frozenset({"invalid_json_value", "too_deep"})


def freeze_json(value: object) -> JsonValue:
    """Return a read-only deep copy of a JSON-like value (:func:`sealeval._validate.freeze_json`).

    Mappings become read-only mappings with ``str`` keys, lists and tuples
    become tuples; scalars must be ``None``, ``bool``, ``int``, finite
    ``float`` or ``str`` (exact types, text without unpaired surrogates). At
    most :data:`MAX_JSON_DEPTH` nested containers and :data:`MAX_JSON_NODES`
    values: the node budget is counted first, without copying.

    Raises:
        ValueError: (internal ``NotJsonError``) for anything else; callers turn it
            into their own closed code.
    """
    if not _within_budget(value):
        raise NotJsonError
    try:
        return _validate.freeze_json(
            value, "value", error=FrozenJsonError, max_depth=MAX_JSON_DEPTH
        )
    except FrozenJsonError:
        raise NotJsonError from None


def _within_budget(value: object) -> bool:
    """Return whether ``value`` holds at most :data:`MAX_JSON_NODES` values (iterative, bounded)."""
    budget = MAX_JSON_NODES
    pending = [value]
    while pending:
        item = pending.pop()
        budget -= 1
        if budget < 0:
            return False
        if isinstance(item, Mapping) or type(item) is list or type(item) is tuple:
            if len(item) > budget:
                return False
            pending.extend(item.values() if isinstance(item, Mapping) else item)
    return True


def thaw_json(value: JsonValue) -> object:
    """Return a fresh mutable copy (``dict`` / ``list``) of a frozen JSON value.

    The suite's name for :func:`sealeval._validate.thaw_json`.
    """
    return _validate.thaw_json(value)


def frozen_mapping(value: object, code: str, field_name: str) -> Mapping[str, JsonValue]:
    """Return a frozen JSON object, or refuse with ``code`` at ``field_name``."""
    if not isinstance(value, Mapping):
        raise AdversarialSuiteError(code, field_name)
    try:
        frozen = freeze_json(value)
    except NotJsonError:
        raise AdversarialSuiteError(code, field_name) from None
    assert isinstance(frozen, Mapping)
    return frozen
