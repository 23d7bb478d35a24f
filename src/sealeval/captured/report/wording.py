"""What a report says about one metric entry: display conventions and wording.

Shared by every output format: numbers, units, checks, notes, the interval
line, the calculation and the summaries, as rich text (fixed wording versus
dynamic values) that each renderer escapes its own way.
"""

from __future__ import annotations

import html
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sealeval.canonical import pretty
from sealeval.captured.report.model import (
    NOT_EVALUATED,
    NOT_MET,
    PASSED,
    CheckRow,
    ReportEntry,
    absolute_ok,
    bound_ok,
    display_float,
    estimate_ok,
    width_ok,
)
from sealeval.captured.scorers import RECORDED_KIND

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


def significant(value: float) -> str:
    """Four significant digits (``format(x, ".4g")``), without a negative zero."""
    text = format(display_float(value), ".4g")
    return "0" if text == "-0" else text


def _signed(value: float) -> str:
    return "0" if value == 0 else format(display_float(value), "+.4g")


def count_text(value: int) -> str:
    """Return a count with thousands separators."""
    return f"{value:,}"


def _percent(value: float) -> str:
    return significant(display_float(value) * 100.0) + "%"


_TERMINAL_CONTROLS: Final = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
XML_INVALID: Final = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def escape_char(match: re.Match[str]) -> str:
    r"""Return a matched character as ``\uXXXX`` (or ``\UXXXXXXXX``)."""
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def terminal_safe(text: str) -> str:
    r"""Show terminal control characters (except LF) as ``\uXXXX``."""
    return _TERMINAL_CONTROLS.sub(escape_char, text)


def _one_line(text: str) -> str:
    r"""Return dynamic text on one line: control characters (LF included) as ``\uXXXX``."""
    return terminal_safe(text.replace("\n", "\\u000a"))


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


def plain_text(text: _Rich) -> str:
    """Return rich text as plain text (fixed and dynamic pieces alike)."""
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


def md_dynamic(text: str) -> str:
    r"""Escape dynamic text for Markdown (entities; control characters as ``\uXXXX``)."""
    return _one_line(text.translate(_MD_DYNAMIC))


def md_escape(text: _Rich | str) -> str:
    """Escape fixed wording (a string) or rich text for Markdown."""
    if isinstance(text, str):
        return text.translate(_MD_FIXED)
    return "".join(
        md_dynamic(piece) if dynamic else piece.translate(_MD_FIXED) for piece, dynamic in text
    )


def html_text(text: str) -> str:
    r"""Escape text for HTML (control characters as ``\uXXXX``)."""
    return html.escape(_one_line(text), quote=True)


def html_json(value: Any) -> str:
    r"""Return indented JSON (sorted keys) escaped for HTML, terminal controls as ``\uXXXX``."""
    text = pretty(value)
    return html.escape(terminal_safe(text), quote=True)


def html_rich(text: _Rich) -> str:
    """Escape rich text for HTML, dynamic values in ``<strong>``."""
    return "".join(
        f"<strong>{html_text(piece)}</strong>" if dynamic else html_text(piece)
        for piece, dynamic in text
    )


# ---------------------------------------------------------------------------
# What an entry shows (shared by every format)


def change_unit(entry: ReportEntry) -> str:
    """Return the unit of changes and intervals: ``pp``, ``ratio`` or the metric's unit."""
    if entry.binary:
        return "pp"
    if entry.nll:
        return "ratio"
    return entry.metric.unit


def scaled(entry: ReportEntry, value: float) -> float:
    """Return ``value`` in the entry's display scale (percentage points for a binary metric)."""
    return display_float(value) * 100.0 if entry.binary else display_float(value)


def with_unit(entry: ReportEntry, value: float) -> str:
    """Return a value in the entry's change unit, four significant digits."""
    return f"{significant(scaled(entry, value))} {change_unit(entry)}"


def level_text(value: float) -> str:
    """Return a confidence level (a proportion) as the reports show it, a percentage."""
    return _percent(value)


