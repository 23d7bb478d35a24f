"""Sealed workflow manifests: golden vectors, refusals and field coverage."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval.errors import ManifestError
from sealeval.manifest import (
    COMPONENTS,
    REASON_CODES,
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)
from support.vectors import cases, decode_input


def _name_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


GOOD = {name: _name_digest(name) for name in COMPONENTS}


@pytest.mark.parametrize("case", cases("openmed/manifest_seal.json"))
def test_manifest_seal_vector(case: dict[str, Any]) -> None:
    data = decode_input(case["input"])
    expected = case["expected"]
    op = data.get("op")
    if op == "seal" and set(data) == {"op", "component_digests"}:
        action = lambda: seal_workflow_manifest(data["component_digests"])  # noqa: E731
    elif op == "construct" and set(data) == {
        "op",
        "component_digests",
        "manifest_digest",
        "schema_version",
    }:
        action = lambda: SealedWorkflowManifest(  # noqa: E731
            component_digests=data["component_digests"],
            manifest_digest=data["manifest_digest"],
            schema_version=data["schema_version"],
        )
    else:
        pytest.fail("vector case shape not understood")
    if set(expected) == {"error_code"}:
        with pytest.raises(ManifestError) as caught:
            action()
        assert str(caught.value) == expected["error_code"]
        return
    assert set(expected) == {"canonical", "parsed"}, "vector case shape not understood"
    manifest = action()
    assert manifest.to_json() == expected["canonical"]
    assert manifest.to_dict() == expected["parsed"]
    # Round trip through the strict parser re-checks the seal.
    assert SealedWorkflowManifest.from_json(expected["canonical"]) == manifest


@pytest.mark.parametrize("case", cases("openmed/manifest_verify.json"))
def test_manifest_verify_vector(case: dict[str, Any]) -> None:
    data = decode_input(case["input"])
    if (
        not {"manifest", "snapshot"}
        <= set(data)
        <= {"manifest", "snapshot", "manifest_is_instance"}
    ):
        pytest.fail("vector case shape not understood")
    manifest = data["manifest"]
    if data.get("manifest_is_instance"):
        manifest = SealedWorkflowManifest.from_dict(manifest)
    expected = case["expected"]
    assert set(expected) == {"canonical", "parsed"}, "vector case shape not understood"
    result = verify_at_evaluation_start(manifest, data["snapshot"])
    assert result.to_json() == expected["canonical"]
    assert result.to_dict() == expected["parsed"]
    assert set(result.reason_codes) <= set(REASON_CODES)


def test_golden_name_digest_is_known_value() -> None:
    manifest = seal_workflow_manifest(GOOD)
    assert manifest.manifest_digest == (
        "sha256:397d70d8eb1775c8b53779586e34412b67f5772f712d442cf8bfdb4362edb9ab"
    )


def test_manifest_is_immutable() -> None:
    manifest = seal_workflow_manifest(GOOD)
    with pytest.raises(TypeError):
        manifest.component_digests["model"] = GOOD["prompt"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.manifest_digest = GOOD["prompt"]  # type: ignore[misc]
    source = dict(GOOD)
    sealed = seal_workflow_manifest(source)
    source["model"] = GOOD["prompt"]
    assert sealed.component_digests["model"] == GOOD["model"]


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_component_is_under_the_seal(component: str) -> None:
    base = seal_workflow_manifest(GOOD)
    changed = seal_workflow_manifest({**GOOD, component: _name_digest("changed")})
    assert changed.manifest_digest != base.manifest_digest
    result = verify_at_evaluation_start(base, changed.component_digests)
    assert result.reason_codes == ("component_digest_mismatch",)
    assert result.affected_components == (component,)
    assert not result.eligible_for_sealed_results


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param([], "manifest: invalid_document", id="not-mapping"),
        pytest.param({"extra": 1}, "manifest: unknown_field", id="unknown-field"),
        pytest.param(
            {"component_digests": {}}, "manifest_digest: missing_field", id="missing-field"
        ),
    ],
)
def test_from_dict_refusals(document: object, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        SealedWorkflowManifest.from_dict(document)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"{", id="invalid-json"),
        pytest.param(b'{"a":1,"a":2}', id="duplicate-key"),
        pytest.param(b'{"x":NaN}', id="nan"),
    ],
)
def test_from_json_refuses_malformed_documents(raw: bytes) -> None:
    with pytest.raises(ManifestError) as caught:
        SealedWorkflowManifest.from_json(raw)
    assert caught.value.code == "invalid_document"
    assert caught.value.__cause__ is None


def test_verification_never_raises_on_hostile_mappings() -> None:
    class Hostile(dict[str, Any]):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

    result = verify_at_evaluation_start(Hostile(GOOD), GOOD)
    assert not result.eligible_for_sealed_results
    assert "invalid_manifest" in result.reason_codes


_digests = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(
    lambda h: "sha256:" + h
)


@settings(max_examples=100, deadline=None)
@given(
    st.fixed_dictionaries(dict.fromkeys(COMPONENTS, _digests)),
    st.randoms(use_true_random=False),
)
def test_seal_is_order_independent_and_round_trips(components: dict[str, str], rng: Any) -> None:
    items = list(components.items())
    rng.shuffle(items)
    first = seal_workflow_manifest(components)
    second = seal_workflow_manifest(dict(items))
    assert first.to_json() == second.to_json()
    assert SealedWorkflowManifest.from_json(first.to_json().encode()) == first
    assert verify_at_evaluation_start(
        json.loads(first.to_json()), components
    ).eligible_for_sealed_results
