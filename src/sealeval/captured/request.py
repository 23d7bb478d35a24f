r"""The captured evaluation request ``invarlock/evaluation-request-v2``: load, normalize, digest.

Wire contract: ``30-request.md`` of the invarlock specification (and
``00-conventions.md`` §3 for the strict YAML); JSON Schema
``contracts/invarlock.evaluation-request-v2.schema.json`` (``$defs/authored``
and ``$defs/normalized``). See ``docs/evidence-pack.md``.

Three layers, each usable on its own:

* **Authored request** — :func:`load_authored_request` reads the YAML (or
  JSON, which is YAML) with :func:`sealeval.strict_yaml.load_strict_yaml`
  (1 MiB, 10,000 nodes, depth 64, no anchors/aliases/tags/directives/merge
  keys/duplicate keys, JSON-syntax scalars, no include keys outside
  ``comparison.{side}.service_identity.configuration``) and validates the
  closed authored schema; :func:`parse_authored_request` does the schema part
  for an already parsed value. No file is touched.
* **Normalization** — :func:`normalize_captured_request` binds an authored
  request to two loaded :class:`~sealeval.captured.run.Run` objects and a
  policy: run digests, expected-run-digest pins, the policy's case-set pin,
  declared identities against the runs, input projections, the metric
  selector. The result, :class:`NormalizedRequest`, drops every path; its
  digest (:func:`captured_request_digest`) is therefore relocation-invariant,
  and :func:`comparison_id` binds it to the run and policy digests.
* **Files** — :func:`load_captured_request` resolves the request's
  references beneath the request root (every component opened without
  following symlinks), reads the runs (adapter ``invarlock`` here, any other
  adapter through a caller-supplied :class:`RunLoader`) and the policy,
  checks the output destination and normalizes. :func:`preflight` is
  ``evaluate --preflight`` without the comparison-engine checks, which a
  caller plugs in as ``paired_check``.

Refusals are :class:`CapturedRequestError` (message ``<field>: <code>``; the
field is a fixed location such as ``comparison.baseline.path``, never a
submitted value). Run content problems stay
:class:`~sealeval.captured.CapturedRunError` (field rebased under the side),
policy problems :class:`~sealeval.captured.policy.ComparisonPolicyError`, key
problems :class:`~sealeval.captured.signing.SigningKeyError`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from sealeval.canonical import DecodeLimits, decode, digest_bytes, digest_invarlock, is_digest
from sealeval.captured.case_set import validate_run_case_set
from sealeval.captured.errors import (
    CapturedRunError,
    freeze_json,
    frozen_canonical,
    thaw_json,
)
from sealeval.captured.likelihood import Source
from sealeval.captured.policy import (
    ComparisonPolicy,
    ComparisonPolicyError,
    check_runtime,
    is_yaml_policy_name,
    load_policy_yaml,
    parse_comparison_policy,
)
from sealeval.captured.run import (
    INVARLOCK_LIMITS,
    PROVENANCE_KINDS,
    STREAM_MIN_BYTES,
    InputProjection,
    Limits,
    Run,
    parse_run,
    read_canonical_run,
    run_from_document,
)
from sealeval.captured.service_identity import validate_service_identity
from sealeval.captured.signing import SigningKey, load_signing_key
from sealeval.errors import CanonicalError, CapturedError, YamlError
from sealeval.strict_yaml import INCLUDE_KEYS, YamlLimits, load_strict_yaml

__all__ = [
    "ADAPTERS",
    "AUTHORED_METRICS",
    "EXECUTION_MODE",
    "MAX_INPUT_BYTES",
    "MAX_REQUEST_BYTES",
    "NORMALIZED_METRICS",
    "PREFLIGHT_CHECKS",
    "REQUEST_FORMAT",
    "REQUEST_YAML_LIMITS",
    "SIDES",
    "AuthoredRequest",
    "CapturedRequest",
    "CapturedRequestError",
    "NormalizedRequest",
    "PairedCheck",
    "PreflightResult",
    "RunLoader",
    "SourceSpec",
    "authored_from_normalized",
    "captured_request_digest",
    "check_output_destination",
    "comparison_id",
    "load_authored_request",
    "load_captured_request",
    "normalize_captured_request",
    "parse_authored_request",
    "parse_normalized_request",
    "preflight",
    "read_authored_request",
]

#: ``format_version`` of the authored request and ``format`` of the normalized one.
REQUEST_FORMAT: Final = "invarlock/evaluation-request-v2"
#: The only execution mode on the captured path.
EXECUTION_MODE: Final = "captured"
#: The eight ``load_run`` adapter names a side may name.
ADAPTERS: Final = (
    "invarlock",
    "jsonl",
    "inspect-json",
    "lm-eval-samples",
    "promptfoo-jsonl",
    "langfuse-json",
    "evaluator-json",
    "evaluator-native-json",
)
#: ``comparison.metric`` values of the authored request.
AUTHORED_METRICS: Final = ("exact_match", "normalized_nll_per_utf8_byte", "judge")
#: ``comparison.metric`` values a normalized request can represent.
NORMALIZED_METRICS: Final = ("exact_match", "normalized_nll_per_utf8_byte")
#: Largest authored request file and largest canonical request, in bytes.
MAX_REQUEST_BYTES: Final = 1_048_576
#: Largest run or policy file read, in bytes.
MAX_INPUT_BYTES: Final = 134_217_728
#: The strict YAML limits of the authored request.
REQUEST_YAML_LIMITS: Final = YamlLimits(max_bytes=MAX_REQUEST_BYTES, max_nodes=10_000, max_depth=64)
#: Sides of a comparison, in processing order.
SIDES: Final = ("baseline", "subject")
#: ``checks`` reported by ``evaluate --preflight``, in the reference's order.
PREFLIGHT_CHECKS: Final = (
    "request",
    "run_bindings",
    "policy",
    "paired_capacity",
    "output_destination",
    "signing_mode",
)

_MAX_TEXT: Final = 4096
_MAX_MEMBERS: Final = 100
_TOP: Final = ("format_version", "execution", "comparison", "output")
_COMPARISON_REQUIRED: Final = ("baseline", "subject", "policy")
_COMPARISON_OPTIONAL: Final = ("metric", "judge")
_SIDE_OPTIONAL: Final = (
    "source",
    "run_id",
    "artifact_digest",
    "score_provenance",
    "expected_run_digest",
    "input_projection",
    "service_identity",
)
#: Members a side of adapter ``invarlock`` may not declare.
_OVERRIDES: Final = (
    "source",
    "run_id",
    "artifact_digest",
    "score_provenance",
    "service_identity",
    "input_projection",
)
#: Members compared with the loaded run, in the reference's order.
_IDENTITIES: Final = ("source", "run_id", "artifact_digest", "score_provenance", "service_identity")
_PROVENANCE_MEMBERS: Final = ("kind", "source", "version", "unit", "rubric_digest")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_POINTER: Final = re.compile(r"/(?:input|context)(?:/[^\x00-\x1f\x7f]*)?")
_DRIVE: Final = re.compile(r"[A-Za-z]:")
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


class CapturedRequestError(CapturedError):
    """Refusal of a captured evaluation request (authored, normalized, or its files)."""

    module = "sealeval.captured.request"
    codes = frozenset(
        {
            # strict YAML (the codes of sealeval.strict_yaml)
            "too_large",
            "not_utf8",
            "byte_order_mark",
            "invalid_yaml",
            "anchor_or_alias",
            "tag_or_directive",
            "too_many_nodes",
            "too_deep",
            "merge_key",
            "duplicate_key",
            "invalid_key",
            "invalid_boolean",
            "invalid_null",
            "invalid_integer",
            "invalid_float",
            "multiple_documents",
            "empty_document",
            "unpaired_surrogate",
            "integer_too_long",
            "not_mapping",
            "include_key",
            # closed schemas
            "unsupported_format",
            "invalid_json_value",
            "invalid_type",
            "unknown_field",
            "missing_field",
            "invalid_constant",
            "invalid_text",
            "invalid_reference",
            "invalid_digest",
            "invalid_projection",
            "invalid_pointer",
            "unknown_adapter",
            "unknown_metric",
            "too_many_members",
            "judge_required",
            "judge_forbidden",
            "judge_unsupported",
            "projection_forbidden",
            "artifact_digest_required",
            "artifact_digest_forbidden",
            "invalid_service_identity",
            # normalization
            "control_character",
            "metric_mismatch",
            "case_set_mismatch",
            "run_digest_mismatch",
            "identity_override",
            "identity_required",
            "identity_mismatch",
            "projection_mismatch",
            "inconsistent_pin",
            # files
            "not_found",
            "not_regular_file",
            "unsafe_path",
            "unreadable",
            "invalid_json",
            "output_exists",
            "outside_root",
            "adapter_unavailable",
            # signing mode (preflight)
            "signing_key_required",
            "signing_mode_conflict",
        }
    )


def _fail(code: str, where: str | None = None) -> CapturedRequestError:
    return CapturedRequestError(code, where)


def _frozen(value: object) -> Any:
    return freeze_json(value, "request")


# ---------------------------------------------------------------------------
# Field rules


def _check_reference(value: object, where: str) -> str:
    """Check a safe relative reference (30-request.md §2); return it."""
    if type(value) is not str:
        raise _fail("invalid_type", where)
    if (
        not 1 <= len(value) <= _MAX_TEXT
        or _CONTROL.search(value) is not None
        or value[0] in "/~\\"
        or value[0].isspace()
        or value[-1] == "/"
        or value[-1].isspace()
        or _DRIVE.match(value) is not None
        or "://" in value
        or "\\" in value
        or "//" in value
        or any(part in ("", ".", "..") for part in value.split("/"))
    ):
        raise _fail("invalid_reference", where)
    return value


def _check_text(value: object, where: str) -> str:
    """``text4096``: 1-4096 code points, no C0 control, no DEL."""
    if type(value) is not str:
        raise _fail("invalid_type", where)
    if not 1 <= len(value) <= _MAX_TEXT or _CONTROL.search(value) is not None:
        raise _fail("invalid_text", where)
    return value


def _check_digest(value: object, where: str) -> str:
    if not is_digest(value):
        raise _fail("invalid_digest", where)
    return value  # type: ignore[return-value]


def _closed(
    value: object, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail("invalid_type", where)
    for key in value:
        if key not in required and key not in optional:
            raise _fail("unknown_field", where)
    for key in required:
        if key not in value:
            raise _fail("missing_field", where)
    return value


def _check_source(value: object, where: str) -> None:
    doc = _closed(value, where, ("name", "version"))
    _check_text(doc["name"], f"{where}.name")
    _check_text(doc["version"], f"{where}.version")


def _check_provenance(value: object, where: str) -> None:
    if not isinstance(value, Mapping):
        raise _fail("invalid_type", where)
    if len(value) > _MAX_MEMBERS:
        raise _fail("too_many_members", where)
    for item in value.values():
        entry = _closed(item, f"{where}.entry", _PROVENANCE_MEMBERS)
        if type(entry["kind"]) is not str or entry["kind"] not in PROVENANCE_KINDS:
            raise _fail("invalid_constant", f"{where}.entry.kind")
        for name in ("source", "version", "unit"):
            _check_text(entry[name], f"{where}.entry.{name}")
        if entry["rubric_digest"] is not None:
            _check_digest(entry["rubric_digest"], f"{where}.entry.rubric_digest")


def _check_projection(value: object, where: str) -> None:
    if not isinstance(value, Mapping) or set(value) != {"kind", "pointer"}:
        raise _fail("invalid_projection", where)
    if value["kind"] != "json-pointer" or type(value["kind"]) is not str:
        raise _fail("invalid_projection", f"{where}.kind")
    pointer = value["pointer"]
    if type(pointer) is not str or len(pointer) > _MAX_TEXT or not _POINTER.fullmatch(pointer):
        raise _fail("invalid_pointer", f"{where}.pointer")


def _check_service_identity(value: object, where: str, *, full: bool) -> None:
    """Validate a hosted descriptor: structure only (``full=False``) or completely."""
    try:
        validate_service_identity(value)
    except CapturedRunError as error:
        if not full and error.code == "configuration_digest_mismatch":
            # Every structural rule is checked before the configuration digest.
            return
        inner = error.field or "service_identity"
        if not inner.startswith("service_identity"):
            inner = "service_identity"
        prefix = where[: -len("service_identity")]
        raise _fail("invalid_service_identity", f"{prefix}{inner}") from None


#: Per optional side member: its check (called with the value and the field name).
_MEMBER_CHECKS: Final[Mapping[str, Callable[[object, str], object]]] = types.MappingProxyType(
    {
        "source": _check_source,
        "run_id": _check_text,
        "score_provenance": _check_provenance,
        "expected_run_digest": _check_digest,
        "input_projection": _check_projection,
    }
)


def _check_hosted(doc: Mapping[str, Any], where: str, *, full_identity: bool) -> None:
    """``artifact_digest``: a digest, or ``null`` exactly together with a service identity."""
    if "service_identity" not in doc:
        if "artifact_digest" in doc:
            _check_digest(doc["artifact_digest"], f"{where}.artifact_digest")
        return
    _check_service_identity(
        doc["service_identity"], f"{where}.service_identity", full=full_identity
    )
    if "artifact_digest" not in doc:
        raise _fail("artifact_digest_required", f"{where}.artifact_digest")
    if doc["artifact_digest"] is not None:
        if not is_digest(doc["artifact_digest"]):
            raise _fail("invalid_digest", f"{where}.artifact_digest")
        raise _fail("artifact_digest_forbidden", f"{where}.artifact_digest")


def _check_adapter_members(doc: Mapping[str, Any], where: str, *, normalized: bool) -> None:
    """Adapter ``invarlock`` takes no projection (and, normalized, no identity member)."""
    if doc["adapter"] == "invarlock":
        if "input_projection" in doc:
            raise _fail("projection_forbidden", f"{where}.input_projection")
        if normalized:
            for member in _OVERRIDES:
                if member in doc:
                    raise _fail("identity_override", f"{where}.{member}")
    elif normalized:
        for member in ("source", "run_id", "artifact_digest"):
            if member not in doc:
                raise _fail("missing_field", f"{where}.{member}")


def _check_side(value: object, side: str, *, normalized: bool, full_identity: bool) -> None:
    where = f"comparison.{side}"
    required = ("adapter", "run_digest") if normalized else ("path", "adapter")
    doc = _closed(value, where, required, _SIDE_OPTIONAL)
    adapter = doc["adapter"]
    if type(adapter) is not str or adapter not in ADAPTERS:
        raise _fail("unknown_adapter", f"{where}.adapter")
    if normalized:
        _check_digest(doc["run_digest"], f"{where}.run_digest")
    else:
        _check_reference(doc["path"], f"{where}.path")
    for member, check in _MEMBER_CHECKS.items():
        if member in doc:
            check(doc[member], f"{where}.{member}")
    _check_hosted(doc, where, full_identity=full_identity)
    _check_adapter_members(doc, where, normalized=normalized)


def _check_metric(comparison: Mapping[str, Any], *, normalized: bool) -> None:
    allowed = NORMALIZED_METRICS if normalized else AUTHORED_METRICS
    metric = comparison.get("metric")
    if "metric" in comparison and (type(metric) is not str or metric not in allowed):
        raise _fail("unknown_metric", "comparison.metric")
    if normalized:
        return
    if metric == "judge" and "judge" not in comparison:
        raise _fail("judge_required", "comparison.judge")
    if metric != "judge" and "judge" in comparison:
        raise _fail("judge_forbidden", "comparison.judge")
    if metric == "judge":
        # The judge pipeline is a different evaluation path (not captured).
        raise _fail("judge_unsupported", "comparison.metric")


def _check_authored(document: Mapping[str, Any], *, full_identity: bool) -> None:
    """Check the closed authored schema in a fixed order (the first failing rule decides)."""
    if "format_version" in document and (
        document["format_version"] != REQUEST_FORMAT or type(document["format_version"]) is not str
    ):
        raise _fail("unsupported_format", "format_version")
    _closed(document, "request", _TOP)
    execution = _closed(document["execution"], "execution", ("mode",))
    if execution["mode"] != EXECUTION_MODE or type(execution["mode"]) is not str:
        raise _fail("invalid_constant", "execution.mode")
    comparison = _closed(
        document["comparison"], "comparison", _COMPARISON_REQUIRED, _COMPARISON_OPTIONAL
    )
    _check_metric(comparison, normalized=False)
    for side in SIDES:
        _check_side(comparison[side], side, normalized=False, full_identity=full_identity)
    _check_reference(comparison["policy"], "comparison.policy")
    output = _closed(document["output"], "output", ("evidence",))
    _check_reference(output["evidence"], "output.evidence")


def _check_normalized(document: object) -> Mapping[str, Any]:
    """Check the closed normalized schema and the pins; return the frozen document."""
    if not isinstance(document, Mapping):
        raise _fail("invalid_type", "request")
    frozen = _frozen(document)
    _check_size_and_controls(frozen)
    if "format" in frozen and (
        frozen["format"] != REQUEST_FORMAT or type(frozen["format"]) is not str
    ):
        raise _fail("unsupported_format", "format")
    _closed(frozen, "request", ("format", "execution", "comparison"))
    execution = _closed(frozen["execution"], "execution", ("mode",))
    if execution["mode"] != EXECUTION_MODE or type(execution["mode"]) is not str:
        raise _fail("invalid_constant", "execution.mode")
    comparison = _closed(
        frozen["comparison"], "comparison", ("baseline", "subject", "policy_digest"), ("metric",)
    )
    _check_metric(comparison, normalized=True)
    for side in SIDES:
        _check_side(comparison[side], side, normalized=True, full_identity=True)
    _check_digest(comparison["policy_digest"], "comparison.policy_digest")
    for side in SIDES:
        entry = comparison[side]
        if "expected_run_digest" in entry and entry["expected_run_digest"] != entry["run_digest"]:
            raise _fail("inconsistent_pin", f"comparison.{side}.expected_run_digest")
    return frozen  # type: ignore[no-any-return]


def _exempt(path: tuple[str, ...]) -> bool:
    """``comparison.{side}.service_identity.configuration`` (free text allowed inside)."""
    return (
        len(path) == 4
        and path[0] == "comparison"
        and path[1] in SIDES
        and path[2] == "service_identity"
        and path[3] == "configuration"
    )


def _check_size_and_controls(document: Mapping[str, Any]) -> None:
    """Canonical size ≤1 MiB; no control character in any string or key outside the exemption."""
    try:
        size = len(frozen_canonical(document))
    except CapturedRunError:  # pragma: no cover - frozen values always encode
        raise _fail("invalid_json_value", "request") from None
    if size > MAX_REQUEST_BYTES:
        raise _fail("too_large", "request")
    stack: list[tuple[object, tuple[str, ...] | None]] = [(document, ())]
    while stack:
        item, path = stack.pop()
        if type(item) is str:
            if _CONTROL.search(item) is not None:
                raise _fail("control_character", "request")
        elif isinstance(item, Mapping):
            if path is not None and _exempt(path):
                continue
            for key, child in item.items():
                if _CONTROL.search(key) is not None:
                    raise _fail("control_character", "request")
                stack.append((child, None if path is None else (*path, key)))
        elif isinstance(item, tuple):
            stack.extend((child, None) for child in item)


# ---------------------------------------------------------------------------
# Authored request


@dataclass(frozen=True, slots=True, repr=False)
class SourceSpec:
    """One side of an authored request (``comparison.baseline`` or ``comparison.subject``).

    Attributes:
        side: ``"baseline"`` or ``"subject"``.
        document: the side exactly as authored (read-only), ``path`` included.
    """

    side: str
    document: Mapping[str, Any]

    def __repr__(self) -> str:
        """Show the side and adapter only."""
        return f"SourceSpec(side={self.side!r}, adapter={self.adapter!r})"

    @property
    def path(self) -> str:
        """The reference of the run file."""
        return str(self.document["path"])

    @property
    def adapter(self) -> str:
        """The ``load_run`` adapter name."""
        return str(self.document["adapter"])

    def declares(self, member: str) -> bool:
        """Whether the side declares ``member`` (``artifact_digest: null`` counts)."""
        return member in self.document

    @property
    def source(self) -> Source | None:
        """The declared evaluator ``{name, version}``, or ``None``."""
        value = self.document.get("source")
        return None if value is None else Source(value["name"], value["version"])

    @property
    def run_id(self) -> str | None:
        """The declared run id, or ``None``."""
        value = self.document.get("run_id")
        return None if value is None else str(value)

    @property
    def artifact_digest(self) -> str | None:
        """The declared artifact digest (``None`` when absent or hosted)."""
        value = self.document.get("artifact_digest")
        return None if value is None else str(value)

    @property
    def score_provenance(self) -> Mapping[str, Any] | None:
        """The declared score provenance (read-only), or ``None``."""
        value = self.document.get("score_provenance")
        return None if value is None else value

    @property
    def service_identity(self) -> Mapping[str, Any] | None:
        """The declared hosted descriptor (read-only), or ``None``."""
        value = self.document.get("service_identity")
        return None if value is None else value

    @property
    def input_projection(self) -> InputProjection | None:
        """The declared input projection, or ``None``."""
        value = self.document.get("input_projection")
        return None if value is None else InputProjection.from_document(value)

    @property
    def expected_run_digest(self) -> str | None:
        """The declared pin of the loaded run's digest, or ``None``."""
        value = self.document.get("expected_run_digest")
        return None if value is None else str(value)


