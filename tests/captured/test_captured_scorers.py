"""Deterministic scorers and pinned Unicode tables: vectors, refusals, properties, never-echo."""

from __future__ import annotations

import json
import logging
import sys
import types
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval.canonical import decode, encode_invarlock
from sealeval.captured import scorers as scorer_module
from sealeval.captured import unicode_tables as tables_module
from sealeval.captured.scorers import (
    BINARY_KINDS,
    BOOTSTRAP_KINDS,
    KINDS,
    RECOMPUTED_KINDS,
    NormalizedNll,
    RecordedScore,
    ScorerError,
    check_configuration,
    deterministic_scorer,
    output_available,
    score,
)
from sealeval.captured.unicode_tables import (
    REFERENCE_UNICODE_VERSION,
    WHITESPACE,
    UnicodeTables,
    UnicodeTablesError,
    available_unicode_versions,
    is_unicode_version,
    unicode_tables,
)
from sealeval.errors import CanonicalError
from support.refusals import CANARY
from support.vectors import cases

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
DIGEST_C = "sha256:" + "c" * 64
UNICODE_15 = {"unicode_version": "15.0.0"}
INTERPRETER_UNICODE = unicodedata.unidata_version

# ---------------------------------------------------------------------------
# Golden vectors

# The reference's messages are informational; each distinct message maps to our code.
_MESSAGE_CODES = {
    "text scorer requires string expected and output values": "reference_not_text",
    "numeric reference must be finite": "reference_not_numeric",
    "JSON reference must be a valid finite JSON value": "reference_not_json",
    "reference must contain every configured JSON field": "reference_missing_field",
    "normalized_match requires Unicode '15.1.0'; this runtime provides 15.0.0. "
    "Use a runtime with the policy's Unicode version.": "unsupported_unicode_version",
    "normalized_match requires an explicit unicode_version": "missing_field",
    "casefold must be a boolean": "invalid_casefold",
    "unsupported configuration for 'normalized_match'": "unsupported_configuration",
    "unsupported configuration for 'numeric_tolerance'": "unsupported_configuration",
    "unsupported configuration for 'exact_match'": "unsupported_configuration",
    "unsupported configuration for 'bleu'": "unknown_kind",
    "absolute tolerance must be a finite nonnegative number": "invalid_tolerance",
    "json_fields requires 1\u2013100 JSON pointer fields": "invalid_fields",
    "JSON pointer fields must be unique": "duplicate_field",
    "invalid JSON pointer escape": "invalid_pointer_escape",
}


@pytest.mark.parametrize("case", cases("invarlock/scorers.json"))
def test_scorer_vector(case: dict[str, Any]) -> None:
    given_input = case["input"]
    if set(given_input) != {"kind", "expected", "output", "configuration"}:
        pytest.fail("vector case shape not understood")
    kind = given_input["kind"]
    arguments = (given_input["expected"], given_input["output"], given_input["configuration"])
    expected = case["expected"]
    if set(expected) == {"score", "output_available"}:
        result = score(kind, *arguments)
        assert type(result) is float
        assert repr(result) == repr(expected["score"])
        assert output_available(kind, given_input["output"]) is expected["output_available"]
        scorer = deterministic_scorer(kind, given_input["configuration"])
        assert scorer.is_available(given_input["output"]) is expected["output_available"]
    elif set(expected) == {"error"}:
        message = expected["error"]["message"]
        assert message in _MESSAGE_CODES, "vector error message not understood"
        with pytest.raises(ScorerError) as caught:
            score(kind, *arguments)
        assert caught.value.code == _MESSAGE_CODES[message]
    else:
        pytest.fail("vector case shape not understood")


# ---------------------------------------------------------------------------
# Unicode tables


def _provider(version: str) -> str:
    return "unicodedata" if version == INTERPRETER_UNICODE else "sealeval"


