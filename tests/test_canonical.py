"""Canonical JSON profiles, digests and the strict decoder."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import tracemalloc
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval import canonical
from sealeval.canonical import (
    DecodeLimits,
    decode,
    digest_bytes,
    digest_invarlock,
    digest_openmed,
    encode_invarlock,
    encode_openmed,
    is_digest,
)
from sealeval.errors import CanonicalError
from support.refusals import assert_refused
from support.vectors import cases, decode_input, load, reference_code

# ---------------------------------------------------------------------------
# openmed profile vectors


@pytest.mark.parametrize("case", cases("openmed/canonical_json.json"))
def test_openmed_canonical_vector(case: dict[str, Any]) -> None:
    value = decode_input(case["input"]["value"])
    expected = case["expected"]
    if set(expected) == {"canonical", "sha256"}:
        text = encode_openmed(value)
        assert text == expected["canonical"]
        assert digest_openmed(value) == expected["sha256"]
        assert hashlib.sha256(text.encode("ascii")).hexdigest() == expected["sha256"][7:]
    elif set(expected) == {"error_code"}:
        with pytest.raises(CanonicalError) as caught:
            encode_openmed(value)
        assert caught.value.code == expected["error_code"]
    else:
        pytest.fail("vector case shape not understood")


# ---------------------------------------------------------------------------
# invarlock profile vectors (strict parse, then canonical bytes)

# The reference's messages are informational (they quote input, which sealeval
# never does); each maps to the closed code sealeval raises instead.
_INVARLOCK_MESSAGE_CODES = (
    ("JSON object has duplicate key", "duplicate_key"),
    ("JSON contains non-standard constant", "non_standard_constant"),
    ("JSON contains non-finite number", "non_finite_number"),
    ("vector is not UTF-8 JSON", "not_utf8"),
    ("vector is not valid JSON", "invalid_json"),
    ("value is not canonical JSON", "unpaired_surrogate"),
)
# Cases whose reference behaviour is laxer than sealeval (docs/decisions/compat.md):
# the reference parses an unpaired surrogate escape and refuses only when encoding;
# sealeval refuses it while decoding.
_EXPECTED_DEVIATIONS = {
    "reject-lone-high-surrogate-escape": ("decode", "unpaired_surrogate"),
    "reject-lone-low-surrogate-escape": ("decode", "unpaired_surrogate"),
    "reject-key-lone-surrogate": ("decode", "unpaired_surrogate"),
}
# The reference reports the 4300-digit limit as generic invalid JSON; sealeval names it.
_NAMED_CODES = {
    "reject-int-over-4300-digits": "integer_too_long",
    "reject-utf8-bom-prefix": "byte_order_mark",
}


def _invarlock_input(case: dict[str, Any]) -> bytes:
    source = case["input"]
    if set(source) == {"json_text"}:
        return source["json_text"].encode("utf-8", "surrogatepass")
    if set(source) == {"json_bytes_b64"}:
        return base64.b64decode(source["json_bytes_b64"])
    pytest.fail("vector input shape not understood")


@pytest.mark.parametrize("case", cases("invarlock/canonical_json.json"))
def test_invarlock_canonical_vector(case: dict[str, Any]) -> None:
    raw = _invarlock_input(case)
    expected = case["expected"]
    if "error" in expected:
        error = expected["error"]
        name = case["name"]
        if name in _EXPECTED_DEVIATIONS:
            assert error["stage"] == "encode"
            _, code = _EXPECTED_DEVIATIONS[name]
            with pytest.raises(CanonicalError) as caught:
                decode(raw)
            assert caught.value.code == code
            return
        code = _NAMED_CODES.get(name, reference_code(error["message"], _INVARLOCK_MESSAGE_CODES))
        assert error["stage"] == "parse"
        with pytest.raises(CanonicalError) as caught:
            decode(raw)
        assert caught.value.code == code
        return
    if set(expected) not in ({"canonical", "digest", "utf8_length"}, {"digest", "utf8_length"}):
        pytest.fail("vector case shape not understood")
    canonical = encode_invarlock(decode(raw))
    if "canonical" in expected:
        assert canonical == expected["canonical"].encode("utf-8")
    assert len(canonical) == expected["utf8_length"]
    assert digest_bytes(canonical) == expected["digest"]
    assert digest_invarlock(decode(raw)) == expected["digest"]


def test_openmed_index_counts_match_files() -> None:
    index = load("openmed/index.json")
    for entry in index["cases"]:
        if entry["name"].endswith(".json"):
            assert len(load(f"openmed/{entry['name']}")["cases"]) == entry["expected"]["case_count"]


# ---------------------------------------------------------------------------
# Encoder refusals, one per rule


class _IntSub(int):
    pass


class _FloatSub(float):
    pass


@pytest.mark.parametrize(
    ("value", "code"),
    [
        pytest.param(math.nan, "non_finite", id="nan"),
        pytest.param([math.inf], "non_finite", id="inf-nested"),
        pytest.param({1: "x"}, "non_string_key", id="int-key"),
        pytest.param({None: "x"}, "non_string_key", id="none-key"),
        pytest.param({"\ud800": 1}, "unpaired_surrogate", id="surrogate-key"),
        pytest.param("a\udc00", "unpaired_surrogate", id="surrogate-value"),
        pytest.param(b"bytes", "unsupported_type", id="bytes"),
        pytest.param({1, 2}, "unsupported_type", id="set"),
        pytest.param(_IntSub(3), "unsupported_type", id="int-subclass"),
        pytest.param(_FloatSub(3.0), "unsupported_type", id="float-subclass"),
        pytest.param(10**5000, "integer_too_long", id="int-over-4300-digits"),
    ],
)
def test_encoder_refusals(value: object, code: str) -> None:
    for encode in (encode_openmed, encode_invarlock):
        error = assert_refused(lambda encode=encode: encode(value), code)
        assert isinstance(error, CanonicalError)


def test_encoder_refuses_excessive_depth() -> None:
    value: Any = 0
    for _ in range(300):
        value = [value]
    with pytest.raises(CanonicalError) as caught:
        encode_openmed(value)
    assert caught.value.code == "too_deep"


def test_read_only_mappings_encode_like_dicts() -> None:
    proxy = types.MappingProxyType({"b": 1, "a": types.MappingProxyType({"d": (1, 2)})})
    assert encode_openmed(proxy) == '{"a":{"d":[1,2]},"b":1}'
    assert encode_invarlock(proxy) == b'{"a":{"d":[1,2]},"b":1}\n'


def test_profiles_differ_only_in_escaping_and_newline() -> None:
    value = {"k": "\u00e9\U0001f600\x7f"}
    assert encode_openmed(value) == '{"k":"\\u00e9\\ud83d\\ude00\\u007f"}'
    assert encode_invarlock(value) == '{"k":"\u00e9\U0001f600\x7f"}\n'.encode()


# ---------------------------------------------------------------------------
# Decoder refusals, one per rule


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        pytest.param(b'{"a":1,"a":2}', "duplicate_key", id="duplicate-key"),
        pytest.param(b"[NaN]", "non_standard_constant", id="nan"),
        pytest.param(b"-Infinity", "non_standard_constant", id="neg-infinity"),
        pytest.param(b"1e999", "non_finite_number", id="overflow-exponent"),
        pytest.param(b"1" + b"0" * 400 + b".0", "non_finite_number", id="overflow-digits"),
        pytest.param(b"1" * 4301, "integer_too_long", id="int-4301-digits"),
        pytest.param(b"\xef\xbb\xbf{}", "byte_order_mark", id="bom"),
        pytest.param(b'"\xff"', "not_utf8", id="invalid-utf8"),
        pytest.param(b'"\xed\xa0\x80"', "not_utf8", id="raw-surrogate-utf8"),
        pytest.param(b"", "invalid_json", id="empty"),
        pytest.param(b"[1,]", "invalid_json", id="trailing-comma"),
        pytest.param(b'"\\ud800"', "unpaired_surrogate", id="lone-surrogate-escape"),
        pytest.param(b'{"\\udc00":1}', "unpaired_surrogate", id="lone-surrogate-key"),
        pytest.param(b'"\\uDBFF"', "unpaired_surrogate", id="lone-surrogate-uppercase"),
    ],
)
def test_decoder_refusals(raw: bytes, code: str) -> None:
    error = assert_refused(lambda: decode(raw), code)
    assert isinstance(error, CanonicalError)
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


def test_decoder_limits() -> None:
    limits = DecodeLimits(max_bytes=16, max_depth=3, max_string_length=4)
    assert decode(b"[[[0]]]", limits=limits) == [[[0]]]
    assert decode(b'["abcd"]', limits=limits) == ["abcd"]
    for raw, code in [
        (b"[[[[0]]]]", "too_deep"),
        (b'{"a":{"b":{"c":{}}}}', "too_large"),
        (b'["abcde"]', "string_too_long"),
        (b'{"abcde":1}', "string_too_long"),
        (b" " * 17, "too_large"),
    ]:
        with pytest.raises(CanonicalError) as caught:
            decode(raw, limits=limits)
        assert caught.value.code == code
    with pytest.raises(CanonicalError) as caught:
        decode(b'{"a":{"b":{"c":{}}}}', limits=DecodeLimits(max_depth=3))
    assert caught.value.code == "too_deep"


def test_decoder_recursion_is_a_depth_refusal() -> None:
    with pytest.raises(CanonicalError) as caught:
        decode(b"[" * 100_000 + b"]" * 100_000, limits=DecodeLimits(max_depth=1_000_000))
    assert caught.value.code == "too_deep"


def test_decode_limits_must_be_positive_ints() -> None:
    with pytest.raises(ValueError, match="positive int"):
        DecodeLimits(max_depth=0)


def test_decode_accepts_text_and_keeps_number_kinds() -> None:
    assert decode('{"i":1,"f":1.0,"z":-0}') == {"i": 1, "f": 1.0, "z": 0}
    assert type(decode("1.0")) is float
    assert type(decode("-0")) is int
    with pytest.raises(CanonicalError) as caught:
        decode("\ud800")
    assert caught.value.code == "not_utf8"


def test_lax_decoding_keeps_what_a_later_check_must_refuse() -> None:
    lax = decode('[NaN, Infinity, -Infinity, 1e999, "\\ud800", {"\\udfff": 1}]', lax=True)
    assert math.isnan(lax[0])
    assert lax[1:4] == [math.inf, -math.inf, math.inf]
    assert lax[4:] == ["\ud800", {"\udfff": 1}]
    assert decode('["\udc00"]', lax=True) == ["\udc00"]  # raw, in text input
    assert decode(b'[1.5, "a"]', lax=True) == decode(b'[1.5, "a"]')
    for text, strict_code in (
        ("NaN", "non_standard_constant"),
        ("1e999", "non_finite_number"),
        ('"\\ud800"', "unpaired_surrogate"),
        ('"\udc00"', "not_utf8"),
    ):
        assert_refused(lambda text=text: decode(text), strict_code)
    # The grammar, duplicate keys and every limit still hold when lax.
    for text, code in (
        ('{"a": 1, "a": NaN}', "duplicate_key"),
        ("[1,]", "invalid_json"),
        ("\ufeff1", "byte_order_mark"),
        ("[" * 3 + "]" * 3, "too_deep"),
        ('"\\ud800xyz"', "string_too_long"),
        ("1" * 5000, "integer_too_long"),
    ):
        limits = DecodeLimits(max_depth=2, max_string_length=3)
        assert_refused(lambda text=text, limits=limits: decode(text, limits=limits, lax=True), code)
    assert_refused(lambda: decode("[" * 100_000, lax=True), "too_deep")


def test_is_digest_is_exact() -> None:
    good = "sha256:" + "a" * 64
    assert is_digest(good)

    class _Str(str):
        __slots__ = ()

    for bad in [
        good.upper(),
        good + "\n",
        good[:-1],
        "sha256:" + "g" * 64,
        _Str(good),
        good.encode(),
        None,
    ]:
        assert not is_digest(bad)


# ---------------------------------------------------------------------------
# Properties

_keys = st.text(max_size=8)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=16)
)
_json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_keys, children, max_size=5),
    max_leaves=30,
)


def _same(left: Any, right: Any) -> bool:
    """Structural equality that also distinguishes int from float and -0.0 from 0.0."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return bool(left == right)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_decode_inverts_both_encoders(value: Any) -> None:
    assert _same(decode(encode_openmed(value)), value)
    assert _same(decode(encode_invarlock(value)), value)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_keys, _json_values, max_size=8), st.randoms(use_true_random=False))