@dataclass(frozen=True, slots=True, repr=False)
class AuthoredRequest:
    """A validated authored request (closed schema; files not yet touched).

    Construct with :func:`parse_authored_request` or :func:`load_authored_request`.

    Attributes:
        document: the request exactly as authored (read-only JSON value).
        baseline: the baseline side.
        subject: the subject side.
        policy: the reference of the policy file.
        output: the reference of the evidence destination.
        metric: the metric selector, or ``None``.
    """

    document: Mapping[str, Any]
    baseline: SourceSpec = field(init=False)
    subject: SourceSpec = field(init=False)
    policy: str = field(init=False)
    output: str = field(init=False)
    metric: str | None = field(init=False)

    def __post_init__(self) -> None:
        """Freeze and validate the document (structural service-identity checks only)."""
        if not isinstance(self.document, Mapping):
            raise _fail("not_mapping", "request")
        try:
            document = _frozen(self.document)
        except CapturedRunError as error:
            raise _fail(error.code, "request") from None
        _check_authored(document, full_identity=False)
        comparison = document["comparison"]
        object.__setattr__(self, "document", document)
        object.__setattr__(self, "baseline", SourceSpec("baseline", comparison["baseline"]))
        object.__setattr__(self, "subject", SourceSpec("subject", comparison["subject"]))
        object.__setattr__(self, "policy", comparison["policy"])
        object.__setattr__(self, "output", document["output"]["evidence"])
        object.__setattr__(self, "metric", comparison.get("metric"))

    def __repr__(self) -> str:
        """Show the adapters only."""
        return (
            f"AuthoredRequest(baseline={self.baseline.adapter!r}, subject={self.subject.adapter!r})"
        )

    def side(self, name: str) -> SourceSpec:
        """Return the ``"baseline"`` or ``"subject"`` side."""
        if name == "baseline":
            return self.baseline
        if name == "subject":
            return self.subject
        raise _fail("invalid_type", "side")

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the document."""
        result: dict[str, Any] = thaw_json(self.document)
        return result

    def with_references(
        self,
        *,
        baseline_path: str | None = None,
        subject_path: str | None = None,
        policy: str | None = None,
        output: str | None = None,
    ) -> AuthoredRequest:
        """Return a copy with some references replaced (each re-checked as a reference)."""
        document = self.to_dict()
        comparison = document["comparison"]
        if baseline_path is not None:
            comparison["baseline"]["path"] = _check_reference(
                baseline_path, "comparison.baseline.path"
            )
        if subject_path is not None:
            comparison["subject"]["path"] = _check_reference(
                subject_path, "comparison.subject.path"
            )
        if policy is not None:
            comparison["policy"] = _check_reference(policy, "comparison.policy")
        if output is not None:
            document["output"]["evidence"] = _check_reference(output, "output.evidence")
        return AuthoredRequest(document)


def parse_authored_request(document: object) -> AuthoredRequest:
    """Validate a parsed authored request (a JSON object) against the closed schema.

    Raises:
        CapturedRequestError: ``not_mapping``, ``invalid_json_value``,
            ``unsupported_format``, ``unknown_field``, ``missing_field``,
            ``invalid_type``, ``invalid_constant``, ``invalid_text``,
            ``invalid_reference``, ``invalid_digest``, ``invalid_projection``,
            ``invalid_pointer``, ``unknown_adapter``, ``unknown_metric``,
            ``too_many_members``, ``judge_required``, ``judge_forbidden``,
            ``judge_unsupported``, ``projection_forbidden``,
            ``artifact_digest_required``, ``artifact_digest_forbidden``,
            ``invalid_service_identity``.
    """
    return AuthoredRequest(document)  # type: ignore[arg-type]


def load_authored_request(data: bytes | bytearray | memoryview | str) -> AuthoredRequest:
    """Load an authored request from strict YAML (or JSON) text and validate it.

    Raises:
        CapturedRequestError: a strict-YAML code (``too_large``, ``not_utf8``,
            ``duplicate_key``, ``merge_key``, ``anchor_or_alias``,
            ``tag_or_directive``, ``too_many_nodes``, ``too_deep``,
            ``invalid_boolean`` … ``include_key``, ``not_mapping``; field
            ``request``) or a schema code (see :func:`parse_authored_request`).
    """
    try:
        value = load_strict_yaml(
            data,
            limits=REQUEST_YAML_LIMITS,
            require_mapping=True,
            forbidden_keys=INCLUDE_KEYS,
            forbidden_keys_exempt=_exempt,
        )
    except YamlError as error:
        code = error.code if error.code in CapturedRequestError.codes else "invalid_yaml"
        raise _fail(code, "request") from None
    except TypeError:
        raise _fail("invalid_type", "request") from None
    return parse_authored_request(value)


# ---------------------------------------------------------------------------
# Normalized request, digest, comparison_id


def comparison_id(
    *, request_digest: str, baseline_run_digest: str, subject_run_digest: str, policy_digest: str
) -> str:
    """``digest({kind: "captured", request_digest, baseline_run_digest, subject_run_digest, policy_digest})``."""  # noqa: E501
    for name, value in (
        ("request_digest", request_digest),
        ("baseline_run_digest", baseline_run_digest),
        ("subject_run_digest", subject_run_digest),
        ("policy_digest", policy_digest),
    ):
        _check_digest(value, name)
    return digest_invarlock(
        {
            "kind": "captured",
            "request_digest": request_digest,
            "baseline_run_digest": baseline_run_digest,
            "subject_run_digest": subject_run_digest,
            "policy_digest": policy_digest,
        }
    )


@dataclass(frozen=True, slots=True, repr=False)
class NormalizedRequest:
    """A validated normalized request (what ``request.json`` of a pack contains).

    Construct with :func:`parse_normalized_request` or
    :func:`normalize_captured_request`.

    Attributes:
        document: the normalized request (read-only JSON value, no paths).
        canonical_bytes: its canonical bytes (final LF).
        digest: ``captured_request_digest`` = SHA-256 of :attr:`canonical_bytes`.
        policy_digest: ``comparison.policy_digest``.
        baseline_run_digest: ``comparison.baseline.run_digest``.
        subject_run_digest: ``comparison.subject.run_digest``.
        comparison_id: :func:`comparison_id` of the four digests.
        metric: the metric selector, or ``None``.
    """

    document: Mapping[str, Any]
    canonical_bytes: bytes = field(init=False)
    digest: str = field(init=False)
    policy_digest: str = field(init=False)
    baseline_run_digest: str = field(init=False)
    subject_run_digest: str = field(init=False)
    comparison_id: str = field(init=False)
    metric: str | None = field(init=False)

    def __post_init__(self) -> None:
        """Validate (closed schema, controls, size, identities, pins); compute the digests."""
        try:
            document = _check_normalized(self.document)
        except CapturedRunError as error:
            raise _fail(error.code, "request") from None
        comparison = document["comparison"]
        data = frozen_canonical(document)
        digest = digest_bytes(data)
        object.__setattr__(self, "document", document)
        object.__setattr__(self, "canonical_bytes", data)
        object.__setattr__(self, "digest", digest)
        object.__setattr__(self, "policy_digest", comparison["policy_digest"])
        object.__setattr__(self, "baseline_run_digest", comparison["baseline"]["run_digest"])
        object.__setattr__(self, "subject_run_digest", comparison["subject"]["run_digest"])
        object.__setattr__(self, "metric", comparison.get("metric"))
        object.__setattr__(
            self,
            "comparison_id",
            comparison_id(
                request_digest=digest,
                baseline_run_digest=comparison["baseline"]["run_digest"],
                subject_run_digest=comparison["subject"]["run_digest"],
                policy_digest=comparison["policy_digest"],
            ),
        )

    def __repr__(self) -> str:
        """Show the request digest only."""
        return f"NormalizedRequest(digest={self.digest!r})"

    def __eq__(self, other: object) -> bool:
        """Compare by digest."""
        if not isinstance(other, NormalizedRequest):
            return NotImplemented
        return self.digest == other.digest

    def __hash__(self) -> int:
        """Hash by digest."""
        return hash(self.digest)

    def side(self, name: str) -> Mapping[str, Any]:
        """Return the normalized ``"baseline"`` or ``"subject"`` side (read-only)."""
        if name not in SIDES:
            raise _fail("invalid_type", "side")
        return self.document["comparison"][name]  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the document."""
        result: dict[str, Any] = thaw_json(self.document)
        return result


