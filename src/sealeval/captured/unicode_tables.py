"""Versioned Unicode tables for replayable scoring, independent of the interpreter.

A comparison policy pins the Unicode version its text scorers were approved
with (``unicode_version``, invarlock writes ``"15.0.0"``). Replay must give the
same scores on every host, so the scorers never use the interpreter's implicit
tables: :func:`unicode_tables` returns the tables of exactly the pinned version
or refuses (``unsupported_unicode_version``). Two providers are consulted:

* the standard library :mod:`unicodedata` provides its own version
  (Unicode 14.0.0 on CPython 3.11, 15.0.0 on 3.12, 15.1.0 on 3.13);
* the ``unicodedata2`` distribution, when installed, provides the version it
  was built for (sealeval depends on ``unicodedata2==15.0.0``, which is
  exactly Unicode 15.0.0 on every supported Python).

The standard library is preferred when both provide the version (then the
interpreter's ``str.casefold`` is the same version as well). Nothing else is
offered (in particular not ``unicodedata.ucd_3_2_0``).

Beyond the character database, the scorers need case folding and a whitespace
class, which Python only offers through ``str`` methods (interpreter tables):

* **Whitespace** is the ``str.isspace`` set, pinned here as :data:`WHITESPACE`.
  It is the same for every Unicode version since 6.3 (``tests`` re-derive it
  from both databases: bidirectional class WS/B/S or category Zs).
* **Case folding** uses ``str.casefold`` with a per-version proof that it
  equals the pinned version's full case folding (CaseFolding.txt C + F) on
  every string the scorers fold (they fold NFKC output; Unicode's case-folding
  stability policy keeps the folding of an assigned character unchanged in
  later versions):

  - interpreter version == pinned version: identical tables;
  - interpreter *newer* than the pinned version: characters the interpreter
    assigns but the pinned version does not are left unchanged (as the pinned
    version does); every other character folds identically by stability;
  - interpreter *older* than the pinned version: only combinations listed in
    :data:`VERIFIED_OLDER_INTERPRETERS` are accepted — those where no character
    added between the two versions has a case folding (checked for
    15.0.0 over 14.0.0: the 4,489 new characters contain no Lu/Lt letter and
    the six new Ll letters have no uppercase); anything else is refused.

See ``docs/decisions/unicode-tables.md``.
"""

from __future__ import annotations

import functools
import importlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Final

from sealeval.errors import CapturedError

__all__ = [
    "REFERENCE_UNICODE_VERSION",
    "VERIFIED_OLDER_INTERPRETERS",
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

#: Pinned version -> older interpreter versions whose ``str.casefold`` was
#: verified to equal the pinned version's case folding (no character added in
#: between has a case folding). See the module docstring.
VERIFIED_OLDER_INTERPRETERS: Final = {"15.0.0": frozenset({"14.0.0"})}

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
_UNASSIGNED: Final = "Cn"
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
        provider: ``"unicodedata"`` (standard library) or ``"unicodedata2"``.
    """

    version: str
    provider: str
    _database: Any
    # Characters the interpreter's str.casefold knows but this version leaves
    # unassigned (non-empty only when the interpreter is newer).
    _unassigned: frozenset[str]

    def __repr__(self) -> str:
        """Show the version and provider only."""
        return f"UnicodeTables(version={self.version!r}, provider={self.provider!r})"

    def normalize(self, form: str, text: str) -> str:
        """Return ``text`` in normalization form ``form`` (``NFC``, ``NFKC``, …)."""
        result: str = self._database.normalize(form, text)
        return result

    def category(self, char: str) -> str:
        """Return the general category of one character (``"Cn"`` when unassigned)."""
        result: str = self._database.category(char)
        return result

    def decimal(self, char: str) -> int | None:
        """Return the decimal digit value of one character (category Nd), else ``None``."""
        result: int | None = self._database.decimal(char, None)
        return result

    def casefold(self, text: str) -> str:
        """Return the full Unicode case folding (statuses C + F) of ``text``."""
        if text.isascii() or not self._unassigned or self._unassigned.isdisjoint(text):
            return text.casefold()
        unassigned = self._unassigned
        return "".join(char if char in unassigned else char.casefold() for char in text)

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


def _load_unicodedata2() -> Any:
    try:
        return importlib.import_module("unicodedata2")
    except ImportError:
        return None


def _assignment_gap(pinned: Any, interpreter: Any) -> frozenset[str]:
    """Return the characters ``interpreter`` assigns and ``pinned`` leaves unassigned."""
    gap = []
    for code in range(_MAX_CODE_POINT + 1):
        char = chr(code)
        if interpreter.category(char) != _UNASSIGNED and pinned.category(char) == _UNASSIGNED:
            gap.append(char)
    return frozenset(gap)


def _select(version: str, standard: Any, extra: Any) -> UnicodeTables:
    """Choose the provider of ``version`` and the case-folding strategy."""
    interpreter_version: str = standard.unidata_version
    if standard.unidata_version == version:
        return UnicodeTables(version, "unicodedata", standard, frozenset())
    if extra is None or extra.unidata_version != version:
        raise UnicodeTablesError("unsupported_unicode_version", "unicode_version")
    if _version_key(interpreter_version) > _version_key(version):
        return UnicodeTables(version, "unicodedata2", extra, _assignment_gap(extra, standard))
    if interpreter_version not in VERIFIED_OLDER_INTERPRETERS.get(version, frozenset()):
        raise UnicodeTablesError("unsupported_unicode_version", "unicode_version")
    return UnicodeTables(version, "unicodedata2", extra, frozenset())


@functools.cache
def _tables(version: str) -> UnicodeTables:
    return _select(version, unicodedata, _load_unicodedata2())


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
    """Return the Unicode versions this installation can provide, ascending."""
    versions = []
    for candidate in {
        unicodedata.unidata_version,
        getattr(_load_unicodedata2(), "unidata_version", None),
    }:
        if isinstance(candidate, str):
            try:
                unicode_tables(candidate)
            except UnicodeTablesError:
                continue
            versions.append(candidate)
    return tuple(sorted(versions, key=_version_key))