def test_encoding_ignores_insertion_order(value: dict[str, Any], rng: Any) -> None:
    items = list(value.items())
    rng.shuffle(items)
    shuffled = dict(items)
    assert encode_openmed(shuffled) == encode_openmed(value)
    assert encode_invarlock(shuffled) == encode_invarlock(value)


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_openmed_text_is_ascii_and_matches_reference_layout(value: Any) -> None:
    text = encode_openmed(value)
    assert text.isascii()
    assert "\n" not in text
    # The layout is CPython's sorted, compact, ASCII-escaped JSON.
    assert text == json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_decoder_never_raises_anything_but_canonical_error(raw: bytes) -> None:
    with contextlib.suppress(CanonicalError):
        decode(raw)


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.integers() | st.text(max_size=3),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=2), children, max_size=3)
        ),
        max_leaves=40,
    ),
    max_depth=st.integers(min_value=1, max_value=8),
)
def test_depth_check_agrees_with_the_full_walk(value: Any, max_depth: int) -> None:
    """The container-only depth check refuses exactly what the full walk refuses.

    Through :func:`decode`: a document without long strings takes the
    container-only check; a string limit just under the document's size (no
    string reaches it) forces the full walk. Both agree with the nesting.
    """
    raw = json.dumps(value).encode()

    def outcome(limits: DecodeLimits) -> str | None:
        try:
            decode(raw, limits=limits)
        except CanonicalError as error:
            return error.code
        return None

    def nesting(item: Any) -> int:
        if isinstance(item, dict):
            return 1 + max(map(nesting, item.values()), default=0)
        if isinstance(item, list):
            return 1 + max(map(nesting, item), default=0)
        return 0

    expected = "too_deep" if nesting(value) > max_depth else None
    containers_only = DecodeLimits(max_depth=max_depth)
    assert len(raw) <= containers_only.max_string_length
    assert outcome(containers_only) == expected
    full_walk = DecodeLimits(max_depth=max_depth, max_string_length=max(1, len(raw) - 1))
    assert outcome(full_walk) == expected


