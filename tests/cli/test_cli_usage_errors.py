"""#13 item 8: every usage error of every command: a closed code, exit 2, no echo, no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sealeval.cli import cli
from support.refusals import CANARY

LINE = re.compile(
    r"sealeval: error: (?:--)?[A-Za-z0-9_][A-Za-z0-9_.\[\]-]*: [a-z_]+(?: \(choose from: [^)]*\))?"
)


def _leaves(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from _leaves(command, (*prefix, name))
        else:
            yield (*prefix, name), command


LEAVES = sorted(_leaves(cli), key=lambda item: item[0])
IDS = [" ".join(path) for path, _ in LEAVES]


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.exit_code, result.output + result.stderr if result.stderr_bytes else result.output


def _assert_closed(code: int, output: str) -> None:
    assert code == 2, output
    assert CANARY not in output
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines, "a refusal must say something"
    assert LINE.fullmatch(lines[-1]), lines[-1]


def _required_arguments(command: click.Command) -> list[click.Argument]:
    return [p for p in command.params if isinstance(p, click.Argument) and p.required]


def _choice_options(command: click.Command) -> list[click.Option]:
    return [
        p
        for p in command.params
        if isinstance(p, click.Option) and isinstance(p.type, click.Choice) and not p.is_flag
    ]


def _requires_an_option(command: click.Command) -> bool:
    return any(p.required for p in command.params if isinstance(p, click.Option))


def _takes_fixed_arguments(command: click.Command) -> bool:
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    return not any(p.nargs == -1 for p in arguments) and not _requires_an_option(command)


def _where(
    rule: Callable[[click.Command], bool],
) -> tuple[list[tuple[tuple[str, ...], click.Command]], list[str]]:
    """The commands a rule applies to (each case is generated only where it can fail)."""
    chosen = [(path, command) for path, command in LEAVES if rule(command)]
    assert chosen, "a usage rule that applies to no command tests nothing"
    return chosen, [" ".join(path) for path, _ in chosen]


WITH_CHOICES, WITH_CHOICES_IDS = _where(lambda command: bool(_choice_options(command)))
FIXED_ARGUMENTS, FIXED_ARGUMENTS_IDS = _where(_takes_fixed_arguments)
REQUIRING, REQUIRING_IDS = _where(
    lambda command: bool(_required_arguments(command)) or _requires_an_option(command)
)


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=IDS)
def test_unknown_option_is_not_echoed(path: tuple[str, ...], command: click.Command) -> None:
    code, output = _run([*path, f"--{CANARY.lower()}", CANARY])
    _assert_closed(code, output)
    assert "unknown_option" in output


@pytest.mark.parametrize(("path", "command"), WITH_CHOICES, ids=WITH_CHOICES_IDS)
def test_bad_choice_is_not_echoed(path: tuple[str, ...], command: click.Command) -> None:
    for option in _choice_options(command):
        code, output = _run([*path, option.opts[0], CANARY])
        _assert_closed(code, output)
        assert "invalid_choice" in output
        for choice in option.type.choices:  # type: ignore[attr-defined]
            assert str(choice) in output


@pytest.mark.parametrize(("path", "command"), FIXED_ARGUMENTS, ids=FIXED_ARGUMENTS_IDS)
def test_extra_argument_is_not_echoed(path: tuple[str, ...], command: click.Command) -> None:
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    values = [CANARY] * (len(arguments) + 1)
    code, output = _run([*path, *values])
    _assert_closed(code, output)


@pytest.mark.parametrize(("path", "command"), REQUIRING, ids=REQUIRING_IDS)
def test_missing_argument_is_closed(path: tuple[str, ...], command: click.Command) -> None:
    code, output = _run(list(path))
    _assert_closed(code, output)
    assert re.search(r"missing_(argument|option)", output)


def test_unknown_command_and_root_option() -> None:
    for args in ([CANARY], [f"--{CANARY}"], ["manifest", CANARY], ["gates"]):
        code, output = _run(args)
        if args == ["gates"]:
            # a group without a command prints its help (click's behaviour), exit 0 or 2
            assert CANARY not in output
            continue
        _assert_closed(code, output)


def test_help_and_version_still_work() -> None:
    assert CliRunner().invoke(cli, ["--help"]).exit_code == 0
    assert CliRunner().invoke(cli, ["--version"]).exit_code == 0
    assert CliRunner().invoke(cli, ["verify", "--help"]).exit_code == 0


def test_os_error_of_a_command_is_closed_without_traceback(tmp_path: Path) -> None:
    """``sealeval demo --out /proc/<canary>`` printed a traceback with the path."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(
        [sys.executable, "-m", "sealeval", "demo", "--out", f"/proc/{CANARY}/x"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=environment,
        check=False,
    )
    assert result.returncode == 2
    assert CANARY not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert LINE.fullmatch(result.stderr.strip().splitlines()[-1])


def test_real_binary_routes_usage_errors(tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(
        [sys.executable, "-m", "sealeval", "verify", "x", "--decision-order", CANARY],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=environment,
        check=False,
    )
    assert result.returncode == 2
    assert CANARY not in result.stdout + result.stderr
    assert result.stderr.strip() == (
        "sealeval: error: --decision-order: invalid_choice (choose from: reference, width_first)"
    )
