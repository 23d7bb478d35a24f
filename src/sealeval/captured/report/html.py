"""sealeval's own self-contained reviewer page (inline CSS and SVG, no scripts).

No external resource, no script, deterministic bytes; see ``docs/reports.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.captured.pack_reader import EvidencePack
from sealeval.captured.policy import PolicyMetric
from sealeval.captured.report.extended import extended_html
from sealeval.captured.report.facts import (
    NEXT_STEPS,
    SERVICE_NOTE,
    WIDTH_FIRST_NOTE,
    checked_rows,
    compared_runs,
    identifier_rows,
    pack_identities,
    pack_limitations,
    policy_preview,
    preview_block,
    report_view,
)
from sealeval.captured.report.model import (
    DECISION_LABELS,
    DISPLAY_RANK,
    MISSING_IDS_PREVIEW,
    NOT_EVALUATED,
    NOT_MET,
    PASSED,
    ReportEntry,
    VerificationStatus,
    overall_decision,
)
from sealeval.captured.report.wording import (
    calculation_lines,
    change_text,
    change_unit,
    check_rows,
    count_text,
    display_name,
    entry_notes,
    estimate_value,
    explanation,
    higher_is_better,
    html_json,
    html_rich,
    html_text,
    interval_line,
    level_text,
    mean_text,
    plain_text,
    reading_rows,
    scaled,
    significant,
    summary_text,
    threshold_value,
    with_unit,
)

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
    PASSED: "check-pass",
    NOT_MET: "check-fail",
    NOT_EVALUATED: "check-na",
}
_GLYPHS: Final[Mapping[str, str]] = {
    "regression": "✗ not met",
    "insufficient_evidence": "? more evidence",
    "pass": "✓ satisfied",
}


def _badge(decision: str) -> str:
    return f'<span class="badge {decision}">{html_text(DECISION_LABELS[decision])}</span>'


def _dl(rows: Iterable[tuple[str, str]], *, code: bool = False) -> str:
    items = []
    for label, value in rows:
        shown = f'<code class="digest">{html_text(value)}</code>' if code else html_text(value)
        items.append(f"<dt>{html_text(label)}</dt><dd>{shown}</dd>")
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
            f"{scope}: no estimate or interval ({count_text(len(entry.missing_ids))} missing of "
            f"{count_text(entry.count)} included pairs; {count_text(entry.metric.minimum_count)} "
            f"required). {label}."
        )
    interval = entry.interval
    assert interval is not None
    unit = change_unit(entry)
    estimate = "ratio" if entry.nll else "change"
    return (
        f"{scope}: {estimate} {change_text(entry)}, {level_text(interval.mass)} interval "
        f"{significant(scaled(entry, interval.lower))} to "
        f"{significant(scaled(entry, interval.upper))} {unit}. "
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
    threshold = threshold_value(first)
    neutral = 1.0 if first.nll else 0.0
    values = [threshold, neutral]
    for entry in entries:
        if entry.interval is not None:
            values += [
                scaled(entry, entry.interval.lower),
                scaled(entry, entry.interval.upper),
                estimate_value(entry),
            ]
    return _Plot(
        scale=_scale(values, _PLOT_LABELS + 10, _PLOT_WIDTH - 24),
        top=_PLOT_TOP,
        bottom=_PLOT_TOP + _PLOT_ROW * len(entries),
        label_width=_PLOT_LABELS,
        threshold=threshold,
        neutral=neutral,
        unit=change_unit(first),
        relation="≥" if higher_is_better(first) else "≤",
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
            f"{html_text(significant(tick))}</text>"
        )
    x_neutral = _coordinate(scale.x(plot.neutral))
    anchor = "start" if x_threshold < (scale.left + scale.right) / 2 else "end"
    offset = 4 if anchor == "start" else -4
    bound = f"Policy bound {plot.relation} {significant(plot.threshold)} {plot.unit}"
    parts.append(
        f'<line class="axis" x1="{_coordinate(scale.left)}" x2="{_coordinate(scale.right)}" '
        f'y1="{bottom}" y2="{bottom}"/>'
        f'<line class="neutral" x1="{x_neutral}" x2="{x_neutral}" y1="{top - 6}" y2="{bottom}"/>'
        f'<line class="threshold" x1="{_coordinate(x_threshold)}" '
        f'x2="{_coordinate(x_threshold)}" y1="{top - 14}" y2="{bottom}"/>'
        f'<text class="small" x="{_coordinate(x_threshold + offset)}" y="{top - 18}" '
        f'text-anchor="{anchor}">{html_text(bound)}</text>'
        f'<text class="small" x="10" y="{top - 18}">{html_text(f"Scope ({plot.unit})")}</text>'
    )
    return parts


def _plot_row(plot: _Plot, entry: ReportEntry, index: int) -> str:
    """One scope: label, decision glyph, interval bar with whiskers and the estimate dot."""
    scale = plot.scale
    y = plot.top + _PLOT_ROW * index + _PLOT_ROW // 2
    parts = [
        f'<g class="row {entry.decision}"><title>{html_text(_row_title(entry))}</title>'
        f'<text class="label" x="10" y="{y + 4}">{html_text(display_name(entry.slice))}</text>'
        f'<text class="small" x="{plot.label_width - 4}" y="{y + 4}" text-anchor="end">'
        f"{html_text(_GLYPHS[entry.decision])}</text>"
    ]
    if entry.interval is not None:
        x1 = _coordinate(scale.x(scaled(entry, entry.interval.lower)))
        x2 = _coordinate(scale.x(scaled(entry, entry.interval.upper)))
        parts.append(f'<line class="range" x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>')
        parts += [
            f'<line class="range" x1="{x}" x2="{x}" y1="{y - 5}" y2="{y + 5}"/>' for x in (x1, x2)
        ]
        cx = _coordinate(scale.x(estimate_value(entry)))
        parts.append(f'<circle class="estimate" cx="{cx}" cy="{y}" r="5"/>')
    else:
        if entry.missing_ids:
            note = f"No interval: {count_text(len(entry.missing_ids))} missing results"
        else:
            note = (
                f"No interval: {count_text(entry.count)} of "
                f"{count_text(entry.metric.minimum_count)} required pairs"
            )
        parts.append(
            f'<text class="note" x="{_coordinate(scale.left + 6)}" y="{y + 4}">'
            f"{html_text(note)}</text>"
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
        f"{significant(plot.threshold)} {plot.unit}; no change at {significant(plot.neutral)}. "
        + " ".join(_row_title(entry) for entry in entries)
    )
    ids = f"forest-{number}-title forest-{number}-desc"
    parts = [
        f'<svg viewBox="0 0 {_PLOT_WIDTH} {height}" width="{_PLOT_WIDTH}" height="{height}" '
        f'role="img" aria-labelledby="{ids}" class="forest-plot" '
        f'data-metric="{html_text(metric.name)}">'
        f'<title id="forest-{number}-title">{html_text(title)}</title>'
        f'<desc id="forest-{number}-desc">{html_text(desc)}</desc>',
        *_plot_axes(plot, higher_is_better(first)),
        *(_plot_row(plot, entry, index) for index, entry in enumerate(entries)),
        "</svg>",
    ]
    return "".join(parts)


def _missing_cell(entry: ReportEntry) -> str:
    if not entry.missing_ids:
        return '<span class="muted">none</span>'
    shown = entry.missing_ids[:MISSING_IDS_PREVIEW]
    items = "".join(f"<li><code>{html_text(item)}</code></li>" for item in shown)
    rest = len(entry.missing_ids) - len(shown)
    more = (
        f'<p class="muted">and {count_text(rest)} more (first {MISSING_IDS_PREVIEW} shown)</p>'
        if rest
        else ""
    )
    return f'<ul class="missing">{items}</ul>{more}'


def _interval_cell(entry: ReportEntry) -> str:
    if entry.interval is None:
        return "Unavailable"
    interval = entry.interval
    return (
        f"{significant(scaled(entry, interval.lower))} to "
        f"{significant(scaled(entry, interval.upper))} {change_unit(entry)}"
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
            html_text(mean_text(entry, entry.baseline_mean)),
            html_text(mean_text(entry, entry.subject_mean)),
            html_text(change_text(entry)),
            html_text(_interval_cell(entry)),
            count_text(entry.usable),
            count_text(len(entry.missing_ids)),
            count_text(entry.count),
            "≥ " + count_text(metric.minimum_count),
            _missing_cell(entry),
        ]
        rows.append(
            f'<tr id="result-{entry.position + 1}"><th scope="row">'
            f"{html_text(display_name(entry.slice))}</th>"
            + "".join(f"<td>{cell}</td>" for cell in cells)
            + "</tr>"
        )
    caption = f"{display_name(metric.name)}: per-scope counts and missing ids"
    return (
        f'<div class="scroll" role="region" tabindex="0" aria-label="{html_text(caption)}">'
        f'<table class="scope-table" id="scopes-{number}"><caption>{html_text(caption)}</caption>'
        + head
        + "<tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _entry_details(entry: ReportEntry) -> str:
    scope = display_name(entry.slice)
    parts = [
        f"<details><summary>{html_text(scope)}: "
        f"{html_text(DECISION_LABELS[entry.decision])} — decision "
        "checks and method</summary>",
        f"<p>{html_text(explanation(entry))}</p>",
    ]
    if entry.evaluated:
        parts.append(f"<p>{html_rich(interval_line(entry))}</p>")
    rows = "".join(
        f'<tr><th scope="row">{html_text(row.label)}'
        + (f'<br><small class="muted">{html_text(row.detail)}</small>' if row.detail else "")
        + f"</th><td>{html_text(row.observed)}</td><td>{html_text(row.required)}</td>"
        f'<td class="{_CHECK_CLASSES[row.result]}">{html_text(row.result)}</td></tr>'
        for row in check_rows(entry)
    )
    parts.append(
        '<table><caption>Decision checks</caption><thead><tr><th scope="col">Check</th>'
        '<th scope="col">Observed</th><th scope="col">Required</th>'
        f'<th scope="col">Result</th></tr></thead><tbody>{rows}</tbody></table>'
    )
    parts.append(
        "<ul>" + "".join(f"<li>{html_rich(note)}</li>" for note in entry_notes(entry)) + "</ul>"
    )
    if entry.evaluated:
        parts.append('<h4>How to read this comparison</h4><dl class="facts">')
        parts += [
            f"<dt>{html_text(title)}</dt><dd>{html_text(text)}</dd>"
            for title, text in reading_rows(entry)
        ]
        parts.append("</dl><h4>How this interval was calculated</h4>")
        parts += [
            f"<p>{html_text(plain_text(paragraph))}</p>" for paragraph in calculation_lines(entry)
        ]
    parts.append("</details>")
    return "".join(parts)


def _metric_section(metric: PolicyMetric, entries: Sequence[ReportEntry], number: int) -> str:
    first = entries[0]
    worst = overall_decision(entry.decision for entry in entries)
    unit = change_unit(first)
    relation = "≥" if higher_is_better(first) else "≤"
    if first.nll:
        rule = f"upper ratio bound {relation} {significant(threshold_value(first))}"
    else:
        side = "lower" if higher_is_better(first) else "upper"
        rule = f"{side} interval bound {relation} {significant(threshold_value(first))} {unit}"
    better = "higher" if metric.direction == "higher" else "lower"
    facts = (
        f"Kind <code>{html_text(metric.kind)}</code> · {better} is better · policy bound: "
        f"{html_text(rule)} · maximum interval width "
        f"{html_text(with_unit(first, metric.maximum_interval_width))} · at least "
        f"{count_text(metric.minimum_count)} included pairs"
    )
    caption = (
        f"Estimate (dot) and {html_text(level_text(0.95))} interval (bar) per scope; "
        "the dashed red line "
        "is the policy bound, the shaded side is allowed, the dotted line marks no change. The "
        "table below gives the same values as text."
    )
    return (
        f'<section class="panel metric {worst}" id="metric-{number}" '
        f'aria-labelledby="metric-{number}-heading">'
        f'<h2 id="metric-{number}-heading">{html_text(display_name(metric.name))} '
        f"{_badge(worst)}</h2>"
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
            f"{html_text(display_name(entry.name))} · "
            f"{html_text(display_name(entry.slice))}</a></th>"
            f"<td>{_badge(entry.decision)}</td>"
            f"<td>{html_text(mean_text(entry, entry.baseline_mean))}</td>"
            f"<td>{html_text(mean_text(entry, entry.subject_mean))}</td>"
            f"<td>{html_text(change_text(entry))}</td>"
            f"<td>{count_text(entry.usable)}</td>"
            f"<td>{html_text(explanation(entry))}</td></tr>"
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
        for label, value in checked_rows(pack, verification)
    ]
    if "decision_rule" in pack.report:
        rows.append(("Decision rule", WIDTH_FIRST_NOTE))
    return (
        '<section class="panel" id="verification" aria-labelledby="verification-heading">'
        '<h2 id="verification-heading">Verification status</h2>'
        f'<p class="status" id="verification-status"><strong>{html_text(status)}</strong></p>'
        + _dl(rows)
        + "</section>"
    )


def _compared_section(pack: EvidencePack) -> str:
    compared = compared_runs(pack)
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
        + "".join(f"<li>{html_text(change)}</li>" for change in compared.changes)
        + '</ul><p class="muted">sealeval derives no model or prompt fields from record '
        "context: context can carry inputs, and derived fields could mislead.</p></section>"
    )
    return "".join(parts)


def _bindings_section(pack: EvidencePack, entries: Sequence[ReportEntry]) -> str:
    identifiers = identifier_rows(entries)
    extra = ""
    if identifiers:
        rows = "".join(
            f"<tr><td>{row['result']}</td><td>{html_text(row['display_metric'])}</td>"
            f"<td><code>{html_text(row['metric'])}</code></td><td>{html_text(row['display_scope'])}</td>"
            f"<td><code>{html_text(row['scope'])}</code></td></tr>"
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
            preview = preview_block(run.service_identity.configuration, SERVICE_NOTE)
            previews.append((f"{side} declared service configuration", preview))
    previews.append(("Bound policy (configuration preview)", policy_preview(pack)))
    details = "".join(
        f"<details><summary>{html_text(title)}</summary><pre><code>{html_json(value)}</code></pre></details>"
        for title, value in previews
    )
    return (
        '<section class="panel" id="bindings" aria-labelledby="bindings-heading">'
        '<h2 id="bindings-heading">Bindings and evidence identities</h2>'
        + _dl(pack_identities(pack), code=True)
        + extra
        + details
        + "</section>"
    )


def render_html(
    pack: EvidencePack,
    *,
    verification: VerificationStatus | None = None,
    extended: Mapping[str, Any] | None = None,
) -> str:
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
    Deterministic: the same pack gives the same bytes. ``extended`` (opt-in,
    a ``sealeval/extended-comparison-v1`` document of this pack) adds a
    section with p-values, controlled decisions, flips and how many more pairs.

    Raises:
        ReportError: a consistency check failed, or ``verification``
            contradicts the pack.
    """
    view = report_view(pack, verification)
    by_metric: dict[str, list[ReportEntry]] = {metric.name: [] for metric in pack.policy.metrics}
    for entry in sorted(view.entries, key=lambda item: item.position):
        by_metric[entry.name].append(entry)
    metrics = sorted(
        pack.policy.metrics,
        key=lambda metric: (
            DISPLAY_RANK[overall_decision(entry.decision for entry in by_metric[metric.name])],
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
        f'<h1 id="decision-heading">{html_text(view.label)}</h1>'
        f'<p class="summary">{html_rich(summary_text(view.entries))}</p></section>',
        '<aside class="notice" id="authority-notice" role="note" '
        'aria-labelledby="authority-heading"><h2 id="authority-heading">No verification '
        f"authority</h2><p>{html_text(notice)}</p></aside>",
        _verification_section(pack, verification),
        '<section class="panel" id="overview" aria-labelledby="overview-heading">'
        '<h2 id="overview-heading">Results at a glance</h2>'
        + _overview(view.entries)
        + "</section>",
    ]
    for number, metric in enumerate(metrics, 1):
        body.append(_metric_section(metric, by_metric[metric.name], number))
    if extended is not None:
        body.append(extended_html(pack, extended))
    body.append(_compared_section(pack))
    body.append(_bindings_section(pack, view.entries))
    body.append(
        '<section class="panel" id="limitations"><h2>Scope and limitations</h2><ul>'
        + "".join(f"<li>{html_text(item)}</li>" for item in pack_limitations(pack))
        + "</ul></section>"
    )
    body.append(
        '<section class="panel" id="next-steps"><h2>Next steps</h2><ol>'
        + "".join(
            f"<li>{html_text(step.replace('invarlock verify', 'sealeval verify'))}</li>"
            for step in NEXT_STEPS
        )
        + "</ol></section>"
    )
    title = f"{view.label} · sealeval captured comparison report"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">"
        f"<title>{html_text(title)}</title><style>{_CSS.strip()}</style></head><body><main>"
        + "".join(body)
        + "</main></body></html>\n"
    )
