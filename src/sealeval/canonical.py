r"""The two canonical JSON profiles, their digests, and one strict JSON decoder.

Profiles (see ``docs/canonical.md``):

* **openmed** — sorted keys (code-point order), no whitespace, ASCII-only
  output with lowercase ``\\uXXXX`` escapes (surrogate pairs above U+FFFF),
  shortest round-trip floats, no trailing newline. Used by the sealed
  manifest, release gates and evaluation sessions.
* **invarlock** — the same layout but strings are emitted raw as UTF-8 (only
  ``"``, ``\\`` and C0 controls are escaped) and one final LF is appended.
  Used by captured runs, policies, comparisons and evidence packs.

Both refuse NaN and infinities, non-string keys, unpaired surrogates and any
type outside JSON (``dict``/read-only mapping, ``list``/``tuple``, ``str``,
``int``, ``float``, ``bool``, ``None``). ``digest_*`` return
``"sha256:" + 64 lowercase hex`` of the canonical bytes.

:func:`decode` is the one strict decoder for every JSON input: UTF-8 only, no
byte-order mark, RFC 8259 grammar, duplicate keys, ``NaN``/``Infinity``,
overflowing numbers, over-long integers, unpaired surrogate escapes, and the
configured size, depth, string-length, container and item limits (the last
two checked on the bytes before decoding) are refused with a closed
:class:`~sealeval.errors.CanonicalError` code. The decoded value uses ``dict``,
``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``; integers and
floats keep their distinction (``1`` vs ``1.0``). ``decode(..., lax=True)``
is the same decoder with Python's own leniency for readers that must refuse
those values later with their own codes, as a reference implementation does.

Readers of evaluators' exports and of spans inside a larger text take the
decoders of the last decoding section instead, never a ``json`` decoder of
their own: :data:`EVALUATOR_DECODER` (strict JSON plus bare ``NaN`` tokens, as
Python's ``json.dump`` writes them), :data:`scan_strict` and :data:`scan_raw`
(one value read at a position, the strict and Python's own grammar), and
:data:`EVALUATOR_CODES` (these codes as the importers report them).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from json import JSONDecodeError
from typing import Any, Final

from sealeval.errors import CanonicalError, SealevalError

__all__ = [
    "DEFAULT_LIMITS",
    "DIGEST_PATTERN",
    "EVALUATOR_CODES",
    "EVALUATOR_DECODER",
    "EVALUATOR_NAN",
    "DecodeLimits",
    "EvaluatorNan",
    "JSONDecodeError",
    "OpenmedItems",
    "decode",
    "digest_bytes",
    "digest_invarlock",
    "digest_openmed",
    "digest_openmed_items",
    "encode_invarlock",
    "encode_openmed",
    "frozen_canonical",
    "frozen_digest",
    "is_digest",
    "plain_canonical",
    "plain_mapping",
    "scan_raw",
    "scan_strict",
]

DIGEST_PATTERN: Final = re.compile(r"sha256:[0-9a-f]{64}")
MAX_ENCODE_DEPTH: Final = 256
_BOM: Final = b"\xef\xbb\xbf"
# A lone surrogate can only enter a decoded value through a \uD800-\uDFFF escape
# (raw surrogates are not valid UTF-8), so the walk is needed only when one occurs.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
# One JSON string (escapes included), unrolled so that matching stays linear.
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def is_digest(value: object) -> bool:
    """Return whether ``value`` is exactly a ``str`` of the form ``sha256:<64 hex>``."""
    return type(value) is str and DIGEST_PATTERN.fullmatch(value) is not None


def digest_bytes(data: bytes | bytearray | memoryview) -> str:
    """Return ``sha256:<hex>`` of the exact bytes given."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# Encoding


