"""``sealeval session run --store`` / ``session show`` with either store and the durable ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict

from sealeval.canonical import decode
from sealeval.cli.session import session
from sealeval.manifest.components import load_config_document
from support.postgres import fresh_database
from support.refusals import CANARY
from support.session_config import base_document, copy_bundle, write_config


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEALEVAL_SESSION_CLOCK", "1000")


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        session, [str(arg) for arg in args], prog_name="sealeval session", catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def _durable_configs(bundle: Path) -> list[Path]:
    """The bundle's three attempts without a usage file: the durable ledger is used."""
    paths = []
    for number in (1, 2, 3):
        document = base_document()
        source = bundle / f"attempt-{number}.yaml"
        document["session_key"] = load_config_document(source)["session_key"]
        del document["feedback"]["ledger_usage"]
        paths.append(write_config(bundle, document, name=f"durable-{number}.json"))
    return paths


def _three_attempts(configs: list[Path], *store: str) -> None:
    outcomes = [run("run", path, *store, "--json") for path in configs]
    assert [code for code, _, _ in outcomes] == [0, 0, 1]
    assert all(err == "" for _, _, err in outcomes)
    levels = [decode(out)["decision"]["feedback_level"] for _, out, _ in outcomes[:2]]
    assert levels == ["detailed", "coarse"]
    assert decode(outcomes[2][1])["outcome"] == "budget_denied"
    # The same key again never releases twice.
    assert run("run", configs[0], *store)[0] == 2


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return copy_bundle(tmp_path / "bundle")


def test_durable_ledger_on_sqlite(bundle: Path) -> None:
    _three_attempts(_durable_configs(bundle))
    assert not (bundle / "ledger-usage.json").exists()
    code, out, err = run("show", bundle / "sessions.sqlite3", "--json")
    assert (code, err) == (0, "")
    listing = decode(out)
    assert listing["ledger_usage"] is not None
    assert sorted(r["steps"][-1][0] for r in listing["sessions"]) == [
        "budget_denied",
        "released",
        "released",
    ]
    code, out, _ = run("show", bundle / "sessions.sqlite3")
    assert code == 0
    assert "budget usage (durable ledger in this store):" in out


@pytest.fixture
def session_dsn(postgres_dsn: str) -> Iterator[str]:
    """A fresh database, as the postgresql:// URI a user passes to --store."""
    with fresh_database(postgres_dsn, "cli_session") as dsn:
        parts = conninfo_to_dict(dsn)
        yield (
            f"postgresql://{quote(str(parts['user']))}:{quote(str(parts['password']))}"
            f"@{parts['host']}:{parts['port']}/{parts['dbname']}"
        )


def test_shared_postgres_store_from_the_command_line(bundle: Path, session_dsn: str) -> None:
    _three_attempts(_durable_configs(bundle), "--store", session_dsn)
    assert not (bundle / "sessions.sqlite3").exists()
    code, out, err = run("show", session_dsn, "--json")
    assert (code, err) == (0, "")
    listing = decode(out)
    assert len(listing["sessions"]) == 3
    assert [row["claimed"] for row in listing["budgets"]] == [False]
    assert listing["ledger_usage"] is not None
    assert session_dsn not in out


def test_postgres_store_refusals_never_echo_the_dsn(bundle: Path) -> None:
    (durable, *_rest) = _durable_configs(bundle)
    secret = f"postgresql://evaluator:{CANARY}@127.0.0.1:1/nowhere"
    code, out, err = run("run", durable, "--store", secret)
    assert code == 2
    assert CANARY not in out + err
    assert err == "sealeval: error: store_failed\n"
    code, out, err = run("show", secret)
    assert (code, out) == (2, "")
    assert CANARY not in err
    # A file ledger cannot serialise a shared budget: refused before anything runs.
    code, _, err = run("run", bundle / "attempt-1.yaml", "--store", secret)
    assert err == "sealeval: error: feedback.ledger_usage: shared_store_needs_durable_ledger\n"
    assert CANARY not in err
