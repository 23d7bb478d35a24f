"""docs/cli.md embeds the real ``--help`` of every command; this checks it has not drifted.

Regenerate after changing the CLI: ``SEALEVAL_UPDATE_README=1 pytest tests/test_readme.py``.
"""

from __future__ import annotations

import os
import re

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