def _mapping_as_dict(value: object) -> dict[str, Any]:
    """Serialize read-only mappings like dicts (their keys were checked beforehand)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise CanonicalError("unsupported_type")


_ASCII_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=True,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
    default=_mapping_as_dict,
)
_UTF8_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
    default=_mapping_as_dict,
)


def _check_string(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise CanonicalError("unpaired_surrogate") from None


#: Integers this short always have fewer digits than CPython's smallest settable limit (640).
_SHORT_INT_BITS: Final = 3 * 640


def _check_int(value: int) -> None:
    """Refuse an integer CPython will not turn into text (its digit limit, when set)."""
    limit = sys.get_int_max_str_digits()
    # Fewer than ``limit`` digits for sure below ``3 * limit`` bits (log2(10) > 3).
    if limit and value.bit_length() > 3 * limit:
        try:
            int.__repr__(value)
        except ValueError:
            raise CanonicalError("integer_too_long") from None


def _check_nesting(depth: int) -> None:
    """Refuse a container at ``depth`` past :data:`MAX_ENCODE_DEPTH` (``too_deep``)."""
    if depth >= MAX_ENCODE_DEPTH:
        raise CanonicalError("too_deep")


def _sorted_keys(value: Mapping[Any, Any], depth: int) -> list[str]:
    """Check an object's depth and key types; return its keys in output (code-point) order."""
    _check_nesting(depth)
    for key in value:
        if type(key) is not str:
            raise CanonicalError("non_string_key")
    return sorted(value)


def _check_value(value: object, depth: int = 0) -> None:
    """Refuse anything the canonical profiles cannot represent exactly.

    The one rule set of every encoder and digest, checked in *output order*
    (an object's key types first, then each member in sorted-key order: its
    key's text, then its value; an array's items in order), so the first
    refusal of a value with several faults is the same whether the value is
    encoded whole or streamed item by item (:func:`digest_openmed_items`).
    """
    kind = type(value)
    if kind is str:
        _check_string(value)  # type: ignore[arg-type]
    elif kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise CanonicalError("non_finite")
    elif kind is int:
        if value.bit_length() > _SHORT_INT_BITS:  # type: ignore[attr-defined]
            _check_int(value)  # type: ignore[arg-type]
    elif kind is bool or value is None:
        return
    elif kind is list or kind is tuple:
        _check_nesting(depth)
        for item in value:  # type: ignore[attr-defined]
            _check_value(item, depth + 1)
    elif kind is dict or isinstance(value, Mapping):
        for key in _sorted_keys(value, depth):  # type: ignore[arg-type]
            if not key.isascii():
                _check_string(key)
            _check_value(value[key], depth + 1)  # type: ignore[index]
    else:
        raise CanonicalError("unsupported_type")


def _encode(encoder: json.JSONEncoder, value: object, depth: int = 0) -> str:
    _check_value(value, depth)
    try:
        return encoder.encode(value)
    except CanonicalError:
        raise
    except ValueError:  # pragma: no cover - _check_int refuses these first
        raise CanonicalError("integer_too_long") from None


def encode_openmed(value: object) -> str:
    """Return the openmed canonical JSON text (pure ASCII, no trailing newline)."""
    return _encode(_ASCII_ENCODER, value)


def encode_invarlock(value: object) -> bytes:
    """Return the invarlock canonical bytes (raw UTF-8 strings, final LF)."""
    return (_encode(_UTF8_ENCODER, value) + "\n").encode("utf-8")


def digest_openmed(value: object) -> str:
    """Return ``sha256:<hex>`` of the openmed canonical text of ``value``.

    The same text, hashed the same way, as :func:`digest_openmed_items` (a
    value without :class:`OpenmedItems` is one piece there: this text).
    """
    return _digest_pieces([encode_openmed(value)])


class OpenmedItems:
    """An array inside a value given to :func:`digest_openmed_items`, encoded item by item.

    ``items`` is iterated once; each item is checked and encoded alone (its
    text is hashed, then dropped), so the array's text is never built whole.
    An item must not itself contain an :class:`OpenmedItems`.
    """

    __slots__ = ("items",)

    def __init__(self, items: Iterable[object]) -> None:
        """Wrap ``items`` (any iterable; consumed by the digest)."""
        self.items = items


