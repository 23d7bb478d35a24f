"""Overlap forensics: vectors, refusals, never-echo, and the fast scan against brute force."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval._unicode import PinnedTables, shipped_data
from sealeval.manifest.sealed import COMPONENTS, SealedWorkflowManifest, seal_workflow_manifest
from sealeval.session import _trigram_engine as trigram_engine
from sealeval.session import forensics
from sealeval.session.forensics import (
    CHECKS,
    DEFAULT_FUZZY_THRESHOLD_BASIS_POINTS,
    DEFAULT_SHADOW_MARGIN_BASIS_POINTS,
    INTERPRETATION_NO_SIGNALS,
    INTERPRETATION_SIGNALS,
    POLICY_VERSION,
    REPORT_SCHEMA,
    UNICODE_VERSION,
    OverlapForensicsError,
    OverlapForensicsReport,
    OverlapSignal,
    normalize_text,
    scan_overlap_forensics,
    trigram_similarity,
    trigrams,
)
from sealeval.session.holdout import MANIFEST_KINDS, HoldoutCommitment, commit_holdout
from support.refusals import CANARY, assert_refused
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/forensics.json"
SCHEMA_PATH = PROJECT_ROOT / "contracts" / "openmed.eval.overlap_forensics.v1.schema.json"

MANIFEST = seal_workflow_manifest(
    {name: "sha256:" + f"{index:x}" * 64 for index, name in enumerate(COMPONENTS, 1)}
)
COMMITMENT = commit_holdout(
    "forensics-tests",
    {kind: ["sha256:" + f"{index + 10:x}" * 64] for index, kind in enumerate(MANIFEST_KINDS)},
)


def _scan(
    submissions: Any,
    public: Any = ("alpha beta gamma",),
    shadow: Any = ("delta epsilon zeta",),
    canaries: Any = ("canary one",),
    **options: Any,
) -> OverlapForensicsReport:
    options.setdefault("submission_manifest", MANIFEST)
    options.setdefault("holdout_commitment", COMMITMENT)
    return scan_overlap_forensics(
        submissions, public_items=public, shadow_items=shadow, canaries=canaries, **options
    )


# ---------------------------------------------------------------------------
# Golden vectors: every case of forensics.json
# ---------------------------------------------------------------------------

_SCAN_KEYS = {
    "op",
    "submission_items",
    "public_items",
    "shadow_items",
    "canaries",
    "submission_manifest",
    "holdout_commitment",
}
_SCAN_OPTIONS = {"fuzzy_threshold_basis_points", "shadow_margin_basis_points"}


def _constants() -> dict[str, Any]:
    return {
        "schema_version": REPORT_SCHEMA,
        "policy_version": POLICY_VERSION,
        "checks": list(CHECKS),
        "default_fuzzy_threshold_basis_points": DEFAULT_FUZZY_THRESHOLD_BASIS_POINTS,
        "default_shadow_margin_basis_points": DEFAULT_SHADOW_MARGIN_BASIS_POINTS,
        "interpretation_signals": INTERPRETATION_SIGNALS,
        "interpretation_no_signals": INTERPRETATION_NO_SIGNALS,
        "unicode_version": UNICODE_VERSION,
    }


def _scan_vector(data: dict[str, Any]) -> OverlapForensicsReport:
    options = {key: data[key] for key in _SCAN_OPTIONS if key in data}
    return scan_overlap_forensics(
        data["submission_items"],
        public_items=data["public_items"],
        shadow_items=data["shadow_items"],
        canaries=data["canaries"],
        submission_manifest=data["submission_manifest"],
        holdout_commitment=data["holdout_commitment"],
        **options,
    )


@pytest.mark.parametrize("case", cases(VECTORS))
def test_forensics_vector(case: dict[str, Any]) -> None:
    data = decode_input(case["input"])
    expected = case["expected"]
    op = data.get("op")
    if op == "constants" and set(data) == {"op"}:
        assert _constants() == expected
        return
    if op == "normalize" and set(data) == {"op", "text"} and set(expected) == {"normalized"}:
        assert normalize_text(data["text"]) == expected["normalized"]
        return
    if op == "similarity" and set(data) == {"op", "left", "right"}:
        result = trigram_similarity(data["left"], data["right"])
        assert result._asdict() == expected
        return
    if op != "scan" or not _SCAN_KEYS <= set(data) <= _SCAN_KEYS | _SCAN_OPTIONS:
        pytest.fail("vector case shape not understood")
    if set(expected) == {"error_code"}:
        with pytest.raises(OverlapForensicsError) as caught:
            _scan_vector(data)
        assert str(caught.value) == expected["error_code"]
        return
    if set(expected) != {"canonical", "parsed"}:
        pytest.fail("vector case shape not understood")
    report = _scan_vector(data)
    assert report.to_json() == expected["canonical"]
    assert report.to_dict() == expected["parsed"]
    assert json.loads(report.to_json()) == expected["parsed"]
    # The same scan with objects instead of documents, and lists instead of tuples.
    objects = dict(data)
    objects["submission_manifest"] = SealedWorkflowManifest.from_dict(data["submission_manifest"])
    objects["holdout_commitment"] = HoldoutCommitment.from_dict(data["holdout_commitment"])
    for name in ("submission_items", "public_items", "shadow_items", "canaries"):
        objects[name] = list(data[name])
    assert _scan_vector(objects).to_json() == expected["canonical"]


def _vector_reports() -> list[dict[str, Any]]:
    return [
        case["expected"]["parsed"]
        for case in load(VECTORS)["cases"]
        if case["input"]["op"] == "scan" and "parsed" in case["expected"]
    ]


def test_vector_reports_match_the_schema() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    reports = _vector_reports()
    assert len(reports) >= 10
    for report in reports:
        validator.validate(report)
    assert {s["check"] for r in reports for s in r["signals"]} == set(CHECKS)


def test_schema_refuses_unknown_fields_and_wrong_constants() -> None:
    validator = Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    report = _vector_reports()[0]
    assert not validator.is_valid({**report, "extra": 1})
    assert not validator.is_valid({**report, "schema_version": "v2"})
    assert not validator.is_valid({**report, "interpretation": "anything"})


# ---------------------------------------------------------------------------
# Refusals: every code, in the specified order
# ---------------------------------------------------------------------------


class _ExplodingSequence(Sequence[str]):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError(CANARY)


def _generator() -> Iterator[str]:
    yield "text"


class _Text(str):
    __slots__ = ()


ITEM_REFUSALS = [
    pytest.param("a string", "invalid_sequence", id="string"),
    pytest.param(b"bytes", "invalid_sequence", id="bytes"),
    pytest.param(bytearray(b"x"), "invalid_sequence", id="bytearray"),
    pytest.param(None, "invalid_sequence", id="none"),
    pytest.param({"a": 1}, "invalid_sequence", id="mapping"),
    pytest.param({"a"}, "invalid_sequence", id="set"),
    pytest.param(_generator(), "invalid_sequence", id="generator"),
    pytest.param(_ExplodingSequence(), "invalid_sequence", id="hostile-sequence"),
    pytest.param((), "empty", id="empty-tuple"),
    pytest.param([], "empty", id="empty-list"),
    pytest.param(("ok", 1), "invalid_item", id="non-string"),
    pytest.param(("ok", None), "invalid_item", id="none-item"),
    pytest.param(("ok", b"bytes"), "invalid_item", id="bytes-item"),
    pytest.param(("ok", ""), "invalid_item", id="empty-item"),
    pytest.param(("ok", " \t\n\u3000"), "invalid_item", id="blank-item"),
    pytest.param(("ok", _Text("subclass")), "invalid_item", id="str-subclass"),
    pytest.param(("ok", "!!! ---"), "empty_after_normalization", id="punctuation-only"),
    pytest.param(("ok", "\u0301\u0302"), "empty_after_normalization", id="marks-only"),
    pytest.param(("ok", "\U0001f600"), "empty_after_normalization", id="emoji-only"),
]


@pytest.mark.parametrize("name", ["submission_items", "public_items", "shadow_items", "canaries"])
@pytest.mark.parametrize(("value", "code"), ITEM_REFUSALS)
def test_item_refusals(name: str, value: Any, code: str) -> None:
    arguments: dict[str, Any] = {
        "submissions": ("some output",),
        "public": ("public item",),
        "shadow": ("shadow item",),
        "canaries": ("canary",),
    }
    key = {"submission_items": "submissions", "public_items": "public"}.get(
        name, name.replace("_items", "")
    )
    arguments[key] = value
    error = assert_refused(lambda: _scan(**arguments), code, name)
    assert isinstance(error, OverlapForensicsError)
    assert str(error) == f"{name}: {code}"
    assert error.__cause__ is None
    assert error.__suppress_context__ or error.__context__ is None


@pytest.mark.parametrize("name", ["fuzzy_threshold_basis_points", "shadow_margin_basis_points"])
@pytest.mark.parametrize(
    "value",
    [
        pytest.param(-1, id="negative"),
        pytest.param(10001, id="above"),
        pytest.param(True, id="bool"),
        pytest.param(False, id="bool-false"),
        pytest.param(8500.0, id="float"),
        pytest.param(float("nan"), id="nan"),
        pytest.param("8500", id="string"),
        pytest.param(None, id="none"),
        pytest.param(np.int64(8500), id="numpy-int"),
    ],
)
def test_basis_point_refusals(name: str, value: Any) -> None:
    with pytest.raises(OverlapForensicsError) as caught:
        _scan(("output",), **{name: value})
    assert str(caught.value) == f"{name}: invalid_basis_points"


@pytest.mark.parametrize("value", [0, 1, 9999, 10000])
def test_basis_point_edges_are_accepted(value: int) -> None:
    report = _scan(
        ("output",), fuzzy_threshold_basis_points=value, shadow_margin_basis_points=value
    )
    assert report.fuzzy_threshold_basis_points == value
    assert report.shadow_margin_basis_points == value


def _tampered_manifest() -> SealedWorkflowManifest:
    manifest = seal_workflow_manifest(dict(MANIFEST.component_digests))
    object.__setattr__(manifest, "manifest_digest", "sha256:" + "0" * 64)
    return manifest


def _tampered_commitment() -> HoldoutCommitment:
    commitment = HoldoutCommitment.from_dict(COMMITMENT.to_dict())
    object.__setattr__(commitment, "holdout_version", "changed")
    return commitment


MANIFEST_REFUSALS = [
    pytest.param(None, id="none"),
    pytest.param("sha256:" + "a" * 64, id="digest-string"),
    pytest.param({}, id="empty-mapping"),
    pytest.param({**MANIFEST.to_dict(), "x": 1}, id="extra-key"),
    pytest.param(
        {k: v for k, v in MANIFEST.to_dict().items() if k != "schema_version"}, id="missing"
    ),
    pytest.param({**MANIFEST.to_dict(), "manifest_digest": "sha256:" + "0" * 64}, id="mismatch"),
    pytest.param({**MANIFEST.to_dict(), "schema_version": "v2"}, id="schema"),
    pytest.param(_tampered_manifest(), id="tampered-object"),
]


@pytest.mark.parametrize("manifest", MANIFEST_REFUSALS)
def test_manifest_refusals(manifest: Any) -> None:
    with pytest.raises(OverlapForensicsError) as caught:
        _scan(("output",), submission_manifest=manifest)
    assert str(caught.value) == "submission_manifest: invalid"


COMMITMENT_REFUSALS = [
    pytest.param(None, id="none"),
    pytest.param({}, id="empty-mapping"),
    pytest.param({**COMMITMENT.to_dict(), "x": 1}, id="extra-key"),
    pytest.param({**COMMITMENT.to_dict(), "commitment_digest": "sha256:" + "0" * 64}, id="digest"),
    pytest.param({**COMMITMENT.to_dict(), "holdout_version": "other"}, id="version-changed"),
    pytest.param({**COMMITMENT.to_dict(), "schema_version": "v2"}, id="schema"),
    pytest.param(MANIFEST.to_dict(), id="manifest-document"),
    pytest.param(_tampered_commitment(), id="tampered-object"),
]


@pytest.mark.parametrize("commitment", COMMITMENT_REFUSALS)
def test_commitment_refusals(commitment: Any) -> None:
    with pytest.raises(OverlapForensicsError) as caught:
        _scan(("output",), holdout_commitment=commitment)
    assert str(caught.value) == "holdout_commitment: invalid"


def test_refusal_order_follows_the_specification() -> None:
    order = [
        ({"submissions": ()}, "submission_items: empty"),
        ({"public": "x"}, "public_items: invalid_sequence"),
        ({"shadow": (1,)}, "shadow_items: invalid_item"),
        ({"canaries": ()}, "canaries: empty"),
        (
            {"fuzzy_threshold_basis_points": -1},
            "fuzzy_threshold_basis_points: invalid_basis_points",
        ),
        ({"shadow_margin_basis_points": -1}, "shadow_margin_basis_points: invalid_basis_points"),
        ({"submission_manifest": {}}, "submission_manifest: invalid"),
        ({"holdout_commitment": {}}, "holdout_commitment: invalid"),
        ({"submissions": ("!!",)}, "submission_items: empty_after_normalization"),
        ({"public": ("--",)}, "public_items: empty_after_normalization"),
        ({"shadow": ("..",)}, "shadow_items: empty_after_normalization"),
        ({"canaries": ("**",)}, "canaries: empty_after_normalization"),
    ]
    for stop in range(len(order)):
        arguments: dict[str, Any] = {"submissions": ("output",)}
        for change, _message in reversed(order[stop:]):
            arguments.update(change)
        with pytest.raises(OverlapForensicsError) as caught:
            _scan(**arguments)
        assert str(caught.value) == order[stop][1]


def test_normalization_is_unicode_14_on_every_interpreter() -> None:
    tables = forensics._normalize._tables
    assert tables.version == forensics.UNICODE_VERSION == "14.0.0"
    expected = "unicodedata" if unicodedata.unidata_version == "14.0.0" else "sealeval"
    assert tables.provider == expected
    # U+1E030 (new in 15.0) is unassigned in 14.0.0: a space, not U+0430.
    assert normalize_text("a\U0001e030b") == "a b"
    # U+31350 (CJK Extension H, new in 15.0) likewise.
    assert normalize_text("x\U00031350y") == "x y"
    # Kawi digit one (new in 15.0) is no number under 14.0.0.
    assert normalize_text("7\U00011f51") == "7"


# ---------------------------------------------------------------------------
# The shipped 14.0.0 tables (pure path, no interpreter fast path) agree with the
# normalization as run here (CPython 3.11: the standard library's 14.0.0 tables)


def _added_after_14() -> list[int]:
    """Code points the 15.0.0 tables assign and the 14.0.0 tables leave unassigned."""
    old, new = shipped_data("14.0.0"), shipped_data("15.0.0")
    return [code for code in range(0x110000) if old.category(code) == "Cn" != new.category(code)]


@pytest.fixture(scope="module")
def normalizer_pure() -> Any:
    return forensics._Normalizer(PinnedTables("14.0.0", interpreter=False, fast=False))


def test_pure_tables_normalize_every_vector_text_alike(normalizer_pure: Any) -> None:
    texts: list[str] = []
    for case in load(VECTORS)["cases"]:
        data = decode_input(case["input"])
        if not isinstance(data, dict):
            continue
        for key in ("text", "left", "right"):
            if isinstance(data.get(key), str):
                texts.append(data[key])
        for key in ("submission_items", "public_items", "shadow_items", "canaries"):
            if isinstance(data.get(key), list | tuple):
                texts.extend(item for item in data[key] if isinstance(item, str))
    assert texts
    for text in texts:
        assert normalizer_pure(text) == normalize_text(text)


def test_code_points_added_after_14_normalize_as_unassigned(normalizer_pure: Any) -> None:
    added = _added_after_14()
    assert len(added) == 4489  # Unicode 15.0.0 added 4,489 code points
    # alone, after a letter, before combining marks: unassigned in 14.0.0 = a space
    for code_point in added:
        character = chr(code_point)
        for text in (character, f"a{character}b", f"{character}\u0301\u0308x", f"e{character}"):
            assert normalizer_pure(text) == normalize_text(text)
            assert normalize_text(text) == normalize_text(text.replace(character, " "))


_MIXED_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from([chr(code_point) for code_point in (0x0CF3, 0x0ECE, 0x11F00, 0x1E030)]),
        st.sampled_from(["\u0301", "\u0308", "\u0327", "\ufb01", "A", "\u00c5", " "]),
    ),
    max_size=30,
)


@settings(max_examples=500, deadline=None)
@given(text=_MIXED_TEXT)
def test_pure_tables_normalize_mixed_text_alike(normalizer_pure: Any, text: str) -> None:
    assert normalizer_pure(text) == normalize_text(text)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        pytest.param(lambda: normalize_text(b"x"), "text: invalid_text", id="normalize"),
        pytest.param(lambda: trigrams(None), "normalized: invalid_text", id="trigrams"),
        pytest.param(lambda: trigram_similarity(1, "a"), "left: invalid_text", id="left"),
        pytest.param(lambda: trigram_similarity("a", 1), "right: invalid_text", id="right"),
    ],
)
def test_helper_refusals(action: Any, message: str) -> None:
    with pytest.raises(OverlapForensicsError) as caught:
        action()
    assert str(caught.value) == message


def test_error_class_contract() -> None:
    assert OverlapForensicsError.module == "sealeval.session.forensics"
    assert OverlapForensicsError.field_in_message is True
    assert issubclass(OverlapForensicsError, ValueError)
    error = OverlapForensicsError("empty", "canaries")
    assert str(error) == "canaries: empty"
    assert repr(error) == "OverlapForensicsError(code='empty', field='canaries')"


# ---------------------------------------------------------------------------
# Signal and report values
# ---------------------------------------------------------------------------

GOOD_SIGNAL = {
    "check": "fuzzy_overlap",
    "submission_ref": "submission:000001",
    "reference_scope": "public",
    "reference_ref": "public:000002",
    "score_basis_points": 9000,
    "comparison_score_basis_points": None,
}

SIGNAL_REFUSALS = [
    pytest.param({"check": "other"}, "check", id="check"),
    pytest.param({"submission_ref": "submission:1"}, "submission_ref", id="short-ref"),
    pytest.param({"submission_ref": "submission:000000"}, "submission_ref", id="zero-ref"),
    pytest.param({"submission_ref": CANARY}, "submission_ref", id="free-text-ref"),
    pytest.param({"reference_scope": "canary"}, "reference_scope", id="scope-for-check"),
    pytest.param({"reference_ref": "shadow:000002"}, "reference_ref", id="ref-scope"),
    pytest.param({"score_basis_points": 10001}, "score_basis_points", id="score"),
    pytest.param({"score_basis_points": True}, "score_basis_points", id="score-bool"),
    pytest.param({"comparison_score_basis_points": 1}, "comparison_score_basis_points", id="cmp"),
    pytest.param(
        {
            "check": "public_vs_shadow",
            "reference_scope": "shadow",
            "reference_ref": "shadow:000001",
        },
        "comparison_score_basis_points",
        id="cmp-missing",
    ),
]


@pytest.mark.parametrize(("change", "field"), SIGNAL_REFUSALS)
def test_signal_refusals(change: dict[str, Any], field: str) -> None:
    with pytest.raises(OverlapForensicsError) as caught:
        OverlapSignal(**{**GOOD_SIGNAL, **change})
    assert str(caught.value) == f"{field}: invalid_signal"
    assert CANARY not in repr(caught.value)


def _report() -> OverlapForensicsReport:
    return _scan(
        ("alpha beta gamma", "delta epsilon zeta!", "says canary one"),
        public=("alpha beta gamma", "other text"),
        shadow=("DELTA epsilon zeta", "more text"),
    )


REPORT_REFUSALS = [
    pytest.param({"schema_version": "v2"}, "schema_version", id="schema"),
    pytest.param({"policy_version": "p2"}, "policy_version", id="policy"),
    pytest.param({"submission_manifest_digest": CANARY}, "submission_manifest_digest", id="digest"),
    pytest.param({"holdout_commitment_digest": None}, "holdout_commitment_digest", id="digest2"),
    pytest.param({"fuzzy_threshold_basis_points": -1}, "fuzzy_threshold_basis_points", id="fuzzy"),
    pytest.param({"shadow_margin_basis_points": 1.0}, "shadow_margin_basis_points", id="margin"),
    pytest.param({"coverage": {}}, "coverage", id="coverage"),
    pytest.param({"signals": []}, "signals", id="signals-list"),
    pytest.param({"signals": ("x",)}, "signals", id="signals-type"),
    pytest.param({"signal_counts": {}}, "signal_counts", id="counts"),
    pytest.param({"interpretation": INTERPRETATION_NO_SIGNALS}, "interpretation", id="sentence"),
]


@pytest.mark.parametrize(("change", "field"), REPORT_REFUSALS)
def test_report_refusals(change: dict[str, Any], field: str) -> None:
    with pytest.raises(OverlapForensicsError) as caught:
        dataclasses.replace(_report(), **change)
    assert str(caught.value) == f"{field}: invalid_report"


def test_report_refuses_inconsistent_coverage_and_order() -> None:
    report = _report()
    coverage = report.to_dict()["coverage"]
    bad_counts = {**coverage, "comparison_counts": {**coverage["comparison_counts"], "x": 1}}
    with pytest.raises(OverlapForensicsError, match=r"^coverage.comparison_counts: "):
        dataclasses.replace(report, coverage=bad_counts)
    with pytest.raises(OverlapForensicsError, match=r"^coverage: "):
        dataclasses.replace(report, coverage={**coverage, "checks": list(reversed(CHECKS))})
    with pytest.raises(OverlapForensicsError, match=r"^signals: "):
        dataclasses.replace(report, signals=tuple(reversed(report.signals)))
    counts = {**report.signal_counts, "exact_overlap": True}
    with pytest.raises(OverlapForensicsError, match=r"^signal_counts: "):
        dataclasses.replace(report, signal_counts=counts)


def test_report_is_immutable_and_serializes_fresh_documents() -> None:
    report = _report()
    assert report.signals_detected
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.interpretation = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        report.coverage["public_items"] = 9  # type: ignore[index]
    with pytest.raises(TypeError):
        report.coverage["comparison_counts"]["canary_signal"] = 9
    with pytest.raises(TypeError):
        report.signal_counts["canary_signal"] = 9  # type: ignore[index]
    first = report.to_dict()
    first["coverage"]["checks"].append("x")
    first["signals"].clear()
    assert report.to_dict() != first
    assert report.to_dict() == json.loads(report.to_json())
    rebuilt = dataclasses.replace(report)
    assert rebuilt.to_json() == report.to_json()
    assert [signal.check for signal in report.signals] == [
        "exact_overlap",
        "normalized_overlap",
        "canary_signal",
        "public_vs_shadow",
    ]


def test_inputs_are_snapshotted() -> None:
    submissions = ["alpha beta gamma"]
    report = _scan(submissions, public=["alpha beta gamma"])
    submissions.append("changed")
    assert report.coverage["submission_items"] == 1


# ---------------------------------------------------------------------------
# Never echo
# ---------------------------------------------------------------------------


def _canary_refusals() -> list[dict[str, Any]]:
    text = f"{CANARY} clinical note"
    return [
        {"submissions": (text, 1)},
        {"submissions": (CANARY, "   ")},
        {"public": CANARY},
        {"public": (text, None)},
        {"shadow": {CANARY: CANARY}},
        {"canaries": (CANARY, b"x")},
        {"submissions": _ExplodingSequence()},
        {"fuzzy_threshold_basis_points": CANARY},
        {"shadow_margin_basis_points": CANARY},
        {"submission_manifest": {CANARY: CANARY}},
        {"submission_manifest": {**MANIFEST.to_dict(), "manifest_digest": CANARY}},
        {"holdout_commitment": {**COMMITMENT.to_dict(), "holdout_version": CANARY}},
        {"holdout_commitment": {CANARY: 1}},
        {"submissions": (text, "\u00bf!"), "public": (text,), "shadow": (text,)},
        {"canaries": (text, "\u2014")},
    ]


def _texts(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), *map(str, error.args)]
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None:
        texts += _texts(cause)
    return texts


def test_refusals_never_echo_submitted_values(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for arguments in _canary_refusals():
        arguments.setdefault("submissions", (f"{CANARY} text",))
        with pytest.raises(OverlapForensicsError) as caught:
            _scan(**arguments)
        assert caught.value.code in OverlapForensicsError.codes
        for text in _texts(caught.value):
            assert CANARY not in text
            assert CANARY.lower() not in text
    assert CANARY.lower() not in caplog.text.lower()


def test_reports_never_carry_submitted_text(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    text = f"{CANARY} patient note"
    report = _scan(
        (text, text.upper(), f"{text} plus", "unrelated words here"),
        public=(text, "another public item"),
        shadow=(f"{text} plus", CANARY),
        canaries=(CANARY, f"{CANARY}-2"),
        fuzzy_threshold_basis_points=0,
        shadow_margin_basis_points=0,
    )
    assert report.signals_detected
    for rendered in (report.to_json(), repr(report), str(report.to_dict()), caplog.text):
        assert CANARY not in rendered
        assert CANARY.lower() not in rendered
        assert "patient" not in rendered


# ---------------------------------------------------------------------------
# Normalization and similarity properties
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("Straße", "strasse"),
        ("İstanbul", "i stanbul"),
        ("x²", "x2"),
        ("\ufb01", "fi"),
        ("---", ""),
        ("a\u00a0b\u2028c\x00d", "a b c d"),
        ("\ud800lone surrogate", "lone surrogate"),
        ("ǅ", "dž"),
    ],
)
def test_normalization_examples(text: str, normalized: str) -> None:
    assert normalize_text(text) == normalized


@given(st.text(max_size=40))
def test_normalized_text_is_letters_numbers_and_single_spaces(text: str) -> None:
    normalized = normalize_text(text)
    assert normalized == normalized.strip(" ")
    assert "  " not in normalized
    for char in normalized:
        assert char == " " or unicodedata.category(char)[0] in "LN"


@given(st.text(alphabet="ab c", max_size=12), st.text(alphabet="ab c", max_size=12))
def test_similarity_is_symmetric_and_bounded(left: str, right: str) -> None:
    forward = trigram_similarity(left, right)
    assert forward == trigram_similarity(right, left)
    assert 0 <= forward.basis_points <= 10000
    assert forward.intersection <= forward.union
    assert trigram_similarity(left, left).basis_points == 10000


# ---------------------------------------------------------------------------
# The fast scan equals a brute-force all-pairs scan written from the spec
# ---------------------------------------------------------------------------


def _brute_force(
    submissions: Sequence[str],
    public: Sequence[str],
    shadow: Sequence[str],
    canaries: Sequence[str],
    threshold: int,
    margin: int,
) -> list[dict[str, Any]]:
    """Return the sorted signal documents of the specified all-pairs algorithm."""
    norm = normalize_text

    def similarity(a: str, b: str) -> int:
        left, right = trigrams(a), trigrams(b)
        union = len(left | right)
        return 10000 if union == 0 else len(left & right) * 10000 // union

    found: list[tuple[str, int, str, int, int, int | None]] = []
    for i, text in enumerate(submissions):
        for scope, items in (("public", public), ("shadow", shadow)):
            for j, item in enumerate(items):
                if text == item:
                    found.append(("exact_overlap", i, scope, j, 10000, None))
                elif norm(text) == norm(item):
                    found.append(("normalized_overlap", i, scope, j, 10000, None))
                else:
                    score = similarity(norm(text), norm(item))
                    if score >= threshold:
                        found.append(("fuzzy_overlap", i, scope, j, score, None))
    for i, text in enumerate(submissions):
        for j, canary in enumerate(canaries):
            if norm(canary) in norm(text):
                found.append(("canary_signal", i, "canary", j, 10000, None))
    for i, text in enumerate(submissions):
        best_public = max(similarity(norm(text), norm(item)) for item in public)
        shadow_scores = [similarity(norm(text), norm(item)) for item in shadow]
        best_shadow = max(shadow_scores)
        if best_shadow >= threshold and best_shadow - best_public >= margin:
            j = shadow_scores.index(best_shadow)
            found.append(("public_vs_shadow", i, "shadow", j, best_shadow, best_public))
    documents = [
        {
            "check": check,
            "comparison_score_basis_points": comparison,
            "reference_ref": f"{scope}:{j + 1:06d}",
            "reference_scope": scope,
            "score_basis_points": score,
            "submission_ref": f"submission:{i + 1:06d}",
        }
        for check, i, scope, j, score, comparison in found
    ]
    scopes = {"public": 0, "shadow": 1, "canary": 2}
    documents.sort(
        key=lambda d: (
            CHECKS.index(d["check"]),
            d["submission_ref"],
            scopes[d["reference_scope"]],
            d["reference_ref"],
        )
    )
    return documents


@contextmanager
def _engine_settings(extension: int, dense_fraction: int) -> Iterator[None]:
    with (
        mock.patch.object(trigram_engine, "_EXTENSION", extension),
        mock.patch.object(trigram_engine, "_DENSE_FRACTION", dense_fraction),
    ):
        yield


def _assert_same_as_brute_force(
    submissions: list[str],
    public: list[str],
    shadow: list[str],
    canaries: list[str],
    threshold: int,
    margin: int,
) -> None:
    report = _scan(
        submissions,
        public,
        shadow,
        canaries,
        fuzzy_threshold_basis_points=threshold,
        shadow_margin_basis_points=margin,
    )
    expected = _brute_force(submissions, public, shadow, canaries, threshold, margin)
    assert report.to_dict()["signals"] == expected
    counts = {check: sum(d["check"] == check for d in expected) for check in CHECKS}
    assert dict(report.signal_counts) == counts
    assert report.interpretation == (
        INTERPRETATION_SIGNALS if expected else INTERPRETATION_NO_SIGNALS
    )


_WORDS = st.sampled_from(["ab", "ba", "abc", "cab", "a", "b", "bca", "Ab", "AB!", "ca-b"])
_TEXTS = st.lists(_WORDS, min_size=1, max_size=9).map(" ".join)


@st.composite
def _corpora(draw: st.DrawFn) -> tuple[list[str], ...]:
    public = draw(st.lists(_TEXTS, min_size=1, max_size=8))
    shadow = draw(st.lists(_TEXTS, min_size=1, max_size=8))
    pool = public + shadow
    copied = st.tuples(st.sampled_from(pool), st.booleans()).map(
        lambda pair: pair[0].upper() if pair[1] else pair[0]
    )
    submissions = draw(st.lists(st.one_of(_TEXTS, copied), min_size=1, max_size=6))
    canaries = draw(st.lists(_TEXTS, min_size=1, max_size=3))
    return submissions, public, shadow, canaries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpus=_corpora(),
    threshold=st.one_of(st.sampled_from([0, 1, 5000, 8500, 10000]), st.integers(0, 10000)),
    margin=st.one_of(st.sampled_from([0, 1000, 10000]), st.integers(0, 10000)),
    extension=st.sampled_from([1, 2, 8]),
    dense_fraction=st.sampled_from([1, 4, 32, 10**9]),
)
def test_fast_scan_equals_brute_force(
    corpus: tuple[list[str], ...], threshold: int, margin: int, extension: int, dense_fraction: int
) -> None:
    submissions, public, shadow, canaries = corpus
    with _engine_settings(extension, dense_fraction):
        _assert_same_as_brute_force(submissions, public, shadow, canaries, threshold, margin)


def _edited(rng: random.Random, text: str, vocabulary: list[str]) -> str:
    words = text.split(" ")
    for _ in range(rng.randint(0, 2)):
        words[rng.randrange(len(words))] = rng.choice(vocabulary)
    return " ".join(words)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    ("threshold", "margin"), [(8500, 1000), (6000, 0), (9500, 3000), (3000, 200)]
)
def test_fast_scan_equals_brute_force_on_longer_texts(
    seed: int, threshold: int, margin: int
) -> None:
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 5))) for _ in range(60)
    ]

    def sentence() -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 14)))

    public = [sentence() for _ in range(70)]
    shadow = [sentence() for _ in range(50)] + public[:3]
    submissions = [
        rng.choice(
            [
                sentence(),
                rng.choice(public),
                rng.choice(shadow).upper() + "!",
                _edited(rng, rng.choice(shadow), vocabulary),
                _edited(rng, rng.choice(public), vocabulary),
            ]
        )
        for _ in range(25)
    ]
    canaries = [rng.choice(vocabulary) + " " + rng.choice(vocabulary) for _ in range(4)]
    for extension, dense_fraction in ((1, 32), (3, 4), (8, 10**9)):
        with _engine_settings(extension, dense_fraction):
            _assert_same_as_brute_force(submissions, public, shadow, canaries, threshold, margin)


def test_popcount_fallback_without_numpy_bitwise_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    words = np.array([0, 1, 2**64 - 1, 0b1011], dtype=np.uint64)
    assert trigram_engine._popcount(words).tolist() == [0, 1, 64, 3]
    _assert_same_as_brute_force(
        ["abc abd abe xyz"],
        ["abc abd", "qqq rrr", "abc qqq"],
        ["abc abd abe xyz", "zzz"],
        ["xyz"],
        8500,
        1000,
    )


def test_non_ascii_and_short_texts_match_brute_force() -> None:
    submissions = ["İstanbul", "ab", "a", "STRASSE", "中文\uff0c标点", "x² y³", "ß"]
    public = ["i stanbul", "Straße", "ab", "中文 标点", "a"]
    shadow = ["ab", "x2 y3", "b", "ss", "SS"]
    canaries = ["ss", "中", "A"]
    for threshold in (0, 1, 5000, 10000):
        _assert_same_as_brute_force(submissions, public, shadow, canaries, threshold, 0)


def test_identical_submissions_share_work_but_keep_raw_distinctions() -> None:
    report = _scan(
        ("alpha beta", "ALPHA BETA", "alpha beta"),
        public=("alpha beta",),
        shadow=("gamma",),
    )
    checks = [(s.check, s.submission_ref) for s in report.signals]
    assert checks == [
        ("exact_overlap", "submission:000001"),
        ("exact_overlap", "submission:000003"),
        ("normalized_overlap", "submission:000002"),
    ]


def test_each_canary_occurrence_is_reported_once_per_pair() -> None:
    report = _scan(
        ("x aa aa aa", "aa", "b", "aab"),
        canaries=("aa", "AA", "zz"),
    )
    pairs = [(s.submission_ref, s.reference_ref) for s in report.signals]
    assert pairs == [
        ("submission:000001", "canary:000001"),
        ("submission:000001", "canary:000002"),
        ("submission:000002", "canary:000001"),
        ("submission:000002", "canary:000002"),
        ("submission:000004", "canary:000001"),
        ("submission:000004", "canary:000002"),
    ]


def test_large_alphabets_use_the_sorting_path() -> None:
    # More than 255 distinct code points: trigram keys no longer fit the lookup table.
    rng = random.Random(5)
    letters = [chr(0x4E00 + index) for index in range(400)]

    def text() -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randint(1, 12)))

    public = [text() for _ in range(30)]
    shadow = [text() for _ in range(30)] + public[:2]
    submissions = [text() for _ in range(6)] + [public[3], shadow[4] + letters[0]]
    for threshold in (0, 5000, 8500):
        _assert_same_as_brute_force(submissions, public, shadow, [letters[7]], threshold, 100)


def test_engine_edge_helpers() -> None:
    assert trigram_engine._ranges(np.array([4]), np.array([0])).tolist() == []
    assert trigram_engine._ranges(np.array([4, 9]), np.array([2, 1])).tolist() == [4, 5, 9]
    with mock.patch.object(trigram_engine, "_CHUNK_CODE_POINTS", 5):
        assert trigram_engine._chunks([]) == []
        assert trigram_engine._chunks([2, 3, 1, 9, 4]) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert trigram_engine._index_dtype(1 << 31) is np.int32
    assert trigram_engine._index_dtype((1 << 31) + 1) is np.int64
    empty = trigram_engine._TrigramSets([], np.zeros(0, dtype=np.int64))
    assert (empty.tokens.size, empty.sizes.size, empty.indptr.tolist()) == (0, 0, [0])


@pytest.mark.parametrize(("chunk", "narrow"), [(1, 1 << 31), (7, 1), (40, 2), (1 << 19, 1)])
def test_chunked_and_wide_indexes_match_brute_force(chunk: int, narrow: int) -> None:
    # Texts tokenized in chunks of any size, with 32-bit or 64-bit ids: the same report.
    rng = random.Random(chunk * 31 + narrow)
    letters = ["a", "b", "c", "ß", "中", "x"]

    def text() -> str:
        return " ".join(
            "".join(rng.choice(letters) for _ in range(rng.randint(1, 4)))
            for _ in range(rng.randint(1, 6))
        )

    public = [text() for _ in range(12)] + ["ab", "c"]
    shadow = [text() for _ in range(9)] + public[:2]
    submissions = [text() for _ in range(5)] + [public[3], shadow[1].upper(), "c"]
    with (
        mock.patch.object(trigram_engine, "_CHUNK_CODE_POINTS", chunk),
        mock.patch.object(trigram_engine, "_NARROW_LIMIT", narrow),
    ):
        for threshold in (0, 5000, 8500):
            _assert_same_as_brute_force(submissions, public, shadow, ["ab"], threshold, 500)
        sets = trigram_engine._TrigramSets(["abcd", "ab", "abcd"], np.array([1, 2]))
        assert sets.tokens.dtype == (np.int32 if narrow > 2 else np.int64)


def test_failed_commitment_verification_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class _Invalid:
        valid = False

    monkeypatch.setattr(forensics, "verify_holdout_commitment", lambda _commitment: _Invalid())
    with pytest.raises(OverlapForensicsError) as caught:
        _scan(("output",))
    assert str(caught.value) == "holdout_commitment: invalid"
