"""The comparison policy ``invarlock/comparison-policy-v1`` and its digest.

Wire contract: ``20-policy.md`` of the invarlock specification; JSON Schema
``contracts/invarlock.comparison-policy-v1.schema.json``. A policy is the
recipient-approved rule set — which metrics, on which slices, with which
thresholds — and ``policy_digest`` (the SHA-256 of its canonical bytes, exactly
as supplied: nothing is normalized or defaulted) anchors it in requests, packs
and receipts.

Two validation levels:

* **portable** — :func:`parse_comparison_policy` / :func:`load_comparison_policy`
  / :func:`comparison_policy_digest`: the closed document, name rules and kind
  rules; ``unicode_version`` is checked for its format only;
* **runtime** — :func:`check_runtime`, immediately before comparing: builds one
  scorer per metric, which selects the Unicode tables each text metric pins and
  refuses (``unsupported_unicode_version``) a version this installation cannot
  provide. invarlock instead requires the interpreter's own version (15.0.0).

sealeval is stricter than the reference in one place: an integral float where
the schema says integer (``minimum_count: 10.0``) is refused
(``not_exact_integer``) instead of being accepted and hashed as ``10.0``.
"""

from __future__ import annotations

import os
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeAlias

from sealeval._fs import read_regular
from sealeval._validate import check_closed, check_members, check_text
from sealeval.canonical import decode, digest_bytes, encode_invarlock, is_digest
from sealeval.captured.scorers import (
    BINARY_KINDS,
    KINDS,
    NLL_KIND,
    RECORDED_KIND,
    NormalizedNll,
    RecordedScore,
    Scorer,
    ScorerError,
    check_configuration,
    deterministic_scorer,
)
from sealeval.errors import CanonicalError, CapturedError, FileSystemError, YamlError
from sealeval.strict_yaml import YamlLimits, load_strict_yaml

__all__ = [
    "MAX_METRICS",
    "MAX_SLICES",
    "OVERALL",
    "POLICY_FORMAT",
    "ComparisonPolicy",
    "ComparisonPolicyError",
    "MetricScorer",
    "PolicyMetric",
    "PolicySlice",
    "check_runtime",
    "comparison_policy_digest",
    "is_yaml_policy_name",
    "load_comparison_policy",
    "load_policy_yaml",
    "parse_comparison_policy",
    "policy_document",
]

POLICY_FORMAT: Final = "invarlock/comparison-policy-v1"
#: The implicit all-records scope; no slice may take this name.
OVERALL: Final = "overall"
MAX_METRICS: Final = 16
MAX_SLICES: Final = 16
MAX_MINIMUM_COUNT: Final = 50_000
MAX_CANONICAL_BYTES: Final = 134_217_728
_MAX_TEXT: Final = 128
_MAX_WHERE_VALUE: Final = 4096

_TOP: Final = frozenset({"format", "metrics", "slices", "expected_case_set_digest"})
_TOP_REQUIRED: Final = ("format", "metrics", "slices")
_METRIC_REQUIRED: Final = (
    "name",
    "kind",
    "configuration",
    "direction",
    "unit",
    "aggregation",
    "minimum_count",
    "maximum_interval_width",
)
_METRIC_OPTIONAL: Final = (
    "maximum_regression",
    "ratio_max",
    "subject_minimum",
    "subject_maximum",
    "score_key",
    "accepted_provenance",
)
_METRIC_MEMBERS: Final = frozenset(_METRIC_REQUIRED + _METRIC_OPTIONAL)
_SLICE_MEMBERS: Final = ("name", "where")
_PROVENANCE_MEMBERS: Final = ("kind", "source", "version", "unit", "rubric_digest")
_PROVENANCE_KINDS: Final = frozenset({"judge", "human", "measurement", "external_metric"})
_RUBRIC_KINDS: Final = frozenset({"judge", "human"})
_NLL_UNIT: Final = "nats_per_utf8_byte"

#: What the comparison uses per metric: a deterministic scorer, the recorded
#: score reader, or the normalized-NLL reader (see :mod:`sealeval.captured.scorers`).
MetricScorer: TypeAlias = Scorer | RecordedScore | NormalizedNll
Number: TypeAlias = int | float


