"""Canary strings fed through every public parser never reach errors, reprs or logs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sealeval.canonical import decode, encode_invarlock, encode_openmed
from sealeval.errors import error_classes
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
from support.refusals import CANARY, assert_refused

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


#: Every case of ``_cases``: its closed code and field.
EXPECTED: dict[str, tuple[str, str | None]] = {
    "decode-duplicate": ("duplicate_key", None),
    "decode-invalid": ("invalid_json", None),
    "decode-constant": ("non_standard_constant", None),
    "decode-surrogate": ("unpaired_surrogate", None),
    "encode-key": ("non_finite", None),
    "encode-surrogate": ("unpaired_surrogate", None),
    "seal-extra": ("invalid_keys", "component_digests"),
    "seal-value": ("invalid_digest", "component_digests.model"),
    "construct": ("unsupported_version", "schema_version"),
    "from-dict": ("unknown_field", "manifest"),
    "from-json": ("invalid_document", "manifest"),
    "snapshot-path": ("not_found", "prompt"),
    "snapshot-digest": ("invalid_digest", "component_digests.model"),
    "file": ("not_found", "path"),
    "tree": ("symlink_escapes_tree", "path"),
    "config-json": ("invalid_document", "path"),
    "config-yaml": ("invalid_document", "path"),
    "yaml": ("anchor_or_alias", None),
    "yaml-syntax": ("invalid_yaml", None),
    "tool-inventory": ("free_text", "tools[0].parameters"),
    "tool-name": ("invalid_name", "tools[0].name"),
}


def test_every_case_has_one_expected_refusal(tmp_path: Path) -> None:
    names = [name for name, _ in _cases(tmp_path)]
    assert len(names) == len(set(names))
    assert names == list(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_refusal_is_closed_and_canary_free(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    action = dict(_cases(tmp_path))[name]
    code, field = EXPECTED[name]
    error = assert_refused(action, code, field)
    assert error.code in type(error).codes
    for text in _texts(error):
        assert CANARY not in text
        assert str(tmp_path) not in text
    assert CANARY not in caplog.text


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