def test_reference_tables_are_exactly_unicode_15() -> None:
    tables = unicode_tables("15.0.0")
    assert tables.version == "15.0.0" == REFERENCE_UNICODE_VERSION
    assert tables.provider == _provider("15.0.0")
    assert tables.category("\U00011f00") == "Mn"  # KAWI SIGN CANDRABINDU, new in 15.0
    assert tables.decimal("\U00011f51") == 1  # KAWI DIGIT ONE
    assert unicode_tables("15.0.0") is tables
    assert repr(tables) == f"UnicodeTables(version='15.0.0', provider={_provider('15.0.0')!r})"


def test_shipped_versions_are_available_on_every_interpreter() -> None:
    for version in ("14.0.0", "15.0.0"):
        tables = unicode_tables(version)
        assert (tables.version, tables.provider) == (version, _provider(version))
    old = unicode_tables("14.0.0")
    assert old.category("\U00011f00") == "Cn"
    assert old.decimal("\U00011f51") is None


def test_policy_pinning_14_scores_as_unicode_14() -> None:
    scorer: Any = deterministic_scorer("normalized_match", {"unicode_version": "14.0.0"})
    assert scorer.tables is unicode_tables("14.0.0")
    # U+1E030 is unassigned in 14.0.0: no compatibility mapping to U+0430.
    assert score("normalized_match", "\u0430", "\U0001e030", {"unicode_version": "14.0.0"}) == 0.0


@pytest.mark.parametrize(
    ("version", "code"),
    [
        ("13.0.0", "unsupported_unicode_version"),
        ("15.1.0", "unsupported_unicode_version"),
        ("16.0.0", "unsupported_unicode_version"),
        ("99.0.0", "unsupported_unicode_version"),
        ("15.0", "invalid_unicode_version"),
        ("15.0.0\n", "invalid_unicode_version"),
        ("1" * 31 + ".0.0", "invalid_unicode_version"),
        ("\u0661\u0665.0.0", "invalid_unicode_version"),
        (15, "invalid_unicode_version"),
        (None, "invalid_unicode_version"),
    ],
)
def test_unavailable_or_malformed_versions_are_refused(version: object, code: str) -> None:
    # Refused on every interpreter, including one whose own tables are that version.
    with pytest.raises(UnicodeTablesError) as caught:
        unicode_tables(version)
    assert caught.value.code == code
    assert caught.value.field == "unicode_version"


def test_unavailable_version_refuses_the_scorer() -> None:
    with pytest.raises(ScorerError) as caught:
        deterministic_scorer("token_f1", {"unicode_version": "13.0.0"})
    assert caught.value.code == "unsupported_unicode_version"
    assert caught.value.field == "configuration.unicode_version"


def test_available_versions() -> None:
    versions = available_unicode_versions()
    assert versions == ("14.0.0", "15.0.0")
    assert is_unicode_version("15.0.0")
    assert not is_unicode_version("15.0.0.0")


def _scan(predicate: Any) -> frozenset[str]:
    return frozenset(char for char in map(chr, range(0x110000)) if predicate(char))


def test_whitespace_table_is_the_isspace_set_in_every_version() -> None:
    assert _scan(str.isspace) == WHITESPACE
    databases: list[Any] = [unicodedata]
    extra = sys.modules.get("unicodedata2")
    if extra is None:
        try:
            import unicodedata2 as extra  # type: ignore[import-not-found,no-redef]  # noqa: PLC0415
        except ImportError:
            extra = None
    if extra is not None:
        databases.append(extra)
    for database in databases:
        derived = _scan(
            lambda char, db=database: (
                db.bidirectional(char) in ("WS", "B", "S") or db.category(char) == "Zs"
            )
        )
        assert derived == WHITESPACE, database.unidata_version
    for version in available_unicode_versions():
        tables = unicode_tables(version)
        separators = _scan(lambda char, t=tables: t.category(char) == "Zs")
        assert separators <= WHITESPACE, version
        assert len(separators) == 17, version
    ascii_space = frozenset(char for char in map(chr, range(128)) if char in WHITESPACE)
    assert frozenset(" \t\n\v\f\r\x1c\x1d\x1e\x1f") == ascii_space
    assert "\u200b" not in WHITESPACE


