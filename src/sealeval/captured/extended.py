"""The opt-in extended comparison: p-values, multiplicity, method 10, flips, "how many more".

Two sealeval contracts, never mixed into invarlock's documents (decision:
``docs/decisions/0007-comparison-policy-extension.md``):

* ``sealeval/comparison-policy-extension-v1`` — a separate, closed document
  bound to one reference policy by ``policy_digest``. The reference policy
  stays byte-identical (invarlock's schema is closed), so a run without an
  extension is exactly the reference's comparison.
* ``sealeval/extended-comparison-v1`` — the extended report, bound to the
  reference report by ``comparison_digest``. JSON Schema:
  ``contracts/sealeval.extended-comparison-v1.schema.json``.

:func:`extend_comparison` computes the reference report
(:func:`~sealeval.captured.comparison.compare_runs`, unchanged) and then, per
metric x scope: the p-value (exact McNemar for binary kinds, paired sign-flip
permutation otherwise), the adjusted p-value across the family of every
entry that reached an interval (``none`` | ``holm`` | ``benjamini_hochberg``),
the Newcombe (1998) method 10 interval when selected, the flips of binary
kinds (counts and the first K ids), the multiplicity-controlled decision and,
for ``insufficient_evidence``, about how many more paired cases the scope
needs. ``docs/statistics.md`` says what each number means for a release.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval._progress import Progress
from sealeval.canonical import decode, digest_bytes, encode_invarlock, is_digest
from sealeval.captured.comparison import (
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    ComparisonReport,
    RunSource,
    ScopeValues,
    compare_run_files,
    compare_runs,
    scope_values,
    scope_values_files,
)
from sealeval.captured.comparison.engine import decide
from sealeval.captured.comparison.pairing import as_run
from sealeval.captured.inference import (
    MCNEMAR_METHOD,
    METHOD10,
    MULTIPLICITY_METHODS,
    PERMUTATION_RESAMPLES,
    SIGN_FLIP_METHOD,
    adjust_p_values,
    flips,
    mcnemar_p_value,
    newcombe_method10_interval,
    sign_flip_p_value,
)
from sealeval.captured.intervals import PairedCounts
from sealeval.captured.planning import more_pairs_hint
from sealeval.captured.policy import ComparisonPolicy, parse_comparison_policy
from sealeval.captured.run import UNLIMITED, Limits, Run
from sealeval.errors import CapturedError

__all__ = [
    "EXTENDED_FORMAT",
    "EXTENSION_FORMAT",
    "MAX_FLIP_IDS",
    "ExtensionError",
    "PolicyExtension",
    "check_extension",
    "extend_comparison",
    "extend_comparison_files",
    "extend_report",
    "load_policy_extension",
    "parse_policy_extension",
]

EXTENSION_FORMAT: Final = "sealeval/comparison-policy-extension-v1"
EXTENDED_FORMAT: Final = "sealeval/extended-comparison-v1"
#: Most flip ids an extended report lists per entry and direction.
MAX_FLIP_IDS: Final = 1000
BINARY_INTERVALS: Final = ("reference", METHOD10)
REASON_UNCONFIRMED: Final = "regression not confirmed after multiplicity control"
REASON_MISSING_PREFIX: Final = "missing"
REASON_MINIMUM: Final = "minimum record count not met"
_MEMBERS: Final = (
    "format",
    "policy_digest",
    "multiplicity",
    "alpha",
    "binary_interval",
    "permutation_resamples",
    "flip_ids",
)
_MAX_EXTENSION_BYTES: Final = 65_536


class ExtensionError(CapturedError):
    """Refusal of a policy extension (fields are member names, never values)."""

    module = "sealeval.captured.extended"
    field_in_message = True
    codes = frozenset(
        {
            "invalid_document",
            "unknown_member",
            "missing_member",
            "invalid_value",
            "policy_mismatch",
            "report_mismatch",
        }
    )


@dataclass(frozen=True, slots=True)
class PolicyExtension:
    """A validated ``sealeval/comparison-policy-extension-v1`` document.

    Attributes:
        policy_digest: the reference policy it extends.
        multiplicity: ``none`` (default), ``holm`` or ``benjamini_hochberg``.
        alpha: family-wise error (Holm) or false discovery rate (BH) level; default 0.05.
        binary_interval: ``reference`` (default) or ``newcombe_1998_method10``.
        permutation_resamples: sign-flip resamples (default 9999, 99..1,000,000).
        flip_ids: flip ids listed per entry and direction (default 20, 0..1000).
        digest: SHA-256 of the extension's canonical bytes.
    """

    policy_digest: str
    multiplicity: str = "none"
    alpha: float = 0.05
    binary_interval: str = "reference"
    permutation_resamples: int = PERMUTATION_RESAMPLES
    flip_ids: int = 20
    digest: str = ""

    def __post_init__(self) -> None:
        """Refuse any value outside its documented range (field = member name)."""
        if type(self.policy_digest) is not str or not is_digest(self.policy_digest):
            raise ExtensionError("invalid_value", "policy_digest")
        if self.multiplicity not in MULTIPLICITY_METHODS:
            raise ExtensionError("invalid_value", "multiplicity")
        if type(self.alpha) is not float or not 0.0 < self.alpha < 0.5:
            raise ExtensionError("invalid_value", "alpha")
        if self.binary_interval not in BINARY_INTERVALS:
            raise ExtensionError("invalid_value", "binary_interval")
        resamples = self.permutation_resamples
        if type(resamples) is not int or not 99 <= resamples <= 1_000_000:
            raise ExtensionError("invalid_value", "permutation_resamples")
        if type(self.flip_ids) is not int or not 0 <= self.flip_ids <= MAX_FLIP_IDS:
            raise ExtensionError("invalid_value", "flip_ids")

    def to_dict(self) -> dict[str, Any]:
        """Return the extension document (every member explicit)."""
        return {
            "format": EXTENSION_FORMAT,
            "policy_digest": self.policy_digest,
            "multiplicity": self.multiplicity,
            "alpha": self.alpha,
            "binary_interval": self.binary_interval,
            "permutation_resamples": self.permutation_resamples,
            "flip_ids": self.flip_ids,
        }


def parse_policy_extension(document: object) -> PolicyExtension:
    """Validate an extension document (closed; unknown members refused)."""
    if not isinstance(document, Mapping):
        raise ExtensionError("invalid_document", "extension")
    for key in document:
        if key not in _MEMBERS:
            raise ExtensionError("unknown_member", "extension")
    for key in ("format", "policy_digest"):
        if key not in document:
            raise ExtensionError("missing_member", key)
    if document["format"] != EXTENSION_FORMAT:
        raise ExtensionError("invalid_value", "format")
    arguments = {key: document[key] for key in _MEMBERS[1:] if key in document}
    if "alpha" in arguments and type(arguments["alpha"]) is int:
        arguments["alpha"] = float(arguments["alpha"])
    extension = PolicyExtension(**arguments)
    canonical = encode_invarlock(extension.to_dict())
    return PolicyExtension(**arguments, digest=digest_bytes(canonical))


def load_policy_extension(data: bytes | bytearray | memoryview | str) -> PolicyExtension:
    """Strictly decode (:func:`sealeval.canonical.decode`) and validate an extension."""
    if len(data) > _MAX_EXTENSION_BYTES:
        raise ExtensionError("invalid_document", "extension")
    return parse_policy_extension(decode(data))


def _p_value(values: ScopeValues, extension: PolicyExtension) -> tuple[float, str]:
    usable = ~values.missing
    left = values.baseline[usable]
    right = values.subject[usable]
    if values.metric.is_binary:
        return mcnemar_p_value(PairedCounts.from_values(left, right)), MCNEMAR_METHOD
    seed = values.seed or "sealeval/unseeded"
    differences = right - left
    resamples = extension.permutation_resamples
    return sign_flip_p_value(differences, seed, resamples=resamples), SIGN_FLIP_METHOD


def _worse(entry_delta: float | None, values: ScopeValues) -> bool:
    if entry_delta is None:
        return False
    return entry_delta < 0 if values.metric.direction == "higher" else entry_delta > 0


def _more_pairs(
    row: Mapping[str, Any], values: ScopeValues, count: int, extension: PolicyExtension
) -> int | None:
    """Pairs still needed by an ``insufficient_evidence`` entry (None: more pairs won't help).

    Missing results are remedied by supplying them, not by more pairs.
    """
    if row["decision"] != "insufficient_evidence" or REASON_MISSING_PREFIX in " ".join(
        row["reasons"]
    ):
        return None
    hint = more_pairs_hint(values, method=extension.binary_interval) or 0
    if REASON_MINIMUM in row["reasons"]:
        hint = max(hint, values.metric.minimum_count - count)
    return hint if hint > 0 else None


def extend_comparison(
    *,
    baseline: Run | Mapping[str, Any],
    subject: Run | Mapping[str, Any],
    policy: ComparisonPolicy | Mapping[str, Any],
    extension: PolicyExtension,
    report: ComparisonReport | None = None,
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
) -> dict[str, Any]:
    """Return the ``sealeval/extended-comparison-v1`` document of two runs.

    ``report`` is the reference report when the caller already has it (else
    it is computed with the default decision order); its bindings must be
    these runs and this policy (``report_mismatch``). The extension must name
    this policy (``policy_mismatch``).
    """
    approved = policy if isinstance(policy, ComparisonPolicy) else parse_comparison_policy(policy)
    check_extension(extension, approved)
    baseline = as_run(baseline, "baseline")
    subject = as_run(subject, "subject")
    if report is not None and report.bindings.to_dict() != {
        "baseline": baseline.digest,
        "subject": subject.digest,
        "policy": approved.digest,
    }:
        raise ExtensionError("report_mismatch", "report")
    if report is None:
        report = compare_runs(
            baseline=baseline,
            subject=subject,
            policy=approved,
            max_bootstrap_draws=max_bootstrap_draws,
        )
    everything = scope_values(baseline=baseline, subject=subject, policy=approved)
    return extend_report(report=report, per_pair=everything, policy=approved, extension=extension)


def extend_comparison_files(
    *,
    baseline: RunSource,
    subject: RunSource,
    policy: ComparisonPolicy | Mapping[str, Any],
    extension: PolicyExtension,
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    decision_order: str = "reference",
    limits: Limits = UNLIMITED,
    progress: Progress | None = None,
    opener: Callable[[str], RunSource] | None = None,
) -> tuple[ComparisonReport, dict[str, Any]]:
    """:func:`extend_comparison` over two run *files*, with memory bounded by records.

    The reference report comes from
    :func:`~sealeval.captured.comparison.compare_run_files` and the per-pair
    values from :func:`~sealeval.captured.comparison.scope_values_files`
    (a second streamed pass): the per-record columns are held, never the
    records. Same document as :func:`extend_comparison` on the same runs;
    refusals are :func:`compare_run_files`'s first (a run file's first of
    all), then the extension's (``policy_mismatch``). Each file is read
    twice: a side whose second pass does not hash to the digest its first
    pass bound (a file rewritten in place between them) is refused
    ``unreadable`` (field ``baseline`` or ``subject``), nothing computed
    from it.

    Args:
        baseline: the baseline run: a path, or a binary handle at its first
            byte (then ``opener`` must give a fresh one for the second pass).
        subject: the subject run, same forms.
        policy: as :func:`extend_comparison`.
        extension: as :func:`extend_comparison`.
        max_bootstrap_draws: as :func:`compare_run_files`.
        decision_order: as :func:`compare_run_files`.
        limits: the run limits (records, bytes); none by default.
        progress: optional progress callback (counts and phases only).
        opener: given ``"baseline"`` or ``"subject"``, returns that side's
            source for the second pass (default: the paths again).

    Returns:
        The reference report and the ``sealeval/extended-comparison-v1`` document.
    """
    report = compare_run_files(
        baseline=baseline,
        subject=subject,
        policy=policy,
        max_bootstrap_draws=max_bootstrap_draws,
        decision_order=decision_order,
        limits=limits,
        progress=progress,
    )
    approved = policy if isinstance(policy, ComparisonPolicy) else parse_comparison_policy(policy)
    check_extension(extension, approved)
    sources = {"baseline": baseline, "subject": subject}
    again = opener if opener is not None else sources.__getitem__
    everything = scope_values_files(
        baseline=again("baseline"),
        subject=again("subject"),
        policy=approved,
        limits=limits,
        digests=report.bindings,  # a file rewritten between the passes is refused
    )
    return report, extend_report(
        report=report, per_pair=everything, policy=approved, extension=extension
    )


def check_extension(extension: PolicyExtension, approved: ComparisonPolicy) -> None:
    """Refuse anything but an extension naming ``approved`` (``policy_mismatch``)."""
    if not isinstance(extension, PolicyExtension):
        raise ExtensionError("invalid_document", "extension")
    if extension.policy_digest != approved.digest:
        raise ExtensionError("policy_mismatch", "policy_digest")


def extend_report(
    *,
    report: ComparisonReport,
    per_pair: tuple[ScopeValues, ...],
    policy: ComparisonPolicy,
    extension: PolicyExtension,
) -> dict[str, Any]:
    """Return the ``sealeval/extended-comparison-v1`` document of a report and its values.

    ``per_pair`` are the per-pair values of ``report``'s comparison
    (:func:`~sealeval.captured.comparison.scope_values` or
    :func:`~sealeval.captured.comparison.scope_values_files` on the same runs
    and policy, one per entry in the report's order). Nothing is read.
    """
    check_extension(extension, policy)
    if len(per_pair) != len(report.metrics) or report.bindings.policy != policy.digest:
        raise ExtensionError("report_mismatch", "report")
    approved = policy
    everything = per_pair
    rows: list[dict[str, Any]] = []
    tested: list[int] = []
    p_values: list[float] = []
    for position, (entry, values) in enumerate(zip(report.metrics, everything, strict=True)):
        row: dict[str, Any] = {
            "metric": entry.name,
            "slice": entry.slice,
            "reference_decision": entry.decision,
            "decision": entry.decision,
            "reasons": list(entry.reasons),
            "p_value": None,
            "p_method": None,
            "adjusted_p_value": None,
            "interval": None,
            "flips": None,
            "more_pairs": None,
        }
        if values.metric.is_binary:
            usable = ~values.missing
            ids = [item for item, keep in zip(values.ids, usable.tolist(), strict=True) if keep]
            row["flips"] = flips(
                ids, values.baseline[usable], values.subject[usable], extension.flip_ids
            ).to_dict()
        if entry.interval is not None and entry.subject_mean is not None:
            p_value, method = _p_value(values, extension)
            row["p_value"], row["p_method"] = p_value, method
            tested.append(position)
            p_values.append(p_value)
            if values.metric.is_binary and extension.binary_interval == METHOD10:
                usable = ~values.missing
                counts = PairedCounts.from_values(values.baseline[usable], values.subject[usable])
                interval = newcombe_method10_interval(counts)
                row["interval"] = {
                    "lower": interval.lower,
                    "upper": interval.upper,
                    "method": interval.method,
                }
                decision, reasons = decide(
                    values.metric, interval, entry.subject_mean, report.decision_order
                )
                row["decision"], row["reasons"] = decision, list(reasons)
        rows.append(row)
    adjusted = adjust_p_values(p_values, extension.multiplicity)
    for position, value in zip(tested, adjusted, strict=True):
        row = rows[position]
        row["adjusted_p_value"] = value
        only_bounds = all(
            reason != "subject mean fails absolute bounds" for reason in row["reasons"]
        )
        confirmed = value <= extension.alpha and _worse(
            report.metrics[position].delta, everything[position]
        )
        if (
            extension.multiplicity != "none"
            and row["decision"] == "regression"
            and only_bounds
            and not confirmed
        ):
            row["decision"] = "insufficient_evidence"
            row["reasons"] = [REASON_UNCONFIRMED]
    for row, values, entry in zip(rows, everything, report.metrics, strict=True):
        row["more_pairs"] = _more_pairs(row, values, entry.count, extension)
    decisions = {row["decision"] for row in rows}
    overall = next((d for d in ("regression", "insufficient_evidence") if d in decisions), "pass")
    for row in rows:
        for key in ("p_value", "adjusted_p_value"):
            if row[key] is not None and not math.isfinite(row[key]):
                raise ExtensionError("invalid_value", key)
    return {
        "format": EXTENDED_FORMAT,
        "comparison_digest": report.digest,
        "policy_digest": approved.digest,
        "extension_digest": extension.digest,
        "reference_decision": report.decision,
        "decision": overall,
        "multiplicity": {
            "method": extension.multiplicity,
            "alpha": extension.alpha,
            "family_size": len(tested),
        },
        "binary_interval": extension.binary_interval,
        "entries": rows,
    }