def _holds_items(value: object, depth: int = 0) -> bool:
    """Whether ``value`` holds an :class:`OpenmedItems` (not looked for past the depth limit)."""
    if isinstance(value, OpenmedItems):
        return True
    if depth >= MAX_ENCODE_DEPTH:
        return False
    kind = type(value)
    if kind is list or kind is tuple:
        return any(_holds_items(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return any(_holds_items(item, depth + 1) for item in value.values())
    return False


def _openmed_pieces(value: object, depth: int) -> Iterator[str]:
    """Yield the openmed canonical text of ``value`` in pieces (:func:`digest_openmed_items`).

    A part without :class:`OpenmedItems` is one piece, encoded as
    :func:`encode_openmed` does; the containers around an :class:`OpenmedItems`
    are walked in :func:`_check_value`'s order (its rules, its helpers), and
    each of its items is checked then encoded alone.
    """
    if not _holds_items(value, depth):
        yield _encode(_ASCII_ENCODER, value, depth)
    elif isinstance(value, OpenmedItems):
        _check_nesting(depth)
        yield "["
        for index, item in enumerate(value.items):
            yield ("," if index else "") + _encode(_ASCII_ENCODER, item, depth + 1)
        yield "]"
    elif isinstance(value, Mapping):
        yield "{"
        for index, key in enumerate(_sorted_keys(value, depth)):
            _check_string(key)
            yield ("," if index else "") + _ASCII_ENCODER.encode(key) + ":"
            yield from _openmed_pieces(value[key], depth + 1)
        yield "}"
    else:  # a list or tuple, within the depth limit (_holds_items looks no deeper)
        yield "["
        items: Iterable[object] = value  # type: ignore[assignment]
        for index, item in enumerate(items):
            if index:
                yield ","
            yield from _openmed_pieces(item, depth + 1)
        yield "]"


def _digest_pieces(pieces: Iterable[str]) -> str:
    """Return ``sha256:<hex>`` of the concatenated ASCII ``pieces`` (each hashed, then dropped)."""
    hasher = hashlib.sha256()
    for piece in pieces:
        hasher.update(piece.encode("ascii"))
    return "sha256:" + hasher.hexdigest()


def digest_openmed_items(value: object) -> str:
    """Return :func:`digest_openmed` of ``value`` without building its whole text.

    ``value`` is a JSON value whose arrays may be given as
    :class:`OpenmedItems`: their items are encoded and hashed one at a time.
    The digest equals ``digest_openmed`` of the same value with every
    :class:`OpenmedItems` replaced by the list of its items, and so does the
    refusal: both check in one order (:func:`_check_value`'s), so a value
    with several faults is refused with the same first code
    (:class:`~sealeval.errors.CanonicalError`).
    """
    return _digest_pieces(_openmed_pieces(value, 0))


def digest_invarlock(value: object) -> str:
    """Return ``sha256:<hex>`` of the invarlock canonical bytes of ``value``."""
    return digest_bytes(encode_invarlock(value))


# ---------------------------------------------------------------------------
# Strict decoding


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """Limits enforced by :func:`decode`.

    Attributes:
        max_bytes: largest accepted input, in UTF-8 bytes.
        max_depth: deepest accepted nesting of arrays and objects (a scalar
            document has depth 0, ``[0]`` has depth 1).
        max_string_length: longest accepted string or key, in code points.
        max_containers: most arrays and objects in one document (checked on
            the bytes *before* decoding: ``[[],[],...]`` cannot amplify 3 bytes
            into a 56-byte list per element).
        max_items: most array elements and object members in one document
            (checked before decoding, like ``max_containers``).
    """

    max_bytes: int = 134_217_728
    max_depth: int = 128
    max_string_length: int = 16_777_216
    max_containers: int = 4_194_304
    max_items: int = 16_777_216

    def __post_init__(self) -> None:
        """Refuse limits that are not positive integers."""
        for name in ("max_bytes", "max_depth", "max_string_length", "max_containers", "max_items"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError("DecodeLimits: every limit must be a positive int")


DEFAULT_LIMITS: Final = DecodeLimits()


def _pairs_to_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise CanonicalError("duplicate_key")
    return result


def _refuse_constant(_token: str) -> Any:
    raise CanonicalError("non_standard_constant")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise CanonicalError("non_finite_number")
    return value


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_pairs_to_dict,
    parse_constant=_refuse_constant,
    parse_float=_finite_float,
    strict=True,
)


_LAX_CONSTANTS: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_LAX_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_pairs_to_dict, parse_constant=_LAX_CONSTANTS.__getitem__, strict=True
)


def _check_depth(value: object, max_depth: int) -> None:
    """Refuse ``too_deep`` as :func:`_walk_decoded` does, visiting containers only.

    Level by level: the containers of level ``k`` are nested ``k`` deep, and a
    non-empty level ``max_depth`` is one container too deep.
    """
    level: list[Any] = [value] if type(value) is list or type(value) is dict else []
    depth = 0
    while level:
        if depth >= max_depth:
            raise CanonicalError("too_deep")
        depth += 1
        deeper: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            deeper.extend(
                [child for child in children if type(child) is list or type(child) is dict]
            )
        level = deeper


def _check_decoded_string(text: str, max_len: int, surrogates: bool) -> None:
    if len(text) > max_len:
        raise CanonicalError("string_too_long")
    if not surrogates:
        _check_string(text)


def _walk_decoded(
    value: object,
    limits: DecodeLimits,
    check_depth: bool,
    check_strings: bool,
    *,
    surrogates: bool = False,
) -> None:
    """Check depth, string length and (unless ``surrogates``) surrogates, iteratively."""
    if not check_strings:
        _check_depth(value, limits.max_depth)
        return
    max_len = limits.max_string_length
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            _check_decoded_string(item, max_len, surrogates)  # type: ignore[arg-type]
        elif kind is list:
            if check_depth and depth >= limits.max_depth:
                raise CanonicalError("too_deep")
            stack.extend((child, depth + 1) for child in item)  # type: ignore[attr-defined]
        elif kind is dict:
            if check_depth and depth >= limits.max_depth:
                raise CanonicalError("too_deep")
            for key, child in item.items():  # type: ignore[attr-defined]
                _check_decoded_string(key, max_len, surrogates)
                stack.append((child, depth + 1))


def _check_counts(raw: bytes, limits: DecodeLimits) -> None:
    """Refuse too many containers or items before anything is decoded.

    Counting brackets and commas in the raw bytes gives upper bounds at C
    speed; only when a bound is over its limit are strings blanked out (a
    bracket inside a string is not a container) and the exact counts taken.
    """
    containers = raw.count(b"[") + raw.count(b"{")
    items = raw.count(b",") + containers
    if containers <= limits.max_containers and items <= limits.max_items:
        return
    structure = _STRING.sub(b'""', raw)
    containers = structure.count(b"[") + structure.count(b"{")
    if containers > limits.max_containers:
        raise CanonicalError("too_many_containers")
    if structure.count(b",") + containers > limits.max_items:
        raise CanonicalError("too_many_items")


def _raw_bytes(data: bytes | bytearray | memoryview | str, lax: bool) -> bytes:
    """Return the bytes to bound and count (a raw surrogate passes only in lax mode)."""
    if not isinstance(data, str):
        return bytes(data)
    try:
        return data.encode("utf-8", "surrogatepass" if lax else "strict")
    except UnicodeEncodeError:
        raise CanonicalError("not_utf8") from None


def decode(
    data: bytes | bytearray | memoryview | str,
    *,
    limits: DecodeLimits = DEFAULT_LIMITS,
    lax: bool = False,
) -> Any:
    """Strictly decode one JSON document.

    Args:
        data: the document as bytes (must be UTF-8) or as text.
        limits: size, depth and string-length limits.
        lax: keep what Python's ``json`` module accepts and a later check must
            refuse: ``NaN``/``Infinity``/``-Infinity`` and overflowing numbers
            become non-finite floats, unpaired surrogates (escaped, or raw in
            text input) are kept. Duplicate keys, the grammar and every limit
            are still refused (the size limit counts UTF-8 bytes, a raw
            surrogate as three).

    Returns:
        The decoded value (``dict``, ``list``, ``str``, ``int``, ``float``,
        ``bool`` or ``None``).

    Raises:
        CanonicalError: with one of the decoding codes; never echoes the input.
    """
    raw = _raw_bytes(data, lax)
    if len(raw) > limits.max_bytes:
        raise CanonicalError("too_large")
    if raw.startswith(_BOM):
        raise CanonicalError("byte_order_mark")
    _check_counts(raw, limits)
    if lax and isinstance(data, str):
        text = data
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CanonicalError("not_utf8") from None
    try:
        value = (_LAX_DECODER if lax else _DECODER).decode(text)
    except CanonicalError as error:
        raise CanonicalError(error.code) from None
    except RecursionError:
        raise CanonicalError("too_deep") from None
    except json.JSONDecodeError:
        raise CanonicalError("invalid_json") from None
    except ValueError:
        # CPython's integer string-conversion limit (more than 4300 digits).
        raise CanonicalError("integer_too_long") from None
    # The walk is skipped when the bytes alone prove it cannot fail.
    check_depth = raw.count(b"[") + raw.count(b"{") > limits.max_depth
    long_text = len(raw) > limits.max_string_length
    check_strings = long_text or (not lax and _SURROGATE_ESCAPE.search(raw) is not None)
    if check_depth or check_strings:
        _walk_decoded(value, limits, check_depth, check_strings, surrogates=lax)
    return value


# ---------------------------------------------------------------------------
# Decoders for evaluator exports and raw spans
#
# Two kinds of reader cannot use decode() as it is, and take these instead (the
# decoders themselves, not wrappers: the importers' hot loops make the same C
# calls as before):
#
# * readers of other tools' exports, which may hold the bare ``NaN`` token that
#   Python's ``json.dump`` writes for a NaN float: EVALUATOR_DECODER;
# * readers that decode a span of a larger text *by position* (one JSONL row,
#   one record of a streamed run, one key of a sniffed head) and bound the
#   span themselves: scan_strict and scan_raw.
#
# EVALUATOR_CODES maps this module's decoding codes onto the codes the
# importers report (spec 11-adapters), so every reader of an export names a
# fault the same way.


class EvaluatorNan:
    """The type of :data:`EVALUATOR_NAN`, the value of a bare ``NaN`` token in an export."""

    __slots__ = ()

    def __repr__(self) -> str:
        """Show the token."""
        return "NaN"


#: What :data:`EVALUATOR_DECODER` makes of a bare ``NaN`` token: one marker (compare
#: with ``is``), never a float, so a reader decides per member whether ``NaN`` is a
#: missing score, ``null`` or a refusal.
EVALUATOR_NAN: Final = EvaluatorNan()


def _evaluator_constant(token: str) -> Any:
    if token == "NaN":  # noqa: S105 - a JSON constant, not a secret
        return EVALUATOR_NAN
    raise CanonicalError("non_standard_constant")


#: The strict grammar plus bare ``NaN`` tokens, for evaluators' exports (Python's
#: ``json.dump`` writes a NaN score as ``NaN``). ``NaN`` decodes to
#: :data:`EVALUATOR_NAN`; duplicate keys (``duplicate_key``), ``Infinity``
#: (``non_standard_constant``) and overflowing numbers (``non_finite_number``) raise
#: :class:`~sealeval.errors.CanonicalError`, any other fault ``ValueError``
#: (``JSONDecodeError``, or an integer of more than 4300 digits) or ``RecursionError``.
#: It checks no size, depth or string length and keeps unpaired surrogates: the
#: caller bounds the text first and checks the values it keeps. Call
#: ``EVALUATOR_DECODER.decode(text)`` (one document) or ``.raw_decode(text, index)``.
EVALUATOR_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_pairs_to_dict,
    parse_constant=_evaluator_constant,
    parse_float=_finite_float,
    strict=True,
)