def test_whitespace_split_without_the_interpreter_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tables_module._interpreter_whitespace_is_pinned()
    text = " a\u00a0b\u2003 c\u200bd\u3000"
    expected = text.split()
    monkeypatch.setattr(tables_module, "_interpreter_whitespace_is_pinned", lambda: False)
    assert UnicodeTables.split_whitespace(text) == expected == ["a", "b", "c\u200bd"]


def test_table_functions() -> None:
    tables = unicode_tables("15.0.0")
    assert tables.normalize("NFKC", "\ufb01") == "fi"
    assert tables.casefold("Stra\u00dfe") == "strasse"
    assert tables.is_whitespace("\u3000")
    assert not tables.is_whitespace("\u200b")
    assert tables.strip_whitespace("\u3000 a b\u2029") == "a b"
    assert tables.split_whitespace(" a\u00a0b\u2003 c ") == ["a", "b", "c"]
    assert tables.split_whitespace("a\x1cb") == ["a", "b"]
    assert tables.decimal("x") is None


def test_pinned_tables_decide_scores_not_the_interpreter() -> None:
    # U+1E030 MODIFIER LETTER CYRILLIC SMALL A (new in 15.0) is NFKC-equivalent to U+0430.
    assert score("normalized_match", "\u0430", "\U0001e030", UNICODE_15) == 1.0
    assert score("token_f1", "\u0430 b", "\U0001e030 b", UNICODE_15) == 1.0
    if INTERPRETER_UNICODE == "14.0.0":
        assert (
            score("normalized_match", "\u0430", "\U0001e030", {"unicode_version": "14.0.0"}) == 0.0
        )
    # numeric_tolerance reads Unicode digits with the reference's 15.0.0 tables:
    # Kawi digits (new in 15.0) are 12, as in invarlock, even on Python 3.11.
    assert score("numeric_tolerance", "12", "\U00011f51\U00011f52", {}) == 1.0
    assert score("numeric_tolerance", "\U00011f51\U00011f52", 12, {}) == 1.0


# ---------------------------------------------------------------------------
# Behaviour beyond the vectors


def test_kind_sets() -> None:
    assert len(KINDS) == 8
    assert frozenset(KINDS) - {"recorded", "normalized_nll_per_utf8_byte"} == RECOMPUTED_KINDS
    assert BINARY_KINDS | BOOTSTRAP_KINDS | {"normalized_nll_per_utf8_byte"} == frozenset(KINDS)
    for kind in RECOMPUTED_KINDS:
        assert deterministic_scorer(kind, _valid_configuration(kind)).kind == kind


def _valid_configuration(kind: str) -> dict[str, Any]:
    return {
        "normalized_match": dict(UNICODE_15),
        "token_f1": dict(UNICODE_15),
        "json_fields": {"fields": ["/a"]},
        "normalized_nll_per_utf8_byte": {
            "configuration_digest": DIGEST_A,
            "baseline_tokenizer_digest": DIGEST_B,
            "subject_tokenizer_digest": DIGEST_C,
        },
    }.get(kind, {})