def parse_normalized_request(document: object) -> NormalizedRequest:
    """Validate a normalized request document and return it typed.

    Validation = the normalized closed schema (adapter ``invarlock`` forbids
    identity members, other adapters require ``source``, ``run_id``,
    ``artifact_digest``), canonical size ≤1 MiB, no control characters
    outside ``service_identity.configuration``, every service identity fully
    validated, and ``expected_run_digest == run_digest`` where present.

    Raises:
        CapturedRequestError: a schema code, ``control_character``,
            ``too_large``, ``invalid_service_identity``, ``inconsistent_pin``.
    """
    if isinstance(document, NormalizedRequest):
        return document
    return NormalizedRequest(document)  # type: ignore[arg-type]


def captured_request_digest(normalized: object) -> str:
    """Validate a normalized request (see :func:`parse_normalized_request`); return its digest."""
    return parse_normalized_request(normalized).digest


def _same(left: object, right: object) -> bool:
    """Exact JSON equality (``1`` differs from ``1.0``; key order is irrelevant)."""
    return bool(frozen_canonical(left) == frozen_canonical(right))


def _run_identities(run: Run) -> dict[str, Any]:
    identity = run.service_identity
    return {
        "source": run.source.to_dict(),
        "run_id": run.run_id,
        "artifact_digest": run.artifact_digest,
        "score_provenance": {key: value.to_dict() for key, value in run.score_provenance.items()},
        "service_identity": None if identity is None else identity.to_dict(),
    }


