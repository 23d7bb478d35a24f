"""The command line guides: outputs print what the next command needs; refusals name options."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.cli import cli

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
CANARY = "CANARY-91c2-do-not-echo"


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    for kind in ("policy", "request"):
        assert _invoke("init", kind)[0] == 0
    assert _invoke("evaluate", "--keygen", "keys")[0] == 0
    code, out, err = _invoke("evaluate", "request.yaml", "--signing-key", "keys/private.pem")
    assert code == 0
    assert "Recorded policy result: pass" in out
    assert "sha256:" not in out  # standard output keeps the reference's lines
    return err


def test_evaluate_prints_the_digests_and_the_verify_command_on_stderr(published: str) -> None:
    fields = dict(line.split(": ", 1) for line in published.splitlines() if ": sha256:" in line)
    for name in (
        "Pack manifest digest",
        "Baseline run digest",
        "Subject run digest",
        "Request digest",
        "Policy digest",
        "Signer fingerprint",
    ):
        assert DIGEST.fullmatch(fields[name]), name
    command = next(line.strip() for line in published.splitlines() if "sealeval verify" in line)
    assert f"--expected-baseline-run {fields['Baseline run digest']}" in command
    assert f"--expected-subject-run {fields['Subject run digest']}" in command
    assert f"--expected-request-digest {fields['Request digest']}" in command
    assert f"--expected-signer {fields['Signer fingerprint']}" in command


def test_the_printed_verify_command_verifies(published: str) -> None:
    command = next(line.strip() for line in published.splitlines() if "sealeval verify" in line)
    args = command.split()[1:]
    filled = {"POLICY": "policy.yaml", "KEY": "keys/private.pem", "ID": "example.org/verifier"}
    code, out, err = _invoke(*[filled.get(arg, arg) for arg in args])
    assert code == 0, err
    assert "Policy result: pass" in out


def test_missing_anchors_name_every_missing_option(published: str) -> None:
    digests = DIGEST.findall(published)
    code, _, err = _invoke(
        "verify",
        "evidence",
        "--receipt",
        "receipt.json",
        "--expected-subject-run",
        digests[2],
        "--policy",
        "policy.yaml",
    )
    assert code == 2
    lines = err.splitlines()
    # the first line names the option the user did not type, not the library's field
    assert lines[0] == "sealeval: error: --expected-baseline-run: missing_input"
    assert "anchors." not in err
    missing = lines[1].removeprefix("sealeval: also missing: ").split(", ")
    assert missing == [
        "--expected-request-digest",
        "--expected-signer",
        "--verifier-identity",
        "--verifier-signing-key",
    ]
    assert "--trust-profile" in lines[2]


def test_missing_receipt_names_the_option(published: str) -> None:
    code, _, err = _invoke("verify", "evidence", "--trust-profile", f"{CANARY}.json")
    assert code == 2
    assert CANARY not in err


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [("jsnol", "jsonl"), ("inspect_json", "inspect-json"), ("LM-EVAL-SAMPLES", "lm-eval-samples")],
)
def test_unknown_adapter_lists_names_and_suggests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str, suggested: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results.jsonl").write_text('{"id": "a"}\n', encoding="utf-8")
    code, _, err = _invoke(
        "import",
        "results.jsonl",
        "--adapter",
        typed,
        "--source",
        "x@1",
        "--run-id",
        "r",
        "-o",
        "run.json",
    )
    assert code == 2
    lines = err.splitlines()
    assert lines[0] == "sealeval: error: adapter: unknown_adapter"
    listed = lines[1].removeprefix("sealeval: valid adapters: ").split(", ")
    assert {"auto", "jsonl", "invarlock"} <= set(listed)
    assert lines[2] == f"sealeval: did you mean --adapter {suggested}?"
    assert typed not in err.replace(suggested, "")
    assert not (tmp_path / "run.json").exists()


def test_unknown_adapter_is_never_echoed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results.jsonl").write_text('{"id": "a"}\n', encoding="utf-8")
    code, out, err = _invoke("import", "results.jsonl", "--adapter", CANARY, "-o", "run.json")
    assert code == 2
    assert CANARY not in out + err
    assert "did you mean" not in err


def test_report_names_sealeval_and_is_quiet_when_writing(published: str) -> None:
    code, out, _ = _invoke("report", "evidence", "--markdown", "report.md", "--junit", "junit.xml")
    assert code == 0
    assert out == ""  # quiet: the files are the output
    markdown = Path("report.md").read_text(encoding="utf-8")
    junit = Path("junit.xml").read_text(encoding="utf-8")
    assert markdown.startswith("# sealeval captured comparison")
    assert "sealeval verify" in markdown
    assert "invarlock" not in markdown.lower().replace("invarlock/", "")
    assert 'name="sealeval recorded policy checks"' in junit
    code, out, _ = _invoke("report", "evidence")
    assert code == 0
    assert out == markdown  # no file: the Markdown goes to standard output


def test_report_compat_keeps_the_reference_wording(published: str) -> None:
    code, _, _ = _invoke(
        "report", "evidence", "--markdown", "ref.md", "--junit", "ref.xml", "--compat", "invarlock"
    )
    assert code == 0
    markdown = Path("ref.md").read_text(encoding="utf-8")
    assert markdown.startswith("# InvarLock captured comparison")
    assert "invarlock verify" in markdown
    assert 'name="InvarLock recorded policy checks"' in Path("ref.xml").read_text(encoding="utf-8")
    ours = _invoke("report", "evidence")[1]
    assert (
        ours.replace("# sealeval", "# InvarLock").replace("sealeval verify", "invarlock verify")
        == markdown
    )


@pytest.fixture
def starters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for kind in ("policy", "request"):
        assert _invoke("init", kind)[0] == 0
    return tmp_path


def test_evaluate_without_a_key_names_the_options(starters: Path) -> None:
    code, out, err = _invoke("evaluate", "request.yaml")
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == "sealeval: error: --signing-key: signing_key_required"
    assert "--signing-key KEY" in lines[1]
    assert "--unsigned" in lines[1]


def test_evaluate_into_an_existing_folder_names_the_remedy(starters: Path) -> None:
    (starters / "evidence").mkdir()
    code, _, err = _invoke("evaluate", "request.yaml", "--unsigned")
    assert code == 2
    lines = err.splitlines()
    assert lines[0].endswith(": output_exists")
    assert "--output DIR" in lines[1]


# ---------------------------------------------------------------------------
# A recorded score without the policy's accepted provenance: re-import with it

PROVENANCE = {
    "grade": {
        "kind": "external_metric",
        "source": "demo-grader",
        "version": "1.0",
        "unit": "score",
        "rubric_digest": None,
    }
}
RECORDED_POLICY = {
    "format": "invarlock/comparison-policy-v1",
    "metrics": [
        {
            "name": "grade",
            "kind": "recorded",
            "score_key": "grade",
            "accepted_provenance": PROVENANCE["grade"],
            "configuration": {},
            "direction": "higher",
            "unit": "score",
            "aggregation": "mean",
            "minimum_count": 10,
            "maximum_regression": 0.5,
            "maximum_interval_width": 1,
        }
    ],
    "slices": [],
}


def _graded(tmp_path: Path) -> None:
    for side in ("baseline", "subject"):
        rows = [
            {"id": f"case-{n:03}", "input": f"q{n}", "expected": "a", "output": "a"}
            | {"scores": {"grade": 1.0 if n % 4 else 0.0}}
            for n in range(40)
        ]
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (tmp_path / f"{side}.jsonl").write_text(text, encoding="utf-8")
    (tmp_path / "policy.json").write_text(json.dumps(RECORDED_POLICY), encoding="utf-8")
    (tmp_path / "provenance.json").write_text(json.dumps(PROVENANCE), encoding="utf-8")


def _import_graded(side: str, *extra: str) -> None:
    code, _, err = _invoke(
        "import",
        f"{side}.jsonl",
        "--adapter",
        "jsonl",
        "--source",
        "demo-evaluator@1.0",
        "--run-id",
        side,
        "--artifact-digest",
        "sha256:" + "1" * 64,
        "-o",
        f"{side}{'.provenance' if extra else ''}.run.json",
        *extra,
    )
    assert code == 0, err


def test_missing_score_provenance_names_the_re_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _graded(tmp_path)
    for side in ("baseline", "subject"):
        _import_graded(side)
    code, out, err = _invoke(
        "compare", "baseline.run.json", "subject.run.json", "--policy", "policy.json"
    )
    assert (code, out) == (2, "")
    first, remedy = [line for line in err.splitlines() if not line.startswith("planned ")]
    assert first.endswith(": provenance_mismatch")
    assert "re-import the runs with --score-provenance FILE" in remedy
    # following the remedy works
    for side in ("baseline", "subject"):
        _import_graded(side, "--score-provenance", "provenance.json")
    code, out, err = _invoke(
        "compare",
        "baseline.provenance.run.json",
        "subject.provenance.run.json",
        "--policy",
        "policy.json",
    )
    assert code == 0
    assert all(line.startswith("planned ") for line in err.splitlines())  # the plan only


def test_evaluate_names_the_score_provenance_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _graded(tmp_path)
    for side in ("baseline", "subject"):
        _import_graded(side)
    assert _invoke("init", "request")[0] == 0
    request = (tmp_path / "request.yaml").read_text(encoding="utf-8")
    for side in ("baseline", "subject"):
        request = request.replace(f"path: inputs/{side}.jsonl", f"path: {side}.run.json")
    request = request.replace("adapter: jsonl", "adapter: invarlock")  # the imported runs
    request = "".join(  # an imported run states its own identities
        line
        for line in request.splitlines(keepends=True)
        if not line.lstrip().startswith(("source:", "run_id:", "artifact_digest:"))
    )
    (tmp_path / "request.yaml").write_text(
        request.replace("policy: policy.yaml", "policy: policy.json"), encoding="utf-8"
    )
    code, _, err = _invoke("evaluate", "request.yaml", "--unsigned")
    assert code == 2
    refusal = [line for line in err.splitlines() if not line.startswith("planned ")]
    assert refusal[0].endswith(": provenance_mismatch")
    assert "--score-provenance FILE" in refusal[1]
    assert not (tmp_path / "evidence").exists()
