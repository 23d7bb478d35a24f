"""Deterministic per-record scorers of captured comparisons (invarlock scorer version 1.0.0).

Wire contract: ``21-scorers.md`` of the invarlock specification. A scorer maps
``(expected, output)`` to ``0.0`` or ``1.0`` (binary kinds) or a float in
``[0, 1]``; **an invalid answer scores 0, an invalid reference is an error**
(:class:`ScorerError`, which aborts the whole comparison). Whether an output is
*available* is a separate question asked before scoring: an unavailable output
makes the pair missing and it is never scored.

How the comparison uses this module (one object per policy metric, built once by
:func:`sealeval.captured.policy.check_runtime`):

* :class:`Scorer` (``exact_match``, ``normalized_match``, ``numeric_tolerance``,
  ``json_exact``, ``json_fields``, ``token_f1``): for each usable pair call
  ``reference = scorer.prepare(expected)`` once (the paired records share
  ``expected``), then ``reference.score(baseline_output)`` and
  ``reference.score(subject_output)``. ``scorer.is_available(output)`` is the
  availability rule. The configuration (and the Unicode tables it pins) is
  resolved when the scorer is built, never per record.
* :class:`RecordedScore` (``recorded``): ``check_provenance(run.score_provenance)``
  for each run (even for empty scopes), ``is_available(record.scores)``, then
  ``value(record.scores)`` — the attributed value, authenticated by provenance,
  never re-scored.
* :class:`NormalizedNll` (``normalized_nll_per_utf8_byte``):
  ``check_baseline(record.likelihood)`` / ``check_subject(record.likelihood)``
  for every record of the scope (missing pairs included), ``is_available``,
  then ``value(likelihood)`` = ``-logprob_sum / utf8_byte_count``. The ratio of
  means and its interval are in :mod:`sealeval.captured.intervals`.

A record with ``error != null`` is missing for every metric; that rule belongs
to the comparison, not to the scorers.

Text scorers use the Unicode tables of the configuration's ``unicode_version``
(:mod:`sealeval.captured.unicode_tables`), ``numeric_tolerance`` the tables of
the reference runtime (Unicode 15.0.0, for its Unicode digits and whitespace),
never the interpreter's implicit tables.
"""

from __future__ import annotations

import abc
import decimal
import math
import re
import types
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar, Final, Protocol

from sealeval._validate import check_closed, check_members
from sealeval.canonical import (
    DecodeLimits,
    decode,
    encode_invarlock,
    is_digest,
    plain_canonical,
)
from sealeval.captured.unicode_tables import (
    REFERENCE_UNICODE_VERSION,
    WHITESPACE,
    UnicodeTables,
    UnicodeTablesError,
    is_unicode_version,
    unicode_tables,
)
from sealeval.errors import CanonicalError, CapturedError

__all__ = [
    "BINARY_KINDS",
    "BOOTSTRAP_KINDS",
    "KINDS",
    "NLL_KIND",
    "RECOMPUTED_KINDS",
    "RECORDED_KIND",
    "SCORER_VERSION",
    "NormalizedNll",
    "RecordedScore",
    "Reference",
    "Scorer",
    "ScorerError",
    "check_configuration",
    "deterministic_scorer",
    "output_available",
    "score",
]

SCORER_VERSION: Final = "1.0.0"
#: Every metric kind a policy may name, in the reference's order.
KINDS: Final = (
    "exact_match",
    "normalized_match",
    "numeric_tolerance",
    "json_fields",
    "json_exact",
    "token_f1",
    "recorded",
    "normalized_nll_per_utf8_byte",
)
RECORDED_KIND: Final = "recorded"
NLL_KIND: Final = "normalized_nll_per_utf8_byte"
#: Kinds whose values are recomputed by a deterministic scorer.
RECOMPUTED_KINDS: Final = frozenset(KINDS) - {RECORDED_KIND, NLL_KIND}
#: Kinds whose per-record values are 0.0 / 1.0 (Newcombe interval, no bootstrap draws).
BINARY_KINDS: Final = frozenset(
    {"exact_match", "normalized_match", "numeric_tolerance", "json_exact"}
)
#: Kinds that use the SHAKE-256 paired bootstrap.
BOOTSTRAP_KINDS: Final = frozenset({"token_f1", "json_fields", RECORDED_KIND})