def _check_declared(spec: Mapping[str, Any], where: str, run: Run) -> None:
    """Require a non-``invarlock`` side's declared identities to equal the run's."""
    if (
        any(member not in spec for member in ("source", "run_id", "artifact_digest"))
        or run.source_digest is None
    ):
        raise _fail("identity_required", where)
    actual_values = _run_identities(run)
    for member in _IDENTITIES:
        declared = spec.get(member, {} if member == "score_provenance" else None)
        if not _same(declared, actual_values[member]):
            raise _fail("identity_mismatch", f"{where}.{member}")
    if "input_projection" in spec:
        configuration = spec["input_projection"]
        for record in run.records:
            binding = record.projection
            if binding is None or not _same(binding.configuration.to_dict(), configuration):
                raise _fail("projection_mismatch", f"{where}.input_projection")


def _normalize_side(spec: Mapping[str, Any], side: str, run: Run, policy: ComparisonPolicy) -> Any:
    where = f"comparison.{side}"
    actual = run.digest
    if policy.expected_case_set_digest is not None:
        try:
            validate_run_case_set(run, policy.expected_case_set_digest)
        except CapturedRunError:
            raise _fail("case_set_mismatch", where) from None
    pinned = spec.get("expected_run_digest")
    if pinned is not None and pinned != actual:
        raise _fail("run_digest_mismatch", f"{where}.expected_run_digest")
    if spec["adapter"] == "invarlock":
        for member in _OVERRIDES:
            if member in spec:
                raise _fail("identity_override", f"{where}.{member}")
    else:
        _check_declared(spec, where, run)
    normalized = {key: value for key, value in spec.items() if key != "path"}
    normalized["run_digest"] = actual
    return normalized


