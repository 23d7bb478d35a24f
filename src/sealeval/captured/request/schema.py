"""The request's closed schema: constants, :class:`CapturedRequestError`, the field checks.

The authored and normalized forms share these checks (references, texts,
digests, closed members, sides, metrics, the size and control-character
bounds), so both layers refuse with the same codes and field names. Closed
objects, texts, digests and member bounds are :mod:`sealeval._validate`'s
rules with :class:`CapturedRequestError`; a text with an unpaired
surrogate is ``invalid_json_value`` (the toolkit's one behaviour).
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Mapping
from typing import Any, Final

from sealeval._validate import (
    check_closed,
    check_digest,
    check_exact,
    check_members,
    check_text,
    freeze_json,
)
from sealeval.canonical import frozen_canonical, is_digest
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.run import (
    PROVENANCE_KINDS,
)
from sealeval.captured.service_identity import validate_service_identity
from sealeval.errors import CapturedError, YamlError
from sealeval.strict_yaml import YamlLimits

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
OVERRIDES: Final = (
    "source",
    "run_id",
    "artifact_digest",
    "score_provenance",
    "service_identity",
    "input_projection",
)
#: Members compared with the loaded run, in the reference's order.
IDENTITIES: Final = ("source", "run_id", "artifact_digest", "score_provenance", "service_identity")
_PROVENANCE_MEMBERS: Final = ("kind", "source", "version", "unit", "rubric_digest")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_POINTER: Final = re.compile(r"/(?:input|context)(?:/[^\x00-\x1f\x7f]*)?")
_DRIVE: Final = re.compile(r"[A-Za-z]:")


class CapturedRequestError(CapturedError):
    """Refusal of a captured evaluation request (authored, normalized, or its files)."""

    module = "sealeval.captured.request"
    codes = YamlError.codes | frozenset(  # strict YAML: the codes of sealeval.strict_yaml
        {
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


def freeze_request(value: object) -> Any:
    """Deep-freeze a request document (``CapturedRunError`` naming ``request`` on a bad value)."""
    return freeze_json(value, "request", error=CapturedRunError)


# ---------------------------------------------------------------------------
# Field rules


def check_reference(value: object, where: str) -> str:
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
    """``text4096``: 1-4096 code points, no C0 control, no DEL, no unpaired surrogate.

    :func:`sealeval._validate.check_text` with the request's error: an
    unpaired surrogate (which no UTF-8 input can carry, and which the
    document's freezing already refuses) is ``invalid_json_value`` naming
    the field, as every caller of the toolkit's text rule.
    """
    return check_text(value, where, error=CapturedRequestError, max_length=_MAX_TEXT)


def _check_digest(value: object, where: str) -> str | None:
    return check_digest(value, where, error=CapturedRequestError)


def _check_source(value: object, where: str) -> None:
    doc = check_closed(value, where, ("name", "version"), error=CapturedRequestError)
    _check_text(doc["name"], f"{where}.name")
    _check_text(doc["version"], f"{where}.version")


def _check_provenance(value: object, where: str) -> None:
    value = check_members(value, where, error=CapturedRequestError, max_members=_MAX_MEMBERS)
    for item in value.values():
        entry = check_closed(
            item, f"{where}.entry", _PROVENANCE_MEMBERS, error=CapturedRequestError
        )
        if type(entry["kind"]) is not str or entry["kind"] not in PROVENANCE_KINDS:
            raise _fail("invalid_constant", f"{where}.entry.kind")
        for name in ("source", "version", "unit"):
            _check_text(entry[name], f"{where}.entry.{name}")
        if entry["rubric_digest"] is not None:
            check_digest(
                entry["rubric_digest"], f"{where}.entry.rubric_digest", error=CapturedRequestError
            )


def _check_projection(value: object, where: str) -> None:
    value = check_exact(
        value, where, ("kind", "pointer"), error=CapturedRequestError, code="invalid_projection"
    )
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
            check_digest(
                doc["artifact_digest"], f"{where}.artifact_digest", error=CapturedRequestError
            )
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
            for member in OVERRIDES:
                if member in doc:
                    raise _fail("identity_override", f"{where}.{member}")
    elif normalized:
        for member in ("source", "run_id", "artifact_digest"):
            if member not in doc:
                raise _fail("missing_field", f"{where}.{member}")


def _check_side(value: object, side: str, *, normalized: bool, full_identity: bool) -> None:
    where = f"comparison.{side}"
    required = ("adapter", "run_digest") if normalized else ("path", "adapter")
    doc = check_closed(value, where, required, _SIDE_OPTIONAL, error=CapturedRequestError)
    adapter = doc["adapter"]
    if type(adapter) is not str or adapter not in ADAPTERS:
        raise _fail("unknown_adapter", f"{where}.adapter")
    if normalized:
        check_digest(doc["run_digest"], f"{where}.run_digest", error=CapturedRequestError)
    else:
        check_reference(doc["path"], f"{where}.path")
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


def check_authored(document: Mapping[str, Any], *, full_identity: bool) -> None:
    """Check the closed authored schema in a fixed order (the first failing rule decides).

    ``full_identity=False`` checks a side's service identity for structure
    only (its configuration digest is checked when the request is normalized).
    """
    if "format_version" in document and (
        document["format_version"] != REQUEST_FORMAT or type(document["format_version"]) is not str
    ):
        raise _fail("unsupported_format", "format_version")
    check_closed(document, "request", _TOP, error=CapturedRequestError)
    execution = check_closed(
        document["execution"], "execution", ("mode",), error=CapturedRequestError
    )
    if execution["mode"] != EXECUTION_MODE or type(execution["mode"]) is not str:
        raise _fail("invalid_constant", "execution.mode")
    comparison = check_closed(
        document["comparison"],
        "comparison",
        _COMPARISON_REQUIRED,
        _COMPARISON_OPTIONAL,
        error=CapturedRequestError,
    )
    _check_metric(comparison, normalized=False)
    for side in SIDES:
        _check_side(comparison[side], side, normalized=False, full_identity=full_identity)
    check_reference(comparison["policy"], "comparison.policy")
    output = check_closed(document["output"], "output", ("evidence",), error=CapturedRequestError)
    check_reference(output["evidence"], "output.evidence")


def check_normalized(document: object) -> Mapping[str, Any]:
    """Check the closed normalized schema and the pins; return the frozen document."""
    if not isinstance(document, Mapping):
        raise _fail("invalid_type", "request")
    frozen = freeze_request(document)
    check_size_and_controls(frozen)
    if "format" in frozen and (
        frozen["format"] != REQUEST_FORMAT or type(frozen["format"]) is not str
    ):
        raise _fail("unsupported_format", "format")
    check_closed(
        frozen, "request", ("format", "execution", "comparison"), error=CapturedRequestError
    )
    execution = check_closed(
        frozen["execution"], "execution", ("mode",), error=CapturedRequestError
    )
    if execution["mode"] != EXECUTION_MODE or type(execution["mode"]) is not str:
        raise _fail("invalid_constant", "execution.mode")
    comparison = check_closed(
        frozen["comparison"],
        "comparison",
        ("baseline", "subject", "policy_digest"),
        ("metric",),
        error=CapturedRequestError,
    )
    _check_metric(comparison, normalized=True)
    for side in SIDES:
        _check_side(comparison[side], side, normalized=True, full_identity=True)
    check_digest(
        comparison["policy_digest"], "comparison.policy_digest", error=CapturedRequestError
    )
    for side in SIDES:
        entry = comparison[side]
        if "expected_run_digest" in entry and entry["expected_run_digest"] != entry["run_digest"]:
            raise _fail("inconsistent_pin", f"comparison.{side}.expected_run_digest")
    return frozen  # type: ignore[no-any-return]


def control_exempt(path: tuple[str, ...]) -> bool:
    """Whether a key path is ``comparison.{side}.service_identity.configuration``.

    Free text (control characters, YAML's forbidden keys) is allowed inside
    that subtree only: the control check and the authored YAML loader skip it.
    """
    return (
        len(path) == 4
        and path[0] == "comparison"
        and path[1] in SIDES
        and path[2] == "service_identity"
        and path[3] == "configuration"
    )


def check_size_and_controls(document: Mapping[str, Any]) -> None:
    """Canonical size ≤1 MiB; no control character in any string or key outside the exemption."""
    try:
        size = len(frozen_canonical(document, error=CapturedRunError))
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
            if path is not None and control_exempt(path):
                continue
            for key, child in item.items():
                if _CONTROL.search(key) is not None:
                    raise _fail("control_character", "request")
                stack.append((child, None if path is None else (*path, key)))
        elif isinstance(item, tuple):
            stack.extend((child, None) for child in item)
