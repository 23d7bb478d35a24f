"""Comparison vectors and the reference-message mapping, shared by several tests.

Moved out of ``test_captured_comparison.py`` so that no test module imports another."""

from __future__ import annotations

import functools

from sealeval.captured import Run, read_run
from sealeval.captured.unicode_tables import available_unicode_versions
from support.vectors import vectors_dir

CANARY = "PHI-CANARY-7f3a-jane-doe-MRN-0042"


REFERENCE_ERRORS: dict[str, tuple[str, str, str]] = {
    (
        "comparison plans 122880 bootstrap draws; local budget is 1000. Increase the local "
        "budget only on a suitable host; the complete policy has not been evaluated."
    ): ("ComparisonError", "work_budget_exceeded", "max_bootstrap_draws"),
    (
        "comparison plans 122880 bootstrap draws; local budget is 122879. Increase the local "
        "budget only on a suitable host; the complete policy has not been evaluated."
    ): ("ComparisonError", "work_budget_exceeded", "max_bootstrap_draws"),
    "max_bootstrap_draws must be a non-negative integer": (
        "ComparisonError",
        "invalid_budget",
        "max_bootstrap_draws",
    ),
    (
        "normalized_match requires Unicode '15.1.0'; this runtime provides 15.0.0. Use a "
        "runtime with the policy's Unicode version."
    ): (
        "ComparisonPolicyError",
        "unsupported_unicode_version",
        "metrics[0].configuration.unicode_version",
    ),
    "metric judge: scorer provenance differs from approved policy": (
        "ComparisonError",
        "provenance_mismatch",
        "metrics[0].baseline.score_provenance",
    ),
    "metric x: scorer provenance differs from approved policy": (
        "ComparisonError",
        "provenance_mismatch",
        "metrics[0].baseline.score_provenance",
    ),
    "record q0: likelihood tokenizer differs from policy": (
        "ComparisonError",
        "likelihood_tokenizer_mismatch",
        "metrics[0].baseline.records[0].likelihood.tokenizer_digest",
    ),
    "record q0: likelihood configuration differs from policy": (
        "ComparisonError",
        "likelihood_configuration_mismatch",
        "metrics[0].baseline.records[0].likelihood.configuration_digest",
    ),
    "baseline/subject record IDs differ; export the complete paired schedule": (
        "ComparisonError",
        "record_ids_differ",
        "subject",
    ),
    "record q2: input changed between runs": (
        "ComparisonError",
        "input_changed",
        "subject.records[2].input",
    ),
    "record q2: expected changed between runs": (
        "ComparisonError",
        "expected_changed",
        "subject.records[2].expected",
    ),
    "record q2: metadata changed between runs": (
        "ComparisonError",
        "metadata_changed",
        "subject.records[2].metadata",
    ),
    # Refused when the run is read (read_run validates once), before any comparison.
    "duplicate record IDs; repeated trials need distinct paired IDs": (
        "CapturedRunError",
        "duplicate_id",
        "records[20].id",
    ),
    "run 'baseline-run' does not match the planned case set": (
        "ComparisonError",
        "case_set_mismatch",
        "baseline",
    ),
    "metric jx, record q0: JSON reference must be a valid finite JSON value": (
        "ComparisonError",
        "reference_not_json",
        "metrics[0].baseline.records[0].expected",
    ),
    "metric num, record q0: numeric reference must be finite": (
        "ComparisonError",
        "reference_not_numeric",
        "metrics[0].baseline.records[0].expected",
    ),
    "captured normalized NLL: normalized NLL baseline mean must be greater than zero": (
        "ComparisonError",
        "non_positive_baseline_mean",
        "metrics[0]",
    ),
    # Refused when the tampered run is read: its retained binding does not replay.
    "input projection does not replay its retained binding": (
        "CapturedRunError",
        "projection_replay_mismatch",
        "records[0].context.input_projection.configuration_digest",
    ),
}


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