class ComparisonPolicyError(CapturedError):
    """Refusal of a comparison policy (portable or runtime validation)."""

    module = "sealeval.captured.policy"
    field_in_message = True
    codes = frozenset(
        {
            # document structure
            "invalid_type",
            "invalid_json_value",
            "invalid_yaml",
            "not_found",
            "too_large",
            "unknown_field",
            "missing_field",
            "invalid_constant",
            "invalid_text",
            "invalid_digest",
            "too_many_members",
            "no_metrics",
            "too_many_metrics",
            "too_many_slices",
            "empty_where",
            "unknown_kind",
            "not_exact_integer",
            "out_of_range",
            "forbidden_field",
            # names
            "duplicate_name",
            # kind rules
            "provenance_forbidden",
            "higher_score_required",
            "invalid_recorded_metric",
            "provenance_inconsistent",
            "reversed_bounds",
            # metric configuration (codes shared with ScorerError)
            "unsupported_configuration",
            "invalid_unicode_version",
            "invalid_casefold",
            "invalid_tolerance",
            "invalid_fields",
            "invalid_pointer_escape",
            "duplicate_field",
            # runtime
            "unsupported_unicode_version",
        }
    )


def _fail(code: str, where: str) -> ComparisonPolicyError:
    return ComparisonPolicyError(code, where)


def _freeze(value: Any) -> Any:
    """Deep read-only copy of a JSON value (objects -> mapping proxies, arrays -> tuples)."""
    if isinstance(value, Mapping):
        return types.MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


def _closed(
    value: object, where: str, required: Sequence[str], allowed: frozenset[str]
) -> Mapping[str, Any]:
    """Check a closed policy object; a missing member is named ``<where>.<member>``."""
    return check_closed(
        value,
        where,
        required,
        allowed,
        error=ComparisonPolicyError,
        missing_prefix="" if where == "policy" else f"{where}.",
    )


def _text(value: object, where: str) -> str:
    """Check a policy text field (1-128 code points, no controls) with the toolkit."""
    return check_text(value, where, error=ComparisonPolicyError, max_length=_MAX_TEXT)


def _number(value: object, where: str) -> Number:
    if type(value) not in (int, float):
        raise _fail("invalid_type", where)
    assert isinstance(value, int | float)
    return value


def _array(value: object, where: str) -> Sequence[Any]:
    if type(value) not in (list, tuple):
        raise _fail("invalid_type", where)
    assert isinstance(value, list | tuple)
    return value


@dataclass(frozen=True, slots=True, eq=False)
class PolicySlice:
    """One named slice: the pairs whose baseline metadata has every ``where`` member.

    Attributes:
        name: the slice name (unique, never ``overall``).
        where: read-only mapping of metadata key to the required string value.
    """

    name: str = field(repr=False)
    where: Mapping[str, str] = field(repr=False)

    def matches(self, metadata: object) -> bool:
        """Return whether a record's ``metadata`` selects it into this slice."""
        if not isinstance(metadata, Mapping):
            return False
        for key, value in self.where.items():
            found = metadata.get(key)
            if type(found) is not str or found != value:
                return False
        return True


@dataclass(frozen=True, slots=True, eq=False)
class PolicyMetric:
    """One metric of a validated policy (values exactly as supplied; built by the parser).

    Optional thresholds are ``None`` when absent. ``maximum_regression`` is
    ``None`` exactly for NLL metrics, ``ratio_max`` exactly for the others;
    ``score_key`` / ``accepted_provenance`` are set exactly for ``recorded``.
    """

    index: int
    name: str = field(repr=False)
    kind: str
    configuration: Mapping[str, Any] = field(repr=False)
    direction: str
    unit: str = field(repr=False)
    aggregation: str
    minimum_count: int
    maximum_interval_width: Number
    maximum_regression: Number | None
    ratio_max: Number | None
    subject_minimum: Number | None
    subject_maximum: Number | None
    score_key: str | None = field(repr=False)
    accepted_provenance: Mapping[str, Any] | None = field(repr=False)

    @property
    def is_binary(self) -> bool:
        """Whether per-record values are 0/1 (Newcombe interval, no bootstrap draws)."""
        return self.kind in BINARY_KINDS

    @property
    def is_nll(self) -> bool:
        """Whether this is the normalized-NLL ratio metric."""
        return self.kind == NLL_KIND

    @property
    def scoring_assurance(self) -> str:
        """``"recorded"`` for recorded metrics, else ``"recomputed"`` (report field)."""
        return "recorded" if self.kind == RECORDED_KIND else "recomputed"

    @property
    def unicode_version(self) -> str | None:
        """The pinned Unicode version of a text metric, else ``None``."""
        version = self.configuration.get("unicode_version")
        return version if isinstance(version, str) else None


