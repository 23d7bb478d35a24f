"""The case-set refusal table.

Moved out of ``test_captured_case_set.py`` so that no test module imports another."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sealeval.captured import (
    CaseSet,
    Limits,
    case_set_digest,
    case_set_from_document,
    freeze_case_set,
    make_run,
    validate_run_case_set,
    write_case_set,
)
from support.digests import ARTIFACT

SOURCE = {"name": "acme-harness", "version": "3.1.4"}


def _case(**changes: Any) -> dict[str, Any]:
    case: dict[str, Any] = {"id": "q0", "input": "i", "expected": "e", "metadata": {"t": "a"}}
    case.update(changes)
    return case


def _run(records: list[dict[str, Any]]) -> Any:
    return make_run(records, source=SOURCE, run_id="r", artifact_digest=ARTIFACT)


_GOOD_RUN = _run(
    [{"id": "q0", "input": "i", "expected": "e", "output": "o", "metadata": {"t": "a"}}]
)


_GOOD_DIGEST = case_set_digest([_case()])


CASE_SET_REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    ("cases-not-list", lambda: freeze_case_set("q0"), "invalid_type"),  # type: ignore[arg-type]
    ("cases-mapping", lambda: freeze_case_set({"cases": []}), "invalid_type"),  # type: ignore[arg-type]
    ("cases-empty", lambda: freeze_case_set([]), "no_cases"),
    (
        "cases-over-limit",
        lambda: freeze_case_set([_case(), _case(id="q1")], limits=Limits(max_records=1)),
        "too_many_cases",
    ),
    ("case-not-object", lambda: freeze_case_set(["q0"]), "invalid_type"),
    (
        "case-missing-metadata",
        lambda: freeze_case_set([{"id": "q0", "input": 1, "expected": 1}]),
        "missing_field",
    ),
    ("case-extra-output", lambda: freeze_case_set([_case(output="x")]), "unknown_field"),
    ("case-id-empty", lambda: freeze_case_set([_case(id="")]), "invalid_text"),
    ("case-id-number", lambda: freeze_case_set([_case(id=0)]), "invalid_type"),
    ("case-metadata-number", lambda: freeze_case_set([_case(metadata={"n": 1})]), "invalid_type"),
    (
        "case-metadata-101",
        lambda: freeze_case_set([_case(metadata={f"k{i}": "" for i in range(101)})]),
        "too_many_members",
    ),
    ("case-input-nan", lambda: freeze_case_set([_case(input=math.nan)]), "invalid_json_value"),
    ("case-duplicate-id", lambda: freeze_case_set([_case(), _case()]), "duplicate_id"),
    ("case-set-members-not-cases", lambda: CaseSet(("x",)), "invalid_type"),  # type: ignore[arg-type]
    ("case-set-not-iterable", lambda: CaseSet(1), "invalid_type"),  # type: ignore[arg-type]
    ("case-set-empty", lambda: CaseSet(()), "no_cases"),
    (
        "document-format",
        lambda: case_set_from_document({"format": "x", "cases": [_case()]}),
        "invalid_constant",
    ),
    (
        "document-extra",
        lambda: case_set_from_document({"format": "x", "cases": [], "x": 1}),
        "unknown_field",
    ),
    (
        "document-cases-object",
        lambda: case_set_from_document({"format": "invarlock/evaluation-case-set-v1", "cases": {}}),
        "invalid_type",
    ),
    (
        "membership-bad-digest",
        lambda: validate_run_case_set(_GOOD_RUN, _GOOD_DIGEST.upper()),
        "invalid_digest",
    ),
    ("membership-not-a-run", lambda: validate_run_case_set({}, _GOOD_DIGEST), "invalid_type"),  # type: ignore[arg-type]
    (
        "membership-changed-input",
        lambda: validate_run_case_set(_GOOD_RUN, case_set_digest([_case(input="x")])),
        "case_set_mismatch",
    ),
    ("write-not-a-case-set", lambda: write_case_set([], "unused.json"), "invalid_type"),  # type: ignore[arg-type]
]
