"""contracts/: schemas are valid, closed, synced into the package, and match real documents."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from _vectors import PROJECT_ROOT, load

CONTRACTS = PROJECT_ROOT / "contracts"
SCHEMA_FILES = sorted(CONTRACTS.glob("*.schema.json"))


def schema(name: str) -> dict[str, Any]:
    document = json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def test_package_copies_match_contracts() -> None:
    packaged = resources.files("sealeval") / "_data" / "contracts"
    packaged_names = sorted(
        item.name for item in packaged.iterdir() if item.name.endswith(".schema.json")
    )
    assert packaged_names == [path.name for path in SCHEMA_FILES], "run `make contracts`"
    for path in SCHEMA_FILES:
        assert (packaged / path.name).read_bytes() == path.read_bytes(), "run `make contracts`"


def _open_objects(node: Any, where: str = "#") -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            closed = (
                node.get("additionalProperties") is False
                or node.get("unevaluatedProperties") is False
            )
            # A map whose values follow one schema is closed by that schema.
            is_map = isinstance(node.get("additionalProperties"), dict) and "properties" not in node
            if not closed and not is_map:
                found.append(where)
        for key, value in node.items():
            found.extend(_open_objects(value, f"{where}/{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_open_objects(value, f"{where}/{index}"))
    return found


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
    assert checked > 20


def test_verification_vectors_match_the_verification_schema() -> None:
    validator = Draft202012Validator(
        schema("openmed.eval.workflow_sealed_manifest_verification.v1")
    )
    for case in load("openmed/manifest_verify.json")["cases"]:
        validator.validate(case["expected"]["parsed"])
