"""Readable reports of captured evidence packs: Markdown, JUnit XML, HTML, JSON result.

Wire contract: ``33-report.md`` (consistency checks, outputs, JUnit XML,
Markdown, HTML, display order) and ``40-cli.md`` §3 of the invarlock
specification. See ``docs/reports.md``.

Everything here is a **pure, deterministic presentation** of a pack that
:func:`~sealeval.captured.pack_reader.read_evidence_pack` already examined:
the same pack always gives the same bytes, nothing is scored or replayed,
and no rendering confers verification authority (each one says so). A
verification outcome is shown only when the caller passes a
:class:`VerificationStatus` it obtained elsewhere (the verifier); the
renderers never verify anything themselves.

* :func:`check_consistency` — the checks of 33-report.md §1 (every metric
  entry matches the policy's metric x scope grid, exactly once, with the
  policy's kind, direction, unit, aggregation and scoring assurance; missing
  ids are record ids of the runs; no displayed decision contradicts a
  displayed check). Every renderer runs it first.
* :func:`render_markdown` — invarlock's Markdown, byte for byte on the
  reference's vectors (``--explain`` adds the fenced JSON appendices).
* :func:`render_junit` — invarlock's JUnit XML, byte for byte.
* :func:`render_html` — sealeval's own self-contained reviewer page (inline
  CSS, inline SVG forest plots, no scripts, no external resource).
* :func:`report_result` / :func:`encode_result` — the ``--json`` result.

Never echoed: record inputs, outputs, expected answers, errors, context and
metadata. The only record-derived strings shown are the missing ids of the
report (first 20 per entry), and only after checking they are ids of the runs.
"""

from __future__ import annotations

import html
import json
import math
import re
import string
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import WIDTH_FIRST_RULE
from sealeval.captured.errors import thaw_json
from sealeval.captured.pack_reader import DECISIONS, PACK_FORMAT, EvidencePack
from sealeval.captured.policy import PolicyMetric
from sealeval.captured.run import Run
from sealeval.captured.scorers import BINARY_KINDS, NLL_KIND, RECORDED_KIND
from sealeval.errors import CapturedError

__all__ = [
    "DECISION_LABELS",
    "MISSING_IDS_PREVIEW",
    "RESULT_FORMAT",
    "VERIFICATION_STATUSES",
    "ReportEntry",
    "ReportError",
    "VerificationStatus",
    "check_consistency",
    "display_name",
    "display_order",
    "encode_result",
    "explanation",
    "render_html",
    "render_junit",
    "render_markdown",
    "report_result",
]

#: ``format_version`` of the ``--json`` result.
RESULT_FORMAT: Final = "invarlock/evidence-report-v2"
#: Human label of each decision.
DECISION_LABELS: Final[Mapping[str, str]] = {
    "pass": "Policy satisfied",
    "regression": "Policy not met",
    "insufficient_evidence": "More evidence needed",
}
#: How many missing ids of one entry a report shows.
MISSING_IDS_PREVIEW: Final = 20
#: Verification statuses (32-verify.md §5) by name -> ``verification_status``.
VERIFICATION_STATUSES: Final[Mapping[str, int]] = {
    "pass": 0,
    "policy_fail": 7,
    "contract_failure": 4,
    "integrity_failure": 6,
}
_STATUS_LABELS: Final[Mapping[str, str]] = {
    "pass": "Verified: evidence integrity confirmed and the replayed decision is pass",
    "policy_fail": "Verified integrity, but the replayed decision does not satisfy the policy",
    "contract_failure": "Rejected: the pack does not meet the evidence-pack contract",
    "integrity_failure": "Rejected: evidence integrity could not be established",
}
_DISPLAY_RANK: Final[Mapping[str, int]] = {"regression": 0, "insufficient_evidence": 1, "pass": 2}
_UNAVAILABLE: Final = "Unavailable in recorded context"
_PASSED, _NOT_MET, _NOT_EVALUATED = "Passed", "Not met", "Unavailable"


class ReportError(CapturedError):
    """Refusal to render a report (the CLI exits with status 2)."""

    module = "sealeval.captured.report"
    codes = frozenset(
        {
            # consistency checks (33-report.md §1)
            "invalid_entry",
            "invalid_decision",
            "unknown_scope",
            "duplicate_entry",
            "policy_mismatch",
            "incomplete_grid",
            "unknown_missing_id",
            "contradictory_decision",
            "decision_mismatch",
            "unsupported_decision_rule",
            # the caller's verification status
            "invalid_verification_status",
            "verification_mismatch",
            # output destinations (33-report.md §2)
            "invalid_destination",
            "destination_exists",
            "destination_inside_pack",
            "destination_collision",
            "unsafe_destination",
            "write_failed",
        }
    )


def _fail(code: str, where: str | None = None) -> ReportError:
    return ReportError(code, where)


# ---------------------------------------------------------------------------
# The caller's verification status


@dataclass(frozen=True, slots=True)
class VerificationStatus:
    """A verification outcome obtained by the caller (never by the renderer).

    Attributes:
        status: one of :data:`VERIFICATION_STATUSES` — ``"pass"`` (status 0),
            ``"policy_fail"`` (7), ``"contract_failure"`` (4) or
            ``"integrity_failure"`` (6), the closed set of 32-verify.md §5.
        receipt_checked: whether the caller checked a signed verification
            receipt (32-verify.md §6) for this pack.
    """

    status: str
    receipt_checked: bool = False

    def __post_init__(self) -> None:
        """Refuse a status outside the closed set and a non-boolean flag."""
        if type(self.status) is not str or self.status not in VERIFICATION_STATUSES:
            raise _fail("invalid_verification_status", "verification.status")
        if type(self.receipt_checked) is not bool:
            raise _fail("invalid_verification_status", "verification.receipt_checked")

    @classmethod
    def from_code(cls, code: int, *, receipt_checked: bool = False) -> VerificationStatus:
        """Build from a receipt's ``verdict.verification_status`` (0, 7, 4 or 6)."""
        for name, value in VERIFICATION_STATUSES.items():
            if type(code) is int and code == value:
                return cls(name, receipt_checked)
        raise _fail("invalid_verification_status", "verification.status")

    @property
    def code(self) -> int:
        """The ``verification_status`` / exit code of this outcome."""
        return VERIFICATION_STATUSES[self.status]

    @property
    def label(self) -> str:
        """A human label of the outcome."""
        return _STATUS_LABELS[self.status]


def _check_verification(pack: EvidencePack, verification: VerificationStatus | None) -> None:
    """Refuse a caller-supplied outcome that the pack itself contradicts."""
    if verification is None:
        return
    if not isinstance(verification, VerificationStatus):
        raise _fail("invalid_verification_status", "verification")
    if verification.status in ("pass", "policy_fail"):
        # 32-verify.md §4-5: only a signed pack can verify, with the stored decision.
        wanted_pass = verification.status == "pass"
        if not pack.signed or (pack.decision == "pass") != wanted_pass:
            raise _fail("verification_mismatch", "verification.status")


# ---------------------------------------------------------------------------
# Typed, checked view of the report's metric entries


