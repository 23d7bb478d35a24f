"""Captured evaluation request v2: strict loading, schema, normalization, digests, files."""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import encode_invarlock
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import ComparisonPolicy, ComparisonPolicyError
from sealeval.captured.request import (
    PREFLIGHT_CHECKS,
    AuthoredRequest,
    CapturedRequestError,
    NormalizedRequest,
    SourceSpec,
    authored_from_normalized,
    captured_request_digest,
    check_output_destination,
    comparison_id,
    load_authored_request,
    load_captured_request,
    normalize_captured_request,
    parse_authored_request,
    parse_normalized_request,
    preflight,
    read_authored_request,
)
from sealeval.captured.request.schema import check_authored
from sealeval.captured.run import Limits, Run, read_run
from sealeval.captured.signing import SigningKeyError
from sealeval.errors import SealevalError
from sealeval.strict_yaml import INCLUDE_KEYS, load_strict_yaml
from support.captured_request import (
    oracle_loader,
)
from support.vectors import (
    PROJECT_ROOT,
    cases,
    decode_input,
    load,
    pack_case,
    pack_folder,
    vectors_dir,
    writable_copy,
)

V = vectors_dir() / "invarlock"
CANARY = "CANARYq7zx"
SCHEMA = json.loads(
    (PROJECT_ROOT / "contracts" / "invarlock.evaluation-request-v2.schema.json").read_text("utf-8")
)


def _validator(definition: str) -> Draft202012Validator:
    return Draft202012Validator({**SCHEMA, "oneOf": [{"$ref": f"#/$defs/{definition}"}]})


AUTHORED_SCHEMA = _validator("authored")
NORMALIZED_SCHEMA = _validator("normalized")


def _same_json(left: Any, right: Any) -> bool:
    return encode_invarlock(left) == encode_invarlock(right)


# ---------------------------------------------------------------------------
# request_yaml.json: strict YAML + authored schema (every case)

YAML_MESSAGES = (
    ("request YAML has duplicate key", "duplicate_key"),
    ("request YAML merge keys are not allowed", "merge_key"),
    ("request YAML aliases and anchors are not allowed", "anchor_or_alias"),
    ("request YAML explicit tags and directives are not allowed", "tag_or_directive"),
    ("request YAML booleans must use lowercase true or false", "invalid_boolean"),
    ("request YAML nulls must use lowercase null", "invalid_null"),
    ("request YAML integers must use canonical JSON syntax", "invalid_integer"),
    ("request YAML numbers must use finite JSON syntax", "invalid_float"),
    ("request YAML object keys must be non-empty strings", "invalid_key"),
    ("request YAML include directives are not allowed", "include_key"),
    ("request exceeds the 64-level nesting limit", "too_deep"),
    ("request exceeds the 10,000-node limit", "too_many_nodes"),
    ("request must be UTF-8 encoded", "not_utf8"),
    ("request must be a YAML object", "not_mapping"),
    ("unsupported evaluation request format", "unsupported_format"),
    ("request exceeds the 1 MiB byte limit", "too_large"),
)
SCHEMA_PREFIX = "request does not match evaluation_request_v2.schema.json: "
SCHEMA_MESSAGES = (
    ("Additional properties are not allowed", "unknown_field"),
    ("is not one of ['invarlock'", "unknown_adapter"),
    ("'captured' was expected", "invalid_constant"),
    ("does not match '^(?!/)(?!~)", "invalid_reference"),
    ("'judge' is a required property", "judge_required"),
    ("should not be valid under {'required': ['judge']}", "judge_forbidden"),
    ("should not be valid under {'required': ['input_projection']}", "projection_forbidden"),
    ("None is not of type 'string'", "invalid_digest"),
    ("does not match '^sha256:", "invalid_digest"),
    ("does not match '^/(?:input|context)", "invalid_pointer"),
    ("does not match '^[^", "invalid_text"),
)


def _yaml_input(value: dict[str, Any]) -> bytes:
    if set(value) == {"yaml_text"}:
        return str(value["yaml_text"]).encode("utf-8")
    if set(value) == {"yaml_bytes_b64"}:
        return base64.b64decode(value["yaml_bytes_b64"])
    if set(value) == {"yaml_text_recipe", "byte_length"}:
        recipe = value["yaml_text_recipe"]
        assert recipe == (
            "BASE + '#' + 'x'*1048576 + '\\n' (BASE = case valid-block-yaml input)"
        ), "vector case shape not understood"
        base = next(
            case
            for case in load("invarlock/request_yaml.json")["cases"]
            if case["name"] == "valid-block-yaml"
        )["input"]["yaml_text"]
        data = (base + "#" + "x" * 1_048_576 + "\n").encode("utf-8")
        assert len(data) == value["byte_length"]
        return data
    pytest.fail("vector case shape not understood")


def _expected_code(message: str) -> tuple[str, str]:
    """Map a reference message to (our code, expected field prefix)."""
    if message.startswith(SCHEMA_PREFIX):
        rest = message[len(SCHEMA_PREFIX) :]
        codes = {code for fragment, code in SCHEMA_MESSAGES if fragment in rest}
        if len(codes) != 1:
            pytest.fail(f"unknown reference message: {message[:120]}")
        match = re.match(r"([a-z_.]+): ", rest)
        return codes.pop(), match.group(1) if match else "request"
    codes = {code for fragment, code in YAML_MESSAGES if message.startswith(fragment)}
    if len(codes) != 1:
        pytest.fail(f"unknown reference message: {message[:120]}")
    code = codes.pop()
    return code, "format_version" if code == "unsupported_format" else "request"


