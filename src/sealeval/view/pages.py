"""HTML pages of the viewer: pure functions from loaded items to escaped, self-contained HTML.

Every page is one document with an inline stylesheet and no script, image,
font or frame; every value is escaped (:func:`html.escape`), including
record content, which the viewer shows to the local user on purpose. The
pack page embeds the body of the report module's own HTML
(:func:`sealeval.captured.report.render_html`: decision banner, forest plots,
per-scope tables); the cases page lists the per-record paired outcomes
(:mod:`.outcomes`) with a search box and metric, slice and change filters
that work by plain ``GET`` forms.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode

from sealeval.canonical import pretty
from sealeval.captured.pack_reader import EvidencePack
from sealeval.captured.report import render_html
from sealeval.captured.run import Run
from sealeval.errors import SealevalError
from sealeval.view.catalog import Catalog, Item
from sealeval.view.load import Loaded, run_summary
from sealeval.view.outcomes import CHANGES, PairedOutcome, counts, iter_pack_outcomes

__all__ = [
    "MAX_ROWS",
    "case_page",
    "error_page",
    "index_page",
    "item_page",
]

#: Rows shown per table (the rest is counted, not shown).
MAX_ROWS: Final = 500
#: Characters of one shown value (input, expected, output), the rest elided.
MAX_VALUE_CHARS: Final = 4_000
_FILTER_CHANGES: Final = ("flipped", *CHANGES, "all")
_REPORT_STYLE: Final = re.compile(r"<style>(.*?)</style>", re.DOTALL)
_REPORT_MAIN: Final = re.compile(r"<main>(.*)</main>", re.DOTALL)

CSS: Final = """
:root{color-scheme:light;--ink:#1b1d1a;--muted:#55594f;--line:#d6d3c8;--paper:#fbfaf6;
--fail:#a4261c;--fail-bg:#fbe9e6;--warn:#7a5200;--warn-bg:#fdf3dc;--pass:#1d6a36;
--pass-bg:#e5f4e8;--accent:#2f4fa8}
*{box-sizing:border-box}
body{margin:0;background:var(--paper);color:var(--ink);font:15px/1.5 system-ui,sans-serif}
nav.top{background:#1b1d1a;color:#fff;padding:10px 20px;display:flex;gap:18px;align-items:center}
nav.top a{color:#fff}nav.top strong{font-size:17px}
main.view{max-width:1280px;margin:0 auto;padding:18px 20px 64px}
a{color:var(--accent)}
table{border-collapse:collapse;width:100%;margin:8px 0 12px;font-size:14px}
th,td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left;vertical-align:top}
thead th{background:#f3f1ea;position:sticky;top:0}
pre.value{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;max-height:14em;overflow:auto;
font:13px/1.4 ui-monospace,monospace;background:#fff;border:1px solid var(--line);
border-radius:4px;padding:4px 6px}
tr.regressed td.change{color:var(--fail);font-weight:700}
tr.improved td.change{color:var(--pass);font-weight:700}
tr.missing td.change{color:var(--warn)}
.decision-pill{display:inline-block;border-radius:999px;padding:1px 10px;font-weight:600}
.decision-pill.regression{background:var(--fail-bg);color:var(--fail)}
.decision-pill.insufficient_evidence{background:var(--warn-bg);color:var(--warn)}
.decision-pill.pass{background:var(--pass-bg);color:var(--pass)}
form.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:end;background:#fff;
border:1px solid var(--line);border-radius:8px;padding:10px 12px;margin:10px 0}
form.filters label{display:flex;flex-direction:column;font-size:13px;color:var(--muted)}
form.filters input[type=search]{min-width:260px}
.counts span{margin-right:14px}
.note{color:var(--muted);font-size:13px}
section.panel{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px 18px;
margin:14px 0}
"""
_KIND_TITLES: Final = {
    "pack": "Evidence packs",
    "comparison": "Comparison reports",
    "run": "Runs",
    "receipt": "Verification receipts",
}


def _h(value: object) -> str:
    return html.escape(str(value), quote=True)


def _link(kind: str, path: str, **query: str) -> str:
    return f"/{kind}?" + urlencode({"path": path, **query})


def _thawed(value: object) -> object:
    """Frozen record values (read-only mappings) as plain JSON values."""
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


def _shown(value: Any) -> str:
    """Return a record value as text (JSON unless a string); long values elided."""
    text = value if type(value) is str else pretty(value, indent=1, default=_thawed)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + f" … ({len(text) - MAX_VALUE_CHARS} more characters)"
    return text


def _value_cell(value: Any, css: str) -> str:
    return f'<td class="{css}"><pre class="value">{_h(_shown(value))}</pre></td>'


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.6g}"


def page(title: str, body: str, *, extra_css: str = "") -> str:
    """Return one complete page (inline styles only; the server adds the CSP header)."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_h(title)} · sealeval view</title>"
        f"<style>{CSS.strip()}{extra_css}</style></head><body>"
        '<nav class="top"><strong>sealeval view</strong><a href="/">Everything found</a>'
        '<span class="note">read-only · local</span></nav>'
        f'<main class="view">{body}</main></body></html>\n'
    )


def error_page(status: int, code: str) -> str:
    """Return a refusal page: the status and a closed code, nothing the request carried."""
    return page(f"{status}", f'<h1>{status}</h1><p id="error-code">{_h(code)}</p>')


def _table(headers: Sequence[str], rows: Iterable[str], *, ident: str = "") -> str:
    head = "".join(f'<th scope="col">{_h(name)}</th>' for name in headers)
    attribute = f' id="{ident}"' if ident else ""
    return f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def index_page(catalog: Catalog) -> str:
    """List everything found, by kind."""
    parts = ["<h1>Everything found</h1>"]
    if not catalog.items:
        parts.append('<p id="nothing-found">No runs, comparisons, packs or receipts here.</p>')
    for kind, title in _KIND_TITLES.items():
        items = [item for item in catalog.items if item.kind == kind]
        if not items:
            continue
        rows = (
            f'<tr><td><a href="{_h(_link(kind, item.path))}">{_h(item.path)}</a></td></tr>'
            for item in items
        )
        parts.append(f'<section class="panel" id="kind-{kind}"><h2>{_h(title)}</h2>')
        parts.append(_table(["path"], rows) + "</section>")
    notes = []
    if catalog.skipped_links:
        notes.append(f"{catalog.skipped_links} symbolic links skipped (never followed).")
    if catalog.truncated:
        notes.append("The walk stopped at its limits; some entries were not examined.")
    if notes:
        parts.append(f'<p class="note">{_h(" ".join(notes))}</p>')
    return page("Everything found", "".join(parts))


# ---------------------------------------------------------------------------
# Items


def item_page(loaded: Loaded) -> str:
    """Return the page of one item (or of the code that refused it)."""
    item = loaded.item
    if loaded.error is not None:
        body = (
            f"<h1>{_h(item.path)}</h1><p>Could not be read as a {_h(item.kind)}: "
            f'<code id="error-code">{_h(loaded.error)}</code></p>'
        )
        return page(item.path, body)
    if item.kind == "pack":
        return _pack_page(item, loaded.value)
    if item.kind == "run":
        return _run_page(item, loaded.value)
    if item.kind == "receipt":
        return _receipt_page(item, loaded.value)
    return _comparison_page(item, loaded.value)


def _facts(rows: Iterable[tuple[str, object]]) -> str:
    cells = "".join(
        f'<tr><th scope="row">{_h(name)}</th><td><code>{_h(value)}</code></td></tr>'
        for name, value in rows
    )
    return f'<table class="facts"><tbody>{cells}</tbody></table>'


def _refused(item: Item, error: SealevalError) -> str:
    """Return the item's page showing the closed code met while streaming its runs."""
    return item_page(Loaded(item, None, error.code))


def _pack_page(item: Item, pack: EvidencePack) -> str:
    report = render_html(pack)
    style = _REPORT_STYLE.search(report)
    main = _REPORT_MAIN.search(report)
    try:
        outcomes = counts(iter_pack_outcomes(pack))
    except SealevalError as error:
        return _refused(item, error)
    cases = _link("cases", item.path)
    summary = (
        f'<section class="panel" id="paired-summary"><h2>Per-record paired outcomes</h2>'
        f'<p class="counts"><span>regressed: <strong>{outcomes["regressed"]}</strong></span>'
        f"<span>improved: <strong>{outcomes['improved']}</strong></span>"
        f"<span>missing: {outcomes['missing']}</span><span>unchanged: {outcomes['unchanged']}"
        f'</span></p><p><a id="cases-link" href="{_h(cases)}">Which cases flipped</a></p>'
        "</section>"
    )
    embedded = main.group(1) if main is not None else ""
    return page(
        item.path,
        f'<p class="note">Evidence pack <code>{_h(item.path)}</code></p>{summary}{embedded}',
        extra_css=style.group(1) if style is not None else "",
    )


def _matches(outcome: PairedOutcome, query: str) -> bool:
    if not query:
        return True
    needle = query.casefold()
    haystack = (
        outcome.record_id,
        _shown(outcome.baseline.input),
        _shown(outcome.baseline.expected),
        _shown(outcome.baseline.output),
        _shown(outcome.subject.output),
    )
    return any(needle in text.casefold() for text in haystack)


def _select(name: str, label: str, options: Sequence[str], chosen: str) -> str:
    rendered = "".join(
        f'<option value="{_h(option)}"{" selected" if option == chosen else ""}>{_h(option)}'
        "</option>"
        for option in options
    )
    return f'<label>{_h(label)}<select name="{name}" id="filter-{name}">{rendered}</select></label>'


def _wanted(outcome: PairedOutcome, metric: str, scope: str, change: str) -> bool:
    return (
        metric in ("all", outcome.metric)
        and (scope == "all" or scope in outcome.scopes)
        and (
            change in ("all", outcome.change)
            or (change == "flipped" and outcome.change in ("regressed", "improved"))
        )
    )


def _selected(
    pack: EvidencePack, filters: tuple[str, str, str], text: str
) -> tuple[list[PairedOutcome], int, int]:
    """Return the outcomes shown, how many match and how many there are (one streamed pass).

    Shown: the matching outcomes by change class (display order), baseline
    order within a class, the first :data:`MAX_ROWS`; so at most
    :data:`MAX_ROWS` per class are kept while the outcomes stream past.
    """
    kept: dict[str, list[PairedOutcome]] = {name: [] for name in CHANGES}
    matching = total = 0
    for outcome in iter_pack_outcomes(pack):
        total += 1
        if _wanted(outcome, *filters) and _matches(outcome, text):
            matching += 1
            if len(kept[outcome.change]) < MAX_ROWS:
                kept[outcome.change].append(outcome)
    shown = [outcome for name in CHANGES for outcome in kept[name]][:MAX_ROWS]
    return shown, matching, total


def case_page(loaded: Loaded, query: Mapping[str, str]) -> str:
    """Return the paired outcomes of a pack, filtered by q, metric, slice and change."""
    item = loaded.item
    if loaded.error is not None or item.kind != "pack":
        return item_page(loaded)
    pack: EvidencePack = loaded.value
    metrics = ["all", *(metric.name for metric in pack.policy.metrics)]
    scopes = ["all", "overall", *(item.name for item in pack.policy.slices)]
    metric = query.get("metric", "all")
    scope = query.get("slice", "all")
    change = query.get("change", "flipped")
    text = query.get("q", "")
    metric = metric if metric in metrics else "all"
    scope = scope if scope in scopes else "all"
    change = change if change in _FILTER_CHANGES else "flipped"
    try:
        selected, matching, total = _selected(pack, (metric, scope, change), text)
    except SealevalError as error:
        return _refused(item, error)
    form = (
        f'<form class="filters" method="get" action="/cases" id="filters">'
        f'<input type="hidden" name="path" value="{_h(item.path)}">'
        f'<label>Search id, input, expected, outputs<input type="search" name="q" id="filter-q" '
        f'value="{_h(text)}"></label>'
        + _select("metric", "Metric", metrics, metric)
        + _select("slice", "Slice", scopes, scope)
        + _select("change", "Change", _FILTER_CHANGES, change)
        + '<button type="submit" id="apply">Apply</button></form>'
    )
    rows = []
    for outcome in selected:
        rows.append(
            f'<tr class="{outcome.change}" data-id="{_h(outcome.record_id)}">'
            f'<td class="id"><code>{_h(outcome.record_id)}</code></td>'
            f"<td>{_h(outcome.metric)}</td><td>{_h(', '.join(outcome.scopes))}</td>"
            f'<td class="change">{_h(outcome.transition)}</td>'
            f'<td class="baseline-value">{_h(_number(outcome.baseline_value))}</td>'
            f'<td class="subject-value">{_h(_number(outcome.subject_value))}</td>'
            + _value_cell(outcome.baseline.input, "input")
            + _value_cell(outcome.baseline.expected, "expected")
            + _value_cell(outcome.baseline.output, "baseline-output")
            + _value_cell(outcome.subject.output, "subject-output")
            + "</tr>"
        )
    shown = (
        f'<p class="note" id="shown">{len(selected)} of {matching} matching '
        f"pairs shown ({total} pair-metric outcomes in the pack).</p>"
    )
    table = _table(
        [
            "case",
            "metric",
            "scopes",
            "change",
            "baseline",
            "candidate",
            "input",
            "expected",
            "baseline output",
            "candidate output",
        ],
        rows,
        ident="flipped-cases",
    )
    decision = pack.decision
    body = (
        f'<h1>Which cases flipped <span class="decision-pill {_h(decision)}" id="decision-pill">'
        f"{_h(decision)}</span></h1>"
        f'<p><a href="{_h(_link("pack", item.path))}">Back to the report</a> · baseline '
        f"<code>{_h(pack.baseline.run_id)}</code> vs candidate "
        f"<code>{_h(pack.subject.run_id)}</code></p>"
        + form
        + shown
        + table
        + '<p class="note">Per-record values are recomputed for display with the policy\'s '
        "scorers; the decision is the stored report's.</p>"
    )
    return page(f"Cases · {item.path}", body)


def _run_page(item: Item, run: Run) -> str:
    facts = _facts(run_summary(run).items())
    rows = [
        f'<tr data-id="{_h(record.id)}"><td><code>{_h(record.id)}</code></td>'
        + _value_cell(record.input, "input")
        + _value_cell(record.expected, "expected")
        + _value_cell(record.output, "output")
        + f"<td>{_h(_shown(record.scores))}</td>"
        + f"<td>{_h(_shown(record.metadata))}</td>"
        + f"<td>{_h('' if record.error is None else 'errored')}</td></tr>"
        for record in run.records[:MAX_ROWS]
    ]
    table = _table(
        ["id", "input", "expected", "output", "scores", "slice tags", "error"],
        rows,
        ident="records",
    )
    total = len(run.records)
    note = f'<p class="note">{min(total, MAX_ROWS)} of {total} records shown.</p>'
    return page(item.path, f"<h1>Run <code>{_h(run.run_id)}</code></h1>{facts}{note}{table}")


def _comparison_page(item: Item, document: Any) -> str:
    if not isinstance(document, Mapping):
        return page(item.path, '<p id="error-code">invalid_document</p>')
    decision = str(document.get("decision", ""))
    rows = []
    entries = document.get("metrics")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        interval = entry.get("interval")
        bounds = (
            f"[{interval.get('lower')}, {interval.get('upper')}]"
            if isinstance(interval, Mapping)
            else "—"
        )
        reasons = entry.get("reasons")
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{_h(value)}</td>"
                for value in (
                    entry.get("name"),
                    entry.get("slice"),
                    entry.get("decision"),
                    entry.get("count"),
                    entry.get("baseline_mean"),
                    entry.get("subject_mean"),
                    entry.get("delta"),
                    bounds,
                    "; ".join(map(str, reasons)) if isinstance(reasons, list) else "",
                )
            )
            + "</tr>"
        )
    bindings = document.get("bindings")
    facts = _facts(bindings.items()) if isinstance(bindings, Mapping) else ""
    table = _table(
        [
            "metric",
            "slice",
            "decision",
            "pairs",
            "baseline",
            "candidate",
            "delta",
            "interval",
            "reasons",
        ],
        rows,
        ident="entries",
    )
    body = (
        f'<h1>Comparison <span class="decision-pill {_h(decision)}" id="decision-pill">'
        f'{_h(decision)}</span></h1><p class="note">A comparison report as found (shown, not '
        "verified).</p>" + facts + table
    )
    return page(item.path, body)


def _receipt_page(item: Item, statement: Mapping[str, Any]) -> str:
    verdict = statement.get("verdict")
    anchors = statement.get("anchors")
    rows: list[tuple[str, object]] = [
        ("pack_manifest_digest", statement.get("pack_manifest_digest"))
    ]
    if isinstance(verdict, Mapping):
        rows += [(f"verdict.{key}", value) for key, value in verdict.items()]
    if isinstance(anchors, Mapping):
        rows += [(f"anchors.{key}", value) for key, value in anchors.items()]
    body = (
        '<h1>Verification receipt</h1><p class="note">Its schema was checked; its signature '
        "is checked by <code>sealeval verify</code>, not here.</p>" + _facts(rows)
    )
    return page(item.path, body)