#: ``scan_strict(text, index) -> (value, end)``: the strict decoder's own C scanner
#: (the grammar and hooks of :func:`decode`: duplicate keys, ``NaN``/``Infinity`` and
#: overflowing numbers raise :class:`~sealeval.errors.CanonicalError`), reading the one
#: value that starts at ``index``; ``end`` is the index after it. No whitespace is
#: skipped and nothing after the value is looked at. Where a value must start and
#: cannot (at ``index`` or inside a container) it raises ``StopIteration``; other
#: faults raise ``ValueError`` (``JSONDecodeError``) or ``RecursionError``.
#: Unlike :func:`decode` it checks no size, depth, string length or surrogate: for a
#: reader that proves those facts from the span's bytes first (the JSONL fast path)
#: and decodes the span with :func:`decode` when in doubt.
scan_strict: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]

_RAW_DECODER: Final = json.JSONDecoder(strict=True)

#: ``scan_raw(text, index) -> (value, end)``: Python's own JSON grammar (duplicate keys
#: kept last, ``NaN``/``Infinity`` accepted, no limits) on the one value starting at
#: ``index``; whitespace before it is not skipped. A text that ends inside the value,
#: or anything else that is not JSON there, raises :class:`JSONDecodeError`; other
#: faults ``ValueError`` or ``RecursionError``. For a reader that proves the value some
#: other way afterwards: the streamed run reader compares each record's span with its
#: canonical bytes (which refuse everything the grammar let through), the sniffers
#: only look at member names and never keep the values.
scan_raw: Final[Callable[[str, int], tuple[Any, int]]] = _RAW_DECODER.raw_decode