@pytest.mark.parametrize("case", cases("invarlock/request_yaml.json"))
def test_request_yaml_vectors(case: dict[str, Any]) -> None:
    data = _yaml_input(case["input"])
    expected = case["expected"]
    if set(expected) == {"value"}:
        request = load_authored_request(data)
        assert request.to_dict() == expected["value"]
        assert _same_json(request.document, expected["value"])
        AUTHORED_SCHEMA.validate(expected["value"])
        return
    if set(expected) == {"error"}:
        code, field_prefix = _expected_code(expected["error"]["message"])
        with pytest.raises(CapturedRequestError) as caught:
            load_authored_request(data)
        assert caught.value.code == code
        field = caught.value.field or ""
        assert field == field_prefix or field.startswith(field_prefix + ".")
        if expected["error"]["exit_code"] is not None:
            pytest.fail("vector case shape not understood")
        # The contract rejects what the loader rejects at the schema level.
        try:
            value = load_strict_yaml(data, require_mapping=True, forbidden_keys=INCLUDE_KEYS)
        except SealevalError:
            return
        assert not AUTHORED_SCHEMA.is_valid(value)
        return
    pytest.fail("vector case shape not understood")


# ---------------------------------------------------------------------------
# requests.json: normalization, request digest, comparison_id (every case)

REQUEST_MESSAGES = (
    (
        r"selected metric must match the single policy metric",
        "metric_mismatch",
        "comparison.metric",
    ),
    (
        r"(baseline|subject) run digest differs from expected pin",
        "run_digest_mismatch",
        "comparison.{0}.expected_run_digest",
    ),
    (r"canonical run identities cannot be overridden at import", "identity_override", None),
    (r"captured request strings cannot contain control characters", "control_character", "request"),
    (
        r"(baseline|subject) (\w+) differs from declared source intent",
        "identity_mismatch",
        "comparison.{0}.{1}",
    ),
    (
        r"native import requires source, run and artifact identities and physical source digest",
        "identity_required",
        None,
    ),
    (
        r"(baseline|subject) input projection differs from declared intent",
        "projection_mismatch",
        "comparison.{0}.input_projection",
    ),
    (r"run '[^']*' does not match the planned case set", "case_set_mismatch", None),
    (
        r"(baseline|subject) normalized run pin is inconsistent",
        "inconsistent_pin",
        "comparison.{0}.expected_run_digest",
    ),
    (r"invalid captured request: Additional properties are not allowed .*", "unknown_field", None),
    (
        r"invalid captured request: 'invarlock/evaluation-request-v2' was expected",
        "unsupported_format",
        "format",
    ),
)


def _request_code(message: str) -> tuple[str, str | None]:
    found = []
    for pattern, code, field in REQUEST_MESSAGES:
        match = re.fullmatch(pattern, message)
        if match:
            found.append((code, None if field is None else field.format(*match.groups())))
    if len(found) != 1:
        pytest.fail(f"unknown reference message: {message[:120]}")
    return found[0]


def _run(relative: str) -> Run:
    return read_run(V / relative)


@pytest.mark.parametrize("case", cases("invarlock/requests.json"))
def test_request_vectors(case: dict[str, Any]) -> None:
    inputs = decode_input(case["input"], arrays_as_tuples=False)
    expected = case["expected"]
    if set(inputs) == {"authored", "baseline", "subject", "policy"}:

        def act() -> NormalizedRequest:
            return normalize_captured_request(
                inputs["authored"],
                _run(inputs["baseline"]),
                _run(inputs["subject"]),
                inputs["policy"],
            )

    elif set(inputs) == {"normalized"}:

        def act() -> NormalizedRequest:
            return parse_normalized_request(inputs["normalized"])

    else:
        pytest.fail("vector case shape not understood")
    if "error" in expected:
        code, field = _request_code(expected["error"]["message"])
        with pytest.raises(CapturedRequestError) as caught:
            act()
        assert caught.value.code == code
        if field is not None:
            assert caught.value.field == field
        return
    normalized = act()
    assert normalized.digest == expected["captured_request_digest"]
    if set(inputs) == {"normalized"}:
        assert set(expected) == {"captured_request_digest"}
        assert captured_request_digest(inputs["normalized"]) == normalized.digest
        NORMALIZED_SCHEMA.validate(inputs["normalized"])
        return
    assert normalized.canonical_bytes.decode("utf-8") == expected["normalized_canonical"]
    assert normalized.to_dict() == expected["normalized"]
    assert normalized.policy_digest == expected["policy_digest"]
    assert normalized.baseline_run_digest == expected["baseline_run_digest"]
    assert normalized.subject_run_digest == expected["subject_run_digest"]
    assert normalized.comparison_id == expected["comparison_id"]
    assert captured_request_digest(expected["normalized"]) == normalized.digest
    assert (
        comparison_id(
            request_digest=normalized.digest,
            baseline_run_digest=normalized.baseline_run_digest,
            subject_run_digest=normalized.subject_run_digest,
            policy_digest=normalized.policy_digest,
        )
        == expected["comparison_id"]
    )
    NORMALIZED_SCHEMA.validate(expected["normalized"])
    AUTHORED_SCHEMA.validate(inputs["authored"])


def test_request_schema_rejects_error_vectors_it_can_express() -> None:
    rejected = {
        "authored-control-character": AUTHORED_SCHEMA,
        "digest-normalized-with-path-rejected": NORMALIZED_SCHEMA,
        "digest-normalized-wrong-format": NORMALIZED_SCHEMA,
    }
    for case in load("invarlock/requests.json")["cases"]:
        validator = rejected.get(case["name"])
        if validator is not None:
            value = case["input"].get("authored", case["input"].get("normalized"))
            assert not validator.is_valid(value), case["name"]


