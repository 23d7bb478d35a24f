"""Readable reports of captured evidence packs: vectors, consistency checks, CLI, never-echo.

Vectors: every case of ``invarlock/report.json`` runs through the ``report``
command. Markdown, JUnit XML and the JSON result are compared byte for byte;
the HTML is sealeval's own richer page (an expected deviation, see
``docs/reports.md``), so for the cases that carry invarlock's HTML we assert
that the facts it shows — decision, each entry's values, digests, signing and
verification status, the no-authority notice — appear in ours.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import html
import json
import math
import os
import re
import shutil
import stat
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import junitparser
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sealeval.captured.pack_reader as reader_module
import sealeval.cli.report as cli_report
from sealeval._validate import freeze_json, thaw_json
from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import WIDTH_FIRST_RULE
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack import prepare_pack, publish_pack
from sealeval.captured.pack_reader import (
    UNCAPPED_PACK_LIMITS,
    EvidencePack,
    EvidencePackError,
    read_evidence_pack,
)
from sealeval.captured.policy import ComparisonPolicy, ComparisonPolicyError
from sealeval.captured.report import (
    ReportError,
    VerificationStatus,
    check_consistency,
    display_name,
    display_order,
    encode_result,
    explanation,
    render_html,
    render_junit,
    render_markdown,
    report_result,
)
from sealeval.captured.request import load_captured_request
from sealeval.captured.run import Run
from sealeval.captured.run_facts import RunFacts
from sealeval.captured.scorers import score
from sealeval.captured.service_identity import ServiceIdentity
from sealeval.captured.signing import load_signing_key
from sealeval.cli.report import check_destinations, report_command
from sealeval.errors import OutputError
from support.refusals import CANARY
from support.vectors import cases, load, pack_folder, vectors_dir

VECTORS = vectors_dir() / "invarlock"
#: Every ``invarlock/packs.json`` case (folders are taken from the cases: regenerated
#: trees publish packs under other folder names).
PACK_NAMES = sorted(case["name"] for case in load("invarlock/packs.json")["cases"])

#: Vector cases carrying invarlock's HTML: sealeval's HTML deliberately differs
#: (docs/reports.md, docs/decisions/compat.md); their facts are asserted instead.
HTML_DEVIATIONS = frozenset(
    {"text-20-exact-signed--report-plain", "text-200-multi-signed--report-plain"}
)

_INPUT_KEYS = frozenset({"pack_dir", "command"})
_EXPECTED_KEYS = frozenset(
    {"exit_code", "stdout_json", "markdown_file", "junit_file", "junit_text", "html_file"}
)


@functools.cache
def _pack(name: str) -> EvidencePack:
    return read_evidence_pack(pack_folder(name) / "evidence")


@functools.cache
def _outlined(name: str) -> EvidencePack:
    """The pack with both run files streamed into outlines (what ``report`` reads at scale)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
        pack = read_evidence_pack(
            pack_folder(name) / "evidence", limits=UNCAPPED_PACK_LIMITS, runs="outline"
        )
    assert isinstance(pack.baseline, RunFacts)
    assert isinstance(pack.subject, RunFacts)
    return pack


def _variant(
    pack: EvidencePack,
    *,
    report: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
) -> EvidencePack:
    """The same pack with another (unbound) report or policy: exercises the renderer only."""
    changes: dict[str, Any] = {}
    if report is not None:
        changes["report"] = freeze_json(report, "report", error=CapturedRunError)
    if policy is not None:
        changes["policy"] = ComparisonPolicy(policy)
    return dataclasses.replace(pack, **changes)


def _report(name: str) -> dict[str, Any]:
    document: dict[str, Any] = thaw_json(_pack(name).report)
    return document


def _g(value: float) -> str:
    """A report value as the renderings print it: four significant digits (docs/reports.md)."""
    return format(value, ".4g")


def _overall(name: str, metric: str) -> dict[str, Any]:
    """The pack's stored report entry of ``metric`` on the ``overall`` slice."""
    found: dict[str, Any] = next(
        entry
        for entry in _report(name)["metrics"]
        if (entry["name"], entry["slice"]) == (metric, "overall")
    )
    return found


def _run(args: list[str]) -> Any:
    return CliRunner().invoke(report_command, args)


# ---------------------------------------------------------------------------
# Vectors


class _Text(HTMLParser):
    """Visible text of an HTML document (style contents skipped), whitespace-normalized."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)

    @classmethod
    def of(cls, document: str) -> str:
        parser = cls()
        parser.feed(document)
        parser.close()
        return re.sub(r"\s+", " ", " ".join(parser.parts))


class _Rows(HTMLParser):
    """Rows of the table with class ``overview``: (row header, [cell texts])."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: dict[str, list[str]] = {}
        self._in_table = False
        self._cell: list[str] | None = None
        self._row: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "overview") in attrs:
            self._in_table = True
        elif self._in_table and tag in ("th", "td"):
            self._cell = []
        elif self._in_table and tag == "tr":
            self._row = []

    def handle_endtag(self, tag: str) -> None:
        if not self._in_table:
            return
        if tag in ("th", "td") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row:
            self.rows[self._row[0]] = self._row[1:]
        elif tag == "table":
            self._in_table = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


_GLANCE = re.compile(
    r'<a href="#metric-result-\d+">(.*?)<span class="scope">(.*?)</span></a></th>'
    r'<td><span class="badge [^"]*">(.*?)</span></td><td>(.*?)</td><td>(.*?)</td>'
    r"<td>(.*?)</td><td>(.*?)</td>"
)
_SECTION = re.compile(
    r'<h3>(.*?)</h3><p class="scope">Scope: (.*?)</p></div><span class="badge">(.*?)</span>'
    r"(.*?)</dl>"
)
_VALUE = re.compile(r'<div class="value"><dt>[^<]*</dt><dd>(.*?)<small>')


def _reference_facts(reference: str) -> list[tuple[str, ...]]:
    """(metric, scope, decision label, baseline, subject, change, usable) per entry."""
    rows = [tuple(html.unescape(cell) for cell in row) for row in _GLANCE.findall(reference)]
    if rows:
        return rows
    facts = []
    for match in _SECTION.finditer(reference):
        values = [html.unescape(value) for value in _VALUE.findall(match.group(4))]
        assert len(values) == 4
        facts.append(tuple(html.unescape(part) for part in match.groups()[:3]) + tuple(values))
    return facts


