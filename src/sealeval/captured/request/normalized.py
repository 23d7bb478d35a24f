"""The normalized request: binding an authored request to its runs and policy, digests.

:func:`normalize_captured_request` binds an authored request to two loaded
runs and a policy; the result, :class:`NormalizedRequest`, drops every path,
so its digest (:func:`captured_request_digest`) is relocation-invariant, and
:func:`comparison_id` binds it to the run and policy digests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sealeval._validate import check_digest, thaw_json
from sealeval.canonical import digest_bytes, digest_invarlock, frozen_canonical
from sealeval.captured.case_set import validate_run_case_set
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import (
    ComparisonPolicy,
    parse_comparison_policy,
)
from sealeval.captured.request.authored import AuthoredRequest
from sealeval.captured.request.schema import (
    EXECUTION_MODE,
    IDENTITIES,
    OVERRIDES,
    SIDES,
    CapturedRequestError,
    check_authored,
    check_normalized,
    check_size_and_controls,
    freeze_request,
)
from sealeval.captured.run import (
    Run,
    RunHeader,
    run_from_document,
)
from sealeval.captured.run_facts import RunFacts

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
        check_digest(value, name, error=CapturedRequestError)
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
            document = check_normalized(self.document)
        except CapturedRunError as error:
            raise CapturedRequestError(error.code, "request") from None
        comparison = document["comparison"]
        data = frozen_canonical(document, error=CapturedRunError)
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
            raise CapturedRequestError("invalid_type", "side")
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
    return bool(
        frozen_canonical(left, error=CapturedRunError)
        == frozen_canonical(right, error=CapturedRunError)
    )


def _run_identities(header: RunHeader) -> dict[str, Any]:
    identity = header.service_identity
    return {
        "source": header.source.to_dict(),
        "run_id": header.run_id,
        "artifact_digest": header.artifact_digest,
        "score_provenance": {
            key: value.to_dict() for key, value in header.score_provenance.items()
        },
        "service_identity": None if identity is None else identity.to_dict(),
    }


def _check_declared(spec: Mapping[str, Any], where: str, run: Run | RunFacts) -> None:
    """Require a non-``invarlock`` side's declared identities to equal the run's."""
    if (
        any(member not in spec for member in ("source", "run_id", "artifact_digest"))
        or run.header.source_digest is None
    ):
        raise CapturedRequestError("identity_required", where)
    actual_values = _run_identities(run.header)
    for member in IDENTITIES:
        declared = spec.get(member, {} if member == "score_provenance" else None)
        if not _same(declared, actual_values[member]):
            raise CapturedRequestError("identity_mismatch", f"{where}.{member}")
    if "input_projection" in spec:
        configuration = spec["input_projection"]
        if isinstance(run, RunFacts):
            if not run.projections_equal(configuration):
                raise CapturedRequestError("projection_mismatch", f"{where}.input_projection")
            return
        for record in run.records:
            binding = record.projection
            if binding is None or not _same(binding.configuration.to_dict(), configuration):
                raise CapturedRequestError("projection_mismatch", f"{where}.input_projection")


def _check_case_set(run: Run | RunFacts, policy: ComparisonPolicy, where: str) -> None:
    pinned = policy.expected_case_set_digest
    if pinned is None:
        return
    try:
        if isinstance(run, RunFacts):
            matches = run.case_set_for(policy) == pinned
        else:
            validate_run_case_set(run, pinned)
            matches = True
    except CapturedRunError:
        matches = False
    if not matches:
        raise CapturedRequestError("case_set_mismatch", where)


def _normalize_side(
    spec: Mapping[str, Any],
    side: str,
    run: Run | RunFacts,
    policy: ComparisonPolicy,
) -> Any:
    where = f"comparison.{side}"
    actual = run.digest
    _check_case_set(run, policy, where)
    pinned = spec.get("expected_run_digest")
    if pinned is not None and pinned != actual:
        raise CapturedRequestError("run_digest_mismatch", f"{where}.expected_run_digest")
    if spec["adapter"] == "invarlock":
        for member in OVERRIDES:
            if member in spec:
                raise CapturedRequestError("identity_override", f"{where}.{member}")
    else:
        _check_declared(spec, where, run)
    normalized = {key: value for key, value in spec.items() if key != "path"}
    normalized["run_digest"] = actual
    return normalized


def normalize_captured_request(
    authored: AuthoredRequest | Mapping[str, Any],
    baseline: Run | RunFacts | Mapping[str, Any],
    subject: Run | RunFacts | Mapping[str, Any],
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
            raise CapturedRequestError("not_mapping", "request")
        try:
            document = freeze_request(authored)
        except CapturedRunError as error:
            raise CapturedRequestError(error.code, "request") from None
    check_size_and_controls(document)
    check_authored(document, full_identity=True)
    policy_value = (
        policy if isinstance(policy, ComparisonPolicy) else parse_comparison_policy(policy)
    )
    comparison = document["comparison"]
    metric = comparison.get("metric")
    if metric is not None and (
        len(policy_value.metrics) != 1 or policy_value.metrics[0].kind != metric
    ):
        raise CapturedRequestError("metric_mismatch", "comparison.metric")
    runs: dict[str, Run | RunFacts] = {
        side: value if isinstance(value, Run | RunFacts) else run_from_document(value)
        for side, value in (("baseline", baseline), ("subject", subject))
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
        raise CapturedRequestError("invalid_type", "request")
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
