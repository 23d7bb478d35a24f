"""The captured-path error class.

Every refusal of :mod:`sealeval.captured` is a :class:`CapturedRunError` with a
code from its closed set and a library-chosen field name such as
``records[3].likelihood.input_digest`` (record positions are counted by the
library; nothing a caller submitted — ids, keys, text, values — ever reaches a
message). Bytes that are not strict JSON are refused earlier by
:func:`sealeval.canonical.decode` with a :class:`~sealeval.errors.CanonicalError`;
output files are refused with :class:`~sealeval.errors.OutputError`.

The checks that raise it (closed objects, text, digests, JSON values) live in
:mod:`sealeval._validate`, which takes the error class as a parameter, and the
fast canonical encoders in :mod:`sealeval.canonical`.
"""

from __future__ import annotations

from sealeval._validate import JsonValue
from sealeval.errors import CapturedError

__all__ = ["CapturedRunError", "JsonValue"]


class CapturedRunError(CapturedError):
    """Refusal of a captured run, record, case set, service identity or export."""

    module = "sealeval.captured"
    codes = frozenset(
        {
            # structure of documents and values
            "invalid_type",
            "unknown_field",
            "missing_field",
            "invalid_constant",
            "invalid_text",
            "invalid_digest",
            "too_many_members",
            "invalid_score",
            "invalid_json_value",
            "too_deep",
            "too_large",
            # runs and case sets
            "no_records",
            "too_many_records",
            "no_cases",
            "too_many_cases",
            "duplicate_id",
            "artifact_digest_required",
            "artifact_digest_forbidden",
            # likelihood facts
            "out_of_range",
            "not_exact_integer",
            "likelihood_reference_not_text",
            "likelihood_byte_count_mismatch",
            "likelihood_binding_mismatch",
            # hosted service identity
            "configuration_digest_mismatch",
            "invalid_timestamp",
            "reversed_window",
            # input projection
            "invalid_projection",
            "projection_root",
            "projection_unresolved",
            "projection_not_text",
            "projection_binding_invalid",
            "projection_replay_mismatch",
            # case-set membership
            "case_set_mismatch",
            # evaluator export
            "unsupported_evaluator",
            "profile_unavailable",
            "profile_failed",
            "export_identity_mismatch",
            "invalid_expected_ids",
            "export_ids_mismatch",
            # files and streams
            "not_found",
            "not_regular_file",
            "unreadable",
            "not_canonical",
            "invalid_state",
        }
    )