def _assert_html_facts(reference: str, ours: str, pack: EvidencePack) -> None:
    text = _Text.of(ours)
    decision = re.findall(r'<h1 id="decision">(.*?)</h1>', reference)
    assert len(decision) == 1
    assert re.search(rf'<h1 id="decision-heading">{re.escape(decision[0])}</h1>', ours)
    facts = _reference_facts(reference)
    assert len(facts) == len(pack.report["metrics"])
    parser = _Rows()
    parser.feed(ours)
    for metric, scope, label, baseline, subject, change, usable in facts:
        cells = parser.rows[f"{metric} · {scope}"]
        assert cells[:5] == [label, baseline, subject, change, usable], (metric, scope)
    for lower, upper in re.findall(r"CI: (\S+) to \+?(\S+) pp", reference):
        assert f"{lower} to {upper} pp" in text
    digests = set(re.findall(r"sha256:[0-9a-f]{64}", reference))
    assert digests
    assert digests <= set(re.findall(r"sha256:[0-9a-f]{64}", ours))
    for label in ("Pack format", "Input checks", "Signing", "Replay and scoring"):
        shown = re.findall(rf"<dt>{label}</dt><dd>(.*?)</dd>", reference)
        assert shown
        assert html.unescape(shown[0]) in text
    notice = re.findall(r"<dt>Independent recipient verification</dt><dd>(.*?)</dd>", reference)
    assert html.unescape(notice[0]).replace("invarlock verify", "sealeval verify") in text
    assert "No verification authority" in text
    assert "confers no verification authority" in text


