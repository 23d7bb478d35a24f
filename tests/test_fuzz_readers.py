"""Issue #13 fuzzing: every decoder and file reader either succeeds or refuses with a closed code.

Each target gets hypothesis-generated or mutated bytes (seeded with a real
document of its kind) and may only return, or raise a
:class:`~sealeval.errors.SealevalError` whose code is in its class's closed
set. Any other exception (``KeyError``, ``RecursionError``, ``OSError``,
``UnicodeError``, ...) fails the test. Examples per target are fixed and small
and there is no per-example deadline, so the whole module stays well under two
minutes in CI; ``scripts/fuzz/`` holds coverage-guided atheris targets for
longer runs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sealeval.canonical import DecodeLimits, decode
from sealeval.captured.importers import load_run
from sealeval.captured.pack_reader import read_evidence_pack
from sealeval.captured.policy import load_comparison_policy
from sealeval.captured.receipt import parse_receipt
from sealeval.captured.request import load_authored_request
from sealeval.captured.run import parse_run
from sealeval.captured.trust import parse_trust_profile
from sealeval.errors import SealevalError
from sealeval.manifest.components import TreeLimits, digest_tree
from sealeval.strict_yaml import YamlLimits, load_strict_yaml
from support.digests import ARTIFACT
from support.vectors import pack_folder, samples_dir, vectors_dir

V = vectors_dir() / "invarlock"
SAMPLES = samples_dir()
PACK = pack_folder("text-20-exact-signed")
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
JSON_TOKENS = st.sampled_from(
    [*'{}[],:"\\ 0123456789.-+eE', "true", "false", "null", "NaN", '"a"', "\\u00e9", "\\ud800"]
)
YAML_TOKENS = st.sampled_from(
    [*"ab01:-[]{},'\"&*!|>#%\n \t?", "true", "null", "---", "<<", "\\ud800", "\u2028"]
)


def closed(action: Callable[[], object]) -> None:
    """Run ``action``: success, or a closed-code refusal; anything else propagates."""
    refusal: SealevalError | None = None
    try:
        action()
    except SealevalError as error:
        refusal = error
    if refusal is not None:
        assert refusal.code in type(refusal).codes
        assert type(refusal).__module__.startswith("sealeval.")


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` with up to four byte ranges replaced, deleted or duplicated."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(0, 4))):
        if not data:
            break
        start = draw(st.integers(0, len(data) - 1))
        end = min(len(data), start + draw(st.integers(0, 16)))
        action = draw(st.sampled_from(["replace", "delete", "duplicate", "truncate"]))
        if action == "replace":
            data[start:end] = draw(st.binary(max_size=16))
        elif action == "delete":
            del data[start:end]
        elif action == "duplicate":
            data[start:start] = data[start:end] * draw(st.integers(1, 8))
        else:
            del data[start:]
    return bytes(data)


# ---------------------------------------------------------------------------
# Byte decoders


@FUZZ
@given(st.one_of(st.binary(max_size=400), st.lists(JSON_TOKENS, max_size=60).map("".join)))
def test_canonical_decode(data: bytes | str) -> None:
    limits = DecodeLimits(max_bytes=4096, max_depth=16, max_containers=64, max_items=128)
    closed(lambda: decode(data, limits=limits))


@FUZZ
@given(st.one_of(st.binary(max_size=300), st.lists(YAML_TOKENS, max_size=60).map("".join)))
def test_strict_yaml(data: bytes | str) -> None:
    limits = YamlLimits(max_bytes=4096, max_nodes=100, max_depth=8)
    closed(lambda: load_strict_yaml(data, limits=limits))


RUN_SEED = (V / "runs" / "json-20.baseline.json").read_bytes()
POLICY_SEED = (PACK / "request" / "policy.json").read_bytes()
REQUEST_SEED = (PACK / "request" / "request.yaml").read_bytes()
TRUST_SEED = (PACK / "trust" / "trust-inputs.json").read_bytes()
RECEIPT_SEED = (PACK / "verify" / "explicit-anchors.receipt.json").read_bytes()


@FUZZ
@given(mutated(RUN_SEED))
def test_run_parser(data: bytes) -> None:
    closed(lambda: parse_run(data))


@FUZZ
@given(mutated(POLICY_SEED))
def test_policy_loader(data: bytes) -> None:
    closed(lambda: load_comparison_policy(data))


@FUZZ
@given(mutated(REQUEST_SEED))
def test_authored_request_loader(data: bytes) -> None:
    closed(lambda: load_authored_request(data))


def _decoded_then(parse: Callable[[Any], object], data: bytes) -> Callable[[], object]:
    return lambda: parse(decode(data, limits=DecodeLimits(max_bytes=1 << 20)))


@FUZZ
@given(mutated(TRUST_SEED))
def test_trust_profile_parser(data: bytes) -> None:
    closed(_decoded_then(parse_trust_profile, data))


@FUZZ
@given(mutated(RECEIPT_SEED))
def test_receipt_parser(data: bytes) -> None:
    closed(_decoded_then(parse_receipt, data))


# ---------------------------------------------------------------------------
# File readers: a real pack and real evaluator files, one file mutated per example

PACK_FILES = (
    "manifest.json",
    "manifest.signature.json",
    "checksums.sha256",
    "request.json",
    "inputs/policy.json",
    "records/baseline.json",
    "reports/evaluation.report.json",
)


@pytest.fixture(scope="module")
def pack_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    destination = tmp_path_factory.mktemp("fuzz") / "evidence"
    shutil.copytree(PACK / "evidence", destination)
    for path in destination.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)
    return destination


@settings(FUZZ, max_examples=40)
@given(name=st.sampled_from(PACK_FILES), data=st.data())
def test_pack_reader(pack_copy: Path, name: str, data: st.DataObject) -> None:
    target = pack_copy / name
    original = (PACK / "evidence" / name).read_bytes()
    target.write_bytes(data.draw(mutated(original)))
    try:
        closed(lambda: read_evidence_pack(pack_copy))
    finally:
        target.write_bytes(original)


def _sample(pattern: str) -> Path:
    found = sorted(SAMPLES.glob(pattern))
    assert found, pattern
    return found[0]


IMPORT_TARGETS = (
    ("invarlock", V / "runs" / "json-20.baseline.json"),
    ("jsonl", V / "inputs" / "native-baseline.jsonl"),
    ("lm-eval-log-samples", "lm_eval/out/*/samples_toy_gen*.jsonl"),
    ("promptfoo-jsonl", "promptfoo/results.jsonl"),
    ("inspect-eval", "inspect_ai/logs/*.eval"),
    ("ragas-result-csv", "ragas/evaluation_result.csv"),
)


@pytest.mark.parametrize(("adapter", "where"), IMPORT_TARGETS, ids=[a for a, _ in IMPORT_TARGETS])
def test_importer_load_run(adapter: str, where: Path | str, tmp_path: Path) -> None:
    seed_path = where if isinstance(where, Path) else _sample(where)
    seed = seed_path.read_bytes()
    target = tmp_path / ("input" + seed_path.suffix)
    identities: dict[str, Any] = (
        {}
        if adapter == "invarlock"
        # an Inspect log states its own source version and run id (a contradicting
        # value is refused with identity_mismatch), so only the artifact is given
        else {"artifact_digest": ARTIFACT}
        if adapter == "inspect-eval"
        else {
            "source": {"name": "fuzz", "version": "1"},
            "run_id": "fuzz",
            "artifact_digest": ARTIFACT,
        }
    )

    @settings(FUZZ, max_examples=25)
    @given(mutated(seed))
    def run(data: bytes) -> None:
        target.write_bytes(data)
        closed(lambda: load_run(target, adapter, **identities))

    target.write_bytes(seed)
    load_run(target, adapter, **identities)  # the seed itself imports
    run()


# ---------------------------------------------------------------------------
# The tree digest over generated trees of files, folders and symlinks

TREE_STEP = st.tuples(
    st.sampled_from(["file", "folder", "link", "absolute-link", "fifo"]),
    st.integers(0, 5),
    st.integers(0, 5),
    st.sampled_from(["n0", "n1", "../n2", "n3/n4", ".", "..", "n5/..", "/", "missing"]),
)


@settings(FUZZ, max_examples=60)
@given(st.lists(TREE_STEP, max_size=12))
def test_tree_digest(tmp_path_factory: pytest.TempPathFactory, steps: list[Any]) -> None:
    root = tmp_path_factory.mktemp("tree")
    for kind, name, folder, text in steps:
        parent = root / f"n{folder}" if folder % 2 else root
        if not os.path.lexists(parent):
            parent.mkdir()
        if parent.is_symlink() or not parent.is_dir():
            continue
        target = parent / f"n{name}"
        if os.path.lexists(target):
            continue
        if kind == "file":
            target.write_bytes(text.encode())
        elif kind == "folder":
            target.mkdir()
        elif kind == "link":
            target.symlink_to(text)
        elif kind == "absolute-link":
            target.symlink_to(root / text.lstrip("/"))
        else:
            os.mkfifo(target)
    closed(lambda: digest_tree(root, limits=TreeLimits(max_depth=6, max_entries=64)))