_MAX_MEMBERS: Final = 100
_MAX_FIELDS: Final = 100
_TEXT_KINDS: Final = frozenset({"normalized_match", "token_f1"})
_NLL_MEMBERS: Final = (
    "configuration_digest",
    "baseline_tokenizer_digest",
    "subject_tokenizer_digest",
)
# Decimal operands: at most 256 significant digits, adjusted exponent within ±1000.
_MAX_DIGITS: Final = 256
_MAX_ADJUSTED: Final = 1000
_TEN_TO_MAX_DIGITS: Final = 10**_MAX_DIGITS
# An exponent of more than 18 digits (>= 10**18) leaves the adjusted exponent
# beyond ±1000 for any numeral that fits in memory (and libmpdec refuses it).
_MAX_EXPONENT_DIGITS: Final = 18
# 4096 digits hold |output - expected| and relative * |expected| exactly for
# operands within the limits; Inexact is trapped so a rounding could never pass silently.
_ARITHMETIC: Final = decimal.Context(
    prec=4096,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow, decimal.Inexact],
)
_NUMERAL: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?")
_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE: Final = re.compile(r"~(?![01])")
_WHITESPACE_CHARS: Final = "".join(sorted(WHITESPACE))
# Answers and references given as JSON text are decoded as deep as the canonical
# encoder can encode (256 levels).
_JSON_LIMITS: Final = DecodeLimits(max_depth=256)


class ScorerError(CapturedError):
    """Refusal of a scorer configuration, a reference, or an attributed value."""

    module = "sealeval.captured.scorers"
    field_in_message = True
    codes = frozenset(
        {
            # configuration (the policy re-raises these as ComparisonPolicyError)
            "unknown_kind",
            "invalid_type",
            "too_many_members",
            "unsupported_configuration",
            "missing_field",
            "invalid_unicode_version",
            "invalid_casefold",
            "invalid_tolerance",
            "invalid_fields",
            "invalid_pointer_escape",
            "duplicate_field",
            "invalid_digest",
            # environment
            "unsupported_unicode_version",
            # invalid references (abort the comparison)
            "reference_not_text",
            "reference_not_numeric",
            "reference_not_json",
            "reference_missing_field",
            # attributed values (recorded, normalized NLL)
            "provenance_mismatch",
            "invalid_score",
            "invalid_likelihood",
            "likelihood_configuration_mismatch",
            "likelihood_tokenizer_mismatch",
            "non_finite_value",
        }
    )


# ---------------------------------------------------------------------------
# Configuration (portable level: unicode_version is checked for its format only)


def _members(configuration: object) -> Mapping[str, Any]:
    """Check an open JSON object: string keys (``invalid_type``), at most 100 members."""
    return check_members(
        configuration,
        "configuration",
        error=ScorerError,
        max_members=_MAX_MEMBERS,
        key_code="invalid_type",
    )


def _only(
    configuration: Mapping[str, Any], allowed: Sequence[str], required: Sequence[str] = ()
) -> None:
    """Check the members of one kind (others: ``unsupported_configuration``; missing: named)."""
    check_closed(
        configuration,
        "configuration",
        required,
        allowed,
        error=ScorerError,
        unknown_code="unsupported_configuration",
        missing_prefix="configuration.",
    )


