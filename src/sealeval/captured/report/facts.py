"""Pack-level facts of a report: compared runs, identities, bindings, previews.

Shared by every output format and gathered once per render as a ``ReportView``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval._validate import thaw_json
from sealeval.canonical import pretty
from sealeval.captured.comparison import WIDTH_FIRST_RULE
from sealeval.captured.pack_reader import PACK_FORMAT, EvidencePack
from sealeval.captured.report.model import (
    DECISION_LABELS,
    MISSING_IDS_PREVIEW,
    UNAVAILABLE,
    ReportEntry,
    ReportError,
    VerificationStatus,
    check_consistency,
    check_verification,
    display_order,
)
from sealeval.captured.report.wording import count_text, display_name
from sealeval.captured.run import Run
from sealeval.captured.run_facts import RunFacts

# ---------------------------------------------------------------------------
# Pack-level facts (shared by every format)


def _hosted_identity(run: Run | RunFacts) -> str:
    identity = run.service_identity
    if identity is None:
        return f"Recorded run: {run.run_id}"
    if identity.observed_model is not None:
        return f"Observed model: {identity.observed_model} · Deployment: {identity.deployment}"
    return f"Requested model: {identity.requested_model} · Deployment: {identity.deployment}"


def _side_fields(run: Run | RunFacts) -> list[tuple[str, str]]:
    records = count_text(len(run))
    identity = run.service_identity
    if identity is None:
        return [
            ("Evaluator", f"{run.source.name} {run.source.version}"),
            ("Model revision", UNAVAILABLE),
            ("Capture role", UNAVAILABLE),
            ("Workflow", UNAVAILABLE),
            ("Dataset", UNAVAILABLE),
            ("Records", records),
            ("Effective message roles", UNAVAILABLE),
        ]
    window = identity.observation_window
    return [
        ("Provider", identity.provider),
        ("Service", identity.service),
        ("Deployment", identity.deployment),
        ("Requested model", identity.requested_model),
        ("Observed model", identity.observed_model or "Not exposed"),
        ("Exposed revision", identity.exposed_revision or "Not exposed"),
        ("Observation window", f"{window.started_at} → {window.ended_at}"),
        ("Service provenance", "Captured service declaration. Model weights are not identified."),
        ("Service harness", f"{identity.harness.name} {identity.harness.version}"),
        ("Records", records),
    ]


@dataclass(frozen=True, slots=True)
class ComparedRuns:
    """What was compared: the identity row, matching and additional fields, changes."""

    identity_label: str
    identity_state: str
    baseline_identity: str
    subject_identity: str
    matching: tuple[tuple[str, str], ...]
    additional: tuple[tuple[str, str], ...]
    changes: tuple[str, ...]


def _side_label(side: str, label: str) -> str:
    return f"{side} {label[:1].lower()}{label[1:]}"


def compared_runs(pack: EvidencePack) -> ComparedRuns:
    """Return what the two compared runs are: identity label and state, sides, recorded changes."""
    baseline, subject = pack.baseline, pack.subject
    hosted = [run.service_identity is not None for run in (baseline, subject)]
    if any(hosted):
        label = "Subject identity"
        identities = (_hosted_identity(baseline), _hosted_identity(subject))
    else:
        label = "Recorded run"
        identities = (baseline.run_id, subject.run_id)
    left, right = _side_fields(baseline), _side_fields(subject)
    right_map = dict(right)
    matching = tuple((key, value) for key, value in left if right_map.get(key) == value)
    matched = {key for key, _value in matching}
    additional = [("Evaluation mode", "Captured evaluator outputs")]
    if any(hosted):
        additional.append(
            (
                "Measurement scope",
                "Verification checks retained observations; it does not remeasure the service.",
            )
        )
    for side, fields in (("Baseline", left), ("Subject", right)):
        additional.extend(
            (_side_label(side, key), value) for key, value in fields if key not in matched
        )
    if hosted[0] != hosted[1]:
        model_note = (
            "The runs use different identity profiles: a model artifact and a hosted service. "
            "The service declaration does not identify model weights."
        )
    else:
        model_note = (
            "Model-key comparison is unavailable because recorded values are missing or mixed."
        )
    return ComparedRuns(
        identity_label=label,
        identity_state="Differs" if identities[0] != identities[1] else "Matches",
        baseline_identity=identities[0],
        subject_identity=identities[1],
        matching=matching,
        additional=tuple(additional),
        changes=(
            model_note,
            "Prompt comparison unavailable in this report projection: no complete, uniquely "
            "paired supported message view is available.",
        ),
    )


def checked_rows(
    pack: EvidencePack, verification: VerificationStatus | None
) -> tuple[tuple[str, str], ...]:
    """Return what was checked (the last row: the no-authority notice or the caller's status)."""
    if pack.signed:
        signing = (
            "Signed manifest verified. This rendering has not authenticated it against a "
            "recipient-owned key."
        )
    else:
        signing = "Unsigned local evidence; no signer authentication."
    if verification is None:
        independent = (
            "Not performed by report. Use invarlock verify with independently supplied inputs."
        )
    else:
        receipt = (
            "a signed verification receipt was checked by the caller"
            if verification.receipt_checked
            else "no verification receipt was checked"
        )
        independent = (
            f"Reported by the caller, not performed by report: {verification.label} "
            f"(verification status {verification.code}); {receipt}. This rendering confers no "
            "verification authority."
        )
    return (
        ("Pack format", PACK_FORMAT),
        ("Input checks", "Evidence structure and comparison bindings checked."),
        ("Signing", signing),
        ("Replay and scoring", "Scoring and replay were not performed by report."),
        ("Independent recipient verification", independent),
    )


WIDTH_FIRST_NOTE: Final = (
    f"{WIDTH_FIRST_RULE}: the interval width was checked before the regression bounds "
    "(sealeval's opt-in rule, not the reference's)."
)
NEXT_STEPS: Final = (
    "Review the recorded checks against the approved requirements.",
    "For a signed handoff, run invarlock verify with independent signer, policy, request and "
    "complete-run anchors and an external signed receipt.",
    "Use the comparison JSON and JUnit outputs in CI; preserve missing results and the original "
    "policy.",
)
_CONTEXT_LIMITATION: Final = (
    "Model and prompt context is evaluator-recorded provenance, not independent execution or "
    "model-identity attestation."
)


def pack_limitations(pack: EvidencePack) -> tuple[str, ...]:
    """Return the report's recorded limitations and the recorded-context limitation."""
    return (*pack.report["limitations"], _CONTEXT_LIMITATION)


def pack_identities(pack: EvidencePack) -> tuple[tuple[str, str], ...]:
    """Return the evidence identities as (label, value) rows: manifest, comparison, signer, runs."""
    rows = [
        ("Manifest", pack.manifest_digest),
        ("Comparison", pack.comparison_id),
        ("Evidence signer", pack.signing_key_fingerprint or "Unsigned local evidence"),
    ]
    for side, run in (("Baseline", pack.baseline), ("Subject", pack.subject)):
        rows.append((f"{side} run", run.run_id))
        rows.append((f"{side} run digest", pack.digest(side.lower())))
        identity = run.service_identity
        if identity is None:
            rows.append((f"{side} attributed artifact", run.evaluated_subject_digest))
        else:
            rows.append((f"{side} service identity", run.evaluated_subject_digest))
        rows.append((f"{side} evaluator", f"{run.source.name} {run.source.version}"))
        if identity is not None:
            rows.append((f"{side} service configuration", identity.configuration_digest))
            rows.append((f"{side} harness source", identity.harness.source_digest))
    bindings = pack.report["bindings"]
    rows.extend((f"{role.capitalize()} binding", bindings[role]) for role in sorted(bindings))
    return tuple(rows)


def identifier_rows(entries: Sequence[ReportEntry]) -> list[dict[str, Any]]:
    """Display names that differ from the recorded identifiers (display order, 1-based)."""
    rows: list[dict[str, Any]] = []
    for number, entry in enumerate(entries, 1):
        metric, scope = display_name(entry.name), display_name(entry.slice)
        if metric != entry.name or scope != entry.slice:
            rows.append(
                {
                    "display_metric": metric,
                    "display_scope": scope,
                    "metric": entry.name,
                    "result": number,
                    "scope": entry.slice,
                }
            )
    return rows


_PREVIEW_LIMITS: Final[Mapping[str, int]] = {"depth": 6, "nodes": 128, "string_characters": 256}
_ELLIPSIS: Final = "…"


def _preview_value(value: Any) -> tuple[Any, bool]:
    """Bound a JSON value for display: depth, node count and string length (``_PREVIEW_LIMITS``)."""
    budget = [_PREVIEW_LIMITS["nodes"]]
    truncated = [False]
    limit = _PREVIEW_LIMITS["string_characters"]

    def walk(item: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0 or depth > _PREVIEW_LIMITS["depth"]:
            truncated[0] = True
            return _ELLIPSIS
        if isinstance(item, str):
            if len(item) > limit:
                truncated[0] = True
                return item[:limit] + _ELLIPSIS
            return item
        if isinstance(item, Mapping):
            result: dict[str, Any] = {}
            for key in sorted(item):
                if budget[0] <= 0:
                    truncated[0] = True
                    result[_ELLIPSIS] = _ELLIPSIS
                    break
                shown = key if len(key) <= limit else key[:limit] + _ELLIPSIS
                truncated[0] = truncated[0] or shown != key
                result[shown] = walk(item[key], depth + 1)
            return result
        if isinstance(item, list | tuple):
            items: list[Any] = []
            for child in item:
                if budget[0] <= 0:
                    truncated[0] = True
                    items.append(_ELLIPSIS)
                    break
                items.append(walk(child, depth + 1))
            return items
        return item

    shown = walk(thaw_json(value), 1)
    return shown, truncated[0]


def preview_block(value: Any, note: str) -> dict[str, Any]:
    """Return a bounded preview of a JSON value with its limits and ``note``."""
    shown, truncated = _preview_value(value)
    preview: dict[str, Any] = {
        "limits": dict(_PREVIEW_LIMITS),
        "note": note,
        "preview_only": True,
        "text": pretty(shown),
    }
    if truncated:
        preview["truncated"] = True
    return preview


_POLICY_NOTE: Final = (
    "Display preview, not a replacement configuration. Full configuration remains in evidence "
    "under the original policy binding."
)
SERVICE_NOTE: Final = (
    "Full declared configuration remains in the captured run. Its digest identifies the "
    "declaration."
)


def policy_preview(pack: EvidencePack) -> dict[str, Any]:
    """Return the bound policy with each metric's configuration as a bounded preview."""
    document: dict[str, Any] = thaw_json(pack.policy.document)
    for metric in document["metrics"]:
        metric["configuration"] = preview_block(metric["configuration"], _POLICY_NOTE)
    return document


def exact_data(pack: EvidencePack) -> dict[str, Any]:
    """Return the comparison report's data with missing ids as a count and a preview."""
    document: dict[str, Any] = thaw_json(pack.report)
    for entry in document["metrics"]:
        missing = entry.pop("missing_ids")
        entry["missing_count"] = len(missing)
        entry["missing_ids_preview"] = missing[:MISSING_IDS_PREVIEW]
        entry["missing_ids_preview_is_complete"] = len(missing) <= MISSING_IDS_PREVIEW
    return document


def json_block(value: Any) -> list[str]:
    """Return a fenced Markdown JSON block (indented, sorted keys) as lines."""
    return ["```json", pretty(value), "```"]


@dataclass(frozen=True, slots=True)
class ReportView:
    """The pack-level facts one render reads: the pack, its entries, the caller's status."""

    pack: EvidencePack
    entries: tuple[ReportEntry, ...]  # display order
    verification: VerificationStatus | None

    @property
    def label(self) -> str:
        """Return the label of the recorded decision."""
        return DECISION_LABELS[self.pack.decision]


def report_view(pack: EvidencePack, verification: VerificationStatus | None) -> ReportView:
    """Check the pack and the caller's verification status; gather the facts of one render."""
    if not isinstance(pack, EvidencePack):
        raise ReportError("invalid_entry", "pack")
    entries = display_order(check_consistency(pack))
    check_verification(pack, verification)
    return ReportView(pack, entries, verification)
