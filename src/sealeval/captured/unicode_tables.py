"""Versioned Unicode tables for replayable scoring, independent of the interpreter.

A comparison policy pins the Unicode version its text scorers were approved
with (``unicode_version``, invarlock writes ``"15.0.0"``). Replay must give the
same scores on every host, so the scorers never use the interpreter's implicit
tables: :func:`unicode_tables` returns the tables of exactly the pinned version
or refuses (``unsupported_unicode_version``).

The tables come from :mod:`sealeval._unicode`, the one home of sealeval's
Unicode data: the versions whose tables ship as package data
(``SHIPPED_UNICODE_VERSIONS``: 14.0.0 and 15.0.0) are available on every
interpreter, and nothing else is — so a policy is accepted or refused, and
scored, identically on CPython 3.11, 3.12, 3.13 and 3.14. Where the
interpreter's :mod:`unicodedata` is the pinned version, or agrees with it on
every character of a text, its C functions are used (the fast path).

Whitespace is the ``str.isspace`` set, pinned here as :data:`WHITESPACE`. It
is the same for every Unicode version since 6.3 (``tests`` re-derive it from
the shipped tables and the standard library).

See ``docs/decisions/unicode-tables.md``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

from sealeval._unicode import SHIPPED_UNICODE_VERSIONS, PinnedTables, pinned_tables
from sealeval.errors import CapturedError

__all__ = [
    "REFERENCE_UNICODE_VERSION",
    "SHIPPED_UNICODE_VERSIONS",
    "WHITESPACE",
    "UnicodeTables",
    "UnicodeTablesError",
    "available_unicode_versions",
    "is_unicode_version",
    "unicode_tables",
]

#: The Unicode version of the reference runtime (invarlock 0.17.1 on CPython 3.12).
#: Scorers without a ``unicode_version`` of their own (``numeric_tolerance``'s
#: Unicode decimal digits and whitespace) use these tables.
REFERENCE_UNICODE_VERSION: Final = "15.0.0"

#: The ``str.isspace`` set: bidirectional class WS, B or S, or category Zs.
WHITESPACE: Final = frozenset(
    chr(code)
    for code in (
        *range(0x09, 0x0E),
        *range(0x1C, 0x21),
        0x85,
        0xA0,
        0x1680,
        *range(0x2000, 0x200B),
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
    )
)

_VERSION: Final = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_MAX_VERSION_LENGTH: Final = 32
_WHITESPACE_RUN: Final = re.compile(
    "[" + "".join(f"\\U{ord(char):08x}" for char in sorted(WHITESPACE)) + "]+"
)
_WHITESPACE_STRIP: Final = "".join(sorted(WHITESPACE))
_MAX_CODE_POINT: Final = 0x10FFFF


class UnicodeTablesError(CapturedError):
    """Refusal to provide the Unicode tables a policy pins."""

    module = "sealeval.captured.unicode_tables"
    field_in_message = True
    codes = frozenset({"invalid_unicode_version", "unsupported_unicode_version"})


def is_unicode_version(value: object) -> bool:
    """Return whether ``value`` is a ``str`` of the form ``<int>.<int>.<int>`` (≤ 32 chars)."""
    return (
        type(value) is str
        and len(value) <= _MAX_VERSION_LENGTH
        and _VERSION.fullmatch(value) is not None
    )


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True, slots=True, eq=False)
class UnicodeTables:
    """The character tables of one exact Unicode version.

    Attributes:
        version: the Unicode version these tables implement (``"15.0.0"``).
        provider: ``"unicodedata"`` (the interpreter is that version) or
            ``"sealeval"`` (the shipped tables, with the interpreter's
            functions as the fast path wherever they agree).
    """

    version: str
    provider: str
    _pinned: PinnedTables

    def __repr__(self) -> str:
        """Show the version and provider only."""
        return f"UnicodeTables(version={self.version!r}, provider={self.provider!r})"

    def normalize(self, form: str, text: str) -> str:
        """Return ``text`` in normalization form ``form`` (``NFC``, ``NFKC``, …)."""
        return self._pinned.normalize(form, text)

    def category(self, char: str) -> str:
        """Return the general category of one character (``"Cn"`` when unassigned)."""
        return self._pinned.category(char)

    def decimal(self, char: str) -> int | None:
        """Return the decimal digit value of one character (category Nd), else ``None``."""
        return self._pinned.decimal(char)

    def casefold(self, text: str) -> str:
        """Return the full Unicode case folding (statuses C + F) of ``text``."""
        return self._pinned.casefold(text)

    @staticmethod
    def is_whitespace(char: str) -> bool:
        """Return whether one character is whitespace (the ``str.isspace`` set)."""
        return char in WHITESPACE

    @staticmethod
    def strip_whitespace(text: str) -> str:
        """Return ``text`` without leading and trailing whitespace."""
        return text.strip(_WHITESPACE_STRIP)

    @staticmethod
    def split_whitespace(text: str) -> list[str]:
        """Split on runs of whitespace, dropping leading and trailing whitespace."""
        # ASCII whitespace (TAB..CR, U+001C..U+001F, SPACE) is the same in every
        # version; beyond ASCII, str.split() is used once the interpreter's set is
        # proven equal to the pinned one.
        if text.isascii() or _interpreter_whitespace_is_pinned():
            return text.split()
        return [token for token in _WHITESPACE_RUN.split(text) if token]


@functools.cache
def _interpreter_whitespace_is_pinned() -> bool:
    """Whether ``str.isspace`` is exactly :data:`WHITESPACE` here (one scan, ~50 ms)."""
    return frozenset(filter(str.isspace, map(chr, range(_MAX_CODE_POINT + 1)))) == WHITESPACE


@functools.cache
def _tables(version: str) -> UnicodeTables:
    pinned = pinned_tables(version)
    if pinned is None:
        raise UnicodeTablesError("unsupported_unicode_version", "unicode_version")
    return UnicodeTables(version, pinned.provider, pinned)


def unicode_tables(version: object) -> UnicodeTables:
    """Return the tables of exactly Unicode ``version``.

    Args:
        version: a version string such as ``"15.0.0"``.

    Returns:
        The (cached, immutable) tables.

    Raises:
        UnicodeTablesError: ``unicode_version: invalid_unicode_version`` when
            ``version`` is not ``<int>.<int>.<int>`` (≤ 32 characters);
            ``unicode_version: unsupported_unicode_version`` when this
            installation cannot provide exactly that version.
    """
    if not is_unicode_version(version):
        raise UnicodeTablesError("invalid_unicode_version", "unicode_version")
    assert isinstance(version, str)
    return _tables(version)


def available_unicode_versions() -> tuple[str, ...]:
    """Return the Unicode versions this installation can provide, ascending (the shipped ones)."""
    return tuple(sorted(SHIPPED_UNICODE_VERSIONS, key=_version_key))