def normalize_captured_request(
    authored: AuthoredRequest | Mapping[str, Any],
    baseline: Run | Mapping[str, Any],
    subject: Run | Mapping[str, Any],
    policy: ComparisonPolicy | Mapping[str, Any],
) -> NormalizedRequest:
    """Bind an authored request to its loaded runs and policy (30-request.md §4).

    Steps: validate the authored request (canonical size ≤1 MiB, no control
    characters in any string or key outside
    ``comparison.{side}.service_identity.configuration``, closed schema,
    declared service identities fully validated); ``policy_digest``; the
    metric selector (policy must have exactly one metric of that kind); then
    per side: run digest, the policy's case-set pin, the
    ``expected_run_digest`` pin, and the declared identities (adapter
    ``invarlock`` declares none; any other adapter declares ``source``,
    ``run_id`` and ``artifact_digest``, its run has a ``source_digest``, and
    every declared identity — ``score_provenance`` defaulting to ``{}`` — equals
    the run's exactly; a declared input projection equals every record's
    binding). The normalized side is the authored side without ``path`` plus
    ``run_digest``.

    Raises:
        CapturedRequestError: ``control_character``, ``too_large``, a schema
            code, ``invalid_service_identity``, ``metric_mismatch``,
            ``case_set_mismatch``, ``run_digest_mismatch``,
            ``identity_override``, ``identity_required``, ``identity_mismatch``,
            ``projection_mismatch``.
        ComparisonPolicyError: the policy fails portable validation.
        CapturedRunError: a run given as a document is not a valid run.
    """
    if isinstance(authored, AuthoredRequest):
        document = authored.document
    else:
        if not isinstance(authored, Mapping):
            raise _fail("not_mapping", "request")
        try:
            document = _frozen(authored)
        except CapturedRunError as error:
            raise _fail(error.code, "request") from None
    _check_size_and_controls(document)
    _check_authored(document, full_identity=True)
    policy_value = (
        policy if isinstance(policy, ComparisonPolicy) else parse_comparison_policy(policy)
    )
    comparison = document["comparison"]
    metric = comparison.get("metric")
    if metric is not None and (
        len(policy_value.metrics) != 1 or policy_value.metrics[0].kind != metric
    ):
        raise _fail("metric_mismatch", "comparison.metric")
    runs = {
        "baseline": baseline if isinstance(baseline, Run) else run_from_document(baseline),
        "subject": subject if isinstance(subject, Run) else run_from_document(subject),
    }
    normalized_comparison: dict[str, Any] = {
        side: _normalize_side(comparison[side], side, runs[side], policy_value) for side in SIDES
    }
    normalized_comparison["policy_digest"] = policy_value.digest
    if metric is not None:
        normalized_comparison["metric"] = metric
    return NormalizedRequest(
        {
            "format": document["format_version"],
            "execution": {"mode": EXECUTION_MODE},
            "comparison": normalized_comparison,
        }
    )