@pytest.mark.parametrize(
    ("expected", "output", "result"),
    [
        ("7", "_ 7", 0.0),  # whitespace left after deleting an underscore
        ("7", "7 _", 0.0),  # the underscore ends the string: nothing is stripped
        ("7", "7_ ", 1.0),
        ("7", "\u00a0_7", 1.0),
        ("7", "_\u00a07", 0.0),
        ("7", "7\u00a0\u00a0", 1.0),
        ("12", "1\u00a02", 0.0),
        ("12", "1\t2", 0.0),
        ("12", "\x00" + "12", 0.0),
        ("7", "+7.e0", 1.0),
        ("7", "7e", 0.0),
        ("7", "e7", 0.0),
        ("7", ".", 0.0),
        ("7", "+-7", 0.0),
        ("7", "-Infinity", 0.0),
        ("7", "sNaN", 0.0),
        ("0", "0e-1200", 0.0),  # adjusted exponent -1200 is over the limit
        ("0", "0e-1000", 1.0),
        ("1", "0" * 5000 + "1", 1.0),  # leading zeros are not significant
        ("1", "1e" + "0" * 40 + "0", 1.0),
        ("1", "1e" + "1" * 19, 0.0),
        ("1", "1." + "0" * 255, 1.0),
        ("1", "1." + "0" * 256, 0.0),  # 257 significant digits
        ("1", 10**300, 0.0),
        ("0.1", 0.1, 1.0),
        ("1e16", 1e16, 1.0),
        ("-0", -0.0, 1.0),
        ("5", float("inf"), 0.0),
        ("5", {"v": 5}, 0.0),
        ("5", False, 0.0),
        ("\U00011f55", "5", 1.0),
    ],
)
def test_numeric_parsing_edges(expected: object, output: object, result: float) -> None:
    assert score("numeric_tolerance", expected, output, {}) == result


def test_numeric_tolerances() -> None:
    assert score("numeric_tolerance", "100", "101", {"relative": 1}) == 1.0
    assert score("numeric_tolerance", "100", "101", {"absolute": 1, "relative": 0}) == 1.0
    assert score("numeric_tolerance", "1e1000", "-1e1000", {"absolute": 10**255}) == 0.0
    assert score("numeric_tolerance", "1e-1000", "1e-999", {"relative": 1e300}) == 1.0
    assert score("numeric_tolerance", "1e-1000", "1e1000", {"relative": 1e300}) == 0.0
    assert score("numeric_tolerance", "-0.0", "0", {"absolute": -0.0}) == 1.0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-.eE_ \t", min_size=1, max_size=12))
def test_ascii_numerals_follow_python_decimal(text: str) -> None:
    """The pinned-table numeral path agrees with ``Decimal(str)`` on ASCII input."""
    ours = scorer_module._decimal(text, unicode_tables("15.0.0"))
    try:
        theirs: Decimal | None = Decimal(text)
    except InvalidOperation:
        theirs = None
    if theirs is not None and (
        not theirs.is_finite()
        or len(theirs.as_tuple().digits) > 256
        or abs(theirs.adjusted()) > 1000
    ):
        theirs = None
    if ours is None or theirs is None:
        assert ours is theirs
    else:
        assert ours == theirs


@pytest.mark.parametrize(
    ("kind", "expected", "output", "result"),
    [
        ("json_exact", {"a": [1, 2.5]}, types.MappingProxyType({"a": (1, 2.5)}), 1.0),
        ("json_exact", "[1]", "[1] x", 0.0),
        ("json_exact", "[1]", object(), 0.0),
        ("json_exact", "[" * 300 + "]" * 300, "[" * 300 + "]" * 300, "error"),
        ("json_exact", '"\\ud800"', "1", "error"),
        ("json_fields", {"a": {"b": [1, {"c": None}]}}, '{"a": {"b": [1, {"c": null}]}}', 1.0),
        ("json_fields", {"a": {"b": [1, {"c": None}]}}, '{"a": {"b": [1]}}', 0.0),
        ("json_fields", {"a": {"b": [1, {"c": None}]}}, '{"a": {"b": "1x"}}', 0.0),
        ("json_fields", {"a": {"b": [1, {"c": None}]}}, '{"a": {"b": [1, {"c": 1}]}}', 0.0),
        ("json_fields", {"a": {"b": [1, {"c": None}]}}, {"a": {"b": [1, {"c": object()}]}}, 0.0),
        ("json_fields", {"a": {"b": [1, {"c": None}]}}, "{bad", 0.0),
        ("json_fields", "{bad", "{}", "error"),
        ("json_fields", {"a": {"b": [1, object()]}}, "{}", "error"),
    ],
)
def test_json_scoring(kind: str, expected: object, output: object, result: object) -> None:
    configuration = {"fields": ["/a/b/1/c"]} if kind == "json_fields" else {}
    if result == "error":
        with pytest.raises(ScorerError) as caught:
            score(kind, expected, output, configuration)
        code = "reference_not_json" if kind == "json_exact" else "reference_missing_field"
        assert caught.value.code == code
    else:
        assert score(kind, expected, output, configuration) == result


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_JSON)
def test_decoded_values_encode_like_encode_invarlock(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=bool(len(str(value)) % 2))
    decoded = decode(text)
    expected = encode_invarlock(decoded)[:-1]
    assert scorer_module._canonical(decoded, True) == expected
    assert scorer_module._canonical(value, False) == expected
    assert scorer_module._json_bytes(text) == expected


