"""PHI-safe tool inventory: refusals, canaries, canonical output, contract and fuzzing."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import logging
import math
import random
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sealeval.canonical import digest_openmed, encode_openmed
from sealeval.errors import ToolInventoryError
from sealeval.manifest.tool_inventory import (
    FORMATS,
    MAX_SCHEMA_DEPTH,
    MAX_TOOLS,
    SCHEMA_KEYWORDS,
    TOOL_INVENTORY_SCHEMA,
    TYPES,
    ToolEntry,
    ToolInventory,
    build_tool_inventory,
    tool_inventory_digest,
)
from support.refusals import assert_refused

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONTRACT_PATH = PROJECT_ROOT / "contracts" / "sealeval.tool_inventory.v1.schema.json"
DOCS_PATH = PROJECT_ROOT / "docs" / "tool-inventory.md"


def tool(parameters: Any, name: Any = "lookup") -> dict[str, Any]:
    return {"name": name, "parameters": parameters}


def one(parameters: Any) -> list[dict[str, Any]]:
    """A one-tool inventory whose parameters are ``parameters``."""
    return [tool(parameters)]


def prop(schema: Any, name: str = "dose") -> list[dict[str, Any]]:
    """A one-tool inventory whose only property ``name`` has ``schema``."""
    return one({"type": "object", "properties": {name: schema}})


def enum_value(value: Any) -> list[dict[str, Any]]:
    return prop({"enum": ["mg", value]})


def nested_items(levels: int) -> dict[str, Any]:
    """A schema with exactly ``levels`` schema levels (``items`` chained)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "array", "items": schema}
    return schema


def words(text: str) -> list[str]:
    return text.split()


def refuse(document: Any) -> ToolInventoryError:
    with pytest.raises(ToolInventoryError) as caught:
        build_tool_inventory(document)
    return caught.value


P = "tools[0].parameters"
Q = "tools[0].parameters.properties[0]"
E = "tools[0].parameters.properties[0].enum[1]"
DEEP_FIELD = "tools[0].parameters..." + ".".join(["items"] * 17)
TOOL = {"name": "lookup", "parameters": {}}