def authored_from_normalized(
    normalized: NormalizedRequest,
    *,
    baseline_path: str,
    subject_path: str,
    policy_path: str,
    evidence: str,
) -> AuthoredRequest:
    """Rebuild an authored request from a normalized one (re-normalization of a pack).

    Each side gets all its members except ``run_digest``, plus ``path``; the
    policy and output references are the given ones; ``metric`` is kept.
    """
    if not isinstance(normalized, NormalizedRequest):
        raise _fail("invalid_type", "request")
    comparison: dict[str, Any] = {}
    for side, path in (("baseline", baseline_path), ("subject", subject_path)):
        entry = {
            key: thaw_json(value)
            for key, value in normalized.side(side).items()
            if key != "run_digest"
        }
        entry["path"] = path
        comparison[side] = entry
    comparison["policy"] = policy_path
    if normalized.metric is not None:
        comparison["metric"] = normalized.metric
    return AuthoredRequest(
        {
            "format_version": normalized.document["format"],
            "execution": {"mode": EXECUTION_MODE},
            "comparison": comparison,
            "output": {"evidence": evidence},
        }
    )


# ---------------------------------------------------------------------------
# Files beneath the request root


def _open_directory(path: str | os.PathLike[str], where: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC)
    except FileNotFoundError:
        raise _fail("not_found", where) from None
    except OSError as error:  # pragma: no cover - a root that is a file, or EACCES
        code = "unsafe_path" if error.errno == errno.ENOTDIR else "unreadable"
        raise _fail(code, where) from None


