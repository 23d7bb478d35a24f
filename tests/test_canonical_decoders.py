"""The decoders for evaluator exports and raw spans (``sealeval.canonical``, last decoding section).

Each is checked against the strict decoder it sits beside: what it accepts
beyond :func:`~sealeval.canonical.decode` is exactly what its docstring says,
and everything else is refused or decoded to the same value.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval.canonical import (
    EVALUATOR_CODES,
    EVALUATOR_DECODER,
    EVALUATOR_NAN,
    JSONDecodeError,
    decode,
    scan_raw,
    scan_strict,
)
from sealeval.captured.importers.base import ImportRefusalError
from sealeval.errors import CanonicalError
from support.refusals import assert_refused

_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=8)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=12,
)


def _same(left: Any, right: Any) -> bool:
    """Equal values with equal JSON types at every level (``1`` is not ``1.0``)."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True) and type(
        left
    ) is type(right)


# ---------------------------------------------------------------------------
# EVALUATOR_DECODER


@settings(max_examples=60, deadline=None)
@given(_JSON)
def test_evaluator_decoder_agrees_with_the_strict_decoder_without_nan(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert _same(EVALUATOR_DECODER.decode(text), decode(text))


def test_a_bare_nan_becomes_the_one_marker_anywhere() -> None:
    value = EVALUATOR_DECODER.decode('{"acc": NaN, "per": [1, NaN, {"f1": NaN}]}')
    assert value["acc"] is EVALUATOR_NAN
    assert value["per"][1] is EVALUATOR_NAN
    assert value["per"][2]["f1"] is EVALUATOR_NAN
    assert value["per"][0] == 1
    assert repr(EVALUATOR_NAN) == "NaN"
    # the marker is no float: a reader decides what it means, nothing computes with it
    assert not isinstance(EVALUATOR_NAN, float)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param('{"a": Infinity}', "non_standard_constant", id="infinity"),
        pytest.param('{"a": -Infinity}', "non_standard_constant", id="minus-infinity"),
        pytest.param('{"a": 1e400}', "non_finite_number", id="overflow"),
        pytest.param('{"a": -1e400}', "non_finite_number", id="negative-overflow"),
        pytest.param('{"a": 1, "a": 2}', "duplicate_key", id="duplicate-key"),
        pytest.param('[{"x": {"a": 1, "a": 1}}]', "duplicate_key", id="nested-duplicate-key"),
    ],
)
def test_evaluator_decoder_refuses_what_exports_never_need(text: str, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        EVALUATOR_DECODER.decode(text)
    assert_refused(caught, code)
    assert code in EVALUATOR_CODES


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"a": nan}', id="lowercase-nan"),
        pytest.param('{"a": 1,}', id="trailing-comma"),
        pytest.param('{"a": "x\n"}', id="raw-control-character"),
        pytest.param('{"a": 1} {"b": 2}', id="two-documents"),
        pytest.param("", id="empty"),
    ],
)
def test_evaluator_decoder_keeps_the_strict_grammar(text: str) -> None:
    with pytest.raises(ValueError):
        EVALUATOR_DECODER.decode(text)
    with pytest.raises(CanonicalError):
        decode(text)


# ---------------------------------------------------------------------------
# scan_strict


@settings(max_examples=60, deadline=None)
@given(_JSON, st.text(alphabet=" \t", max_size=3))
def test_scan_strict_reads_the_value_at_a_position_as_decode_does(value: Any, pad: str) -> None:
    text = json.dumps(value, ensure_ascii=False)
    framed = "[" + pad + text + pad + ",0]"
    start = 1 + len(pad)
    scanned, end = scan_strict(framed, start)
    assert _same(scanned, decode(text))
    assert end == start + len(text)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param('{"a": NaN}', "non_standard_constant", id="nan"),
        pytest.param('{"a": Infinity}', "non_standard_constant", id="infinity"),
        pytest.param('{"a": 1e400}', "non_finite_number", id="overflow"),
        pytest.param('{"a": 1, "a": 2}', "duplicate_key", id="duplicate-key"),
    ],
)
def test_scan_strict_has_the_strict_hooks(text: str, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        scan_strict(text, 0)
    assert_refused(caught, code)


def test_scan_strict_reads_nothing_but_the_value() -> None:
    # no whitespace is skipped, and what follows the value is not looked at
    with pytest.raises(StopIteration):
        scan_strict(' {"a": 1}', 0)
    assert scan_strict('{"a": 1} trailing garbage', 0) == ({"a": 1}, 8)
    with pytest.raises(StopIteration):
        scan_strict('{"a": }', 0)  # no value where one must start, even inside
    with pytest.raises(ValueError):
        scan_strict('{"a" 1}', 0)


# ---------------------------------------------------------------------------
# scan_raw


def test_scan_raw_is_pythons_grammar_at_a_position() -> None:
    text = '[1, {"a": 1, "a": 2, "n": NaN}, "x"]'
    start = text.index("{")
    value, end = scan_raw(text, start)
    assert value["a"] == 2  # duplicates kept last: the caller proves the value otherwise
    assert math.isnan(value["n"])
    assert text[end:] == ', "x"]'


def test_scan_raw_tells_a_cut_off_value_by_its_error() -> None:
    whole = '{"id": "r1", "scores": {"f1": 0.5}}'
    assert scan_raw(whole, 0) == (json.loads(whole), len(whole))
    for cut in range(1, len(whole)):
        with pytest.raises(JSONDecodeError):
            scan_raw(whole[:cut], 0)


def test_evaluator_codes_map_every_decoding_code_onto_an_importer_code() -> None:
    decoding = {
        "not_utf8",
        "byte_order_mark",
        "invalid_json",
        "duplicate_key",
        "non_standard_constant",
        "non_finite_number",
        "too_large",
        "too_deep",
        "string_too_long",
        "integer_too_long",
        "unpaired_surrogate",
    }
    assert set(EVALUATOR_CODES) == decoding
    assert decoding <= CanonicalError.codes
    assert set(EVALUATOR_CODES.values()) <= ImportRefusalError.codes
    assert EVALUATOR_CODES["non_standard_constant"] == "non_finite_number"
    assert EVALUATOR_CODES["string_too_long"] == "too_large"
    with pytest.raises(TypeError):
        EVALUATOR_CODES["too_deep"] = "other"  # type: ignore[index]