def _number(value: object) -> bool:
    """Whether ``value`` is an ``int`` or ``float`` representable as a finite binary64."""
    if type(value) not in (int, float):
        return False
    try:
        return math.isfinite(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond binary64
        return False


def _as_float(value: float) -> float:
    """``float(value)``, with integers beyond binary64 as infinities (display only)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


@dataclass(frozen=True, slots=True)
class _Interval:
    lower: float
    upper: float
    method: str
    mass: float
    replicates: int


@dataclass(frozen=True, slots=True)
class CheckRow:
    """One row of an entry's "Decision checks" table.

    Attributes:
        label: the check (``Complete paired results``, ``Allowed change``, …).
        observed: the observed value as displayed.
        required: the requirement as displayed.
        result: ``Passed``, ``Not met`` or ``Unavailable``.
        detail: a short explanation (HTML only), or ``""``.
    """

    label: str
    observed: str
    required: str
    result: str
    detail: str = ""


@dataclass(frozen=True, slots=True, repr=False)
class ReportEntry:
    """One checked metric entry of the stored report, with its policy metric.

    Attributes:
        position: the entry's index in the stored report.
        name: the metric name.
        slice: the scope (``overall`` or a slice name).
        decision: ``pass``, ``regression`` or ``insufficient_evidence``.
        reasons: the recorded reasons.
        count: pairs in the scope (missing included).
        missing_ids: the ids of the missing pairs (record ids of both runs).
        baseline_mean: the baseline mean, or ``None`` when not evaluated.
        subject_mean: the subject mean, or ``None``.
        delta: subject minus baseline mean, or ``None``.
        ratio: the NLL ratio (NLL entries), or ``None``.
        interval: the interval (lower, upper, method, mass, replicates), or ``None``.
        metric: the policy metric the entry belongs to.
    """

    position: int
    name: str
    slice: str
    decision: str
    reasons: tuple[str, ...]
    count: int
    missing_ids: tuple[str, ...]
    baseline_mean: float | None
    subject_mean: float | None
    delta: float | None
    ratio: float | None
    interval: _Interval | None
    metric: PolicyMetric

    def __repr__(self) -> str:
        """Show the position and decision only."""
        return f"ReportEntry(position={self.position}, decision={self.decision!r})"

    @property
    def usable(self) -> int:
        """Pairs with both results (``count`` minus the missing ones)."""
        return self.count - len(self.missing_ids)

    @property
    def evaluated(self) -> bool:
        """Whether means and an interval were computed."""
        return self.interval is not None

    @property
    def binary(self) -> bool:
        """Whether the metric is a binary kind (percentages, Newcombe interval)."""
        return self.metric.kind in BINARY_KINDS

    @property
    def nll(self) -> bool:
        """Whether the metric is the normalized-NLL ratio metric."""
        return self.metric.kind == NLL_KIND


def _text_member(document: Mapping[str, Any], member: str, where: str) -> str:
    value = document.get(member)
    if type(value) is not str:
        raise _fail("invalid_entry", f"{where}.{member}")
    return value


def _optional_number(document: Mapping[str, Any], member: str, where: str) -> float | None:
    value = document.get(member)
    if value is None:
        return None
    if not _number(value):
        raise _fail("invalid_entry", f"{where}.{member}")
    return float(value)


def _interval(value: object, where: str) -> _Interval | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _fail("invalid_entry", f"{where}.interval")
    lower, upper, mass = value.get("lower"), value.get("upper"), value.get("mass")
    method, replicates = value.get("method"), value.get("replicates")
    if not (_number(lower) and _number(upper) and _number(mass)) or type(method) is not str:
        raise _fail("invalid_entry", f"{where}.interval")
    if type(replicates) is not int or replicates < 0 or lower > upper:  # type: ignore[operator]
        raise _fail("invalid_entry", f"{where}.interval")
    return _Interval(float(lower), float(upper), method, float(mass), replicates)  # type: ignore[arg-type]


def _string_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(type(item) is str for item in value):
        raise _fail("invalid_entry", where)
    return tuple(value)


def _entry(
    position: int,
    document: object,
    metrics: Mapping[str, PolicyMetric],
    scopes: Sequence[str],
    run_ids: Mapping[str, int],
    *,
    width_first: bool,
) -> ReportEntry:
    where = f"report.metrics[{position}]"
    if not isinstance(document, Mapping):
        raise _fail("invalid_entry", where)
    name = _text_member(document, "name", where)
    decision = document.get("decision")
    if type(decision) is not str or decision not in DECISIONS:
        raise _fail("invalid_decision", f"{where}.decision")
    scope = _text_member(document, "slice", where)
    metric = metrics.get(name)
    if metric is None or scope not in scopes:
        raise _fail("unknown_scope", where)
    for member, expected in (
        ("kind", metric.kind),
        ("direction", metric.direction),
        ("unit", metric.unit),
        ("aggregation", metric.aggregation),
        ("scoring_assurance", metric.scoring_assurance),
    ):
        value = document.get(member)
        if type(value) is not str or value != expected:
            raise _fail("policy_mismatch", f"{where}.{member}")
    missing = _string_list(document.get("missing_ids"), f"{where}.missing_ids")
    if len(set(missing)) != len(missing):
        raise _fail("invalid_entry", f"{where}.missing_ids")
    if any(item not in run_ids for item in missing):
        raise _fail("unknown_missing_id", f"{where}.missing_ids")
    count = document.get("count")
    if type(count) is not int or count < len(missing):
        raise _fail("invalid_entry", f"{where}.count")
    entry = ReportEntry(
        position=position,
        name=name,
        slice=scope,
        decision=decision,
        reasons=_string_list(document.get("reasons"), f"{where}.reasons"),
        count=count,
        missing_ids=missing,
        baseline_mean=_optional_number(document, "baseline_mean", where),
        subject_mean=_optional_number(document, "subject_mean", where),
        delta=_optional_number(document, "delta", where),
        ratio=_optional_number(document, "ratio", where),
        interval=_interval(document.get("interval"), where),
        metric=metric,
    )
    means = (entry.baseline_mean, entry.subject_mean, entry.delta)
    if entry.evaluated:
        if None in means or (entry.nll and entry.ratio is None):
            raise _fail("invalid_entry", where)
    elif any(value is not None for value in (*means, entry.ratio)):
        raise _fail("invalid_entry", where)
    _check_decision(entry, where, width_first=width_first)
    return entry


def _bound_ok(entry: ReportEntry) -> bool:
    assert entry.interval is not None
    metric = entry.metric
    if entry.nll:
        return entry.interval.upper <= metric.ratio_max  # type: ignore[operator]
    limit = metric.maximum_regression
    if metric.direction == "higher":
        return entry.interval.lower >= -limit  # type: ignore[operator]
    return entry.interval.upper <= limit  # type: ignore[operator]


def _estimate_ok(entry: ReportEntry) -> bool:
    """Whether the point estimate itself is on the allowed side of the bound."""
    metric = entry.metric
    if entry.nll:
        return entry.ratio <= metric.ratio_max  # type: ignore[operator]
    limit = metric.maximum_regression
    if metric.direction == "higher":
        return entry.delta >= -limit  # type: ignore[operator]
    return entry.delta <= limit  # type: ignore[operator]


def _width_ok(entry: ReportEntry) -> bool:
    assert entry.interval is not None
    width = entry.interval.upper - entry.interval.lower
    return width <= entry.metric.maximum_interval_width


def _absolute_ok(entry: ReportEntry) -> tuple[bool, bool]:
    """(minimum met, maximum met) for the subject mean; ``True`` when not configured."""
    metric, mean = entry.metric, entry.subject_mean
    assert mean is not None
    low = metric.subject_minimum is None or mean >= metric.subject_minimum
    high = metric.subject_maximum is None or mean <= metric.subject_maximum
    return low, high


def _check_decision(entry: ReportEntry, where: str, *, width_first: bool) -> None:
    """Refuse a recorded decision that a displayed check contradicts (22-comparison.md §6).

    ``width_first``: the report declares sealeval's opt-in rule (width checked
    before the regression bounds).
    """
    if not entry.evaluated:
        blocked = bool(entry.missing_ids) or entry.count < entry.metric.minimum_count
        if entry.decision != "insufficient_evidence" or not blocked:
            raise _fail("contradictory_decision", f"{where}.decision")
        return
    if entry.missing_ids or entry.count < entry.metric.minimum_count:
        raise _fail("contradictory_decision", f"{where}.decision")
    if width_first and not _width_ok(entry):
        expected = "insufficient_evidence"
    elif not (_bound_ok(entry) and all(_absolute_ok(entry))):
        expected = "regression"
    elif not _width_ok(entry):
        expected = "insufficient_evidence"
    else:
        expected = "pass"
    if entry.decision != expected:
        raise _fail("contradictory_decision", f"{where}.decision")


def _overall(decisions: Iterable[str]) -> str:
    seen = set(decisions)
    for decision in ("regression", "insufficient_evidence"):
        if decision in seen:
            return decision
    return "pass"


def check_consistency(pack: EvidencePack) -> tuple[ReportEntry, ...]:
    """Run the consistency checks of 33-report.md §1 and return the entries in report order.

    Every entry must be an object with a string ``name``, a decision in
    {pass, regression, insufficient_evidence}, a ``(name, slice)`` of the
    policy's metric x scope grid (``overall`` + slice names) appearing once,
    the policy metric's ``kind``, ``direction``, ``unit``, ``aggregation`` and
    ``scoring_assurance``, and a list ``missing_ids`` of distinct record ids of
    the runs; the entries must cover the whole grid. No decision may
    contradict a displayed check (e.g. a "pass" whose bound is not met), and
    the report's overall decision must be the one its entries imply.

    Raises:
        ReportError: ``invalid_entry``, ``invalid_decision``, ``unknown_scope``,
            ``duplicate_entry``, ``policy_mismatch``, ``incomplete_grid``,
            ``unknown_missing_id``, ``contradictory_decision``,
            ``decision_mismatch`` (field ``report.…``).
    """
    policy = pack.policy
    metrics = {metric.name: metric for metric in policy.metrics}
    scopes = ("overall", *(piece.name for piece in policy.slices))
    rule = pack.report.get("decision_rule")
    if rule is not None and rule != WIDTH_FIRST_RULE:
        raise _fail("unsupported_decision_rule", "report.decision_rule")
    documents = pack.report["metrics"]
    entries: list[ReportEntry] = []
    seen: set[tuple[str, str]] = set()
    for position, document in enumerate(documents):
        entry = _entry(
            position, document, metrics, scopes, pack.baseline.index, width_first=rule is not None
        )
        key = (entry.name, entry.slice)
        if key in seen:
            raise _fail("duplicate_entry", f"report.metrics[{position}]")
        seen.add(key)
        entries.append(entry)
    if len(seen) != len(metrics) * len(scopes):
        raise _fail("incomplete_grid", "report.metrics")
    if pack.report["decision"] != _overall(entry.decision for entry in entries):
        raise _fail("decision_mismatch", "report.decision")
    return tuple(entries)


def display_order(entries: Iterable[ReportEntry]) -> tuple[ReportEntry, ...]:
    """Group entries by decision (regression, insufficient_evidence, pass), keeping report order."""
    return tuple(sorted(entries, key=lambda entry: (_DISPLAY_RANK[entry.decision], entry.position)))


# ---------------------------------------------------------------------------
# Display conventions

_ACRONYMS: Final[Mapping[str, str]] = {"f1": "F1", "nll": "NLL"}


def display_name(name: str) -> str:
    """Return the display form of a metric or scope name.

    A single word is kept as recorded (known abbreviations such as ``f1`` and
    ``nll`` are upper-cased); a name of several words joined by ``-`` or ``_``
    becomes words separated by spaces with the first one capitalized
    (``topic-geo`` → ``Topic geo``). Names whose display form differs are
    listed with their recorded identifiers in every report.
    """
    parts = re.split(r"[-_]", name)
    if len(parts) == 1:
        return _ACRONYMS.get(name.lower(), name)
    if not all(parts):
        return name
    words = [_ACRONYMS.get(part.lower(), part) for part in parts]
    if words[0] == parts[0]:
        words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words)


def _g(value: float) -> str:
    """Four significant digits (``format(x, ".4g")``), without a negative zero."""
    text = format(_as_float(value), ".4g")
    return "0" if text == "-0" else text


def _signed(value: float) -> str:
    return "0" if value == 0 else format(_as_float(value), "+.4g")


def _count(value: int) -> str:
    return f"{value:,}"


def _percent(value: float) -> str:
    return _g(_as_float(value) * 100.0) + "%"


_TERMINAL_CONTROLS: Final = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_XML_INVALID: Final = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _terminal_safe(text: str) -> str:
    r"""Show terminal control characters (except LF) as ``\uXXXX``."""
    return _TERMINAL_CONTROLS.sub(_escape_char, text)


def _one_line(text: str) -> str:
    r"""Return dynamic text on one line: control characters (LF included) as ``\uXXXX``."""
    return _terminal_safe(text.replace("\n", "\\u000a"))


# Rich text: a sequence of (text, dynamic) pieces. Fixed wording and dynamic
# values are escaped differently in Markdown and emphasized differently in HTML.
_Piece = tuple[str, bool]
_Rich = tuple[_Piece, ...]
_FORMATTER: Final = string.Formatter()


def _rich(template: str, /, **values: str) -> _Rich:
    pieces: list[_Piece] = []
    for literal, field_name, _spec, _conversion in _FORMATTER.parse(template):
        if literal:
            pieces.append((literal, False))
        if field_name is not None:
            pieces.append((values[field_name], True))
    return tuple(pieces)


def _plain(text: _Rich) -> str:
    return "".join(piece for piece, _dynamic in text)


_MD_FIXED: Final = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "(": "&#40;", ")": "&#41;"}
)
_MD_DYNAMIC: Final = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "(": "&#40;",
        ")": "&#41;",
        "[": "&#91;",
        "]": "&#93;",
        "{": "&#123;",
        "}": "&#125;",
        "*": "&#42;",
        "_": "&#95;",
        "`": "&#96;",
        "|": "&#124;",
        "#": "&#35;",
        "!": "&#33;",
        "\\": "&#92;",
        "~": "&#126;",
    }
)


def _md_text(text: str) -> str:
    r"""Escape dynamic text for Markdown (entities; control characters as ``\uXXXX``)."""
    return _one_line(text.translate(_MD_DYNAMIC))


def _md(text: _Rich | str) -> str:
    if isinstance(text, str):
        return text.translate(_MD_FIXED)
    return "".join(
        _md_text(piece) if dynamic else piece.translate(_MD_FIXED) for piece, dynamic in text
    )


def _h(text: str) -> str:
    r"""Escape text for HTML (control characters as ``\uXXXX``)."""
    return html.escape(_one_line(text), quote=True)


def _h_json(value: Any) -> str:
    r"""Return indented JSON (sorted keys) escaped for HTML, terminal controls as ``\uXXXX``."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return html.escape(_terminal_safe(text), quote=True)