def _provenance(value: object, where: str) -> Mapping[str, Any]:
    provenance = _closed(value, where, _PROVENANCE_MEMBERS, frozenset(_PROVENANCE_MEMBERS))
    if type(provenance["kind"]) is not str or provenance["kind"] not in _PROVENANCE_KINDS:
        raise _fail("invalid_constant", f"{where}.kind")
    for name in ("source", "version", "unit"):
        _text(provenance[name], f"{where}.{name}")
    if provenance["rubric_digest"] is not None and not is_digest(provenance["rubric_digest"]):
        raise _fail("invalid_digest", f"{where}.rubric_digest")
    return provenance


def _minimum_count(value: object, where: str) -> int:
    if type(value) is float:
        assert isinstance(value, float)
        # The reference accepts integral floats (schema "integer") and hashes 10.0;
        # sealeval refuses them (docs/decisions/compat.md).
        raise _fail("not_exact_integer" if value.is_integer() else "invalid_type", where)
    if type(value) is not int:
        raise _fail("invalid_type", where)
    assert isinstance(value, int)
    if not 1 <= value <= MAX_MINIMUM_COUNT:
        raise _fail("out_of_range", where)
    return value


def _schema_metric(index: int, value: object) -> PolicyMetric:
    """Apply the closed metric schema (the kind rules come later)."""
    where = f"metrics[{index}]"
    metric = _closed(value, where, _METRIC_REQUIRED, _METRIC_MEMBERS)
    name = _text(metric["name"], f"{where}.name")
    kind = metric["kind"]
    if kind not in KINDS:
        raise _fail("unknown_kind", f"{where}.kind")
    configuration = check_members(
        metric["configuration"], f"{where}.configuration", error=ComparisonPolicyError
    )
    nll = kind == NLL_KIND
    direction = metric["direction"]
    if direction not in (("lower",) if nll else ("higher", "lower")):
        raise _fail("invalid_constant", f"{where}.direction")
    unit = _text(metric["unit"], f"{where}.unit")
    if nll and unit != _NLL_UNIT:
        raise _fail("invalid_constant", f"{where}.unit")
    if metric["aggregation"] != "mean":
        raise _fail("invalid_constant", f"{where}.aggregation")
    minimum_count = _minimum_count(metric["minimum_count"], f"{where}.minimum_count")
    width = _number(metric["maximum_interval_width"], f"{where}.maximum_interval_width")
    if not width > 0:
        raise _fail("out_of_range", f"{where}.maximum_interval_width")
    required, forbidden = (
        ("ratio_max", "maximum_regression") if nll else ("maximum_regression", "ratio_max")
    )
    if forbidden in metric:
        raise _fail("forbidden_field", f"{where}.{forbidden}")
    if required not in metric:
        raise _fail("missing_field", f"{where}.{required}")
    threshold = _number(metric[required], f"{where}.{required}")
    if not (threshold > 0 if nll else threshold >= 0):
        raise _fail("out_of_range", f"{where}.{required}")
    bounds = {
        name: _number(metric[name], f"{where}.{name}") if name in metric else None
        for name in ("subject_minimum", "subject_maximum")
    }
    score_key = _text(metric["score_key"], f"{where}.score_key") if "score_key" in metric else None
    provenance = (
        _provenance(metric["accepted_provenance"], f"{where}.accepted_provenance")
        if "accepted_provenance" in metric
        else None
    )
    return PolicyMetric(
        index=index,
        name=name,
        kind=kind,
        configuration=_freeze(configuration),
        direction=direction,
        unit=unit,
        aggregation="mean",
        minimum_count=minimum_count,
        maximum_interval_width=width,
        maximum_regression=None if nll else threshold,
        ratio_max=threshold if nll else None,
        subject_minimum=bounds["subject_minimum"],
        subject_maximum=bounds["subject_maximum"],
        score_key=score_key,
        accepted_provenance=_freeze(provenance) if provenance is not None else None,
    )


