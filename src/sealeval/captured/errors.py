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

from collections.abc import Collection, Mapping
from contextlib import AbstractContextManager
from typing import Any

from sealeval import _validate
from sealeval import canonical as _canonical
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


# ---------------------------------------------------------------------------
# Transitional bindings for modules that still import the toolkit from here
# (captured/importers, captured/comparison, captured/report: owned by other
# work in progress). New code calls sealeval._validate / sealeval.canonical with
# ``error=CapturedRunError``; remove these once no module imports them.


def fail(code: str, field: str | None = None) -> CapturedRunError:
    """Return (for ``raise``) an error with a closed code and a library-chosen field."""
    return CapturedRunError(code, field)


def rebased(old_root: str, new_root: str) -> AbstractContextManager[None]:
    """:func:`sealeval._validate.rebased` for :class:`CapturedRunError`."""
    return _validate.rebased(old_root, new_root, error=CapturedRunError)


def check_members(
    document: object,
    field: str,
    required: Collection[str],
    optional: Collection[str] = (),
) -> Mapping[str, Any]:
    """:func:`sealeval._validate.check_closed` for :class:`CapturedRunError`."""
    return _validate.check_closed(document, field, required, optional, error=CapturedRunError)


def check_text(value: object, field: str, **options: Any) -> str:
    """:func:`sealeval._validate.check_text` for :class:`CapturedRunError`."""
    return _validate.check_text(value, field, error=CapturedRunError, **options)


def frozen_canonical(value: object) -> bytes:
    """:func:`sealeval.canonical.frozen_canonical` for :class:`CapturedRunError`."""
    return _canonical.frozen_canonical(value, error=CapturedRunError)


thaw_json = _validate.thaw_json