def _h_rich(text: _Rich) -> str:
    return "".join(
        f"<strong>{_h(piece)}</strong>" if dynamic else _h(piece) for piece, dynamic in text
    )


# ---------------------------------------------------------------------------
# What an entry shows (shared by every format)


def _unit(entry: ReportEntry) -> str:
    """Return the unit of changes and intervals: ``pp``, ``ratio`` or the metric's unit."""
    if entry.binary:
        return "pp"
    if entry.nll:
        return "ratio"
    return entry.metric.unit


def _scaled(entry: ReportEntry, value: float) -> float:
    return _as_float(value) * 100.0 if entry.binary else _as_float(value)


def _with_unit(entry: ReportEntry, value: float) -> str:
    return f"{_g(_scaled(entry, value))} {_unit(entry)}"


def _level(value: float) -> str:
    return _percent(value)


def _mean_text(entry: ReportEntry, value: float | None) -> str:
    if value is None:
        return "Unavailable"
    if entry.binary:
        return _percent(value)
    if entry.nll:
        return f"{_g(value)} nats / byte"
    return f"{_g(value)} {entry.metric.unit}"


def _change_text(entry: ReportEntry) -> str:
    if not entry.evaluated:
        return "Unavailable"
    if entry.nll:
        assert entry.ratio is not None
        return f"{_g(entry.ratio)} ratio"
    assert entry.delta is not None
    return f"{_signed(_scaled(entry, entry.delta))} {_unit(entry)}"


def _estimate(entry: ReportEntry) -> float:
    value = entry.ratio if entry.nll else entry.delta
    assert value is not None
    return _scaled(entry, value)


def _threshold(entry: ReportEntry) -> float:
    metric = entry.metric
    if entry.nll:
        return _as_float(metric.ratio_max)  # type: ignore[arg-type]
    limit = _as_float(metric.maximum_regression)  # type: ignore[arg-type]
    return _scaled(entry, -limit if metric.direction == "higher" else limit)


def _higher(entry: ReportEntry) -> bool:
    return entry.metric.direction == "higher" and not entry.nll


def _matched(entry: ReportEntry, mean: float | None) -> int:
    assert mean is not None
    return round(mean * entry.usable)


_PASSED_TEXT: Final = (
    "The uncertainty interval is within the required range, and the other configured checks passed."
)
_MISSING_TEXT: Final = "Some included cases are missing a baseline or subject result."
_COUNT_TEXT: Final = "There are fewer paired records than the policy requires."
_OUTSIDE_TEXT: Final = "The observed change was outside the range allowed by the policy."
_WITHIN_TEXT: Final = (
    "The observed change was within the policy limit, but its uncertainty interval extended "
    "beyond it."
)
_WIDE_TEXT: Final = "The uncertainty interval is wider than the policy permits."
_ABSOLUTE_TEXT: Final = "The subject score is outside the absolute bounds of the policy."
_NO_MINIMUM: Final = "No absolute minimum score is required by this policy."


def explanation(entry: ReportEntry) -> str:
    """Return the entry's explanation sentence(s) (also the JUnit message)."""
    if entry.decision == "pass":
        return _PASSED_TEXT
    if not entry.evaluated:
        return _MISSING_TEXT if entry.missing_ids else _COUNT_TEXT
    sentences = []
    if entry.decision == "insufficient_evidence":  # too wide (width-first rule: first)
        sentences.append(_WIDE_TEXT)
    if not _bound_ok(entry):
        sentences.append(_WITHIN_TEXT if _estimate_ok(entry) else _OUTSIDE_TEXT)
    if not _width_ok(entry) and entry.decision != "insufficient_evidence":
        sentences.append(_WIDE_TEXT)
    if not all(_absolute_ok(entry)):
        sentences.append(_ABSOLUTE_TEXT)
    return " ".join(sentences)


def _result(ok: bool) -> str:
    return _PASSED if ok else _NOT_MET


def _checks(entry: ReportEntry) -> tuple[CheckRow, ...]:
    metric = entry.metric
    rows = [
        CheckRow(
            "Complete paired results",
            f"{_count(entry.usable)} of {_count(entry.count)}",
            "All included pairs",
            _result(not entry.missing_ids),
            "Missing results are retained; they cannot be dropped to obtain a pass.",
        ),
        CheckRow(
            "Included pair count",
            _count(entry.count),
            f">= {_count(metric.minimum_count)}",
            _result(entry.count >= metric.minimum_count),
        ),
    ]
    if not entry.evaluated:
        rows.append(
            CheckRow(
                "Score and uncertainty",
                "Not evaluated",
                "Complete results and sufficient count",
                _NOT_EVALUATED,
            )
        )
        return tuple(rows)
    interval = entry.interval
    assert interval is not None
    unit = _unit(entry)
    threshold = _g(_threshold(entry))
    if entry.nll:
        rows.append(
            CheckRow(
                "Maximum NLL ratio",
                f"{_g(interval.upper)} ratio",
                f"<= {threshold} ratio",
                _result(_bound_ok(entry)),
                "Uses the interval bound, not just the observed ratio.",
            )
        )
    else:
        bound = interval.lower if _higher(entry) else interval.upper
        relation = ">=" if _higher(entry) else "<="
        rows.append(
            CheckRow(
                "Allowed change",
                _with_unit(entry, bound),
                f"{relation} {threshold} {unit}",
                _result(_bound_ok(entry)),
                "Uses the interval bound, not just the observed change.",
            )
        )
    rows.append(
        CheckRow(
            "Interval width",
            _with_unit(entry, interval.upper - interval.lower),
            f"<= {_with_unit(entry, metric.maximum_interval_width)}",
            _result(_width_ok(entry)),
        )
    )
    low, high = _absolute_ok(entry)
    for label, limit, relation, ok in (
        ("Subject minimum", metric.subject_minimum, ">=", low),
        ("Subject maximum", metric.subject_maximum, "<=", high),
    ):
        if limit is not None:
            rows.append(
                CheckRow(
                    label,
                    _mean_text(entry, entry.subject_mean),
                    f"{relation} {_mean_text(entry, limit)}",
                    _result(ok),
                )
            )
    return tuple(rows)


def _scoring_basis(entry: ReportEntry) -> str:
    if entry.nll:
        return (
            "Recorded scoring basis: captured reference-continuation likelihood facts; NLL "
            "means, ratio and interval were recomputed when the comparison was created. Model "
            "execution and the supplied likelihood facts are not independently established."
        )
    if entry.metric.kind == RECORDED_KIND:
        return (
            "Recorded scoring basis: external measurements or judgments, aggregated when the "
            "comparison was created."
        )
    return (
        "Recorded scoring basis: expected and output values, scored when the comparison was "
        "created."
    )