# ---------------------------------------------------------------------------
# Properties: key order and relocation never change the digest

_AUTHORED = next(
    case
    for case in load("invarlock/requests.json")["cases"]
    if case["name"] == "native-hosted-service-identity"
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False))
def test_normalization_is_key_order_invariant(rng: random.Random) -> None:
    inputs = _AUTHORED["input"]
    baseline, subject = _run(inputs["baseline"]), _run(inputs["subject"])
    normalized = normalize_captured_request(
        _shuffled(inputs["authored"], rng), baseline, subject, _shuffled(inputs["policy"], rng)
    )
    assert normalized.digest == _AUTHORED["expected"]["captured_request_digest"]
    assert normalized.comparison_id == _AUTHORED["expected"]["comparison_id"]


_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)

_PACK_REQUEST_CASE = "text-20-exact-signed"


def _pack_request() -> Path:
    """The request directory the ``packs.json`` case names (regenerated trees move it)."""
    return V / pack_case(_PACK_REQUEST_CASE)["input"]["request_dir"]


def _write_request(root: Path, baseline: str, subject: str, policy: str) -> None:
    request = _pack_request()
    for reference, source in (
        (baseline, "inputs/baseline.json"),
        (subject, "inputs/subject.json"),
        (policy, "policy.json"),
    ):
        target = root / reference
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(request / source, target)
    text = (request / "request.yaml").read_text("utf-8")
    text = text.replace('"inputs/baseline.json"', json.dumps(baseline))
    text = text.replace('"inputs/subject.json"', json.dumps(subject))
    text = text.replace('"policy.json"', json.dumps(policy))
    (root / "request.yaml").write_text(text, encoding="utf-8")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.lists(_SEGMENT, min_size=1, max_size=3),
    second=st.lists(_SEGMENT, min_size=1, max_size=3),
    inner=st.lists(_SEGMENT, min_size=3, max_size=3, unique=True),
)
def test_request_digest_is_relocation_invariant(
    first: list[str], second: list[str], inner: list[str]
) -> None:
    expected = pack_case(_PACK_REQUEST_CASE)["expected"]["evaluate"]["stdout_json"]
    with tempfile.TemporaryDirectory() as scratch:
        here = Path(scratch, "a", *first)
        there = Path(scratch, "b", *second)
        here.mkdir(parents=True)
        there.parent.mkdir(parents=True, exist_ok=True)
        _write_request(here, f"{inner[0]}/b.json", f"{inner[1]}/s.json", f"{inner[2]}.json")
        loaded = load_captured_request(here / "request.yaml")
        here.rename(there)
        moved = load_captured_request(there / "request.yaml")
    assert loaded.request_digest == moved.request_digest == expected["request_digest"]
    assert loaded.comparison_id == moved.comparison_id == expected["comparison_id"]


# ---------------------------------------------------------------------------
# Files below the request root


def _copy_pack_request(tmp_path: Path, name: str = "text-20-exact-signed") -> Path:
    root = tmp_path / "req"
    writable_copy(pack_folder(name) / "request", root)
    return root


def _packs_cases() -> list[Any]:
    return cases("invarlock/packs.json")


@pytest.mark.parametrize("case", _packs_cases())
def test_preflight_vectors(case: dict[str, Any], tmp_path: Path) -> None:
    inputs, expected = case["input"], case["expected"]
    if set(inputs) != {"request_dir", "command", "signing_key", "note"}:
        pytest.fail("vector case shape not understood")
    root = tmp_path / "request"
    writable_copy(V / inputs["request_dir"], root)
    command = inputs["command"]
    unsigned = "--unsigned" in command
    output = command[command.index("--output") + 1] if "--output" in command else None
    result = preflight(
        root / "request.yaml",
        signing_key=None if unsigned else V / inputs["signing_key"],
        unsigned=unsigned,
        output=output,
        cwd=root,
        run_loader=oracle_loader(V / expected["evidence_dir"]),
    )
    stdout = expected["evaluate_preflight"]["stdout_json"]
    assert expected["evaluate_preflight"]["exit_code"] == 0
    assert result.request.request_digest == stdout["request_digest"]
    assert result.request.normalized.baseline_run_digest == stdout["baseline_run_digest"]
    assert result.request.normalized.subject_run_digest == stdout["subject_run_digest"]
    assert result.request.normalized.policy_digest == stdout["policy_digest"]
    assert result.record_count == stdout["record_count"]
    assert result.scope_count == stdout["scope_count"]
    assert result.requested_authentication == stdout["requested_authentication"]
    assert list(result.checks) == stdout["checks"] == list(PREFLIGHT_CHECKS)
    relative = result.request.destination.relative_to(result.request.root).as_posix()
    assert f"{Path(inputs['request_dir']).parent.as_posix()}/{relative}" == stdout["output"]
    assert result.request.normalized.to_dict() == expected["normalized_request"]
    if unsigned:
        assert result.signing_key_fingerprint is None
    else:
        assert result.signing_key_fingerprint == expected["anchors"]["evidence_signer_fingerprint"]
    assert not result.request.destination.exists()


