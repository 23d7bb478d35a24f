"""Release evidence from JSON source reports: openmed's three kinds and sealeval's two.

A *source report* is a small, content-free JSON document in which a host's own
harness reports, for every pre-registered case (identified only by its case
digest), the slice it belongs to and its outcome. The adapters here turn one
report into the :class:`~sealeval.gates.MetricEvidence` of one gate, refusing
(fail closed, :class:`AgentReleaseAdapterError`, message = bare code) anything
that is not exactly the expected shape, kind, provenance and case inventory:

=========================  ================================  ==============================
kind                       schema string                      metric
=========================  ================================  ==============================
``replay``                 ``openmed.eval.agent_release_      ``replay_equivalence_rate``
                           source.v1``
``reference_server``       (same)                             ``reference_server_coverage_rate``
``clinician_agreement``    (same)                             ``clinician_review_agreement``
``evidence_completeness``  ``sealeval.gate_source.v1``        ``evidence_completeness_rate``
``workflow_latency``       ``sealeval.gate_source.v1``        ``workflow_latency_p95_ms``
=========================  ================================  ==============================

The first three follow openmed 3.1 byte for byte (21-adapters.md §4). The
last two are sealeval's own closed format (``docs/gate-sources.md``); for
``workflow_latency`` sealeval computes the p95 and its distribution-free 95 %
order-statistic interval itself, with exact integer arithmetic.

An absent report (``None``) yields no evidence, so the gate fails closed as
``missing_evidence``; a refused report never becomes zero-event evidence.
``evidence_digest`` binds the *parsed* report (whitespace, key order and
number spelling do not matter); the ``*_with_source_digest`` variants also
return the sha256 of the exact text supplied, outside the wire document.

Everything here is a pure function of its arguments: no I/O, no logging.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval._validate import check_exact
from sealeval.canonical import DEFAULT_LIMITS, DecodeLimits, decode, digest_bytes, digest_openmed
from sealeval.errors import CanonicalError
from sealeval.gates.adapters.counting import count_evidence
from sealeval.gates.adapters.errors import AgentReleaseAdapterError
from sealeval.gates.adapters.inventory import case_inventory
from sealeval.gates.evidence import MetricEvidence, SliceEvidence

__all__ = [
    "AGREEMENT_METHOD",
    "GATE_SOURCE_KINDS",
    "GATE_SOURCE_SCHEMA",
    "JSON_SOURCE_KINDS",
    "JSON_SOURCE_SCHEMA",
    "LATENCY_MIN_OBSERVATIONS",
    "MAX_JSON_DEPTH",
    "SOURCE_KINDS",
    "SOURCE_METRICS",
    "SOURCE_SLICES",
    "json_release_evidence",
    "json_release_evidence_with_source_digest",
    "latency_p95_ranks",
    "release_evidence_from_source",
    "release_evidence_from_source_with_source_digest",
]

#: Schema string of openmed's JSON source report v1 (three kinds).
JSON_SOURCE_SCHEMA: Final = "openmed.eval.agent_release_source.v1"
#: Schema string of sealeval's own source report v1 (two kinds).
GATE_SOURCE_SCHEMA: Final = "sealeval.gate_source.v1"
#: The one pre-registered statistical method of a clinician-agreement report.
AGREEMENT_METHOD: Final = "ordinal_krippendorff_alpha_stratified_bootstrap_95"
#: Deepest accepted nesting of arrays and objects (the reference: interpreter recursion):
#: the strict decoder's own default.
MAX_JSON_DEPTH: Final = DEFAULT_LIMITS.max_depth
#: Fewest observations for which the 95 % order-statistic interval of a p95 exists.
LATENCY_MIN_OBSERVATIONS: Final = 72

#: Kinds of :func:`json_release_evidence` (openmed 3.1).
JSON_SOURCE_KINDS: Final[tuple[str, ...]] = ("replay", "reference_server", "clinician_agreement")
#: Kinds only sealeval knows (``sealeval.gate_source.v1``).
GATE_SOURCE_KINDS: Final[tuple[str, ...]] = ("evidence_completeness", "workflow_latency")
#: Every kind :func:`release_evidence_from_source` accepts.
SOURCE_KINDS: Final[tuple[str, ...]] = JSON_SOURCE_KINDS + GATE_SOURCE_KINDS

_WORKFLOW_SLICES: Final = ("read_workflows", "recovered_workflows", "write_workflows")
#: The closed slice vocabulary of each kind.
SOURCE_SLICES: Final[dict[str, tuple[str, ...]]] = {
    "replay": ("clean_replay", "resumed_replay"),
    "reference_server": ("read_interactions", "write_interactions"),
    "clinician_agreement": ("evidence_grounding", "workflow_safety"),
    "evidence_completeness": _WORKFLOW_SLICES,
    "workflow_latency": _WORKFLOW_SLICES,
}
#: The gate metric each kind provides evidence for.
SOURCE_METRICS: Final[dict[str, str]] = {
    "replay": "replay_equivalence_rate",
    "reference_server": "reference_server_coverage_rate",
    "clinician_agreement": "clinician_review_agreement",
    "evidence_completeness": "evidence_completeness_rate",
    "workflow_latency": "workflow_latency_p95_ms",
}

_OPENMED_TOP_KEYS: Final = frozenset(
    {"schema_version", "kind", "status", "synthetic", "corpus", "cases", "statistics"}
)
_SEALEVAL_TOP_KEYS: Final = frozenset(
    {"schema_version", "kind", "status", "synthetic", "corpus", "cases"}
)
_STATISTICS_KEYS: Final = frozenset({"method", "overall", "slices"})
_INTERVAL_KEYS: Final = frozenset({"value", "ci_lower", "ci_upper"})
_CORPORA: Final = ("default", "custom")
_LARGEST_INT_LATENCY: Final = int(sys.float_info.max)


def _refuse(code: str) -> AgentReleaseAdapterError:
    return AgentReleaseAdapterError(code)


# ---------------------------------------------------------------------------
# JSON text -> value, with the adapter codes
#
# The one strict decoder (sealeval.canonical.decode, CPython's json grammar),
# within MAX_JSON_DEPTH: duplicate keys are refused when their object closes,
# i.e. in parse order, as ``duplicate_field``; anything else it refuses
# (malformed text, trailing data, nesting deeper than MAX_JSON_DEPTH,
# over-long integers) is ``invalid_json``. In *lax* mode (openmed kinds, for
# compatibility) the tokens NaN / Infinity / -Infinity and overflowing numbers
# parse to non-finite floats and unpaired surrogates are kept, for every later
# check to refuse; in strict mode (sealeval kinds) they are ``invalid_json``.

_LIMITS: Final = DecodeLimits(max_depth=MAX_JSON_DEPTH)


def _parse_json(text: str, *, lax: bool) -> Any:
    """Parse one JSON document, refusing with the JSON adapter's codes."""
    try:
        return decode(text, limits=_LIMITS, lax=lax)
    except CanonicalError as error:
        code = "duplicate_field" if error.code == "duplicate_key" else "invalid_json"
    raise _refuse(code)


