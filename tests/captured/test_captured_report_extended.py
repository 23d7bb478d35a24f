"""Opt-in extended statistics in every report format (Markdown, HTML, JUnit, CLI).

Uses the reference's evidence-pack vectors; asserts facts derived from each
pack's own runs (flip ids, counts), never literals copied from a vector.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.captured.extended import EXTENSION_FORMAT, parse_policy_extension
from sealeval.captured.pack_reader import EvidencePack, read_evidence_pack
from sealeval.captured.report import (
    ReportError,
    extended_for_pack,
    render_html,
    render_junit,
    render_markdown,
)
from sealeval.cli.report import report_command
from support.vectors import pack_folder

NAMES = ["text-200-multi-signed", "text-20-exact-signed", "missing-insufficient-signed"]


def _pack(name: str) -> EvidencePack:
    return read_evidence_pack(pack_folder(name) / "evidence")


def _extended(pack: EvidencePack, **members: Any) -> dict[str, Any]:
    extension = parse_policy_extension(
        {"format": EXTENSION_FORMAT, "policy_digest": pack.policy.digest, **members}
    )
    return extended_for_pack(pack, extension)


@pytest.mark.parametrize("name", NAMES)
def test_markdown_html_and_junit_show_the_flips(name: str) -> None:
    pack = _pack(name)
    document = _extended(pack, flip_ids=5)
    plain = render_markdown(pack)
    markdown = render_markdown(pack, extended=document)
    assert markdown.startswith(plain[: plain.index("## Evidence identities")])
    assert "## Extended statistics (sealeval)" in markdown
    assert "## Extended statistics" not in plain
    page = render_html(pack, extended=document)
    assert 'id="extended"' in page
    assert 'id="extended"' not in render_html(pack)
    root = ET.fromstring(render_junit(pack, extended=document))
    assert render_junit(pack) != render_junit(pack, extended=document)
    cases = {(case.get("name"), case.get("classname")): case for case in root.iter("testcase")}
    assert any(row["flips"] and row["flips"]["right_to_wrong_ids"] for row in document["entries"])
    for row in document["entries"]:
        case = cases[(row["metric"], row["slice"])]
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert properties["sealeval.extended_decision"] == row["decision"]
        flips = row["flips"]
        if flips is None:
            continue
        assert properties["sealeval.right_to_wrong"] == str(flips["right_to_wrong"])
        assert properties["sealeval.wrong_to_right"] == str(flips["wrong_to_right"])
        for item in flips["right_to_wrong_ids"] + flips["wrong_to_right_ids"]:
            assert f"`{item}`" in markdown
            assert item in page
            out = case.find("system-out")
            assert out is not None
            assert item in (out.text or "")
        if row["more_pairs"] is not None:
            assert f"about {row['more_pairs']:,} more paired cases in slice" in markdown


def test_flips_are_the_pairs_that_changed(tmp_path: Path) -> None:
    pack = _pack("text-200-multi-signed")
    document = _extended(pack, flip_ids=1000)
    outputs = {record.id: record.output for record in pack.subject.records}
    baseline = {record.id: record.output for record in pack.baseline.records}
    for row in document["entries"]:
        flips = row["flips"]
        if flips is None:
            continue
        assert flips["right_to_wrong"] == len(flips["right_to_wrong_ids"])
        # a flipped pair always has a different output on the two sides
        for item in flips["right_to_wrong_ids"] + flips["wrong_to_right_ids"]:
            assert outputs[item] != baseline[item]
        assert flips["right_to_wrong_ids"] == sorted(flips["right_to_wrong_ids"])


def test_a_document_for_another_pack_is_refused() -> None:
    pack = _pack("text-20-exact-signed")
    other = _extended(_pack("text-200-multi-signed"))
    with pytest.raises(ReportError) as refused:
        render_markdown(pack, extended=other)
    assert refused.value.code == "extended_mismatch"
    document = _extended(pack)
    document["entries"] = document["entries"][::-1]
    if len(document["entries"]) > 1:
        with pytest.raises(ReportError) as refused:
            render_html(pack, extended=document)
        assert (refused.value.code, refused.value.field) == (
            "extended_mismatch",
            "extended.entries",
        )
    document = _extended(pack, flip_ids=3)
    for row in document["entries"]:
        if row["flips"] is not None:
            row["flips"]["right_to_wrong_ids"] = ["not-a-record-id"]
    with pytest.raises(ReportError) as refused:
        render_junit(pack, extended=document)
    assert refused.value.code == "unknown_missing_id"


def test_report_cli_extension_option(tmp_path: Path) -> None:
    name = "text-200-multi-signed"
    pack = _pack(name)
    extension = tmp_path / "extension.json"
    extension.write_text(
        json.dumps({"format": EXTENSION_FORMAT, "policy_digest": pack.policy.digest}),
        encoding="utf-8",
    )
    evidence = str(pack_folder(name) / "evidence")
    result = CliRunner().invoke(report_command, [evidence, "--extension", str(extension)])
    assert result.exit_code == 0, result.output
    assert "## Extended statistics (sealeval)" in result.output
    plain = CliRunner().invoke(report_command, [evidence])
    assert "## Extended statistics" not in plain.output
    extension.write_text(
        json.dumps({"format": EXTENSION_FORMAT, "policy_digest": "sha256:" + "0" * 64}),
        encoding="utf-8",
    )
    result = CliRunner().invoke(report_command, [evidence, "--extension", str(extension)])
    assert result.exit_code == 2
    assert "policy_mismatch" in result.output
