"""contracts/: schemas are valid, closed, synced into the package, and match real documents."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sealeval.manifest.components import load_config_document
from sealeval.manifest.tool_inventory import build_tool_inventory
from support.contracts import (
    CONTRACTS,
    schema,
)
from support.vectors import load

SCHEMA_FILES = sorted(CONTRACTS.glob("*.schema.json"))


def test_package_copies_match_contracts() -> None:
    packaged = resources.files("sealeval") / "_data" / "contracts"
    packaged_names = sorted(
        item.name for item in packaged.iterdir() if item.name.endswith(".schema.json")
    )
    assert packaged_names == [path.name for path in SCHEMA_FILES], "run `make contracts`"
    for path in SCHEMA_FILES:
        assert (packaged / path.name).read_bytes() == path.read_bytes(), "run `make contracts`"


# Keywords whose value is a schema, a list of schemas, or a map of name -> schema.
_SCHEMA_VALUED = ("items", "not", "if", "then", "else", "contains", "propertyNames")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")


def _open_objects(node: Any, where: str = "#") -> list[str]:
    """Return the locations of object schemas that accept unknown properties."""
    if not isinstance(node, dict):
        return []
    found: list[str] = []
    additional = node.get("additionalProperties")
    if node.get("type") == "object" or "properties" in node:
        closed = additional is False or node.get("unevaluatedProperties") is False
        # A map whose values all follow one schema is closed by that schema.
        is_map = isinstance(additional, dict) and "properties" not in node
        if not closed and not is_map:
            found.append(where)
    if isinstance(additional, dict):
        found += _open_objects(additional, f"{where}/additionalProperties")
    for key in _SCHEMA_VALUED:
        found += _open_objects(node.get(key), f"{where}/{key}")
    for key in _SCHEMA_LISTS:
        for index, child in enumerate(node.get(key, ())):
            found += _open_objects(child, f"{where}/{key}/{index}")
    for key in _SCHEMA_MAPS:
        for name, child in node.get(key, {}).items():
            found += _open_objects(child, f"{where}/{key}/{name}")
    return found


def test_open_object_check_finds_open_objects() -> None:
    assert _open_objects({"type": "object", "properties": {"a": {"type": "object"}}}) == [
        "#",
        "#/properties/a",
    ]
    closed = {"type": "object", "additionalProperties": False, "properties": {"properties": {}}}
    assert _open_objects(closed) == []


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_schema_is_valid_and_closed(path: Path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"].endswith("/" + path.name)
    assert _open_objects(document) == []


def test_manifest_vectors_match_the_manifest_schema() -> None:
    validator = Draft202012Validator(schema("openmed.eval.workflow_sealed_manifest.v1"))
    checked = 0
    for case in load("openmed/manifest_seal.json")["cases"]:
        if "parsed" in case["expected"]:
            validator.validate(case["expected"]["parsed"])
            checked += 1
    # Every accepted case is checked; the count comes from the file, never a literal.
    assert checked == sum(
        "parsed" in c["expected"] for c in load("openmed/manifest_seal.json")["cases"]
    )
    assert checked > 0


def test_verification_vectors_match_the_verification_schema() -> None:
    validator = Draft202012Validator(
        schema("openmed.eval.workflow_sealed_manifest_verification.v1")
    )
    checked = 0
    for case in load("openmed/manifest_verify.json")["cases"]:
        validator.validate(case["expected"]["parsed"])
        checked += 1
    assert checked > 0, "an empty vector file checks nothing"


def test_tool_inventory_output_matches_its_schema() -> None:
    source = resources.files("sealeval") / "_data" / "demo" / "artifacts" / "tool_inventory.yaml"
    with resources.as_file(source) as path:
        inventory = build_tool_inventory(load_config_document(path))
    Draft202012Validator(schema("sealeval.tool_inventory.v1")).validate(inventory.to_dict())
    nested = build_tool_inventory(
        [
            {
                "name": "t",
                "parameters": {
                    "$defs": {
                        "dose": {"type": "object", "properties": {"properties": {"type": "string"}}}
                    },
                    "type": "object",
                    "properties": {
                        "d": {"$ref": "#/$defs/dose"},
                        "n": {"anyOf": [{"type": "null"}]},
                    },
                },
            }
        ]
    )
    Draft202012Validator(schema("sealeval.tool_inventory.v1")).validate(nested.to_dict())


def test_gate_vectors_match_the_evidence_and_report_schemas() -> None:
    evidence = Draft202012Validator(schema("openmed.eval.agent_release_evidence.v1"))
    report = Draft202012Validator(schema("openmed.eval.agent_release_report.v1"))
    reports = items = 0
    for case in load("openmed/gates_reports.json")["cases"]:
        report.validate(case["expected"]["parsed"])
        reports += 1
        for item in case["input"]["evidence"]:
            evidence.validate(item)
            items += 1
    assert reports > 0, "an empty vector file checks nothing"
    assert items > 0