# ---------------------------------------------------------------------------
# Shared checks


def _is_member(value: object, allowed: Sequence[str]) -> bool:
    return type(value) is str and value in allowed


def _is_bool(value: object) -> bool:
    return type(value) is bool


def _is_latency(value: object) -> bool:
    """Return whether ``value`` is a latency in ms: a finite int/float >= 0, never a bool."""
    if type(value) is int:
        return 0 <= value <= _LARGEST_INT_LATENCY
    return type(value) is float and math.isfinite(value) and value >= 0.0


def _fields(document: object, members: Collection[str]) -> Any:
    """Return a parsed JSON object with exactly ``members``, else refuse ``invalid_fields``."""
    return check_exact(
        document, None, members, error=AgentReleaseAdapterError, code="invalid_fields"
    )


def _is_interval_number(value: object) -> bool:
    return type(value) in (int, float) and -1 <= value <= 1  # type: ignore[operator]


def _interval(interval: object) -> tuple[Any, Any, Any]:
    """Check one agreement interval; return ``(value, ci_lower, ci_upper)``."""
    checked = _fields(interval, _INTERVAL_KEYS)
    value, lower, upper = checked["value"], checked["ci_lower"], checked["ci_upper"]
    if not (
        _is_interval_number(value)
        and _is_interval_number(lower)
        and _is_interval_number(upper)
        and lower <= value <= upper
    ):
        raise _refuse("invalid_interval")
    return value, lower, upper


# ---------------------------------------------------------------------------
# The p95 and its distribution-free 95 % interval (docs/gate-sources.md)


