"""The ``sealeval`` command line: one module per command group, thin by design.

Exit codes: 0 success (eligible), 1 a negative verdict (not eligible), 2 a
usage or input error. Errors print ``sealeval: error: <field>: <code>`` to
standard error and never echo submitted values -- click's usage errors too
(an unknown option, a bad choice, an extra argument are reduced to closed
codes by :func:`sealeval.cli._common.closed_usage_errors`), and an ``OSError``
that escapes a command becomes ``file: <code>`` without a traceback.

Commands are imported when first used (``sealeval verify`` does not import
the session store, the gates or numpy-heavy modules it never calls); the
group lists and documents all of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final

import click

from sealeval import __version__
from sealeval.cli._common import CONTEXT_SETTINGS, closed_usage_errors

__all__ = ["cli", "main"]

#: Command name -> (module, attribute). Loaded on first use.
COMMANDS: Final[Mapping[str, tuple[str, str]]] = {
    "attest": ("sealeval.cli.attest", "attest"),
    "compare": ("sealeval.cli.compare", "compare_command"),
    "demo": ("sealeval.cli.demo", "demo"),
    "evaluate": ("sealeval.cli.evaluate", "evaluate_command"),
    "gates": ("sealeval.cli.gates", "gates"),
    "import": ("sealeval.cli.imports", "import_command"),
    "init": ("sealeval.cli.init", "init"),
    "manifest": ("sealeval.cli.manifest", "manifest"),
    "plan": ("sealeval.cli.plan", "plan_command"),
    "report": ("sealeval.cli.report", "report_command"),
    "extended": ("sealeval.cli.extended", "extended_command"),
    "session": ("sealeval.cli.session", "session"),
    "verify": ("sealeval.cli.verify", "verify_command"),
    "view": ("sealeval.cli.view", "view_command"),
}


class _LazyGroup(click.Group):
    """A group whose subcommands are imported when first looked up."""

    _loaded: dict[str, click.Command]

    @property
    def commands(self) -> dict[str, click.Command]:
        """Every command (all are loaded: for help, completion and introspection)."""
        for name in COMMANDS:
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value: Mapping[str, click.Command]) -> None:
        self._loaded = dict(value)

    def _load(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            module, attribute = COMMANDS[name]
            loaded = getattr(importlib.import_module(module), attribute)
            assert isinstance(loaded, click.Command)
            command = self._loaded[name] = loaded
        return command

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Return one command, importing only its module."""
        if cmd_name in COMMANDS:
            return self._load(cmd_name)
        return self._loaded.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return every command name, sorted (as click lists them)."""
        return sorted({*COMMANDS, *self._loaded})

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Parse the root's own options; usage errors in the closed-code format."""
        with closed_usage_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run a command; usage errors and stray OS errors in the closed-code format."""
        with closed_usage_errors():
            return super().invoke(ctx)


@click.group(cls=_LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="sealeval")
def cli() -> None:
    """Make evaluation results trustworthy: seal, verify, gate and sign."""


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="sealeval")