# One row per refusal rule: (rule id, document, exact ``str(error)`` = "<field>: <code>").
REFUSALS: list[tuple[str, Any, str]] = [
    # -- document shape
    ("document-scalar", "lookup", "inventory: invalid_document"),
    ("document-none", None, "inventory: invalid_document"),
    ("document-missing-tools", {}, "inventory: invalid_document"),
    ("document-extra-key", {"tools": one({}), "description": "x"}, "inventory: invalid_document"),
    ("document-tools-mapping", {"tools": {"a": 1}}, "tools: invalid_document"),
    ("document-tools-string", {"tools": "a"}, "tools: invalid_document"),
    ("empty-list", [], "tools: empty_inventory"),
    ("empty-tools-key", {"tools": []}, "tools: empty_inventory"),
    ("too-many-tools", [tool({}, f"t{i}") for i in range(MAX_TOOLS + 1)], "tools: too_many_tools"),
    # -- tool entries
    ("tool-not-mapping", ["lookup"], "tools[0]: invalid_tool"),
    ("tool-missing-parameters", [{"name": "a"}], "tools[0]: invalid_tool"),
    ("tool-missing-name", [{"parameters": {}}], "tools[0]: invalid_tool"),
    ("tool-second-entry", [tool({}, "a"), 7], "tools[1]: invalid_tool"),
    ("tool-key-free-text", [{**TOOL, "description": "x"}], "tools[0]: free_text"),
    ("tool-key-endpoint", [{**TOOL, "url": "x"}], "tools[0]: endpoint"),
    ("tool-key-credential", [{**TOOL, "api_key": "x"}], "tools[0]: credential"),
    ("tool-key-arguments", [{**TOOL, "arguments": {}}], "tools[0]: arguments"),
    ("tool-key-clinical-value", [{**TOOL, "examples": []}], "tools[0]: clinical_value"),
    ("tool-key-path", [{**TOOL, "cwd": "x"}], "tools[0]: path"),
    ("tool-key-unknown", [{**TOOL, "strict": True}], "tools[0]: unknown_keyword"),
    ("tool-key-non-string", [{**TOOL, 3: True}], "tools[0]: unknown_keyword"),
    ("tool-key-priority", [{**TOOL, "description": "x", "token": "y"}], "tools[0]: credential"),
    ("name-leading-digit", [tool({}, "1lookup")], "tools[0].name: invalid_name"),
    ("name-empty", [tool({}, "")], "tools[0].name: invalid_name"),
    ("name-space", [tool({}, "get labs")], "tools[0].name: invalid_name"),
    ("name-not-string", [tool({}, 12)], "tools[0].name: invalid_name"),
    ("name-too-long", [tool({}, "a" * 129)], "tools[0].name: invalid_name"),
    ("name-non-ascii", [tool({}, "dosé")], "tools[0].name: invalid_name"),
    (
        "duplicate-tool",
        [tool({}, "a"), tool({}, "b"), tool({"type": "object"}, "a")],
        "tools[2].name: duplicate_tool",
    ),
    # -- schema keyword categories (inside parameters; every keyword: test_keyword_rule)
    ("schema-free-text", one({"description": "x"}), f"{P}: free_text"),
    ("schema-clinical-value", prop({"default": 5}), f"{Q}: clinical_value"),
    ("schema-credential", one({"headers": {}}), f"{P}: credential"),
    ("schema-endpoint", one({"servers": []}), f"{P}: endpoint"),
    ("schema-arguments", one({"kwargs": {}}), f"{P}: arguments"),
    ("schema-path", one({"working-directory": "x"}), f"{P}: path"),
    ("schema-unknown-keyword", one({"pattern": "^a$"}), f"{P}: unknown_keyword"),
    ("schema-keyword-case", one({"Type": "object"}), f"{P}: unknown_keyword"),
    ("schema-key-non-string", one({1: "x"}), f"{P}: unknown_keyword"),
    (
        "schema-key-priority",
        one({"examples": [1], "base-url": "x", "title": "t"}),
        f"{P}: endpoint",
    ),
    # -- schema structure
    ("parameters-not-mapping", one([]), f"{P}: invalid_schema"),
    ("parameters-boolean", one(True), f"{P}: invalid_schema"),
    ("type-unknown", one({"type": "text"}), f"{P}.type: invalid_schema"),
    ("type-not-string", one({"type": 3}), f"{P}.type: invalid_schema"),
    ("type-empty-list", one({"type": []}), f"{P}.type: invalid_schema"),
    ("type-duplicate", one({"type": ["string", "string"]}), f"{P}.type[1]: invalid_schema"),
    ("type-list-unknown", one({"type": ["string", "date"]}), f"{P}.type[1]: invalid_schema"),
    ("properties-not-mapping", one({"properties": []}), f"{P}.properties: invalid_schema"),
    ("property-name-space", prop({}, "first name"), f"{Q}: invalid_name"),
    (
        "property-name-int",
        one({"properties": {"a": {}, 5: {}}}),
        f"{P}.properties[1]: invalid_name",
    ),
    ("property-schema-string", prop("number"), f"{Q}: invalid_schema"),
    (
        "required-not-list",
        one({"properties": {"a": {}}, "required": "a"}),
        f"{P}.required: invalid_schema",
    ),
    (
        "required-bad-name",
        one({"properties": {}, "required": ["a b"]}),
        f"{P}.required[0]: invalid_name",
    ),
    (
        "required-duplicate",
        one({"properties": {"a": {}}, "required": ["a", "a"]}),
        f"{P}.required[1]: invalid_schema",
    ),
    (
        "required-undeclared",
        one({"properties": {"a": {}}, "required": ["a", "b"]}),
        f"{P}.required[1]: invalid_schema",
    ),
    ("required-without-properties", one({"required": ["a"]}), f"{P}.required[0]: invalid_schema"),
    ("items-not-mapping", one({"items": "string"}), f"{P}.items: invalid_schema"),
    ("items-boolean", one({"items": False}), f"{P}.items: invalid_schema"),
    (
        "additional-properties-str",
        one({"additionalProperties": "no"}),
        f"{P}.additionalProperties: invalid_schema",
    ),
    ("size-negative", one({"minItems": -1}), f"{P}.minItems: invalid_schema"),
    ("size-boolean", one({"maxLength": True}), f"{P}.maxLength: invalid_schema"),
    ("size-float", one({"maxProperties": 2.0}), f"{P}.maxProperties: invalid_schema"),
    ("size-huge", one({"minLength": 2**63}), f"{P}.minLength: invalid_schema"),
    ("bound-boolean", one({"minimum": False}), f"{P}.minimum: invalid_schema"),
    ("bound-string", one({"maximum": "10"}), f"{P}.maximum: invalid_schema"),
    ("bound-nan", one({"exclusiveMinimum": math.nan}), f"{P}.exclusiveMinimum: invalid_schema"),
    (
        "bound-infinity",
        one({"exclusiveMaximum": math.inf}),
        f"{P}.exclusiveMaximum: invalid_schema",
    ),
    ("bound-huge-integer", one({"maximum": -(2**64)}), f"{P}.maximum: invalid_schema"),
    ("multiple-of-zero", one({"multipleOf": 0}), f"{P}.multipleOf: invalid_schema"),
    ("multiple-of-negative", one({"multipleOf": -0.5}), f"{P}.multipleOf: invalid_schema"),
    ("unique-items-not-bool", one({"uniqueItems": 1}), f"{P}.uniqueItems: invalid_schema"),
    ("format-unknown", one({"format": "phone"}), f"{P}.format: invalid_schema"),
    ("format-not-string", one({"format": ["date"]}), f"{P}.format: invalid_schema"),
    ("any-of-empty", one({"anyOf": []}), f"{P}.anyOf: invalid_schema"),
    ("one-of-not-list", one({"oneOf": {"type": "string"}}), f"{P}.oneOf: invalid_schema"),
    ("all-of-member", one({"allOf": [{}, "string"]}), f"{P}.allOf[1]: invalid_schema"),
    ("enum-empty", one({"enum": []}), f"{P}.enum: invalid_schema"),
    ("enum-not-list", one({"enum": "mg"}), f"{P}.enum: invalid_schema"),
    ("enum-duplicate", one({"enum": ["mg", "mL", "mg"]}), f"{P}.enum[2]: invalid_schema"),
    ("enum-duplicate-number", one({"enum": [1, 1.0]}), f"{P}.enum[1]: invalid_schema"),
    ("enum-object-member", one({"enum": [{"a": 1}]}), f"{P}.enum[0]: invalid_schema"),
    ("enum-array-member", one({"enum": [[1]]}), f"{P}.enum[0]: invalid_schema"),
    ("enum-nan", one({"enum": [math.nan]}), f"{P}.enum[0]: invalid_schema"),
    ("enum-huge-integer", one({"enum": [2**70]}), f"{P}.enum[0]: invalid_schema"),
    ("defs-not-mapping", one({"$defs": []}), f"{P}.defs: invalid_schema"),
    ("defs-bad-name", one({"$defs": {"a b": {}}}), f"{P}.defs[0]: invalid_name"),
    ("defs-member-not-mapping", one({"$defs": {"a": 1}}), f"{P}.defs[0]: invalid_schema"),
    ("defs-not-at-root", prop({"$defs": {"a": {}}}), f"{Q}.defs: invalid_schema"),
    ("ref-undefined", one({"$ref": "#/$defs/unit"}), f"{P}.ref: invalid_schema"),
    (
        "ref-not-defs",
        one({"$defs": {"u": {}}, "$ref": "#/definitions/u"}),
        f"{P}.ref: invalid_schema",
    ),
    ("ref-not-string", one({"$ref": 1}), f"{P}.ref: invalid_schema"),
    ("ref-other-document", one({"$ref": "other.json#/a"}), f"{P}.ref: invalid_schema"),
    ("ref-endpoint", prop({"$ref": "https://schemas.example/unit.json"}), f"{Q}.ref: endpoint"),
    ("ref-path", one({"$ref": "../schemas/unit.json"}), f"{P}.ref: path"),
    ("too-deep", one(nested_items(MAX_SCHEMA_DEPTH + 1)), f"{DEEP_FIELD}: too_deep"),
    # -- enum value rules
    ("value-endpoint-scheme", enum_value("https://ehr.example/fhir"), f"{E}: endpoint"),
    ("value-endpoint-mailto", enum_value("mailto:dr@clinic.example"), f"{E}: endpoint"),
    ("value-endpoint-www", enum_value("www.clinic.example"), f"{E}: endpoint"),
    ("value-path-absolute", enum_value("/srv/records"), f"{E}: path"),
    ("value-path-home", enum_value("~/notes"), f"{E}: path"),
    ("value-path-dot", enum_value("./notes"), f"{E}: path"),
    ("value-path-dotdot", enum_value("../notes"), f"{E}: path"),
    ("value-path-backslash", enum_value("share\\notes"), f"{E}: path"),
    ("value-path-drive", enum_value("D:notes"), f"{E}: path"),
    ("value-credential-sk", enum_value("sk-live-0000"), f"{E}: credential"),
    ("value-credential-ghp", enum_value("ghp_0000"), f"{E}: credential"),
    ("value-credential-slack", enum_value("xoxb-0000"), f"{E}: credential"),
    ("value-credential-aws", enum_value("AKIAIOSFODNN7EXAMPLE"), f"{E}: credential"),
    ("value-credential-bearer", enum_value("Bearer abc.def"), f"{E}: credential"),
    ("value-credential-jwt", enum_value("eyJhbGciOiJIUzI1NiJ9"), f"{E}: credential"),
    ("value-credential-pem", enum_value("-----BEGIN PRIVATE KEY-----"), f"{E}: credential"),
    ("value-credential-hex", enum_value("0123456789abcdef" * 2), f"{E}: credential"),
    (
        "value-credential-base64",
        enum_value("dGhpcyBpcyBhIHNlY3JldCBrZXk9PQ+/Xy"),
        f"{E}: credential",
    ),
    ("value-clinical-free-text", enum_value("John Doe"), f"{E}: clinical_value"),
    ("value-clinical-measurement", enum_value("120/80"), f"{E}: clinical_value"),
    ("value-clinical-non-ascii", enum_value("Müller"), f"{E}: clinical_value"),
    ("value-clinical-empty", enum_value(""), f"{E}: clinical_value"),
    ("value-clinical-too-long", enum_value("unit_" * 13), f"{E}: clinical_value"),
]