#: The decoding codes of this module as the importers report them (spec
#: 11-adapters): an export's fault is named the same way whichever reader met it.
#: A code missing here is the reader's own ``invalid_json`` (or its line's code).
EVALUATOR_CODES: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "not_utf8": "not_utf8",
        "byte_order_mark": "byte_order_mark",
        "invalid_json": "invalid_json",
        "duplicate_key": "duplicate_key",
        "non_standard_constant": "non_finite_number",
        "non_finite_number": "non_finite_number",
        "too_large": "too_large",
        "too_deep": "too_deep",
        "string_too_long": "too_large",
        "integer_too_long": "integer_too_long",
        "unpaired_surrogate": "invalid_json",
    }
)


# ---------------------------------------------------------------------------
# Fast invarlock encoders for values already checked elsewhere
#
# plain_canonical and frozen_canonical skip encode_invarlock's pre-encoding walk
# and call CPython's C encoder directly (no JSONEncoder.encode wrapper, no
# ``default`` fallback per read-only mapping). Tests pin both to encode_invarlock.


def _refuse_default(value: object) -> Any:
    raise TypeError("not JSON")


def plain_mapping(value: object) -> dict[str, Any]:
    """``default`` hook of JSON encoders: serialize read-only mappings like dicts."""
    if type(value) is types.MappingProxyType:
        return value.copy()
    if isinstance(value, Mapping):
        return dict(value)
    raise CanonicalError("unsupported_type")


