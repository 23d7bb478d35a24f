"""The ``sealeval`` command line: one module per command group, thin by design.

Exit codes: 0 success (eligible), 1 a negative verdict (not eligible), 2 a
usage or input error. Errors print ``sealeval: error: <field>: <code>`` to
standard error and never echo submitted values.
"""

from __future__ import annotations

import click

from sealeval import __version__
from sealeval.cli._common import CONTEXT_SETTINGS

# Imported under other names so that `sealeval.cli.<module>` stays the module.
from sealeval.cli.compare import compare_command
from sealeval.cli.demo import demo as demo_command
from sealeval.cli.evaluate import evaluate_command
from sealeval.cli.gates import gates as gates_group
from sealeval.cli.imports import import_command
from sealeval.cli.manifest import manifest as manifest_group
from sealeval.cli.report import report_command
from sealeval.cli.session import session as session_group
from sealeval.cli.verify import verify_command

__all__ = ["cli", "main"]


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="sealeval")
def cli() -> None:
    """Make evaluation results trustworthy: seal, verify, gate and sign."""


cli.add_command(manifest_group)
cli.add_command(gates_group)
cli.add_command(session_group)
cli.add_command(import_command)
cli.add_command(compare_command)
cli.add_command(report_command)
cli.add_command(evaluate_command)
cli.add_command(verify_command)
cli.add_command(demo_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="sealeval")