def mean_text(entry: ReportEntry, value: float | None) -> str:
    """Return a run's mean as every report shows it (percent, nats / byte or the unit).

    ``None`` (no scored pairs) reads ``Unavailable``.
    """
    if value is None:
        return "Unavailable"
    if entry.binary:
        return _percent(value)
    if entry.nll:
        return f"{significant(value)} nats / byte"
    return f"{significant(value)} {entry.metric.unit}"


def change_text(entry: ReportEntry) -> str:
    """Return the entry's change with its sign and unit (``Unavailable`` if not evaluated)."""
    if not entry.evaluated:
        return "Unavailable"
    if entry.nll:
        assert entry.ratio is not None
        return f"{significant(entry.ratio)} ratio"
    assert entry.delta is not None
    return f"{_signed(scaled(entry, entry.delta))} {change_unit(entry)}"


def estimate_value(entry: ReportEntry) -> float:
    """Return the entry's estimate (ratio or change) in its display unit."""
    value = entry.ratio if entry.nll else entry.delta
    assert value is not None
    return scaled(entry, value)


def threshold_value(entry: ReportEntry) -> float:
    """Return the policy bound of the entry in its display unit."""
    metric = entry.metric
    if entry.nll:
        return display_float(metric.ratio_max)  # type: ignore[arg-type]
    limit = display_float(metric.maximum_regression)  # type: ignore[arg-type]
    return scaled(entry, -limit if metric.direction == "higher" else limit)


def higher_is_better(entry: ReportEntry) -> bool:
    """Whether higher values are better for the entry (never for NLL ratios)."""
    return entry.metric.direction == "higher" and not entry.nll


def matched_count(entry: ReportEntry, mean: float | None) -> int:
    """Return the number of matched pairs a binary mean stands for."""
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
    if not bound_ok(entry):
        sentences.append(_WITHIN_TEXT if estimate_ok(entry) else _OUTSIDE_TEXT)
    if not width_ok(entry) and entry.decision != "insufficient_evidence":
        sentences.append(_WIDE_TEXT)
    if not all(absolute_ok(entry)):
        sentences.append(_ABSOLUTE_TEXT)
    return " ".join(sentences)


def _result(ok: bool) -> str:
    return PASSED if ok else NOT_MET


def check_rows(entry: ReportEntry) -> tuple[CheckRow, ...]:
    """Return the entry's policy checks as rows (observed, required, result)."""
    metric = entry.metric
    rows = [
        CheckRow(
            "Complete paired results",
            f"{count_text(entry.usable)} of {count_text(entry.count)}",
            "All included pairs",
            _result(not entry.missing_ids),
            "Missing results are retained; they cannot be dropped to obtain a pass.",
        ),
        CheckRow(
            "Included pair count",
            count_text(entry.count),
            f">= {count_text(metric.minimum_count)}",
            _result(entry.count >= metric.minimum_count),
        ),
    ]
    if not entry.evaluated:
        rows.append(
            CheckRow(
                "Score and uncertainty",
                "Not evaluated",
                "Complete results and sufficient count",
                NOT_EVALUATED,
            )
        )
        return tuple(rows)
    interval = entry.interval
    assert interval is not None
    unit = change_unit(entry)
    threshold = significant(threshold_value(entry))
    if entry.nll:
        rows.append(
            CheckRow(
                "Maximum NLL ratio",
                f"{significant(interval.upper)} ratio",
                f"<= {threshold} ratio",
                _result(bound_ok(entry)),
                "Uses the interval bound, not just the observed ratio.",
            )
        )
    else:
        bound = interval.lower if higher_is_better(entry) else interval.upper
        relation = ">=" if higher_is_better(entry) else "<="
        rows.append(
            CheckRow(
                "Allowed change",
                with_unit(entry, bound),
                f"{relation} {threshold} {unit}",
                _result(bound_ok(entry)),
                "Uses the interval bound, not just the observed change.",
            )
        )
    rows.append(
        CheckRow(
            "Interval width",
            with_unit(entry, interval.upper - interval.lower),
            f"<= {with_unit(entry, metric.maximum_interval_width)}",
            _result(width_ok(entry)),
        )
    )
    low, high = absolute_ok(entry)
    for label, limit, relation, ok in (
        ("Subject minimum", metric.subject_minimum, ">=", low),
        ("Subject maximum", metric.subject_maximum, "<=", high),
    ):
        if limit is not None:
            rows.append(
                CheckRow(
                    label,
                    mean_text(entry, entry.subject_mean),
                    f"{relation} {mean_text(entry, limit)}",
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


def entry_notes(entry: ReportEntry) -> tuple[_Rich, ...]:
    """Return the notes shown under an entry (direction, scoring basis, method)."""
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
            usable=count_text(entry.usable),
            missing=count_text(len(entry.missing_ids)),
            count=count_text(entry.count),
        ),
    ]
    if entry.binary and entry.evaluated:
        notes.append(
            _rich(
                "Matches: baseline {b} of {n}; subject {s} of {n}.",
                b=count_text(matched_count(entry, entry.baseline_mean)),
                s=count_text(matched_count(entry, entry.subject_mean)),
                n=count_text(entry.usable),
            )
        )
    if entry.binary and entry.metric.subject_minimum is None:
        notes.append(_rich(_NO_MINIMUM))
    return tuple(notes)