def test_preflight_signing_mode(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    key = V / "keys" / "evidence-signer" / "private.pem"
    with pytest.raises(CapturedRequestError) as caught:
        preflight(root / "request.yaml", signing_key=key, unsigned=True)
    assert caught.value.code == "signing_mode_conflict"
    with pytest.raises(CapturedRequestError) as caught:
        preflight(root / "request.yaml")
    assert caught.value.code == "signing_key_required"
    with pytest.raises(SigningKeyError) as key_error:
        preflight(root / "request.yaml", signing_key=root / "policy.json")
    assert key_error.value.code == "invalid_pem"


def test_preflight_runs_the_paired_check(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    seen: list[int] = []

    def paired(baseline: Run, subject: Run, policy: Any) -> dict[str, Any]:
        seen.append(len(baseline.records) + len(subject.records))
        return {"required_bootstrap_draws": 0, "missing_id_bytes": 2}

    result = preflight(root / "request.yaml", unsigned=True, paired_check=paired)
    records = pack_folder(_PACK_REQUEST_CASE) / "evidence" / "records"
    sides = [read_run(records / f"{side}.json") for side in ("baseline", "subject")]
    assert seen == [sum(len(run.records) for run in sides)]
    assert result.paired is not None
    assert dict(result.paired) == {"required_bootstrap_draws": 0, "missing_id_bytes": 2}


def _refusal(tmp_path: Path, mutate: Any, **kwargs: Any) -> SealevalError:
    root = _copy_pack_request(tmp_path)
    mutate(root)
    with pytest.raises(SealevalError) as caught:
        load_captured_request(root / "request.yaml", **kwargs)
    return caught.value


def _edit_yaml(old: str, new: str) -> Any:
    def mutate(root: Path) -> None:
        path = root / "request.yaml"
        text = path.read_text("utf-8")
        assert old in text
        path.write_text(text.replace(old, new), encoding="utf-8")

    return mutate


def _symlink_input(root: Path) -> None:
    (root / "inputs" / "baseline.json").rename(root / "real.json")
    (root / "inputs" / "baseline.json").symlink_to(root / "real.json")


def _symlink_dir(root: Path) -> None:
    (root / "inputs").rename(root / "real-inputs")
    (root / "inputs").symlink_to(root / "real-inputs")


def _output_exists(root: Path) -> None:
    (root / "evidence").mkdir()


def _dangling_output(root: Path) -> None:
    (root / "evidence").symlink_to(root / "nowhere")


def _output_ancestor_symlink(root: Path) -> None:
    (root / "elsewhere").mkdir()
    (root / "out").symlink_to(root / "elsewhere")
    _edit_yaml('evidence: "evidence"', 'evidence: "out/evidence"')(root)


def _bad_policy(root: Path) -> None:
    (root / "policy.json").write_bytes(b'{"format": 1, "format": 2}')


def _policy_array(root: Path) -> None:
    (root / "policy.json").write_bytes(b"[]")


def _bad_run(root: Path) -> None:
    (root / "inputs" / "baseline.json").write_bytes(b'{"format": NaN}')


def _invalid_run(root: Path) -> None:
    (root / "inputs" / "baseline.json").write_bytes(b'{"format": "x"}')


def _invalid_policy(root: Path) -> None:
    (root / "policy.json").write_bytes(b'{"format": "x", "slices": []}')


def _huge_request(root: Path) -> None:
    with (root / "request.yaml").open("ab") as handle:
        handle.write(b"#" + b"x" * 1_048_576 + b"\n")


def _symlinked_request(root: Path) -> None:
    (root / "request.yaml").rename(root / "real.yaml")
    (root / "request.yaml").symlink_to(root / "real.yaml")


def _nothing(root: Path) -> None:
    return None


FILE_REFUSALS = [
    pytest.param(
        _edit_yaml("inputs/baseline.json", "inputs/missing.json"),
        {},
        (CapturedRequestError, "not_found", "comparison.baseline.path"),
        id="input-missing",
    ),
    pytest.param(
        _symlink_input,
        {},
        (CapturedRequestError, "not_regular_file", "comparison.baseline.path"),
        id="input-symlink",
    ),
    pytest.param(
        _symlink_dir,
        {},
        (CapturedRequestError, "unsafe_path", "comparison.baseline.path"),
        id="input-directory-symlink",
    ),
    pytest.param(
        _edit_yaml('"policy.json"', '"inputs"'),
        {},
        (CapturedRequestError, "not_regular_file", "comparison.policy"),
        id="policy-is-directory",
    ),
    pytest.param(
        _output_exists,
        {},
        (CapturedRequestError, "output_exists", "output.evidence"),
        id="output-exists",
    ),
    pytest.param(
        _dangling_output,
        {},
        (CapturedRequestError, "output_exists", "output.evidence"),
        id="output-dangling-symlink",
    ),
    pytest.param(
        _output_ancestor_symlink,
        {},
        (CapturedRequestError, "unsafe_path", "output.evidence"),
        id="output-ancestor-symlink",
    ),
    pytest.param(
        _bad_policy,
        {},
        (CapturedRequestError, "invalid_json", "comparison.policy"),
        id="policy-duplicate-key",
    ),
    pytest.param(
        _policy_array,
        {},
        (CapturedRequestError, "not_mapping", "comparison.policy"),
        id="policy-not-object",
    ),
    pytest.param(
        _invalid_policy,
        {},
        (ComparisonPolicyError, "missing_field", "metrics"),
        id="policy-invalid",
    ),
    pytest.param(
        _bad_run,
        {},
        (CapturedRequestError, "invalid_json", "comparison.baseline.path"),
        id="run-non-finite",
    ),
    pytest.param(
        _invalid_run,
        {},
        (CapturedRunError, "missing_field", "comparison.baseline.run"),
        id="run-invalid",
    ),
    pytest.param(
        _edit_yaml('adapter: "invarlock"', 'adapter: "jsonl"'),
        {},
        (CapturedRequestError, "adapter_unavailable", "comparison.baseline.adapter"),
        id="adapter-without-loader",
    ),
    pytest.param(
        _nothing,
        {"output": "../outside"},
        (CapturedRequestError, "outside_root", "output.evidence"),
        id="override-outside-root",
    ),
    pytest.param(
        _nothing,
        {"baseline_run": "/etc/hostname"},
        (CapturedRequestError, "outside_root", "comparison.baseline.path"),
        id="override-absolute-outside-root",
    ),
    pytest.param(
        _huge_request, {}, (CapturedRequestError, "too_large", "request"), id="request-over-1mib"
    ),
    pytest.param(
        _symlinked_request,
        {},
        (CapturedRequestError, "not_regular_file", "request"),
        id="request-symlink",
    ),
]


@pytest.mark.parametrize(("mutate", "kwargs", "expected"), FILE_REFUSALS)
def test_file_refusals(mutate: Any, kwargs: dict[str, Any], expected: Any, tmp_path: Path) -> None:
    kind, code, field = expected
    if "output" in kwargs or "baseline_run" in kwargs:
        kwargs = {**kwargs, "cwd": tmp_path / "req"}
    error = _refusal(tmp_path, mutate, **kwargs)
    assert type(error) is kind
    assert error.code == code
    assert error.field == field


def test_overrides_replace_references(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    (root / "alt").mkdir()
    shutil.copyfile(root / "inputs" / "subject.json", root / "alt" / "s.json")
    loaded = load_captured_request(
        root / "request.yaml",
        subject_run="alt/s.json",
        output="out/deeper/evidence",
        cwd=root,
    )
    assert loaded.authored.subject.path == "alt/s.json"
    assert loaded.authored.output == "out/deeper/evidence"
    assert loaded.destination == root / "out" / "deeper" / "evidence"
    assert not (root / "out").exists()  # nothing is created before publication


def test_request_root_option(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(root / "request.yaml", elsewhere / "request.yaml")
    loaded = load_captured_request(elsewhere / "request.yaml", request_root=root)
    assert loaded.root == root.resolve()
    assert loaded.destination == root.resolve() / "evidence"


def test_check_output_destination_allows_missing_ancestors(tmp_path: Path) -> None:
    assert check_output_destination(tmp_path, "a/b/c") == tmp_path / "a/b/c"
    (tmp_path / "a").write_text("x")
    with pytest.raises(CapturedRequestError) as caught:
        check_output_destination(tmp_path, "a/b")
    assert caught.value.code == "unsafe_path"


def test_read_authored_request_and_overrides(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    authored = read_authored_request(root / "request.yaml")
    assert isinstance(authored, AuthoredRequest)
    changed = authored.with_references(policy="other.json")
    assert changed.policy == "other.json"
    with pytest.raises(CapturedRequestError) as caught:
        authored.with_references(output="../x")
    assert caught.value.code == "invalid_reference"
    assert authored.side("baseline") is authored.baseline
    with pytest.raises(CapturedRequestError):
        authored.side("other")


# ---------------------------------------------------------------------------
# Schema rules one by one (authored and normalized)

_BASE: dict[str, Any] = json.loads(
    json.dumps(
        next(
            case
            for case in load("invarlock/request_yaml.json")["cases"]
            if case["name"] == "valid-block-yaml"
        )["expected"]["value"]
    )
)


def _with(path: str, value: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(_BASE))
    node = document
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return document


_DELETE = object()
_DIGEST = "sha256:" + "a" * 64
_IDENTITY = _AUTHORED["input"]["authored"]["comparison"]["subject"]["service_identity"]

SCHEMA_REFUSALS = [
    ("format_version", 1, "unsupported_format", "format_version"),
    ("format_version", _DELETE, "missing_field", "request"),
    ("execution", "captured", "invalid_type", "execution"),
    ("execution.extra", 1, "unknown_field", "execution"),
    ("comparison.metric", "bleu", "unknown_metric", "comparison.metric"),
    ("comparison.metric", "judge", "judge_required", "comparison.judge"),
    ("comparison.judge", {"x": 1}, "judge_forbidden", "comparison.judge"),
    ("comparison.baseline.adapter", 3, "unknown_adapter", "comparison.baseline.adapter"),
    ("comparison.baseline.path", 3, "invalid_type", "comparison.baseline.path"),
    ("comparison.baseline.path", "a" * 4097, "invalid_reference", "comparison.baseline.path"),
    ("comparison.baseline.path", "a\x7fb", "invalid_reference", "comparison.baseline.path"),
    ("comparison.baseline.path", "\\x", "invalid_reference", "comparison.baseline.path"),
    ("comparison.baseline.path", "a/", "invalid_reference", "comparison.baseline.path"),
    ("comparison.baseline.path", "a/./b", "invalid_reference", "comparison.baseline.path"),
    ("comparison.baseline.path", "a\u2003", "invalid_reference", "comparison.baseline.path"),
    ("comparison.baseline.source", {"name": "a"}, "missing_field", "comparison.baseline.source"),
    (
        "comparison.baseline.source",
        {"name": "", "version": "1"},
        "invalid_text",
        "comparison.baseline.source.name",
    ),
    ("comparison.baseline.run_id", "x" * 4097, "invalid_text", "comparison.baseline.run_id"),
    (
        "comparison.baseline.score_provenance",
        {f"k{i}": {} for i in range(101)},
        "too_many_members",
        "comparison.baseline.score_provenance",
    ),
    (
        "comparison.baseline.score_provenance",
        {"k": {"kind": "robot", "source": "s", "version": "v", "unit": "u", "rubric_digest": None}},
        "invalid_constant",
        "comparison.baseline.score_provenance.entry.kind",
    ),
    (
        "comparison.baseline.score_provenance",
        {"k": {"kind": "judge", "source": "s", "version": "v", "unit": "u", "rubric_digest": "x"}},
        "invalid_digest",
        "comparison.baseline.score_provenance.entry.rubric_digest",
    ),
    (
        "comparison.baseline.expected_run_digest",
        "sha256:AB",
        "invalid_digest",
        "comparison.baseline.expected_run_digest",
    ),
    (
        "comparison.subject",
        {
            "path": "s.jsonl",
            "adapter": "jsonl",
            "input_projection": {"kind": "x", "pointer": "/input"},
        },
        "invalid_projection",
        "comparison.subject.input_projection.kind",
    ),
    (
        "comparison.subject",
        {"path": "s.jsonl", "adapter": "jsonl", "input_projection": {"pointer": "/input"}},
        "invalid_projection",
        "comparison.subject.input_projection",
    ),
    (
        "comparison.subject",
        {"path": "s.jsonl", "adapter": "jsonl", "service_identity": _IDENTITY},
        "artifact_digest_required",
        "comparison.subject.artifact_digest",
    ),
    (
        "comparison.subject",
        {
            "path": "s.jsonl",
            "adapter": "jsonl",
            "service_identity": _IDENTITY,
            "artifact_digest": _DIGEST,
        },
        "artifact_digest_forbidden",
        "comparison.subject.artifact_digest",
    ),
    (
        "comparison.subject",
        {
            "path": "s.jsonl",
            "adapter": "jsonl",
            "service_identity": {**_IDENTITY, "provider": " "},
            "artifact_digest": None,
        },
        "invalid_service_identity",
        "comparison.subject.service_identity.provider",
    ),
    ("output", {"evidence": "e", "more": 1}, "unknown_field", "output"),
]


@pytest.mark.parametrize(("path", "value", "code", "field"), SCHEMA_REFUSALS)
def test_authored_schema_rules(path: str, value: Any, code: str, field: str) -> None:
    document = _with(path, value)
    with pytest.raises(CapturedRequestError) as caught:
        parse_authored_request(document)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert not AUTHORED_SCHEMA.is_valid(document)


@pytest.mark.parametrize("text", ["\ud800", CANARY + "\udfff" + CANARY], ids=["alone", "canary"])
def test_a_text_with_an_unpaired_surrogate_is_invalid_json_value(text: str) -> None:
    """One behaviour for request texts: the toolkit's (``invalid_json_value``), never echoed."""
    with pytest.raises(CapturedRequestError) as caught:
        parse_authored_request(_with("comparison.baseline.run_id", text))
    assert (caught.value.code, caught.value.field) == ("invalid_json_value", "request")
    # the schema check on a document that was not frozen first: the field rule names the field
    with pytest.raises(CapturedRequestError) as caught:
        check_authored(_with("comparison.baseline.run_id", text), full_identity=True)
    assert (caught.value.code, caught.value.field) == (
        "invalid_json_value",
        "comparison.baseline.run_id",
    )
    for message in (str(caught.value), repr(caught.value)):
        assert CANARY not in message
        assert "\udfff" not in message


def test_judge_metric_is_not_supported() -> None:
    document = _with("comparison.metric", "judge")
    document["comparison"]["judge"] = {"workspace": "w"}
    with pytest.raises(CapturedRequestError) as caught:
        parse_authored_request(document)
    assert caught.value.code == "judge_unsupported"


def test_authored_request_refuses_non_json_values() -> None:
    with pytest.raises(CapturedRequestError) as caught:
        parse_authored_request(_with("comparison.metric", float("nan")))
    assert caught.value.code == "invalid_json_value"
    with pytest.raises(CapturedRequestError) as caught:
        parse_authored_request(["x"])
    assert caught.value.code == "not_mapping"
    with pytest.raises(CapturedRequestError) as caught:
        load_authored_request(3)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_type"


def test_structural_identity_check_then_full_validation() -> None:
    """Loading checks the descriptor's structure; normalization checks it completely."""
    identity = {**_IDENTITY, "configuration": {"temperature": 1.5}}
    document = _with(
        "comparison.subject",
        {
            "path": "s.jsonl",
            "adapter": "jsonl",
            "service_identity": identity,
            "artifact_digest": None,
        },
    )
    parse_authored_request(document)
    run = _run("runs/text-20.baseline.json")
    with pytest.raises(CapturedRequestError) as caught:
        normalize_captured_request(document, run, run, _AUTHORED["input"]["policy"])
    assert caught.value.code == "invalid_service_identity"
    assert caught.value.field == "comparison.subject.service_identity.configuration_digest"


_NORMALIZED = _AUTHORED["expected"]["normalized"]


def _normalized_with(side: str, member: str, value: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(_NORMALIZED))
    if value is _DELETE:
        del document["comparison"][side][member]
    else:
        document["comparison"][side][member] = value
    return document


NORMALIZED_REFUSALS = [
    ("baseline", "run_digest", "x", "invalid_digest"),
    ("baseline", "run_id", _DELETE, "missing_field"),
    ("baseline", "adapter", "invarlock", "identity_override"),
    ("baseline", "path", "x", "unknown_field"),
    ("subject", "artifact_digest", _DIGEST, "artifact_digest_forbidden"),
]


@pytest.mark.parametrize(("side", "member", "value", "code"), NORMALIZED_REFUSALS)
def test_normalized_schema_rules(side: str, member: str, value: Any, code: str) -> None:
    document = _normalized_with(side, member, value)
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request(document)
    assert caught.value.code == code
    assert not NORMALIZED_SCHEMA.is_valid(document)


def test_normalized_request_limits() -> None:
    document = json.loads(json.dumps(_NORMALIZED))
    document["comparison"]["metric"] = "judge"
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request(document)
    assert caught.value.code == "unknown_metric"
    big = _normalized_with("baseline", "run_id", "x")
    big["comparison"]["subject"]["service_identity"]["configuration"] = {"p": "y" * 1_100_000}
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request(big)
    assert caught.value.code == "too_large"
    controls = _normalized_with("baseline", "run_id", "x")
    controls["comparison"]["subject"]["service_identity"]["configuration"] = {"a\nb": "c\td"}
    # Control characters are free text inside the hosted configuration only (the
    # digest then mismatches, which full validation refuses).
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request(controls)
    assert caught.value.code == "invalid_service_identity"
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request([])
    assert caught.value.code == "invalid_type"
    assert parse_normalized_request(NormalizedRequest(_NORMALIZED)).to_dict() == _NORMALIZED


def test_comparison_id_refuses_malformed_digests() -> None:
    with pytest.raises(CapturedRequestError) as caught:
        comparison_id(
            request_digest="x",
            baseline_run_digest=_DIGEST,
            subject_run_digest=_DIGEST,
            policy_digest=_DIGEST,
        )
    assert caught.value.code == "invalid_digest"


def test_normalized_request_equality_and_sides() -> None:
    first = parse_normalized_request(_NORMALIZED)
    second = parse_normalized_request(json.loads(json.dumps(_NORMALIZED)))
    assert first == second
    assert hash(first) == hash(second)
    assert first != object()
    assert first.side("baseline")["adapter"] == "jsonl"
    with pytest.raises(CapturedRequestError):
        first.side("judge")


# ---------------------------------------------------------------------------
# Never echo


def test_canary_never_reaches_errors_reprs_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    messages: list[str] = []
    root = tmp_path / f"{CANARY}-root"
    writable_copy(_pack_request(), root)
    text = (root / "request.yaml").read_text("utf-8")
    for broken in (
        text.replace("inputs/baseline.json", f"{CANARY}/baseline.json"),
        text.replace("evidence:", f"{CANARY}: 1\n  evidence:"),
        text.replace('mode: "captured"', f'mode: "{CANARY}"'),
        text.replace('"policy.json"', f'"/{CANARY}"'),
        text + f"{CANARY}: [\n",
    ):
        (root / "request.yaml").write_text(broken, encoding="utf-8")
        with pytest.raises(SealevalError) as caught:
            load_captured_request(root / "request.yaml")
        messages += [str(caught.value), repr(caught.value)]
    (root / "request.yaml").write_text(text, encoding="utf-8")
    loaded = load_captured_request(root / "request.yaml")
    messages += [repr(loaded), repr(loaded.authored), repr(loaded.authored.baseline)]
    messages += [repr(loaded.normalized), str(loaded.normalized)]
    document = _AUTHORED["input"]["authored"]
    baseline_run_id = document["comparison"]["baseline"]["run_id"]
    tainted = json.loads(json.dumps(document).replace(baseline_run_id, CANARY))
    assert tainted["comparison"]["baseline"]["run_id"] == CANARY
    inputs = _AUTHORED["input"]
    with pytest.raises(CapturedRequestError) as caught:
        normalize_captured_request(
            tainted, _run(inputs["baseline"]), _run(inputs["subject"]), inputs["policy"]
        )
    messages += [str(caught.value), repr(caught.value)]
    request = preflight(root / "request.yaml", unsigned=True)
    messages.append(repr(request))
    messages += [record.getMessage() for record in caplog.records]
    assert all(CANARY not in message for message in messages)
    assert len(messages) > 10


def test_reprs_hide_declared_values() -> None:
    declared = _AUTHORED["input"]["authored"]["comparison"]["baseline"]["run_id"]
    authored = parse_authored_request(_AUTHORED["input"]["authored"])
    assert declared not in repr(authored)
    assert declared not in repr(authored.baseline)
    assert authored.baseline.run_id == declared
    assert authored.baseline.source is not None
    assert authored.subject.service_identity is not None
    assert authored.baseline.score_provenance is not None
    assert authored.baseline.declares("artifact_digest")
    assert authored.subject.artifact_digest is None
    assert authored.baseline.input_projection is None
    assert authored.baseline.expected_run_digest is None


def test_projection_accessor() -> None:
    projected = next(
        case
        for case in load("invarlock/requests.json")["cases"]
        if case["name"] == "native-input-projection"
    )
    authored = parse_authored_request(projected["input"]["authored"])
    projection = authored.baseline.input_projection
    assert projection is not None
    assert projection.pointer == "/input/question"


def test_loading_is_os_independent_of_cwd(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        relative = load_captured_request(Path("req") / "request.yaml")
    finally:
        os.chdir(before)
    absolute = load_captured_request(root / "request.yaml")
    assert relative.request_digest == absolute.request_digest


def test_more_schema_and_normalization_rules(tmp_path: Path) -> None:
    for path, value, code, field in (
        ("comparison.baseline.run_id", 3, "invalid_type", "comparison.baseline.run_id"),
        ("comparison.policy", 3, "invalid_type", "comparison.policy"),
        ("comparison.baseline.run_id", "a\x7f", "invalid_text", "comparison.baseline.run_id"),
    ):
        with pytest.raises(CapturedRequestError) as caught:
            parse_authored_request(_with(path, value))
        assert (caught.value.code, caught.value.field) == (code, field)
    hosted = _with(
        "comparison.subject",
        {"path": "s", "adapter": "jsonl", "service_identity": _IDENTITY, "artifact_digest": "x"},
    )
    with pytest.raises(CapturedRequestError) as caught:
        parse_authored_request(hosted)
    assert caught.value.code == "invalid_digest"
    normalized = json.loads(json.dumps(_NORMALIZED))
    normalized["execution"]["mode"] = "run"
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request(normalized)
    assert caught.value.code == "invalid_constant"
    with pytest.raises(CapturedRequestError) as caught:
        parse_normalized_request({**_NORMALIZED, "format": float("inf")})
    assert caught.value.code == "invalid_json_value"
    run = _run("runs/text-20.baseline.json")
    policy = _AUTHORED["input"]["policy"]
    for authored, code in (
        ([], "not_mapping"),
        ({**_BASE, "x": float("nan")}, "invalid_json_value"),
        ({**_BASE, "k\x01": 1}, "control_character"),
        ({**_BASE, "output": {"evidence": "e", "list": ["a\nb"]}}, "control_character"),
    ):
        with pytest.raises(CapturedRequestError) as caught:
            normalize_captured_request(authored, run, run, policy)  # type: ignore[arg-type]
        assert caught.value.code == code
    # Runs and policies may also be given as documents.
    normalized_request = normalize_captured_request(
        _BASE, run.to_dict(), run.to_dict(), ComparisonPolicy(policy)
    )
    assert normalized_request.baseline_run_digest == run.digest
    with pytest.raises(CapturedRequestError):
        authored_from_normalized(
            "x",  # type: ignore[arg-type]
            baseline_path="a",
            subject_path="b",
            policy_path="c",
            evidence="d",
        )


def test_more_file_rules(tmp_path: Path) -> None:
    root = _copy_pack_request(tmp_path)
    with pytest.raises(CapturedRequestError) as caught:
        load_captured_request(root / "request.yaml", request_root=tmp_path / "missing")
    assert caught.value.code == "not_found"
    (root / "evidence").mkdir()
    loaded = load_captured_request(root / "request.yaml", check_output=False)
    assert loaded.destination == loaded.root / "evidence"
    (root / "evidence" / "inner").mkdir()
    assert check_output_destination(root, "evidence/new") == root / "evidence/new"
    with pytest.raises(CapturedRequestError) as caught:
        check_output_destination(root, "evidence/inner")
    assert caught.value.code == "output_exists"
    for override in (".", ".."):
        with pytest.raises(CapturedRequestError) as caught:
            load_captured_request(root / "request.yaml", output=override, cwd=root)
        assert caught.value.code == "invalid_reference"
    authored = read_authored_request(root / "request.yaml")
    moved = authored.with_references(baseline_path="inputs/subject.json")
    assert moved.baseline.path == "inputs/subject.json"
    assert authored.side("subject") is authored.subject

    def wrong(path: Path, side: SourceSpec, *, limits: Limits) -> Run:
        return "not a run"  # type: ignore[return-value]

    text = (root / "request.yaml").read_text("utf-8")
    (root / "request.yaml").write_text(
        text.replace('adapter: "invarlock"', 'adapter: "jsonl"', 1), encoding="utf-8"
    )
    shutil.rmtree(root / "evidence")
    with pytest.raises(CapturedRequestError) as caught:
        load_captured_request(root / "request.yaml", run_loader=wrong)
    assert caught.value.code == "invalid_type"


def test_streamed_side_reads_canonical_runs_and_rewinds_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uncapped large runs stream; anything else is left to the whole-file path, unread."""
    import sealeval.captured.request.files as request_module  # noqa: PLC0415
    from sealeval.captured import make_run, write_run  # noqa: PLC0415
    from sealeval.captured.run import INVARLOCK_LIMITS, UNLIMITED  # noqa: PLC0415

    run = make_run(
        [{"id": f"r{index}", "input": "q", "expected": "a", "output": "a"} for index in range(5)],
        source={"name": "tool", "version": "1"},
        run_id="run",
        artifact_digest="sha256:" + "1" * 64,
    )
    canonical = tmp_path / "canonical.json"
    write_run(run, canonical)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(canonical.read_bytes()), indent=2), encoding="utf-8")
    monkeypatch.setattr(request_module, "STREAM_MIN_BYTES", 0)
    for path, expected in ((canonical, run.digest), (pretty, None)):
        fd = os.open(path, os.O_RDONLY)
        streamed = request_module._streamed_side(fd, UNLIMITED)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # read by position: the offset never moves
        if streamed is None:
            assert expected is None
            assert request_module._streamed_side(fd, INVARLOCK_LIMITS) is None
            os.close(fd)
            continue
        # The facts own the descriptor and re-read the same bytes by position.
        assert streamed.digest == expected
        assert (streamed.record_count, streamed.canonical_size) == (5, path.stat().st_size)
        assert streamed.header.run_id == run.header.run_id
        assert b"".join(streamed.iter_canonical()) == path.read_bytes()
        with streamed.open() as handle:
            assert handle.read() == path.read_bytes()
        assert "r0" not in repr(streamed)
        streamed.close()
        streamed.close()  # idempotent
        with pytest.raises(OSError):
            os.fstat(fd)
