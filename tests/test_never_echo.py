"""Canary strings fed through every public parser never reach errors, reprs or logs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sealeval.canonical import decode, encode_invarlock, encode_openmed
from sealeval.errors import SealevalError, error_classes
from sealeval.manifest import (
    COMPONENTS,
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)
from sealeval.manifest.components import digest_config_document, digest_file, digest_tree
from sealeval.manifest.snapshot import snapshot_components
from sealeval.manifest.tool_inventory import build_tool_inventory
from sealeval.strict_yaml import load_strict_yaml

CANARY = "PHI-CANARY-7f3a-jane-doe-MRN-0042"
GOOD = {name: "sha256:" + format(index, "x") * 64 for index, name in enumerate(COMPONENTS, 1)}


def _cases(tmp: Path) -> list[tuple[str, Callable[[], object]]]:
    canary_dir = tmp / CANARY
    canary_dir.mkdir(exist_ok=True)
    (canary_dir / "dup.json").write_text(f'{{"{CANARY}": 1, "{CANARY}": 2}}')
    (canary_dir / "dup.yaml").write_text(f"{CANARY}: 1\n{CANARY}: 2\n")
    (canary_dir / "tree").mkdir(exist_ok=True)
    if not (canary_dir / "tree" / CANARY).is_symlink():
        (canary_dir / "tree" / CANARY).symlink_to("/")
    return [
        ("decode-duplicate", lambda: decode(f'{{"{CANARY}":1,"{CANARY}":2}}')),
        ("decode-invalid", lambda: decode(f'{{"{CANARY}":')),
        ("decode-constant", lambda: decode(f'["{CANARY}", NaN]')),
        ("decode-surrogate", lambda: decode(f'["{CANARY}\\ud800"]')),
        ("encode-key", lambda: encode_openmed({CANARY: float("nan")})),
        ("encode-surrogate", lambda: encode_invarlock(CANARY + "\ud800")),
        ("seal-extra", lambda: seal_workflow_manifest({**GOOD, CANARY: GOOD["model"]})),
        ("seal-value", lambda: seal_workflow_manifest({**GOOD, "model": CANARY})),
        (
            "construct",
            lambda: SealedWorkflowManifest(
                component_digests=GOOD, manifest_digest=CANARY, schema_version=CANARY
            ),
        ),
        ("from-dict", lambda: SealedWorkflowManifest.from_dict({CANARY: CANARY})),
        ("from-json", lambda: SealedWorkflowManifest.from_json(f'{{"{CANARY}":')),
        ("snapshot-path", lambda: snapshot_components({"prompt": canary_dir / "missing"})),
        ("snapshot-digest", lambda: snapshot_components({}, {"model": CANARY})),
        ("file", lambda: digest_file(canary_dir / CANARY)),
        ("tree", lambda: digest_tree(canary_dir / "tree")),
        ("config-json", lambda: digest_config_document(canary_dir / "dup.json")),
        ("config-yaml", lambda: digest_config_document(canary_dir / "dup.yaml")),
        ("yaml", lambda: load_strict_yaml(f"a: &{CANARY} 1\nb: *{CANARY}\n")),
        ("yaml-syntax", lambda: load_strict_yaml(f"[{CANARY}")),
        (
            "tool-inventory",
            lambda: build_tool_inventory(
                [{"name": "t", "parameters": {"type": "object", "description": CANARY}}]
            ),
        ),
        ("tool-name", lambda: build_tool_inventory([{"name": CANARY + " x", "parameters": {}}])),
    ]


def _texts(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), *map(str, error.args)]
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None:
        texts += _texts(cause)
    return texts


def test_every_refusal_is_closed_and_canary_free(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    names = []
    for name, action in _cases(tmp_path):
        with pytest.raises(SealevalError) as caught:
            action()
        error = caught.value
        assert error.code in type(error).codes, name
        for text in _texts(error):
            assert CANARY not in text, name
            assert str(tmp_path) not in text, name
        names.append(name)
    assert CANARY not in caplog.text
    assert len(names) == len(set(names))


def test_verification_output_never_carries_submitted_values() -> None:
    result = verify_at_evaluation_start(
        {
            "schema_version": CANARY,
            "component_digests": {CANARY: CANARY, "model": CANARY},
            CANARY: 1,
        },
        {CANARY: CANARY, "model": CANARY},
    )
    assert CANARY not in result.to_json()
    assert CANARY not in repr(result)


def test_error_classes_keep_codes_closed() -> None:
    for cls in error_classes():
        assert cls.codes, cls.__name__
        for code in cls.codes:
            assert code.isidentifier(), (cls.__name__, code)
            assert code == code.lower(), (cls.__name__, code)
        if cls.fallback_code is None:
            with pytest.raises(RuntimeError):
                cls("not-a-code-" + CANARY)
        else:
            assert cls.fallback_code in cls.codes
            collapsed = cls("not-a-code-" + CANARY)
            assert collapsed.code == cls.fallback_code
            assert CANARY not in str(collapsed) + repr(collapsed)
        with pytest.raises(RuntimeError):
            cls(next(iter(cls.codes)), CANARY + " with spaces")


def test_field_grammar_rejects_non_identifier_fields() -> None:
    cls: Any = error_classes()[0]
    code = next(iter(cls.codes))
    assert str(cls(code, "a.b[0]")).startswith(("a.b[0]: ", code))