def test_a_decoded_value_the_fast_encoder_cannot_take_goes_to_the_checked_path() -> None:
    decoded = decode("7" * 700)
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # lowered after decoding: the C encoder now fails
    try:
        with pytest.raises(CanonicalError) as caught:
            scorer_module._canonical(decoded, True)
        assert scorer_module._canonical(7, True) == b"7"
    finally:
        sys.set_int_max_str_digits(limit)
    assert caught.value.code == "integer_too_long"


def test_json_pointers_resolve_on_frozen_and_plain_values() -> None:
    scorer = deterministic_scorer("json_fields", {"fields": ["/a~1b/0", "/~0", "/", "/x/"]})
    document = {"a/b": [7], "~": 1, "": 2, "x": {"": 3}}
    frozen = types.MappingProxyType(
        {"a/b": (7,), "~": 1, "": 2, "x": types.MappingProxyType({"": 3})}
    )
    assert scorer.score(document, frozen) == 1.0
    assert scorer.score(document, {"a/b": [7], "~": 1}) == 0.5


@pytest.mark.parametrize(
    ("kind", "expected", "output"),
    [
        ("normalized_match", "a", None),
        ("token_f1", "a b", 3),
        ("exact_match", "a", ["a"]),
    ],
)
def test_text_scorers_score_non_text_answers_zero(kind: str, expected: str, output: object) -> None:
    configuration = {} if kind == "exact_match" else UNICODE_15
    assert score(kind, expected, output, configuration) == 0.0
    assert not output_available(kind, output)


def test_invalid_reference_is_refused_before_the_answer_is_looked_at() -> None:
    for kind, expected in (("exact_match", 1), ("numeric_tolerance", None)):
        with pytest.raises(ScorerError):
            score(kind, expected, None, {})