@functools.lru_cache(maxsize=256)
def _binomial_ranks(n: int) -> tuple[int, int] | None:
    """Return ``(l, u)`` for ``B ~ Binomial(n, 19/20)``, or ``None`` if ``u`` does not exist.

    ``l`` = max{j : P(B <= j-1) <= 1/40}, ``u`` = min{j : P(B >= j) <= 1/40}.
    With ``F = n - B ~ Binomial(n, 1/20)`` and ``S(m) = 20**n * P(F <= m)`` =
    sum over f <= m of C(n, f) * 19**(n-f), both follow from one ascending
    scan of m: ``u = n - (last m with 40*S(m) <= 20**n)`` and ``l = n -
    (first m with 40*S(m) >= 39 * 20**n)``.

    Exact integers throughout. The scan never passes ``M = n//20 + 8*isqrt(n)
    + 16`` (capped at n): M exceeds the mean n/20 of F by more than 36
    standard deviations, so by Chebyshev P(F <= M) > 39/40. Every term is
    therefore scaled by the common factor 19**(n-M) -- the thresholds are
    divided by it once, exactly -- which keeps the running sum small.
    """
    bound = min(n, n // 20 + 8 * math.isqrt(n) + 16)
    scale = 40 * 19 ** (n - bound)
    total = 20**n
    upper_limit = total // scale  # s <= this  <=>  40 * S(m) <= 20**n
    lower_limit = -((-39 * total) // scale)  # s >= this  <=>  40 * S(m) >= 39 * 20**n
    term = 19**bound  # C(n, 0) * 19**(bound - 0), scaled
    running = 0
    upper_rank: int | None = None
    for m in range(bound + 1):
        running += term
        if running <= upper_limit:
            upper_rank = n - m
        if running >= lower_limit:
            return None if upper_rank is None else (n - m, upper_rank)
        term = term * (n - m) // ((m + 1) * 19)  # exact: the next term is an integer
    raise AssertionError("unreachable: P(F <= M) > 39/40")  # pragma: no cover


def latency_p95_ranks(sample_size: int) -> tuple[int, int, int]:
    """Return the 1-based order-statistic ranks ``(k, l, u)`` of the p95 and its interval.

    For ``n`` sorted observations ``x(1) <= ... <= x(n)``: the point estimate
    is the nearest-rank p95 ``x(k)`` with ``k = ceil(19n/20)``; the 95 %
    interval is ``[x(l), x(u)]`` with ``B ~ Binomial(n, 19/20)``,
    ``l = max{j : P(B <= j-1) <= 1/40}`` and ``u = min{j : P(B >= j) <= 1/40}``
    (equal tails, each at most 2.5 %, so the coverage is at least 95 % for
    every distribution). The interval exists from ``n = 72`` on.

    Raises:
        AgentReleaseAdapterError: ``insufficient_sample`` if ``sample_size``
            is not an int of at least :data:`LATENCY_MIN_OBSERVATIONS`.
    """
    if type(sample_size) is not int or sample_size < LATENCY_MIN_OBSERVATIONS:
        raise _refuse("insufficient_sample")
    ranks = _binomial_ranks(sample_size)
    assert ranks is not None  # u exists exactly from n = 72 on
    return (19 * sample_size + 19) // 20, ranks[0], ranks[1]


def _milliseconds(value: int | float) -> float:
    return float(value) + 0.0  # + 0.0 turns -0.0 into 0.0


def _p95(values: list[int | float]) -> tuple[float, float, float]:
    """Return ``(p95, ci_lower, ci_upper)`` of ``values``."""
    ordered = sorted(values)
    point, lower, upper = latency_p95_ranks(len(ordered))
    return (
        _milliseconds(ordered[point - 1]),
        _milliseconds(ordered[lower - 1]),
        _milliseconds(ordered[upper - 1]),
    )


# ---------------------------------------------------------------------------
# Kinds

_Cases = list[dict[str, Any]]


def _count_builder(
    outcome: str,
) -> Callable[[str, dict[str, Any], _Cases, tuple[str, ...]], MetricEvidence]:
    def build(
        metric: str, document: dict[str, Any], cases: _Cases, limitations: tuple[str, ...]
    ) -> MetricEvidence:
        if "statistics" in document and document["statistics"] is not None:
            raise _refuse("unexpected_statistics")
        return count_evidence(
            metric,
            [(case["slice"], case[outcome]) for case in cases],
            envelope=document,
            limitations=limitations,
        )

    return build


def _agreement(
    metric: str, document: dict[str, Any], cases: _Cases, limitations: tuple[str, ...]
) -> MetricEvidence:
    statistics = document["statistics"]
    statistics = _fields(statistics, _STATISTICS_KEYS)
    if not _is_member(statistics["method"], (AGREEMENT_METHOD,)):
        raise _refuse("invalid_statistical_method")
    sizes: dict[str, int] = {}
    for case in cases:
        sizes[case["slice"]] = sizes.get(case["slice"], 0) + 1
    per_slice = statistics["slices"]
    _fields(per_slice, sizes)
    value, lower, upper = _interval(statistics["overall"])
    slices = []
    for name in sorted(sizes):
        slice_value, slice_lower, slice_upper = _interval(per_slice[name])
        slices.append(
            SliceEvidence(
                slice_ref=name,
                value=slice_value,
                sample_size=sizes[name],
                ci_lower=slice_lower,
                ci_upper=slice_upper,
            )
        )
    return MetricEvidence(
        metric=metric,
        value=value,
        sample_size=len(cases),
        evidence_digest=digest_openmed(document),
        slices=tuple(slices),
        limitations=limitations,
        ci_lower=lower,
        ci_upper=upper,
    )


def _latency(
    metric: str, document: dict[str, Any], cases: _Cases, limitations: tuple[str, ...]
) -> MetricEvidence:
    by_slice: dict[str, list[int | float]] = {}
    for case in cases:
        by_slice.setdefault(case["slice"], []).append(case["latency_ms"])
    if len(cases) < LATENCY_MIN_OBSERVATIONS or any(
        len(values) < LATENCY_MIN_OBSERVATIONS for values in by_slice.values()
    ):
        raise _refuse("insufficient_sample")
    slices = []
    for name in sorted(by_slice):
        slice_value, slice_lower, slice_upper = _p95(by_slice[name])
        slices.append(
            SliceEvidence(
                slice_ref=name,
                value=slice_value,
                sample_size=len(by_slice[name]),
                ci_lower=slice_lower,
                ci_upper=slice_upper,
            )
        )
    value, lower, upper = _p95([case["latency_ms"] for case in cases])
    return MetricEvidence(
        metric=metric,
        value=value,
        sample_size=len(cases),
        evidence_digest=digest_openmed(document),
        slices=tuple(slices),
        limitations=limitations,
        ci_lower=lower,
        ci_upper=upper,
    )


@dataclass(frozen=True, slots=True)
class _Kind:
    schema: str
    top_keys: frozenset[str]
    case_keys: frozenset[str]
    outcome: str | None
    outcome_check: Callable[[object], bool]
    outcome_code: str
    build: Callable[[str, dict[str, Any], _Cases, tuple[str, ...]], MetricEvidence]


_COUNT_CASE_KEYS: Final = frozenset({"case_digest", "slice", "success"})
_KINDS: Final[dict[str, _Kind]] = {
    "replay": _Kind(
        JSON_SOURCE_SCHEMA,
        _OPENMED_TOP_KEYS,
        _COUNT_CASE_KEYS,
        "success",
        _is_bool,
        "invalid_outcome",
        _count_builder("success"),
    ),
    "reference_server": _Kind(
        JSON_SOURCE_SCHEMA,
        _OPENMED_TOP_KEYS,
        _COUNT_CASE_KEYS,
        "success",
        _is_bool,
        "invalid_outcome",
        _count_builder("success"),
    ),
    "clinician_agreement": _Kind(
        JSON_SOURCE_SCHEMA,
        _OPENMED_TOP_KEYS,
        frozenset({"case_digest", "slice"}),
        None,
        _is_bool,
        "invalid_outcome",
        _agreement,
    ),
    "evidence_completeness": _Kind(
        GATE_SOURCE_SCHEMA,
        _SEALEVAL_TOP_KEYS,
        frozenset({"case_digest", "slice", "complete"}),
        "complete",
        _is_bool,
        "invalid_outcome",
        _count_builder("complete"),
    ),
    "workflow_latency": _Kind(
        GATE_SOURCE_SCHEMA,
        _SEALEVAL_TOP_KEYS,
        frozenset({"case_digest", "slice", "latency_ms"}),
        "latency_ms",
        _is_latency,
        "invalid_latency",
        _latency,
    ),
}


def _document(serialized: object, expected_kind: str, kind: _Kind) -> dict[str, Any]:
    """Parse the report and check its envelope: fields, schema and kind, status, provenance."""
    if not isinstance(serialized, str):
        raise _refuse("invalid_json")
    document: dict[str, Any] = _fields(
        _parse_json(serialized, lax=kind.schema == JSON_SOURCE_SCHEMA), kind.top_keys
    )
    if document["schema_version"] != kind.schema or document["kind"] != expected_kind:
        raise _refuse("unsupported_source")
    if document["status"] != "completed":
        raise _refuse("failed_run")
    if not _is_bool(document["synthetic"]) or not _is_member(document["corpus"], _CORPORA):
        raise _refuse("invalid_provenance")
    return document


def _cases(
    document: dict[str, Any], expected_kind: str, kind: _Kind, expected_case_digests: object
) -> _Cases:
    """Check the cases against the inventory, their slices and their outcomes."""
    inventory = case_inventory(expected_case_digests)
    cases = document["cases"]
    if type(cases) is not list:
        raise _refuse("invalid_cases")
    if not all(type(case) is dict and set(case) == kind.case_keys for case in cases):
        raise _refuse("invalid_fields")
    if case_inventory([case["case_digest"] for case in cases]) != inventory:
        raise _refuse("incomplete_run")
    allowed = SOURCE_SLICES[expected_kind]
    for case in cases:
        if not _is_member(case["slice"], allowed):
            raise _refuse("invalid_slice")
        if kind.outcome is not None and not kind.outcome_check(case[kind.outcome]):
            raise _refuse(kind.outcome_code)
    return cases


def _derive(
    serialized: object,
    expected_kind: object,
    expected_case_digests: object,
    kinds: tuple[str, ...],
) -> tuple[MetricEvidence, ...]:
    """Apply the checks in the specified order; return the evidence (or none)."""
    if serialized is None:
        return ()
    if not _is_member(expected_kind, kinds):
        raise _refuse("invalid_kind")
    assert isinstance(expected_kind, str)
    kind = _KINDS[expected_kind]
    document = _document(serialized, expected_kind, kind)
    cases = _cases(document, expected_kind, kind, expected_case_digests)
    limitations: tuple[str, ...] = ("host_supplied_report",)
    if document["synthetic"]:
        limitations += ("synthetic_only",)
    if document["corpus"] == "default":
        limitations += ("default_corpus",)
    return (kind.build(SOURCE_METRICS[expected_kind], document, cases, limitations),)


def _with_source_digest(
    evidence: tuple[MetricEvidence, ...], serialized: object
) -> tuple[tuple[MetricEvidence, ...], str | None]:
    if not evidence:
        return evidence, None
    assert isinstance(serialized, str)
    # An accepted report holds only closed-vocabulary strings and digests, so
    # its text is always valid Unicode and encodes to UTF-8.
    return evidence, digest_bytes(serialized.encode("utf-8"))


# ---------------------------------------------------------------------------
# Public API


def json_release_evidence(
    serialized: object, *, expected_kind: object, expected_case_digests: object
) -> tuple[MetricEvidence, ...]:
    """Turn an openmed JSON source report v1 into release evidence (openmed 3.1 compatible).

    Args:
        serialized: the report text, or ``None`` for an absent report.
        expected_kind: ``"replay"``, ``"reference_server"`` or ``"clinician_agreement"``.
        expected_case_digests: the pre-registered case digests (list or tuple).

    Returns:
        ``()`` for an absent report, else exactly one MetricEvidence.

    Raises:
        AgentReleaseAdapterError: the first failing check's bare code
            (``docs/gate-sources.md`` lists them in order).
    """
    return _derive(serialized, expected_kind, expected_case_digests, JSON_SOURCE_KINDS)


def json_release_evidence_with_source_digest(
    serialized: object, *, expected_kind: object, expected_case_digests: object
) -> tuple[tuple[MetricEvidence, ...], str | None]:
    """Like :func:`json_release_evidence`, also returning the sha256 of the text supplied.

    Returns:
        ``(evidence, raw_digest)``: ``raw_digest`` is ``sha256:<hex>`` of the
        UTF-8 bytes of ``serialized`` (``None`` for an absent report). It is
        not part of any wire document; ``evidence_digest`` still binds the
        parsed report.
    """
    evidence = json_release_evidence(
        serialized, expected_kind=expected_kind, expected_case_digests=expected_case_digests
    )
    return _with_source_digest(evidence, serialized)


def release_evidence_from_source(
    serialized: object, *, expected_kind: object, expected_case_digests: object
) -> tuple[MetricEvidence, ...]:
    """Turn a source report of any of the five kinds into release evidence.

    The three openmed kinds behave exactly as :func:`json_release_evidence`;
    ``"evidence_completeness"`` and ``"workflow_latency"`` read sealeval's
    ``sealeval.gate_source.v1`` format (``docs/gate-sources.md``).

    Raises:
        AgentReleaseAdapterError: the first failing check's bare code.
    """
    return _derive(serialized, expected_kind, expected_case_digests, SOURCE_KINDS)


def release_evidence_from_source_with_source_digest(
    serialized: object, *, expected_kind: object, expected_case_digests: object
) -> tuple[tuple[MetricEvidence, ...], str | None]:
    """Like :func:`release_evidence_from_source`, also returning the sha256 of the text."""
    evidence = release_evidence_from_source(
        serialized, expected_kind=expected_kind, expected_case_digests=expected_case_digests
    )
    return _with_source_digest(evidence, serialized)
