"""Strict YAML loader: one table-driven case per rule, vectors, properties, fuzzing."""

from __future__ import annotations

import base64
import json
import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval import strict_yaml
from sealeval.errors import YamlError
from sealeval.strict_yaml import (
    DEFAULT_YAML_LIMITS,
    INCLUDE_KEYS,
    YamlLimits,
    load_strict_yaml,
)
from support.refusals import assert_refused
from support.vectors import cases, load

CANARY = "CANARYq7zx"
MIB = 1_048_576


def _same(left: Any, right: Any) -> bool:
    """Equality that also compares kinds: 1 != 1.0 != True, -0.0 != 0.0."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return bool(left == right)


def _is_json_data(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            if not all(type(key) is str for key in item):
                return False
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        elif type(item) is float:
            if not math.isfinite(item):
                return False
        elif item is not None and type(item) not in (str, int, bool):
            return False
    return True


def _block_mappings(depth: int) -> str:
    lines = [f"{'  ' * level}k{level}:" for level in range(depth - 1)]
    lines.append(f"{'  ' * (depth - 1)}k{depth - 1}: {CANARY}")
    return "\n".join(lines) + "\n"


def _block_sequences(depth: int) -> str:
    return "- " * depth + CANARY + "\n"


def _flow_sequences(depth: int) -> str:
    return "[" * depth + CANARY + "]" * depth


def _flow_mappings(depth: int) -> str:
    return f"{{{CANARY}: " * depth + "1" + "}" * depth


def _flow_list(scalars: int) -> str:
    return "[" + ",".join([CANARY] * scalars) + "]"


def _request_exempt(path: tuple[str, ...]) -> bool:
    """The exemption the evaluation-request loader passes."""
    return (
        len(path) == 4
        and path[0] == "comparison"
        and path[1] in ("baseline", "subject")
        and path[2] == "service_identity"
        and path[3] == "configuration"
    )


_INCLUDES: dict[str, Any] = {"forbidden_keys": INCLUDE_KEYS}
_REQUEST: dict[str, Any] = {
    "forbidden_keys": INCLUDE_KEYS,
    "forbidden_keys_exempt": _request_exempt,
    "require_mapping": True,
}

# ---------------------------------------------------------------------------
# Rejections: (document, expected code, keyword arguments), one id per rule.
# Every document carries CANARY in a key or a value.

REJECTIONS = [
    # bytes and text
    pytest.param(b"a: " + CANARY.encode() + b"\xff\n", "not_utf8", {}, id="not-utf8-invalid-byte"),
    pytest.param(b"a: \xc0\xaf" + CANARY.encode(), "not_utf8", {}, id="not-utf8-overlong"),
    pytest.param(
        b"a: \xed\xa0\x80" + CANARY.encode(), "not_utf8", {}, id="not-utf8-encoded-surrogate"
    ),
    pytest.param(
        "\ufeffa: CANARY".replace("CANARY", CANARY).encode("utf-16"),
        "not_utf8",
        {},
        id="not-utf8-utf16",
    ),
    pytest.param(f"a: {CANARY}\ud800", "not_utf8", {}, id="not-utf8-str-with-lone-surrogate"),
    pytest.param(b"\xef\xbb\xbfa: " + CANARY.encode(), "byte_order_mark", {}, id="bom-bytes"),
    pytest.param(f"\ufeffa: {CANARY}", "byte_order_mark", {}, id="bom-str"),
    pytest.param(f"a: {CANARY}\n#" + "x" * MIB, "too_large", {}, id="too-large-default-1mib"),
    pytest.param(
        f"a: {CANARY}é",
        "too_large",
        {"limits": YamlLimits(max_bytes=len(f"a: {CANARY}é"))},
        id="too-large-counts-utf8-bytes-not-characters",
    ),
    # syntax
    pytest.param(f"a: [{CANARY}", "invalid_yaml", {}, id="invalid-yaml-unclosed-flow"),
    pytest.param(f"a: {CANARY}\n b: c: d", "invalid_yaml", {}, id="invalid-yaml-bad-indent"),
    pytest.param(f"a: {CANARY}\x00", "invalid_yaml", {}, id="invalid-yaml-non-printable"),
    pytest.param(
        f'a: "{CANARY}\\UFFFFFFFF"', "invalid_yaml", {}, id="invalid-yaml-escape-overflow"
    ),
    pytest.param(
        f'a: "{CANARY}\\U00110000"', "invalid_yaml", {}, id="invalid-yaml-escape-beyond-unicode"
    ),
    # scanner-level rejections
    pytest.param(f"a: &{CANARY} {CANARY}\n", "anchor_or_alias", {}, id="anchor"),
    pytest.param(f"a: *{CANARY}\n", "anchor_or_alias", {}, id="alias"),
    pytest.param(f"a: &{CANARY} [1]\nb: *{CANARY}\n", "anchor_or_alias", {}, id="anchor-and-alias"),
    pytest.param(f"a: !!str {CANARY}\n", "tag_or_directive", {}, id="tag-str"),
    pytest.param(f"a: !{CANARY} x\n", "tag_or_directive", {}, id="tag-custom"),
    pytest.param(f"a: !!binary {CANARY}\n", "tag_or_directive", {}, id="tag-binary"),
    pytest.param(f"a: !!set {{{CANARY}}}\n", "tag_or_directive", {}, id="tag-set"),
    pytest.param(f"a: ! {CANARY}\n", "tag_or_directive", {}, id="tag-non-specific"),
    pytest.param(f"%YAML 1.1\n---\na: {CANARY}\n", "tag_or_directive", {}, id="directive-yaml"),
    pytest.param(
        f"%TAG !e! tag:{CANARY},2000:\n---\na: 1\n", "tag_or_directive", {}, id="directive-tag"
    ),
    pytest.param(f"%{CANARY} x\n---\na: 1\n", "tag_or_directive", {}, id="directive-reserved"),
    # stream limits
    pytest.param(
        _flow_list(DEFAULT_YAML_LIMITS.max_nodes), "too_many_nodes", {}, id="too-many-nodes-10001"
    ),
    pytest.param(
        f"{CANARY}: [1, 2]",
        "too_many_nodes",
        {"limits": YamlLimits(max_nodes=3)},
        id="too-many-nodes-keys-count",
    ),
    pytest.param(_block_mappings(65), "too_deep", {}, id="too-deep-block-mappings-65"),
    pytest.param(_block_sequences(65), "too_deep", {}, id="too-deep-block-sequences-65"),
    pytest.param(_flow_sequences(65), "too_deep", {}, id="too-deep-flow-sequences-65"),
    pytest.param(_flow_mappings(65), "too_deep", {}, id="too-deep-flow-mappings-65"),
    pytest.param(_flow_sequences(200_000), "too_deep", {}, id="too-deep-flow-200000"),
    pytest.param(f"a: {CANARY}\n---\nb: 2\n", "multiple_documents", {}, id="multiple-documents"),
    pytest.param(
        f"a: {CANARY}\n...\n---\n", "multiple_documents", {}, id="multiple-documents-empty-second"
    ),
    pytest.param("", "empty_document", {}, id="empty-stream"),
    pytest.param(f"# {CANARY}\n", "empty_document", {}, id="empty-stream-comment-only"),
    pytest.param(f"--- # {CANARY}\n", "empty_document", {}, id="empty-explicit-document"),
    # keys
    pytest.param(f"<<: {{{CANARY}: 1}}\n", "merge_key", {}, id="merge-key"),
    pytest.param(f"a:\n  <<: {{{CANARY}: 1}}\n", "merge_key", {}, id="merge-key-nested"),
    pytest.param(f"a: <<\nb: {CANARY}\n", "merge_key", {}, id="merge-indicator-as-value"),
    pytest.param(f"{CANARY}: 1\n{CANARY}: 2\n", "duplicate_key", {}, id="duplicate-key-top"),
    pytest.param(
        f"a:\n  {CANARY}: 1\n  {CANARY}: 2\n", "duplicate_key", {}, id="duplicate-key-nested"
    ),
    pytest.param(
        f"{{{CANARY}: 1, '{CANARY}': 2}}", "duplicate_key", {}, id="duplicate-key-plain-vs-quoted"
    ),
    pytest.param(f"1: {CANARY}\n", "invalid_key", {}, id="non-string-key-int"),
    pytest.param(f"true: {CANARY}\n", "invalid_key", {}, id="non-string-key-bool"),
    pytest.param(f"null: {CANARY}\n", "invalid_key", {}, id="non-string-key-null"),
    pytest.param(f"? [{CANARY}]\n: 1\n", "invalid_key", {}, id="non-string-key-sequence"),
    pytest.param(f"? {{{CANARY}: 1}}\n: 1\n", "invalid_key", {}, id="non-string-key-mapping"),
    pytest.param(f"'': {CANARY}\n", "invalid_key", {}, id="empty-key-quoted"),
    pytest.param(f"?\n: {CANARY}\n", "invalid_key", {}, id="empty-key-plain"),
    # scalars
    pytest.param(f"{CANARY}: True\n", "invalid_boolean", {}, id="boolean-True"),
    pytest.param(f"{CANARY}: FALSE\n", "invalid_boolean", {}, id="boolean-FALSE"),
    pytest.param(f"{CANARY}: yes\n", "invalid_boolean", {}, id="boolean-yes"),
    pytest.param(f"{CANARY}: no\n", "invalid_boolean", {}, id="boolean-no"),
    pytest.param(f"{CANARY}: on\n", "invalid_boolean", {}, id="boolean-on"),
    pytest.param(f"{CANARY}: Off\n", "invalid_boolean", {}, id="boolean-Off"),
    pytest.param(f"{CANARY}: ~\n", "invalid_null", {}, id="null-tilde"),
    pytest.param(f"{CANARY}: Null\n", "invalid_null", {}, id="null-capitalized"),
    pytest.param(f"{CANARY}:\n", "invalid_null", {}, id="null-empty-value"),
    pytest.param(f"- {CANARY}\n-\n", "invalid_null", {}, id="null-empty-sequence-item"),
    pytest.param(f"{{{CANARY}}}", "invalid_null", {}, id="null-flow-key-without-value"),
    pytest.param("~", "invalid_null", {}, id="null-tilde-top-level"),
    pytest.param(f"{CANARY}: 0x1F\n", "invalid_integer", {}, id="integer-hex"),
    pytest.param(f"{CANARY}: 1_000\n", "invalid_integer", {}, id="integer-underscore"),
    pytest.param(f"{CANARY}: +1\n", "invalid_integer", {}, id="integer-plus-sign"),
    pytest.param(f"{CANARY}: 010\n", "invalid_integer", {}, id="integer-leading-zero"),
    pytest.param(f"{CANARY}: 0b101\n", "invalid_integer", {}, id="integer-binary"),
    pytest.param(f"{CANARY}: 1:30\n", "invalid_integer", {}, id="integer-sexagesimal"),
    pytest.param(
        f"{CANARY}: {'9' * 4301}\n", "integer_too_long", {}, id="integer-more-than-4300-digits"
    ),
    pytest.param(f"{CANARY}: .inf\n", "invalid_float", {}, id="float-inf"),
    pytest.param(f"{CANARY}: -.inf\n", "invalid_float", {}, id="float-negative-inf"),
    pytest.param(f"{CANARY}: .nan\n", "invalid_float", {}, id="float-nan"),
    pytest.param(f"{CANARY}: 1.\n", "invalid_float", {}, id="float-trailing-dot"),
    pytest.param(f"{CANARY}: .5\n", "invalid_float", {}, id="float-leading-dot"),
    pytest.param(f"{CANARY}: +1.5\n", "invalid_float", {}, id="float-plus-sign"),
    pytest.param(f"{CANARY}: 01.5\n", "invalid_float", {}, id="float-leading-zero"),
    pytest.param(f"{CANARY}: 1_0.5\n", "invalid_float", {}, id="float-underscore"),
    pytest.param(f"{CANARY}: 1:30.5\n", "invalid_float", {}, id="float-sexagesimal"),
    pytest.param(f"{CANARY}: 1.0e+400\n", "invalid_float", {}, id="float-overflow"),
    pytest.param(f'{CANARY}: "\\ud800"\n', "unpaired_surrogate", {}, id="lone-surrogate-escape"),
    pytest.param(f'"\\udc00{CANARY}": 1\n', "unpaired_surrogate", {}, id="lone-surrogate-key"),
    # options
    pytest.param(
        f"- {CANARY}\n", "not_mapping", {"require_mapping": True}, id="not-mapping-sequence"
    ),
    pytest.param(CANARY, "not_mapping", {"require_mapping": True}, id="not-mapping-scalar"),
    pytest.param(f"include: {CANARY}\n", "include_key", _INCLUDES, id="include-key-top"),
    pytest.param(
        f"a:\n  b: [{{Extends: {CANARY}}}]\n",
        "include_key",
        _INCLUDES,
        id="include-key-nested-case",
    ),
    pytest.param(f"a: {{REF: {CANARY}}}\n", "include_key", _INCLUDES, id="include-key-upper-case"),
    pytest.param(
        f"comparison:\n  baseline:\n    include_files: [{CANARY}]\n",
        "include_key",
        _REQUEST,
        id="include-key-outside-exempt-subtree",
    ),
    pytest.param(
        f"comparison:\n  baseline:\n    service_identity:\n      includes: {CANARY}\n",
        "include_key",
        _REQUEST,
        id="include-key-above-exempt-subtree",
    ),
    pytest.param(
        f"comparison:\n  policy:\n    service_identity:\n      configuration: {{ref: {CANARY}}}\n",
        "include_key",
        _REQUEST,
        id="include-key-in-similar-but-not-exempt-path",
    ),
    pytest.param(
        "comparison:\n  baseline:\n    service_identity:\n"
        f"      - configuration: {{include_file: {CANARY}}}\n",
        "include_key",
        _REQUEST,
        id="include-key-path-through-sequence-not-exempt",
    ),
    pytest.param(
        f"{CANARY}: 1\n",
        "include_key",
        {"forbidden_keys": frozenset({CANARY.upper()})},
        id="forbidden-keys-compared-lower-cased",
    ),
]


@pytest.mark.parametrize(("document", "code", "options"), REJECTIONS)
def test_rejection(document: bytes | str, code: str, options: dict[str, Any]) -> None:
    error = assert_refused(
        lambda: load_strict_yaml(document, **options), code, canaries=(CANARY, CANARY.lower())
    )
    assert isinstance(error, YamlError)


@pytest.mark.parametrize(("document", "code", "options"), REJECTIONS)
def test_rejection_never_leaks_input(
    document: bytes | str, code: str, options: dict[str, Any]
) -> None:
    with pytest.raises(YamlError) as caught:
        load_strict_yaml(document, **options)
    error = caught.value
    for text in (str(error), repr(error), repr(error.args)):
        assert CANARY not in text
        assert CANARY.lower() not in text
    assert error.args == (code,)
    # Raised "from None" and outside any handler: no PyYAML (or codec) exception
    # is chained or even kept as the implicit context.
    assert error.__cause__ is None
    assert error.__suppress_context__ is True
    assert error.__context__ is None


# ---------------------------------------------------------------------------
# Acceptance

ACCEPTED = [
    pytest.param("a: 1\nb:\n  c: [x, y]\n", {"a": 1, "b": {"c": ["x", "y"]}}, id="block-mapping"),
    pytest.param("{a: 1, b: {c: [x, y]}}", {"a": 1, "b": {"c": ["x", "y"]}}, id="flow-mapping"),
    pytest.param(
        '{"a":[1,2.5,-0.0,true,false,null,"s"],"b":{}}',
        {"a": [1, 2.5, -0.0, True, False, None, "s"], "b": {}},
        id="json-document-compact",
    ),
    pytest.param(
        '{\n  "a": [1, {"b": "\\u00e9\\n\\t\\"\\\\/"}]\n}\n',
        {"a": [1, {"b": 'é\n\t"\\/'}]},
        id="json-document-indented-with-escapes",
    ),
    pytest.param("- a\n- - b\n  - c: d\n", ["a", ["b", {"c": "d"}]], id="nested-lists"),
    pytest.param("[a: 1, b]", [{"a": 1}, "b"], id="flow-single-pair-mapping"),
    pytest.param(
        "a: 'true'\nb: \"null\"\nc: '1'\nd: '~'\ne: ''\nf: '<<'\n",
        {"a": "true", "b": "null", "c": "1", "d": "~", "e": "", "f": "<<"},
        id="quoted-strings",
    ),
    pytest.param("'<<': 1", {"<<": 1}, id="quoted-merge-key-is-a-string"),
    pytest.param(
        "a: 1e3\nb: 1.0e3\nc: 1.5e3",
        {"a": "1e3", "b": "1.0e3", "c": "1.5e3"},
        id="unsigned-exponent-stays-string",
    ),
    pytest.param("a: 1.5e+3\nb: 2.5E-3", {"a": 1500.0, "b": 0.0025}, id="signed-exponent-float"),
    pytest.param(
        "a: 1\nb: 1.0\nc: -0\nd: -0.0",
        {"a": 1, "b": 1.0, "c": 0, "d": -0.0},
        id="int-and-float-keep-kind",
    ),
    pytest.param(f"a: {'9' * 4300}", {"a": int("9" * 4300)}, id="big-int-4300-digits"),
    pytest.param(
        "a: -123456789012345678901234567890",
        {"a": -123456789012345678901234567890},
        id="big-negative-int",
    ),
    pytest.param("a: 1.7976931348623157e+308", {"a": 1.7976931348623157e308}, id="max-float"),
    pytest.param(
        "a: true\nb: false\nc: null", {"a": True, "b": False, "c": None}, id="json-literals"
    ),
    pytest.param(
        "ключ: значение\n名前: '😀'\nemoji: \"\\U0001F600\"\n",
        {"ключ": "значение", "名前": "😀", "emoji": "😀"},
        id="unicode",
    ),
    pytest.param('a: "\\ud83d\\ude00"', {"a": "😀"}, id="surrogate-pair-escape-joined"),
    pytest.param(
        "a: x\ufeffy\nb: '\ufeff'",
        {"a": "x\ufeffy", "b": "\ufeff"},
        id="feff-inside-content-is-content",
    ),
    pytest.param(
        "a: 2024-01-01\nb: 2025-03-01T10:00:00Z\n2024-01-02: c",
        {"a": "2024-01-01", "b": "2025-03-01T10:00:00Z", "2024-01-02": "c"},
        id="timestamp-stays-string",
    ),
    pytest.param("a: =", {"a": "="}, id="value-indicator-stays-string"),
    pytest.param(
        "a: y\nb: n\nc: 0o17", {"a": "y", "b": "n", "c": "0o17"}, id="yaml12-only-forms-are-strings"
    ),
    pytest.param(
        "a: |\n  line1\n  line2\nb: >\n  folded\n  text\n",
        {"a": "line1\nline2\n", "b": "folded text\n"},
        id="block-scalars",
    ),
    pytest.param("a: 1\n...\n", {"a": 1}, id="document-end-marker"),
    pytest.param("---\na: 1\n", {"a": 1}, id="explicit-document-start"),
    pytest.param("# comment\na: 1 # trailing\n", {"a": 1}, id="comments"),
    pytest.param("--- ''", "", id="top-level-empty-string"),
    pytest.param("null", None, id="top-level-null"),
    pytest.param("[]", [], id="top-level-empty-list"),
    pytest.param("{}", {}, id="top-level-empty-mapping"),
    pytest.param(b"a: \xc3\xa9", {"a": "é"}, id="bytes-input"),
    pytest.param(bytearray(b"a: 1"), {"a": 1}, id="bytearray-input"),
    pytest.param("a: 1\r\nb: 2\r\n", {"a": 1, "b": 2}, id="crlf-line-breaks"),
]


@pytest.mark.parametrize(("document", "expected"), ACCEPTED)
def test_accepted(document: bytes | str, expected: Any) -> None:
    value = load_strict_yaml(document)
    assert _same(value, expected)
    assert _is_json_data(value)


@pytest.mark.parametrize(
    ("document", "options"),
    [
        pytest.param(
            "comparison:\n  baseline:\n    service_identity:\n      configuration:\n"
            "        include: a\n        tools: [{ref: b, nested: {extends: c}}]\n",
            _REQUEST,
            id="include-keys-inside-exempt-subtree",
        ),
        pytest.param(
            "comparison:\n  subject:\n    service_identity:\n      configuration: {Ref: x}\n",
            _REQUEST,
            id="include-keys-exempt-subject-side",
        ),
        pytest.param("include: x\nextends: [ref]\n", {}, id="include-keys-allowed-by-default"),
        pytest.param("includes_more: x\nreference: y\n", _INCLUDES, id="include-like-keys-allowed"),
        pytest.param("a: include\nb: [ref]\n", _INCLUDES, id="include-words-as-values-allowed"),
    ],
)
def test_forbidden_keys_accepted(document: str, options: dict[str, Any]) -> None:
    assert isinstance(load_strict_yaml(document, **options), dict)


def test_exempt_receives_paths_of_keys() -> None:
    seen: list[tuple[str, ...]] = []

    def exempt(path: tuple[str, ...]) -> bool:
        seen.append(path)
        return False

    load_strict_yaml(
        "a:\n  b: {c: 1}\n  d: [{e: 1}]\n",
        forbidden_keys=INCLUDE_KEYS,
        forbidden_keys_exempt=exempt,
    )
    # The mapping inside the sequence has no path of keys and is not offered.
    assert sorted(seen) == [(), ("a",), ("a", "b")]


# ---------------------------------------------------------------------------
# Limits at their edges


def test_size_limit_is_inclusive() -> None:
    head = "a: 1\n#"
    exact = head + "x" * (MIB - len(head))
    assert len(exact.encode()) == MIB
    assert load_strict_yaml(exact) == {"a": 1}
    assert load_strict_yaml(exact.encode()) == {"a": 1}
    with pytest.raises(YamlError) as caught:
        load_strict_yaml((exact + "x").encode())
    assert caught.value.code == "too_large"


def test_node_limit_is_inclusive() -> None:
    # One sequence start plus 9,999 scalars is exactly 10,000 nodes.
    assert len(load_strict_yaml(_flow_list(9_999))) == 9_999
    with pytest.raises(YamlError) as caught:
        load_strict_yaml(_flow_list(10_000))
    assert caught.value.code == "too_many_nodes"


@pytest.mark.parametrize(
    "build",
    [_block_mappings, _block_sequences, _flow_sequences, _flow_mappings],
    ids=["block-mappings", "block-sequences", "flow-sequences", "flow-mappings"],
)
def test_depth_limit_is_inclusive(build: Any) -> None:
    value = load_strict_yaml(build(64))
    depth = 0
    while isinstance(value, dict | list):
        depth += 1
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    assert depth == 64
    with pytest.raises(YamlError) as caught:
        load_strict_yaml(build(65))
    assert caught.value.code == "too_deep"


def test_custom_limits() -> None:
    limits = YamlLimits(max_bytes=100, max_nodes=5, max_depth=2)
    assert load_strict_yaml("a: [1, 2]", limits=limits) == {"a": [1, 2]}
    for document, code in (("a: [[1]]", "too_deep"), ("a: [1, 2, 3, 4]", "too_many_nodes")):
        with pytest.raises(YamlError) as caught:
            load_strict_yaml(document, limits=limits)
        assert caught.value.code == code


@pytest.mark.parametrize(
    ("document", "code"),
    [
        pytest.param(
            "a: True\nb: " + _flow_list(10_000), "too_many_nodes", id="nodes-before-scalars"
        ),
        pytest.param("a: 1\na: 2\nb: " + _flow_sequences(65), "too_deep", id="depth-before-keys"),
        pytest.param("a: ~\n---\nb: 1", "multiple_documents", id="documents-before-scalars"),
        pytest.param("a: yes\nb: &x 1", "anchor_or_alias", id="tokens-before-scalars"),
        pytest.param("a: yes\nb: [", "invalid_yaml", id="syntax-before-scalars"),
    ],
)
def test_stream_checks_precede_construction(document: str, code: str) -> None:
    assert isinstance(assert_refused(lambda: load_strict_yaml(document), code), YamlError)


def test_check_order_after_construction() -> None:
    # Scalar errors, then require_mapping, then forbidden keys.
    with pytest.raises(YamlError) as caught:
        load_strict_yaml("- {include: x}\n- yes\n", require_mapping=True, **_INCLUDES)
    assert caught.value.code == "invalid_boolean"
    with pytest.raises(YamlError) as caught:
        load_strict_yaml("- {include: x}\n", require_mapping=True, **_INCLUDES)
    assert caught.value.code == "not_mapping"


@pytest.mark.parametrize(
    "fields",
    [
        {"max_bytes": 0},
        {"max_nodes": -1},
        {"max_depth": 0},
        {"max_depth": True},
        {"max_bytes": 1.5},
    ],
)
def test_limits_must_be_positive_ints(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive int"):
        YamlLimits(**fields)


def test_integer_limit_independent_of_interpreter_setting() -> None:
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with pytest.raises(YamlError) as caught:
            load_strict_yaml(f"a: {'7' * 700}")
    finally:
        sys.set_int_max_str_digits(previous)
    assert caught.value.code == "integer_too_long"
    assert caught.value.__context__ is None


def test_wrong_input_type() -> None:
    with pytest.raises(TypeError):
        load_strict_yaml(123)  # type: ignore[arg-type]


def test_default_limits() -> None:
    assert YamlLimits(max_bytes=1_048_576, max_nodes=10_000, max_depth=64) == DEFAULT_YAML_LIMITS
    assert (
        frozenset({"include", "includes", "include_file", "include_files", "extends", "ref"})
        == INCLUDE_KEYS
    )


# ---------------------------------------------------------------------------
# invarlock request vectors (YAML-level outcomes only; the schema is not ours)

# The reference's messages quote input; each YAML-level one maps to our code.
# Any other message is a schema or format refusal of a document that strict
# YAML itself accepts.
_VECTOR_MESSAGE_CODES = (
    ("has duplicate key", "duplicate_key"),
    ("merge keys are not allowed", "merge_key"),
    ("aliases and anchors are not allowed", "anchor_or_alias"),
    ("explicit tags and directives are not allowed", "tag_or_directive"),
    ("booleans must use lowercase", "invalid_boolean"),
    ("nulls must use lowercase null", "invalid_null"),
    ("integers must use canonical JSON syntax", "invalid_integer"),
    ("numbers must use finite JSON syntax", "invalid_float"),
    ("object keys must be non-empty strings", "invalid_key"),
    ("include directives are not allowed", "include_key"),
    ("64-level nesting limit", "too_deep"),
    ("10,000-node limit", "too_many_nodes"),
    ("must be UTF-8 encoded", "not_utf8"),
    ("must be a YAML object", "not_mapping"),
    ("1 MiB byte limit", "too_large"),
)


def _vector_document(case: dict[str, Any]) -> bytes | str:
    given_input = case["input"]
    if "yaml_text" in given_input:
        return str(given_input["yaml_text"])
    if "yaml_bytes_b64" in given_input:
        return base64.b64decode(given_input["yaml_bytes_b64"])
    recipe = given_input["yaml_text_recipe"]
    assert recipe.startswith("BASE + '#' + 'x'*1048576 + '\\n'")
    base = next(
        item
        for item in load("invarlock/request_yaml.json")["cases"]
        if item["name"] == "valid-block-yaml"
    )["input"]["yaml_text"]
    document = base + "#" + "x" * MIB + "\n"
    assert len(document.encode()) == given_input["byte_length"]
    return str(document)


@pytest.mark.parametrize("case", cases("invarlock/request_yaml.json"))
def test_request_yaml_vector(case: dict[str, Any]) -> None:
    document = _vector_document(case)
    expected = case["expected"]
    if "value" in expected:
        assert _same(load_strict_yaml(document, **_REQUEST), expected["value"])
        return
    message = expected["error"]["message"]
    codes = [code for fragment, code in _VECTOR_MESSAGE_CODES if fragment in message]
    if not codes:
        assert isinstance(load_strict_yaml(document, **_REQUEST), dict)
        return
    with pytest.raises(YamlError) as caught:
        load_strict_yaml(document, **_REQUEST)
    assert caught.value.code == codes[0]


# ---------------------------------------------------------------------------
# Properties and fuzzing

# JSON text is YAML flow syntax, with genuine YAML 1.1 differences excluded:
# * floats whose shortest repr has no "." (json.dumps writes 1e+16, 5e-324):
#   YAML 1.1 only resolves floats containing a "." so these load as strings;
# * U+007F in strings: json.dumps leaves DEL raw even with ensure_ascii, and
#   YAML forbids that non-printable character in a stream;
# * empty keys: valid JSON, but strict YAML requires non-empty string keys.
# Astral characters are kept: ensure_ascii writes them as surrogate-pair
# escapes, which the loader joins exactly as a JSON decoder does.
# Lone surrogates are excluded too: they are not Unicode scalar values and
# cannot be JSON data encoded as UTF-8 (the loader refuses them).
_characters = st.characters(exclude_categories=("Cs",), exclude_characters="\x7f")
_texts = st.text(_characters, max_size=12)
_floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: "." in repr(f))
_scalars = st.none() | st.booleans() | st.integers() | _floats | _texts
_json_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(_characters, min_size=1, max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(
    _json_values,
    st.sampled_from(
        [{}, {"separators": (",", ":")}, {"indent": 2}, {"indent": 1, "separators": (",", ": ")}]
    ),
)
def test_json_text_round_trips(value: Any, dump_options: dict[str, Any]) -> None:
    text = json.dumps(value, **dump_options)
    assert _same(load_strict_yaml(text), value)
    assert _same(load_strict_yaml(text.encode("utf-8")), value)


_yaml_alphabet = st.sampled_from(
    [
        *"abxyz019.-+_:?,[]{}&*!|>'\"%@`#~<=eE \t\n\\",
        *("true", "True", "null", "yes", "---", "...", "<<", "\ufeff", "é", "\x85", "\u2028"),
    ]
)


def _load_or_refuse(document: bytes | str) -> None:
    try:
        value = load_strict_yaml(document, limits=YamlLimits(max_nodes=200, max_depth=8))
    except YamlError as error:
        refused = error
    else:
        assert _is_json_data(value)
        return
    assert refused.code in YamlError.codes
    assert refused.__cause__ is None
    assert refused.__context__ is None


@settings(max_examples=400, deadline=None)
@given(st.lists(_yaml_alphabet, max_size=60).map("".join))
def test_fuzz_yaml_like_text_only_raises_yaml_error(document: str) -> None:
    _load_or_refuse(document)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_arbitrary_text_only_raises_yaml_error(document: str) -> None:
    _load_or_refuse(document)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_fuzz_arbitrary_bytes_only_raises_yaml_error(document: bytes) -> None:
    _load_or_refuse(document)


# ---------------------------------------------------------------------------
# #13 item 10: libyaml (fast) and the pure parser give the same values and codes

needs_libyaml = pytest.mark.skipif(
    not strict_yaml.LIBYAML_AVAILABLE, reason="PyYAML built without libyaml"
)


def _outcome(document: bytes | str, use_libyaml: bool, **options: Any) -> Any:
    try:
        return ("value", load_strict_yaml(document, use_libyaml=use_libyaml, **options))
    except YamlError as error:
        return ("refused", error.code)


@needs_libyaml
@pytest.mark.parametrize(("document", "code", "options"), REJECTIONS)
def test_libyaml_refuses_with_the_same_code(
    document: bytes | str, code: str, options: dict[str, Any]
) -> None:
    assert _outcome(document, True, **options) == ("refused", code)


@needs_libyaml
@pytest.mark.parametrize(("document", "expected"), ACCEPTED)
def test_libyaml_accepts_the_same_values(document: bytes | str, expected: Any) -> None:
    kind, value = _outcome(document, True)
    assert kind == "value"
    assert _same(value, expected)


@needs_libyaml
@settings(max_examples=300, deadline=None)
@given(st.lists(_yaml_alphabet, max_size=40).map("".join))
def test_libyaml_and_pure_parser_agree_on_fuzzed_documents(document: str) -> None:
    limits = YamlLimits(max_nodes=200, max_depth=8)
    pure = _outcome(document, False, limits=limits)
    fast = _outcome(document, True, limits=limits)
    if pure[0] == "value":
        assert fast[0] == "value"
        assert _same(fast[1], pure[1])
    else:
        assert fast == pure


@needs_libyaml
def test_reserved_directive_is_refused_by_both() -> None:
    for use_libyaml in (False, True):
        assert _outcome("%FOO bar\n---\na: 1\n", use_libyaml) == ("refused", "tag_or_directive")


def test_default_parser_is_libyaml_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    real_c, real_python = strict_yaml._c_events, strict_yaml._python_events
    monkeypatch.setattr(strict_yaml, "_c_events", lambda text: (used.append("c"), real_c(text))[1])
    monkeypatch.setattr(
        strict_yaml, "_python_events", lambda text: (used.append("py"), real_python(text))[1]
    )
    assert load_strict_yaml("a: 1\n") == {"a": 1}
    assert used == (["c"] if strict_yaml.LIBYAML_AVAILABLE else ["py"])


@pytest.mark.parametrize(
    ("document", "code"),
    [
        ("!~!", "tag_or_directive"),
        ("a: !<x y", "tag_or_directive"),
        ("%YAML\n---\na: 1\n", "tag_or_directive"),
        ("a: &", "anchor_or_alias"),
        ("a: *", "anchor_or_alias"),
        ("a: [1,", "invalid_yaml"),
    ],
)
def test_a_malformed_token_of_a_refused_kind_is_named_by_its_kind(document: str, code: str) -> None:
    """Both parsers name a malformed tag, directive, anchor or alias by its kind."""
    for use_libyaml in (False, *((True,) if strict_yaml.LIBYAML_AVAILABLE else ())):
        assert _outcome(document, use_libyaml) == ("refused", code), (document, use_libyaml)
