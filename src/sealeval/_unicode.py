"""Pinned Unicode character data and normalization, independent of the interpreter.

The one home of sealeval's Unicode tables. Contracts pin a Unicode version
(openmed's overlap forensics 14.0.0, invarlock's text scorers 15.0.0), while
each CPython ships its own (3.11: 14.0.0, 3.12: 15.0.0, 3.13: 15.1.0, 3.14:
16.0.0). :func:`pinned_tables` returns the tables of exactly one version:

* when the interpreter's :mod:`unicodedata` is that version, its functions
  (and ``str.casefold``) are used as they are;
* else the version's tables shipped as package data
  (``sealeval/_data/unicode/<version>.json``, generated from the Unicode
  Character Database by ``scripts/unicode/generate_tables.py``) are used:
  general category, canonical combining class, decomposition mappings,
  composition exclusions, full case folding (CaseFolding.txt C + F) and
  decimal digit values, with the normalization algorithm of UAX #15
  implemented here.

**Fast path.** The interpreter's C implementation is still used for every text
whose characters all have the same data in both versions (always for ASCII):
each distinct non-ASCII character is compared once (category, combining
class, decomposition, case folding, decimal value) and the answer cached.
This is exact by Unicode's normalization and case-folding stability
policies: a string of characters whose data agree normalizes and folds alike
in both versions (a composite one version adds over existing characters is a
composition exclusion). Texts with any other character take the pure-Python
path over the pinned tables.

Conformance: every shipped version passes its own ``NormalizationTest.txt``
on every interpreter CI runs (``tests/captured/test_unicode_tables_data.py``).
"""

from __future__ import annotations

import bisect
import functools
import unicodedata
from importlib import resources
from typing import Any, Final, Literal

from sealeval.canonical import decode

__all__ = [
    "FORMS",
    "SHIPPED_UNICODE_VERSIONS",
    "PinnedTables",
    "pinned_tables",
    "pure_casefold",
    "pure_normalize",
    "shipped_data",
]

#: Unicode versions whose tables ship with sealeval (package data).
SHIPPED_UNICODE_VERSIONS: Final = ("14.0.0", "15.0.0")
_Form = Literal["NFC", "NFD", "NFKC", "NFKD"]
_FORM_NAMES: Final[dict[str, _Form]] = {"NFC": "NFC", "NFD": "NFD", "NFKC": "NFKC", "NFKD": "NFKD"}
#: The normalization forms.
FORMS: Final = frozenset(_FORM_NAMES)

_SCHEMA: Final = "sealeval.unicode-tables/1"
_MAX_TABLE_BYTES: Final = 4 * 1024 * 1024

# Hangul syllables (Unicode chapter 3.12): algorithmic decomposition and composition.
_S_BASE: Final = 0xAC00
_L_BASE: Final = 0x1100
_V_BASE: Final = 0x1161
_T_BASE: Final = 0x11A7
_L_COUNT: Final = 19
_V_COUNT: Final = 21
_T_COUNT: Final = 28
_N_COUNT: Final = _V_COUNT * _T_COUNT
_S_COUNT: Final = _L_COUNT * _N_COUNT


class _Data:
    """One version's character data, loaded from package data and checked."""

    __slots__ = (
        "canonical",
        "category_starts",
        "category_values",
        "combining",
        "compatibility",
        "compose",
        "decimal",
        "decomposition_strings",
        "folding",
        "version",
    )

    def __init__(self, version: str, document: dict[str, Any]) -> None:
        if document.get("schema") != _SCHEMA or document.get("unicode_version") != version:
            raise ValueError("unicode tables: wrong schema or version")
        runs = document["categories"]
        self.version = version
        self.category_starts: list[int] = [int(start) for start, _ in runs]
        self.category_values: list[str] = [str(value) for _, value in runs]
        if not self.category_starts or self.category_starts[0] != 0:
            raise ValueError("unicode tables: categories do not start at U+0000")
        self.combining: dict[int, int] = {
            int(code): int(cls) for code, cls in document["combining"]
        }
        self.decimal: dict[int, int] = {
            int(code): int(value) for code, value in document["decimal"]
        }
        self.folding: dict[int, str] = {
            int(code): "".join(map(chr, mapping)) for code, mapping in document["case_folding"]
        }
        raw: dict[int, tuple[str, tuple[int, ...]]] = {
            int(code): (str(tag), tuple(int(part) for part in mapping))
            for code, tag, mapping in document["decompositions"]
        }
        self.decomposition_strings: dict[int, str] = {
            code: " ".join(([tag] if tag else []) + [f"{part:04X}" for part in mapping])
            for code, (tag, mapping) in raw.items()
        }
        self.canonical: dict[int, tuple[int, ...]] = {}
        self.compatibility: dict[int, tuple[int, ...]] = {}
        for code in raw:
            self.canonical[code] = self._expand(code, raw, compatibility=False)
            self.compatibility[code] = self._expand(code, raw, compatibility=True)
        for code in [code for code, full in self.canonical.items() if full == (code,)]:
            del self.canonical[code]
        excluded = {int(code) for code in document["composition_exclusions"]}
        self.compose: dict[tuple[int, int], int] = {}
        for code, (tag, mapping) in raw.items():
            if tag or len(mapping) != 2 or code in excluded:
                continue
            if self.combining.get(code, 0) or self.combining.get(mapping[0], 0):
                continue  # non-starter decompositions are excluded
            self.compose[mapping] = code

    @staticmethod
    def _expand(
        code: int, raw: dict[int, tuple[str, tuple[int, ...]]], *, compatibility: bool
    ) -> tuple[int, ...]:
        entry = raw.get(code)
        if entry is None or (entry[0] and not compatibility):
            return _hangul_decomposition(code) or (code,)
        result: list[int] = []
        for part in entry[1]:
            result.extend(_Data._expand(part, raw, compatibility=compatibility))
        return tuple(result)

    def category(self, code: int) -> str:
        index = bisect.bisect_right(self.category_starts, code) - 1
        return self.category_values[index]


