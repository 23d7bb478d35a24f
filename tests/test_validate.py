"""The one validation toolkit refuses with the caller's error class, code and field.

Every check of :mod:`sealeval._validate` is run with two different families'
error classes; the refusal must be exactly that class (not a sibling, not a
base), carry the rule's code and the caller's field, and never echo the
submitted value.
"""

from __future__ import annotations

import types
from collections.abc import Callable

import pytest

from sealeval import _validate
from sealeval.attest import AttestationError
from sealeval.canonical import (
    DecodeLimits,
    encode_invarlock,
    frozen_canonical,
    frozen_digest,
    plain_canonical,
)
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.extended_seal import ExtendedSealError
from sealeval.captured.pack_reader import EvidencePackError
from sealeval.captured.receipt import ReceiptError
from sealeval.captured.request import CapturedRequestError
from sealeval.captured.trust import TrustInputError
from sealeval.errors import CanonicalError, ManifestError, SealevalError
from support.refusals import CANARY, assert_refused

FIELD = "outer.inner"

Check = Callable[[type[SealevalError]], object]

# (rule id, the call given an error class, the expected code)
REFUSALS: list[tuple[str, Check, str]] = [
    (
        "closed-not-object",
        lambda e: _validate.check_closed([CANARY], FIELD, ("a",), error=e),
        "invalid_type",
    ),
    (
        "closed-unknown",
        lambda e: _validate.check_closed({"a": 1, CANARY: 2}, FIELD, ("a",), error=e),
        "unknown_field",
    ),
    (
        "closed-missing",
        lambda e: _validate.check_closed({"b": CANARY}, FIELD, ("a",), ("b",), error=e),
        "missing_field",
    ),
    (
        "text-type",
        lambda e: _validate.check_text(7, FIELD, error=e),
        "invalid_type",
    ),
    (
        "text-too-long",
        lambda e: _validate.check_text(CANARY * 10, FIELD, error=e),
        "invalid_text",
    ),
    (
        "text-control",
        lambda e: _validate.check_text(CANARY + "\x00", FIELD, error=e),
        "invalid_text",
    ),
    (
        "text-blank",
        lambda e: _validate.check_text(" \t", FIELD, error=e, blank=False),
        "invalid_text",
    ),
    (
        "text-surrogate",
        lambda e: _validate.check_text(CANARY + "\ud800", FIELD, error=e),
        "invalid_json_value",
    ),
    (
        "digest",
        lambda e: _validate.check_digest("sha256:" + CANARY, FIELD, error=e),
        "invalid_digest",
    ),
    (
        "digest-null-not-allowed",
        lambda e: _validate.check_digest(None, FIELD, error=e),
        "invalid_digest",
    ),
    (
        "string-map-type",
        lambda e: _validate.check_string_map([CANARY], FIELD, error=e),
        "invalid_type",
    ),
    (
        "string-map-members",
        lambda e: _validate.check_string_map(
            {f"k{i}": CANARY for i in range(_validate.MAX_MEMBERS + 1)}, FIELD, error=e
        ),
        "too_many_members",
    ),
    (
        "string-map-value",
        lambda e: _validate.check_string_map({"k": 1}, FIELD, error=e),
        "invalid_type",
    ),
    (
        "members-type",
        lambda e: _validate.check_members([CANARY], FIELD, error=e),
        "invalid_type",
    ),
    (
        "members-key",
        lambda e: _validate.check_members({1: CANARY}, FIELD, error=e, key_code="invalid_type"),
        "invalid_type",
    ),
    (
        "members-count",
        lambda e: _validate.check_members({"a": CANARY, "b": 2}, FIELD, error=e, max_members=1),
        "too_many_members",
    ),
    (
        "freeze-nan",
        lambda e: _validate.freeze_json({"x": float("nan")}, FIELD, error=e),
        "invalid_json_value",
    ),
    (
        "freeze-key",
        lambda e: _validate.freeze_json({1: CANARY}, FIELD, error=e),
        "invalid_json_value",
    ),
    (
        "freeze-deep",
        lambda e: _validate.freeze_json([[[CANARY]]], FIELD, error=e, max_depth=2),
        "too_deep",
    ),
    (
        "freeze-type",
        lambda e: _validate.freeze_json({CANARY}, FIELD, error=e),
        "invalid_json_value",
    ),
    (
        "frozen-canonical",
        lambda e: frozen_canonical({"x": {CANARY}}, error=e),
        "invalid_json_value",
    ),
    (
        "frozen-digest",
        lambda e: frozen_digest([float("inf")], error=e),
        "invalid_json_value",
    ),
]