# ---------------------------------------------------------------------------
# #13 item 3: container amplification is refused before decoding


class _NeverDecode:
    def decode(self, text: str) -> object:
        raise AssertionError("decoded although the counts are over the limits")


def test_containers_are_counted_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b'{"samples":[' + b"[]," * 5000 + b"[]]}"
    limits = DecodeLimits(max_containers=1000)
    monkeypatch.setattr(canonical, "_DECODER", _NeverDecode())
    with pytest.raises(CanonicalError) as caught:
        decode(data, limits=limits)
    assert caught.value.code == "too_many_containers"
    with pytest.raises(CanonicalError) as caught:
        decode(b"[" + b"0," * 5000 + b"0]", limits=DecodeLimits(max_items=1000))
    assert caught.value.code == "too_many_items"


def test_brackets_and_commas_inside_strings_do_not_count() -> None:
    text = '"' + '[{,\\"' * 2000 + '"'
    limits = DecodeLimits(max_containers=2, max_items=3)
    assert decode(f'{{"a": [{text}, {text}]}}', limits=limits) == {"a": [json.loads(text)] * 2}
    with pytest.raises(CanonicalError) as caught:
        decode(f"[[{text}], [], []]", limits=limits)
    assert caught.value.code == "too_many_containers"


@pytest.mark.parametrize(
    ("containers", "items", "document", "code"),
    [
        (3, 100, "[[],[]]", None),
        (2, 100, "[[],[]]", "too_many_containers"),
        (10, 3, "[1,2,3]", None),
        (10, 2, "[1,2,3]", "too_many_items"),
        (10, 2, '{"a":1,"b":2}', None),
        (10, 1, '{"a":1,"b":2}', "too_many_items"),
    ],
)
def test_container_and_item_limits_are_exact(
    containers: int, items: int, document: str, code: str | None
) -> None:
    limits = DecodeLimits(max_containers=containers, max_items=items)
    if code is None:
        assert decode(document, limits=limits) == json.loads(document)
        return
    with pytest.raises(CanonicalError) as caught:
        decode(document, limits=limits)
    assert caught.value.code == code