@pytest.mark.parametrize("streamed", [False, True], ids=["held", "outline"])
@pytest.mark.parametrize("case", cases("invarlock/report.json"))
def test_report_vector(
    case: dict[str, Any], streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every vector; ``outline``: every run file streamed into an outline (no record held)."""
    given_input, expected = case["input"], case["expected"]
    uncapped: list[str] = []
    if streamed:
        monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
        uncapped = ["--uncapped"]
    command = given_input.get("command")
    if (
        set(given_input) != _INPUT_KEYS
        or not isinstance(command, list)
        or len(command) < 2
        or command[0] != "report"
        or not set(expected) <= _EXPECTED_KEYS
        or not {"exit_code", "stdout_json"} <= set(expected)
    ):
        pytest.fail("vector case shape not understood")
    shutil.copytree(VECTORS / given_input["pack_dir"], tmp_path / command[1])
    monkeypatch.chdir(tmp_path)
    result = _run([*command[1:], *uncapped, "--compat", "invarlock"])  # the reference's bytes
    assert result.exit_code == expected["exit_code"], result.output
    assert result.stdout == encode_invarlock(expected["stdout_json"]).decode("utf-8")
    written = expected["stdout_json"]["written_outputs"]
    for path in written.values():
        assert stat.S_IMODE((tmp_path / path).stat().st_mode) == 0o600
    if "markdown_file" in expected:
        ours = (tmp_path / written["markdown"]).read_bytes()
        assert ours == (VECTORS / expected["markdown_file"]).read_bytes()
    if "junit_file" in expected:
        ours = (tmp_path / written["junit"]).read_bytes()
        assert ours == (VECTORS / expected["junit_file"]).read_bytes()
        assert ours == expected["junit_text"].encode("utf-8")
    if "html_file" in expected:
        assert case["name"] in HTML_DEVIATIONS  # an expected deviation: facts, not bytes
        reference = (VECTORS / expected["html_file"]).read_text(encoding="utf-8")
        ours_html = (tmp_path / written["html"]).read_text(encoding="utf-8")
        pack = read_evidence_pack(tmp_path / command[1])
        _assert_html_facts(reference, ours_html, pack)
    else:
        assert case["name"] not in HTML_DEVIATIONS


def test_every_html_deviation_is_a_vector_case() -> None:
    with_html = {
        c["name"] for c in load("invarlock/report.json")["cases"] if "html_file" in c["expected"]
    }
    assert with_html == HTML_DEVIATIONS


def _cli_report_cases() -> list[Any]:
    return [
        pytest.param(case, id=f"cli-{case['name']}")
        for case in load("invarlock/cli.json")["cases"]
        if case["input"].get("command", [None])[0] == "report"
    ]


@pytest.mark.parametrize("case", _cli_report_cases())
def test_cli_report_vector(
    case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cli.json`` report refusals: same exit status and JSON (our messages are our codes).

    Pack arguments under ``packs/`` are vector-folder paths; other paths are relative
    to the pack's directory, where the reference ran.
    """
    command = case["input"]["command"]
    expected = case["expected"]
    pack_argument = command[1]
    if set(case["input"]) != {"command"} or not pack_argument.startswith("packs/"):
        pytest.fail("vector case shape not understood")
    shutil.copytree(VECTORS / pack_argument, tmp_path / pack_argument, symlinks=True)
    pack_home = tmp_path / Path(*Path(pack_argument).parts[:2])
    monkeypatch.chdir(pack_home)
    result = _run([str(tmp_path / pack_argument), *command[2:]])
    assert result.exit_code == expected["exit_code"]
    ours = json.loads(result.stdout)
    # A copy: the vector data is cached for the whole session and must not change.
    reference = copy.deepcopy(expected["stdout_json"])
    assert len(ours.pop("errors")) == len(reference.pop("errors")) == 1
    assert ours == reference


@pytest.mark.parametrize("name", PACK_NAMES)
def test_junit_loads_in_standard_parsers(name: str, tmp_path: Path) -> None:
    pack = _pack(name)
    data = render_junit(pack)
    root = ET.fromstring(data)
    assert root.tag == "testsuite"
    entries = display_order(check_consistency(pack))
    cases_ = root.findall("testcase")
    assert [(c.get("name"), c.get("classname")) for c in cases_] == [
        (entry.name, entry.slice) for entry in entries
    ]
    failures = [c for c in cases_ if c.find("failure") is not None]
    errors = [c for c in cases_ if c.find("error") is not None]
    assert int(root.get("tests", "")) == len(entries)
    assert int(root.get("failures", "")) == len(failures)
    assert int(root.get("errors", "")) == len(errors)
    for case, entry in zip(cases_, entries, strict=True):
        children = list(case)
        expected_tag = {"pass": None, "regression": "failure", "insufficient_evidence": "error"}
        assert [child.tag for child in children] == (
            [] if entry.decision == "pass" else [expected_tag[entry.decision]]
        )
        if children:
            assert children[0].get("message") == explanation(entry)
    path = tmp_path / "junit.xml"
    path.write_bytes(data)
    document = junitparser.JUnitXml.fromfile(str(path))
    (suite,) = list(document)
    assert isinstance(suite, junitparser.TestSuite)
    assert suite.name == "sealeval recorded policy checks"  # the reference's with --compat
    assert (suite.tests, suite.failures, suite.errors) == (len(entries), len(failures), len(errors))
    parsed = list(suite)
    assert len(parsed) == len(entries)
    results = {"pass": [], "regression": ["Failure"], "insufficient_evidence": ["Error"]}
    for case, entry in zip(parsed, entries, strict=True):
        assert (case.name, case.classname) == (entry.name, entry.slice)
        assert case.is_passed == (entry.decision == "pass")
        assert [type(result).__name__ for result in case.result] == results[entry.decision]


@pytest.mark.parametrize("name", PACK_NAMES)
def test_every_rendering_is_deterministic(name: str) -> None:
    fresh = read_evidence_pack(pack_folder(name) / "evidence")
    cached = _pack(name)
    assert render_html(fresh) == render_html(cached)
    assert render_markdown(fresh, explain=True) == render_markdown(cached, explain=True)
    assert render_junit(fresh) == render_junit(cached)


# ---------------------------------------------------------------------------
# Display conventions and HTML structure


def test_display_names() -> None:
    assert display_name("exact") == "exact"
    assert display_name("f1") == "F1"
    assert display_name("nll") == "NLL"
    assert display_name("num-abs") == "Num abs"
    assert display_name("topic-geo") == "Topic geo"
    assert display_name("math_en") == "Math en"
    assert display_name("nll-ratio") == "NLL ratio"
    assert display_name("-edge") == "-edge"
    assert display_name("overall") == "overall"


@given(st.lists(st.sampled_from(["pass", "regression", "insufficient_evidence"]), max_size=40))
def test_display_order_is_a_stable_partition(decisions: list[str]) -> None:
    entries = [SimpleNamespace(decision=d, position=i) for i, d in enumerate(decisions)]
    ordered = display_order(entries)  # type: ignore[arg-type]
    rank = {"regression": 0, "insufficient_evidence": 1, "pass": 2}
    assert [e.decision for e in ordered] == sorted(decisions, key=rank.__getitem__)
    for decision in rank:
        group = [e.position for e in ordered if e.decision == decision]
        assert group == sorted(group)


class _Structure(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.mark.parametrize("name", PACK_NAMES)
def test_html_is_self_contained_and_accessible(name: str) -> None:
    pack = _pack(name)
    document = render_html(pack)
    parser = _Structure()
    parser.feed(document)
    tags = [tag for tag, _attrs in parser.tags]
    assert "script" not in tags
    assert not {"img", "link", "iframe", "object", "embed", "audio", "video"} & set(tags)
    for _tag, attrs in parser.tags:
        assert "src" not in attrs
        assert attrs.get("href") is None or attrs["href"].startswith("#")
    assert "http:" not in document
    assert "https:" not in document
    assert "url(" not in document
    assert "@import" not in document
    assert "default-src 'none'" in document
    svgs = [attrs for tag, attrs in parser.tags if tag == "svg"]
    assert len(svgs) == len(pack.policy.metrics)
    for attrs in svgs:
        assert attrs["role"] == "img"
        for reference in (attrs["aria-labelledby"] or "").split():
            assert f'id="{reference}"' in document
    assert tags.count("title") == 1 + len(svgs) + len(pack.report["metrics"])
    ids = [attrs["id"] for _tag, attrs in parser.tags if "id" in attrs]
    assert len(ids) == len(set(ids))
    assert document.index('id="decision"') < document.index('id="verification"')
    assert document.index('id="authority-notice"') < document.index('id="metric-1"')


def test_html_shows_missing_ids_of_the_runs_and_counts() -> None:
    pack = _pack("missing-insufficient-signed")
    document = render_html(pack)
    text = _Text.of(document)
    for entry in pack.report["metrics"]:
        for record_id in entry["missing_ids"]:
            assert f"<li><code>{record_id}</code></li>" in document
    assert "No interval: 4 missing results" in text
    assert "No interval: 3 missing results" in text


def test_missing_ids_preview_is_bounded() -> None:
    pack = _pack("missing-insufficient-signed")
    report = _report("missing-insufficient-signed")
    ids = sorted(pack.baseline.index)
    report["metrics"][0]["missing_ids"] = ids  # all 20 ids -> still complete
    report["metrics"][0]["count"] = len(ids)
    variant = _variant(pack, report=report)
    assert 'missing_ids_preview_is_complete": true' in render_markdown(variant, explain=True)
    policy = thaw_json(pack.policy.document)
    report["metrics"][0]["missing_ids"] = ids[:19]
    variant = _variant(pack, report=report, policy=policy)
    assert "and " not in _Text.of(render_html(variant)).split("Missing ids")[1][:40]


# ---------------------------------------------------------------------------
# Consistency checks (33-report.md §1)


def _mutated(name: str, mutate: Callable[[dict[str, Any]], None]) -> EvidencePack:
    report = _report(name)
    mutate(report)
    return _variant(_pack(name), report=report)


def _set(index: int, member: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(report: dict[str, Any]) -> None:
        report["metrics"][index][member] = value

    return mutate


def _overall_pass_interval(report: dict[str, Any]) -> None:
    report["metrics"][0]["interval"]["lower"] = -0.5  # beyond -0.2 but still "pass"


def _flip_regression(report: dict[str, Any]) -> None:
    report["metrics"][1]["decision"] = "pass"
    report["metrics"][1]["reasons"] = []
    report["decision"] = "pass"


_MUTATIONS: list[tuple[str, str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "not-object",
        "numeric-200-signed",
        _set(0, "name", 7),
        "invalid_entry",
        "report.metrics[0].name",
    ),
    (
        "decision",
        "numeric-200-signed",
        _set(0, "decision", "maybe"),
        "invalid_decision",
        "report.metrics[0].decision",
    ),
    (
        "scope",
        "numeric-200-signed",
        _set(1, "slice", "topic-sci"),
        "unknown_scope",
        "report.metrics[1]",
    ),
    (
        "metric",
        "numeric-200-signed",
        _set(1, "name", "num-rel"),
        "unknown_scope",
        "report.metrics[1]",
    ),
    (
        "kind",
        "numeric-200-signed",
        _set(0, "kind", "exact_match"),
        "policy_mismatch",
        "report.metrics[0].kind",
    ),
    (
        "direction",
        "numeric-200-signed",
        _set(0, "direction", "lower"),
        "policy_mismatch",
        "report.metrics[0].direction",
    ),
    (
        "unit",
        "numeric-200-signed",
        _set(0, "unit", "points"),
        "policy_mismatch",
        "report.metrics[0].unit",
    ),
    (
        "aggregation",
        "numeric-200-signed",
        _set(0, "aggregation", "median"),
        "policy_mismatch",
        "report.metrics[0].aggregation",
    ),
    (
        "assurance",
        "numeric-200-signed",
        _set(0, "scoring_assurance", "recorded"),
        "policy_mismatch",
        "report.metrics[0].scoring_assurance",
    ),
    (
        "missing-type",
        "numeric-200-signed",
        _set(0, "missing_ids", "q1"),
        "invalid_entry",
        "report.metrics[0].missing_ids",
    ),
    (
        "missing-unknown",
        "missing-insufficient-signed",
        _set(0, "missing_ids", ["q1", "zz"]),
        "unknown_missing_id",
        "report.metrics[0].missing_ids",
    ),
    (
        "missing-duplicate",
        "missing-insufficient-signed",
        _set(0, "missing_ids", ["q1", "q1"]),
        "invalid_entry",
        "report.metrics[0].missing_ids",
    ),
    (
        "count",
        "numeric-200-signed",
        _set(0, "count", "200"),
        "invalid_entry",
        "report.metrics[0].count",
    ),
    (
        "reasons",
        "numeric-200-signed",
        _set(0, "reasons", "none"),
        "invalid_entry",
        "report.metrics[0].reasons",
    ),
    (
        "mean",
        "numeric-200-signed",
        _set(0, "baseline_mean", "0.9"),
        "invalid_entry",
        "report.metrics[0].baseline_mean",
    ),
    (
        "interval",
        "numeric-200-signed",
        _set(0, "interval", {"lower": 1}),
        "invalid_entry",
        "report.metrics[0].interval",
    ),
    (
        "interval-null",
        "numeric-200-signed",
        _set(0, "interval", None),
        "invalid_entry",
        "report.metrics[0]",
    ),
    (
        "means-without-interval",
        "missing-insufficient-signed",
        _set(0, "delta", 0.1),
        "invalid_entry",
        "report.metrics[0]",
    ),
    (
        "duplicate",
        "numeric-200-signed",
        lambda r: r["metrics"].append(r["metrics"][0]),
        "duplicate_entry",
        "report.metrics[2]",
    ),
    (
        "grid",
        "numeric-200-signed",
        lambda r: r["metrics"].pop(),
        "incomplete_grid",
        "report.metrics",
    ),
    (
        "entry-type",
        "numeric-200-signed",
        lambda r: r["metrics"].__setitem__(0, []),
        "invalid_entry",
        "report.metrics[0]",
    ),
    (
        "pass-beyond-bound",
        "numeric-200-signed",
        _overall_pass_interval,
        "contradictory_decision",
        "report.metrics[0].decision",
    ),
    (
        "regression-as-pass",
        "numeric-200-signed",
        _flip_regression,
        "contradictory_decision",
        "report.metrics[1].decision",
    ),
    (
        "missing-as-pass",
        "missing-insufficient-signed",
        _set(0, "decision", "pass"),
        "contradictory_decision",
        "report.metrics[0].decision",
    ),
    (
        "too-few-evaluated",
        "lm-eval-samples-signed",
        _set(0, "count", 9),
        "contradictory_decision",
        "report.metrics[0].decision",
    ),
    (
        "overall",
        "numeric-200-signed",
        lambda r: r.__setitem__("decision", "pass"),
        "decision_mismatch",
        "report.decision",
    ),
    (
        "rule",
        "perfect-tie-20-signed",
        lambda r: r.__setitem__("decision_rule", "other/v1"),
        "unsupported_decision_rule",
        "report.decision_rule",
    ),
    (
        "width-first-tie",
        "perfect-tie-20-signed",
        lambda r: r.__setitem__("decision_rule", WIDTH_FIRST_RULE),
        "contradictory_decision",
        "report.metrics[0].decision",
    ),
]


@pytest.mark.parametrize(
    ("pack_name", "mutate", "code", "field"),
    [pytest.param(*row[1:], id=row[0]) for row in _MUTATIONS],
)
def test_inconsistent_reports_are_refused(
    pack_name: str, mutate: Callable[[dict[str, Any]], None], code: str, field: str
) -> None:
    report = _report(pack_name)
    mutate(report)
    for pack in (
        _variant(_pack(pack_name), report=report),
        _variant(_outlined(pack_name), report=report),
    ):
        for render in (
            check_consistency,
            render_markdown,
            render_junit,
            render_html,
        ):
            with pytest.raises(ReportError) as caught:
                render(pack)  # type: ignore[operator]
            assert (caught.value.code, caught.value.field) == (code, field)


@pytest.mark.parametrize("name", PACK_NAMES)
def test_outlined_packs_render_the_same_bytes(name: str) -> None:
    """Reading the runs as outlines (no record held) changes no byte of any format."""
    held, outlined = _pack(name), _outlined(name)
    assert outlined.manifest_digest == held.manifest_digest
    for side in ("baseline", "subject"):
        run, outline = getattr(held, side), getattr(outlined, side)
        assert (outline.digest, outline.canonical_size) == (run.digest, run.canonical_size)
        assert len(outline) == len(run)
        assert outline.header.canonical_parts() == run.header.canonical_parts()
        assert outline.ids == frozenset(run.index)
    for wording in ("sealeval", "invarlock"):
        assert render_markdown(outlined, explain=True, wording=wording) == render_markdown(
            held, explain=True, wording=wording
        )
        assert render_junit(outlined, wording=wording) == render_junit(held, wording=wording)
    assert render_html(outlined) == render_html(held)
    with pytest.raises(EvidencePackError) as caught:
        outlined.held_runs()
    assert (caught.value.code, caught.value.field) == ("invalid_field", "runs")
    assert held.held_runs() == (held.baseline, held.subject)


def test_width_first_reports_render_with_their_rule() -> None:
    def width_first(report: dict[str, Any]) -> None:
        report["decision_rule"] = WIDTH_FIRST_RULE
        report["decision"] = "insufficient_evidence"
        report["metrics"][0]["decision"] = "insufficient_evidence"
        report["metrics"][0]["reasons"] = ["interval is too wide"]

    pack = _mutated("perfect-tie-20-signed", width_first)
    markdown = render_markdown(pack)
    assert f"- **Decision rule:** {WIDTH_FIRST_RULE}" in markdown
    assert (
        "**More evidence needed**. The uncertainty interval is wider than the policy permits."
        in markdown
    )
    assert WIDTH_FIRST_RULE in render_html(pack)
    assert b'<error message="The uncertainty interval is wider' in render_junit(pack)


def test_interval_too_wide_is_explained() -> None:
    def too_wide(report: dict[str, Any]) -> None:
        report["metrics"][0]["decision"] = "insufficient_evidence"
        report["metrics"][0]["reasons"] = ["interval is too wide"]
        report["decision"] = "insufficient_evidence"

    pack = _pack("text-20-exact-signed")
    policy = thaw_json(pack.policy.document)
    report = _report("text-20-exact-signed")
    interval = report["metrics"][0]["interval"]
    width = interval["upper"] - interval["lower"]
    limit = round(width / 2, 2)  # half the stored interval's width: too wide
    policy["metrics"][0]["maximum_interval_width"] = limit
    too_wide(report)
    variant = _variant(pack, report=report, policy=policy)
    markdown = render_markdown(variant)
    assert "**Recorded policy result: More evidence needed**" in markdown
    row = f"| Interval width | {_g(width * 100)} pp | &lt;= {_g(limit * 100)} pp | Not met |"
    assert row in markdown


def test_absolute_bounds_are_checked_and_explained() -> None:
    pack = _pack("text-20-exact-signed")
    policy = thaw_json(pack.policy.document)
    report = _report("text-20-exact-signed")
    mean = report["metrics"][0]["subject_mean"]
    minimum = round(mean + 0.1, 2)  # above the subject's score: not met
    policy["metrics"][0]["subject_minimum"] = minimum
    report["metrics"][0]["decision"] = "regression"
    report["metrics"][0]["reasons"] = ["subject mean fails absolute bounds"]
    report["decision"] = "regression"
    variant = _variant(pack, report=report, policy=policy)
    markdown = render_markdown(variant)
    row = f"| Subject minimum | {_g(mean * 100)}% | &gt;= {_g(minimum * 100)}% | Not met |"
    assert row in markdown
    assert "The subject score is outside the absolute bounds of the policy." in markdown
    assert f"at least {_g(minimum * 100)}%" in markdown
    report["metrics"][0]["decision"] = "pass"
    report["decision"] = "pass"
    with pytest.raises(ReportError) as caught:
        render_markdown(_variant(pack, report=report, policy=policy))
    assert caught.value.code == "contradictory_decision"


# ---------------------------------------------------------------------------
# Names, escaping and terminal safety (properties)


_NAME = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=24)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metric=_NAME, scope=_NAME)
def test_any_names_render_safely(metric: str, scope: str) -> None:
    pack = _pack("numeric-200-signed")
    policy = thaw_json(pack.policy.document)
    policy["metrics"][0]["name"] = metric
    policy["slices"][0]["name"] = scope
    try:
        ComparisonPolicy(policy)
    except ComparisonPolicyError:
        assume(False)
    report = _report("numeric-200-signed")
    for entry in report["metrics"]:
        entry["name"] = metric
        if entry["slice"] != "overall":
            entry["slice"] = scope
    variant = _variant(pack, report=report, policy=policy)
    markdown = render_markdown(variant, explain=True)
    body = markdown.split("\n## Next steps", 1)[0]
    for line in body.splitlines():
        if line.startswith("## ") and ":" in line:
            assert not re.search(r"[<>|`*_\[\]]", line[3:])
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", markdown)
    root = ET.fromstring(render_junit(variant))
    names = {case.get("name") for case in root.findall("testcase")}
    classnames = {case.get("classname") for case in root.findall("testcase")}
    xml_safe = re.sub("[\ufffe\uffff]", "", metric)
    assert len(names) == 1
    assert names.pop().replace("\\ufffe", "").replace("\\uffff", "") == xml_safe  # type: ignore[union-attr]
    assert len(classnames) == 2
    document = render_html(variant)
    parser = _Structure()
    parser.feed(document)
    assert "script" not in [tag for tag, _ in parser.tags]
    shown = re.sub(
        "[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]",
        lambda match: f"\\u{ord(match.group()):04x}",
        display_name(metric),
    )
    assert shown in html.unescape(document)


def test_terminal_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    report = _report("text-20-exact-signed")
    report["limitations"] = [*report["limitations"], "red \x1b[31m bidi \u202e next\nline \x85"]
    pack = _variant(_pack("text-20-exact-signed"), report=report)
    markdown = render_markdown(pack, explain=True)
    assert "\x1b" not in markdown
    assert "\u202e" not in markdown
    assert "\x85" not in markdown
    assert "- red \\u001b&#91;31m bidi \\u202e next\\u000aline \\u0085" in markdown
    assert '"red \\u001b[31m bidi \\u202e next\\nline \\u0085"' in markdown  # JSON block
    document = render_html(pack)
    assert "\x1b" not in document
    assert "\u202e" not in document
    encoded = encode_result(
        report_result(
            ok=True,
            pack_manifest_digest="sha256:" + "0" * 64,
            requested_outputs={"markdown": "out/\x85\u202e.md"},
            written_outputs={},
            failed_output=None,
            errors=[],
        )
    )
    assert "\x85" not in encoded
    assert json.loads(encoded)["requested_outputs"]["markdown"] == "out/\x85\u202e.md"


# ---------------------------------------------------------------------------
# The caller's verification status


def test_verification_status_is_shown_never_established() -> None:
    pack = _pack("text-20-exact-signed")
    status = VerificationStatus("pass", receipt_checked=True)
    markdown = render_markdown(pack, verification=status)
    assert (
        "- **Independent recipient verification:** Reported by the caller, not performed by "
        "report: Verified: evidence integrity confirmed and the replayed decision is pass "
        "&#40;verification status 0&#41;; a signed verification receipt was checked by the "
        "caller. This rendering confers no verification authority." in markdown
    )
    plain = render_markdown(pack)
    changed = [
        (ours, theirs)
        for ours, theirs in zip(markdown.splitlines(), plain.splitlines(), strict=True)
        if ours != theirs
    ]
    assert len(changed) == 1
    assert changed[0][1].startswith("- **Independent recipient verification:** Not performed")
    document = render_html(pack, verification=status)
    text = _Text.of(document)
    assert "Verification status Verified: evidence integrity confirmed" in text
    assert "Source of the status Reported by the caller" in text
    assert "A signed verification receipt was checked by the caller." in text
    assert "this report did not perform or re-check it" in text
    assert "No verification authority" in text
    assert "Not verified" in _Text.of(render_html(pack))


def test_verification_status_must_match_the_pack() -> None:
    regression = _pack("numeric-200-signed")
    render_markdown(regression, verification=VerificationStatus.from_code(7))
    render_html(regression, verification=VerificationStatus("integrity_failure"))
    with pytest.raises(ReportError) as caught:
        render_markdown(regression, verification=VerificationStatus.from_code(0))
    assert (caught.value.code, caught.value.field) == (
        "verification_mismatch",
        "verification.status",
    )
    with pytest.raises(ReportError):
        render_html(_pack("text-20-exact-signed"), verification=VerificationStatus("policy_fail"))
    unsigned = _pack("text-20-exact-unsigned")
    with pytest.raises(ReportError):
        render_html(unsigned, verification=VerificationStatus("pass"))
    assert "status 6" in render_markdown(unsigned, verification=VerificationStatus.from_code(6))


@pytest.mark.parametrize(
    "build",
    [
        lambda: VerificationStatus("verified"),
        lambda: VerificationStatus(0),  # type: ignore[arg-type]
        lambda: VerificationStatus("pass", receipt_checked=1),  # type: ignore[arg-type]
        lambda: VerificationStatus.from_code(5),
        lambda: VerificationStatus.from_code(True),  # type: ignore[arg-type]
    ],
)
def test_verification_status_is_a_closed_set(build: Callable[[], object]) -> None:
    with pytest.raises(ReportError) as caught:
        build()
    assert caught.value.code == "invalid_verification_status"


def test_verification_status_codes() -> None:
    assert [VerificationStatus.from_code(code).status for code in (0, 7, 4, 6)] == [
        "pass",
        "policy_fail",
        "contract_failure",
        "integrity_failure",
    ]
    assert VerificationStatus("contract_failure").code == 4
    with pytest.raises(ReportError):
        render_markdown(_pack("text-20-exact-signed"), verification="pass")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# The command line


def _pack_copy(tmp_path: Path, name: str = "text-20-exact-signed") -> Path:
    target = tmp_path / "evidence"
    shutil.copytree(pack_folder(name) / "evidence", target)
    return target


def test_text_mode_prints_the_markdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pack_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    reports = pack_folder("text-20-exact-signed") / "report"
    plain = (reports / "plain.md").read_text(encoding="utf-8")
    explain = (reports / "explain.md").read_text(encoding="utf-8")
    result = _run(["evidence", "--compat", "invarlock"])
    assert (result.exit_code, result.stdout) == (0, plain)
    result = _run(["evidence", "--explain", "--html", "r.html", "--compat", "invarlock"])
    assert (result.exit_code, result.stdout) == (0, explain)
    quiet = _run(["evidence", "--html", "quiet.html"])  # sealeval's default: files are the output
    assert (quiet.exit_code, quiet.stdout) == (0, "")
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o600
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == render_html(
        _pack("text-20-exact-signed")
    )


def _refusal(args: list[str]) -> tuple[int, dict[str, Any]]:
    result = _run([*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_destination_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = _pack_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exists.md").write_text("keep", encoding="utf-8")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "real").mkdir()
    (tmp_path / "linkdir").symlink_to(tmp_path / "real")
    (tmp_path / "packlink").symlink_to(pack)
    before = {path: path.read_bytes() for path in pack.rglob("*") if path.is_file()}
    refusals = [
        (["evidence", "--markdown", "exists.md"], "outputs.markdown: destination_exists"),
        (["evidence", "--markdown", "evidence/x.md"], "outputs.markdown: destination_inside_pack"),
        (
            ["evidence", "--junit", "evidence/../evidence/reports/x"],
            "outputs.junit: destination_inside_pack",
        ),
        (["packlink", "--markdown", "evidence/x.md"], "outputs.markdown: destination_inside_pack"),
        (["evidence", "--html", "linkdir/r.html"], "outputs.html: unsafe_destination"),
        (["evidence", "--html", "afile/r.html"], "outputs.html: unsafe_destination"),
        (["evidence", "--html", "out/"], "outputs.html: invalid_destination"),
        (["evidence", "--html", ""], "outputs.html: invalid_destination"),
        (["evidence", "--html", "out/.."], "outputs.html: invalid_destination"),
        (
            ["evidence", "--html", "a.out", "--junit", "./a.out"],
            "outputs.junit: destination_collision",
        ),
        (["missing", "--markdown", "m.md"], "pack: not_directory"),
    ]
    for args, message in refusals:
        code, document = _refusal(args)
        assert code == 2, args
        assert document["errors"] == [message], args
        assert document["ok"] is False
        assert document["pack_manifest_digest"] is None
        assert document["written_outputs"] == {}
        assert document["failed_output"] is None
    assert (tmp_path / "exists.md").read_text(encoding="utf-8") == "keep"
    assert not (tmp_path / "a.out").exists()
    assert {path: path.read_bytes() for path in pack.rglob("*") if path.is_file()} == before
    result = _run(["evidence", "--markdown", "exists.md"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == "sealeval: error: --markdown: destination_exists\n"  # what was typed


def test_check_destinations_returns_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    paths = check_destinations("evidence", {"html": "out/deep/r.html", "junit": "j.xml"})
    assert paths == {"html": tmp_path / "out" / "deep" / "r.html", "junit": tmp_path / "j.xml"}


def test_partial_write_failure_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pack_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    real = cli_report.publish_exclusive
    calls: list[Path] = []

    def flaky(path: Any, data: bytes, *, mode: int = 0o644) -> None:
        calls.append(Path(path))
        if len(calls) == 2:
            raise OutputError("output_unwritable", "output")
        real(path, data, mode=mode)

    monkeypatch.setattr(cli_report, "publish_exclusive", flaky)
    code, document = _refusal(
        ["evidence", "--html", "out/r.html", "--junit", "out/r.xml", "--markdown", "out/r.md"]
    )
    assert code == 2
    assert document == report_result(
        ok=False,
        pack_manifest_digest=None,
        requested_outputs={"html": "out/r.html", "junit": "out/r.xml", "markdown": "out/r.md"},
        written_outputs={"html": "out/r.html"},
        failed_output="junit",
        errors=["outputs.junit: write_failed"],
    )
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700
    assert (tmp_path / "out" / "r.html").exists()
    assert not (tmp_path / "out" / "r.md").exists()


def test_existing_destination_at_publication(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pack_copy(tmp_path)
    monkeypatch.chdir(tmp_path)

    def racing(path: Any, data: bytes, *, mode: int = 0o644) -> None:
        raise OutputError("output_exists", "output")

    monkeypatch.setattr(cli_report, "publish_exclusive", racing)
    code, document = _refusal(["evidence", "--markdown", "m.md"])
    assert (code, document["errors"], document["failed_output"]) == (
        2,
        ["outputs.markdown: destination_exists"],
        "markdown",
    )

    def broken(path: Any, data: bytes, *, mode: int = 0o644) -> None:
        raise PermissionError

    monkeypatch.setattr(cli_report, "publish_exclusive", broken)
    code, document = _refusal(["evidence", "--markdown", "m.md"])
    assert document["errors"] == ["outputs.markdown: write_failed"]


def test_tampered_and_inconsistent_packs_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for variant in ("edited-subject-record", "extra-file", "resigned-lying-report"):
        source = pack_folder("text-20-exact-signed") / "tampered" / variant
        shutil.copytree(source, tmp_path / variant)
        code, document = _refusal([variant, "--markdown", f"{variant}.md"])
        assert code == 2
        assert document["pack_manifest_digest"] is None
        assert len(document["errors"]) == 1
        assert document["errors"][0].split(": ")[1] in {
            "digest_mismatch",
            "unknown_entry",
            "request_binding_mismatch",
            "report_binding_mismatch",
        } or document["errors"][0].startswith(("pack", "report", "records", "subject"))
        assert not (tmp_path / f"{variant}.md").exists()


def test_unknown_options_are_usage_errors(tmp_path: Path) -> None:
    result = _run([str(tmp_path), "--case-id", "x"])
    assert result.exit_code == 2


# ---------------------------------------------------------------------------
# Never echo: record inputs, outputs, expected answers, context, metadata, errors


def _canary_pack(tmp_path: Path, *, errored: bool) -> Path:
    """A signed pack whose records carry the canary everywhere a record can hold text."""
    source = pack_folder("text-20-exact-signed")
    request_dir = tmp_path / "request"
    shutil.copytree(source / "request", request_dir)
    subject_records = json.loads((request_dir / "inputs" / "subject.json").read_bytes())["records"]
    errored_id = subject_records[len(subject_records) // 2]["id"]  # any subject record
    for side in ("baseline", "subject"):
        path = request_dir / "inputs" / f"{side}.json"
        document = json.loads(path.read_bytes())
        for record in document["records"]:
            matched = score("exact_match", record["expected"], record["output"], {}) == 1.0
            record.pop("likelihood", None)
            record_id = record["id"]
            record["input"] = {"question": f"{CANARY} input {record_id}"}
            record["expected"] = f"{CANARY} expected {record_id}"
            record["output"] = record["expected"] if matched else f"{CANARY} output {record_id}"
            record["context"] = {"prompt": f"{CANARY} context", "model": CANARY}
            record["metadata"] = {"note": f"{CANARY} metadata"}
            record["scores"] = {"judge_quality": 0.5}
            if errored and side == "subject" and record_id == errored_id:
                record["error"] = f"{CANARY} error"
        path.write_bytes(encode_invarlock(document))
    request = load_captured_request(request_dir / "request.yaml")
    report = _report("text-20-exact-signed")
    report["bindings"] = {
        "baseline": request.baseline.digest,
        "policy": request.policy.digest,
        "subject": request.subject.digest,
    }
    if errored:
        entry = report["metrics"][0]
        entry.update(
            baseline_mean=None,
            subject_mean=None,
            delta=None,
            interval=None,
            decision="insufficient_evidence",
            reasons=["missing results"],
            missing_ids=[errored_id],
        )
        report["decision"] = "insufficient_evidence"
    staged = prepare_pack(
        request=request.normalized,
        baseline=request.baseline,
        subject=request.subject,
        policy=request.policy,
        comparison_report=encode_invarlock(report),
        signing_key=load_signing_key(VECTORS / "keys" / "evidence-signer" / "private.pem"),
    )
    destination = tmp_path / "evidence"
    publish_pack(staged, destination)
    return destination


@pytest.mark.parametrize("errored", [False, True], ids=["evaluated", "missing"])
def test_canary_never_appears_in_any_format(
    errored: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    destination = _canary_pack(tmp_path, errored=errored)
    pack = read_evidence_pack(destination)
    assert CANARY in pack.subject.records[0].input["question"]  # type: ignore[index]
    renderings = [
        render_markdown(pack).encode(),
        render_markdown(pack, explain=True).encode(),
        render_junit(pack),
        render_html(pack).encode(),
        render_html(
            pack, verification=VerificationStatus("pass" if not errored else "policy_fail", True)
        ).encode(),
    ]
    monkeypatch.chdir(tmp_path)
    result = _run(
        [
            "evidence",
            "--html",
            "o/r.html",
            "--junit",
            "o/r.xml",
            "--markdown",
            "o/r.md",
            "--explain",
            "--json",
        ]
    )
    assert result.exit_code == 0, result.output
    renderings.append(result.stdout.encode())
    renderings += [(tmp_path / "o" / name).read_bytes() for name in ("r.html", "r.xml", "r.md")]
    result = _run(["evidence", "--explain"])
    renderings.append(result.stdout.encode())
    for data in renderings:
        assert CANARY.encode() not in data
        assert b"PHI-CANARY" not in data
    if errored:
        (missing_id,) = pack.report["metrics"][0]["missing_ids"]
        assert f"<li><code>{missing_id}</code></li>".encode() in renderings[3]
        assert f'"{missing_id}"'.encode() in renderings[1]


def test_error_messages_never_echo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, document = _refusal([CANARY, "--markdown", f"{CANARY}/x.md"])
    assert code == 2
    assert CANARY not in json.dumps(document["errors"])
    assert document["requested_outputs"] == {"markdown": f"{CANARY}/x.md"}  # paths as given
    result = _run([CANARY])
    assert CANARY not in result.stderr
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------
# Policies and runs the vectors do not cover (renderer-level variants)


def _decide(entry: dict[str, Any], metric: dict[str, Any]) -> tuple[str, list[str]]:
    """22-comparison.md §6, written from the specification (reference order)."""
    if entry["interval"] is None:
        return entry["decision"], entry["reasons"]
    lower, upper = entry["interval"]["lower"], entry["interval"]["upper"]
    reasons = []
    if metric["direction"] == "higher" and lower < -metric["maximum_regression"]:
        reasons.append("lower interval bound exceeds allowed regression")
    if metric["direction"] == "lower":
        if "ratio_max" in metric and upper > metric["ratio_max"]:
            reasons.append("upper ratio interval bound exceeds ratio_max")
        if "ratio_max" not in metric and upper > metric["maximum_regression"]:
            reasons.append("upper interval bound exceeds allowed regression")
    mean = entry["subject_mean"]
    if mean < metric.get("subject_minimum", -math.inf) or mean > metric.get(
        "subject_maximum", math.inf
    ):
        reasons.append("subject mean fails absolute bounds")
    if reasons:
        return "regression", reasons
    if upper - lower > metric["maximum_interval_width"]:
        return "insufficient_evidence", ["interval is too wide"]
    return "pass", []


def _redecided(name: str, policy: dict[str, Any]) -> EvidencePack:
    """The pack under another policy, its report's decisions recomputed accordingly."""
    report = _report(name)
    metrics = {metric["name"]: metric for metric in policy["metrics"]}
    for entry in report["metrics"]:
        entry["decision"], entry["reasons"] = _decide(entry, metrics[entry["name"]])
    decisions = {entry["decision"] for entry in report["metrics"]}
    report["decision"] = next(
        (d for d in ("regression", "insufficient_evidence") if d in decisions), "pass"
    )
    return _variant(_pack(name), report=report, policy=policy)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    scales=st.lists(st.sampled_from([0.0, 0.05, 0.3, 1.0, 4.0]), min_size=6, max_size=6),
)
def test_any_thresholds_render_consistently(data: st.DataObject, scales: list[float]) -> None:
    policy = thaw_json(_pack("text-200-multi-signed").policy.document)
    for metric, scale in zip(policy["metrics"], scales, strict=True):
        key = "ratio_max" if "ratio_max" in metric else "maximum_regression"
        metric[key] = 1.0 + scale / 10 if key == "ratio_max" else metric[key] * scale
        metric["maximum_interval_width"] = metric["maximum_interval_width"] * data.draw(
            st.sampled_from([0.05, 1.0, 3.0])
        )
        bounds = data.draw(st.sampled_from(["none", "minimum", "maximum", "both"]))
        metric.pop("subject_minimum", None)
        metric.pop("subject_maximum", None)
        if bounds in ("minimum", "both"):
            metric["subject_minimum"] = data.draw(st.sampled_from([0.0, 0.6, 100.0]))
        if bounds in ("maximum", "both"):
            metric["subject_maximum"] = data.draw(st.sampled_from([150.0, 1000.0]))
    try:
        ComparisonPolicy(policy)
    except ComparisonPolicyError:
        assume(False)
    pack = _redecided("text-200-multi-signed", policy)
    entries = display_order(check_consistency(pack))
    markdown = render_markdown(pack, explain=True)
    headings = [line for line in markdown.splitlines() if re.match(r"## [^:]+: ", line)]
    assert headings == [
        f"## {display_name(entry.name)}: {display_name(entry.slice)}" for entry in entries
    ]
    root = ET.fromstring(render_junit(pack))
    assert int(root.get("failures", "")) == sum(e.decision == "regression" for e in entries)
    assert int(root.get("errors", "")) == sum(
        e.decision == "insufficient_evidence" for e in entries
    )
    for case in root.iter("failure"):
        assert case.get("message")
    document = render_html(pack)
    assert document.count('<svg viewBox="0 0 760 ') == 6
    label = {"pass": "Policy satisfied", "regression": "Policy not met"}.get(
        pack.decision, "More evidence needed"
    )
    assert f'<h1 id="decision-heading">{label}</h1>' in document


def test_lower_direction_and_ratio_regressions_are_explained() -> None:
    policy = thaw_json(_pack("text-200-multi-signed").policy.document)
    by_name = {metric["name"]: metric for metric in policy["metrics"]}
    latency_entry = _overall("text-200-multi-signed", "latency")
    nll_entry = _overall("text-200-multi-signed", "nll")
    # Latency: a limit between the observed change and the interval's upper bound.
    latency_limit = round((latency_entry["delta"] + latency_entry["interval"]["upper"]) / 2, 2)
    assert latency_entry["delta"] < latency_limit < latency_entry["interval"]["upper"]
    by_name["latency"]["maximum_regression"] = latency_limit
    # NLL: a ratio limit below the observed ratio (and above 1).
    ratio_limit = round((nll_entry["interval"]["lower"] + nll_entry["ratio"]) / 2, 4)
    assert 1.0 < ratio_limit < nll_entry["ratio"]
    by_name["nll"]["ratio_max"] = ratio_limit
    pack = _redecided("text-200-multi-signed", policy)
    markdown = render_markdown(pack)
    latency = markdown.split("## latency: overall")[1].split("\n## ")[0]
    assert (
        "**Policy not met**. "
        + (
            "The observed change was within the policy limit, but its uncertainty interval "
            "extended beyond it."
        )
        in latency
    )
    upper, unit = _g(latency_entry["interval"]["upper"]), latency_entry["unit"]
    row = f"| Allowed change | {upper} {unit} | &lt;= {_g(latency_limit)} {unit} | Not met |"
    assert row in latency
    nll = markdown.split("## NLL: overall")[1].split("\n## ")[0]
    assert "The observed change was outside the range allowed by the policy." in nll
    upper = _g(nll_entry["interval"]["upper"])
    assert f"| Maximum NLL ratio | {upper} ratio | &lt;= {_g(ratio_limit)} ratio | Not met |" in nll


def test_single_entry_summaries() -> None:
    pack = _pack("text-20-exact-signed")
    policy = thaw_json(pack.policy.document)
    mean = _report("text-20-exact-signed")["metrics"][0]["subject_mean"]
    maximum = 1.0 if mean < 1.0 else 1.5  # at or above the subject's score: passed
    policy["metrics"][0]["subject_maximum"] = maximum
    markdown = render_markdown(_redecided("text-20-exact-signed", policy))
    assert (
        "No absolute minimum score is required by this policy. The policy also requires a "
        in markdown
    )
    assert f"subject score of at most {_g(maximum * 100)}%." in markdown
    row = f"| Subject maximum | {_g(mean * 100)}% | &lt;= {_g(maximum * 100)}% | Passed |"
    assert row in markdown
    missing = _mutated("missing-insufficient-signed", lambda report: report["metrics"].pop())
    policy = thaw_json(missing.policy.document)
    policy["metrics"].pop()
    single = _variant(missing, policy=policy)
    first = missing.report["metrics"][0]
    assert first["baseline_mean"] is None  # the pack's first entry has no scores
    required = policy["metrics"][0]["minimum_count"]
    usable = first["count"] - len(first["missing_ids"])  # included pairs with both results
    assert render_markdown(single).split("\n")[4] == (
        "Some included cases are missing a baseline or subject result. Baseline and subject "
        f"scores for {first['name']} are unavailable across {usable} usable pairs. "
        "No change estimate or uncertainty interval is available. The policy requires at "
        f"least {required} included pairs. No absolute minimum score is required by this policy."
    )


def test_extreme_thresholds_still_render() -> None:
    pack = _pack("text-20-exact-signed")
    policy = thaw_json(pack.policy.document)
    policy["metrics"][0]["maximum_regression"] = 10**400
    policy["metrics"][0]["maximum_interval_width"] = 10**400
    variant = _redecided("text-20-exact-signed", policy)
    lower = _report("text-20-exact-signed")["metrics"][0]["interval"]["lower"]
    row = f"| Allowed change | {_g(lower * 100)} pp | &gt;= -inf pp | Passed |"
    assert row in render_markdown(variant)
    assert "Policy bound ≥ -inf pp" in render_html(variant)
    flat = thaw_json(_pack("missing-insufficient-signed").policy.document)
    for metric in flat["metrics"]:
        metric["maximum_regression"] = 0
    document = render_html(_variant(_pack("missing-insufficient-signed"), policy=flat))
    assert "Policy bound ≥ 0 pp" in document


def _hosted(run: Any, identity: Any) -> Any:
    header = dataclasses.replace(run.header, artifact_digest=None, service_identity=identity)
    return Run(header, run.records)


def test_hosted_variants_and_configuration_previews() -> None:
    pack = _pack("native-hosted-signed")
    declared = pack.subject.service_identity
    assert declared is not None
    configuration = {
        "deep": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}},
        "long": "x" * 300,
        "many": list(range(150)),
        "k" * 300: 1,
    }
    identity = ServiceIdentity.create(
        provider=declared.provider,
        service=declared.service,
        deployment=declared.deployment,
        requested_model=declared.requested_model,
        observed_model=None,
        exposed_revision="rev-7",
        configuration=configuration,
        harness=declared.harness,
        observation_window=declared.observation_window,
    )
    variant = dataclasses.replace(pack, subject=_hosted(pack.subject, identity))
    markdown = render_markdown(variant, explain=True)
    assert "- **Subject:** Requested model: charlie-large · Deployment: bravo-prod-6" in markdown
    assert "- **Subject exposed revision:** rev-7" in markdown
    assert "- **Subject observed model:** Not exposed" in markdown
    preview = json.loads(
        markdown.split("## Subject declared service configuration\n\n```json\n")[1].split("```")[0]
    )
    assert preview["truncated"] is True
    shown = json.loads(preview["text"])
    assert shown["long"] == "x" * 256 + "…"
    assert shown["deep"]["a"]["b"]["c"]["d"] == {"e": "…"}
    assert "k" * 256 + "…" in shown
    assert len(shown["many"]) < 150
    assert shown["many"][-1] == "…"
    both = dataclasses.replace(variant, baseline=_hosted(pack.baseline, identity))
    markdown = render_markdown(both, explain=True)
    assert "### Subject identity: Matches" in markdown
    assert "- **Provider:** alpha-cloud" in markdown
    assert "## Baseline declared service configuration" in markdown
    assert "- **Baseline service identity:** " + identity.digest in markdown
    assert "- Model-key comparison is unavailable" in markdown
    text = _Text.of(render_html(both))
    assert "Baseline declared service configuration" in text
    assert "Subject identity: Matches" in text


def test_entry_edges() -> None:
    entries = check_consistency(_pack("numeric-200-signed"))
    assert repr(entries[0]) == "ReportEntry(position=0, decision='pass')"
    assert CANARY not in repr(entries)
    with pytest.raises(ReportError) as caught:
        render_markdown("pack")  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.field) == ("invalid_entry", "pack")
    for mutate in (
        _set(0, "interval", [0.1, 0.2]),
        _set(
            0,
            "interval",
            {"lower": 0.1, "upper": 0.2, "mass": 0.95, "method": "m", "replicates": -1},
        ),
        _set(
            0,
            "interval",
            {"lower": 0.3, "upper": 0.2, "mass": 0.95, "method": "m", "replicates": 0},
        ),
        _set(0, "baseline_mean", None),
        _set(0, "baseline_mean", True),
        _set(0, "subject_mean", 10**400),
        _set(0, "count", -1),
    ):
        with pytest.raises(ReportError) as caught:
            check_consistency(_mutated("numeric-200-signed", mutate))
        assert caught.value.code == "invalid_entry"
    nll = _report("text-200-multi-signed")
    index = next(i for i, e in enumerate(nll["metrics"]) if e["kind"].startswith("normalized_nll"))
    nll["metrics"][index]["ratio"] = None
    with pytest.raises(ReportError) as caught:
        check_consistency(_variant(_pack("text-200-multi-signed"), report=nll))
    assert (caught.value.code, caught.value.field) == ("invalid_entry", f"report.metrics[{index}]")
