"""``sealeval compare`` human output: fits the width, names whole, means on every row, HTML units.

Runs the command on the runs and policy of every reference evidence pack (facts of each pack,
never literals copied from a vector) at 80 and 200 columns, and renders the same pack's HTML
report to check that both show the same numbers in the same units.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.captured.pack_reader import read_evidence_pack
from sealeval.captured.report import render_html
from sealeval.captured.scorers import BINARY_KINDS
from sealeval.cli.compare import EXIT_POLICY_NOT_PASSED, compare_command
from support.vectors import pack_folder, vectors_dir

PACKS = vectors_dir() / "invarlock" / "packs"
WIDTHS = (80, 200)
# A number with its unit as the reports show them: ``73.5%``, ``+1.2 pp``, ``0.98 ratio``,
# ``131.9 milliseconds`` (the metric's own unit).
NUMBER_UNIT = re.compile(r"([+-]?[0-9][0-9.e+-]*)(%| [a-z][a-z /]*)")


def _evidence() -> list[Any]:
    found = sorted(
        path / "evidence"
        for path in PACKS.iterdir()
        if (path / "evidence" / "records" / "baseline.json").is_file()
        and (path / "evidence" / "inputs" / "policy.json").is_file()
    )
    assert found, "no reference packs with runs and a policy"
    return [pytest.param(path, id=path.parent.name) for path in found]


def _compare(evidence: Path, width: int, *extra: str) -> Any:
    records = evidence / "records"
    argv = [
        str(records / "baseline.json"),
        str(records / "subject.json"),
        "--policy",
        str(evidence / "inputs" / "policy.json"),
        *extra,
    ]
    return CliRunner(env={"COLUMNS": str(width)}).invoke(
        compare_command, argv, catch_exceptions=False
    )


def _report(evidence: Path) -> dict[str, Any]:
    document = json.loads((evidence / "reports" / "evaluation.report.json").read_bytes())
    assert isinstance(document, dict)
    return document


def _html_text(evidence: Path) -> str:
    page = render_html(read_evidence_pack(evidence))
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _blocks(out: str) -> list[dict[str, str]]:
    """The stacked layout's blocks: label -> value (wrapped lines joined)."""
    blocks: list[dict[str, str]] = []
    label = ""
    for line in out.splitlines():
        match = re.fullmatch(
            r"(metric|slice|decision|pairs|baseline|subject|change|interval"
            r"|reasons) +(.*)",
            line,
        )
        if match is not None:
            label = match.group(1)
            if label == "metric":
                blocks.append({})
            blocks[-1][label] = match.group(2).strip()
        elif blocks and label and line.startswith(" ") and line.strip():
            blocks[-1][label] += " " + line.strip()
        else:
            label = ""
    return blocks


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("evidence", _evidence())
def test_human_output_fits_and_is_whole(evidence: Path, width: int) -> None:
    report = _report(evidence)
    result = _compare(evidence, width)
    assert result.exit_code == (0 if report["decision"] == "pass" else EXIT_POLICY_NOT_PASSED)
    # standard error holds the planned draws at most (none for binary metrics only)
    resampled = any(
        entry["kind"] not in BINARY_KINDS and entry["count"] > 0 for entry in report["metrics"]
    )
    planned = [line for line in result.stderr.splitlines() if line]
    assert len(planned) <= 1
    assert all(line.startswith("planned bootstrap draws: ") for line in planned)
    assert bool(planned) == resampled
    out = result.stdout
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines)
    assert "\u2026" not in out
    for entry in report["metrics"]:
        for name in (entry["name"], entry["slice"], *entry["reasons"]):
            assert name in out
    assert f"decision: {report['decision']}" in out
    blocks = _blocks(out)
    if blocks:  # the stacked layout: one block per entry, means in every block
        assert len(blocks) == len(report["metrics"])
        for block, entry in zip(blocks, report["metrics"], strict=True):
            assert (block["metric"], block["slice"]) == (entry["name"], entry["slice"])
            assert block["decision"] == entry["decision"]
            for side in ("baseline", "subject"):
                assert block[side] != "-"
                if block[side] == "n/a":
                    assert "no scored pairs" in block["reasons"]
                else:
                    assert NUMBER_UNIT.fullmatch(block[side]) is not None
    else:  # the full table: one line per entry, no placeholder for a mean
        for entry in report["metrics"]:
            row = next(line for line in lines if entry["name"] in line and entry["slice"] in line)
            cells = [cell.strip() for cell in re.split(r"[│|]", row) if cell.strip()]
            assert cells[3] != "-"
            assert cells[4] != "-"


