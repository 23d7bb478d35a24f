"""Case sets: freezing, digests and run membership."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.captured import (
    INVARLOCK_LIMITS,
    CapturedRunError,
    Case,
    CaseSet,
    case_set_digest,
    case_set_from_document,
    case_set_of_run,
    freeze_case_set,
    make_run,
    parse_case_set,
    run_from_document,
    validate_run_case_set,
    write_case_set,
)
from sealeval.errors import CanonicalError, OutputError
from support.captured_case_set import (
    _GOOD_RUN,
    CASE_SET_REFUSALS,
    SOURCE,
    _case,
    _run,
)
from support.digests import ARTIFACT
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases, load, reference_code

CASE_SET_SCHEMA = Draft202012Validator(
    json.loads(
        (PROJECT_ROOT / "contracts" / "invarlock.evaluation-case-set-v1.schema.json").read_text(
            encoding="utf-8"
        )
    )
)
RUN_SCHEMA = Draft202012Validator(
    json.loads(
        (PROJECT_ROOT / "contracts" / "invarlock.evaluation-run-v1.schema.json").read_text(
            encoding="utf-8"
        )
    )
)

_CASES_RECIPE = re.compile(
    r"(\d+) cases; case i \(0-based\) = \{id: 'c' \+ i as 5-digit zero-padded decimal, "
    r"input: null, expected: null, metadata: \{\}\}"
)
_RECORDS_RECIPE = re.compile(
    r"(\d+) records; record i = \{id: 'c' \+ 5-digit zero-padded i, input: null, "
    r"expected: null, output: null\}"
)


def _recipe_cases(recipe: str) -> list[dict[str, Any]]:
    match = _CASES_RECIPE.fullmatch(recipe)
    if match is None:
        pytest.fail("vector recipe not understood")
    return [
        {"id": f"c{index:05d}", "input": None, "expected": None, "metadata": {}}
        for index in range(int(match.group(1)))
    ]


def _recipe_records(recipe: str) -> list[dict[str, Any]]:
    match = _RECORDS_RECIPE.fullmatch(recipe)
    if match is None:
        pytest.fail("vector recipe not understood")
    return [
        {"id": f"c{index:05d}", "input": None, "expected": None, "output": None}
        for index in range(int(match.group(1)))
    ]


# Message shapes of the reference (informational; they quote values) -> our codes.
_MESSAGE_CODES: tuple[tuple[str, str, str], ...] = (
    ("planned case set has duplicate case IDs", "", "duplicate_id"),
    ("invalid case_set cases.", "is a required property", "missing_field"),
    ("invalid case_set cases.", "Additional properties are not allowed", "unknown_field"),
    ("invalid case_set cases.", "is not of type 'string'", "invalid_type"),
    ("invalid case_set: cases is too long", "", "too_many_cases"),
    ("case set must contain 1..50000 cases", "", "no_cases"),
    ("run must contain 1..50000 records", "", "too_many_records"),
    ("run '", "' does not match the planned case set", "case_set_mismatch"),
    ("expected_case_set_digest must be a lowercase sha256 digest", "", "invalid_digest"),
)


def message_code(message: str) -> str:
    return reference_code(message, _MESSAGE_CODES)


def _action(case_input: dict[str, Any]) -> Callable[[], Any]:
    keys = set(case_input)
    if keys == {"cases"}:
        return lambda: freeze_case_set(case_input["cases"], limits=INVARLOCK_LIMITS)
    if keys == {"cases_recipe"}:
        items = _recipe_cases(case_input["cases_recipe"])
        return lambda: freeze_case_set(items, limits=INVARLOCK_LIMITS)
    if keys == {"records_recipe", "source", "run_id", "artifact_digest"}:
        records = _recipe_records(case_input["records_recipe"])
        return lambda: make_run(
            records,
            source=case_input["source"],
            run_id=case_input["run_id"],
            artifact_digest=case_input["artifact_digest"],
            limits=INVARLOCK_LIMITS,
        )
    if keys == {"run", "expected_case_set_digest"}:
        RUN_SCHEMA.validate(case_input["run"])
        run = run_from_document(case_input["run"])
        return lambda: validate_run_case_set(run, case_input["expected_case_set_digest"])
    pytest.fail("vector case shape not understood")


@pytest.mark.parametrize("case", cases("invarlock/case_sets.json"))
def test_case_set_vector(case: dict[str, Any]) -> None:
    action = _action(case["input"])
    expected = case["expected"]
    if set(expected) == {"error"}:
        code = message_code(expected["error"]["message"])
        with pytest.raises(CapturedRunError) as caught:
            action()
        assert caught.value.code == code
        return
    result = action()
    if set(expected) == {"valid"}:
        assert expected["valid"] is True
        assert result is None
    elif set(expected) == {"run_digest"}:
        assert result.digest == expected["run_digest"]
    elif "case_set_digest" in expected and set(expected) <= {
        "case_set_digest",
        "frozen_canonical",
        "frozen",
    }:
        assert isinstance(result, CaseSet)
        assert result.digest == expected["case_set_digest"]
        assert case_set_digest(result) == expected["case_set_digest"]
        if "frozen_canonical" in expected:
            assert result.to_canonical() == expected["frozen_canonical"].encode("utf-8")
            CASE_SET_SCHEMA.validate(json.loads(expected["frozen_canonical"]))
        if "frozen" in expected:
            assert result.to_dict() == expected["frozen"]
    else:
        pytest.fail("vector case shape not understood")


def test_cap_cases_are_limits_not_rules() -> None:
    """Without the compatibility limit, 50,001 cases and records are fine (sealeval scales)."""
    document = load("invarlock/case_sets.json")
    recipes = {c["name"]: c["input"] for c in document["cases"]}
    frozen = freeze_case_set(_recipe_cases(recipes["cap-50001-cases"]["cases_recipe"]))
    assert len(frozen) == 50_001
    run_input = recipes["cap-50001-records-run"]
    run = make_run(
        _recipe_records(run_input["records_recipe"]),
        source=run_input["source"],
        run_id=run_input["run_id"],
        artifact_digest=run_input["artifact_digest"],
    )
    assert len(run) == 50_001
    assert case_set_of_run(run).digest == frozen.digest


def test_every_message_shape_is_used() -> None:
    messages = [
        c["expected"]["error"]["message"]
        for c in load("invarlock/case_sets.json")["cases"]
        if "error" in c["expected"]
    ]
    assert {message_code(m) for m in messages} == {code for _, _, code in _MESSAGE_CODES}


# ---------------------------------------------------------------------------
# Behaviour


def test_membership_ignores_outputs_scores_errors_and_context() -> None:
    planned = freeze_case_set([_case(id="b"), _case(id="a")])
    run = _run(
        [
            {"id": "a", "input": "i", "expected": "e", "output": None, "metadata": {"t": "a"}},
            {
                "id": "b",
                "input": "i",
                "expected": "e",
                "output": "x",
                "error": "timeout",
                "scores": {"s": 1},
                "context": {"c": 1},
                "metadata": {"t": "a"},
            },
        ]
    )
    validate_run_case_set(run, planned.digest)
    assert case_set_of_run(run) == planned
    assert planned.ids == ("a", "b")


def test_projected_runs_are_members_by_their_projected_input() -> None:
    run = make_run(
        [{"id": "a", "input": {"q": "text"}, "expected": "e", "output": "o"}],
        source=SOURCE,
        run_id="r",
        artifact_digest=ARTIFACT,
        input_projection={"kind": "json-pointer", "pointer": "/input/q"},
    )
    validate_run_case_set(run, case_set_digest([_case(id="a", input="text", metadata={})]))


def test_documents_files_and_equality(tmp_path: Path) -> None:
    frozen = freeze_case_set([_case(id="q1"), _case(id="q0")])
    document = frozen.to_dict()
    CASE_SET_SCHEMA.validate(document)
    assert [c["id"] for c in document["cases"]] == ["q0", "q1"]
    assert case_set_from_document(document) == frozen
    assert parse_case_set(frozen.to_canonical()) == frozen
    assert hash(frozen) == hash(freeze_case_set(reversed(frozen.cases)))
    assert frozen.cases[0] == Case.from_document(_case())
    assert frozen.cases[0] != Case.from_document(_case(input="other"))
    assert frozen.cases[0] != "x"
    assert frozen != "x"
    assert frozen.cases[0].to_dict() == _case()
    target = tmp_path / "cases.json"
    assert write_case_set(frozen, target) == frozen.digest
    assert target.read_bytes() == frozen.to_canonical()
    with pytest.raises(OutputError):
        write_case_set(frozen, target)
    with pytest.raises(CanonicalError):
        parse_case_set(b'{"format":1,"format":2}')


@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(
        st.fixed_dictionaries(
            {
                "id": st.text(
                    alphabet=st.characters(blacklist_categories=("Cs", "Cc")),
                    min_size=1,
                    max_size=10,
                ),
                "input": st.none() | st.integers() | st.text(max_size=5),
                "expected": st.none() | st.text(max_size=5),
                "metadata": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
            }
        ),
        min_size=1,
        max_size=8,
        unique_by=lambda item: item["id"],
    ),
    data=st.data(),
)
def test_digest_does_not_depend_on_case_order(
    items: list[dict[str, Any]], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(items))
    frozen = freeze_case_set(items)
    assert case_set_digest(shuffled) == frozen.digest
    assert list(frozen.ids) == sorted(item["id"] for item in items)
    run = _run([{**item, "output": None} for item in shuffled])
    validate_run_case_set(run, frozen.digest)


# ---------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("name", "action", "code"), CASE_SET_REFUSALS, ids=[row[0] for row in CASE_SET_REFUSALS]
)
def test_case_set_refusal(name: str, action: Callable[[], object], code: str) -> None:
    with pytest.raises(CapturedRunError) as caught:
        action()
    assert caught.value.code == code, name


def test_case_set_refusals_never_echo() -> None:
    for action in (
        lambda: freeze_case_set([_case(id=CANARY), _case(id=CANARY)]),
        lambda: freeze_case_set([_case(id=CANARY * 5)]),
        lambda: freeze_case_set([_case(**{CANARY: CANARY})]),
        lambda: freeze_case_set([_case(metadata={CANARY: 1})]),
        lambda: validate_run_case_set(_GOOD_RUN, CANARY),
    ):
        with pytest.raises(CapturedRunError) as caught:
            action()
        assert CANARY not in str(caught.value)
        assert CANARY not in repr(caught.value)
    frozen = freeze_case_set([_case(id=CANARY, input=CANARY, metadata={CANARY: CANARY})])
    assert CANARY not in repr(frozen)
    assert CANARY not in repr(frozen.cases[0])