def _method_label(entry: ReportEntry) -> str:
    return "Newcombe hybrid score" if entry.binary else "Paired percentile resampling"


def interval_line(entry: ReportEntry) -> _Rich:
    """Return the sentence stating the entry's interval, level and method."""
    interval = entry.interval
    assert interval is not None
    values = {
        "level": level_text(interval.mass),
        "method": _method_label(entry),
        "lo": significant(scaled(entry, interval.lower)),
        "hi": significant(scaled(entry, interval.upper)),
        "unit": change_unit(entry),
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


def reading_rows(entry: ReportEntry) -> tuple[tuple[str, str], ...]:
    """Return (title, text) rows explaining how to read the entry's chart."""
    change = "The marker shows the observed change between subject and baseline."
    if entry.binary:
        change += (
            " A change in percentage points (pp) is the subject percentage minus the baseline "
            "percentage."
        )
    elif entry.nll:
        change += " A ratio divides the subject value by the baseline value; 1 means no change."
    if higher_is_better(entry):
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


def calculation_lines(entry: ReportEntry) -> tuple[_Rich, ...]:
    """Return the paragraphs describing how the entry was calculated."""
    interval = entry.interval
    assert interval is not None
    level = level_text(interval.mass)
    usable = count_text(entry.usable)
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
            replicates=count_text(interval.replicates),
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
            f"{mean_text(entry, metric.subject_minimum)}."
        )
    elif entry.binary:
        parts.append(" " + _NO_MINIMUM)
    if metric.subject_maximum is not None:
        parts.append(
            f" The policy also requires a subject score of at most "
            f"{mean_text(entry, metric.subject_maximum)}."
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
            usable=count_text(entry.usable),
            minimum=count_text(entry.metric.minimum_count),
        )
    interval = entry.interval
    assert interval is not None
    side = "at or above" if higher_is_better(entry) else "at or below"
    return _rich(
        explanation(entry) + " Across {usable} usable pairs, the subject's {name} was "
        "{subject}, compared with {baseline} for the baseline, a change of {change}. The "
        "{level} interval for the change runs from {lo} to {hi} {unit}. The policy requires "
        "the interval to stay " + side + " {threshold} {unit}." + _absolute_sentences(entry),
        usable=count_text(entry.usable),
        name=name,
        subject=mean_text(entry, entry.subject_mean),
        baseline=mean_text(entry, entry.baseline_mean),
        change=change_text(entry),
        level=level_text(interval.mass),
        lo=significant(scaled(entry, interval.lower)),
        hi=significant(scaled(entry, interval.upper)),
        unit=change_unit(entry),
        threshold=significant(threshold_value(entry)),
    )


def summary_text(entries: Sequence[ReportEntry]) -> _Rich:
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
        total=count_text(len(entries)),
        passed=count_text(passed),
        failed=count_text(failed),
        needed=count_text(needed),
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