def test_text_fast_path_agrees_with_general_path() -> None:
    scorer: Any = deterministic_scorer("token_f1", UNICODE_15)
    tables: UnicodeTables = scorer.tables
    for text in ("  The\tQUICK\x1c brown\x0bfox  ", "a\u3000B", "\u00c5ngstr\u00f6m \ufb01"):
        general = tables.split_whitespace(tables.casefold(tables.normalize("NFKC", text)))
        assert scorer.tokens(text) == general


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=30))
def test_ascii_fast_path_is_exact(text: str) -> None:
    scorer: Any = deterministic_scorer("normalized_match", UNICODE_15)
    tables: UnicodeTables = scorer.tables
    general = " ".join(tables.split_whitespace(tables.casefold(tables.normalize("NFKC", text))))
    assert scorer.normalize(text) == general


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_exact_match_is_symmetric(left: str, right: str) -> None:
    assert score("exact_match", left, right, {}) == score("exact_match", right, left, {})
    assert score("exact_match", left, left, {}) == 1.0


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab AB\u00df\u3000\ufb01x"), max_size=15),
    st.text(alphabet=st.sampled_from("ab AB\u00df\u3000\ufb01x"), max_size=15),
    st.booleans(),
)
def test_token_f1_properties(left: str, right: str, casefold: bool) -> None:
    configuration = {**UNICODE_15, "casefold": casefold}
    value = score("token_f1", left, right, configuration)
    assert 0.0 <= value <= 1.0
    assert value == score("token_f1", right, left, configuration)
    assert score("token_f1", left, left, configuration) == 1.0
    assert score("normalized_match", left, left, configuration) == 1.0
    if score("normalized_match", left, right, configuration) == 1.0:
        assert value == 1.0


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=5),
    st.randoms(use_true_random=False),
)
def test_json_exact_ignores_key_order(document: dict[str, Any], rng: Any) -> None:
    keys = list(document)
    rng.shuffle(keys)
    shuffled = {key: document[key] for key in keys}
    assert score("json_exact", document, shuffled, {}) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_numeric_tolerance_is_reflexive(value: Decimal) -> None:
    text = str(value)
    parsed = scorer_module._decimal(text, unicode_tables("15.0.0"))
    if parsed is None:
        with pytest.raises(ScorerError):
            score("numeric_tolerance", text, text, {})
    else:
        assert score("numeric_tolerance", text, text, {}) == 1.0


def test_prepared_reference_is_reused() -> None:
    scorer = deterministic_scorer("token_f1", UNICODE_15)
    reference = scorer.prepare("the cat sat")
    assert reference.score("the cat") == 0.8
    assert reference.score("sat cat the") == 1.0
    assert reference.score(None) == 0.0


# ---------------------------------------------------------------------------
# Attributed values: recorded and normalized NLL

PROVENANCE = {
    "kind": "judge",
    "source": "delta-judge",
    "version": "2025-02",
    "unit": "score",
    "rubric_digest": DIGEST_A,
}