def _open_child_directory(parent_fd: int, name: str, where: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        raise _fail("not_found", where) from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _fail("unsafe_path", where) from None
        raise _fail("unreadable", where) from None  # pragma: no cover - EACCES


def _open_leaf(dir_fd: int, name: str, where: str) -> int:
    """Open a regular file in ``dir_fd`` without following a symlink."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC
    try:
        file_fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _fail("not_found", where) from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.EMLINK):
            raise _fail("not_regular_file", where) from None
        raise _fail("unreadable", where) from None  # pragma: no cover - EACCES
    regular = stat.S_ISREG(os.fstat(file_fd).st_mode)
    if not regular:
        os.close(file_fd)
        raise _fail("not_regular_file", where)
    os.set_blocking(file_fd, True)
    return file_fd


def _open_beneath(root: Path, reference: str, where: str) -> int:
    """Open a regular file at ``reference`` below ``root`` without following any symlink."""
    parts = reference.split("/")
    fd = _open_directory(root, where)
    try:
        for part in parts[:-1]:
            child = _open_child_directory(fd, part, where)
            os.close(fd)
            fd = child
        return _open_leaf(fd, parts[-1], where)
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int, where: str) -> bytes:
    """Read a whole file descriptor (closing it), refusing more than ``limit`` bytes."""
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:  # pragma: no cover - a read error after a successful open
        raise _fail("unreadable", where) from None
    if len(data) > limit:
        raise _fail("too_large", where)
    return data


def check_output_destination(root: str | os.PathLike[str], reference: str) -> Path:
    """Check ``output.evidence`` below ``root``; return the destination path.

    Every existing ancestor must be a real directory (no symlink); missing
    ancestors are allowed (publication creates them with mode 0700); the
    final name must not exist.

    Raises:
        CapturedRequestError: ``invalid_reference``, ``not_found`` (root),
            ``unsafe_path``, ``unreadable``, ``output_exists`` (field
            ``output.evidence``).
    """
    where = "output.evidence"
    _check_reference(reference, where)
    parts = reference.split("/")
    fd = _open_directory(root, where)
    try:
        for part in parts[:-1]:
            try:
                child = _open_child_directory(fd, part, where)
            except CapturedRequestError as error:
                if error.code == "not_found":
                    return Path(root) / reference
                raise
            os.close(fd)
            fd = child
        try:
            os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return Path(root) / reference
        except OSError:
            raise _fail("unreadable", where) from None  # pragma: no cover - EACCES
        raise _fail("output_exists", where)
    finally:
        os.close(fd)


def _override(root: Path, value: str | os.PathLike[str], cwd: Path, where: str) -> str:
    """Turn a caller-relative path that must lie inside the request root into a reference."""
    path = Path(value)
    if not path.is_absolute():
        path = cwd / path
    if path.name in ("", ".", ".."):
        raise _fail("invalid_reference", where)
    resolved = Path(os.path.realpath(path.parent)) / path.name
    try:
        relative = resolved.relative_to(root)
    except ValueError:
        raise _fail("outside_root", where) from None
    return _check_reference(relative.as_posix(), where)


class RunLoader(Protocol):
    """Loads one side's run from a native file (the ``load_run`` adapters).

    Called with the file path (below the request root, every component
    checked not to be a symlink) and the side as authored (``adapter``,
    declared ``source``, ``run_id``, ``artifact_digest``,
    ``service_identity``, ``score_provenance``, ``input_projection``). It
    must return the run the adapter builds, with ``source_digest`` = SHA-256
    of the raw file bytes, within ``limits``.
    """

    def __call__(self, path: Path, side: SourceSpec, *, limits: Limits) -> Run:
        """Return the loaded run (raise a :class:`~sealeval.errors.SealevalError` to refuse)."""
        ...


#: The comparison engine's preflight (ID-set equality, per-pair equality,
#: scopes, work budget, missing-ID capacity): returns facts to report.
PairedCheck = Callable[[Run, Run, ComparisonPolicy], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True, repr=False)
class CapturedRequest:
    """A loaded, normalized captured request: what ``evaluate`` compares and packs.

    Attributes:
        authored: the authored request (after overrides).
        root: the request root (a real directory).
        baseline: the baseline run.
        subject: the subject run.
        policy: the policy (portable validation passed).
        normalized: the normalized request (its digest is the request digest).
        destination: the evidence destination (``root / authored.output``).
    """

    authored: AuthoredRequest
    root: Path
    baseline: Run
    subject: Run
    policy: ComparisonPolicy
    normalized: NormalizedRequest
    destination: Path

    def __repr__(self) -> str:
        """Show the request digest only."""
        return f"CapturedRequest(request_digest={self.normalized.digest!r})"

    @property
    def request_digest(self) -> str:
        """The captured request digest."""
        return self.normalized.digest

    @property
    def comparison_id(self) -> str:
        """The comparison id."""
        return self.normalized.comparison_id


def _streamed_side(fd: int, limits: Limits) -> Run | None:
    """Stream a large canonical run without a record cap; ``None``: read it whole instead.

    Only without a record cap (the reference's envelope reads at most 128 MiB
    anyway) and from :data:`~sealeval.captured.run.STREAM_MIN_BYTES` on. Any
    refusal of the streamed read rewinds the file: the whole-file path then
    accepts non-canonical JSON or names the refusal exactly as for a small file.
    """
    if limits.max_records is not None or os.fstat(fd).st_size < STREAM_MIN_BYTES:
        return None
    try:
        with os.fdopen(os.dup(fd), "rb") as handle:
            return read_canonical_run(handle, limits=limits)
    except (CapturedRunError, OSError):
        os.lseek(fd, 0, os.SEEK_SET)  # the descriptor shares the offset: rewind it
        return None


def _load_side(
    root: Path,
    spec: SourceSpec,
    run_loader: RunLoader | None,
    limits: Limits,
) -> Run:
    where = f"comparison.{spec.side}.path"
    fd = _open_beneath(root, spec.path, where)
    if spec.adapter != "invarlock":
        os.close(fd)
        if run_loader is None:
            raise _fail("adapter_unavailable", f"comparison.{spec.side}.adapter")
        run = run_loader(root / spec.path, spec, limits=limits)
        if not isinstance(run, Run):
            raise _fail("invalid_type", where)
        return run
    try:
        streamed = _streamed_side(fd, limits)
    except BaseException:
        os.close(fd)
        raise
    if streamed is not None:
        os.close(fd)
        return streamed
    data = _read_fd(fd, limits.max_file_bytes, where)
    try:
        return parse_run(data, limits=limits)
    except CanonicalError:
        raise _fail("invalid_json", where) from None
    except CapturedRunError as error:
        inner = error.field or "run"
        raise CapturedRunError(error.code, f"comparison.{spec.side}.{inner}"[:128]) from None


def read_authored_request(request_path: str | os.PathLike[str]) -> AuthoredRequest:
    """Read and validate an authored request file (regular file, not a symlink, ≤1 MiB).

    Raises:
        CapturedRequestError: ``not_found``, ``not_regular_file``,
            ``unreadable``, ``too_large`` (field ``request``), or any code of
            :func:`load_authored_request`.
    """
    path = Path(request_path)
    fd = _open_beneath(Path(os.path.realpath(path.parent)), path.name, "request")
    return load_authored_request(_read_fd(fd, MAX_REQUEST_BYTES, "request"))


def load_captured_request(
    request_path: str | os.PathLike[str],
    *,
    request_root: str | os.PathLike[str] | None = None,
    baseline_run: str | os.PathLike[str] | None = None,
    subject_run: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    run_loader: RunLoader | None = None,
    limits: Limits = INVARLOCK_LIMITS,
    check_output: bool = True,
) -> CapturedRequest:
    """Read a request file, apply overrides, load runs and policy, and normalize.

    Args:
        request_path: the authored request (YAML or JSON).
        request_root: root for resolving references (default: the request
            file's real parent directory).
        baseline_run: ``--baseline-run`` (relative to ``cwd``; must lie inside
            the root; replaces ``comparison.baseline.path``).
        subject_run: ``--subject-run`` (likewise).
        output: ``--output`` (likewise, replaces ``output.evidence``).
        cwd: the caller's working directory (default: the process's).
        run_loader: loads sides whose adapter is not ``invarlock``.
        limits: run limits (default: the reference's 50,000 records / 128 MiB).
        check_output: whether the destination must not exist yet.

    Order: request file, overrides, output destination, baseline run, subject
    run, policy, normalization.

    Raises:
        CapturedRequestError: any request, file or normalization refusal.
        CapturedRunError: a run file is not a valid run (field rebased under
            ``comparison.<side>``).
        ComparisonPolicyError: the policy fails portable validation.
    """
    authored = read_authored_request(request_path)
    root = Path(
        os.path.realpath(Path(request_path).parent if request_root is None else request_root)
    )
    base = Path.cwd() if cwd is None else Path(os.path.realpath(cwd))
    authored = authored.with_references(
        baseline_path=None
        if baseline_run is None
        else _override(root, baseline_run, base, "comparison.baseline.path"),
        subject_path=None
        if subject_run is None
        else _override(root, subject_run, base, "comparison.subject.path"),
        output=None if output is None else _override(root, output, base, "output.evidence"),
    )
    if check_output:
        destination = check_output_destination(root, authored.output)
    else:
        destination = root / authored.output
    baseline = _load_side(root, authored.baseline, run_loader, limits)
    subject = _load_side(root, authored.subject, run_loader, limits)
    policy_fd = _open_beneath(root, authored.policy, "comparison.policy")
    data = _read_fd(policy_fd, MAX_INPUT_BYTES, "comparison.policy")
    try:
        if is_yaml_policy_name(authored.policy):  # sealeval: strict YAML policies too
            document = load_policy_yaml(data)
        else:
            document = decode(data, limits=DecodeLimits(max_bytes=MAX_INPUT_BYTES))
    except CanonicalError:
        raise _fail("invalid_json", "comparison.policy") from None
    except ComparisonPolicyError:
        raise _fail("invalid_yaml", "comparison.policy") from None
    del data
    if not isinstance(document, dict):
        raise _fail("not_mapping", "comparison.policy")
    policy = parse_comparison_policy(document)
    normalized = normalize_captured_request(authored, baseline, subject, policy)
    return CapturedRequest(
        authored=authored,
        root=root,
        baseline=baseline,
        subject=subject,
        policy=policy,
        normalized=normalized,
        destination=destination,
    )


# ---------------------------------------------------------------------------
# Preflight


@dataclass(frozen=True, slots=True, repr=False)
class PreflightResult:
    """What ``evaluate --preflight`` established (nothing scored or written).

    Attributes:
        request: the loaded, normalized request.
        requested_authentication: ``"signed"`` or ``"unsigned_local"``.
        signing_key: the loaded signing key (signed mode), else ``None``.
        checks: :data:`PREFLIGHT_CHECKS`.
        paired: what the comparison engine's ``paired_check`` reported
            (e.g. ``required_bootstrap_draws``, ``missing_id_bytes``), or ``None``.
    """

    request: CapturedRequest
    requested_authentication: str
    signing_key: SigningKey | None
    checks: tuple[str, ...] = PREFLIGHT_CHECKS
    paired: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        """Show the request digest and the signing mode only."""
        return (
            f"PreflightResult(request_digest={self.request.request_digest!r}, "
            f"requested_authentication={self.requested_authentication!r})"
        )

    @property
    def record_count(self) -> int:
        """Records of the baseline run."""
        return len(self.request.baseline.records)

    @property
    def scope_count(self) -> int:
        """``overall`` plus one per policy slice."""
        return len(self.request.policy.scope_names)

    @property
    def signing_key_fingerprint(self) -> str | None:
        """The signer's fingerprint (signed mode), else ``None``."""
        return None if self.signing_key is None else self.signing_key.fingerprint


def preflight(
    request_path: str | os.PathLike[str],
    *,
    signing_key: SigningKey | str | os.PathLike[str] | None = None,
    unsigned: bool = False,
    request_root: str | os.PathLike[str] | None = None,
    baseline_run: str | os.PathLike[str] | None = None,
    subject_run: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    run_loader: RunLoader | None = None,
    paired_check: PairedCheck | None = None,
    limits: Limits = INVARLOCK_LIMITS,
) -> PreflightResult:
    """Check everything ``evaluate`` needs without scoring or writing (30-request.md §6).

    Order: signing mode (exactly one of ``signing_key`` and ``unsigned``),
    request and output destination, both runs, policy, normalization, the
    policy's runtime check (:func:`~sealeval.captured.policy.check_runtime`),
    ``paired_check`` (the comparison engine's pairing, budget and capacity
    checks, when given), and finally loading the signing key (signed mode).

    Raises:
        CapturedRequestError: ``signing_key_required``,
            ``signing_mode_conflict``, or any refusal of
            :func:`load_captured_request`.
        ComparisonPolicyError: portable or runtime policy refusal.
        SigningKeyError: the signing key cannot be loaded.
    """
    if signing_key is not None and unsigned:
        raise _fail("signing_mode_conflict", "signing_key")
    if signing_key is None and not unsigned:
        raise _fail("signing_key_required", "signing_key")
    request = load_captured_request(
        request_path,
        request_root=request_root,
        baseline_run=baseline_run,
        subject_run=subject_run,
        output=output,
        cwd=cwd,
        run_loader=run_loader,
        limits=limits,
    )
    check_runtime(request.policy)
    paired = None
    if paired_check is not None:
        reported = paired_check(request.baseline, request.subject, request.policy)
        paired = None if reported is None else types.MappingProxyType(dict(reported))
    key: SigningKey | None = None
    if signing_key is not None:
        key = signing_key if isinstance(signing_key, SigningKey) else load_signing_key(signing_key)
    return PreflightResult(
        request=request,
        requested_authentication="unsigned_local" if unsigned else "signed",
        signing_key=key,
        paired=paired,
    )
