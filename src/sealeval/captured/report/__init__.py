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

This package is the face; its homes are :mod:`.model` (the checked entries),
:mod:`.wording` (what an entry says), :mod:`.facts` (pack-level facts),
:mod:`.markdown` (Markdown, JUnit XML, the result) and :mod:`.html`.

Example::

    from sealeval.captured.pack_reader import read_evidence_pack
    from sealeval.captured.report import render_markdown

    text = render_markdown(read_evidence_pack("pack-dir"))
"""

from __future__ import annotations

from sealeval.captured.report.html import render_html
from sealeval.captured.report.markdown import (
    encode_result,
    render_junit,
    render_markdown,
    report_result,
)
from sealeval.captured.report.model import (
    DECISION_LABELS,
    MISSING_IDS_PREVIEW,
    RESULT_FORMAT,
    VERIFICATION_STATUSES,
    ReportEntry,
    ReportError,
    VerificationStatus,
    check_consistency,
    display_order,
)
from sealeval.captured.report.wording import display_name, explanation

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