def _schema_slice(index: int, value: object) -> PolicySlice:
    where = f"slices[{index}]"
    item = _closed(value, where, _SLICE_MEMBERS, frozenset(_SLICE_MEMBERS))
    name = _text(item["name"], f"{where}.name")
    conditions = check_members(item["where"], f"{where}.where", error=ComparisonPolicyError)
    if not conditions:
        raise _fail("empty_where", f"{where}.where")
    for required in conditions.values():
        check_text(
            required,
            f"{where}.where",
            error=ComparisonPolicyError,
            max_length=_MAX_WHERE_VALUE,
            min_length=0,
            controls=True,
        )
    return PolicySlice(name=name, where=types.MappingProxyType(dict(conditions)))


def _kind_rules(metric: PolicyMetric) -> None:
    """Apply the kind-specific rules of 20-policy.md §2 to one metric."""
    where = f"metrics[{metric.index}]"
    recorded_members = metric.score_key is not None or metric.accepted_provenance is not None
    if metric.kind == RECORDED_KIND:
        if metric.score_key is None or metric.accepted_provenance is None or metric.configuration:
            raise _fail("invalid_recorded_metric", where)
        provenance = metric.accepted_provenance
        if provenance["unit"] != metric.unit or (
            provenance["kind"] in _RUBRIC_KINDS and provenance["rubric_digest"] is None
        ):
            raise _fail("provenance_inconsistent", f"{where}.accepted_provenance")
    else:
        if recorded_members:
            raise _fail("provenance_forbidden", where)
        if metric.kind != NLL_KIND and (metric.direction != "higher" or metric.unit != "score"):
            raise _fail("higher_score_required", where)
        try:
            check_configuration(metric.kind, metric.configuration)
        except ScorerError as error:
            raise _fail(error.code, f"{where}.{error.field}") from None
    low, high = metric.subject_minimum, metric.subject_maximum
    if low is not None and high is not None and low > high:
        raise _fail("reversed_bounds", where)