_C_MAKE_ENCODER: Final[Any] = json.encoder.c_make_encoder  # type: ignore[attr-defined]
# The profile for plain values (dict, list, tuple and JSON scalars).
_C_PLAIN: Final[Any] = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None,  # markers: no circular check (as check_circular=False)
        _refuse_default,
        json.encoder.encode_basestring,  # raw UTF-8 text (ensure_ascii=False)
        None,  # indent
        ":",
        ",",
        True,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
)
_PY_PLAIN: Final = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
)


def plain_canonical(value: object) -> bytes | None:
    """Return the canonical bytes *without* the final LF of a plain JSON value.

    For trees of exact ``dict``/``list``/``tuple`` and JSON scalars (see
    :func:`sealeval._validate.plain_json`). ``None`` when the value cannot be
    encoded canonically (NaN or infinity, an integer over the interpreter's
    digit limit, an unpaired surrogate in any string or key, another type);
    the caller then takes the checked path, which names the refusal. The
    bytes equal ``encode_invarlock(value)[:-1]``.
    """
    try:
        if _C_PLAIN is None:  # pragma: no cover - interpreters without the C accelerator
            return _PY_PLAIN.encode(value).encode("utf-8")
        return "".join(_C_PLAIN(value, 0)).encode("utf-8")
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None


# The profile for values assembled only from frozen, already checked parts
# (sealeval._validate.freeze_json output and validated objects).
_PY_FROZEN: Final = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
    default=plain_mapping,
)
_C_FROZEN: Final[Any] = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None, plain_mapping, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)


def frozen_canonical(value: object, *, error: type[SealevalError]) -> bytes:
    """Return the invarlock canonical bytes of a value built from frozen, checked parts.

    Raises:
        error: ``invalid_json_value`` (no field) when the value is not encodable
            after all (the caller's error class).
    """
    try:
        if _C_FROZEN is None:  # pragma: no cover - interpreters without the C accelerator
            return (_PY_FROZEN.encode(value) + "\n").encode("utf-8")
        return ("".join(_C_FROZEN(value, 0)) + "\n").encode("utf-8")
    except (ValueError, TypeError, RecursionError):
        raise error("invalid_json_value") from None


def frozen_digest(value: object, *, error: type[SealevalError]) -> str:
    """Return ``digest_invarlock(value)`` for a value built from frozen, checked parts only."""
    return digest_bytes(frozen_canonical(value, error=error))
