"""The reference's text outputs: Markdown, JUnit XML and the ``--json`` result.

Markdown and JUnit XML are invarlock's bytes on the reference's vectors
(``33-report.md`` §§3-4); the result is ``invarlock/evidence-report-v2``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from sealeval.canonical import encode_invarlock
from sealeval.captured.pack_reader import EvidencePack
from sealeval.captured.report.extended import extended_junit, extended_markdown
from sealeval.captured.report.facts import (
    NEXT_STEPS,
    SERVICE_NOTE,
    WIDTH_FIRST_NOTE,
    checked_rows,
    compared_runs,
    exact_data,
    identifier_rows,
    json_block,
    pack_identities,
    pack_limitations,
    policy_preview,
    preview_block,
    report_view,
)
from sealeval.captured.report.model import (
    DECISION_LABELS,
    RESULT_FORMAT,
    ReportEntry,
    VerificationStatus,
)
from sealeval.captured.report.wording import (
    XML_INVALID,
    calculation_lines,
    change_text,
    check_rows,
    count_text,
    display_name,
    entry_notes,
    escape_char,
    explanation,
    interval_line,
    matched_count,
    md_dynamic,
    md_escape,
    mean_text,
    reading_rows,
    summary_text,
    terminal_safe,
)

# ---------------------------------------------------------------------------
# Markdown


def _md_bullets(rows: Iterable[tuple[str, str]]) -> list[str]:
    return [f"- **{md_escape(label)}:** {md_dynamic(value)}" for label, value in rows]


def _md_entry(entry: ReportEntry) -> list[str]:
    label = DECISION_LABELS[entry.decision]
    lines = [
        f"## {md_dynamic(display_name(entry.name))}: {md_dynamic(display_name(entry.slice))}",
        "",
        f"**{md_escape(label)}**. {md_escape(explanation(entry))}",
        "",
        "| Baseline | Subject | Change | Usable pairs |",
        "| --- | --- | --- | --- |",
        f"| {md_dynamic(mean_text(entry, entry.baseline_mean))} | "
        f"{md_dynamic(mean_text(entry, entry.subject_mean))} | {md_dynamic(change_text(entry))} | "
        f"{count_text(entry.usable)} |",
        "",
    ]
    if entry.binary and entry.evaluated:
        for side, mean in (("Baseline", entry.baseline_mean), ("Subject", entry.subject_mean)):
            matched = count_text(matched_count(entry, mean))
            lines += [f"{side}: {matched} of {count_text(entry.usable)} matched.", ""]
    lines += [
        f"Usable pairs: {count_text(len(entry.missing_ids))} missing · {count_text(entry.count)} "
        f"included · ≥ {count_text(entry.metric.minimum_count)} required.",
        "",
    ]
    if entry.evaluated:
        lines += [md_escape(interval_line(entry)), "", "### How to read this comparison", ""]
        for title, text in reading_rows(entry):
            lines += [f"**{md_escape(title)}:** {md_escape(text)}", ""]
        lines += ["### How this interval was calculated", ""]
        for paragraph in calculation_lines(entry):
            lines += [md_escape(paragraph), ""]
    lines += [
        "### Decision checks",
        "",
        "| Check | Observed | Required | Result |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        "| "
        + " | ".join(
            md_dynamic(cell) for cell in (row.label, row.observed, row.required, row.result)
        )
        + " |"
        for row in check_rows(entry)
    ]
    lines.append("")
    lines += [f"- {md_escape(note)}" for note in entry_notes(entry)]
    return lines


#: Report wordings: sealeval's own, or the reference's exact bytes (``compat="invarlock"``).
WORDINGS: Final = ("sealeval", "invarlock")
_TITLES: Final = {
    "sealeval": "# sealeval captured comparison",
    "invarlock": "# InvarLock captured comparison",
}
_SUITES: Final = {
    "sealeval": "sealeval recorded policy checks",
    "invarlock": "InvarLock recorded policy checks",
}


def _worded(text: str, wording: str) -> str:
    """Name sealeval's verifier in sealeval's wording (the reference's text is kept otherwise)."""
    return text if wording == "invarlock" else text.replace("invarlock verify", "sealeval verify")


def render_markdown(
    pack: EvidencePack,
    *,
    explain: bool = False,
    verification: VerificationStatus | None = None,
    extended: Mapping[str, Any] | None = None,
    wording: str = "sealeval",
) -> str:
    """Return the Markdown report of a pack (33-report.md §2.2).

    ``wording="invarlock"`` gives the reference's exact bytes (title
    "InvarLock captured comparison", "run invarlock verify"); the default
    names sealeval.

    Sections: decision and summary, what was compared, what was checked (it
    says that no verification was performed, or shows the caller's
    ``verification`` status without re-checking it), one section per metric
    entry in display order, next steps, scope and limitations, evidence
    identities, and — when display names differ from the recorded ones —
    the recorded identifiers. ``explain`` appends fenced JSON: each hosted
    side's declared service configuration (preview), the bound policy with
    configuration previews, and the report with ``missing_ids`` replaced by
    ``missing_count`` and the first 20 ids. ``extended`` (opt-in, a
    ``sealeval/extended-comparison-v1`` document of this pack) adds one
    section before the appendices; without it the bytes are invarlock's.

    Raises:
        ReportError: a consistency check failed, or ``verification``
            contradicts the pack (``verification_mismatch``).
    """
    if wording not in WORDINGS:
        raise ValueError("render_markdown: wording must be 'sealeval' or 'invarlock'")
    view = report_view(pack, verification)
    compared = compared_runs(pack)
    lines = [
        _TITLES[wording],
        "",
        f"**Recorded policy result: {md_escape(view.label)}**",
        "",
        md_escape(summary_text(view.entries)),
        "",
        "## What was compared",
        "",
        "",
        f"### {md_escape(compared.identity_label)}: {md_escape(compared.identity_state)}",
        "",
        f"- **Baseline:** {md_dynamic(compared.baseline_identity)}",
        f"- **Subject:** {md_dynamic(compared.subject_identity)}",
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
    lines += [
        "### Recorded changes",
        "",
        *(f"- {md_escape(change)}" for change in compared.changes),
    ]
    checked = [
        (label, _worded(value, wording)) for label, value in checked_rows(pack, verification)
    ]
    lines += ["", "## What was checked", "", *_md_bullets(checked), ""]
    if "decision_rule" in pack.report:
        lines[-1:-1] = _md_bullets([("Decision rule", WIDTH_FIRST_NOTE)])
    for entry in view.entries:
        lines += [*_md_entry(entry), ""]
    lines += ["## Next steps", ""]
    lines += [
        f"{number}. {md_escape(_worded(step, wording))}"
        for number, step in enumerate(NEXT_STEPS, 1)
    ]
    lines += ["", "## Scope and limitations", ""]
    lines += [f"- {md_dynamic(item)}" for item in pack_limitations(pack)]
    lines += ["", "## Evidence identities", "", *_md_bullets(pack_identities(pack))]
    identifiers = identifier_rows(view.entries)
    if identifiers:
        lines += ["", "## Recorded metric and scope identifiers", "", *json_block(identifiers)]
    if extended is not None:
        lines += ["", *extended_markdown(pack, extended, md_dynamic)]
    if explain:
        for side, run in (("Baseline", pack.baseline), ("Subject", pack.subject)):
            if run.service_identity is not None:
                preview = preview_block(run.service_identity.configuration, SERVICE_NOTE)
                lines += ["", f"## {side} declared service configuration", ""]
                lines += json_block(preview)
        lines += ["", f"## {md_escape('Bound policy (configuration preview)')}", ""]
        lines += json_block(policy_preview(pack))
        lines += ["", "## Exact comparison data", "", *json_block(exact_data(pack))]
    return terminal_safe("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# JUnit XML


def _xml_text(text: str) -> str:
    r"""Show characters not allowed in XML 1.0 as ``\uXXXX`` / ``\UXXXXXXXX``."""
    return XML_INVALID.sub(escape_char, text)


def render_junit(
    pack: EvidencePack, *, extended: Mapping[str, Any] | None = None, wording: str = "sealeval"
) -> bytes:
    """Return the JUnit XML of a pack (33-report.md §2.1).

    ``wording="invarlock"`` gives the reference's exact bytes (suite name
    "InvarLock recorded policy checks"); the default names sealeval.

    One ``<testsuite>`` whose ``failures`` count the ``regression`` entries
    (each with a ``<failure message=…/>``) and ``errors`` the
    ``insufficient_evidence`` entries (``<error message=…/>``); one
    ``<testcase name=metric classname=scope/>`` per entry in display order.
    The message is the entry's explanation. ``extended`` (opt-in) adds
    ``<properties>`` and the flip ids (``<system-out>``) to each testcase.

    Raises:
        ReportError: a consistency check failed.
    """
    if wording not in WORDINGS:
        raise ValueError("render_junit: wording must be 'sealeval' or 'invarlock'")
    entries = report_view(pack, None).entries
    failures = sum(entry.decision == "regression" for entry in entries)
    errors = sum(entry.decision == "insufficient_evidence" for entry in entries)
    root = ET.Element(
        "testsuite",
        {
            "name": _SUITES[wording],
            "tests": str(len(entries)),
            "failures": str(failures),
            "errors": str(errors),
        },
    )
    cases: dict[tuple[str, str], ET.Element] = {}
    for entry in entries:
        case = ET.SubElement(
            root, "testcase", {"name": _xml_text(entry.name), "classname": _xml_text(entry.slice)}
        )
        cases[(entry.name, entry.slice)] = case
        if entry.decision != "pass":
            tag = "failure" if entry.decision == "regression" else "error"
            ET.SubElement(case, tag, {"message": _xml_text(explanation(entry))})
    if extended is not None:
        extended_junit(pack, extended, cases, _xml_text)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data


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
    return terminal_safe(encode_invarlock(document).decode("utf-8"))