@dataclass(frozen=True, slots=True, eq=False)
class ComparisonPolicy:
    """A comparison policy validated at the portable level.

    Construct with the parsed document (``ComparisonPolicy(document)``, or
    :func:`parse_comparison_policy`); every rule is checked, so an invalid
    policy cannot exist. ``document`` is a deep read-only copy.

    Attributes:
        document: the policy exactly as supplied (read-only).
        metrics: the metrics in policy order.
        slices: the slices in policy order (the implicit ``overall`` scope is not listed).
        expected_case_set_digest: the pinned case-set digest, or ``None``.
        canonical_bytes: the invarlock canonical bytes (what is hashed and stored).
        digest: ``policy_digest`` = ``sha256:`` + hex SHA-256 of ``canonical_bytes``.
    """

    document: Mapping[str, Any] = field(repr=False)
    metrics: tuple[PolicyMetric, ...] = field(init=False, repr=False)
    slices: tuple[PolicySlice, ...] = field(init=False, repr=False)
    expected_case_set_digest: str | None = field(init=False, repr=False)
    canonical_bytes: bytes = field(init=False, repr=False)
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        """Validate in the specified order: schema, names, kind rules."""
        document = self.document
        if not isinstance(document, Mapping):
            raise _fail("invalid_type", "policy")
        try:
            canonical = encode_invarlock(document)
        except CanonicalError:
            raise _fail("invalid_json_value", "policy") from None
        if len(canonical) > MAX_CANONICAL_BYTES:
            raise _fail("too_large", "policy")
        _closed(document, "policy", _TOP_REQUIRED, _TOP)
        if document["format"] != POLICY_FORMAT:
            raise _fail("invalid_constant", "format")
        metrics_in = _array(document["metrics"], "metrics")
        if not metrics_in:
            raise _fail("no_metrics", "metrics")
        if len(metrics_in) > MAX_METRICS:
            raise _fail("too_many_metrics", "metrics")
        metrics = tuple(_schema_metric(index, item) for index, item in enumerate(metrics_in))
        slices_in = _array(document["slices"], "slices")
        if len(slices_in) > MAX_SLICES:
            raise _fail("too_many_slices", "slices")
        slices = tuple(_schema_slice(index, item) for index, item in enumerate(slices_in))
        case_set = document.get("expected_case_set_digest")
        if "expected_case_set_digest" in document and not is_digest(case_set):
            raise _fail("invalid_digest", "expected_case_set_digest")
        if len({metric.name for metric in metrics}) != len(metrics):
            raise _fail("duplicate_name", "metrics")
        slice_names = [item.name for item in slices]
        if len(set(slice_names)) != len(slice_names) or OVERALL in slice_names:
            raise _fail("duplicate_name", "slices")
        for metric in metrics:
            _kind_rules(metric)
        object.__setattr__(self, "document", _freeze(document))
        object.__setattr__(self, "metrics", metrics)
        object.__setattr__(self, "slices", slices)
        object.__setattr__(self, "expected_case_set_digest", case_set)
        object.__setattr__(self, "canonical_bytes", canonical)
        object.__setattr__(self, "digest", digest_bytes(canonical))

    def __eq__(self, other: object) -> bool:
        """Policies are equal when their canonical bytes are (``10`` differs from ``10.0``)."""
        if not isinstance(other, ComparisonPolicy):
            return NotImplemented
        return self.canonical_bytes == other.canonical_bytes

    def __hash__(self) -> int:
        """Hash the policy digest."""
        return hash(self.digest)

    @property
    def scope_names(self) -> tuple[str, ...]:
        """``("overall", <slice names in policy order>)`` — the report's scope order."""
        return (OVERALL, *(item.name for item in self.slices))

    @property
    def bootstrap_metric_count(self) -> int:
        """Number of metrics charged to the work budget (every non-binary kind, NLL included)."""
        return sum(1 for metric in self.metrics if not metric.is_binary)

    @property
    def has_nll(self) -> bool:
        """Whether any metric is normalized NLL (adds a report limitation)."""
        return any(metric.is_nll for metric in self.metrics)

    @property
    def unicode_versions(self) -> frozenset[str]:
        """The Unicode versions pinned by the text metrics."""
        return frozenset(
            version for metric in self.metrics if (version := metric.unicode_version) is not None
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the policy document."""
        result: dict[str, Any] = _thaw(self.document)
        return result


def parse_comparison_policy(document: object) -> ComparisonPolicy:
    """Validate a parsed policy document at the portable level.

    Raises:
        ComparisonPolicyError: with the first failing rule's code and field.
    """
    return ComparisonPolicy(document)  # type: ignore[arg-type]


#: Longest ``str`` argument looked up as a file name.
_MAX_NAME: Final = 4096
#: Suffixes that make a one-line ``str`` argument a file name, not a document.
_POLICY_SUFFIXES: Final = (".json", ".yaml", ".yml")
#: Strict YAML limits of a policy document (the canonical-size bound is checked after).
_POLICY_YAML_LIMITS: Final = YamlLimits(max_bytes=16_777_216, max_nodes=200_000, max_depth=64)


def _names_file(data: str) -> bool:
    """Whether a ``str`` argument is a file name rather than document text."""
    if "\n" in data or data.lstrip().startswith(("{", "[")):
        return False
    if data.endswith(_POLICY_SUFFIXES):
        return True
    try:
        return len(data) <= _MAX_NAME and Path(data).is_file()
    except (OSError, ValueError):  # a name the system cannot look up is document text
        return False


def _read_policy_file(path: str | os.PathLike[str]) -> bytes:
    """Read a policy file: a regular file (not a symlink) of bounded size."""
    try:
        return read_regular(path, limit=MAX_CANONICAL_BYTES)
    except FileSystemError as error:
        code = "too_large" if error.code == "too_large" else "not_found"
        raise _fail(code, "policy") from None


def policy_document(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode policy text: strict JSON when it starts with ``{`` or ``[``, else strict YAML.

    Either way the policy's digest is that of its canonical form, so a YAML
    policy and the JSON policy with the same content have the same digest.

    Raises:
        CanonicalError: JSON text that is not strict JSON.
        ComparisonPolicyError: ``policy: invalid_yaml`` or ``policy: too_large``.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if raw.lstrip(b" \t\r\n")[:1] in (b"{", b"["):
        return decode(raw)
    return load_policy_yaml(raw)


def is_yaml_policy_name(name: str | os.PathLike[str]) -> bool:
    """Whether a policy file is read as strict YAML (its name ends in ``.yaml`` or ``.yml``).

    Any other policy file is strict JSON, exactly as the reference reads it.
    """
    return os.fspath(name).lower().endswith((".yaml", ".yml"))


def load_policy_yaml(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode a strict YAML policy document (its digest is that of the canonical JSON form).

    Raises:
        ComparisonPolicyError: ``policy: invalid_yaml`` or ``policy: too_large``.
    """
    try:
        return load_strict_yaml(data, limits=_POLICY_YAML_LIMITS)
    except YamlError as error:
        raise _fail(
            "too_large" if error.code == "too_large" else "invalid_yaml", "policy"
        ) from None


def load_comparison_policy(
    data: bytes | bytearray | memoryview | str | os.PathLike[str],
) -> ComparisonPolicy:
    """Load a policy from a file, or from JSON or strict YAML text, and validate it.

    Args:
        data: a :class:`~pathlib.Path` (or any path-like), a ``str`` naming an
            existing file (or a one-line name ending in ``.json``, ``.yaml``
            or ``.yml``), or the document itself as text or bytes. A file
            whose name ends in ``.yaml`` or ``.yml`` is strict YAML, any
            other file strict JSON. Text that
            starts with ``{`` or ``[`` is strict JSON
            (:func:`sealeval.canonical.decode`); any other text is strict
            YAML (:func:`sealeval.strict_yaml.load_strict_yaml`).

    Example:
        ``load_comparison_policy(Path("policy.yaml")).digest``

    Raises:
        CanonicalError: the JSON text is not strict JSON.
        ComparisonPolicyError: ``policy: not_found`` (the named file cannot be
            read), ``policy: invalid_yaml``, or the document is not a valid policy.
    """
    if isinstance(data, os.PathLike) or (isinstance(data, str) and _names_file(data)):
        raw = _read_policy_file(data)
        if is_yaml_policy_name(data):
            return parse_comparison_policy(load_policy_yaml(raw))
        return parse_comparison_policy(decode(raw))
    return parse_comparison_policy(policy_document(data))


def comparison_policy_digest(document: object) -> str:
    """Return ``policy_digest`` after portable validation (20-policy.md §3)."""
    return parse_comparison_policy(document).digest


def check_runtime(policy: ComparisonPolicy) -> tuple[MetricScorer, ...]:
    """Runtime validation, immediately before comparing: one scorer per metric.

    Text metrics get the Unicode tables their ``unicode_version`` pins
    (:func:`sealeval.captured.unicode_tables.unicode_tables`); the result is
    reusable for every record of the comparison.

    Raises:
        ComparisonPolicyError: ``metrics[i].configuration.unicode_version:
            unsupported_unicode_version`` when this installation cannot provide
            a pinned version (invarlock: exit 2, reason
            ``unsupported_scoring_environment``; no integrity finding).
    """
    if not isinstance(policy, ComparisonPolicy):
        raise _fail("invalid_type", "policy")
    scorers: list[MetricScorer] = []
    for metric in policy.metrics:
        where = f"metrics[{metric.index}]"
        try:
            if metric.kind == RECORDED_KIND:
                assert metric.score_key is not None
                assert metric.accepted_provenance is not None
                scorers.append(RecordedScore(metric.score_key, metric.accepted_provenance))
            elif metric.kind == NLL_KIND:
                scorers.append(NormalizedNll.from_configuration(metric.configuration))
            else:
                scorers.append(deterministic_scorer(metric.kind, metric.configuration))
        except ScorerError as error:
            raise _fail(error.code, f"{where}.{error.field}") from None
    return tuple(scorers)
