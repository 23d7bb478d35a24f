"""The one validation toolkit: closed objects, text, digests and JSON values.

Every check here takes the caller's error class as a parameter (``error=``),
so each family refuses with its own class and closed codes while the rule
itself is written once. An error class is called as ``error(code, field)``;
the field is always the library-chosen name the caller passed, never a
submitted value.

* :func:`check_closed` — a closed object: a mapping with exactly the required
  members plus optional ones (``invalid_type`` / ``unknown_field`` /
  ``missing_field`` by default; a family may name its own codes);
  :func:`check_exact` is its single-code form; :func:`check_members` an open
  object of bounded size (``too_many_members``).
* :func:`check_text`, :func:`check_digest`, :func:`check_string_map` — the
  field rules of the invarlock evaluation-run family (spec 00-conventions §4).
* :func:`freeze_json`, :func:`plain_json`, :func:`thaw_json` — deep, read-only
  JSON values and their plain copies.
* :func:`rebased` — re-raise a nested object's refusal under the enclosing
  field.
* :func:`decode_object` — a strict JSON object from bytes (the strict
  bounded decoder of :mod:`sealeval.canonical`, its codes mapped to the
  caller's; optionally only in its canonical spelling).

The canonical *encoders* for already-checked values live in
:mod:`sealeval.canonical`.
"""

from __future__ import annotations

import math
import re
import sys
import types
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, TypeAlias

from sealeval.canonical import DEFAULT_LIMITS, DecodeLimits, decode, is_digest
from sealeval.errors import CanonicalError, SealevalError

__all__ = [
    "EMPTY",
    "INTERNED_VALUE_LENGTH",
    "MAX_LONG_TEXT",
    "MAX_MEMBERS",
    "MAX_SHORT_TEXT",
    "MAX_VALUE_DEPTH",
    "STRICT_JSON_CODES",
    "ErrorClass",
    "JsonValue",
    "check_closed",
    "check_digest",
    "check_exact",
    "check_members",
    "check_string_map",
    "check_text",
    "decode_document",
    "decode_object",
    "freeze_json",
    "plain_json",
    "rebased",
    "shared_string_map",
    "thaw_json",
]

#: A frozen JSON value: ``None``, ``bool``, ``int``, ``float``, ``str``, a tuple
#: of values (JSON array) or a read-only mapping of ``str`` to values (object).
JsonValue: TypeAlias = (
    bool | int | float | str | tuple["JsonValue", ...] | Mapping[str, "JsonValue"] | None
)

#: The error class a check raises: called as ``error(code, field)``.
ErrorClass: TypeAlias = type[SealevalError]

#: Deepest nesting (arrays and objects) accepted in one JSON value.
MAX_VALUE_DEPTH: Final = 128
#: Most members of ``scores``, ``metadata``, ``score_provenance``, ``configuration``.
MAX_MEMBERS: Final = 100
#: Longest metadata value or error string, in code points.
MAX_LONG_TEXT: Final = 4096
#: Longest ``text128`` value, in code points.
MAX_SHORT_TEXT: Final = 128

EMPTY: Final[Mapping[str, Any]] = types.MappingProxyType({})

#: Metadata values up to this many code points are interned (slice tags repeat).
INTERNED_VALUE_LENGTH: Final = 64

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_BLANK: Final = re.compile(r"\s*")
# Integers of more than 4300 decimal digits cannot be canonically encoded; anything
# below this bit length has at most 4215 digits and needs no string conversion.
_SAFE_INT_BITS: Final = 14_000
_MAX_INT_DIGITS: Final = 4300


# ---------------------------------------------------------------------------
# Closed objects


def check_closed(
    document: object,
    field: str | None,
    required: Collection[str],
    optional: Collection[str] = (),
    *,
    error: ErrorClass,
    type_code: str = "invalid_type",
    unknown_code: str = "unknown_field",
    missing_code: str = "missing_field",
    missing_prefix: str | None = None,
) -> Mapping[str, Any]:
    """Check a closed object: a mapping with exactly the required (+ optional) members.

    Refusals, in this order: not a mapping (``type_code``), a member outside
    ``required`` and ``optional`` (``unknown_code``), a required member absent
    (``missing_code``; the first absent one in ``required``'s order). Every
    refusal names ``field`` (the object), never a member name a caller
    submitted -- except that, with ``missing_prefix``, an absent member is
    named ``missing_prefix + member`` (a library-chosen name: the contracts
    that name the missing member, e.g. ``policy.metrics[0].unit``).
    """
    # ``from None``: a refusal never carries a context, even when checked inside a handler.
    if not isinstance(document, Mapping):
        raise error(type_code, field) from None
    for key in document:
        if key not in required and key not in optional:
            raise error(unknown_code, field) from None
    for key in required:
        if key not in document:
            missing = field if missing_prefix is None else missing_prefix + key
            raise error(missing_code, missing) from None
    return document