def _hangul_decomposition(code: int) -> tuple[int, ...]:
    index = code - _S_BASE
    if not 0 <= index < _S_COUNT:
        return ()
    leading = _L_BASE + index // _N_COUNT
    vowel = _V_BASE + (index % _N_COUNT) // _T_COUNT
    trailing = index % _T_COUNT
    return (leading, vowel, _T_BASE + trailing) if trailing else (leading, vowel)


def _hangul_composition(first: int, second: int) -> int | None:
    if _L_BASE <= first < _L_BASE + _L_COUNT and _V_BASE <= second < _V_BASE + _V_COUNT:
        return _S_BASE + ((first - _L_BASE) * _V_COUNT + second - _V_BASE) * _T_COUNT
    index = first - _S_BASE
    if 0 <= index < _S_COUNT and index % _T_COUNT == 0 and _T_BASE < second < _T_BASE + _T_COUNT:
        return first + second - _T_BASE
    return None


def _normalize(data: _Data, form: str, text: str) -> str:
    """UAX #15 over ``data``: full decomposition, canonical ordering, optional composition."""
    table = data.compatibility if form in ("NFKC", "NFKD") else data.canonical
    combining = data.combining
    decomposed: list[int] = []
    for char in text:
        code = ord(char)
        mapped = table.get(code)
        if mapped is None:
            mapped = _hangul_decomposition(code) or (code,)
        decomposed.extend(mapped)
    # Canonical ordering: stable sort of every run of non-starters by class.
    index = 0
    while index < len(decomposed):
        if not combining.get(decomposed[index], 0):
            index += 1
            continue
        end = index
        while end < len(decomposed) and combining.get(decomposed[end], 0):
            end += 1
        decomposed[index:end] = sorted(decomposed[index:end], key=combining.__getitem__)
        index = end
    if form in ("NFD", "NFKD"):
        return "".join(map(chr, decomposed))
    return "".join(map(chr, _compose(data, decomposed)))


def _compose(data: _Data, decomposed: list[int]) -> list[int]:
    combining = data.combining
    pairs = data.compose
    result: list[int] = []
    starter = -1
    previous_class = 0
    for code in decomposed:
        code_class = combining.get(code, 0)
        if starter >= 0 and (
            len(result) - 1 == starter or (previous_class and previous_class < code_class)
        ):
            first = result[starter]
            composite = pairs.get((first, code))
            if composite is None:
                composite = _hangul_composition(first, code)
            if composite is not None:
                result[starter] = composite
                continue
        if not code_class:
            starter = len(result)
        result.append(code)
        previous_class = code_class
    return result


@functools.cache
def _load(version: str) -> _Data:
    resource = resources.files("sealeval").joinpath("_data", "unicode", f"{version}.json")
    with resource.open("rb") as stream:
        raw = stream.read(_MAX_TABLE_BYTES + 1)
    if len(raw) > _MAX_TABLE_BYTES:
        raise ValueError("unicode tables: over the size limit")
    document = decode(raw)
    if not isinstance(document, dict):
        raise ValueError("unicode tables: not an object")  # noqa: TRY004 - package data
    return _Data(version, document)