def _code(message: str) -> str:
    return message.rsplit(": ", 1)[1]


@pytest.mark.parametrize(
    ("document", "message"),
    [pytest.param(document, message, id=rule) for rule, document, message in REFUSALS],
)
def test_refusal(document: Any, message: str) -> None:
    error = assert_refused(refuse(document), _code(message), message.rsplit(": ", 1)[0])
    assert str(error) == message
    assert error.__cause__ is None
    assert error.__suppress_context__


def test_refusal_table_covers_every_code() -> None:
    assert {_code(message) for _, _, message in REFUSALS} == ToolInventoryError.codes


KEYWORD_CATEGORIES: dict[str, list[str]] = {
    "free_text": words("description title $comment summary comment help instructions prompt"),
    "clinical_value": words("default const example examples"),
    "credential": words(
        "api_key apikey token secret password authorization auth credentials headers bearer"
        " private_key client_secret"
    ),
    "endpoint": words("url uri endpoint server servers host base_url baseurl href webhook"),
    "arguments": words("arguments args input inputs call calls kwargs parameters_values values"),
    "path": words("path file filename file_path dir directory cwd working_directory root"),
    "unknown_keyword": words("pattern x-vendor nullable discriminator $id $schema if not const_"),
}
KEYWORD_CASES = [
    pytest.param(keyword, code, id=f"{code}-{keyword}")
    for code, keywords in KEYWORD_CATEGORIES.items()
    for keyword in keywords
]


def _variants(keyword: str) -> list[str]:
    """The keyword as listed, upper-cased, and with ``_`` spelled ``-``."""
    return sorted({keyword, keyword.upper(), keyword.replace("_", "-"), keyword.title()})