def _notes(entry: ReportEntry) -> tuple[_Rich, ...]:
    notes: list[_Rich] = [
        _rich(
            "Higher values are better."
            if entry.metric.direction == "higher"
            else "Lower values are better."
        ),
        _rich(_scoring_basis(entry)),
        _rich(
            "{usable} usable pairs; {missing} missing results; {count} included pairs. Counts "
            "in overlapping slices must not be added together.",
            usable=_count(entry.usable),
            missing=_count(len(entry.missing_ids)),
            count=_count(entry.count),
        ),
    ]
    if entry.binary and entry.evaluated:
        notes.append(
            _rich(
                "Matches: baseline {b} of {n}; subject {s} of {n}.",
                b=_count(_matched(entry, entry.baseline_mean)),
                s=_count(_matched(entry, entry.subject_mean)),
                n=_count(entry.usable),
            )
        )
    if entry.binary and entry.metric.subject_minimum is None:
        notes.append(_rich(_NO_MINIMUM))
    return tuple(notes)


def _method_label(entry: ReportEntry) -> str:
    return "Newcombe hybrid score" if entry.binary else "Paired percentile resampling"


def _interval_line(entry: ReportEntry) -> _Rich:
    interval = entry.interval
    assert interval is not None
    values = {
        "level": _level(interval.mass),
        "method": _method_label(entry),
        "lo": _g(_scaled(entry, interval.lower)),
        "hi": _g(_scaled(entry, interval.upper)),
        "unit": _unit(entry),
    }
    if entry.binary:
        template = "Paired {level} confidence interval ({method}): [{lo}, {hi}] {unit}."
    elif entry.nll:
        template = (
            "{level} paired-schedule ratio resampling interval ({method}): [{lo}, {hi}] {unit}."
        )
    else:
        template = "{level} paired-schedule resampling interval ({method}): [{lo}, {hi}] {unit}."
    return _rich(template, **values)


_READING_INTERVAL: Final = (
    "The bar shows uncertainty around that change. Its left endpoint is the lower bound; its "
    "right endpoint is the upper bound. The interval level does not tell you how often model "
    "runs would pass or fail the policy."
)
_READING_NO_CHANGE: Final = (
    "The dashed line marks no change. An interval crossing it includes changes in either "
    "direction. A worse observed score describes this run; policy rejection alone does not "
    "prove worse performance beyond these cases."
)


def _reading(entry: ReportEntry) -> tuple[tuple[str, str], ...]:
    change = "The marker shows the observed change between subject and baseline."
    if entry.binary:
        change += (
            " A change in percentage points (pp) is the subject percentage minus the baseline "
            "percentage."
        )
    elif entry.nll:
        change += " A ratio divides the subject value by the baseline value; 1 means no change."
    if _higher(entry):
        rule = (
            "The paired lower bound (left endpoint) must be at least the policy minimum. The "
            "whole interval must lie on the allowed side of the threshold for this bound check "
            "to pass."
        )
    else:
        rule = (
            "The upper bound (right endpoint) must be at most the policy maximum. The whole "
            "interval must lie on the allowed side of the threshold for this bound check to pass."
        )
    return (
        ("Change", change),
        ("Interval", _READING_INTERVAL),
        ("Policy rule", rule),
        ("No change", _READING_NO_CHANGE),
    )


def _calculation(entry: ReportEntry) -> tuple[_Rich, ...]:
    interval = entry.interval
    assert interval is not None
    level = _level(interval.mass)
    usable = _count(entry.usable)
    if entry.binary:
        return (
            _rich(
                "Baseline and subject are paired on the same {n} cases in this scope. Newcombe "
                "hybrid score uses their paired match outcomes to form a nominal {level} "
                "confidence interval for the accuracy change.",
                n=usable,
                level=level,
            ),
            _rich(
                "Change is subject accuracy minus baseline accuracy in percentage points, not "
                "relative percent change. The confidence level describes the interval method, "
                "not the share of correct answers."
            ),
            _rich(
                "Each metric and scope has its own interval; these intervals do not provide a "
                "simultaneous confidence guarantee across all results or establish a "
                "representative production sample."
            ),
        )
    if entry.nll:
        described = _rich(
            "The central {level} of that distribution describes the subject-to-baseline mean "
            "NLL ratio. Each side's NLL uses nats per expected UTF-8 byte.",
            level=level,
        )
    else:
        described = _rich(
            "The central {level} of that distribution describes subject-minus-baseline mean "
            "score change in {unit} units.",
            level=level,
            unit=entry.metric.unit,
        )
    return (
        _rich(
            "The declared percentile method resamples the same {n} paired records in this "
            "scope with replacement, keeping each baseline and subject result together. Its "
            "retained resampling count is {replicates}.",
            n=usable,
            replicates=_count(interval.replicates),
        ),
        described,
        _rich(
            "This is a fixed-schedule resampling interval, not a population confidence "
            "interval. Separate metric and scope intervals do not give a simultaneous "
            "confidence guarantee or establish a representative production sample."
        ),
    )


def _absolute_sentences(entry: ReportEntry) -> str:
    metric = entry.metric
    parts = []
    if metric.subject_minimum is not None:
        parts.append(
            f" The policy also requires a subject score of at least "
            f"{_mean_text(entry, metric.subject_minimum)}."
        )
    elif entry.binary:
        parts.append(" " + _NO_MINIMUM)
    if metric.subject_maximum is not None:
        parts.append(
            f" The policy also requires a subject score of at most "
            f"{_mean_text(entry, metric.subject_maximum)}."
        )
    return "".join(parts)


def _entry_summary(entry: ReportEntry) -> _Rich:
    """Return the summary paragraph of a report with a single metric entry."""
    name = display_name(entry.name)
    if not entry.evaluated:
        return _rich(
            explanation(entry) + " Baseline and subject scores for {name} are unavailable "
            "across {usable} usable pairs. No change estimate or uncertainty interval is "
            "available. The policy requires at least {minimum} included pairs."
            + _absolute_sentences(entry),
            name=name,
            usable=_count(entry.usable),
            minimum=_count(entry.metric.minimum_count),
        )
    interval = entry.interval
    assert interval is not None
    side = "at or above" if _higher(entry) else "at or below"
    return _rich(
        explanation(entry) + " Across {usable} usable pairs, the subject's {name} was "
        "{subject}, compared with {baseline} for the baseline, a change of {change}. The "
        "{level} interval for the change runs from {lo} to {hi} {unit}. The policy requires "
        "the interval to stay " + side + " {threshold} {unit}." + _absolute_sentences(entry),
        usable=_count(entry.usable),
        name=name,
        subject=_mean_text(entry, entry.subject_mean),
        baseline=_mean_text(entry, entry.baseline_mean),
        change=_change_text(entry),
        level=_level(interval.mass),
        lo=_g(_scaled(entry, interval.lower)),
        hi=_g(_scaled(entry, interval.upper)),
        unit=_unit(entry),
        threshold=_g(_threshold(entry)),
    )


def _summary(entries: Sequence[ReportEntry]) -> _Rich:
    """Return the decision summary paragraph (entries in display order)."""
    if len(entries) == 1:
        return _entry_summary(entries[0])
    passed = sum(entry.decision == "pass" for entry in entries)
    failed = sum(entry.decision == "regression" for entry in entries)
    needed = len(entries) - passed - failed
    counts = _rich(
        "{total} metric / scope results: {passed} passed, {failed} did not meet policy, and "
        "{needed} " + ("needs" if needed == 1 else "need") + " more evidence. Each result "
        "applies to its recorded scope; overlapping slice counts must not be added together.",
        total=_count(len(entries)),
        passed=_count(passed),
        failed=_count(failed),
        needed=_count(needed),
    )
    first = entries[0]
    if first.decision == "pass":
        return counts
    prefix = _rich(
        "{metric} ({scope}): ",
        metric=display_name(first.name),
        scope=display_name(first.slice),
    )
    return (*prefix, (explanation(first) + " ", False), *counts)


# ---------------------------------------------------------------------------
# Pack-level facts (shared by every format)


def _hosted_identity(run: Run) -> str:
    identity = run.service_identity
    if identity is None:
        return f"Recorded run: {run.run_id}"
    if identity.observed_model is not None:
        return f"Observed model: {identity.observed_model} · Deployment: {identity.deployment}"
    return f"Requested model: {identity.requested_model} · Deployment: {identity.deployment}"


