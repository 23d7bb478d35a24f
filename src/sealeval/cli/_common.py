"""Shared CLI plumbing: error reporting, exit codes and canonical output."""

from __future__ import annotations

import contextlib
import errno
import functools
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any, Final, ParamSpec, TypeVar

import click

from sealeval._unicode import pinned_tables
from sealeval.cli._remedies import FIXED_LIMIT
from sealeval.errors import SealevalError, UsageError

__all__ = [
    "CONTEXT_SETTINGS",
    "EXIT_ERROR",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "closed_usage_errors",
    "decision_order_option",
    "fail",
    "printable",
    "refusal_line",
    "refusals_exit",
    "refusals_naming",
    "shared_remedy",
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


#: Unicode general categories :func:`printable` escapes (controls, format, surrogates,
#: private use, unassigned, line and paragraph separators).
_UNPRINTABLE: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: Categories come from one pinned Unicode version, so that a message is the
#: same bytes on every interpreter (a character newer than it is escaped).
_PRINTABLE_UNICODE: Final = "15.0.0"


def printable(text: str) -> str:
    r"""Return user-supplied text (policy names, paths) for a terminal, invisible ones escaped.

    Every control, format, surrogate, private-use, unassigned or separator
    character becomes ``\uXXXX``, so a name cannot move the cursor, hide text
    or break a line.
    """
    tables = pinned_tables(_PRINTABLE_UNICODE)
    assert tables is not None  # the version ships with the package
    return "".join(
        f"\\u{ord(char):04x}" if tables.category(char) in _UNPRINTABLE else char for char in text
    )


#: Remedies shared by the captured commands, by closed code (options only, never values).
_SHARED_REMEDIES: Final[Mapping[str, str]] = {
    "provenance_mismatch": "re-import the runs with --score-provenance FILE naming the "
    "policy's accepted provenance for its score key (sealeval import --help)",
}


def shared_remedy(code: str) -> str | None:
    """Return the remedy line a refusal's closed code calls for on every command, or ``None``.

    ``provenance_mismatch`` (a run's recorded scores lack the provenance the
    policy accepts) is remedied by importing the runs again with
    ``--score-provenance FILE``.
    """
    return _SHARED_REMEDIES.get(code)


def refusal_line(error: SealevalError, options: Mapping[str, str] | None = None) -> str:
    """Return ``sealeval: error: <what the user typed>: <code>`` for a refusal.

    ``options`` maps the library's field names to what the user typed for
    them (``max_bootstrap_draws`` -> ``--max-bootstrap-draws``, ``pack`` ->
    ``EVIDENCE``); a field it does not name is printed as it is (a field
    inside a file the user wrote). Never a value.
    """
    field = error.field
    named = None if field is None or options is None else options.get(field)
    if named is None:
        return f"sealeval: error: {error}"
    return f"sealeval: error: {named}: {error.code}"


def fail(error: SealevalError, options: Mapping[str, str] | None = None) -> click.exceptions.Exit:
    """Print a refusal (option or field, code, shared remedy) and return the exit to raise."""
    click.echo(refusal_line(error, options), err=True)
    hint = shared_remedy(error.code)
    if hint is not None:
        click.echo(f"sealeval: {hint}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def refusals_naming(
    options: Mapping[str, str] | None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Return :func:`refusals_exit` naming fields by the options in ``options``.

    A ``too_large`` refusal gets the line saying its limit is fixed (commands
    whose limits an option lifts print their own remedy before reaching here).
    """

    def decorate(command: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(command)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return command(*args, **kwargs)
            except SealevalError as error:
                exit_ = fail(error, options)
                if error.code == "too_large":  # no option of these commands lifts a size limit
                    click.echo(f"sealeval: {FIXED_LIMIT}", err=True)
                raise exit_ from None
            except OSError as error:
                if error.errno == errno.EPIPE:
                    raise
                raise fail(UsageError(_os_code(error), "file")) from None

        return wrapper

    return decorate


def refusals_exit(command: Callable[P, R]) -> Callable[P, R]:
    """Turn any :class:`SealevalError` (or stray ``OSError``) of a command into exit status 2."""
    return refusals_naming(None)(command)


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


# ---------------------------------------------------------------------------
# Usage errors and operating-system errors in the closed-code format


class ClosedUsageError(click.ClickException):
    """A usage or I/O refusal already reduced to ``<field>: <code>`` (exit 2)."""

    exit_code = EXIT_ERROR

    def __init__(self, error: SealevalError, choices: tuple[str, ...] = ()) -> None:
        """Keep the closed error and the declared choices (never the typed value)."""
        super().__init__(str(error))
        self.error = error
        self.choices = choices

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``sealeval: error: <field>: <code>`` (plus the valid choices)."""
        suffix = f" (choose from: {', '.join(self.choices)})" if self.choices else ""
        click.echo(f"sealeval: error: {self.error}{suffix}", err=True, file=file)


def _declared_name(param: click.Parameter | None) -> str | None:
    """Return the parameter's declared long name (library text), never what was typed."""
    if param is None:
        return None
    if isinstance(param, click.Option):
        longs = [opt for opt in param.opts if opt.startswith("--")]
        return (longs or list(param.opts) or [param.name or "option"])[0]
    return param.name


def _declared_choices(param: click.Parameter | None) -> tuple[str, ...]:
    if param is not None and isinstance(param.type, click.Choice):
        return tuple(str(choice) for choice in param.type.choices)
    return ()


def _closed_usage(error: click.UsageError) -> ClosedUsageError | None:
    """Map one click usage error to a closed code, or ``None`` for a library-authored message."""
    if isinstance(error, click.NoSuchOption):
        return ClosedUsageError(UsageError("unknown_option", "option"))
    if isinstance(error, click.MissingParameter):
        param = error.param
        code = "missing_argument" if isinstance(param, click.Argument) else "missing_option"
        return ClosedUsageError(UsageError(code, _declared_name(param) or "argument"))
    if isinstance(error, click.BadParameter):
        param = error.param
        choices = _declared_choices(param)
        code = "invalid_choice" if choices else "invalid_value"
        return ClosedUsageError(UsageError(code, _declared_name(param) or "option"), choices)
    if isinstance(error, click.BadOptionUsage):
        return ClosedUsageError(UsageError("invalid_option_usage", "option"))
    if isinstance(error, click.BadArgumentUsage):
        return ClosedUsageError(UsageError("invalid_argument", "argument"))
    return next(
        (
            ClosedUsageError(UsageError(code, field))
            for prefix, code, field in _CLICK_TEMPLATES
            if error.message.startswith(prefix)
        ),
        None,
    )


#: Click's own plain usage errors (they quote what was typed) and their codes.
_CLICK_TEMPLATES: Final = (
    ("Got unexpected extra argument", "unexpected_argument", "argument"),
    ("No such command", "unknown_command", "command"),
    ("Missing command", "missing_command", "command"),
)


def _os_code(error: OSError) -> str:
    if isinstance(error, FileNotFoundError):
        return "not_found"
    if isinstance(error, PermissionError):
        return "permission_denied"
    if error.errno == errno.ENOSPC:
        return "no_space"
    return "os_error"


@contextlib.contextmanager
def closed_usage_errors() -> Iterator[None]:
    """Reduce click usage errors and stray ``OSError`` exceptions to the closed-code format.

    Click's own messages quote what was typed (an unknown option, a bad
    choice, an extra argument); this replaces them with
    ``sealeval: error: <option>: <code>`` (exit 2), naming only the declared
    option and, for a choice, the valid choices. A ``click.UsageError``
    raised by a command with its own constant message is left as it is. An
    ``OSError`` that escaped a command becomes ``file: <code>`` with no
    traceback and no path.
    """
    try:
        yield
    except click.UsageError as error:
        closed = _closed_usage(error)
        if closed is None:
            raise
        raise closed from None
    except OSError as error:
        if error.errno == errno.EPIPE:
            raise
        raise ClosedUsageError(UsageError(_os_code(error), "file")) from None
