"""The manifest signature envelope's closed structure: every refusal's code and field.

The envelope is checked with :func:`sealeval._validate.check_closed` (the one
toolkit); these cases pin the contract's codes and fields, including its
rule for an encoded member (``public_key``/``signature``): more than two
members is an unknown one, two that are not ``encoding`` and ``value`` a
missing one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sealeval.captured.signing import (
    SigningKey,
    SigningKeyError,
    parse_signature_envelope,
    signature_envelope,
)
from support.refusals import CANARY


def _envelope() -> dict[str, Any]:
    key = SigningKey.from_seed(bytes(range(32)))
    document: dict[str, Any] = json.loads(signature_envelope(b"manifest bytes", key))
    return document


def _without(member: str) -> dict[str, Any]:
    document = _envelope()
    del document[member]
    return document


def _encoded(member: str, value: object) -> dict[str, Any]:
    return {**_envelope(), member: value}


CASES: list[tuple[str, object, str, str]] = [
    ("not-an-object", [CANARY], "invalid_type", "signature"),
    ("unknown-member", {**_envelope(), CANARY: 1}, "unknown_field", "signature"),
    ("missing-member", _without("algorithm"), "missing_field", "signature"),
    ("format", {**_envelope(), "format": CANARY}, "invalid_constant", "format"),
    ("encoded-not-object", _encoded("public_key", CANARY), "invalid_type", "public_key"),
    ("encoded-empty", _encoded("public_key", {}), "missing_field", "public_key"),
    ("encoded-one", _encoded("public_key", {"encoding": "pem"}), "missing_field", "public_key"),
    (
        "encoded-two-with-a-foreign-member",
        _encoded("signature", {"encoding": "base64", CANARY: 1}),
        "missing_field",
        "signature",
    ),
    (
        "encoded-three",
        _encoded("signature", {"encoding": "base64", "value": "", CANARY: 1}),
        "unknown_field",
        "signature",
    ),
    (
        "encoding",
        _encoded("public_key", {"encoding": CANARY, "value": ""}),
        "invalid_encoding",
        "public_key.encoding",
    ),
    (
        "encoded-value-type",
        _encoded("signature", {"encoding": "base64", "value": [CANARY]}),
        "invalid_type",
        "signature.value",
    ),
]


@pytest.mark.parametrize(
    ("document", "code", "field"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_envelope_refusals(document: object, code: str, field: str) -> None:
    with pytest.raises(SigningKeyError) as caught:
        parse_signature_envelope(document)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert CANARY not in str(caught.value)
    assert CANARY not in repr(caught.value)


def test_a_signed_envelope_parses() -> None:
    envelope = parse_signature_envelope(_envelope())
    assert envelope.to_dict() == _envelope()