@pytest.mark.parametrize(("keyword", "code"), KEYWORD_CASES)
def test_keyword_rule(keyword: str, code: str) -> None:
    for spelling in _variants(keyword):
        at_tool = refuse([{**tool({}), spelling: "v"}])
        assert (at_tool.code, str(at_tool)) == (code, f"tools[0]: {code}")
        at_root = refuse(one({spelling: "v"}))
        assert (at_root.code, str(at_root)) == (code, f"{P}: {code}")
        nested = refuse(prop({"type": "array", "items": {"type": "string", spelling: "v"}}))
        assert (nested.code, str(nested)) == (code, f"{Q}.items: {code}")


def test_keyword_refusal_does_not_depend_on_key_order() -> None:
    keys = ["description", "default", "args", "cwd", "href", "secret", "x-other"]
    for seed in range(20):
        shuffled = keys[:]
        random.Random(seed).shuffle(shuffled)
        error = refuse(one(dict.fromkeys(shuffled, "v")))
        assert str(error) == f"{P}: credential"


@pytest.mark.parametrize(
    "name", ["path", "url", "token", "description", "default", "file", "input"]
)
def test_property_named_like_a_refused_keyword_is_fine(name: str) -> None:
    inventory = build_tool_inventory(
        one({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]})
    )
    assert list(inventory.to_dict()["tools"][0]["parameters"]["properties"]) == [name]


def test_accepted_enum_values() -> None:
    tokens = words("mg mL mcg IU mmol_per_L kg.m-2 q8h 1.5 _x")
    values = [*tokens, None, True, False, 0, -1, 2.5]
    inventory = build_tool_inventory(prop({"enum": values}))
    assert inventory.to_dict()["tools"][0]["parameters"]["properties"]["dose"]["enum"] == values


# ---------------------------------------------------------------------------
# PHI canaries

CANARY = "PHI-CANARY-7f3a pt John Doe MRN 123"
CANARY_URL = "https://phi-canary.example/patients/john-doe"
CANARY_PATH = "/home/jdoe/phi-canary/notes.txt"
CANARY_KEY = "sk-phicanary-0123456789abcdefABCDEF"
CANARY_MARKERS = ("PHI-CANARY", "phi-canary", "7f3a", "John", "john", "MRN", "jdoe", "sk-phi")

CANARY_DOCUMENTS = [
    pytest.param([tool({}, CANARY)], id="tool-name"),
    pytest.param({"tools": one({}), CANARY: 1}, id="top-level-key"),
    pytest.param({CANARY: one({})}, id="top-level-only-key"),
    pytest.param([{**tool({}), CANARY: "x"}], id="tool-key"),
    pytest.param([{**tool({}), "description": CANARY}], id="tool-description"),
    pytest.param([{**tool({}), "url": CANARY_URL}], id="tool-url"),
    pytest.param([{**tool({}), "api_key": CANARY_KEY}], id="tool-api-key"),
    pytest.param([{**tool({}), "cwd": CANARY_PATH}], id="tool-cwd"),
    pytest.param([{**tool({}), "arguments": {"patient": CANARY}}], id="tool-arguments"),
    pytest.param(prop({}, CANARY), id="property-name"),
    pytest.param(prop({"description": CANARY}), id="property-description"),
    pytest.param(prop({"default": CANARY}), id="property-default"),
    pytest.param(prop({"examples": [CANARY]}), id="property-examples"),
    pytest.param(prop({CANARY: CANARY}), id="schema-key"),
    pytest.param(prop({"enum": ["mg", CANARY]}), id="enum-free-text"),
    pytest.param(prop({"enum": [CANARY_URL]}), id="enum-url"),
    pytest.param(prop({"enum": [CANARY_PATH]}), id="enum-path"),
    pytest.param(prop({"enum": [CANARY_KEY]}), id="enum-key"),
    pytest.param(prop({"type": CANARY}), id="type-value"),
    pytest.param(prop({"format": CANARY}), id="format-value"),
    pytest.param(prop({"$ref": CANARY_URL}), id="ref-url"),
    pytest.param(prop({"$ref": "#/$defs/" + CANARY}), id="ref-name"),
    pytest.param(one({"$defs": {CANARY: {}}}), id="defs-name"),
    pytest.param(one({"properties": {"a": {}}, "required": [CANARY]}), id="required-name"),
    pytest.param(
        one({"properties": {"a": {}}, "required": ["a", "johndoe_mrn"]}), id="required-undeclared"
    ),
    pytest.param(one({"minimum": CANARY}), id="bound-value"),
    pytest.param([tool({}, "a"), tool({"title": CANARY}, "a")], id="duplicate-then-title"),
]


