"""Progress on a terminal, silence on a pipe, and never an id, a path or captured text.

``compare``, ``report`` and ``session run`` run as an installed ``sealeval``
does, with standard error on a pseudo-terminal (the ``pty`` module) and on a
pipe; ``evaluate`` and ``verify`` are driven through their library functions
with the command line's reporter drawing into a buffer.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from sealeval._progress import PHASES, terminal_progress
from sealeval.captured.evaluate import evaluate_request
from sealeval.captured.pack_reader import REFERENCE_PACK_LIMITS
from sealeval.captured.verify import verify_evidence_pack
from support.captured_verify import pack_workspace, recipient_for
from support.refusals import CANARY
from support.session_config import canary_bundle
from support.terminal import on_pipe, on_terminal, sealeval_argv
from support.vectors import load, pack_folder, vectors_dir

PACK = "json-200-signed"


def _label(phase: str) -> bytes:
    return PHASES[phase][0].encode("utf-8")


def _compare_case(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The argv of a token_f1 + slices comparison, and the run ids it holds."""
    case = next(
        case["input"]
        for case in load("invarlock/comparisons.json")["cases"]
        if case["name"] == "text-20-multi-metric-slices"
    )
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(case["policy"]), encoding="utf-8")
    baseline = vectors_dir() / "invarlock" / case["baseline"]
    subject = vectors_dir() / "invarlock" / case["subject"]
    ids = [record["id"] for record in json.loads(baseline.read_bytes())["records"]]
    argv = sealeval_argv("compare", baseline, subject, "--policy", policy)
    return argv, ids


def test_compare_progress_on_a_terminal_and_silence_on_a_pipe(tmp_path: Path) -> None:
    argv, ids = _compare_case(tmp_path)
    status, stdout, shown = on_terminal(argv)
    assert status in (0, 7)
    for phase in ("reading", "pairing", "scoring", "intervals"):
        assert _label(phase) in shown
    assert b"planned bootstrap draws: " in shown
    assert all(record_id.encode() not in shown for record_id in ids)
    assert str(vectors_dir()).encode() not in shown
    assert str(tmp_path).encode() not in shown
    piped, piped_out, stderr = on_pipe(argv, env={"COLUMNS": "120"})
    assert piped == status
    assert piped_out == stdout  # the table does not depend on the terminal
    # a pipe hears the planned draws and nothing else
    lines = stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("planned bootstrap draws: ")
    assert not any(_label(phase).decode() in stderr.decode() for phase in PHASES)


def test_report_progress_on_a_terminal_and_silence_on_a_pipe(tmp_path: Path) -> None:
    evidence = pack_folder(PACK) / "evidence"
    argv = sealeval_argv("report", evidence, "--html", tmp_path / "report.html")
    status, _stdout, shown = on_terminal(argv)
    assert status == 0
    assert _label("examining") in shown
    assert _label("rendering") in shown
    assert str(evidence).encode() not in shown
    assert str(tmp_path).encode() not in shown
    again = sealeval_argv("report", evidence, "--html", tmp_path / "again.html")
    assert on_pipe(again) == (0, b"", b"")
    assert (tmp_path / "again.html").read_bytes() == (tmp_path / "report.html").read_bytes()


def test_session_run_progress_never_shows_case_content(tmp_path: Path) -> None:
    config = canary_bundle(tmp_path / "bundle")
    env = {"SEALEVAL_SESSION_CLOCK": "1000"}
    status, _stdout, shown = on_terminal(sealeval_argv("session", "run", config), env=env)
    assert status == 0
    assert _label("cases") in shown
    assert _label("forensics") in shown
    assert _label("adjudication") in shown
    assert CANARY.encode() not in shown
    assert str(tmp_path).encode() not in shown
    other = canary_bundle(tmp_path / "other")
    assert on_pipe(sealeval_argv("session", "run", other), env=env)[0::2] == (0, b"")


def _drawn(run: Any) -> str:
    """Run ``run(progress)`` with the command line's reporter drawing into a buffer."""
    stream = io.StringIO()
    with terminal_progress(enabled=True, stream=stream, announce=True) as progress:
        run(progress)
    return stream.getvalue()


def test_evaluate_and_verify_report_their_phases(tmp_path: Path) -> None:
    source = pack_folder(PACK) / "request"
    request = shutil.copytree(source, tmp_path / "request")
    shown = _drawn(
        lambda progress: evaluate_request(
            request / "request.yaml", unsigned=True, progress=progress
        )
    )
    assert (request / "evidence").is_dir()
    for phase in ("loading", "pairing", "scoring", "intervals", "publishing"):
        assert PHASES[phase][0] in shown
    assert "planned bootstrap draws: " in shown
    assert str(tmp_path) not in shown
    workspace = pack_workspace(PACK, tmp_path / "packs")
    recipient = recipient_for(workspace / "evidence", workspace / "trust", tmp_path)
    verified: list[Any] = []
    shown = _drawn(
        lambda progress: verified.append(
            verify_evidence_pack(
                workspace / "evidence",
                recipient,
                limits=REFERENCE_PACK_LIMITS,
                progress=progress,
            )
        )
    )
    assert verified[0].integrity_ok
    for phase in ("examining", "pairing", "intervals"):
        assert PHASES[phase][0] in shown
    # the recipient's budget is the one announced (the replay's own is not)
    assert shown.count("planned bootstrap draws: ") == 1
    assert f"work budget: {recipient.max_bootstrap_draws:,}" in shown
    assert str(tmp_path) not in shown
