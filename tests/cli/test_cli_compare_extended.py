"""``sealeval compare --extension``: the opt-in extended statistics through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from click.testing import CliRunner

from sealeval.canonical import decode, encode_invarlock
from sealeval.captured import write_run
from sealeval.captured.comparison import compare_runs
from sealeval.captured.policy import parse_comparison_policy
from sealeval.cli import cli
from sealeval.cli.compare import EXIT_POLICY_NOT_PASSED
from support.captured_extended import _policy, _runs
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT


def _files(tmp_path: Path, policy: dict[str, Any], **extension: Any) -> list[str]:
    baseline, subject = _runs(pairs=60, seed=9)
    write_run(baseline, tmp_path / "baseline.json")
    write_run(subject, tmp_path / "subject.json")
    (tmp_path / "policy.json").write_text(json.dumps(policy), encoding="utf-8")
    document = {
        "format": "sealeval/comparison-policy-extension-v1",
        "policy_digest": parse_comparison_policy(policy).digest,
        **extension,
    }
    (tmp_path / "extension.json").write_text(json.dumps(document), encoding="utf-8")
    return [
        "compare",
        str(tmp_path / "baseline.json"),
        str(tmp_path / "subject.json"),
        "--policy",
        str(tmp_path / "policy.json"),
    ]


def test_without_extension_the_json_is_the_reference_bytes(tmp_path: Path) -> None:
    policy = _policy(maximum_regression=0.01, width=0.5)
    arguments = _files(tmp_path, policy)
    result = CliRunner().invoke(cli, [*arguments, "--json"])
    baseline, subject = _runs(pairs=60, seed=9)
    reference = compare_runs(baseline=baseline, subject=subject, policy=policy)
    assert result.stdout_bytes == reference.canonical_bytes
    assert result.exit_code == EXIT_POLICY_NOT_PASSED


def test_extension_json_is_the_extended_report_and_decides_the_exit(tmp_path: Path) -> None:
    policy = _policy(maximum_regression=0.01, width=0.5)
    arguments = _files(tmp_path, policy, multiplicity="holm", flip_ids=2)
    extension = str(tmp_path / "extension.json")
    result = CliRunner().invoke(cli, [*arguments, "--extension", extension, "--json"])
    document = decode(result.stdout_bytes)
    schema_path = PROJECT_ROOT / "contracts" / "sealeval.extended-comparison-v1.schema.json"
    jsonschema.validate(document, json.loads(schema_path.read_text(encoding="utf-8")))
    assert result.stdout_bytes == encode_invarlock(document)
    assert document["reference_decision"] == "regression"
    assert document["decision"] == "insufficient_evidence"
    assert result.exit_code == EXIT_POLICY_NOT_PASSED
    for row in document["entries"]:
        assert len(row["flips"]["right_to_wrong_ids"]) <= 2


def test_extension_table_shows_flips_and_how_many_more(tmp_path: Path) -> None:
    policy = _policy(maximum_regression=0.01, width=0.5)
    arguments = _files(tmp_path, policy, multiplicity="holm", flip_ids=2)
    extension = str(tmp_path / "extension.json")
    result = CliRunner().invoke(cli, [*arguments, "--extension", extension])
    document = decode(
        CliRunner().invoke(cli, [*arguments, "--extension", extension, "--json"]).stdout_bytes
    )
    output = result.stdout
    assert "extended statistics" in output
    assert "multiplicity: holm at 0.05 over 2 entries" in output
    for row in document["entries"]:
        first = row["flips"]["right_to_wrong_ids"][0]
        assert first in output
    assert "extended decision: insufficient_evidence" in output
    assert CANARY not in output  # ids only: no input, output or expected text


def test_extension_table_says_how_many_more_pairs_each_slice_needs(tmp_path: Path) -> None:
    arguments = _files(tmp_path, _policy(maximum_regression=0.5, width=0.15))
    extension = str(tmp_path / "extension.json")
    result = CliRunner().invoke(cli, [*arguments, "--extension", extension])
    document = decode(
        CliRunner().invoke(cli, [*arguments, "--extension", extension, "--json"]).stdout_bytes
    )
    assert all(row["more_pairs"] for row in document["entries"])
    for row in document["entries"]:
        line = f"about {row['more_pairs']:,} more paired cases in slice {row['slice']}"
        assert line in result.stdout


def test_extension_refusals_name_the_option(tmp_path: Path) -> None:
    policy = _policy()
    arguments = _files(tmp_path, policy)
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {
                "format": "sealeval/comparison-policy-extension-v1",
                "policy_digest": "sha256:" + "0" * 64,
            }
        ),
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, [*arguments, "--extension", str(other)])
    assert result.exit_code == 2
    assert "sealeval: error: policy_digest: policy_mismatch" in result.output
    other.write_text(json.dumps({"format": CANARY}), encoding="utf-8")
    result = CliRunner().invoke(cli, [*arguments, "--extension", str(other)])
    assert result.exit_code == 2
    assert "sealeval: error: extension" in result.output
    assert CANARY not in result.output
    assert str(tmp_path) not in result.output
