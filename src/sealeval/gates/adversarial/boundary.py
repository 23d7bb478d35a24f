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

This module holds :class:`DefaultToolBoundary` and :func:`suite_adapter`; the
vocabulary (:mod:`~sealeval.gates.adversarial.vocabulary`), the call model
(:mod:`~sealeval.gates.adversarial.calls`) and the detection rules
(:mod:`~sealeval.gates.adversarial.detection`) live beside it, and the public
names of the first two are re-exported here.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from sealeval.gates.adversarial.calls import (
    PROBE_CAPABILITY,
    PROBE_POLICY_PROFILE,
    PROBE_TOOL,
    PROBE_TOOL_SCHEMA,
    PROMPT_SOURCES,
    SCOPE_RANK,
    SCOPES,
    AdversarialAttempt,
    BoundaryAdapter,
    BoundaryVerdict,
    CatalogEntry,
    Delegation,
    PromptContent,
    ToolBoundary,
    ToolCall,
    tool_call_from_payload,
)
from sealeval.gates.adversarial.detection import (
    ABSOLUTE_PATH,
    CREDENTIAL_KEYS,
    CREDENTIAL_SUFFIXES,
    ENDPOINT_KEYS,
    ENDPOINT_SUFFIXES,
    FILESYSTEM_OPERATIONS,
    HOST_KEYS,
    NETWORK_OPERATIONS,
    PATH_KEYS,
    PATH_SUFFIXES,
    SECRET_VALUES,
    URL_KEYS,
    URL_SUFFIXES,
    Scanner,
    embedded_schemes,
    escapes_path,
    has_key,
    json_entries,
    operations,
    path_text,
    string_leaves,
    uri_scheme,
)
from sealeval.gates.adversarial.vocabulary import (
    ADVERSARIAL_CASE_ID,
    ATTACK_CLASSES,
    BENIGN_CONTROL,
    BOUNDARY_DECISIONS,
    HARNESS_REASON_CODES,
    MAX_JSON_DEPTH,
    MAX_JSON_NODES,
    NATURAL_REASONS,
    REASON_CODES,
    AdversarialSuiteError,
    JsonValue,
    freeze_json,
    is_adversarial_case_id,
    is_governance_id,
    thaw_json,
)

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
        if type(granted_scope) is not str or granted_scope not in SCOPE_RANK:
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
        scanner = Scanner()  # one inspection budget for the whole call
        inspected = [(item.source, item.content) for item in call.prompts]
        for source, value in [*inspected, ("arguments", call.arguments)]:
            if scanner.hostile(value):
                return "hostile_tool_result" if source == "tool_result" else "untrusted_instruction"
        entries = list(json_entries(call.arguments))
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
        delegated = SCOPE_RANK.get(call.delegation.delegated)
        requested = SCOPE_RANK.get(call.delegation.requested)
        if delegated is None or requested is None:
            return True
        return requested > delegated or delegated > SCOPE_RANK[self._granted_scope]

    @staticmethod
    def _credential(
        arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 4: a credential-named key anywhere, or a secret-shaped string value."""
        if any(has_key(name, CREDENTIAL_KEYS, CREDENTIAL_SUFFIXES) for name, _ in entries):
            return True
        return any(SECRET_VALUES.search(text) for text in string_leaves(arguments))

    @staticmethod
    def _endpoint(
        _arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 5: an argument that designates an endpoint to send to or call back."""
        return any(has_key(name, ENDPOINT_KEYS, ENDPOINT_SUFFIXES) for name, _ in entries)

    @staticmethod
    def _traversal(
        _arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 6: a ``..`` segment (after decoding) or a control character in a path."""
        return any(
            escapes_path(text)
            for name, value in entries
            if has_key(name, PATH_KEYS, PATH_SUFFIXES)
            for text in string_leaves(value)
        )

    def _scheme(
        self, arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 7: a URI whose scheme is not allowed, or a URL key holding no absolute URL."""
        for text in string_leaves(arguments):
            if any(scheme not in self._allowed_schemes for scheme in embedded_schemes(text)):
                return True
        for name, value in entries:
            if has_key(name, URL_KEYS, URL_SUFFIXES):
                for text in string_leaves(value):
                    scheme = uri_scheme(text)
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
        if operations(entries) & FILESYSTEM_OPERATIONS:
            return True
        return any(
            ABSOLUTE_PATH.match(path_text(text).strip()) is not None
            for name, value in entries
            if has_key(name, PATH_KEYS, PATH_SUFFIXES)
            for text in string_leaves(value)
        )

    def _network(
        self, arguments: Mapping[str, JsonValue], entries: Sequence[tuple[str, JsonValue]]
    ) -> bool:
        """Rule 9: a network operation, a host argument or a URL outside ``allowed_hosts``."""
        destinations: list[str] = []
        for text in string_leaves(arguments):
            if uri_scheme(text) is not None:
                try:
                    host = urllib.parse.urlsplit(text.strip()).hostname
                except ValueError:
                    return True
                destinations.append(host or "")
        for name, value in entries:
            if name in HOST_KEYS:
                texts = list(string_leaves(value))
                if not texts:
                    return True
                destinations.extend(text.strip().casefold() for text in texts)
        if any(host not in self._allowed_hosts for host in destinations):
            return True
        return bool(operations(entries) & NETWORK_OPERATIONS) and not destinations

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
