"""``sealeval session run|show`` and the demo's session section, through click."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.canonical import decode, encode_openmed
from sealeval.cli import cli
from sealeval.cli import demo as demo_module
from sealeval.cli.session import read_store, run_attempt, session
from sealeval.session import config as config_module
from sealeval.session.budget import LedgerUsage
from sealeval.session.record import EvaluationSessionError
from support.refusals import CANARY
from support.session_config import base_document, canary_bundle, copy_bundle, write_config


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEALEVAL_SESSION_CLOCK", "1000")


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        session, [str(arg) for arg in args], prog_name="sealeval session", catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return copy_bundle(tmp_path / "bundle")


def test_three_attempts_give_detailed_coarse_refused(bundle: Path) -> None:
    code, out, err = run("run", bundle / "attempt-1.yaml")
    assert (code, err) == (0, "")
    assert "feedback        detailed (official attempt 1)" in out
    assert "  case 1        0.75\n" in out
    assert "  case 2        0.25\n" in out
    assert "  mean          0.5\n" in out
    assert "budget          1 official attempt left, 0 detailed results left" in out

    code, out, err = run("run", bundle / "attempt-2.yaml")
    assert (code, err) == (0, "")
    assert "feedback        coarse: band 1 (official attempt 2)" in out
    assert "0.75" not in out
    assert "mean" not in out
    assert "budget          0 official attempts left, 0 detailed results left" in out

    code, out, err = run("run", bundle / "attempt-3.yaml")
    assert (code, err) == (1, "")
    assert "feedback        refused: rerun_budget_exhausted" in out
    assert "0.25" not in out

    listing = read_store(bundle / "sessions.sqlite3")
    phases = sorted(record.steps[-1].phase for record in listing.sessions)
    assert phases == ["budget_denied", "released", "released"]
    assert [row.claimed for row in listing.budgets] == [False]
    usage = LedgerUsage.from_json((bundle / "ledger-usage.json").read_bytes())
    (only,) = usage.entries.values()
    assert (only.official_attempts, only.detailed_feedback_used) == (2, 1)

    # The same session key again: the stored record refuses a second release.
    code, out, err = run("run", bundle / "attempt-1.yaml")
    assert (code, out, err) == (2, "", "sealeval: error: feedback_already_claimed\n")


def test_json_outcomes_carry_scores_only_when_detailed(bundle: Path) -> None:
    documents = []
    for number, expected in ((1, 0), (2, 0), (3, 1)):
        code, out, _ = run("run", bundle / f"attempt-{number}.yaml", "--json")
        assert code == expected
        assert out.endswith("\n")
        document = decode(out)
        assert encode_openmed(document) == out[:-1]
        documents.append(document)
    detailed, coarse, denied = documents
    assert detailed["outcome"] == "released"
    assert detailed["schema_version"] == "sealeval.session_run.v1"
    assert detailed["per_case_scores"] == [0.75, 0.25]
    assert detailed["decision"]["detailed_score"] == 0.5
    assert coarse["per_case_scores"] is None
    assert coarse["decision"]["detailed_score"] is None
    assert coarse["decision"]["coarse_band"] == 1
    assert denied["outcome"] == "budget_denied"
    assert denied["per_case_scores"] is None
    assert denied["decision"]["reason_code"] == "rerun_budget_exhausted"
    assert denied["decision"]["accepted"] is False
    show = decode(run("show", bundle / "sessions.sqlite3", "--json")[1])
    digests = {record["session_key"]: record["session_digest"] for record in show["sessions"]}
    for document in documents:
        assert digests[document["session_key"]] == document["session_digest"]


def test_show_lists_records_and_budgets(bundle: Path) -> None:
    for number in (1, 2, 3):
        run("run", bundle / f"attempt-{number}.yaml")
    db = bundle / "sessions.sqlite3"
    before = db.read_bytes()
    code, out, err = run("show", db)
    assert (code, err) == (0, "")
    assert out.startswith("3 sessions\n")
    assert out.count("  steps     verified cases forensics adjudication release_claimed") == 3
    assert "  terminal  released (official attempts 1, band -)" in out
    assert "  terminal  released (official attempts 2, band 1)" in out
    assert "  terminal  budget_denied (official attempts 2, band -)" in out
    assert "1 budget\n" in out
    assert "  claimed   no\n" in out

    key = base_document()["session_key"]
    code, out, _ = run("show", db, "--session", key)
    assert code == 0
    assert out.startswith(f"1 session\nsession {key}\n")
    code, out, _ = run("show", db, "--session", key, "--json")
    document = decode(out)
    assert document["schema_version"] == "sealeval.session_show.v1"
    assert [record["session_key"] for record in document["sessions"]] == [key]
    assert document["budgets"][0]["claimed"] is False
    assert set(document["budgets"][0]) == {"budget_key", "claimed", "watermark"}
    # Read-only: the database is unchanged and no journal was left behind.
    assert db.read_bytes() == before
    assert sorted(p.name for p in bundle.glob("sessions.sqlite3*")) == ["sessions.sqlite3"]


def test_show_refusals(bundle: Path, tmp_path: Path) -> None:
    run("run", bundle / "attempt-1.yaml")
    db = bundle / "sessions.sqlite3"
    assert run("show", tmp_path / f"{CANARY}.sqlite3") == (
        2,
        "",
        "sealeval: error: db: not_found\n",
    )
    assert not (tmp_path / f"{CANARY}.sqlite3").exists()
    assert run("show", bundle)[2] == "sealeval: error: db: not_regular_file\n"
    assert run("show", db, "--session", CANARY)[2] == "sealeval: error: session: invalid_digest\n"
    other = "sha256:" + "0" * 64
    assert run("show", db, "--session", other)[2] == "sealeval: error: session: not_found\n"
    foreign = tmp_path / "foreign.sqlite3"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE sessions (session_key TEXT)")
    connection.close()
    assert run("show", foreign)[2] == "sealeval: error: store_failed\n"
    (tmp_path / "text.sqlite3").write_text(CANARY)
    assert run("show", tmp_path / "text.sqlite3")[2] == "sealeval: error: store_failed\n"
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE sessions SET record = ?", (json.dumps({CANARY: 1}),))
    connection.close()
    assert run("show", db)[2] == "sealeval: error: record_invalid\n"


def test_nothing_submitted_is_ever_printed(tmp_path: Path) -> None:
    config = canary_bundle(tmp_path / CANARY)
    folder = config.parent
    outputs = []
    for _ in range(2):
        code, out, err = run("run", config)
        outputs += [out, err]
    assert code == 2  # the replay of a released session refuses
    assert "feedback_already_claimed" in err
    code, out, err = run("run", config, "--json")
    outputs += [out, err]
    db = folder / "sessions.sqlite3"
    for args in (("show", db), ("show", db, "--json")):
        code, out, err = run(*args)
        assert code == 0
        outputs += [out, err]
    assert "0.5" in outputs[0]  # the detailed result was released
    for text in outputs:
        assert CANARY not in text
        assert str(tmp_path) not in text
    raw = b"".join(path.read_bytes() for path in folder.glob("sessions.sqlite3*"))
    raw += (folder / "ledger-usage.json").read_bytes()
    assert CANARY.encode() not in raw
    assert b"0.5" not in raw


def test_paths_are_never_echoed(tmp_path: Path, bundle: Path) -> None:
    assert run("run", tmp_path / CANARY / "session.yaml") == (
        2,
        "",
        "sealeval: error: config: not_found\n",
    )
    document = base_document()
    document["cases"] = f"{CANARY}/cases.yaml"
    code, out, err = run("run", write_config(bundle, document))
    assert (code, out, err) == (2, "", "sealeval: error: cases: not_found\n")
    document["cases"] = f"/{CANARY}/cases.yaml"
    code, out, err = run("run", write_config(bundle, document))
    assert (code, out, err) == (2, "", "sealeval: error: cases: absolute_path\n")


def test_unwritable_ledger_usage_refuses_before_any_feedback(bundle: Path) -> None:
    document = base_document()
    document["feedback"]["ledger_usage"] = "missing-folder/ledger-usage.json"
    code, out, err = run("run", write_config(bundle, document))
    assert (code, out, err) == (2, "", "sealeval: error: feedback.ledger_usage: unwritable\n")
    assert not (bundle / "sessions.sqlite3").exists()


def test_failed_usage_write_after_the_claim_releases_nothing(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    original = config_module.LedgerUsageFile.write

    def flaky(self: config_module.LedgerUsageFile, usage: LedgerUsage) -> None:
        writes.append(1)
        if len(writes) > 1:  # the preflight write succeeds, the post-attempt one fails
            raise config_module.SessionConfigError("unwritable", "feedback.ledger_usage")
        original(self, usage)

    monkeypatch.setattr(config_module.LedgerUsageFile, "write", flaky)
    code, out, err = run("run", bundle / "attempt-1.yaml")
    assert (code, out, err) == (2, "", "sealeval: error: feedback_failed\n")
    monkeypatch.undo()
    monkeypatch.setenv("SEALEVAL_SESSION_CLOCK", "1000")
    listing = read_store(bundle / "sessions.sqlite3")
    assert [record.steps[-1].phase for record in listing.sessions] == ["release_claimed"]
    assert [row.claimed for row in listing.budgets] == [True]
    shown = run("show", bundle / "sessions.sqlite3")[1]
    assert "  terminal  - (in progress)\n" in shown
    assert "  claimed   yes\n" in shown
    # The claim stays: the same session refuses, another is locked out of the budget.
    assert run("run", bundle / "attempt-1.yaml")[2] == "sealeval: error: feedback_already_claimed\n"
    assert run("run", bundle / "attempt-2.yaml")[2] == "sealeval: error: budget_state_unverified\n"


def test_a_reset_ledger_is_refused(bundle: Path) -> None:
    assert run("run", bundle / "attempt-1.yaml")[0] == 0
    (bundle / "ledger-usage.json").unlink()
    assert run("run", bundle / "attempt-2.yaml") == (
        2,
        "",
        "sealeval: error: budget_state_unverified\n",
    )


def test_session_refusals_exit_2(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (bundle / "workflow" / "prompt.txt").write_text("changed", encoding="utf-8")
    assert run("run", bundle / "attempt-1.yaml")[2] == (
        "sealeval: error: component_digest_mismatch\n"
    )
    document = base_document()
    document["store"] = "mysql://evaluator@db/sessions"
    assert run("run", write_config(bundle, document))[2] == (
        "sealeval: error: store: unsupported_store\n"
    )
    document["store"] = "postgresql://evaluator@db/sessions"
    assert run("run", write_config(bundle, document))[2] == (
        "sealeval: error: feedback.ledger_usage: shared_store_needs_durable_ledger\n"
    )
    monkeypatch.setenv("SEALEVAL_SESSION_CLOCK", CANARY)
    assert run("run", bundle / "attempt-1.yaml") == (
        2,
        "",
        "sealeval: error: clock: invalid_clock\n",
    )


def test_help_is_self_contained() -> None:
    for args in ((), ("run",), ("show",)):
        code, out, _ = run(*args, "--help")
        assert code == 0
        assert out.startswith("Usage: sealeval session")
    assert "1 refused by the budget (rerun_budget_exhausted)" in run("run", "-h")[1]


def test_demo_runs_the_session_section(tmp_path: Path) -> None:
    out = tmp_path / "demo-out"
    result = CliRunner().invoke(cli, ["demo", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout
    assert "5. Evaluation sessions" in result.stdout
    assert "feedback        detailed (official attempt 1)" in result.stdout
    assert "feedback        coarse: band 1 (official attempt 2)" in result.stdout
    assert "feedback        refused: rerun_budget_exhausted" in result.stdout
    assert "then refused the third attempt;" in " ".join(result.stdout.split())
    # The earlier sections' files are unchanged in name.
    for name in ("manifest.json", "verification-unchanged.json", "verification-tampered.json"):
        assert (out / name).is_file()
    folder = out / "session"
    outcomes = [decode((folder / f"outcome-{n}.json").read_bytes()) for n in (1, 2, 3)]
    assert [o["decision"]["feedback_level"] for o in outcomes] == ["detailed", "coarse", "none"]
    assert [o["outcome"] for o in outcomes] == ["released", "released", "budget_denied"]
    listing = read_store(folder / "sessions.sqlite3")
    assert len(listing.sessions) == 3
    assert (folder / "ledger-usage.json").is_file()
    # The folder is a working example: attempt 1 again is refused as already claimed.
    assert run("run", folder / "attempt-1.yaml")[2] == "sealeval: error: feedback_already_claimed\n"


def test_show_refuses_malformed_rows(bundle: Path) -> None:
    run("run", bundle / "attempt-1.yaml")
    db = bundle / "sessions.sqlite3"
    pristine = db.read_bytes()
    edits = [
        "UPDATE budgets SET watermark = 'x'",
        "UPDATE sessions SET session_key = 'sha256:" + "1" * 64 + "'",
        "UPDATE sessions SET record = X'00'",
    ]
    for statement in edits:
        db.write_bytes(pristine)
        with sqlite3.connect(db) as connection:
            connection.execute(statement)
        connection.close()
        assert run("show", db) == (2, "", "sealeval: error: record_invalid\n"), statement


def test_outcome_repr_shows_the_level_only(bundle: Path) -> None:
    outcome = run_attempt(bundle / "attempt-1.yaml", clock=lambda: 5)
    assert repr(outcome) == "AttemptOutcome(feedback_level='detailed')"


def test_demo_reports_a_session_section_that_misbehaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise EvaluationSessionError("store_failed")

    monkeypatch.setattr(demo_module, "run_attempt", refuse)
    result = CliRunner().invoke(
        cli, ["demo", "--out", str(tmp_path / "out")], catch_exceptions=False
    )
    assert result.exit_code == 1
    assert "  error: store_failed" in result.stdout
    assert "session store: error: db: not_found" in result.stdout
    assert "demo did not behave as expected" in result.stdout