def _side_fields(run: Run) -> list[tuple[str, str]]:
    records = _count(len(run.records))
    identity = run.service_identity
    if identity is None:
        return [
            ("Evaluator", f"{run.source.name} {run.source.version}"),
            ("Model revision", _UNAVAILABLE),
            ("Capture role", _UNAVAILABLE),
            ("Workflow", _UNAVAILABLE),
            ("Dataset", _UNAVAILABLE),
            ("Records", records),
            ("Effective message roles", _UNAVAILABLE),
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
class _Compared:
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


def _compared(pack: EvidencePack) -> _Compared:
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
    return _Compared(
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


def _checked(
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


_WIDTH_FIRST_NOTE: Final = (
    f"{WIDTH_FIRST_RULE}: the interval width was checked before the regression bounds "
    "(sealeval's opt-in rule, not the reference's)."
)
_NEXT_STEPS: Final = (
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


def _limitations(pack: EvidencePack) -> tuple[str, ...]:
    return (*pack.report["limitations"], _CONTEXT_LIMITATION)


def _identities(pack: EvidencePack) -> tuple[tuple[str, str], ...]:
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


def _identifier_rows(entries: Sequence[ReportEntry]) -> list[dict[str, Any]]:
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


def _preview(value: Any, note: str) -> dict[str, Any]:
    shown, truncated = _preview_value(value)
    preview: dict[str, Any] = {
        "limits": dict(_PREVIEW_LIMITS),
        "note": note,
        "preview_only": True,
        "text": json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False),
    }
    if truncated:
        preview["truncated"] = True
    return preview


_POLICY_NOTE: Final = (
    "Display preview, not a replacement configuration. Full configuration remains in evidence "
    "under the original policy binding."
)
_SERVICE_NOTE: Final = (
    "Full declared configuration remains in the captured run. Its digest identifies the "
    "declaration."
)


def _policy_preview(pack: EvidencePack) -> dict[str, Any]:
    document: dict[str, Any] = thaw_json(pack.policy.document)
    for metric in document["metrics"]:
        metric["configuration"] = _preview(metric["configuration"], _POLICY_NOTE)
    return document


def _exact_data(pack: EvidencePack) -> dict[str, Any]:
    document: dict[str, Any] = thaw_json(pack.report)
    for entry in document["metrics"]:
        missing = entry.pop("missing_ids")
        entry["missing_count"] = len(missing)
        entry["missing_ids_preview"] = missing[:MISSING_IDS_PREVIEW]
        entry["missing_ids_preview_is_complete"] = len(missing) <= MISSING_IDS_PREVIEW
    return document


def _json_block(value: Any) -> list[str]:
    return ["```json", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False), "```"]


@dataclass(frozen=True, slots=True)
class _View:
    pack: EvidencePack
    entries: tuple[ReportEntry, ...]  # display order
    verification: VerificationStatus | None

    @property
    def label(self) -> str:
        return DECISION_LABELS[self.pack.decision]


def _view(pack: EvidencePack, verification: VerificationStatus | None) -> _View:
    if not isinstance(pack, EvidencePack):
        raise _fail("invalid_entry", "pack")
    entries = display_order(check_consistency(pack))
    _check_verification(pack, verification)
    return _View(pack, entries, verification)


# ---------------------------------------------------------------------------
# Markdown


def _md_bullets(rows: Iterable[tuple[str, str]]) -> list[str]:
    return [f"- **{_md(label)}:** {_md_text(value)}" for label, value in rows]


def _md_entry(entry: ReportEntry) -> list[str]:
    label = DECISION_LABELS[entry.decision]
    lines = [
        f"## {_md_text(display_name(entry.name))}: {_md_text(display_name(entry.slice))}",
        "",
        f"**{_md(label)}**. {_md(explanation(entry))}",
        "",
        "| Baseline | Subject | Change | Usable pairs |",
        "| --- | --- | --- | --- |",
        f"| {_md_text(_mean_text(entry, entry.baseline_mean))} | "
        f"{_md_text(_mean_text(entry, entry.subject_mean))} | {_md_text(_change_text(entry))} | "
        f"{_count(entry.usable)} |",
        "",
    ]
    if entry.binary and entry.evaluated:
        for side, mean in (("Baseline", entry.baseline_mean), ("Subject", entry.subject_mean)):
            matched = _count(_matched(entry, mean))
            lines += [f"{side}: {matched} of {_count(entry.usable)} matched.", ""]
    lines += [
        f"Usable pairs: {_count(len(entry.missing_ids))} missing · {_count(entry.count)} "
        f"included · ≥ {_count(entry.metric.minimum_count)} required.",
        "",
    ]
    if entry.evaluated:
        lines += [_md(_interval_line(entry)), "", "### How to read this comparison", ""]
        for title, text in _reading(entry):
            lines += [f"**{_md(title)}:** {_md(text)}", ""]
        lines += ["### How this interval was calculated", ""]
        for paragraph in _calculation(entry):
            lines += [_md(paragraph), ""]
    lines += [
        "### Decision checks",
        "",
        "| Check | Observed | Required | Result |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        "| "
        + " | ".join(_md_text(cell) for cell in (row.label, row.observed, row.required, row.result))
        + " |"
        for row in _checks(entry)
    ]
    lines.append("")
    lines += [f"- {_md(note)}" for note in _notes(entry)]
    return lines


def render_markdown(
    pack: EvidencePack,
    *,
    explain: bool = False,
    verification: VerificationStatus | None = None,
) -> str:
    """Return the Markdown report of a pack (33-report.md §2.2; invarlock's bytes).

    Sections: decision and summary, what was compared, what was checked (it
    says that no verification was performed, or shows the caller's
    ``verification`` status without re-checking it), one section per metric
    entry in display order, next steps, scope and limitations, evidence
    identities, and — when display names differ from the recorded ones —
    the recorded identifiers. ``explain`` appends fenced JSON: each hosted
    side's declared service configuration (preview), the bound policy with
    configuration previews, and the report with ``missing_ids`` replaced by
    ``missing_count`` and the first 20 ids.

    Raises:
        ReportError: a consistency check failed, or ``verification``
            contradicts the pack (``verification_mismatch``).
    """
    view = _view(pack, verification)
    compared = _compared(pack)
    lines = [
        "# InvarLock captured comparison",
        "",
        f"**Recorded policy result: {_md(view.label)}**",
        "",
        _md(_summary(view.entries)),
        "",
        "## What was compared",
        "",
        "",
        f"### {_md(compared.identity_label)}: {_md(compared.identity_state)}",
        "",
        f"- **Baseline:** {_md_text(compared.baseline_identity)}",
        f"- **Subject:** {_md_text(compared.subject_identity)}",
        "",
    ]
    lines += [  # "Records" always matches: both runs hold the same ids
        "### Matching displayed fields",
        "",
        "Matching previews do not establish equality of the complete retained fields.",
        "",
        *_md_bullets(compared.matching),
        "",
    ]
    lines += ["### Additional fields", "", *_md_bullets(compared.additional), ""]
    lines += ["### Recorded changes", "", *(f"- {_md(change)}" for change in compared.changes)]
    lines += ["", "## What was checked", "", *_md_bullets(_checked(pack, verification)), ""]
    if "decision_rule" in pack.report:
        lines[-1:-1] = _md_bullets([("Decision rule", _WIDTH_FIRST_NOTE)])
    for entry in view.entries:
        lines += [*_md_entry(entry), ""]
    lines += ["## Next steps", ""]
    lines += [f"{number}. {_md(step)}" for number, step in enumerate(_NEXT_STEPS, 1)]
    lines += ["", "## Scope and limitations", ""]
    lines += [f"- {_md_text(item)}" for item in _limitations(pack)]
    lines += ["", "## Evidence identities", "", *_md_bullets(_identities(pack))]
    identifiers = _identifier_rows(view.entries)
    if identifiers:
        lines += ["", "## Recorded metric and scope identifiers", "", *_json_block(identifiers)]
    if explain:
        for side, run in (("Baseline", pack.baseline), ("Subject", pack.subject)):
            if run.service_identity is not None:
                preview = _preview(run.service_identity.configuration, _SERVICE_NOTE)
                lines += ["", f"## {side} declared service configuration", ""]
                lines += _json_block(preview)
        lines += ["", f"## {_md('Bound policy (configuration preview)')}", ""]
        lines += _json_block(_policy_preview(pack))
        lines += ["", "## Exact comparison data", "", *_json_block(_exact_data(pack))]
    return _terminal_safe("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# JUnit XML


def _xml_text(text: str) -> str:
    r"""Show characters not allowed in XML 1.0 as ``\uXXXX`` / ``\UXXXXXXXX``."""
    return _XML_INVALID.sub(_escape_char, text)


def render_junit(pack: EvidencePack) -> bytes:
    """Return the JUnit XML of a pack (33-report.md §2.1; invarlock's bytes).

    One ``<testsuite>`` whose ``failures`` count the ``regression`` entries
    (each with a ``<failure message=…/>``) and ``errors`` the
    ``insufficient_evidence`` entries (``<error message=…/>``); one
    ``<testcase name=metric classname=scope/>`` per entry in display order.
    The message is the entry's explanation.

    Raises:
        ReportError: a consistency check failed.
    """
    entries = _view(pack, None).entries
    failures = sum(entry.decision == "regression" for entry in entries)
    errors = sum(entry.decision == "insufficient_evidence" for entry in entries)
    root = ET.Element(
        "testsuite",
        {
            "name": "InvarLock recorded policy checks",
            "tests": str(len(entries)),
            "failures": str(failures),
            "errors": str(errors),
        },
    )
    for entry in entries:
        case = ET.SubElement(
            root, "testcase", {"name": _xml_text(entry.name), "classname": _xml_text(entry.slice)}
        )
        if entry.decision != "pass":
            tag = "failure" if entry.decision == "regression" else "error"
            ET.SubElement(case, tag, {"message": _xml_text(explanation(entry))})
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data


# ---------------------------------------------------------------------------
# HTML


_CSS: Final = """
:root{color-scheme:light;--ink:#1b1d1a;--muted:#55594f;--line:#d6d3c8;--paper:#fbfaf6;
--fail:#a4261c;--fail-bg:#fbe9e6;--warn:#7a5200;--warn-bg:#fdf3dc;--pass:#1d6a36;
--pass-bg:#e5f4e8;--accent:#2f4fa8}
*{box-sizing:border-box}
body{margin:0;background:var(--paper);color:var(--ink);font:15px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1080px;margin:0 auto;padding:24px 20px 64px}
header.brand{display:flex;gap:12px;align-items:baseline;color:var(--muted);font-size:14px}
header.brand strong{color:var(--ink);font-size:17px}
h1{font-size:30px;margin:4px 0 8px}h2{font-size:21px;margin:0 0 10px}
h3{font-size:17px;margin:18px 0 8px}h4{font-size:15px;margin:14px 0 6px}
.decision{border-radius:10px;padding:20px 22px;margin:14px 0;border:2px solid}
.decision.regression{background:var(--fail-bg);border-color:var(--fail)}
.decision.insufficient_evidence{background:var(--warn-bg);border-color:var(--warn)}
.decision.pass{background:var(--pass-bg);border-color:var(--pass)}
.eyebrow{text-transform:uppercase;letter-spacing:.06em;font-size:12px;margin:0;color:var(--muted)}
.notice{border-left:5px solid var(--accent);background:#eef1fb;padding:12px 16px;margin:14px 0;
border-radius:4px}
.notice h2{font-size:16px;margin:0 0 4px}.notice p{margin:0}
section.panel{background:#fff;border:1px solid var(--line);border-radius:10px;padding:18px 20px;
margin:16px 0}
dl.facts{display:grid;grid-template-columns:minmax(150px,max-content) 1fr;gap:4px 16px;margin:0}
dl.facts dt{font-weight:600}dl.facts dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:8px 0 12px;font-size:14px}
th,td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left;vertical-align:top}
thead th{background:#f3f1ea}
caption{text-align:left;font-weight:600;padding:4px 0}
.badge{display:inline-block;border-radius:999px;padding:1px 10px;font-size:13px;font-weight:600;
white-space:nowrap}
.badge.regression{background:var(--fail-bg);color:var(--fail)}
.badge.insufficient_evidence{background:var(--warn-bg);color:var(--warn)}
.badge.pass{background:var(--pass-bg);color:var(--pass)}
code,.digest{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;
overflow-wrap:anywhere}
figure.forest{margin:10px 0;overflow-x:auto}
figure.forest svg{display:block;max-width:100%;height:auto;background:#fff}
figcaption{font-size:13px;color:var(--muted)}
svg .label{font:13px system-ui,sans-serif;fill:#1b1d1a}
svg .small{font:11px system-ui,sans-serif;fill:#55594f}
svg .note{font:italic 12px system-ui,sans-serif;fill:#1b1d1a;stroke:#fff;stroke-width:4px;
paint-order:stroke}
.scroll{overflow-x:auto}
td.check-fail{color:var(--fail);font-weight:600}td.check-na{color:var(--warn)}
svg .allowed{fill:#e5f4e8}
svg .threshold{stroke:#a4261c;stroke-width:2;stroke-dasharray:6 4}
svg .neutral{stroke:#55594f;stroke-width:1;stroke-dasharray:2 3}
svg .axis,svg .tick{stroke:#55594f;stroke-width:1}
svg .grid{stroke:#eceae2;stroke-width:1}
svg .range{stroke-width:3}
svg .regression .range,svg .regression .estimate{stroke:#a4261c;fill:#a4261c}
svg .insufficient_evidence .range,svg .insufficient_evidence .estimate{stroke:#7a5200;fill:#7a5200}
svg .pass .range,svg .pass .estimate{stroke:#1d6a36;fill:#1d6a36}
details{margin:8px 0}summary{cursor:pointer;font-weight:600}
ul.missing{margin:0;padding-left:18px}
pre{background:#f3f1ea;padding:10px;border-radius:6px;overflow-x:auto;font-size:12px}
.muted{color:var(--muted)}
"""

_CHECK_CLASSES: Final[Mapping[str, str]] = {
    _PASSED: "check-pass",
    _NOT_MET: "check-fail",
    _NOT_EVALUATED: "check-na",
}
_GLYPHS: Final[Mapping[str, str]] = {
    "regression": "✗ not met",
    "insufficient_evidence": "? more evidence",
    "pass": "✓ satisfied",
}


def _badge(decision: str) -> str:
    return f'<span class="badge {decision}">{_h(DECISION_LABELS[decision])}</span>'


def _dl(rows: Iterable[tuple[str, str]], *, code: bool = False) -> str:
    items = []
    for label, value in rows:
        shown = f'<code class="digest">{_h(value)}</code>' if code else _h(value)
        items.append(f"<dt>{_h(label)}</dt><dd>{shown}</dd>")
    return '<dl class="facts">' + "".join(items) + "</dl>"


def _coordinate(value: float) -> str:
    return f"{value:.2f}"


def _nice_step(span: float) -> float:
    raw = span / 4.0
    base = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1.0, 2.0, 2.5, 5.0):
        if raw <= multiple * base:
            return multiple * base
    return 10.0 * base


@dataclass(frozen=True, slots=True)
class _Scale:
    low: float
    high: float
    left: float
    right: float

    def x(self, value: float) -> float:
        if not math.isfinite(value):
            return self.left if value < 0 else self.right
        fraction = (value - self.low) / (self.high - self.low)
        return self.left + min(1.0, max(0.0, fraction)) * (self.right - self.left)

    def ticks(self) -> list[float]:
        step = _nice_step(self.high - self.low)
        first = math.ceil(self.low / step)
        ticks = []
        for index in range(first, first + 12):
            value = index * step
            if value > self.high + step * 1e-9:
                break
            ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        return ticks


def _scale(values: Iterable[float], left: float, right: float) -> _Scale:
    finite = [value for value in values if math.isfinite(value)]
    low, high = (min(finite), max(finite)) if finite else (-1.0, 1.0)
    span = high - low
    if not math.isfinite(span) or span > 1e300:
        low, high = -1.0, 1.0
    elif span <= 0:
        pad = max(abs(low) * 0.1, 1.0)
        low, high = low - pad, high + pad
    else:
        low, high = low - span * 0.08, high + span * 0.08
    return _Scale(low, high, left, right)


def _row_title(entry: ReportEntry) -> str:
    scope = display_name(entry.slice)
    label = DECISION_LABELS[entry.decision]
    if not entry.evaluated:
        return (
            f"{scope}: no estimate or interval ({_count(len(entry.missing_ids))} missing of "
            f"{_count(entry.count)} included pairs; {_count(entry.metric.minimum_count)} "
            f"required). {label}."
        )
    interval = entry.interval
    assert interval is not None
    unit = _unit(entry)
    estimate = "ratio" if entry.nll else "change"
    return (
        f"{scope}: {estimate} {_change_text(entry)}, {_level(interval.mass)} interval "
        f"{_g(_scaled(entry, interval.lower))} to {_g(_scaled(entry, interval.upper))} {unit}. "
        f"{label}."
    )


@dataclass(frozen=True, slots=True)
class _Plot:
    """Geometry of one forest plot (pixels) and its value scale."""

    scale: _Scale
    top: int
    bottom: int
    label_width: int
    threshold: float
    neutral: float
    unit: str
    relation: str


_PLOT_WIDTH: Final = 760
_PLOT_LABELS: Final = 220
_PLOT_TOP: Final = 38
_PLOT_ROW: Final = 30


def _plot_geometry(entries: Sequence[ReportEntry]) -> _Plot:
    first = entries[0]
    threshold = _threshold(first)
    neutral = 1.0 if first.nll else 0.0
    values = [threshold, neutral]
    for entry in entries:
        if entry.interval is not None:
            values += [
                _scaled(entry, entry.interval.lower),
                _scaled(entry, entry.interval.upper),
                _estimate(entry),
            ]
    return _Plot(
        scale=_scale(values, _PLOT_LABELS + 10, _PLOT_WIDTH - 24),
        top=_PLOT_TOP,
        bottom=_PLOT_TOP + _PLOT_ROW * len(entries),
        label_width=_PLOT_LABELS,
        threshold=threshold,
        neutral=neutral,
        unit=_unit(first),
        relation="≥" if _higher(first) else "≤",
    )


def _plot_axes(plot: _Plot, higher: bool) -> list[str]:
    """Draw the allowed region, grid, ticks, axis, no-change line and policy bound."""
    scale, top, bottom = plot.scale, plot.top, plot.bottom
    x_threshold = scale.x(plot.threshold)
    if higher:
        region = (x_threshold, scale.right - x_threshold)
    else:
        region = (scale.left, x_threshold - scale.left)
    parts = [
        f'<rect class="allowed" x="{_coordinate(region[0])}" y="{top}" '
        f'width="{_coordinate(max(region[1], 0.0))}" height="{bottom - top}"/>'
    ]
    for tick in scale.ticks():
        x = _coordinate(scale.x(tick))
        parts.append(
            f'<line class="grid" x1="{x}" x2="{x}" y1="{top}" y2="{bottom}"/>'
            f'<line class="tick" x1="{x}" x2="{x}" y1="{bottom}" y2="{bottom + 5}"/>'
            f'<text class="small" x="{x}" y="{bottom + 18}" text-anchor="middle">'
            f"{_h(_g(tick))}</text>"
        )
    x_neutral = _coordinate(scale.x(plot.neutral))
    anchor = "start" if x_threshold < (scale.left + scale.right) / 2 else "end"
    offset = 4 if anchor == "start" else -4
    bound = f"Policy bound {plot.relation} {_g(plot.threshold)} {plot.unit}"
    parts.append(
        f'<line class="axis" x1="{_coordinate(scale.left)}" x2="{_coordinate(scale.right)}" '
        f'y1="{bottom}" y2="{bottom}"/>'
        f'<line class="neutral" x1="{x_neutral}" x2="{x_neutral}" y1="{top - 6}" y2="{bottom}"/>'
        f'<line class="threshold" x1="{_coordinate(x_threshold)}" '
        f'x2="{_coordinate(x_threshold)}" y1="{top - 14}" y2="{bottom}"/>'
        f'<text class="small" x="{_coordinate(x_threshold + offset)}" y="{top - 18}" '
        f'text-anchor="{anchor}">{_h(bound)}</text>'
        f'<text class="small" x="10" y="{top - 18}">{_h(f"Scope ({plot.unit})")}</text>'
    )
    return parts


def _plot_row(plot: _Plot, entry: ReportEntry, index: int) -> str:
    """One scope: label, decision glyph, interval bar with whiskers and the estimate dot."""
    scale = plot.scale
    y = plot.top + _PLOT_ROW * index + _PLOT_ROW // 2
    parts = [
        f'<g class="row {entry.decision}"><title>{_h(_row_title(entry))}</title>'
        f'<text class="label" x="10" y="{y + 4}">{_h(display_name(entry.slice))}</text>'
        f'<text class="small" x="{plot.label_width - 4}" y="{y + 4}" text-anchor="end">'
        f"{_h(_GLYPHS[entry.decision])}</text>"
    ]
    if entry.interval is not None:
        x1 = _coordinate(scale.x(_scaled(entry, entry.interval.lower)))
        x2 = _coordinate(scale.x(_scaled(entry, entry.interval.upper)))
        parts.append(f'<line class="range" x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>')
        parts += [
            f'<line class="range" x1="{x}" x2="{x}" y1="{y - 5}" y2="{y + 5}"/>' for x in (x1, x2)
        ]
        cx = _coordinate(scale.x(_estimate(entry)))
        parts.append(f'<circle class="estimate" cx="{cx}" cy="{y}" r="5"/>')
    else:
        if entry.missing_ids:
            note = f"No interval: {_count(len(entry.missing_ids))} missing results"
        else:
            note = (
                f"No interval: {_count(entry.count)} of "
                f"{_count(entry.metric.minimum_count)} required pairs"
            )
        parts.append(
            f'<text class="note" x="{_coordinate(scale.left + 6)}" y="{y + 4}">{_h(note)}</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def _forest_plot(metric: PolicyMetric, entries: Sequence[ReportEntry], number: int) -> str:
    """Return one inline SVG forest plot: per scope, the interval and estimate vs the bound."""
    first = entries[0]
    plot = _plot_geometry(entries)
    height = plot.bottom + 40
    estimate = "ratio" if first.nll else "change"
    title = f"{display_name(metric.name)}: {estimate} and interval per scope ({plot.unit})"
    desc = (
        f"Forest plot of {len(entries)} scope(s). Policy bound: {plot.relation} "
        f"{_g(plot.threshold)} {plot.unit}; no change at {_g(plot.neutral)}. "
        + " ".join(_row_title(entry) for entry in entries)
    )
    ids = f"forest-{number}-title forest-{number}-desc"
    parts = [
        f'<svg viewBox="0 0 {_PLOT_WIDTH} {height}" width="{_PLOT_WIDTH}" height="{height}" '
        f'role="img" aria-labelledby="{ids}" class="forest-plot" '
        f'data-metric="{_h(metric.name)}">'
        f'<title id="forest-{number}-title">{_h(title)}</title>'
        f'<desc id="forest-{number}-desc">{_h(desc)}</desc>',
        *_plot_axes(plot, _higher(first)),
        *(_plot_row(plot, entry, index) for index, entry in enumerate(entries)),
        "</svg>",
    ]
    return "".join(parts)


def _missing_cell(entry: ReportEntry) -> str:
    if not entry.missing_ids:
        return '<span class="muted">none</span>'
    shown = entry.missing_ids[:MISSING_IDS_PREVIEW]
    items = "".join(f"<li><code>{_h(item)}</code></li>" for item in shown)
    rest = len(entry.missing_ids) - len(shown)
    more = (
        f'<p class="muted">and {_count(rest)} more (first {MISSING_IDS_PREVIEW} shown)</p>'
        if rest
        else ""
    )
    return f'<ul class="missing">{items}</ul>{more}'


def _interval_cell(entry: ReportEntry) -> str:
    if entry.interval is None:
        return "Unavailable"
    interval = entry.interval
    return (
        f"{_g(_scaled(entry, interval.lower))} to {_g(_scaled(entry, interval.upper))} "
        f"{_unit(entry)}"
    )


def _scope_table(metric: PolicyMetric, entries: Sequence[ReportEntry], number: int) -> str:
    head = (
        '<thead><tr><th scope="col">Scope</th><th scope="col">Result</th>'
        '<th scope="col">Baseline</th><th scope="col">Subject</th>'
        '<th scope="col">Change</th><th scope="col">Interval</th>'
        '<th scope="col">Usable pairs</th><th scope="col">Missing</th>'
        '<th scope="col">Included</th><th scope="col">Required</th>'
        '<th scope="col">Missing ids</th></tr></thead>'
    )
    rows = []
    for entry in entries:
        cells = [
            _badge(entry.decision),
            _h(_mean_text(entry, entry.baseline_mean)),
            _h(_mean_text(entry, entry.subject_mean)),
            _h(_change_text(entry)),
            _h(_interval_cell(entry)),
            _count(entry.usable),
            _count(len(entry.missing_ids)),
            _count(entry.count),
            "≥ " + _count(metric.minimum_count),
            _missing_cell(entry),
        ]
        rows.append(
            f'<tr id="result-{entry.position + 1}"><th scope="row">'
            f"{_h(display_name(entry.slice))}</th>"
            + "".join(f"<td>{cell}</td>" for cell in cells)
            + "</tr>"
        )
    caption = f"{display_name(metric.name)}: per-scope counts and missing ids"
    return (
        f'<div class="scroll" role="region" tabindex="0" aria-label="{_h(caption)}">'
        f'<table class="scope-table" id="scopes-{number}"><caption>{_h(caption)}</caption>'
        + head
        + "<tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _entry_details(entry: ReportEntry) -> str:
    scope = display_name(entry.slice)
    parts = [
        f"<details><summary>{_h(scope)}: {_h(DECISION_LABELS[entry.decision])} — decision "
        "checks and method</summary>",
        f"<p>{_h(explanation(entry))}</p>",
    ]
    if entry.evaluated:
        parts.append(f"<p>{_h_rich(_interval_line(entry))}</p>")
    rows = "".join(
        f'<tr><th scope="row">{_h(row.label)}'
        + (f'<br><small class="muted">{_h(row.detail)}</small>' if row.detail else "")
        + f"</th><td>{_h(row.observed)}</td><td>{_h(row.required)}</td>"
        f'<td class="{_CHECK_CLASSES[row.result]}">{_h(row.result)}</td></tr>'
        for row in _checks(entry)
    )
    parts.append(
        '<table><caption>Decision checks</caption><thead><tr><th scope="col">Check</th>'
        '<th scope="col">Observed</th><th scope="col">Required</th>'
        f'<th scope="col">Result</th></tr></thead><tbody>{rows}</tbody></table>'
    )
    parts.append("<ul>" + "".join(f"<li>{_h_rich(note)}</li>" for note in _notes(entry)) + "</ul>")
    if entry.evaluated:
        parts.append('<h4>How to read this comparison</h4><dl class="facts">')
        parts += [f"<dt>{_h(title)}</dt><dd>{_h(text)}</dd>" for title, text in _reading(entry)]
        parts.append("</dl><h4>How this interval was calculated</h4>")
        parts += [f"<p>{_h(_plain(paragraph))}</p>" for paragraph in _calculation(entry)]
    parts.append("</details>")
    return "".join(parts)


def _metric_section(metric: PolicyMetric, entries: Sequence[ReportEntry], number: int) -> str:
    first = entries[0]
    worst = _overall(entry.decision for entry in entries)
    unit = _unit(first)
    relation = "≥" if _higher(first) else "≤"
    if first.nll:
        rule = f"upper ratio bound {relation} {_g(_threshold(first))}"
    else:
        side = "lower" if _higher(first) else "upper"
        rule = f"{side} interval bound {relation} {_g(_threshold(first))} {unit}"
    better = "higher" if metric.direction == "higher" else "lower"
    facts = (
        f"Kind <code>{_h(metric.kind)}</code> · {better} is better · policy bound: "
        f"{_h(rule)} · maximum interval width "
        f"{_h(_with_unit(first, metric.maximum_interval_width))} · at least "
        f"{_count(metric.minimum_count)} included pairs"
    )
    caption = (
        f"Estimate (dot) and {_h(_level(0.95))} interval (bar) per scope; the dashed red line is "
        "the policy bound, the shaded side is allowed, the dotted line marks no change. The "
        "table below gives the same values as text."
    )
    return (
        f'<section class="panel metric {worst}" id="metric-{number}" '
        f'aria-labelledby="metric-{number}-heading">'
        f'<h2 id="metric-{number}-heading">{_h(display_name(metric.name))} {_badge(worst)}</h2>'
        f'<p class="muted">{facts}</p>'
        f'<figure class="forest">{_forest_plot(metric, entries, number)}'
        f"<figcaption>{caption}</figcaption></figure>"
        + _scope_table(metric, entries, number)
        + "".join(_entry_details(entry) for entry in entries)
        + "</section>"
    )


def _overview(entries: Sequence[ReportEntry]) -> str:
    rows = []
    for entry in entries:
        rows.append(
            "<tr>"
            f'<th scope="row"><a href="#result-{entry.position + 1}">'
            f"{_h(display_name(entry.name))} · {_h(display_name(entry.slice))}</a></th>"
            f"<td>{_badge(entry.decision)}</td>"
            f"<td>{_h(_mean_text(entry, entry.baseline_mean))}</td>"
            f"<td>{_h(_mean_text(entry, entry.subject_mean))}</td>"
            f"<td>{_h(_change_text(entry))}</td>"
            f"<td>{_count(entry.usable)}</td>"
            f"<td>{_h(explanation(entry))}</td></tr>"
        )
    return (
        '<div class="scroll" role="region" tabindex="0" aria-label="All results">'
        '<table class="overview"><caption>All results (regressions first)</caption><thead><tr>'
        '<th scope="col">Metric · scope</th><th scope="col">Result</th>'
        '<th scope="col">Baseline</th><th scope="col">Subject</th><th scope="col">Change</th>'
        '<th scope="col">Usable pairs</th><th scope="col">Why</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _verification_section(pack: EvidencePack, verification: VerificationStatus | None) -> str:
    if verification is None:
        status = "Not verified"
        detail = (
            "No independent verification was performed or supplied. This report only "
            "re-examined the pack's structure, digests and bindings."
        )
        receipt = "No verification receipt was checked."
    else:
        status = f"{verification.label} (verification status {verification.code})"
        detail = (
            "Reported by the caller that ran verification; this report did not perform or "
            "re-check it."
        )
        receipt = (
            "A signed verification receipt was checked by the caller."
            if verification.receipt_checked
            else "No signed verification receipt was checked."
        )
    rows = [("Source of the status", detail), ("Receipt", receipt)]
    rows += [
        (label, value.replace("invarlock verify", "sealeval verify"))
        for label, value in _checked(pack, verification)
    ]
    if "decision_rule" in pack.report:
        rows.append(("Decision rule", _WIDTH_FIRST_NOTE))
    return (
        '<section class="panel" id="verification" aria-labelledby="verification-heading">'
        '<h2 id="verification-heading">Verification status</h2>'
        f'<p class="status" id="verification-status"><strong>{_h(status)}</strong></p>'
        + _dl(rows)
        + "</section>"
    )


def _compared_section(pack: EvidencePack) -> str:
    compared = _compared(pack)
    identity = (
        f"{compared.identity_label}: {compared.identity_state}",
        f"Baseline: {compared.baseline_identity} · Subject: {compared.subject_identity}",
    )
    parts = [
        '<section class="panel" id="compared" aria-labelledby="compared-heading">'
        '<h2 id="compared-heading">What was compared</h2>',
        _dl([identity]),
    ]
    parts.append(
        '<h3>Matching displayed fields</h3><p class="muted">Matching previews do not '
        "establish equality of the complete retained fields.</p>" + _dl(compared.matching)
    )
    parts.append("<h3>Additional fields</h3>" + _dl(compared.additional))
    parts.append(
        "<h3>Recorded changes</h3><ul>"
        + "".join(f"<li>{_h(change)}</li>" for change in compared.changes)
        + '</ul><p class="muted">sealeval derives no model or prompt fields from record '
        "context: context can carry inputs, and derived fields could mislead.</p></section>"
    )
    return "".join(parts)


def _bindings_section(pack: EvidencePack, entries: Sequence[ReportEntry]) -> str:
    identifiers = _identifier_rows(entries)
    extra = ""
    if identifiers:
        rows = "".join(
            f"<tr><td>{row['result']}</td><td>{_h(row['display_metric'])}</td>"
            f"<td><code>{_h(row['metric'])}</code></td><td>{_h(row['display_scope'])}</td>"
            f"<td><code>{_h(row['scope'])}</code></td></tr>"
            for row in identifiers
        )
        extra = (
            "<table><caption>Recorded metric and scope identifiers</caption><thead><tr>"
            '<th scope="col">Result</th><th scope="col">Metric</th>'
            '<th scope="col">Recorded metric</th><th scope="col">Scope</th>'
            f'<th scope="col">Recorded scope</th></tr></thead><tbody>{rows}</tbody></table>'
        )
    previews = []
    for side, run in (("Baseline", pack.baseline), ("Subject", pack.subject)):
        if run.service_identity is not None:
            preview = _preview(run.service_identity.configuration, _SERVICE_NOTE)
            previews.append((f"{side} declared service configuration", preview))
    previews.append(("Bound policy (configuration preview)", _policy_preview(pack)))
    details = "".join(
        f"<details><summary>{_h(title)}</summary><pre><code>{_h_json(value)}</code></pre></details>"
        for title, value in previews
    )
    return (
        '<section class="panel" id="bindings" aria-labelledby="bindings-heading">'
        '<h2 id="bindings-heading">Bindings and evidence identities</h2>'
        + _dl(_identities(pack), code=True)
        + extra
        + details
        + "</section>"
    )


def render_html(pack: EvidencePack, *, verification: VerificationStatus | None = None) -> str:
    """Return sealeval's self-contained HTML report of a pack.

    One file, no scripts and no external resource (a Content-Security-Policy
    forbids any fetch; styles are inline): the decision banner first, the
    no-verification-authority notice and the verification status (the
    caller's ``verification``, never established here), an overview of every
    result in display order, then one section per policy metric (worst first)
    with an inline SVG forest plot — the paired change and its interval per
    scope against the policy's regression bound, with titles and a text
    description — a per-scope table of values, counts and missing ids (first
    20), and each entry's decision checks. Then what was compared, the
    bindings and identities (digests), limitations and next steps.
    Deterministic: the same pack gives the same bytes.

    Raises:
        ReportError: a consistency check failed, or ``verification``
            contradicts the pack.
    """
    view = _view(pack, verification)
    by_metric: dict[str, list[ReportEntry]] = {metric.name: [] for metric in pack.policy.metrics}
    for entry in sorted(view.entries, key=lambda item: item.position):
        by_metric[entry.name].append(entry)
    metrics = sorted(
        pack.policy.metrics,
        key=lambda metric: (
            _DISPLAY_RANK[_overall(entry.decision for entry in by_metric[metric.name])],
            metric.index,
        ),
    )
    decision = pack.decision
    notice = (
        "This report presents the stored comparison of the evidence pack. It re-examined the "
        "pack's structure, digests and bindings but performed no replay, no scoring and no "
        "recipient verification, so it confers no verification authority. Rely on the "
        "evidence only after verifying it with independently supplied trust inputs (policy, "
        "run and request anchors, signer fingerprint) and checking the signed receipt."
    )
    body = [
        '<header class="brand"><strong>sealeval</strong><span>Captured comparison report '
        "· presentation of stored evidence</span></header>",
        f'<section class="decision {decision}" id="decision" role="region" '
        'aria-labelledby="decision-heading"><p class="eyebrow">Recorded policy result</p>'
        f'<h1 id="decision-heading">{_h(view.label)}</h1>'
        f'<p class="summary">{_h_rich(_summary(view.entries))}</p></section>',
        '<aside class="notice" id="authority-notice" role="note" '
        'aria-labelledby="authority-heading"><h2 id="authority-heading">No verification '
        f"authority</h2><p>{_h(notice)}</p></aside>",
        _verification_section(pack, verification),
        '<section class="panel" id="overview" aria-labelledby="overview-heading">'
        '<h2 id="overview-heading">Results at a glance</h2>'
        + _overview(view.entries)
        + "</section>",
    ]
    for number, metric in enumerate(metrics, 1):
        body.append(_metric_section(metric, by_metric[metric.name], number))
    body.append(_compared_section(pack))
    body.append(_bindings_section(pack, view.entries))
    body.append(
        '<section class="panel" id="limitations"><h2>Scope and limitations</h2><ul>'
        + "".join(f"<li>{_h(item)}</li>" for item in _limitations(pack))
        + "</ul></section>"
    )
    body.append(
        '<section class="panel" id="next-steps"><h2>Next steps</h2><ol>'
        + "".join(
            f"<li>{_h(step.replace('invarlock verify', 'sealeval verify'))}</li>"
            for step in _NEXT_STEPS
        )
        + "</ol></section>"
    )
    title = f"{view.label} · sealeval captured comparison report"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">"
        f"<title>{_h(title)}</title><style>{_CSS.strip()}</style></head><body><main>"
        + "".join(body)
        + "</main></body></html>\n"
    )


# ---------------------------------------------------------------------------
# The --json result


def report_result(
    *,
    ok: bool,
    pack_manifest_digest: str | None,
    requested_outputs: Mapping[str, str],
    written_outputs: Mapping[str, str],
    failed_output: str | None,
    errors: Sequence[str],
) -> dict[str, Any]:
    """Return the ``invarlock/evidence-report-v2`` result document (33-report.md §2).

    ``pack_manifest_digest`` is shown only when ``ok``; paths are as given.
    """
    return {
        "format_version": RESULT_FORMAT,
        "kind": "captured",
        "ok": ok,
        "pack_manifest_digest": pack_manifest_digest if ok else None,
        "requested_outputs": dict(requested_outputs),
        "written_outputs": dict(written_outputs),
        "failed_output": failed_output,
        "errors": list(errors),
    }


def encode_result(document: Mapping[str, Any]) -> str:
    r"""Return the canonical JSON text of a result (terminal controls as ``\uXXXX``)."""
    return _terminal_safe(encode_invarlock(document).decode("utf-8"))
