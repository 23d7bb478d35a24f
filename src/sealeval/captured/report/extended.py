"""Opt-in extended statistics in the readable reports (sealeval, never invarlock bytes).

:func:`extended_for_pack` computes a ``sealeval/extended-comparison-v1``
document from the runs and policy an evidence pack holds (this re-scores the
runs, streamed with memory bounded by their record count: the section says
so) and refuses it unless its comparison is the one the pack stores
(``extended_mismatch``). The renderers add one section to
Markdown and HTML and per-testcase properties to JUnit XML only when given
such a document; without it every output keeps its bytes.

Shown: per metric x scope the p-value, the adjusted p-value, the
multiplicity-controlled decision, the flips (right->wrong, wrong->right: counts
and the first K record ids, checked to be ids of the runs) and, for
``insufficient_evidence``, about how many more paired cases the scope needs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from contextlib import ExitStack
from typing import IO, Any, Final

from sealeval._progress import Progress
from sealeval._validate import thaw_json
from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured.comparison import (
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    compare_run_files,
    scope_values_files,
)
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.extended import (
    EXTENDED_FORMAT,
    PolicyExtension,
    check_extension,
    extend_report,
)
from sealeval.captured.pack_reader import EvidencePack, EvidencePackError
from sealeval.captured.report.model import ReportError
from sealeval.captured.report.wording import html_text as _h
from sealeval.captured.run import Run

__all__ = [
    "EXTENDED_NOTE",
    "extended_for_pack",
    "extended_html",
    "extended_junit",
    "extended_markdown",
]

#: What the extended section is (every format says it).
EXTENDED_NOTE: Final = (
    "Opt-in sealeval statistics (sealeval/extended-comparison-v1), recomputed from the runs "
    "in the pack; not part of the signed evidence and not an invarlock result."
)


def extended_for_pack(
    pack: EvidencePack,
    extension: PolicyExtension,
    *,
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Return the extended document of a pack's runs, bound to the pack's stored report.

    The runs are streamed from the pack's files (re-opened by descriptor,
    ``file_changed`` if replaced since the pack was read) into per-record
    columns (:func:`~sealeval.captured.comparison.compare_run_files`, then
    :func:`~sealeval.captured.comparison.scope_values_files`): memory is
    bounded by the number of records, whether the pack was read with its runs
    held or as :class:`~sealeval.captured.run_facts.RunFacts`.

    Raises:
        ReportError: ``extended_mismatch`` when the recomputed comparison is
            not byte-identical to the stored one.
        ExtensionError: the extension does not name the pack's policy.
        EvidencePackError: ``file_changed`` (status 6) when a run file is
            not the one examined (replaced, or rewritten in place so that the
            second pass does not hash to the digest the first bound).
    """
    order = "width_first" if "decision_rule" in pack.report else "reference"
    stored = digest_bytes(encode_invarlock(thaw_json(pack.report)))
    with ExitStack() as stack:

        def reopen(role: str) -> IO[bytes]:
            return stack.enter_context(pack.open_run(role))

        report = compare_run_files(
            baseline=reopen("baseline"),
            subject=reopen("subject"),
            policy=pack.policy,
            max_bootstrap_draws=max_bootstrap_draws,
            decision_order=order,
            limits=pack.limits.run_limits(),
            progress=progress,
        )
        if report.digest != stored:
            raise ReportError("extended_mismatch", "extended.comparison_digest")
        check_extension(extension, pack.policy)  # before the second pass
        try:
            per_pair = scope_values_files(
                baseline=reopen("baseline"),
                subject=reopen("subject"),
                policy=pack.policy,
                limits=pack.limits.run_limits(),
                digests=report.bindings,
            )
        except CapturedRunError as error:
            if error.code != "unreadable" or error.field not in ("baseline", "subject"):
                raise
            # Rewritten in place between the passes: not the file examined.
            raise EvidencePackError(
                "file_changed", error.field, manifest_digest=pack.manifest_digest
            ) from None
    return extend_report(report=report, per_pair=per_pair, policy=pack.policy, extension=extension)


