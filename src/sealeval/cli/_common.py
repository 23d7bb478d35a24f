"""Shared CLI plumbing: error reporting, exit codes and canonical output."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Final, ParamSpec, TypeVar

import click

from sealeval.errors import SealevalError

__all__ = [
    "CONTEXT_SETTINGS",
    "EXIT_ERROR",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "decision_order_option",
    "fail",
    "refusals_exit",
]

#: Applied to every group and command (not only the root): click caches a
#: command's help option the first time it is built, so a command invoked on
#: its own must already carry the same settings. The fixed width keeps --help
#: identical on every terminal (the README embeds it).
CONTEXT_SETTINGS: Final[dict[str, object]] = {
    "help_option_names": ["-h", "--help"],
    "terminal_width": 88,
    "max_content_width": 88,
}

EXIT_OK: Final = 0
EXIT_NEGATIVE: Final = 1
EXIT_ERROR: Final = 2

P = ParamSpec("P")
R = TypeVar("R")


def fail(error: SealevalError) -> click.exceptions.Exit:
    """Print a refusal (field and code only) and return the exit to raise."""
    click.echo(f"sealeval: error: {error}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def refusals_exit(command: Callable[P, R]) -> Callable[P, R]:
    """Turn any :class:`SealevalError` raised by a command into exit status 2."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except SealevalError as error:
            raise fail(error) from None

    return wrapper


#: The decision orders of the comparison (``sealeval.captured.pack_reader.DECISION_ORDERS``).
DECISION_ORDER_CHOICES: Final = ("reference", "width_first")


def decision_order_option(help_text: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Return the ``--decision-order reference|width_first`` option (default ``reference``)."""
    return click.option(
        "--decision-order",
        type=click.Choice(DECISION_ORDER_CHOICES),
        default="reference",
        show_default=True,
        help=help_text,
    )


def is_terminal() -> bool:
    """Return whether standard error is an interactive terminal."""
    return sys.stderr.isatty()