def _numeral_parts(text: str) -> tuple[str, str, int] | None:
    """Split a finite ASCII numeral into (sign, coefficient digits, exponent); ``None`` if invalid.

    The coefficient keeps trailing zeros and drops leading zeros (``"0"`` for
    zero), like the coefficient of ``Decimal(text)``; the result is ``None``
    as well when the number is outside the operand limits.
    """
    match = _NUMERAL.fullmatch(text)
    if match is None:
        return None
    sign, whole, fraction, exponent_sign, exponent = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        return None
    digits = (whole + fraction).lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS:
        return None
    power = 0
    if exponent is not None:
        exponent = exponent.lstrip("0")
        if len(exponent) > _MAX_EXPONENT_DIGITS:
            return None
        power = int(exponent or "0") * (-1 if exponent_sign == "-" else 1)
    power -= len(fraction)
    if abs(power + len(digits) - 1) > _MAX_ADJUSTED:
        return None
    return sign, digits, power


def _ascii_numeral(text: str, tables: UnicodeTables) -> str | None:
    """Apply Python ``Decimal``'s string preparation with pinned tables.

    Leading and trailing whitespace is stripped, every underscore is deleted,
    and each non-ASCII character must be a Unicode decimal digit (category Nd),
    which becomes its ASCII digit; anything else (internal non-ASCII whitespace
    included) makes the string invalid.
    """
    text = text.strip(_WHITESPACE_CHARS)
    if "_" in text:
        text = text.replace("_", "")
    if text.isascii():
        return text
    characters = []
    for char in text:
        if char.isascii():
            characters.append(char)
            continue
        digit = tables.decimal(char)
        if digit is None:
            return None
        characters.append(chr(0x30 + digit))
    return "".join(characters)


def _decimal_of_text(text: str) -> Decimal | None:
    parts = _numeral_parts(text)
    if parts is None:
        return None
    sign, digits, power = parts
    return Decimal(f"{sign}{digits}E{power}")


def _decimal_of_number(value: object) -> Decimal | None:
    """Return the exact decimal of an ``int`` or a ``float`` (via its shortest repr)."""
    if type(value) is int:
        assert isinstance(value, int)
        return Decimal(value) if abs(value) < _TEN_TO_MAX_DIGITS else None
    if type(value) is float:
        assert isinstance(value, float)
        return _decimal_of_text(repr(value)) if math.isfinite(value) else None
    return None


def _decimal(value: object, tables: UnicodeTables) -> Decimal | None:
    """Return the exact decimal of a numeric value within the limits, else ``None``.

    Numeric means ``str``, ``int`` or ``float`` (never ``bool``); non-finite
    values, unparsable strings and values over the operand limits give ``None``.
    """
    if type(value) is str:
        assert isinstance(value, str)
        prepared = _ascii_numeral(value, tables)
        return None if prepared is None else _decimal_of_text(prepared)
    return _decimal_of_number(value)


def _tolerance(configuration: Mapping[str, Any], name: str) -> Decimal:
    if name not in configuration:
        return Decimal(0)
    value = configuration[name]
    if type(value) is int:
        valid = value >= 0
    elif type(value) is float:
        valid = math.isfinite(value) and value >= 0
    else:
        valid = False
    if not valid:
        raise ScorerError("invalid_tolerance", f"configuration.{name}")
    # Finite floats and ints always parse; only the operand limits can refuse them.
    parsed = _decimal_of_number(value)
    if parsed is None:
        raise ScorerError("invalid_tolerance", f"configuration.{name}")
    return parsed


def _pointer_tokens(pointer: str) -> tuple[str, ...]:
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/"))