def _checked(pack: EvidencePack, document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Refuse a document that is not this pack's (format, digest, grid, flip ids)."""
    if document.get("format") != EXTENDED_FORMAT:
        raise ReportError("extended_mismatch", "extended.format")
    stored = digest_bytes(encode_invarlock(thaw_json(pack.report)))
    if document.get("comparison_digest") != stored:
        raise ReportError("extended_mismatch", "extended.comparison_digest")
    entries = list(document.get("entries", ()))
    grid = [(item["name"], item["slice"]) for item in pack.report["metrics"]]
    if [(row["metric"], row["slice"]) for row in entries] != grid:
        raise ReportError("extended_mismatch", "extended.entries")
    baseline = pack.baseline
    known = baseline.index if isinstance(baseline, Run) else baseline
    for position, row in enumerate(entries):
        flips = row.get("flips") or {}
        for key in ("right_to_wrong_ids", "wrong_to_right_ids"):
            if any(item not in known for item in flips.get(key, ())):
                raise ReportError("unknown_missing_id", f"extended.entries[{position}].flips")
    return entries


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _flip_text(flips: Mapping[str, Any] | None) -> tuple[str, str]:
    if not flips:
        return "—", "—"
    return str(flips["right_to_wrong"]), str(flips["wrong_to_right"])


def _more(row: Mapping[str, Any]) -> str | None:
    if row.get("more_pairs") is None:
        return None
    return f"about {row['more_pairs']:,} more paired cases in slice {row['slice']}"


def extended_markdown(pack: EvidencePack, document: Mapping[str, Any], escape: Any) -> list[str]:
    """Return the Markdown lines of the extended section (``escape`` = the renderer's)."""
    entries = _checked(pack, document)
    multiplicity = document["multiplicity"]
    lines = [
        "## Extended statistics (sealeval)",
        "",
        escape(EXTENDED_NOTE),
        "",
        f"- **Multiplicity:** {escape(multiplicity['method'])} at {multiplicity['alpha']} over "
        f"{multiplicity['family_size']} entries",
        f"- **Binary interval:** {escape(document['binary_interval'])}",
        f"- **Extended decision:** {escape(document['decision'])}",
        "",
        "| Metric | Scope | p | Adjusted p | Decision | Right→wrong | Wrong→right |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in entries:
        worse, better = _flip_text(row["flips"])
        lines.append(
            f"| {escape(row['metric'])} | {escape(row['slice'])} | {_p(row['p_value'])} | "
            f"{_p(row['adjusted_p_value'])} | {escape(row['decision'])} | {worse} | {better} |"
        )
    lines.append("")
    for row in entries:
        where = f"{escape(row['metric'])} / {escape(row['slice'])}"
        flips = row["flips"]
        for key, label in (("right_to_wrong", "Right→wrong"), ("wrong_to_right", "Wrong→right")):
            if flips and flips[f"{key}_ids"]:
                shown = ", ".join(f"`{escape(item)}`" for item in flips[f"{key}_ids"])
                lines.append(f"- {label} in {where} (first of {flips[key]}): {shown}")
        more = _more(row)
        if more is not None:
            lines.append(f"- More evidence needed for {where}: {escape(more)}")
    return lines


def extended_html(pack: EvidencePack, document: Mapping[str, Any]) -> str:
    """Return the HTML section of the extended statistics."""
    entries = _checked(pack, document)
    multiplicity = document["multiplicity"]
    rows = []
    for row in entries:
        worse, better = _flip_text(row["flips"])
        cells = (
            row["metric"],
            row["slice"],
            _p(row["p_value"]),
            _p(row["adjusted_p_value"]),
            row["decision"],
            worse,
            better,
        )
        rows.append("<tr>" + "".join(f"<td>{_h(str(cell))}</td>" for cell in cells) + "</tr>")
    details = []
    for row in entries:
        where = _h(f"{row['metric']} / {row['slice']}")
        flips = row["flips"]
        for key, label in (("right_to_wrong", "Right→wrong"), ("wrong_to_right", "Wrong→right")):
            if flips and flips[f"{key}_ids"]:
                shown = ", ".join(f"<code>{_h(item)}</code>" for item in flips[f"{key}_ids"])
                details.append(f"<li>{label} in {where} (first of {flips[key]}): {shown}</li>")
        more = _more(row)
        if more is not None:
            details.append(f"<li>More evidence needed for {where}: {_h(more)}</li>")
    head = "".join(
        f'<th scope="col">{name}</th>'
        for name in ("Metric", "Scope", "p", "Adjusted p", "Decision", "Right→wrong", "Wrong→right")
    )
    return (
        '<section class="panel" id="extended" aria-labelledby="extended-heading">'
        '<h2 id="extended-heading">Extended statistics (sealeval)</h2>'
        f"<p>{_h(EXTENDED_NOTE)}</p>"
        f"<p>Multiplicity: {_h(multiplicity['method'])} at {multiplicity['alpha']} over "
        f"{multiplicity['family_size']} entries; binary interval: "
        f"{_h(document['binary_interval'])}; extended decision: "
        f"<strong>{_h(document['decision'])}</strong>.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"<ul>{''.join(details)}</ul></section>"
    )


def extended_junit(
    pack: EvidencePack,
    document: Mapping[str, Any],
    cases: Mapping[tuple[str, str], ET.Element],
    escape: Any,
) -> None:
    """Add ``<properties>`` (p-values, decision, flip counts) and flip ids to each testcase."""
    entries = _checked(pack, document)
    for row in entries:
        case = cases[(row["metric"], row["slice"])]
        properties = ET.Element("properties")
        values = {
            "sealeval.p_value": _p(row["p_value"]),
            "sealeval.adjusted_p_value": _p(row["adjusted_p_value"]),
            "sealeval.extended_decision": row["decision"],
        }
        flips = row["flips"]
        if flips:
            values["sealeval.right_to_wrong"] = str(flips["right_to_wrong"])
            values["sealeval.wrong_to_right"] = str(flips["wrong_to_right"])
        if row.get("more_pairs") is not None:
            values["sealeval.more_pairs"] = str(row["more_pairs"])
        for name, value in values.items():
            ET.SubElement(properties, "property", {"name": name, "value": value})
        case.insert(0, properties)
        if flips and (flips["right_to_wrong_ids"] or flips["wrong_to_right_ids"]):
            out = ET.SubElement(case, "system-out")
            out.text = escape(
                "right_to_wrong: "
                + ", ".join(flips["right_to_wrong_ids"])
                + "\nwrong_to_right: "
                + ", ".join(flips["wrong_to_right_ids"])
            )