@pytest.mark.parametrize(
    "error", [CapturedRunError, CapturedRequestError], ids=lambda e: e.__name__
)
@pytest.mark.parametrize(("call", "code"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_each_check_refuses_with_the_callers_class_and_code(
    call: Check, code: str, error: type[SealevalError]
) -> None:
    with pytest.raises(SealevalError) as caught:
        call(error)
    assert type(caught.value) is error
    assert caught.value.code == code
    assert caught.value.field in (FIELD, None)
    assert CANARY not in str(caught.value)
    assert CANARY not in repr(caught.value)


@pytest.mark.parametrize(
    ("error", "codes"),
    [
        (EvidencePackError, ("invalid_field", "unknown_field", "missing_field")),
        (ReceiptError, ("schema_violation",) * 3),
        (TrustInputError, ("invalid_type", "unknown_field", "missing_field")),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "-".join(value),
)
def test_closed_object_codes_are_the_callers(
    error: type[SealevalError], codes: tuple[str, str, str]
) -> None:
    """A family names its own closed-object codes; the order of the rules is fixed."""
    type_code, unknown_code, missing_code = codes

    def check(value: object) -> object:
        if len(set(codes)) == 1:
            return _validate.check_exact(value, FIELD, ("a", "b"), error=error, code=type_code)
        return _validate.check_closed(
            value,
            FIELD,
            ("a",),
            ("b",),
            error=error,
            type_code=type_code,
            unknown_code=unknown_code,
            missing_code=missing_code,
        )

    for value, expected in (
        ([CANARY], type_code),
        ({"a": 1, "b": 2, CANARY: 3}, unknown_code),  # unknown is checked before missing
        ({"b": CANARY}, missing_code),
    ):
        with pytest.raises(SealevalError) as caught:
            check(value)
        assert type(caught.value) is error
        assert (caught.value.code, caught.value.field) == (expected, FIELD)
        assert CANARY not in str(caught.value)


def test_a_missing_member_can_be_named_by_the_library() -> None:
    """``missing_prefix`` names the first absent *required* member; unknown keys never."""
    with pytest.raises(CapturedRunError) as caught:
        _validate.check_closed(
            {"b": CANARY}, FIELD, ("a", "c"), ("b",), error=CapturedRunError, missing_prefix="p."
        )
    assert (caught.value.code, caught.value.field) == ("missing_field", "p.a")
    with pytest.raises(CapturedRunError) as caught:
        _validate.check_closed(
            {"a": 1, CANARY: 2}, FIELD, ("a",), error=CapturedRunError, missing_prefix="p."
        )
    assert (caught.value.code, caught.value.field) == ("unknown_field", FIELD)
    assert CANARY not in str(caught.value)


def test_members_checks_keys_before_the_count_and_only_when_asked() -> None:
    many = dict.fromkeys(range(5), CANARY)
    with pytest.raises(CapturedRunError) as caught:
        _validate.check_members(
            many, FIELD, error=CapturedRunError, max_members=2, key_code="invalid_json_value"
        )
    assert caught.value.code == "invalid_json_value"
    with pytest.raises(CapturedRunError) as caught:
        _validate.check_members(many, FIELD, error=CapturedRunError, max_members=2)
    assert caught.value.code == "too_many_members"
    assert _validate.check_members({1: CANARY}, FIELD, error=CapturedRunError) == {1: CANARY}


def test_a_closed_object_refusal_carries_no_context() -> None:
    """Checked inside a handler, the refusal still drops the exception being handled."""

    def check_while_handling() -> None:
        try:
            raise LookupError(CANARY)
        except LookupError:
            _validate.check_closed({CANARY: 1}, FIELD, ("a",), error=CapturedRunError)

    with pytest.raises(CapturedRunError) as caught:
        check_while_handling()
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_accepted_values_come_back_checked_and_frozen() -> None:
    document = {"a": 1, "b": [1, {"c": None}]}
    assert _validate.check_closed(document, FIELD, ("a",), ("b",), error=CapturedRunError) is (
        document
    )
    assert _validate.check_exact({"a": 1}, FIELD, ("a",), error=ReceiptError, code="x") == {"a": 1}
    assert _validate.check_digest(None, FIELD, error=CapturedRunError, nullable=True) is None
    digest = "sha256:" + "0" * 64
    assert _validate.check_digest(digest, FIELD, error=CapturedRunError) == digest
    assert _validate.check_text("x\ty", FIELD, error=CapturedRunError, controls=True) == "x\ty"
    frozen = _validate.freeze_json(document, FIELD, error=CapturedRunError)
    assert isinstance(frozen, types.MappingProxyType)
    assert frozen["b"] == (1, {"c": None})
    assert _validate.thaw_json(frozen) == document
    assert frozen_canonical(frozen, error=CapturedRunError) == encode_invarlock(document)
    assert plain_canonical(document) == encode_invarlock(document)[:-1]
    assert plain_canonical({"x": float("nan")}) is None
    assert _validate.plain_json(document)
    assert not _validate.plain_json(frozen)
    shared = _validate.check_string_map({"k": "v"}, FIELD, error=CapturedRunError)
    assert shared is _validate.check_string_map({"k": "v"}, FIELD, error=CapturedRunError)


def test_rebased_moves_the_field_and_keeps_the_class() -> None:
    for inner, expected in (
        ("case", "cases[2]"),
        ("case.id", "cases[2].id"),
        ("case[1]", "cases[2][1]"),
        ("other", "cases[2].other"),
        (None, "cases[2]"),
    ):
        with (
            pytest.raises(CapturedRequestError) as caught,
            _validate.rebased("case", "cases[2]", error=CapturedRequestError),
        ):
            raise CapturedRequestError("invalid_type", inner)
        assert type(caught.value) is CapturedRequestError
        assert (caught.value.code, caught.value.field) == ("invalid_type", expected)
    # another family's refusal passes through untouched
    with (
        pytest.raises(CapturedRunError) as other,
        _validate.rebased("case", "cases[2]", error=CapturedRequestError),
    ):
        raise CapturedRunError("invalid_type", "case.id")
    assert other.value.field == "case.id"


def test_captured_errors_module_holds_the_error_only() -> None:
    """captured.errors holds the error class; the toolkit lives in _validate and canonical."""
    from sealeval.captured import errors  # noqa: PLC0415

    assert errors.__all__ == ["CapturedRunError", "JsonValue"]
    public = {name for name in vars(errors) if name.isidentifier() and not name.startswith("_")}
    assert public <= {"CapturedRunError", "JsonValue", "CapturedError", "annotations"}


@pytest.mark.parametrize("error", [ReceiptError, TrustInputError], ids=lambda e: e.__name__)
def test_decode_object_maps_the_decoders_codes_to_the_callers(error: type[SealevalError]) -> None:
    canary = CANARY.encode()
    for data, code in (
        (b'["' + canary + b'"]', "not_object"),
        (b'{"a": 1, "a": "' + canary + b'"}', "duplicate_key"),
        (b'{"a": "' + canary * 4 + b'"}', "too_large"),
        (b"\xef\xbb\xbf{}", "not_utf8"),
        (b"\xff" + canary, "not_utf8"),
        (b'{"a": ' + canary + b"}", "invalid_json"),
        (b'{"a": NaN}', "invalid_json"),
    ):
        with pytest.raises(SealevalError) as caught:
            _validate.decode_object(data, FIELD, error=error, limit=64)
        assert type(caught.value) is error
        assert (caught.value.code, caught.value.field) == (code, FIELD)
        assert caught.value.__cause__ is None
        assert CANARY not in str(caught.value)
    assert _validate.decode_object(b'{"a": [1]}', FIELD, error=error, limit=64) == {"a": [1]}


def _refusing_encoder(value: object) -> bytes:
    raise CanonicalError("unsupported_type")


# (error class, its code for any decoder refusal, for a non-object, for non-canonical bytes)
_FAMILY_CODES = [
    (ExtendedSealError, "invalid_document", "invalid_value", "not_canonical"),
    (AttestationError, "invalid_statement", "invalid_envelope", "non_canonical_payload"),
]


@pytest.mark.parametrize(
    ("error", "other", "not_object", "not_canonical"),
    _FAMILY_CODES,
    ids=[error.__name__ for error, *_ in _FAMILY_CODES],
)
def test_decode_object_takes_the_callers_limits_codes_and_canonical_rule(
    error: type[SealevalError], other: str, not_object: str, not_canonical: str
) -> None:
    canary = CANARY.encode()
    shallow = DecodeLimits(max_bytes=128, max_depth=2)
    codes = {"too_large": "too_large"}
    for data, code, canonical in (
        (b'{"a": [["' + canary + b'"]]}', other, None),  # too_deep: unmapped
        (b'{"a": 1, "a": "' + canary + b'"}', other, None),  # duplicate_key: unmapped
        (b'{"a": "' + canary * 4 + b'"}', "too_large", None),  # mapped
        (b'["' + canary + b'"]', not_object, None),
        (b'{"a": "' + canary + b'", "b": 1}', not_canonical, encode_invarlock),
        (b'[ "' + canary + b'" ]', not_canonical, encode_invarlock),  # canonical first
        (b'["' + canary + b'"]\n', not_object, encode_invarlock),
        (b'{"a":"' + canary + b'"}\n', other, _refusing_encoder),
    ):
        failure = assert_refused(
            lambda data=data, canonical=canonical: _validate.decode_object(
                data,
                FIELD,
                error=error,
                limit=shallow,
                codes=codes,
                other_code=other,
                object_code=not_object,
                canonical=canonical,
                canonical_code=not_canonical,
            ),
            code,
            FIELD,
        )
        assert type(failure) is error
        assert failure.__cause__ is None
    accepted = b'{"a":[1],"b":"' + canary + b'"}\n'
    for canonical in (None, encode_invarlock):
        document = _validate.decode_object(
            accepted, FIELD, error=error, limit=shallow, canonical=canonical
        )
        assert document == {"a": [1], "b": CANARY}


@pytest.mark.parametrize(
    ("error", "code"),
    [(ManifestError, "invalid_document"), (ReceiptError, "invalid_json")],
    ids=["default-code", "chosen-code"],
)
def test_decode_document_refuses_with_one_code_and_keeps_any_value(
    error: type[SealevalError], code: str
) -> None:
    for data in (
        b'{"a": 1, "a": "' + CANARY.encode() + b'"}',
        "[NaN]",
        b"\xef\xbb\xbf{}",
        '"' + CANARY + '" x',
        "",
    ):
        failure = assert_refused(
            lambda data=data: _validate.decode_document(data, FIELD, error=error, code=code),
            code,
            FIELD,
        )
        assert type(failure) is error
        assert failure.__cause__ is None
    assert _validate.decode_document('[1, {"a": null}]', FIELD, error=error) == [1, {"a": None}]


@pytest.mark.parametrize("error", [ReceiptError, TrustInputError], ids=lambda e: e.__name__)
def test_decode_object_is_decode_document_then_the_object_check(
    error: type[SealevalError],
) -> None:
    """One decoder wrapper: decode_object refuses a document exactly as decode_document does."""
    canary = CANARY.encode()
    limits = DecodeLimits(max_bytes=64, max_string_length=64)
    for data in (
        b'{"a": 1, "a": "' + canary + b'"}',
        b"[NaN]",
        b"\xef\xbb\xbf{}",
        b'"' + canary * 8 + b'"',
        b"{" * 70,
        b"",
    ):
        with pytest.raises(SealevalError) as as_document:
            _validate.decode_document(
                data,
                FIELD,
                error=error,
                code="invalid_json",
                limits=limits,
                codes=_validate.STRICT_JSON_CODES,
            )
        with pytest.raises(SealevalError) as as_object:
            _validate.decode_object(data, FIELD, error=error, limit=64)
        assert (as_object.value.code, as_object.value.field) == (
            as_document.value.code,
            as_document.value.field,
        )
        assert CANARY not in str(as_object.value)
    # the mapped codes differ from the one-code default: the mapping is applied
    assert {
        assert_refused(
            lambda data=data: _validate.decode_document(
                data, FIELD, error=error, codes=_validate.STRICT_JSON_CODES, code="invalid_json"
            ),
            code,
            FIELD,
        ).code
        for data, code in ((b'{"a":1,"a":2}', "duplicate_key"), (b"[NaN]", "invalid_json"))
    } == {"duplicate_key", "invalid_json"}