def test_default_limits_refuse_the_amplification_probe_in_bounded_memory() -> None:
    """5M empty arrays (15 MB) are refused by the default container bound before decoding."""
    data = b'{"samples":[' + b"[]," * 5_000_000 + b"[]]}"
    tracemalloc.start()
    try:
        with pytest.raises(CanonicalError) as caught:
            decode(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.code == "too_many_containers"
    assert peak < 4 * len(data)  # decoding would have cost about 20x the input


def _lazy(value: Any, wrap: bool) -> Any:
    """Replace the arrays of ``value``'s outer containers by OpenmedItems (items kept whole)."""
    if isinstance(value, list):
        return canonical.OpenmedItems(iter(value)) if wrap else [_lazy(v, True) for v in value]
    if isinstance(value, dict):
        return {key: _lazy(item, wrap) for key, item in value.items()}
    return value


@settings(max_examples=60, deadline=None)
@given(value=_json_values, wrap=st.booleans())
def test_digest_openmed_items_equals_the_whole_texts_digest(value: Any, wrap: bool) -> None:
    assert canonical.digest_openmed_items(_lazy(value, wrap)) == canonical.digest_openmed(value)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        pytest.param([canonical.OpenmedItems([math.nan])], "non_finite", id="item_non_finite"),
        pytest.param({"a": canonical.OpenmedItems(["\ud800"])}, "unpaired_surrogate", id="item"),
        pytest.param({1: canonical.OpenmedItems([])}, "non_string_key", id="key"),
        pytest.param([canonical.OpenmedItems([object()])], "unsupported_type", id="type"),
    ],
)
def test_digest_openmed_items_refuses_like_digest_openmed(value: Any, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        canonical.digest_openmed_items(value)
    assert caught.value.code == code


def _first_code(digest: Any, value: Any) -> str | None:
    """The refusal code of ``digest(value)``, or ``None`` when it digests."""
    try:
        digest(value)
    except CanonicalError as error:
        return error.code
    return None


_HUGE = 10**5000  # over CPython's default 4,300-digit text limit
_DEEP: Any = []
for _ in range(canonical.MAX_ENCODE_DEPTH + 2):
    _DEEP = [_DEEP]


@pytest.mark.parametrize(
    ("value", "code"),
    [
        # insertion order puts "b" first; output (sorted) order checks "a" first
        pytest.param({"b": math.nan, "a": "\ud800"}, "unpaired_surrogate", id="sorted-members"),
        pytest.param({"b": math.nan, "a": [object()]}, "unsupported_type", id="sorted-nested"),
        # every key type is checked before any member
        pytest.param({"a": math.nan, 1: "x"}, "non_string_key", id="key-types-first"),
        # a key's text before its value
        pytest.param({"\udc00": math.nan}, "unpaired_surrogate", id="key-before-value"),
        # an over-long integer is a check like the others, in order
        pytest.param([_HUGE, math.nan], "integer_too_long", id="long-int-first"),
        pytest.param([math.nan, _HUGE], "non_finite", id="long-int-second"),
        pytest.param({"a": [math.inf], "b": _DEEP}, "non_finite", id="before-too-deep"),
        pytest.param({"a": _DEEP, "b": [math.inf]}, "too_deep", id="too-deep-first"),
    ],
)
def test_a_multi_fault_value_is_refused_with_one_first_code_everywhere(
    value: Any, code: str
) -> None:
    """digest_openmed, digest_openmed_items (lists or OpenmedItems) and both encoders agree."""
    assert _first_code(canonical.digest_openmed, value) == code
    assert _first_code(canonical.digest_openmed_items, value) == code
    assert _first_code(canonical.digest_openmed_items, _lazy(value, True)) == code
    assert _first_code(canonical.digest_openmed_items, _lazy(value, False)) == code
    assert _first_code(encode_invarlock, value) == code


_faults = st.sampled_from([math.nan, -math.inf, "\ud800", b"bytes", {1: 0}]) | st.builds(
    pow, st.just(10), st.just(5000)
)
_faulty_values = st.recursive(
    _scalars | _faults,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(_keys | st.sampled_from(["\udfff", 7]), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=80, deadline=None)
@given(value=_faulty_values, wrap=st.booleans())
def test_digest_openmed_items_refuses_or_digests_exactly_like_digest_openmed(
    value: Any, wrap: bool
) -> None:
    """On any value, faults anywhere: the same digest, or the same first refusal code."""
    whole = _first_code(canonical.digest_openmed, value)
    streamed = _first_code(canonical.digest_openmed_items, _lazy(value, wrap))
    assert whole == streamed
    if whole is None:
        assert canonical.digest_openmed_items(_lazy(value, wrap)) == canonical.digest_openmed(value)


def test_digest_openmed_items_never_builds_the_arrays_text() -> None:
    """The peak of a 4 MiB array of items stays near one item, not the array."""
    item = "x" * 65_536

    def items() -> Any:
        return (item for _ in range(64))

    tracemalloc.start()
    try:
        canonical.digest_openmed_items([canonical.OpenmedItems(items())])
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_048_576
    assert canonical.digest_openmed_items([canonical.OpenmedItems(items())]) == (
        canonical.digest_openmed([list(items())])
    )