def check_members(
    value: object,
    field: str,
    *,
    error: ErrorClass,
    max_members: int = MAX_MEMBERS,
    key_code: str | None = None,
) -> Mapping[str, Any]:
    """Check an open JSON object: a mapping (``invalid_type``) of bounded size; return it.

    Refusals, in this order: not a mapping (``invalid_type``), a key that is
    not exactly ``str`` (``key_code``, when given: callers that check keys
    later pass ``None``), more than ``max_members`` members
    (``too_many_members``).
    """
    if not isinstance(value, Mapping):
        raise error("invalid_type", field)
    if key_code is not None and any(type(key) is not str for key in value):
        raise error(key_code, field)
    if len(value) > max_members:
        raise error("too_many_members", field)
    return value


def check_exact(
    document: object, field: str | None, members: Collection[str], *, error: ErrorClass, code: str
) -> Mapping[str, Any]:
    """Check a closed object with exactly ``members``, refusing anything else with one ``code``.

    The single-code form of :func:`check_closed` (no optional members): for
    contracts that do not distinguish a wrong type from an unknown or a
    missing member.
    """
    return check_closed(
        document,
        field,
        members,
        error=error,
        type_code=code,
        unknown_code=code,
        missing_code=code,
    )


@contextmanager
def rebased(old_root: str, new_root: str, *, error: ErrorClass) -> Iterator[None]:
    """Re-raise ``error`` refusals of a nested object with the field rooted at ``new_root``.

    An error raised inside with field ``<old_root>.x`` (or ``<old_root>``) is
    re-raised with field ``<new_root>.x`` (or ``<new_root>``); other fields are
    prefixed with ``<new_root>.``. Other exceptions pass through unchanged.
    """
    try:
        yield
    except error as caught:
        field = caught.field
        if field is None or field == old_root:
            rebased_field = new_root
        elif field.startswith(old_root + ".") or field.startswith(old_root + "["):
            rebased_field = new_root + field[len(old_root) :]
        else:
            rebased_field = f"{new_root}.{field}"
        raise error(caught.code, rebased_field) from None


# ---------------------------------------------------------------------------
# Text, digests and string maps


def _check_string(value: str, field: str | None, error: ErrorClass) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise error("invalid_json_value", field) from None


def check_text(
    value: object,
    field: str,
    *,
    error: ErrorClass,
    max_length: int = MAX_SHORT_TEXT,
    min_length: int = 1,
    controls: bool = False,
    blank: bool = True,
) -> str:
    """Check a text field; return it.

    Args:
        value: the candidate (must be exactly ``str``: else ``invalid_type``).
        field: the library-chosen field name for errors.
        error: the caller's error class.
        max_length: most code points (else ``invalid_text``).
        min_length: fewest code points (else ``invalid_text``).
        controls: whether U+0000-U+001F and U+007F are allowed.
        blank: whether an entirely (Unicode) whitespace string is allowed.
    """
    if type(value) is not str:
        raise error("invalid_type", field)
    _check_string(value, field, error)
    if not min_length <= len(value) <= max_length:
        raise error("invalid_text", field)
    if not controls and _CONTROL.search(value) is not None:
        raise error("invalid_text", field)
    if not blank and _BLANK.fullmatch(value) is not None:
        raise error("invalid_text", field)
    return value


def check_digest(
    value: object, field: str, *, error: ErrorClass, nullable: bool = False
) -> str | None:
    """Check a ``sha256:<64 lowercase hex>`` digest (``invalid_digest``; ``None`` when nullable)."""
    if value is None and nullable:
        return None
    if not is_digest(value):
        raise error("invalid_digest", field)
    return value  # type: ignore[return-value]


def check_string_map(
    value: object, field: str, *, error: ErrorClass, max_length: int = MAX_LONG_TEXT
) -> Mapping[str, str]:
    """Check a ``metadata``-style object (≤100 members, string values); return a frozen copy."""
    value = check_members(value, field, error=error)
    frozen: dict[str, str] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise error("invalid_json_value", field)
        _check_string(key, field, error)
        frozen[key] = check_text(
            item, field, error=error, max_length=max_length, min_length=0, controls=True
        )
    return shared_string_map(frozen)