@pytest.mark.parametrize("document", CANARY_DOCUMENTS)
def test_canary_never_leaks(document: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    error = refuse(document)
    logging.getLogger("sealeval").exception("refused")
    surfaces = [
        str(error),
        repr(error),
        repr(error.args),
        *map(str, error.args),
        str(error.field),
        "".join(traceback.format_exception_only(type(error), error)),
        caplog.text,
    ]
    for surface in surfaces:
        for marker in CANARY_MARKERS:
            assert marker not in surface
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


# ---------------------------------------------------------------------------
# Acceptance

REALISTIC: dict[str, Any] = {
    "tools": [
        {
            "name": "dose_calculator",
            "parameters": {
                "type": "object",
                "properties": {
                    "drug": {"type": "string", "minLength": 1, "maxLength": 64},
                    "weight_kg": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
                    "dose": {"$ref": "#/$defs/quantity"},
                    "route": {"enum": ["oral", "iv", "im", "sc"]},
                },
                "required": ["weight_kg", "drug", "dose"],
                "additionalProperties": False,
                "$defs": {
                    "quantity": {
                        "type": "object",
                        "properties": {
                            "value": {"type": "number", "minimum": 0, "multipleOf": 0.01},
                            "unit": {"enum": ["mg", "mL", "mcg", "g", "IU"]},
                        },
                        "required": ["value", "unit"],
                        "additionalProperties": False,
                    }
                },
            },
        },
        {
            "name": "lab_lookup",
            "parameters": {
                "type": "object",
                "properties": {
                    "loinc_code": {"type": "string", "minLength": 3, "maxLength": 10},
                    "since": {"type": "string", "format": "date"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "panels": {
                        "type": "array",
                        "items": {"enum": ["cbc", "bmp", "cmp", "lipid"]},
                        "uniqueItems": True,
                        "minItems": 1,
                        "maxItems": 4,
                    },
                    "path": {"type": "string", "maxLength": 32},
                },
                "required": ["loinc_code"],
            },
        },
        {
            "name": "schedule_followup",
            "parameters": {
                "type": "object",
                "properties": {
                    "when": {"type": "string", "format": "date-time"},
                    "clinic_id": {"type": "integer", "minimum": 0},
                    "reason_code": {
                        "anyOf": [{"type": "string", "maxLength": 16}, {"type": "null"}]
                    },
                    "contact": {
                        "type": "object",
                        "properties": {
                            "channel": {"enum": ["sms", "email", "phone", None]},
                            "consent": {"type": "boolean"},
                        },
                        "additionalProperties": False,
                        "minProperties": 1,
                        "maxProperties": 2,
                    },
                },
                "required": ["when", "clinic_id"],
                "additionalProperties": {"type": "string", "maxLength": 8},
            },
        },
        {
            "name": "unit.convert",
            "parameters": {
                "type": "object",
                "properties": {
                    "value": {"type": ["number", "null"]},
                    "from_unit": {"$ref": "#/$defs/unit"},
                    "to_unit": {"$ref": "#/$defs/unit"},
                    "precision": {
                        "oneOf": [{"type": "integer", "minimum": 0, "maximum": 6}, {"enum": [-1]}]
                    },
                    "tags": {"allOf": [{"type": "array"}, {"items": {"type": "string"}}]},
                },
                "required": ["value", "from_unit", "to_unit"],
                "$defs": {"unit": {"enum": ["mg", "g", "mL", "L", "mmol_per_L", "mg_per_dL"]}},
            },
        },
    ]
}


@functools.cache
def contract() -> dict[str, Any]:
    document = json.loads(CONTRACT_PATH.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


@functools.cache
def _validator() -> Any:
    return jsonschema.Draft202012Validator(contract())


def assert_contract(document: Any) -> None:
    _validator().validate(document)


def test_realistic_inventory_builds() -> None:
    inventory = build_tool_inventory(REALISTIC)
    names = [entry.name for entry in inventory.tools]
    assert names == ["dose_calculator", "lab_lookup", "schedule_followup", "unit.convert"]
    document = inventory.to_dict()
    assert document["schema_version"] == TOOL_INVENTORY_SCHEMA
    assert set(document) == {"schema_version", "tools"}
    dose = document["tools"][0]["parameters"]
    assert dose["required"] == ["dose", "drug", "weight_kg"]  # sorted
    assert list(dose) == sorted(dose)
    assert document["tools"][3]["parameters"]["properties"]["value"]["type"] == ["number", "null"]
    assert inventory.to_json() == encode_openmed(document)
    assert inventory.digest == digest_openmed(document)
    assert (
        inventory.digest
        == "sha256:" + hashlib.sha256(inventory.to_json().encode("ascii")).hexdigest()
    )
    assert tool_inventory_digest(REALISTIC) == inventory.digest
    assert tool_inventory_digest(REALISTIC["tools"]) == inventory.digest
    assert_contract(document)


def test_round_trip() -> None:
    inventory = build_tool_inventory(REALISTIC)
    again = ToolInventory.from_dict(inventory.to_dict())
    assert again == inventory
    assert hash(again) == hash(inventory)
    assert again.digest == inventory.digest
    assert ToolInventory.from_json(inventory.to_json()) == inventory
    assert ToolInventory.from_json(inventory.to_json().encode("ascii")) == inventory


def test_golden_canonical_text() -> None:
    inventory = build_tool_inventory(
        [
            {
                "parameters": {
                    "type": "object",
                    "required": ["unit"],
                    "properties": {"unit": {"enum": ["mg", "mL"]}},
                },
                "name": "dose",
            },
            {"name": "age", "parameters": {}},
        ]
    )
    assert inventory.to_json() == (
        '{"schema_version":"sealeval.tool_inventory.v1","tools":['
        '{"name":"age","parameters":{}},'
        '{"name":"dose","parameters":{"properties":{"unit":{"enum":["mg","mL"]}},'
        '"required":["unit"],"type":"object"}}]}'
    )


def _shuffled(value: Any, rng: random.Random, *, key: str | None = None) -> Any:
    """Reorder every mapping, the tool list and ``required``; keep ordered arrays."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {name: _shuffled(member, rng, key=name) for name, member in items}
    if isinstance(value, list):
        members = [_shuffled(member, rng) for member in value]
        if key in ("tools", "required"):
            rng.shuffle(members)
        return members
    return value


@settings(max_examples=60, deadline=None)
@given(rng=st.randoms(use_true_random=False), as_tuples=st.booleans())
def test_order_does_not_change_a_byte(rng: random.Random, as_tuples: bool) -> None:
    baseline = build_tool_inventory(REALISTIC)
    shuffled = _shuffled(REALISTIC, rng)
    document: Any = shuffled if rng.random() < 0.5 else shuffled["tools"]
    if as_tuples and isinstance(document, list):
        document = tuple(document)
    inventory = build_tool_inventory(document)
    assert inventory.to_json() == baseline.to_json()
    assert inventory.digest == baseline.digest
    assert inventory == baseline
    assert inventory.to_dict() == baseline.to_dict()


Mutation = Callable[[dict[str, Any]], None]


def _tools(document: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry["parameters"] for entry in document["tools"]}


MUTATIONS: dict[str, Mutation] = {
    "tool-name": lambda d: d["tools"][1].__setitem__("name", "lab_lookup2"),
    "drop-tool": lambda d: d["tools"].pop(),
    "add-tool": lambda d: d["tools"].append({"name": "zzz", "parameters": {}}),
    "property-name": lambda d: (
        _tools(d)["lab_lookup"]["properties"].__setitem__(
            "loinc", _tools(d)["lab_lookup"]["properties"].pop("loinc_code")
        )
        or _tools(d)["lab_lookup"].__setitem__("required", ["loinc"])
    ),
    "type": lambda d: _tools(d)["lab_lookup"]["properties"]["limit"].__setitem__("type", "number"),
    "type-list-order": lambda d: _tools(d)["unit.convert"]["properties"]["value"].__setitem__(
        "type", ["null", "number"]
    ),
    "required": lambda d: _tools(d)["lab_lookup"].__setitem__("required", ["loinc_code", "since"]),
    "required-removed": lambda d: _tools(d)["lab_lookup"].pop("required"),
    "minimum": lambda d: _tools(d)["lab_lookup"]["properties"]["limit"].__setitem__("minimum", 2),
    "maximum-float": lambda d: _tools(d)["lab_lookup"]["properties"]["limit"].__setitem__(
        "maximum", 100.0
    ),
    "exclusive-minimum": lambda d: _tools(d)["dose_calculator"]["properties"][
        "weight_kg"
    ].__setitem__("exclusiveMinimum", 1),
    "multiple-of": lambda d: _tools(d)["dose_calculator"]["$defs"]["quantity"]["properties"][
        "value"
    ].__setitem__("multipleOf", 0.1),
    "min-length": lambda d: _tools(d)["lab_lookup"]["properties"]["loinc_code"].__setitem__(
        "minLength", 4
    ),
    "max-items": lambda d: _tools(d)["lab_lookup"]["properties"]["panels"].__setitem__(
        "maxItems", 5
    ),
    "max-properties": lambda d: _tools(d)["schedule_followup"]["properties"]["contact"].__setitem__(
        "maxProperties", 3
    ),
    "unique-items": lambda d: _tools(d)["lab_lookup"]["properties"]["panels"].__setitem__(
        "uniqueItems", False
    ),
    "format": lambda d: _tools(d)["lab_lookup"]["properties"]["since"].__setitem__(
        "format", "date-time"
    ),
    "enum-member": lambda d: _tools(d)["dose_calculator"]["properties"]["route"]["enum"].append(
        "pr"
    ),
    "enum-order": lambda d: _tools(d)["dose_calculator"]["properties"]["route"]["enum"].reverse(),
    "enum-null": lambda d: _tools(d)["schedule_followup"]["properties"]["contact"]["properties"][
        "channel"
    ]["enum"].remove(None),
    "additional-properties-bool": lambda d: _tools(d)["dose_calculator"].__setitem__(
        "additionalProperties", True
    ),
    "additional-properties-schema": lambda d: _tools(d)["schedule_followup"][
        "additionalProperties"
    ].__setitem__("maxLength", 9),
    "items": lambda d: _tools(d)["unit.convert"]["properties"]["tags"]["allOf"][1][
        "items"
    ].__setitem__("type", "integer"),
    "any-of-to-one-of": lambda d: _tools(d)["schedule_followup"]["properties"][
        "reason_code"
    ].__setitem__(
        "oneOf", _tools(d)["schedule_followup"]["properties"]["reason_code"].pop("anyOf")
    ),
    "defs-member": lambda d: _tools(d)["unit.convert"]["$defs"]["unit"]["enum"].append("kg"),
    "ref-target": lambda d: (
        _tools(d)["unit.convert"]["$defs"].__setitem__("unit2", {"enum": ["mg"]})
        or _tools(d)["unit.convert"]["properties"]["to_unit"].__setitem__("$ref", "#/$defs/unit2")
    ),
}


def test_every_field_changes_the_digest() -> None:
    base = build_tool_inventory(REALISTIC)
    digests = {"base": base.digest}
    for label, mutate in MUTATIONS.items():
        document = copy.deepcopy(REALISTIC)
        mutate(document)
        mutated = build_tool_inventory(document)
        assert mutated != base, label
        digests[label] = mutated.digest
    assert len(set(digests.values())) == len(digests)


def test_integer_and_float_bounds_differ() -> None:
    as_int = build_tool_inventory(one({"minimum": 1}))
    as_float = build_tool_inventory(one({"minimum": 1.0}))
    assert as_int.digest != as_float.digest
    assert as_int != as_float
    assert (
        build_tool_inventory(one({"enum": [True]})).digest
        != build_tool_inventory(one({"enum": [1]})).digest
    )


def test_boundaries_are_accepted() -> None:
    assert (
        len(build_tool_inventory([tool({}, f"t{index:04d}") for index in range(MAX_TOOLS)]).tools)
        == MAX_TOOLS
    )
    assert build_tool_inventory([tool({}, "a" * 128)]).tools[0].name == "a" * 128
    build_tool_inventory(one(nested_items(MAX_SCHEMA_DEPTH)))
    build_tool_inventory(one({"enum": ["unit_" * 12 + "mg_x", 2**63 - 1, -(2**63 - 1), 1e300]}))
    build_tool_inventory(one({"type": sorted(TYPES)}))
    for name in sorted(FORMATS):
        build_tool_inventory(one({"type": "string", "format": name}))


def test_self_referential_input_is_too_deep() -> None:
    schema: dict[str, Any] = {"type": "array"}
    schema["items"] = schema
    assert refuse(one(schema)).code == "too_deep"


def test_values_are_read_only_copies() -> None:
    source = copy.deepcopy(REALISTIC)
    inventory = build_tool_inventory(source)
    source["tools"][0]["parameters"]["properties"]["route"]["enum"].append("pr")
    assert inventory == build_tool_inventory(REALISTIC)
    entry = inventory.tools[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        inventory.tools = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry.parameters["type"] = "array"  # type: ignore[index]
    assert isinstance(entry.parameters["properties"]["route"]["enum"], tuple)
    assert isinstance(entry.parameters["required"], tuple)
    fresh = inventory.to_dict()
    fresh["tools"][0]["parameters"]["properties"].clear()
    fresh["tools"].clear()
    assert inventory.to_dict() == build_tool_inventory(REALISTIC).to_dict()


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ToolInventoryError) as caught:
        ToolEntry(name="a", parameters={"description": "x"})
    assert str(caught.value) == "tool.parameters: free_text"
    with pytest.raises(ToolInventoryError) as caught:
        ToolEntry(name="a b", parameters={})
    assert str(caught.value) == "tool.name: invalid_name"
    a = ToolEntry(name="a", parameters={"required": [], "properties": {}})
    b = ToolEntry(name="b", parameters={})
    assert ToolInventory(tools=(a, b)).tools == (a, b)
    for tools, message in [
        ((b, a), "tools: invalid_document"),
        ((a, a), "tools[1].name: duplicate_tool"),
        ((), "tools: empty_inventory"),
        ([a, b], "tools: invalid_document"),
        ((a, "b"), "tools: invalid_document"),
    ]:
        with pytest.raises(ToolInventoryError) as caught:
            ToolInventory(tools=tools)  # type: ignore[arg-type]
        assert str(caught.value) == message


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda d: d.__setitem__("schema_version", "sealeval.tool_inventory.v2"),
            "schema_version: invalid_document",
            id="version",
        ),
        pytest.param(
            lambda d: d.pop("schema_version"), "inventory: invalid_document", id="missing-version"
        ),
        pytest.param(
            lambda d: d.__setitem__("extra", 1), "inventory: invalid_document", id="extra-key"
        ),
        pytest.param(
            lambda d: d.__setitem__("tools", {}), "tools: invalid_document", id="tools-not-list"
        ),
        pytest.param(
            lambda d: d["tools"].reverse(), "tools: invalid_document", id="unsorted-tools"
        ),
        pytest.param(
            lambda d: d["tools"][0]["parameters"]["required"].reverse(),
            "inventory: invalid_document",
            id="unsorted-required",
        ),
        pytest.param(
            lambda d: d["tools"][0]["parameters"].__setitem__("title", "x"),
            "tools[0].parameters: free_text",
            id="tool-rules-apply",
        ),
        pytest.param(
            lambda d: d["tools"].append(copy.deepcopy(d["tools"][-1])),
            "tools[4].name: duplicate_tool",
            id="duplicate",
        ),
    ],
)
def test_from_dict_is_strict(mutate: Mutation, message: str) -> None:
    document = build_tool_inventory(REALISTIC).to_dict()
    mutate(document)
    with pytest.raises(ToolInventoryError) as caught:
        ToolInventory.from_dict(document)
    assert str(caught.value) == message


@pytest.mark.parametrize("document", [None, [], "x", b"{}"])
def test_from_dict_refuses_non_documents(document: Any) -> None:
    with pytest.raises(ToolInventoryError) as caught:
        ToolInventory.from_dict(document)
    assert str(caught.value) == "inventory: invalid_document"


@pytest.mark.parametrize("data", ["{", b"\xff", '{"a":1,"a":2}', "[NaN]"])
def test_from_json_refuses_bad_json(data: str | bytes) -> None:
    with pytest.raises(ToolInventoryError) as caught:
        ToolInventory.from_json(data)
    assert str(caught.value) == "inventory: invalid_document"


# ---------------------------------------------------------------------------
# Contract and documentation


def test_contract_is_a_closed_draft_2020_12_schema() -> None:
    document = contract()
    jsonschema.Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert (
        document["$id"] == "https://sealeval.dev/contracts/sealeval.tool_inventory.v1.schema.json"
    )
    assert document["title"]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object":
                closed = node.get("additionalProperties") is False
                name_map = "propertyNames" in node and "properties" not in node
                assert closed or name_map, node
            for member in node.values():
                walk(member)
        elif isinstance(node, list):
            for member in node:
                walk(member)

    walk(document)

    def declared(name: str) -> set[str]:
        node = document["$defs"][name]
        patterns = {pattern.strip("^$") for pattern in node.get("patternProperties", {})}
        return set(node["properties"]) | patterns

    assert declared("root_schema") == SCHEMA_KEYWORDS
    assert declared("schema") == SCHEMA_KEYWORDS - {"$defs"}


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d.__setitem__("extra", 1), id="top-level-extra"),
        pytest.param(lambda d: d["tools"][0].__setitem__("description", "x"), id="tool-extra"),
        pytest.param(
            lambda d: d["tools"][0]["parameters"].__setitem__("default", 1), id="schema-extra"
        ),
        pytest.param(
            lambda d: d["tools"][0]["parameters"]["properties"]["drug"].__setitem__("title", "x"),
            id="nested-extra",
        ),
        pytest.param(
            lambda d: d["tools"][0]["parameters"]["properties"]["drug"].__setitem__("$defs", {}),
            id="nested-defs",
        ),
        pytest.param(
            lambda d: d["tools"][0]["parameters"]["properties"]["route"]["enum"].append("John Doe"),
            id="enum-text",
        ),
        pytest.param(lambda d: d["tools"][0].__setitem__("name", "a b"), id="name"),
        pytest.param(lambda d: d.__setitem__("schema_version", "x"), id="version"),
    ],
)
def test_contract_refuses_what_the_builder_refuses(mutate: Mutation) -> None:
    document = build_tool_inventory(REALISTIC).to_dict()
    mutate(document)
    with pytest.raises(jsonschema.ValidationError):
        assert_contract(document)


def test_docs_mention_every_code_and_keyword() -> None:
    text = DOCS_PATH.read_text(encoding="utf-8")
    for code in ToolInventoryError.codes:
        assert f"`{code}`" in text, code
    for keywords in KEYWORD_CATEGORIES.values():
        for keyword in keywords:
            if keyword not in KEYWORD_CATEGORIES["unknown_keyword"]:
                assert f"`{keyword}`" in text, keyword
    assert TOOL_INVENTORY_SCHEMA in text


# ---------------------------------------------------------------------------
# Fuzzing: only ToolInventoryError may ever escape

_KEYS = st.sampled_from(
    [*sorted(SCHEMA_KEYWORDS), "name", "parameters", "tools", "description", "url", "Type"]
) | st.text(max_size=8)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(sorted(TYPES) + sorted(FORMATS) + ["#/$defs/a", "a", "mg", "sk-x", "/x"])
)
JSON_LIKE = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children)
        | st.dictionaries(_KEYS, children, max_size=5)
    ),
    max_leaves=30,
)


def _check_refusal(error: ToolInventoryError) -> None:
    assert error.code in ToolInventoryError.codes
    assert error.__cause__ is None


def _check_fuzz(document: Any) -> None:
    try:
        inventory = build_tool_inventory(document)
    except ToolInventoryError as error:
        _check_refusal(error)
        return
    assert ToolInventory.from_json(inventory.to_json()) == inventory
    assert_contract(inventory.to_dict())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=JSON_LIKE)
def test_fuzz_arbitrary_documents(document: Any) -> None:
    _check_fuzz(document)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(max_size=6) | st.just("t"), parameters=JSON_LIKE)
def test_fuzz_parameters(name: str, parameters: Any) -> None:
    _check_fuzz([{"name": name, "parameters": parameters}])
    _check_fuzz(
        {
            "tools": [
                {"name": "t", "parameters": {"$defs": {"a": {}}, "properties": {"a": parameters}}}
            ]
        }
    )


_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,6}", fullmatch=True)
_TYPE_NAMES = st.sampled_from(sorted(TYPES))
_ENUM_MEMBERS = (
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
)
_LEAF_SCHEMAS = st.fixed_dictionaries(
    {},
    optional={
        "type": _TYPE_NAMES | st.lists(_TYPE_NAMES, min_size=1, max_size=3, unique=True),
        "minimum": st.integers(-100, 100) | st.floats(-1e6, 1e6),
        "maxLength": st.integers(0, 1000),
        "multipleOf": st.sampled_from([0.01, 1, 5]),
        "format": st.sampled_from(sorted(FORMATS)),
        "enum": st.lists(_ENUM_MEMBERS, min_size=1, max_size=4),
        "uniqueItems": st.booleans(),
    },
)


def _object_schema(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    def with_required(properties: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        required = (
            st.lists(st.sampled_from(sorted(properties)), unique=True)
            if properties
            else st.just([])
        )
        return st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.just(properties)},
            optional={"required": required, "additionalProperties": st.booleans() | children},
        )

    return st.dictionaries(_NAMES, children, max_size=3).flatmap(with_required)


_SCHEMAS = st.recursive(
    _LEAF_SCHEMAS,
    lambda children: (
        _object_schema(children)
        | st.fixed_dictionaries({"type": st.just("array"), "items": children})
        | st.fixed_dictionaries({"anyOf": st.lists(children, min_size=1, max_size=3)})
    ),
    max_leaves=12,
)
_INVENTORIES = st.lists(
    st.fixed_dictionaries({"name": _NAMES, "parameters": _SCHEMAS}), min_size=1, max_size=4
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=_INVENTORIES, rng=st.randoms(use_true_random=False))
def test_fuzz_well_formed_inventories(document: list[dict[str, Any]], rng: random.Random) -> None:
    _check_fuzz(document)
    try:
        inventory = build_tool_inventory(document)
    except ToolInventoryError as error:
        _check_refusal(error)
        return
    assert build_tool_inventory(_shuffled({"tools": document}, rng)) == inventory