def _fields(configuration: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    fields = configuration.get("fields")
    if not isinstance(fields, list | tuple) or not 1 <= len(fields) <= _MAX_FIELDS:
        raise ScorerError("invalid_fields", "configuration.fields")
    for pointer in fields:
        if type(pointer) is not str or not pointer.startswith("/"):
            raise ScorerError("invalid_fields", "configuration.fields")
        if _BAD_ESCAPE.search(pointer) is not None:
            raise ScorerError("invalid_pointer_escape", "configuration.fields")
    if len(set(fields)) != len(fields):
        raise ScorerError("duplicate_field", "configuration.fields")
    return tuple(_pointer_tokens(pointer) for pointer in fields)


def _text_options(configuration: Mapping[str, Any]) -> tuple[str, bool]:
    _only(configuration, ("unicode_version", "casefold"), ("unicode_version",))
    version = configuration["unicode_version"]
    if not is_unicode_version(version):
        raise ScorerError("invalid_unicode_version", "configuration.unicode_version")
    casefold = configuration.get("casefold", True)
    if type(casefold) is not bool:
        raise ScorerError("invalid_casefold", "configuration.casefold")
    return version, casefold


def _nll_digests(configuration: Mapping[str, Any]) -> tuple[str, str, str]:
    _only(configuration, _NLL_MEMBERS)
    for name in _NLL_MEMBERS:
        if name not in configuration:
            raise ScorerError("missing_field", f"configuration.{name}")
        if not is_digest(configuration[name]):
            raise ScorerError("invalid_digest", f"configuration.{name}")
    return (
        configuration["configuration_digest"],
        configuration["baseline_tokenizer_digest"],
        configuration["subject_tokenizer_digest"],
    )


def check_configuration(kind: object, configuration: object) -> None:
    """Check a metric configuration at the portable level (20-policy.md §2).

    ``unicode_version`` is checked for its format only; whether this
    installation provides it is decided by :func:`deterministic_scorer`.
    ``recorded`` takes an empty configuration.

    Raises:
        ScorerError: a configuration code (see ``docs/errors.md``).
    """
    if kind not in KINDS:
        raise ScorerError("unknown_kind", "kind")
    members = _members(configuration)
    if kind in _TEXT_KINDS:
        _text_options(members)
    elif kind == "numeric_tolerance":
        _only(members, ("absolute", "relative"))
        _tolerance(members, "absolute")
        _tolerance(members, "relative")
    elif kind == "json_fields":
        _only(members, ("fields",))
        _fields(members)
    elif kind == NLL_KIND:
        _nll_digests(members)
    else:  # exact_match, json_exact, recorded
        _only(members, ())


# ---------------------------------------------------------------------------
# Deterministic scorers


class Reference(Protocol):
    """A validated, pre-processed reference (``expected``) of one record pair."""

    def score(self, output: object) -> float:
        """Score one captured output against this reference."""
        ...  # pragma: no cover


class Scorer(abc.ABC):
    """A deterministic scorer with its configuration resolved (immutable)."""

    __slots__ = ()
    #: The metric kind this scorer implements.
    kind: ClassVar[str]

    def is_available(self, output: object) -> bool:
        """Return whether ``output`` can be scored (else the pair is missing)."""
        return True

    @abc.abstractmethod
    def prepare(self, expected: object) -> Reference:
        """Validate and pre-process a reference; an invalid one raises :class:`ScorerError`."""

    def score(self, expected: object, output: object) -> float:
        """Return the score of ``output`` against ``expected``."""
        return self.prepare(expected).score(output)


@dataclass(frozen=True, slots=True, repr=False)
class _ExactReference:
    expected: str

    def score(self, output: object) -> float:
        return 1.0 if type(output) is str and output == self.expected else 0.0


class _ExactMatch(Scorer):
    __slots__ = ()
    kind = "exact_match"

    def is_available(self, output: object) -> bool:
        return type(output) is str

    def prepare(self, expected: object) -> Reference:
        if type(expected) is not str:
            raise ScorerError("reference_not_text", "expected")
        return _ExactReference(expected)


class _TextScorer(Scorer):
    """Shared normalization of ``normalized_match`` and ``token_f1``."""

    __slots__ = ("casefold", "tables")

    def __init__(self, tables: UnicodeTables, casefold: bool) -> None:
        self.tables = tables
        self.casefold = casefold

    def is_available(self, output: object) -> bool:
        return type(output) is str

    def tokens(self, text: str) -> list[str]:
        """Return ``normalize(text)`` split on single spaces (21-scorers.md §3)."""
        if text.isascii():
            # NFKC leaves ASCII unchanged and full case folding of ASCII is lower().
            return (text.lower() if self.casefold else text).split()
        tables = self.tables
        normalized = tables.normalize("NFKC", text)
        if self.casefold:
            normalized = tables.casefold(normalized)
        return tables.split_whitespace(normalized)

    def normalize(self, text: str) -> str:
        """Return NFKC, optional case folding, whitespace runs collapsed to one space."""
        return " ".join(self.tokens(text))


@dataclass(frozen=True, slots=True, repr=False)
class _NormalizedReference:
    scorer: _NormalizedMatch
    normalized: str

    def score(self, output: object) -> float:
        if type(output) is not str:
            return 0.0
        return 1.0 if self.scorer.normalize(output) == self.normalized else 0.0


class _NormalizedMatch(_TextScorer):
    __slots__ = ()
    kind = "normalized_match"

    def prepare(self, expected: object) -> Reference:
        if type(expected) is not str:
            raise ScorerError("reference_not_text", "expected")
        return _NormalizedReference(self, self.normalize(expected))


@dataclass(frozen=True, slots=True, repr=False)
class _TokenReference:
    scorer: _TokenF1
    counts: dict[str, int]
    keys: frozenset[str]
    total: int

    def score(self, output: object) -> float:
        if type(output) is not str:
            return 0.0
        tokens = self.scorer.tokens(output)
        denominator = self.total + len(tokens)
        if denominator == 0:
            return 1.0
        distinct = set(tokens)
        if len(distinct) == len(tokens):
            # Each output token occurs once, so min(reference count, 1) counts it once.
            overlap = len(distinct & self.keys)
        else:
            # Multiset intersection: each output token consumes one reference token.
            remaining = self.counts.copy()
            overlap = 0
            for token in tokens:
                left = remaining.get(token, 0)
                if left:
                    remaining[token] = left - 1
                    overlap += 1
        return (2 * overlap) / denominator


class _TokenF1(_TextScorer):
    __slots__ = ()
    kind = "token_f1"

    def prepare(self, expected: object) -> Reference:
        if type(expected) is not str:
            raise ScorerError("reference_not_text", "expected")
        tokens = self.tokens(expected)
        counts = dict(Counter(tokens))
        return _TokenReference(self, counts, frozenset(counts), len(tokens))


@dataclass(frozen=True, slots=True, repr=False)
class _NumericReference:
    tables: UnicodeTables
    expected: Decimal
    tolerance: Decimal

    def score(self, output: object) -> float:
        value = _decimal(output, self.tables)
        if value is None:
            return 0.0
        difference = _ARITHMETIC.abs(_ARITHMETIC.subtract(value, self.expected))
        return 1.0 if difference <= self.tolerance else 0.0


class _NumericTolerance(Scorer):
    __slots__ = ("absolute", "relative", "tables")

    kind = "numeric_tolerance"

    def __init__(self, tables: UnicodeTables, absolute: Decimal, relative: Decimal) -> None:
        self.tables = tables
        self.absolute = absolute
        self.relative = relative

    def is_available(self, output: object) -> bool:
        return output is not None

    def prepare(self, expected: object) -> Reference:
        value = _decimal(expected, self.tables)
        if value is None:
            raise ScorerError("reference_not_numeric", "expected")
        scaled = _ARITHMETIC.multiply(self.relative, _ARITHMETIC.abs(value))
        tolerance = self.absolute if self.absolute >= scaled else scaled
        return _NumericReference(self.tables, value, tolerance)


def _as_json(value: object) -> tuple[Any, bool]:
    """Return the JSON value of an answer and whether it came from the strict decoder.

    A string is strict JSON text (decoded); anything else is the value itself.
    """
    if type(value) is str:
        assert isinstance(value, str)
        return decode(value, limits=_JSON_LIMITS), True
    return value, False


def _canonical(value: object, decoded: bool) -> bytes:
    """Invarlock canonical bytes of a JSON value, without the final LF.

    A value just produced by the strict decoder already satisfies every check
    :func:`sealeval.canonical.encode_invarlock` makes (finite numbers, string
    keys, no unpaired surrogate, integers within 4300 digits, bounded depth),
    so it goes straight to the C encoder (:func:`sealeval.canonical.plain_canonical`);
    anything else, and a decoded value that encoder could not take after all,
    is checked by ``encode_invarlock``. Both give the same bytes (tested).
    """
    if decoded:
        data = plain_canonical(value)
        if data is not None:
            return data
    return encode_invarlock(value)[:-1]


def _json_bytes(value: object) -> bytes | None:
    try:
        return _canonical(*_as_json(value))
    except CanonicalError:
        return None


@dataclass(frozen=True, slots=True, repr=False)
class _JsonExactReference:
    canonical: bytes

    def score(self, output: object) -> float:
        return 1.0 if _json_bytes(output) == self.canonical else 0.0


class _JsonExact(Scorer):
    __slots__ = ()
    kind = "json_exact"

    def prepare(self, expected: object) -> Reference:
        canonical = _json_bytes(expected)
        if canonical is None:
            raise ScorerError("reference_not_json", "expected")
        return _JsonExactReference(canonical)


_MISSING: Final = object()


def _resolve(document: object, tokens: tuple[str, ...]) -> object:
    """Evaluate an RFC 6901 pointer (no ``-``); ``_MISSING`` when a step fails."""
    node = document
    for token in tokens:
        if isinstance(node, Mapping):
            node = node.get(token, _MISSING)
            if node is _MISSING:
                return _MISSING
        elif type(node) in (list, tuple):
            assert isinstance(node, list | tuple)
            if _ARRAY_INDEX.fullmatch(token) is None:
                return _MISSING
            index = int(token)
            if index >= len(node):
                return _MISSING
            node = node[index]
        else:
            return _MISSING
    return node


@dataclass(frozen=True, slots=True, repr=False)
class _JsonFieldsReference:
    pointers: tuple[tuple[str, ...], ...]
    canonical: tuple[bytes, ...]

    def score(self, output: object) -> float:
        try:
            document, decoded = _as_json(output)
        except CanonicalError:
            return 0.0
        matched = 0
        for tokens, expected in zip(self.pointers, self.canonical, strict=True):
            value = _resolve(document, tokens)
            if value is _MISSING:
                continue
            try:
                if _canonical(value, decoded) == expected:
                    matched += 1
            except CanonicalError:
                continue
        return matched / len(self.pointers)


class _JsonFields(Scorer):
    __slots__ = ("pointers",)
    kind = "json_fields"

    def __init__(self, pointers: tuple[tuple[str, ...], ...]) -> None:
        self.pointers = pointers

    def prepare(self, expected: object) -> Reference:
        try:
            document, decoded = _as_json(expected)
            values = [_resolve(document, tokens) for tokens in self.pointers]
            if any(value is _MISSING for value in values):
                raise ScorerError("reference_missing_field", "expected")
            canonical = tuple(_canonical(value, decoded) for value in values)
        except CanonicalError:
            raise ScorerError("reference_missing_field", "expected") from None
        return _JsonFieldsReference(self.pointers, canonical)


def _runtime_tables(version: str) -> UnicodeTables:
    try:
        return unicode_tables(version)
    except UnicodeTablesError as error:
        raise ScorerError(error.code, "configuration.unicode_version") from None


def deterministic_scorer(kind: object, configuration: object) -> Scorer:
    """Build the scorer of a recomputed kind (runtime level).

    The configuration is validated (20-policy.md §2) and resolved once: text
    kinds select the Unicode tables their ``unicode_version`` pins,
    ``numeric_tolerance`` the reference runtime's (Unicode 15.0.0).

    Raises:
        ScorerError: ``unknown_kind`` for a kind that is not one of the six
            recomputed kinds, a configuration code, or
            ``unsupported_unicode_version`` when this installation cannot
            provide the tables.
    """
    if type(kind) is not str or kind not in RECOMPUTED_KINDS:
        raise ScorerError("unknown_kind", "kind")
    check_configuration(kind, configuration)
    assert isinstance(configuration, Mapping)
    if kind == "exact_match":
        return _ExactMatch()
    if kind == "json_exact":
        return _JsonExact()
    if kind == "json_fields":
        return _JsonFields(_fields(configuration))
    if kind == "numeric_tolerance":
        return _NumericTolerance(
            _runtime_tables(REFERENCE_UNICODE_VERSION),
            _tolerance(configuration, "absolute"),
            _tolerance(configuration, "relative"),
        )
    version, casefold = _text_options(configuration)
    tables = _runtime_tables(version)
    if kind == "normalized_match":
        return _NormalizedMatch(tables, casefold)
    return _TokenF1(tables, casefold)


def output_available(kind: object, output: object) -> bool:
    """Return the availability rule of a recomputed kind (21-scorers.md §1)."""
    if kind in ("exact_match", "normalized_match", "token_f1"):
        return type(output) is str
    if kind == "numeric_tolerance":
        return output is not None
    if kind in ("json_exact", "json_fields"):
        return True
    raise ScorerError("unknown_kind", "kind")


def score(kind: object, expected: object, output: object, configuration: object) -> float:
    """Score one record: ``score(kind, expected, output, configuration)`` of 21-scorers.md.

    Builds the scorer on every call (validating the configuration); the
    comparison builds it once per metric with :func:`deterministic_scorer`.
    """
    return deterministic_scorer(kind, configuration).score(expected, output)


# ---------------------------------------------------------------------------
# Attributed values: recorded scores and normalized NLL


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ScorerError("non_finite_value", "value")
    return value


def _to_float(value: object, code: str, field_name: str) -> float:
    if type(value) not in (int, float):
        raise ScorerError(code, field_name)
    assert isinstance(value, int | float)
    try:
        return _finite(float(value))
    except OverflowError:
        raise ScorerError("non_finite_value", field_name) from None


def _frozen_provenance(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScorerError("invalid_type", "accepted_provenance")
    return types.MappingProxyType(dict(value))


def _member(value: object, name: str) -> object:
    """Read ``name`` of a mapping or an attribute of an object; ``_MISSING`` when absent."""
    if isinstance(value, Mapping):
        return value.get(name, _MISSING)
    return getattr(value, name, _MISSING)


def _wire(value: object) -> object:
    """Return the wire object of a run-core value (``to_dict()``) or the value itself."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value


@dataclass(frozen=True, slots=True)
class RecordedScore:
    """The ``recorded`` metric: an attributed score authenticated by its provenance.

    Attributes:
        score_key: the member of each record's ``scores`` that holds the value.
        accepted_provenance: the provenance object the policy accepts
            (compared by canonical bytes, so ``1`` ≠ ``1.0``).
    """

    kind: ClassVar[str] = RECORDED_KIND
    score_key: str = field(repr=False)
    accepted_provenance: Mapping[str, Any] = field(repr=False)
    _accepted: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Freeze the provenance and keep its canonical bytes."""
        if type(self.score_key) is not str:
            raise ScorerError("invalid_type", "score_key")
        frozen = _frozen_provenance(self.accepted_provenance)
        try:
            accepted = encode_invarlock(frozen)
        except CanonicalError:
            raise ScorerError("invalid_type", "accepted_provenance") from None
        object.__setattr__(self, "accepted_provenance", frozen)
        object.__setattr__(self, "_accepted", accepted)

    def check_provenance(self, score_provenance: object) -> None:
        """Require ``score_provenance[score_key]`` of one run to equal the accepted provenance.

        ``score_provenance`` maps score keys to provenance objects (mappings or
        objects with ``to_dict()``, such as the run core's ``ScoreProvenance``).

        Raises:
            ScorerError: ``score_provenance: provenance_mismatch`` (absent key included).
        """
        declared = (
            score_provenance.get(self.score_key) if isinstance(score_provenance, Mapping) else None
        )
        if declared is None:
            raise ScorerError("provenance_mismatch", "score_provenance")
        try:
            matches = encode_invarlock(_wire(declared)) == self._accepted
        except CanonicalError:
            matches = False
        if not matches:
            raise ScorerError("provenance_mismatch", "score_provenance")

    def is_available(self, scores: object) -> bool:
        """Return whether a record's ``scores`` holds the score key (else the pair is missing)."""
        return isinstance(scores, Mapping) and self.score_key in scores

    def value(self, scores: Mapping[str, object]) -> float:
        """Return ``float(scores[score_key])``; the value is never re-scored.

        Raises:
            ScorerError: ``scores: invalid_score`` (not an int or float),
                ``scores: non_finite_value`` (beyond binary64).
        """
        return _to_float(scores[self.score_key], "invalid_score", "scores")


@dataclass(frozen=True, slots=True)
class NormalizedNll:
    """The ``normalized_nll_per_utf8_byte`` metric: bindings and per-record values.

    Attributes:
        configuration_digest: the likelihood configuration every record must carry.
        baseline_tokenizer_digest: the tokenizer of every baseline record.
        subject_tokenizer_digest: the tokenizer of every subject record.
    """

    kind: ClassVar[str] = NLL_KIND
    configuration_digest: str
    baseline_tokenizer_digest: str
    subject_tokenizer_digest: str

    def __post_init__(self) -> None:
        """Check the three digests."""
        _nll_digests(
            {
                "configuration_digest": self.configuration_digest,
                "baseline_tokenizer_digest": self.baseline_tokenizer_digest,
                "subject_tokenizer_digest": self.subject_tokenizer_digest,
            }
        )

    @classmethod
    def from_configuration(cls, configuration: object) -> NormalizedNll:
        """Build from a policy metric's configuration (exactly the three digests)."""
        digests = _nll_digests(_members(configuration))
        return cls(*digests)

    def _check(self, likelihood: object, tokenizer: str) -> None:
        if likelihood is None:
            return
        if _member(likelihood, "configuration_digest") != self.configuration_digest:
            raise ScorerError(
                "likelihood_configuration_mismatch", "likelihood.configuration_digest"
            )
        if _member(likelihood, "tokenizer_digest") != tokenizer:
            raise ScorerError("likelihood_tokenizer_mismatch", "likelihood.tokenizer_digest")

    def check_baseline(self, likelihood: object) -> None:
        """Check a baseline record's likelihood bindings (``None``: nothing to check).

        ``likelihood`` is a mapping or an object with ``configuration_digest``
        and ``tokenizer_digest`` attributes (``LikelihoodFacts``).

        Raises:
            ScorerError: ``likelihood_configuration_mismatch`` (checked first) or
                ``likelihood_tokenizer_mismatch``.
        """
        self._check(likelihood, self.baseline_tokenizer_digest)

    def check_subject(self, likelihood: object) -> None:
        """Check a subject record's likelihood bindings (``None``: nothing to check)."""
        self._check(likelihood, self.subject_tokenizer_digest)

    @staticmethod
    def is_available(likelihood: object) -> bool:
        """Return whether a record carries likelihood facts (else the pair is missing)."""
        return likelihood is not None

    @staticmethod
    def value(likelihood: object) -> float:
        """Return ``-logprob_sum / utf8_byte_count`` (binary64: convert, negate, divide).

        ``likelihood`` is the record's facts: a mapping or an object with
        ``logprob_sum`` and ``utf8_byte_count`` attributes (``LikelihoodFacts``).

        Raises:
            ScorerError: ``likelihood: invalid_likelihood`` for malformed facts,
                ``likelihood: non_finite_value`` beyond binary64.
        """
        logprob = _to_float(_member(likelihood, "logprob_sum"), "invalid_likelihood", "likelihood")
        count = _member(likelihood, "utf8_byte_count")
        if type(count) is not int or count < 1:
            raise ScorerError("invalid_likelihood", "likelihood")
        assert isinstance(count, int)
        try:
            return _finite(-logprob / count)
        except OverflowError:
            raise ScorerError("non_finite_value", "likelihood") from None
