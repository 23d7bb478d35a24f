"""Importer helpers shared by the importer and CLI tests.

Moved out of ``test_captured_importers.py`` so that no test module imports another."""

from __future__ import annotations

import re

import pytest

CANARY = "PHI-CANARY-7f3a-jane-doe-MRN-0042"


_MESSAGE_CODES: tuple[tuple[str, str], ...] = (
    ("canonical run identities cannot be overridden", "identity_override"),
    ("duplicate record IDs", "duplicate_id"),
    ("invalid run records.0: Additional properties are not allowed", "unknown_field"),
    ("invalid run records.0.metadata.n: 1 is not of type 'string'", "invalid_type"),
    ("invalid run records.0.scores.s: True is not of type 'number'", "invalid_score"),
    ("invalid run artifact_digest: None is not of type 'string'", "artifact_digest_required"),
    ("invalid run artifact_digest: 'sha256:", "artifact_digest_forbidden"),
    ("invalid run records.0.id:", "invalid_text"),
    ("cannot import invarlock: JSON object has duplicate key", "duplicate_key"),
    ("unsupported adapter", "unknown_adapter"),
    ("input projection pointer does not resolve", "projection_unresolved"),
    ("input projection must select one text string", "projection_not_text"),
    ("input projection must select input or context", "projection_root"),
    ("input projection binding has invalid fields", "projection_binding_invalid"),
    ("native import requires source name/version, run_id and", "identities_required"),
    ("jsonl requires a non-empty array of record objects", "no_records"),
    ("record has unknown fields; map them explicitly", "unknown_field"),
    ("cannot import jsonl: export line 4 is not valid JSON", "invalid_jsonl_line"),
    ("cannot import jsonl: JSON contains non-standard constant", "non_finite_number"),
    ("ambiguous or non-text native completion", "ambiguous_output"),
    ("LM Eval requires --log_samples generation records", "missing_field"),
    ("explicit observation 'exact_match' conflicts with the native score", "score_conflict"),
    ("Harness likelihood facts differ from the native result", "likelihood_mismatch"),
    (
        "record N: reference-continuation likelihood utf8_byte_count differs",
        "likelihood_byte_count_mismatch",
    ),
    ("Inspect run did not complete successfully", "incomplete_run"),
    ("Inspect log lacks a recognized completion status", "unknown_status"),
    ("inspect-json requires a version 1 or 2 JSON EvalLog", "unsupported_version"),
    ("Inspect import requires one completion per sample", "ambiguous_output"),
    ("multiple Inspect epochs require an explicit paired trial mapping", "multiple_epochs"),
    ("multiple Inspect targets require an explicit scoring adapter", "ambiguous_expected"),
    ("Inspect completion contains unsupported non-text content", "non_text_output"),
    ("score 'grade' is not numeric", "non_numeric_score"),
    ("native record IDs must be strings or integers", "invalid_id"),
    ("Promptfoo failureReason contradicts failure fields", "inconsistent_failure"),
    ("Promptfoo runtime failure contradicts success", "inconsistent_failure"),
    ("Promptfoo assertion failure fields are inconsistent", "inconsistent_failure"),
    ("Promptfoo failureReason is unsupported or ambiguous", "unsupported_failure_reason"),
    ("Promptfoo rows need testCase and prompt for pairing", "missing_field"),
    ("Promptfoo invarlock_id must be a nonempty string", "invalid_id"),
    ("Langfuse run_id must match exported run_name", "identity_mismatch"),
    ("Langfuse source name/version must match the export SDK version", "identity_mismatch"),
    ("Langfuse evaluation value contradicts its declared data_type", "invalid_evaluation"),
    ("Langfuse stable item ID requires nonempty bounded text", "missing_id"),
    ("Langfuse item result has missing or unsupported fields", "unknown_field"),
    ("invalid evaluator_export evaluator: 'my-evals' is not one of", "unsupported_evaluator"),
    ("invalid evaluator_export evaluator: 'x' is not one of", "unsupported_evaluator"),
    ("native evaluator JSON requires source name/version and run_id", "identities_required"),
    ("invalid deepeval capture: native cases require unique", "duplicate_id"),
    ("invalid ragas capture: Ragas multi_responses is ambiguous", "ambiguous_output"),
    ("invalid autoevals capture: native case requires an actual output", "output_required"),
    ("invalid evaluator_export payload: [] is not valid", "no_records"),
    ("evaluator export source or run identity differs", "export_identity_mismatch"),
    ("invalid evaluator_export : Additional properties are not allowed", "unknown_field"),
    ("evaluator source version requires bounded text", "invalid_text"),
    ("cannot import evaluator-json: evaluation export is not UTF-8 JSON", "not_utf8"),
)


_CASE_CODES = {"jsonl-row-not-object": "not_object"}


#: A message naming a record by its id: mapped by shape, whatever the id.
_RECORD_ID = re.compile(r"^record [^:]+: ")


def message_code(name: str, message: str) -> str:
    message = _RECORD_ID.sub("record N: ", message)
    matches = [code for prefix, code in _MESSAGE_CODES if message.startswith(prefix)]
    if len(matches) != 1:
        pytest.fail("vector error message not understood")
    return _CASE_CODES.get(name, matches[0])