class _Provenance:
    """Stands in for the run core's ScoreProvenance (an object with to_dict())."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._document = document

    def to_dict(self) -> dict[str, Any]:
        return dict(self._document)


def test_recorded_score() -> None:
    recorded = RecordedScore("quality", PROVENANCE)
    recorded.check_provenance({"quality": PROVENANCE, "other": {}})
    recorded.check_provenance(types.MappingProxyType({"quality": _Provenance(PROVENANCE)}))
    assert recorded.is_available({"quality": 1})
    assert not recorded.is_available({"other": 1})
    assert not recorded.is_available(None)
    assert recorded.value({"quality": 1}) == 1.0
    assert type(recorded.value({"quality": 1})) is float
    assert recorded.value({"quality": 0.25}) == 0.25
    assert CANARY not in repr(RecordedScore(CANARY, {**PROVENANCE, "source": CANARY}))


def _likelihood(**changes: Any) -> dict[str, Any]:
    return {
        "logprob_sum": -3.5,
        "utf8_byte_count": 7,
        "configuration_digest": DIGEST_A,
        "tokenizer_digest": DIGEST_B,
        **changes,
    }


def test_normalized_nll() -> None:
    nll = NormalizedNll.from_configuration(
        {
            "configuration_digest": DIGEST_A,
            "baseline_tokenizer_digest": DIGEST_B,
            "subject_tokenizer_digest": DIGEST_C,
        }
    )
    nll.check_baseline(_likelihood())
    nll.check_subject(_likelihood(tokenizer_digest=DIGEST_C))
    nll.check_baseline(None)
    facts = types.SimpleNamespace(**_likelihood(tokenizer_digest=DIGEST_C))
    nll.check_subject(facts)
    assert nll.value(_likelihood()) == 0.5
    assert nll.value(facts) == 0.5
    assert nll.value(_likelihood(logprob_sum=0)) == -0.0
    assert str(nll.value(_likelihood(logprob_sum=0))) == "-0.0"
    assert nll.is_available(_likelihood())
    assert not nll.is_available(None)


# ---------------------------------------------------------------------------
# Every refusal, with its code

_NLL_CONFIGURATION = _valid_configuration("normalized_nll_per_utf8_byte")


def _recorded_value(scores: Any) -> Any:
    return lambda: RecordedScore("k", PROVENANCE).value(scores)


def _nll_value(**changes: Any) -> Any:
    return lambda: NormalizedNll.value(_likelihood(**changes))


_NLL_KIND = "normalized_nll_per_utf8_byte"
_NLL = NormalizedNll(DIGEST_A, DIGEST_B, DIGEST_C)
_RECORDED = RecordedScore("k", PROVENANCE)
_configure = check_configuration


_REFUSALS: list[tuple[str, Any]] = [
    ("unknown_kind", lambda: deterministic_scorer("bleu", {})),
    ("unknown_kind", lambda: deterministic_scorer(["exact_match"], {})),
    ("unknown_kind", lambda: deterministic_scorer("recorded", {})),
    ("unknown_kind", lambda: _configure("bleu", {})),
    ("unknown_kind", lambda: output_available("recorded", 1)),
    ("invalid_type", lambda: _configure("exact_match", [])),
    ("invalid_type", lambda: _configure("exact_match", {1: 2})),
    ("invalid_type", lambda: RecordedScore(1, PROVENANCE)),  # type: ignore[arg-type]
    ("invalid_type", lambda: RecordedScore("k", [])),  # type: ignore[arg-type]
    ("invalid_type", lambda: RecordedScore("k", {"x": float("nan")})),
    ("too_many_members", lambda: _configure("exact_match", {str(i): i for i in range(101)})),
    ("unsupported_configuration", lambda: _configure("json_exact", {"x": 1})),
    ("unsupported_configuration", lambda: _configure("recorded", {"x": 1})),
    ("unsupported_configuration", lambda: _configure("json_fields", {"fields": ["/a"], "x": 1})),
    ("unsupported_configuration", lambda: _configure(_NLL_KIND, {**_NLL_CONFIGURATION, "x": 1})),
    ("missing_field", lambda: _configure("token_f1", {})),
    ("missing_field", lambda: _configure(_NLL_KIND, {})),
    ("invalid_unicode_version", lambda: _configure("token_f1", {"unicode_version": 15})),
    ("invalid_casefold", lambda: _configure("token_f1", {**UNICODE_15, "casefold": "yes"})),
    ("invalid_tolerance", lambda: _configure("numeric_tolerance", {"relative": float("inf")})),
    ("invalid_tolerance", lambda: _configure("numeric_tolerance", {"absolute": 10**256})),
    ("invalid_tolerance", lambda: _configure("numeric_tolerance", {"absolute": None})),
    ("invalid_fields", lambda: _configure("json_fields", {})),
    ("invalid_fields", lambda: _configure("json_fields", {"fields": "/a"})),
    ("invalid_fields", lambda: _configure("json_fields", {"fields": [1]})),
    ("invalid_pointer_escape", lambda: _configure("json_fields", {"fields": ["/a~"]})),
    ("duplicate_field", lambda: _configure("json_fields", {"fields": ["/a", "/a"]})),
    (
        "invalid_digest",
        lambda: _configure(_NLL_KIND, {**_NLL_CONFIGURATION, "configuration_digest": "sha256:X"}),
    ),
    ("invalid_digest", lambda: NormalizedNll(DIGEST_A, DIGEST_B, "x")),
    (
        "unsupported_unicode_version",
        lambda: deterministic_scorer("normalized_match", {"unicode_version": "13.0.0"}),
    ),
    ("reference_not_text", lambda: score("token_f1", None, "a", UNICODE_15)),
    ("reference_not_numeric", lambda: score("numeric_tolerance", "1e1001", "1", {})),
    ("reference_not_numeric", lambda: score("numeric_tolerance", [1], "1", {})),
    ("reference_not_json", lambda: score("json_exact", "NaN", "1", {})),
    ("reference_missing_field", lambda: score("json_fields", {"a": 1}, "1", {"fields": ["/a/0"]})),
    ("provenance_mismatch", lambda: _RECORDED.check_provenance({})),
    ("provenance_mismatch", lambda: _RECORDED.check_provenance(None)),
    ("provenance_mismatch", lambda: _RECORDED.check_provenance({"k": {**PROVENANCE, "unit": "x"}})),
    ("provenance_mismatch", lambda: _RECORDED.check_provenance({"k": {"x": object()}})),
    ("invalid_score", _recorded_value({"k": True})),
    ("invalid_score", _recorded_value({"k": "1"})),
    ("non_finite_value", _recorded_value({"k": 10**400})),
    ("non_finite_value", _recorded_value({"k": float("inf")})),
    ("invalid_likelihood", _nll_value(logprob_sum="x")),
    ("invalid_likelihood", _nll_value(utf8_byte_count=0)),
    ("invalid_likelihood", _nll_value(utf8_byte_count=7.0)),
    ("invalid_likelihood", lambda: NormalizedNll.value(None)),
    ("non_finite_value", _nll_value(logprob_sum=-(10**400))),
    ("non_finite_value", _nll_value(logprob_sum=float("-inf"))),
    ("non_finite_value", _nll_value(logprob_sum=-1.0, utf8_byte_count=10**400)),
    (
        "likelihood_configuration_mismatch",
        lambda: _NLL.check_baseline(_likelihood(configuration_digest=DIGEST_C)),
    ),
    ("likelihood_configuration_mismatch", lambda: _NLL.check_subject({})),
    ("likelihood_tokenizer_mismatch", lambda: _NLL.check_subject(_likelihood())),
]


@pytest.mark.parametrize(("code", "action"), _REFUSALS)
def test_every_refusal_has_its_code(code: str, action: Any) -> None:
    with pytest.raises(ScorerError) as caught:
        action()
    assert caught.value.code == code


def test_refusal_table_covers_every_code() -> None:
    assert {code for code, _ in _REFUSALS} == ScorerError.codes
    assert UnicodeTablesError.codes == {"invalid_unicode_version", "unsupported_unicode_version"}


def test_never_echo(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    actions = [
        lambda: score("exact_match", {CANARY: CANARY}, CANARY, {}),
        lambda: score("json_exact", CANARY, CANARY, {}),
        lambda: score("json_fields", {CANARY: 1}, CANARY, {"fields": ["/" + CANARY + "~"]}),
        lambda: score("json_fields", {CANARY: 1}, CANARY, {"fields": ["/x" + CANARY]}),
        lambda: score("numeric_tolerance", CANARY, CANARY, {CANARY: 1}),
        lambda: score("numeric_tolerance", CANARY, CANARY, {}),
        lambda: score("token_f1", CANARY, CANARY, {"unicode_version": CANARY}),
        lambda: score(CANARY, CANARY, CANARY, {}),
        lambda: RecordedScore(CANARY, PROVENANCE).check_provenance({CANARY: CANARY}),
        lambda: NormalizedNll(DIGEST_A, DIGEST_B, DIGEST_C).check_subject(
            {"tokenizer_digest": CANARY}
        ),
        lambda: unicode_tables(CANARY),
    ]
    for action in actions:
        with pytest.raises((ScorerError, UnicodeTablesError)) as caught:
            action()
        error = caught.value
        for text in (str(error), repr(error), *map(str, error.args)):
            assert CANARY not in text
        assert error.__cause__ is None
    for kind in RECOMPUTED_KINDS:
        scorer = deterministic_scorer(kind, _valid_configuration(kind))
        expected = (
            {"a": CANARY}
            if kind.startswith("json")
            else "0"
            if kind == "numeric_tolerance"
            else CANARY
        )
        reference = scorer.prepare(expected)
        assert CANARY not in repr(scorer)
        assert CANARY not in repr(reference)
    assert CANARY not in caplog.text
