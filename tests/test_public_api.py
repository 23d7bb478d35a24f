"""The public face: ``import sealeval``, the documented quick start, ``sealeval init``.

The quick start of ``docs/api/index.md`` runs verbatim; the starter files of
``sealeval init`` go through the real commands (``evaluate``, ``verify``,
``report``, ``session run``) unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

import sealeval
from sealeval.captured.policy import ComparisonPolicyError, load_comparison_policy
from sealeval.cli import COMMANDS, cli
from sealeval.errors import CapturedError, SealevalError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CANARY = "CANARY-7f3a-do-not-echo"


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _starters() -> None:
    assert _invoke("init", "policy")[0] == 0
    assert _invoke("init", "request")[0] == 0


# ---------------------------------------------------------------------------
# import sealeval


def test_import_is_light() -> None:
    code = (
        "import sys, sealeval; print(sorted(m for m in sys.modules if m.startswith('sealeval.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


def test_every_public_name_is_documented() -> None:
    assert "evaluate" in sealeval.__all__
    for name in sealeval.__all__:
        if name == "__version__":
            continue
        value = getattr(sealeval, name)
        assert value.__doc__, name
    reference = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    for name in sealeval.__all__:
        if name != "__version__":
            assert f"- {name}\n" in reference, name


@pytest.mark.parametrize("family", ["manifest", "session", "gates", "captured"])
def test_family_faces_export_what_they_list(family: str) -> None:
    module = __import__(f"sealeval.{family}", fromlist=["__all__"])
    assert module.__all__
    for name in module.__all__:
        assert getattr(module, name) is not None


# ---------------------------------------------------------------------------
# The documented quick start, verbatim


def _quick_start() -> str:
    text = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1
    return blocks[0]


def test_quick_start_five_calls(workspace: Path) -> None:
    code = _quick_start()
    calls = [line for line in code.splitlines() if "sealeval." in line]
    assert len(calls) == 5
    for call in calls:  # the module docstring shows the same calls
        assert call.strip() in (sealeval.__doc__ or "")
    _starters()
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/api/index.md", "exec"), namespace)
    verified = namespace["verified"]
    packed = namespace["packed"]
    assert isinstance(packed, sealeval.EvaluationResult)
    assert verified.status == 0  # type: ignore[attr-defined]
    assert packed.decision == "pass"
    assert packed.authentication == "signed"
    assert (workspace / "receipt.json").is_file()
    assert "<html" in (workspace / "report.html").read_text(encoding="utf-8").lower()


def test_api_accepts_paths_and_objects(workspace: Path) -> None:
    _starters()
    summary = sealeval.import_run(
        "inputs/baseline.jsonl",
        "baseline.run.json",
        adapter="jsonl",
        source="demo-evaluator@1.0",
        run_id="baseline",
        artifact_digest="sha256:" + "1" * 64,
    )
    run = sealeval.load_run("baseline.run.json")
    assert run.digest == summary.run_digest
    assert summary.record_count == len(run.records)
    same = sealeval.load_run(
        Path("inputs/baseline.jsonl"),
        "jsonl",
        source={"name": "demo-evaluator", "version": "1.0"},
        run_id="baseline",
        artifact_digest="sha256:" + "1" * 64,
    )
    assert same.digest == run.digest
    policy = sealeval.load_policy("policy.yaml")
    by_path = sealeval.compare("baseline.run.json", Path("baseline.run.json"), Path("policy.yaml"))
    by_object = sealeval.compare(run, same, policy.to_dict())
    assert by_path.canonical_bytes == by_object.canonical_bytes
    assert by_object.decision == "pass"


def test_api_raises_family_errors(workspace: Path) -> None:
    _starters()
    with pytest.raises(CapturedError) as caught:
        sealeval.compare("missing.run.json", "missing.run.json", "policy.yaml")
    assert caught.value.field == "baseline"
    with pytest.raises(CapturedError) as caught:
        sealeval.evaluate("request.yaml")  # neither a key nor unsigned
    assert caught.value.code == "signing_key_required"
    with pytest.raises(CapturedError) as caught:
        sealeval.import_run("inputs/baseline.jsonl", "x.json", adapter="jsonl", source="nope")
    assert caught.value.code == "adapter_option_invalid"


def test_unsigned_pack_has_no_trust_profile(workspace: Path) -> None:
    _starters()
    packed = sealeval.evaluate("request.yaml", unsigned=True)
    assert packed.authentication == "unsigned_local"
    with pytest.raises(CapturedError) as caught:
        sealeval.write_trust_profile("trust.json", packed)
    assert caught.value.code == "invalid_digest"
    assert not (workspace / "trust.json").exists()
    rendered = sealeval.report(packed.evidence)
    assert rendered.decision == packed.decision
    assert rendered.junit.startswith(b"<?xml")


def test_manifest_seal_and_verify(workspace: Path) -> None:
    (workspace / "prompt.txt").write_text("hello", encoding="utf-8")
    from sealeval.manifest import COMPONENTS  # noqa: PLC0415

    digests = {
        name: "sha256:" + f"{index:064x}"
        for index, name in enumerate(COMPONENTS, 1)
        if name != "prompt"
    }
    sealed = sealeval.seal_manifest({"prompt": "prompt.txt"}, digests=digests)
    assert sealeval.verify_manifest(
        sealed, {"prompt": "prompt.txt"}, digests=digests
    ).eligible_for_sealed_results
    (workspace / "manifest.json").write_text(json.dumps(sealed.to_dict()), encoding="utf-8")
    (workspace / "prompt.txt").write_text("changed", encoding="utf-8")
    drifted = sealeval.verify_manifest("manifest.json", {"prompt": "prompt.txt"}, digests=digests)
    assert not drifted.eligible_for_sealed_results
    assert "prompt" in drifted.affected_components


def test_evaluate_gates_from_objects_and_files(workspace: Path) -> None:
    from sealeval.gates.suites import bundled_suite_evidence, evidence_envelope  # noqa: PLC0415

    evidence = list(bundled_suite_evidence("adversarial"))
    candidate = "sha256:" + "a" * 64
    report = sealeval.evaluate_gates(evidence, candidate_digest=candidate)
    envelope = evidence_envelope(tuple(evidence), source_sha="b" * 40)
    (workspace / "evidence.json").write_text(json.dumps(envelope), encoding="utf-8")
    from_file = sealeval.evaluate_gates("evidence.json", candidate_digest=candidate)
    assert from_file.to_json() == report.to_json()
    with pytest.raises(SealevalError) as caught:
        sealeval.evaluate_gates(evidence, candidate_digest="not-a-digest")
    assert caught.value.code == "invalid_digest"


# ---------------------------------------------------------------------------
# Policies: paths, strict YAML, the same digest


def test_yaml_and_json_policy_have_one_digest(workspace: Path) -> None:
    _starters()
    from_yaml = load_comparison_policy(Path("policy.yaml"))
    (workspace / "policy.json").write_text(json.dumps(from_yaml.to_dict()), encoding="utf-8")
    assert load_comparison_policy("policy.json").digest == from_yaml.digest
    assert load_comparison_policy(str(workspace / "policy.yaml")).digest == from_yaml.digest
    text = (workspace / "policy.yaml").read_text(encoding="utf-8")
    assert load_comparison_policy(text).digest == from_yaml.digest
    assert load_comparison_policy(text.encode()).digest == from_yaml.digest


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("format: &a x\nmetrics: *a\n", "invalid_yaml"),
        ("a: 1\na: 2\n", "invalid_yaml"),
        (f"format: {CANARY}\nmetrics: []\nslices: []\n", "invalid_constant"),
    ],
    ids=["anchor", "duplicate_key", "bad_format"],
)
def test_yaml_policy_refusals(workspace: Path, content: str, code: str) -> None:
    (workspace / "bad.yaml").write_text(content, encoding="utf-8")
    with pytest.raises(ComparisonPolicyError) as caught:
        load_comparison_policy("bad.yaml")
    assert caught.value.code == code
    assert CANARY not in str(caught.value)


def test_missing_policy_file_is_not_found(workspace: Path) -> None:
    with pytest.raises(ComparisonPolicyError) as caught:
        load_comparison_policy(f"{CANARY}.json")
    assert (caught.value.code, caught.value.field) == ("not_found", "policy")
    assert CANARY not in str(caught.value)


# ---------------------------------------------------------------------------
# sealeval init, through the real commands


def test_init_starters_through_the_real_commands(workspace: Path) -> None:
    _starters()
    assert _invoke("evaluate", "--keygen", "keys")[0] == 0
    code, out, _ = _invoke(
        "evaluate", "request.yaml", "--signing-key", "keys/private.pem", "--json"
    )
    assert code == 0
    result = json.loads(out)
    assert result["decision"] == "pass"
    from sealeval.captured.signing import load_signing_key  # noqa: PLC0415

    fingerprint = load_signing_key("keys/private.pem").fingerprint
    code, out, _ = _invoke(
        "init",
        "trust",
        "--baseline-run-digest",
        result["baseline_run_digest"],
        "--subject-run-digest",
        result["subject_run_digest"],
        "--request-digest",
        result["request_digest"],
        "--evidence-signer-fingerprint",
        fingerprint,
    )
    assert code == 0
    assert "sealeval verify" in out
    code, _, _ = _invoke(
        "verify", "evidence", "--trust-profile", "trust.json", "--receipt", "receipt.json"
    )
    assert code == 0
    assert _invoke("report", "evidence", "--html", "report.html")[0] == 0
    compared = _invoke(
        "compare", "inputs/baseline.jsonl", "inputs/subject.jsonl", "--policy", "policy.yaml"
    )
    assert compared[0] == 2  # compare takes run files (sealeval import), not result files


def _cli_walks() -> list[list[list[str]]]:
    """The sh blocks of docs/cli.md's walk: commands (comments dropped, lines joined)."""
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    walk = text.split("## From nothing to a signed, verified pack", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", walk, re.DOTALL)
    commands = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        commands.append(
            [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]
        )
    return commands


#: What `sealeval evaluate` prints for each digest option of `sealeval init trust`.
_PRINTED = {
    "--baseline-run-digest": "Baseline run digest",
    "--subject-run-digest": "Subject run digest",
    "--request-digest": "Request digest",
    "--evidence-signer-fingerprint": "Signer fingerprint",
}


def test_documented_cli_walk_runs_as_written(workspace: Path) -> None:
    walk, gates = _cli_walks()
    assert walk[0][:2] == ["sealeval", "init"]  # it starts from sealeval init
    printed: dict[str, str] = {}
    for argv in walk:
        assert argv[0] == "sealeval"
        args = argv[1:]
        if args[:2] == ["init", "trust"]:  # each D: the digest evaluate printed for it
            args = [
                printed[_PRINTED[args[index - 1]]] if arg == "D" else arg
                for index, arg in enumerate(args)
            ]
        code, out, err = _invoke(*args)
        assert code == 0, (argv, err)
        printed.update(
            line.split(": ", 1) for line in (out + err).splitlines() if ": sha256:" in line
        )
    receipt = json.loads((workspace / "receipt.json").read_text(encoding="utf-8"))
    statement = receipt["statement"]
    assert statement["format"].endswith("evidence-verification-receipt-v3")
    assert statement["pack_manifest_digest"] == printed["Pack manifest digest"]
    assert "<html" in (workspace / "report.html").read_text(encoding="utf-8").lower()
    for argv in gates:
        args = ["sha256:" + "c" * 64 if arg == "sha256:HEX" else arg for arg in argv[1:]]
        code, out, err = _invoke(*args)
        assert code == 0, (argv, err)
    assert "decision: READY" in out


def test_init_session_runs_with_the_demo_data(workspace: Path) -> None:
    demo = resources.files("sealeval") / "_data" / "demo" / "session"
    with resources.as_file(demo) as source:
        shutil.copytree(source, workspace / "session")
    os.chdir(workspace / "session")
    assert _invoke("init", "session")[0] == 0
    text = (workspace / "session" / "session.yaml").read_text(encoding="utf-8")
    assert text.startswith("# ")
    result = subprocess.run(
        [sys.executable, "-m", "sealeval", "session", "run", "session.yaml"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "session digest" in result.stdout


def test_init_gate_sources_evaluates_like_the_demo_evidence(workspace: Path) -> None:
    code, out, _ = _invoke("init", "gate-sources")
    assert code == 0
    assert "sealeval gates evaluate gate-sources.yaml" in out
    assert (workspace / "gate-sources.yaml").read_text(encoding="utf-8").startswith("# sealeval")
    candidate = "sha256:" + "c" * 64
    code, out, err = _invoke(
        "gates", "evaluate", "gate-sources.yaml", "--candidate-digest", candidate, "--json"
    )
    assert (code, err) == (0, "")
    from_yaml = json.loads(out)
    assert from_yaml["decision"] == "READY"
    demo = resources.files("sealeval") / "_data" / "gates" / "baseline_pass.json"
    (workspace / "demo.json").write_bytes(demo.read_bytes())  # what `sealeval demo` writes
    code, out, _ = _invoke(
        "gates", "evaluate", "demo.json", "--candidate-digest", candidate, "--json"
    )
    assert code == 0
    assert json.loads(out) == from_yaml  # same evidence, same report digest


@pytest.mark.parametrize(
    ("content", "code", "line"),
    [
        ("- {a: &x 1, b: *x}\n", 2, "sealeval: error: evidence: anchor_or_alias"),
        ("- [\n", 2, "sealeval: error: evidence: invalid_yaml"),
        ("- {metric: x, metric: y}\n", 2, "sealeval: error: evidence: duplicate_key"),
        (f"- {{metric: {CANARY}}}\n", 2, None),
    ],
    ids=["anchor", "syntax", "duplicate_key", "shape"],
)
def test_gate_evidence_yaml_refusals(
    workspace: Path, content: str, code: int, line: str | None
) -> None:
    (workspace / "bad.yml").write_text(content, encoding="utf-8")
    result = _invoke("gates", "evaluate", "bad.yml", "--candidate-digest", "sha256:" + "c" * 64)
    assert result[0] == code
    if line is not None:
        assert result[2] == line + "\n"
    assert result[2].startswith("sealeval: error: evidence")
    assert CANARY not in result[1] + result[2]


@pytest.mark.parametrize("kind", ["policy", "request", "session", "gate-sources"])
def test_init_never_replaces(workspace: Path, kind: str) -> None:
    target = workspace / f"{kind}.yaml"
    target.write_text(CANARY, encoding="utf-8")
    code, out, err = _invoke("init", kind)
    assert code == 2
    assert "--output: output_exists" in err
    assert CANARY not in out + err
    assert target.read_text(encoding="utf-8") == CANARY


def test_init_trust_refuses_a_bad_anchor_by_option(workspace: Path) -> None:
    digest = "sha256:" + "0" * 64
    code, out, err = _invoke(
        "init",
        "trust",
        "--baseline-run-digest",
        CANARY,
        "--subject-run-digest",
        digest,
        "--request-digest",
        digest,
        "--evidence-signer-fingerprint",
        digest,
    )
    assert code == 2
    assert "--baseline-run-digest: invalid_digest" in err
    assert CANARY not in out + err
    assert not (workspace / "trust.json").exists()


def test_init_starters_are_commented() -> None:
    for name in ("policy.yaml", "request.yaml", "session.yaml", "gate-sources.yaml"):
        text = (resources.files("sealeval") / "_data" / "init" / name).read_text(encoding="utf-8")
        assert text.startswith("# sealeval"), name


# ---------------------------------------------------------------------------
# docs/cli.md: one exit-code table naming every command


def test_cli_exit_table_names_every_command() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `sealeval ")]
    named = {re.match(r"\| `sealeval ([a-z-]+)", row).group(1) for row in rows}  # type: ignore[union-attr]
    assert named == set(COMMANDS)


@pytest.mark.parametrize(
    ("text", "code"),
    [("x" * 300, "invalid_type"), ("x" * 5000, "invalid_type"), ("a\x00b", "invalid_yaml")],
    ids=["long", "longer", "nul"],
)
def test_text_that_cannot_name_a_file_is_a_document(workspace: Path, text: str, code: str) -> None:
    with pytest.raises(ComparisonPolicyError) as caught:
        load_comparison_policy(text)  # document text (a YAML scalar), not a file name
    assert caught.value.code == code
    assert text not in str(caught.value)