class PinnedTables:
    """The character data and normalization of exactly one Unicode version.

    Attributes:
        version: the Unicode version (``"15.0.0"``).
        provider: ``"unicodedata"`` (the interpreter is that version) or
            ``"sealeval"`` (the shipped tables, with the interpreter's
            functions as the fast path where they agree).
    """

    __slots__ = ("_agreeing", "_differing", "_fast", "provider", "version")

    def __init__(self, version: str, *, interpreter: bool, fast: bool = True) -> None:
        """Tables of ``version``.

        Args:
            version: a shipped Unicode version.
            interpreter: whether the interpreter's :mod:`unicodedata` is that version.
            fast: use the interpreter's functions where they agree (``False``:
                always the shipped tables; for conformance tests).
        """
        self.version = version
        self.provider = "unicodedata" if interpreter else "sealeval"
        self._fast = fast
        # Characters compared once: equal data in both versions, or not.
        self._agreeing: set[str] = set()
        self._differing: set[str] = set()

    @property
    def _data(self) -> _Data | None:
        """The shipped data (loaded on first use), ``None`` for the interpreter's version."""
        if self.provider == "unicodedata":
            return None
        return _load(self.version)

    def __repr__(self) -> str:
        """Show the version and provider only."""
        return f"PinnedTables(version={self.version!r}, provider={self.provider!r})"

    def _agrees(self, char: str) -> bool:
        """Whether the interpreter's data for ``char`` equal the pinned version's."""
        data = self._data
        assert data is not None
        code = ord(char)
        return (
            unicodedata.category(char) == data.category(code)
            and unicodedata.combining(char) == data.combining.get(code, 0)
            and unicodedata.decomposition(char) == data.decomposition_strings.get(code, "")
            and unicodedata.decimal(char, None) == data.decimal.get(code)
            and char.casefold() == data.folding.get(code, char)
        )

    def interpreter_agrees(self, text: str) -> bool:
        """Whether the interpreter's functions give this version's results for ``text``."""
        if self.provider == "unicodedata":
            return True
        if not self._fast:
            return False
        agreeing = self._agreeing
        if text.isascii() or agreeing.issuperset(text):
            return True
        for char in set(text).difference(agreeing):
            if char in self._differing:
                return False
            if not self._agrees(char):
                self._differing.add(char)
                return False
            agreeing.add(char)
        return True

    def normalize(self, form: str, text: str) -> str:
        """Return ``text`` in normalization form ``form`` (``NFC``, ``NFD``, ``NFKC``, ``NFKD``)."""
        checked = _FORM_NAMES.get(form)
        if checked is None:
            raise ValueError("invalid normalization form")
        if self.interpreter_agrees(text):
            return unicodedata.normalize(checked, text)
        data = self._data
        assert data is not None
        return _normalize(data, form, text)

    def casefold(self, text: str) -> str:
        """Return the full case folding (CaseFolding.txt statuses C + F) of ``text``."""
        if self.interpreter_agrees(text):
            return text.casefold()
        data = self._data
        assert data is not None
        folding = data.folding
        return "".join(folding.get(ord(char), char) for char in text)

    def category(self, char: str) -> str:
        """Return the general category of one character (``"Cn"`` when unassigned)."""
        data = self._data
        if data is None:
            return unicodedata.category(char)
        return data.category(ord(char))

    def decimal(self, char: str) -> int | None:
        """Return the decimal digit value of one character (category Nd), else ``None``."""
        data = self._data
        if data is None:
            return unicodedata.decimal(char, None)
        return data.decimal.get(ord(char))


def _interpreter_version() -> str:
    return unicodedata.unidata_version


@functools.cache
def pinned_tables(version: str) -> PinnedTables | None:
    """Return the tables of exactly Unicode ``version``, or ``None`` when none ship.

    Exactly the shipped versions (:data:`SHIPPED_UNICODE_VERSIONS`) are
    available, on every interpreter, so that what a contract accepts never
    depends on the interpreter; the interpreter's own functions serve a
    shipped version directly when they are that version.
    """
    if version not in SHIPPED_UNICODE_VERSIONS:
        return None
    return PinnedTables(version, interpreter=version == _interpreter_version())


def shipped_data(version: str) -> _Data:
    """Return the shipped data of ``version`` (for tests and the generator check)."""
    return _load(version)


def pure_normalize(version: str, form: str, text: str) -> str:
    """Normalize with the shipped tables only (no fast path), for conformance tests."""
    return _normalize(_load(version), form, text)


def pure_casefold(version: str, text: str) -> str:
    """Case-fold with the shipped tables only (no fast path), for conformance tests."""
    folding = _load(version).folding
    return "".join(folding.get(ord(char), char) for char in text)