def test_narrow_terminal_uses_the_stacked_layout() -> None:
    evidence = next(
        path.values[0]
        for path in _evidence()
        if any(entry["slice"] != "overall" for entry in _report(path.values[0])["metrics"])
    )
    narrow = _compare(evidence, 80).stdout
    assert len(_blocks(narrow)) == len(_report(evidence)["metrics"])
    assert max(len(line) for line in narrow.splitlines()) <= 80


@pytest.mark.parametrize("evidence", _evidence())
def test_units_agree_with_the_html_report(evidence: Path) -> None:
    report = _report(evidence)
    page = _html_text(evidence)
    out = _compare(evidence, 80).stdout
    blocks = _blocks(out)
    assert len(blocks) == len(report["metrics"])
    units: set[str] = set()
    for block, entry in zip(blocks, report["metrics"], strict=True):
        if entry["interval"] is None:
            continue
        for label in ("baseline", "subject", "change"):
            shown = NUMBER_UNIT.fullmatch(block[label])
            assert shown is not None, label
            number, unit = shown.groups()
            float(number)  # a number, which the HTML must show with the same unit
            assert re.search(re.escape(number) + r"\s*" + re.escape(unit.strip()), page), label
            units.add(unit.strip())
        bounds = re.search(r"\S+ to \S+ [a-z%/ ]+$", block["interval"])
        assert bounds is not None
        assert bounds.group(0) in page
    if any(entry["interval"] is not None for entry in report["metrics"]):
        assert units


def test_insufficient_rows_show_means() -> None:
    evidence = pack_folder("missing-insufficient-signed") / "evidence"
    if not evidence.is_dir():
        evidence = next(
            path.values[0]
            for path in _evidence()
            if any(entry["interval"] is None for entry in _report(path.values[0])["metrics"])
        )
    report = _report(evidence)
    unevaluated = [entry for entry in report["metrics"] if entry["interval"] is None]
    assert unevaluated
    blocks = _blocks(_compare(evidence, 80).stdout)
    for block, entry in zip(blocks, report["metrics"], strict=True):
        if entry["interval"] is not None:
            continue
        usable = entry["count"] - len(entry["missing_ids"])
        if usable == 0:
            assert block["baseline"] == "n/a"
            assert "no scored pairs" in block["reasons"]
        else:
            assert re.search(r"[0-9]", block["baseline"]) is not None
            assert f"means over the {usable:,} scored pairs" in block["reasons"]


@pytest.mark.parametrize("width", WIDTHS)
def test_json_ignores_the_width(width: int) -> None:
    evidence = _evidence()[0].values[0]
    narrow = _compare(evidence, width, "--json")
    wide = _compare(evidence, 1000, "--json")
    assert narrow.stdout_bytes == wide.stdout_bytes
    assert json.loads(narrow.stdout_bytes)["decision"] == _report(evidence)["decision"]


def test_no_scored_pairs_says_not_available(tmp_path: Path) -> None:
    """A subject whose every record failed: no mean exists, ``n/a`` and why, never a number."""
    evidence = _evidence()[0].values[0]
    document = json.loads((evidence / "records" / "subject.json").read_bytes())
    for record in document["records"]:
        record["error"] = "provider timeout"
        record["output"] = None
    subject = tmp_path / "subject.json"
    subject.write_text(json.dumps(document), encoding="utf-8")
    argv = [
        str(evidence / "records" / "baseline.json"),
        str(subject),
        "--policy",
        str(evidence / "inputs" / "policy.json"),
    ]
    result = CliRunner(env={"COLUMNS": "80"}).invoke(compare_command, argv, catch_exceptions=False)
    assert result.exit_code == EXIT_POLICY_NOT_PASSED
    blocks = _blocks(result.stdout)
    assert blocks
    for block in blocks:
        assert block["decision"] == "insufficient_evidence"
        assert (block["baseline"], block["subject"]) == ("n/a", "n/a")
        assert "no scored pairs" in block["reasons"]
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
