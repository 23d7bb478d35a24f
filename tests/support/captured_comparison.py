"""Comparison vectors and the reference-message mapping, shared by several tests.

Moved out of ``test_captured_comparison.py`` so that no test module imports another."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

from sealeval.captured import CapturedRunError, Run, read_run
from sealeval.captured.unicode_tables import available_unicode_versions
from support.vectors import vectors_dir

_PLANS = r"comparison plans (?P<planned>\d+) bootstrap draws; local budget is (?P<budget>\d+)\. "


_PLANS += r"Increase the local budget only on a suitable host; the complete policy has not been "


_PLANS += r"evaluated\."


REFERENCE_ERRORS: tuple[tuple[str, str, str, str], ...] = (
    (_PLANS, "ComparisonError", "work_budget_exceeded", "max_bootstrap_draws"),
    (
        r"max_bootstrap_draws must be a non-negative integer",
        "ComparisonError",
        "invalid_budget",
        "max_bootstrap_draws",
    ),
    (
        r"normalized_match requires Unicode '[0-9.]+'; this runtime provides [0-9.]+\. Use a "
        r"runtime with the policy's Unicode version\.",
        "ComparisonPolicyError",
        "unsupported_unicode_version",
        "metrics[{unicode_metric}].configuration.unicode_version",
    ),
    (
        r"metric (?P<metric>.+): scorer provenance differs from approved policy",
        "ComparisonError",
        "provenance_mismatch",
        "metrics[{metric}].baseline.score_provenance",
    ),
    (
        r"record (?P<record>.+): likelihood tokenizer differs from policy",
        "ComparisonError",
        "likelihood_tokenizer_mismatch",
        "metrics[{nll_metric}].baseline.records[{record}].likelihood.tokenizer_digest",
    ),
    (
        r"record (?P<record>.+): likelihood configuration differs from policy",
        "ComparisonError",
        "likelihood_configuration_mismatch",
        "metrics[{nll_metric}].baseline.records[{record}].likelihood.configuration_digest",
    ),
    (
        r"baseline/subject record IDs differ; export the complete paired schedule",
        "ComparisonError",
        "record_ids_differ",
        "subject",
    ),
    (
        r"record (?P<record>.+): (?P<member>input|expected|metadata) changed between runs",
        "ComparisonError",
        "{member}_changed",
        "subject.records[{record}].{member}",
    ),
    # Refused when the run is read (read_run validates once), before any comparison.
    (
        r"duplicate record IDs; repeated trials need distinct paired IDs",
        "CapturedRunError",
        "duplicate_id",
        "records[{duplicate}].id",
    ),
    (
        r"run '(?P<run>.+)' does not match the planned case set",
        "ComparisonError",
        "case_set_mismatch",
        "{run}",
    ),
    (
        r"metric (?P<metric>.+), record (?P<record>.+): JSON reference must be a valid finite "
        r"JSON value",
        "ComparisonError",
        "reference_not_json",
        "metrics[{metric}].baseline.records[{record}].expected",
    ),
    (
        r"metric (?P<metric>.+), record (?P<record>.+): numeric reference must be finite",
        "ComparisonError",
        "reference_not_numeric",
        "metrics[{metric}].baseline.records[{record}].expected",
    ),
    (
        r"captured normalized NLL: normalized NLL baseline mean must be greater than zero",
        "ComparisonError",
        "non_positive_baseline_mean",
        "metrics[{nll_metric}]",
    ),
    # Refused when the tampered run is read: its retained binding does not replay.
    (
        r"input projection does not replay its retained binding",
        "CapturedRunError",
        "projection_replay_mismatch",
        "records[{projection}].context.input_projection.configuration_digest",
    ),
)


def _run_document(case_input: dict[str, Any], side: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        (vectors_dir() / "invarlock" / case_input[side]).read_bytes()
    )
    return document


def _first_duplicate(case_input: dict[str, Any]) -> tuple[str, int] | None:
    """(side, index) of the first repeated record id, baseline first, as the runs are read."""
    for side in ("baseline", "subject"):
        seen: set[str] = set()
        for index, record in enumerate(_run_document(case_input, side)["records"]):
            if record["id"] in seen:
                return side, index
            seen.add(record["id"])
    return None


def _refused_side(case_input: dict[str, Any]) -> tuple[str, int] | None:
    """(side, index) of the record whose retained projection binding does not replay."""
    for side in ("baseline", "subject"):
        try:
            read_run(vectors_dir() / "invarlock" / case_input[side])
        except CapturedRunError as error:
            index = re.match(r"records\[(\d+)\]", error.field or "")
            return side, int(index.group(1)) if index else -1
    return None


def _metric_index(case_input: dict[str, Any], predicate: Callable[[dict[str, Any]], bool]) -> int:
    indices = [i for i, m in enumerate(case_input["policy"]["metrics"]) if predicate(m)]
    assert indices, "the case's policy has no such metric"
    return indices[0]


def _named(name: str, metric: dict[str, Any]) -> bool:
    return bool(metric["name"] == name)


def map_reference_error(
    case_input: dict[str, Any], message: str
) -> tuple[str, str, str, str | None] | None:
    """Map a reference message by its shape: (class, code, library field, side of a run read).

    ``side`` names the run file a read-time refusal concerns (the CLI roots the field there);
    ``None`` when the refusal is the comparison's. Returns ``None`` for an unknown shape.
    """
    for pattern, cls, code, field in REFERENCE_ERRORS:
        match = re.fullmatch(pattern, message, re.S)
        if match is None:
            continue
        values = match.groupdict()
        facts: dict[str, Any] = {}
        side: str | None = None
        if "member" in values:
            facts["member"] = values["member"]
        if "metric" in values:
            facts["metric"] = _metric_index(case_input, functools.partial(_named, values["metric"]))
        if "record" in values:
            side_for_index = "subject" if field.startswith("subject.") else "baseline"
            ids = [r["id"] for r in _run_document(case_input, side_for_index)["records"]]
            assert values["record"] in ids, "the message names a record of the run"
            facts["record"] = ids.index(values["record"])
        if "run" in values:
            names = [
                side
                for side in ("baseline", "subject")
                if _run_document(case_input, side).get("run_id") == values["run"]
            ]
            facts["run"] = names[0] if names else "baseline"
        if "{nll_metric}" in field:
            facts["nll_metric"] = _metric_index(
                case_input, lambda m: m["kind"].startswith("normalized_nll")
            )
        if "{unicode_metric}" in field:
            facts["unicode_metric"] = _metric_index(
                case_input, lambda m: "unicode_version" in (m.get("configuration") or {})
            )
        if "{duplicate}" in field:
            found = _first_duplicate(case_input)
            assert found is not None, "the message says a record id repeats"
            side, facts["duplicate"] = found
        if "{projection}" in field:
            found = _refused_side(case_input)
            assert found is not None, "the message says a run does not replay"
            side, facts["projection"] = found
        if "planned" in values:
            # A fact, not a literal: the budget quoted is the case's, and it falls short.
            assert int(values["budget"]) == case_input.get("max_bootstrap_draws")
            assert int(values["planned"]) > int(values["budget"])
        return cls, code.format(**facts), field.format(**facts), side
    return None


def _runtime_deviation(name: str) -> str | None:
    """Cases where this installation legitimately differs from the reference runtime."""
    if name == "unicode-version-mismatch" and "15.1.0" in available_unicode_versions():
        # sealeval honours a pinned Unicode version it can provide (an interpreter with
        # Unicode 15.1.0); invarlock on CPython 3.12 only provides 15.0.0 and refuses.
        return "sealeval provides Unicode 15.1.0 here"
    return None


@functools.cache
def vector_run(relative: str) -> Run:
    return read_run(vectors_dir() / "invarlock" / relative)
