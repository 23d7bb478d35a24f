"""The real ``--help`` of every command (docs/cli.md), and every README command block run verbatim.

Regenerate after changing the CLI: ``SEALEVAL_UPDATE_README=1 pytest tests/test_readme.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from sealeval.cli import cli
from support.vectors import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
#: The help blocks of every command live in the CLI reference, not the quick start.
HELP_PAGE = PROJECT_ROOT / "docs" / "cli.md"
BLOCK = re.compile(r"<!-- help: (?P<command>[a-z -]+) -->\n```text\n(?P<body>.*?)```\n", re.DOTALL)


def _help(command: str) -> str:
    args = [*command.split()[1:], "--help"]
    result = CliRunner().invoke(cli, args, prog_name="sealeval", catch_exceptions=False)
    assert result.exit_code == 0
    return result.stdout


def _all_commands(group: click.Command, prefix: str) -> list[str]:
    found = [prefix]
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            found += _all_commands(command, f"{prefix} {name}")
    return found


def test_help_blocks_match_the_cli() -> None:
    text = HELP_PAGE.read_text(encoding="utf-8")
    if os.environ.get("SEALEVAL_UPDATE_README"):
        text = BLOCK.sub(
            lambda m: f"<!-- help: {m['command']} -->\n```text\n{_help(m['command'])}```\n", text
        )
        HELP_PAGE.write_text(text, encoding="utf-8")
    blocks = {m["command"]: m["body"] for m in BLOCK.finditer(text)}
    assert sorted(blocks) == sorted(_all_commands(cli, "sealeval")), (
        "every command needs a help block"
    )
    for command, body in blocks.items():
        assert body == _help(command), f"docs/cli.md help for `{command}` drifted"


def test_help_is_the_same_when_a_group_is_invoked_on_its_own() -> None:
    # click caches a command's help option when it is first built; a group
    # invoked standalone (as its own tests do) must not change the root's help.
    for name, command in sorted(cli.commands.items()):
        standalone = CliRunner().invoke(command, ["--help"], prog_name=f"sealeval {name}")
        assert standalone.exit_code == 0
        assert standalone.stdout == _help(f"sealeval {name}")


# ---------------------------------------------------------------------------
# Every command block runs verbatim (after the documented set-up: `make demo`)

COMMAND_BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<marker>[^\n]*?) -->\n)?```sh\n(?P<body>.*?)```\n", re.DOTALL
)
#: What the blocks leave behind, relative to the folder they ran in.
PRODUCED = (
    "demo-out/artifacts/manifest.json",
    "safety.json",
    "recovery.json",
    "my-session/sessions.sqlite3",
    "baseline.run.json",
    "candidate.run.json",
    "keys/private.pem",
    "evidence/manifest.signature.json",
    "receipt.json",
    "report.html",
    "report.md",
    "junit.xml",
)


def _command_blocks() -> list[tuple[str | None, str]]:
    text = README.read_text(encoding="utf-8")
    return [(m["marker"], m["body"]) for m in COMMAND_BLOCK.finditer(text)]


def test_every_command_block_is_run_or_says_why_not() -> None:
    blocks = _command_blocks()
    assert len(blocks) >= 8
    assert all(body.count("```") == 0 for _, body in blocks)
    skipped = [marker for marker, _ in blocks if marker is not None]
    # Only the set-up commands themselves, blocks needing the user's own
    # infrastructure or artifacts and the long-running viewer are not run; each
    # names why and which test covers it instead.
    assert len(skipped) == 5
    for marker in skipped:
        assert re.fullmatch(r"skip \(.{20,}\)", marker), marker


def _environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(HOME=str(folder), GIT_CONFIG_NOSYSTEM="1", SOURCE_DATE_EPOCH="1700000000")
    return env


def test_readme_command_blocks_run_verbatim(tmp_path: Path) -> None:
    env = _environment(tmp_path)

    def bash(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )

    # The documented set-up: `make demo` (its last step) in a git checkout.
    setup = bash(
        "git init -q . && git -c user.name=r -c user.email=r@example.invalid "
        "commit -q --allow-empty -m readme && sealeval demo --out demo-out >/dev/null"
    )
    assert setup.returncode == 0, setup.stderr[-2000:]
    ran = 0
    for index, (marker, body) in enumerate(_command_blocks()):
        if marker is not None:
            continue
        result = bash(body)
        assert result.returncode == 0, f"README command block {index}: {result.stderr[-3000:]}"
        ran += 1
    assert ran >= 5
    for name in PRODUCED:
        assert (tmp_path / name).is_file(), name
    assert (
        "PASS Independent captured verification complete"
        in bash(
            "sealeval verify demo-out/captured/evidence --trust-profile "
            "demo-out/captured/trust.json --receipt again.json"
        ).stdout
    )
