"""The export refusal table.

Moved out of ``test_captured_export.py`` so that no test module imports another."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sealeval._validate import thaw_json
from sealeval.captured import (
    INVARLOCK_LIMITS,
    CapturedRunError,
    EvaluatorExport,
    EvaluatorProfile,
    Limits,
    capture_evaluator_run,
    evaluator_export_from_document,
    evaluator_input_capabilities,
    export_evaluator_result,
    read_evaluator_export,
    run_from_evaluator_export,
)
from support.digests import ARTIFACT
from support.refusals import CANARY
from support.vectors import load

SOURCE = {"name": "acme-harness", "version": "3.1.4"}


_TABLE_NORMALIZED = frozenset({"mlflow", "trulens"})


class VectorProfile:
    """Stands in for an importer's profile: the payload and records the reference produced.

    The envelope, bytes, identity checks, capture and membership checks under test
    are sealeval's; mapping a native payload to records is the importers' and is
    replayed from the vector's expected run here.
    """

    def __init__(self, complete: dict[str, Any]) -> None:
        self.evaluator = complete["input"]["evaluator"]
        self.payload = json.loads(complete["expected"]["export_text"])["payload"]
        self.mapped = complete["expected"]["run"]["records"]

    def native_payload(self, result: object) -> object:
        if self.evaluator in _TABLE_NORMALIZED:
            assert result != self.payload
            return self.payload
        return result

    def records(self, export: EvaluatorExport) -> Iterable[Mapping[str, Any]]:
        assert export.evaluator == self.evaluator
        assert thaw_json(export.payload) == self.payload
        return self.mapped


def _profiles() -> dict[str, EvaluatorProfile]:
    found: dict[str, EvaluatorProfile] = {}
    for case in load("invarlock/evaluator_exports.json")["cases"]:
        if case["name"].endswith("-complete"):
            found[case["input"]["evaluator"]] = VectorProfile(case)
    return found


PROFILES = _profiles()


def _export(case_input: dict[str, Any], destination: Path, **overrides: Any) -> Any:
    arguments = {
        "expected_ids": case_input["expected_ids"],
        "source_version": case_input["source_version"],
        "run_id": case_input["run_id"],
        "artifact_digest": case_input["artifact_digest"],
        "profiles": PROFILES,
    }
    arguments.update(overrides)
    return export_evaluator_result(
        case_input["evaluator"], case_input["result"], destination, **arguments
    )


class _Raising:
    def __init__(self, where: str) -> None:
        self.where = where

    def native_payload(self, result: object) -> object:
        if self.where == "payload":
            raise KeyError(CANARY)
        if self.where == "sealeval-payload":
            raise CapturedRunError("invalid_type", "payload")
        return result

    def records(self, export: EvaluatorExport) -> Iterable[Mapping[str, Any]]:
        if self.where == "records":
            raise ValueError(CANARY)
        if self.where == "sealeval":
            raise CapturedRunError("invalid_type", "payload")
        return [{"id": "a", "input": "q", "expected": "e", "output": "o"}]


_AUTOEVALS = next(
    c["input"]
    for c in load("invarlock/evaluator_exports.json")["cases"]
    if c["name"] == "export-autoevals-complete"
)


def _export_with(destination: str = "unused-export.json", **overrides: Any) -> Any:
    return _export(_AUTOEVALS, Path(destination), **overrides)


def _simple_export(**changes: Any) -> EvaluatorExport:
    fields: dict[str, Any] = {
        "evaluator": "autoevals",
        "source_version": "1",
        "run_id": "r",
        "payload": [{"id": "a"}],
    }
    fields.update(changes)
    return EvaluatorExport(**fields)


def _import(profile: Any, **changes: Any) -> Any:
    arguments: dict[str, Any] = {
        "profiles": {"autoevals": profile},
        "source": {"name": "autoevals", "version": "1"},
        "run_id": "r",
        "source_digest": None,
        "artifact_digest": ARTIFACT,
    }
    arguments.update(changes)
    return run_from_evaluator_export(_simple_export(), **arguments)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


_ENVELOPE = {
    "format": "invarlock/evaluator-export-v1",
    "evaluator": "autoevals",
    "source_version": "1",
    "run_id": "r",
    "payload": [{"id": "a"}],
}


EXPORT_REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    (
        "export-evaluator-not-text",
        lambda: export_evaluator_result(
            1,  # type: ignore[arg-type]
            [],
            "x",
            expected_ids=["a"],
            source_version="1",
            run_id="r",
            profiles=PROFILES,
        ),
        "unsupported_evaluator",
    ),
    ("export-profile-missing", lambda: _export_with(profiles={}), "profile_unavailable"),
    ("export-profile-not-mapping", lambda: _export_with(profiles=[]), "invalid_type"),
    (
        "export-profile-raises",
        lambda: _export_with(profiles={"autoevals": _Raising("payload")}),
        "profile_failed",
    ),
    ("export-ids-empty", lambda: _export_with(expected_ids=[]), "invalid_expected_ids"),
    ("export-ids-string", lambda: _export_with(expected_ids="ae-0"), "invalid_expected_ids"),
    (
        "export-ids-duplicate",
        lambda: _export_with(expected_ids=["ae-0", "ae-0"]),
        "invalid_expected_ids",
    ),
    ("export-ids-number", lambda: _export_with(expected_ids=[0]), "invalid_expected_ids"),
    (
        "export-ids-over-limit",
        lambda: _export_with(expected_ids=list("abcdef"), limits=Limits(max_records=5)),
        "invalid_expected_ids",
    ),
    ("export-ids-subset", lambda: _export_with(expected_ids=["ae-0"]), "export_ids_mismatch"),
    ("export-too-large", lambda: _export_with(limits=Limits(max_file_bytes=64)), "too_large"),
    ("export-blank-version", lambda: _export_with(source_version=" \t"), "invalid_text"),
    (
        "export-payload-over-limit",
        lambda: _export_with(limits=Limits(max_records=2)),
        "too_many_records",
    ),
    (
        "envelope-unknown-evaluator",
        lambda: _simple_export(evaluator="my-evals"),
        "unsupported_evaluator",
    ),
    ("envelope-version-129", lambda: _simple_export(source_version="v" * 129), "invalid_text"),
    ("envelope-run-id-empty", lambda: _simple_export(run_id=""), "invalid_text"),
    ("envelope-payload-empty", lambda: _simple_export(payload=[]), "no_records"),
    ("envelope-payload-text", lambda: _simple_export(payload="x"), "invalid_type"),
    ("envelope-payload-nan", lambda: _simple_export(payload={"x": math.nan}), "invalid_json_value"),
    ("envelope-too-deep", lambda: _simple_export(payload=_nested(64)), "too_deep"),
    (
        "document-extra",
        lambda: evaluator_export_from_document({**_ENVELOPE, "note": 1}),
        "unknown_field",
    ),
    (
        "document-missing",
        lambda: evaluator_export_from_document(
            {k: v for k, v in _ENVELOPE.items() if k != "run_id"}
        ),
        "missing_field",
    ),
    (
        "document-format",
        lambda: evaluator_export_from_document({**_ENVELOPE, "format": "x"}),
        "invalid_constant",
    ),
    ("document-not-object", lambda: evaluator_export_from_document([]), "invalid_type"),
    (
        "document-payload-over-compat",
        lambda: evaluator_export_from_document(
            {**_ENVELOPE, "payload": [{}] * 50_001}, limits=INVARLOCK_LIMITS
        ),
        "too_many_records",
    ),
    (
        "import-not-an-export",
        lambda: run_from_evaluator_export(
            {}, profiles={}, source=SOURCE, run_id="r", source_digest=None
        ),
        "invalid_type",
    ),  # type: ignore[arg-type]
    (
        "import-source-differs",
        lambda: _import(_Raising("none"), source={"name": "autoevals", "version": "2"}),
        "export_identity_mismatch",
    ),
    (
        "import-run-id-differs",
        lambda: _import(_Raising("none"), run_id="other"),
        "export_identity_mismatch",
    ),
    ("import-profile-raises", lambda: _import(_Raising("records")), "profile_failed"),
    ("import-profile-refuses", lambda: _import(_Raising("sealeval")), "invalid_type"),
    (
        "export-profile-refuses",
        lambda: _export_with(profiles={"autoevals": _Raising("sealeval-payload")}),
        "invalid_type",
    ),
    (
        "import-needs-artifact-or-service",
        lambda: _import(_Raising("none"), artifact_digest=None),
        "artifact_digest_required",
    ),
    (
        "import-profile-unavailable",
        lambda: _import(_Raising("none"), profiles={}),
        "profile_unavailable",
    ),
    ("read-missing", lambda: read_evaluator_export(Path("/nonexistent/export.json")), "not_found"),
    ("capabilities-not-a-run", lambda: evaluator_input_capabilities({}), "invalid_type"),  # type: ignore[arg-type]
    (
        "capture-bad-projection",
        lambda: capture_evaluator_run(
            [],
            source=SOURCE,
            run_id="r",
            artifact_digest=ARTIFACT,
            input_projection={"pointer": "/input"},
        ),
        "invalid_projection",
    ),
]