#: Most distinct small string maps :func:`shared_string_map` keeps.
_SHARED_MAPS_MAX: Final = 4096
#: Maps with at most this many members are shared.
_SHARED_MAP_MEMBERS: Final = 8
_SHARED_MAPS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}


def shared_string_map(members: dict[str, str]) -> Mapping[str, str]:
    """Return a read-only view of checked ``metadata``-style members, shared when small.

    Metadata repeats across records (slice tags): a map of at most eight
    members with short values is the same read-only mapping object for
    every record that has it (up to 4,096 distinct maps per process; later
    ones get their own). Keys are interned, and so are values of at most 64
    code points. The caller hands over ``members`` (checked, not used again).
    """
    if not members:
        return EMPTY
    key = tuple(members.items())
    shared = _SHARED_MAPS.get(key)
    if shared is not None:
        return shared
    frozen = types.MappingProxyType(
        {
            sys.intern(name): sys.intern(value) if len(value) <= INTERNED_VALUE_LENGTH else value
            for name, value in key
        }
    )
    if (
        len(key) <= _SHARED_MAP_MEMBERS
        and len(_SHARED_MAPS) < _SHARED_MAPS_MAX
        and all(len(value) <= INTERNED_VALUE_LENGTH for _, value in key)
    ):
        _SHARED_MAPS[key] = frozen
    return frozen


# ---------------------------------------------------------------------------
# JSON values


def _check_int(value: int, field: str, error: ErrorClass) -> None:
    if value.bit_length() > _SAFE_INT_BITS:
        try:
            digits = len(str(abs(value)))
        except ValueError:
            raise error("invalid_json_value", field) from None
        if digits > _MAX_INT_DIGITS:
            raise error("invalid_json_value", field)


def _freeze(item: object, depth: int, field: str, max_depth: int, error: ErrorClass) -> JsonValue:
    """Freeze one value for :func:`freeze_json` (module level: no closure, no cycle)."""
    kind = type(item)
    if kind is str:
        if not item.isascii():  # type: ignore[attr-defined]
            _check_string(item, field, error)  # type: ignore[arg-type]
        return item  # type: ignore[return-value]
    if item is None or kind is bool:
        return item  # type: ignore[return-value]
    if kind is int:
        _check_int(item, field, error)  # type: ignore[arg-type]
        return item  # type: ignore[return-value]
    if kind is float:
        if not math.isfinite(item):  # type: ignore[arg-type]
            raise error("invalid_json_value", field)
        return item  # type: ignore[return-value]
    if kind is list or kind is tuple:
        if depth >= max_depth:
            raise error("too_deep", field)
        depth += 1
        return tuple([_freeze(child, depth, field, max_depth, error) for child in item])  # type: ignore[attr-defined]
    if kind is dict or kind is types.MappingProxyType or isinstance(item, Mapping):
        if depth >= max_depth:
            raise error("too_deep", field)
        depth += 1
        frozen: dict[str, JsonValue] = {}
        for key, child in item.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise error("invalid_json_value", field)
            _check_string(key, field, error)
            frozen[sys.intern(key)] = _freeze(child, depth, field, max_depth, error)
        # Keys repeat across records (interned); an empty object is one shared proxy.
        return types.MappingProxyType(frozen) if frozen else EMPTY
    raise error("invalid_json_value", field)


def freeze_json(
    value: object, field: str, *, error: ErrorClass, max_depth: int = MAX_VALUE_DEPTH
) -> JsonValue:
    """Return a deep, read-only copy of a JSON value, refusing anything outside JSON.

    Objects become read-only mappings (key order kept), arrays become tuples.
    Refused with ``invalid_json_value``: NaN/infinities, non-``str`` keys,
    ``bool``/``int``/``float``/``str`` subclasses and other types, unpaired
    surrogates, integers of more than 4300 digits. Refused with ``too_deep``:
    more than ``max_depth`` nested arrays/objects.
    """
    return _freeze(value, 0, field, max_depth, error)


#: The exact types of JSON scalars (``bool`` is not an ``int`` here: types are compared).
_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def plain_json(value: object, max_depth: int = MAX_VALUE_DEPTH) -> bool:
    """Return whether ``value`` has the shape :func:`freeze_json` accepts, in plain containers.

    True only for a tree of exact ``dict`` (``str`` keys), ``list``, ``tuple``,
    ``str``, ``int``, ``float``, ``bool`` and ``None`` with at most
    ``max_depth`` nested containers — what ``json.loads`` produces. Text,
    float and integer *values* are not checked here (unpaired surrogates,
    NaN/infinities, over-long integers):
    :func:`sealeval.canonical.plain_canonical` refuses them. Anything else
    (subclasses, read-only mappings, other types) returns ``False``; the
    caller then takes the :func:`freeze_json` path, which names the refusal.
    Never raises (but ``RecursionError`` on a host whose recursion limit is
    below ``max_depth``).
    """
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return kind in _PLAIN_SCALARS
    if not max_depth:
        return False
    max_depth -= 1
    if kind is dict:
        for key, child in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or (
                type(child) not in _PLAIN_SCALARS and not plain_json(child, max_depth)
            ):
                return False
        return True
    for child in value:  # type: ignore[attr-defined]
        if type(child) not in _PLAIN_SCALARS and not plain_json(child, max_depth):
            return False
    return True


def thaw_json(value: object) -> Any:
    """Return a plain ``dict``/``list`` deep copy of a (frozen) JSON value."""
    if isinstance(value, Mapping):
        return {key: thaw_json(child) for key, child in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(child) for child in value]
    return value


# ---------------------------------------------------------------------------
# Strict JSON objects from bytes

#: The decoder's codes as the verification inputs report them (anything else: ``invalid_json``).
STRICT_JSON_CODES: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "too_large": "too_large",
        "string_too_long": "too_large",
        "byte_order_mark": "not_utf8",
        "not_utf8": "not_utf8",
        "duplicate_key": "duplicate_key",
    }
)


def decode_document(
    data: bytes | bytearray | memoryview | str,
    field: str,
    *,
    error: ErrorClass,
    code: str = "invalid_document",
    limits: DecodeLimits = DEFAULT_LIMITS,
    codes: Mapping[str, str] | None = None,
) -> Any:
    """Strictly decode one JSON document; any decoder refusal is ``error(code, field)``.

    For a ``from_json`` that hands the value on to its ``from_dict`` (which
    checks the shape); the decoder's own code is dropped, never chained --
    unless ``codes`` maps it to one of the caller's (then ``codes[code]``;
    ``code`` stays the code of every decoder code ``codes`` lacks).
    """
    try:
        return decode(data, limits=limits)
    except CanonicalError as failure:
        raise error((codes or {}).get(failure.code, code), field) from None


def decode_object(
    data: bytes,
    field: str,
    *,
    error: ErrorClass,
    limit: int | DecodeLimits,
    codes: Mapping[str, str] = STRICT_JSON_CODES,
    other_code: str = "invalid_json",
    object_code: str = "not_object",
    canonical: Callable[[Any], bytes] | None = None,
    canonical_code: str = "not_canonical",
) -> dict[str, Any]:
    """Decode strict JSON that must be an object (optionally: in its one canonical spelling).

    :func:`decode_document` with the caller's codes, then the object check.

    Args:
        data: the document's bytes.
        field: the library-chosen field every refusal names.
        error: the caller's error class.
        limit: the most bytes *and* string length accepted (the other limits
            the decoder's defaults), or the decoder's full
            :class:`~sealeval.canonical.DecodeLimits` (e.g. a shallower depth).
        codes: the decoder's codes mapped to the caller's.
        other_code: the caller's code for any decoder code ``codes`` lacks.
        object_code: the code when the value is not an object.
        canonical: an encoder (e.g. :func:`sealeval.canonical.encode_invarlock`)
            when only its exact bytes are accepted: checked *before* the object
            check, so a document is first proven canonical, then its shape.
        canonical_code: the code when ``data`` is not ``canonical(value)``.

    A decoder refusal becomes ``error(codes.get(code, other_code), field)``
    (never chained); a value the encoder refuses is ``other_code``.
    """
    limits = (
        limit
        if isinstance(limit, DecodeLimits)
        else DecodeLimits(max_bytes=limit, max_string_length=limit)
    )
    value = decode_document(data, field, error=error, code=other_code, limits=limits, codes=codes)
    if canonical is not None:
        try:
            spelled = canonical(value)
        except SealevalError:
            raise error(other_code, field) from None
        if spelled != data:
            raise error(canonical_code, field)
    if not isinstance(value, dict):
        raise error(object_code, field)
    return value
