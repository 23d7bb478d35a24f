"""The captured-path error class and the small checking vocabulary that raises it.

Every refusal of :mod:`sealeval.captured` is a :class:`CapturedRunError` with a
code from its closed set and a library-chosen field name such as
``records[3].likelihood.input_digest`` (record positions are counted by the
library; nothing a caller submitted — ids, keys, text, values — ever reaches a
message). Bytes that are not strict JSON are refused earlier by
:func:`sealeval.canonical.decode` with a :class:`~sealeval.errors.CanonicalError`;
output files are refused with :class:`~sealeval.errors.OutputError`.

The helpers below (JSON value freezing, text and digest rules, closed-object
member checks) are the one implementation of the field rules of the
``invarlock/evaluation-run-v1`` family (spec 00-conventions §4) shared by the
modules of this package; they are internal to :mod:`sealeval.captured`.
"""

from __future__ import annotations

import json
import math
import re
import sys
import types
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, TypeAlias

from sealeval.canonical import digest_bytes, is_digest
from sealeval.errors import CapturedError

__all__ = ["CapturedRunError", "JsonValue"]

#: A frozen JSON value: ``None``, ``bool``, ``int``, ``float``, ``str``, a tuple
#: of values (JSON array) or a read-only mapping of ``str`` to values (object).
JsonValue: TypeAlias = (
    bool | int | float | str | tuple["JsonValue", ...] | Mapping[str, "JsonValue"] | None
)


class CapturedRunError(CapturedError):
    """Refusal of a captured run, record, case set, service identity or export."""

    module = "sealeval.captured"
    codes = frozenset(
        {
            # structure of documents and values
            "invalid_type",
            "unknown_field",
            "missing_field",
            "invalid_constant",
            "invalid_text",
            "invalid_digest",
            "too_many_members",
            "invalid_score",
            "invalid_json_value",
            "too_deep",
            "too_large",
            # runs and case sets
            "no_records",
            "too_many_records",
            "no_cases",
            "too_many_cases",
            "duplicate_id",
            "artifact_digest_required",
            "artifact_digest_forbidden",
            # likelihood facts
            "out_of_range",
            "not_exact_integer",
            "likelihood_reference_not_text",
            "likelihood_byte_count_mismatch",
            "likelihood_binding_mismatch",
            # hosted service identity
            "configuration_digest_mismatch",
            "invalid_timestamp",
            "reversed_window",
            # input projection
            "invalid_projection",
            "projection_root",
            "projection_unresolved",
            "projection_not_text",
            "projection_binding_invalid",
            "projection_replay_mismatch",
            # case-set membership
            "case_set_mismatch",
            # evaluator export
            "unsupported_evaluator",
            "profile_unavailable",
            "profile_failed",
            "export_identity_mismatch",
            "invalid_expected_ids",
            "export_ids_mismatch",
            # files and streams
            "not_found",
            "not_regular_file",
            "unreadable",
            "not_canonical",
            "invalid_state",
        }
    )


# ---------------------------------------------------------------------------
# Shared checking vocabulary (internal to sealeval.captured)

#: Deepest nesting (arrays and objects) accepted in one captured JSON value.
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


def fail(code: str, field: str | None = None) -> CapturedRunError:
    """Return (for ``raise``) an error with a closed code and a library-chosen field."""
    return CapturedRunError(code, field)


@contextmanager
def rebased(old_root: str, new_root: str) -> Iterator[None]:
    """Re-raise errors of a nested object with its field path rooted at ``new_root``.

    An error raised inside with field ``<old_root>.x`` (or ``<old_root>``) is
    re-raised with field ``<new_root>.x`` (or ``<new_root>``); other fields are
    prefixed with ``<new_root>.``.
    """
    try:
        yield
    except CapturedRunError as error:
        field = error.field
        if field is None or field == old_root:
            rebased_field = new_root
        elif field.startswith(old_root + ".") or field.startswith(old_root + "["):
            rebased_field = new_root + field[len(old_root) :]
        else:
            rebased_field = f"{new_root}.{field}"
        raise CapturedRunError(error.code, rebased_field) from None


def _check_string(value: str, field: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise fail("invalid_json_value", field) from None


def _check_int(value: int, field: str) -> None:
    if value.bit_length() > _SAFE_INT_BITS:
        try:
            digits = len(str(abs(value)))
        except ValueError:
            raise fail("invalid_json_value", field) from None
        if digits > _MAX_INT_DIGITS:
            raise fail("invalid_json_value", field)


def _freeze(item: object, depth: int, field: str, max_depth: int) -> JsonValue:
    """Freeze one value for :func:`freeze_json` (module level: no closure, no cycle)."""
    kind = type(item)
    if kind is str:
        if not item.isascii():  # type: ignore[attr-defined]
            _check_string(item, field)  # type: ignore[arg-type]
        return item  # type: ignore[return-value]
    if item is None or kind is bool:
        return item  # type: ignore[return-value]
    if kind is int:
        _check_int(item, field)  # type: ignore[arg-type]
        return item  # type: ignore[return-value]
    if kind is float:
        if not math.isfinite(item):  # type: ignore[arg-type]
            raise fail("invalid_json_value", field)
        return item  # type: ignore[return-value]
    if kind is list or kind is tuple:
        if depth >= max_depth:
            raise fail("too_deep", field)
        depth += 1
        return tuple([_freeze(child, depth, field, max_depth) for child in item])  # type: ignore[attr-defined]
    if kind is dict or kind is types.MappingProxyType or isinstance(item, Mapping):
        if depth >= max_depth:
            raise fail("too_deep", field)
        depth += 1
        frozen: dict[str, JsonValue] = {}
        for key, child in item.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise fail("invalid_json_value", field)
            _check_string(key, field)
            frozen[sys.intern(key)] = _freeze(child, depth, field, max_depth)
        # Keys repeat across records (interned); an empty object is one shared proxy.
        return types.MappingProxyType(frozen) if frozen else EMPTY
    raise fail("invalid_json_value", field)


def freeze_json(value: object, field: str, *, max_depth: int = MAX_VALUE_DEPTH) -> JsonValue:
    """Return a deep, read-only copy of a JSON value, refusing anything outside JSON.

    Objects become read-only mappings (key order kept), arrays become tuples.
    Refused with ``invalid_json_value``: NaN/infinities, non-``str`` keys,
    ``bool``/``int``/``float``/``str`` subclasses and other types, unpaired
    surrogates, integers of more than 4300 digits. Refused with ``too_deep``:
    more than ``max_depth`` nested arrays/objects.
    """
    return _freeze(value, 0, field, max_depth)


#: The exact types of JSON scalars (``bool`` is not an ``int`` here: types are compared).
_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def plain_json(value: object, max_depth: int = MAX_VALUE_DEPTH) -> bool:
    """Return whether ``value`` has the shape :func:`freeze_json` accepts, in plain containers.

    True only for a tree of exact ``dict`` (``str`` keys), ``list``, ``tuple``,
    ``str``, ``int``, ``float``, ``bool`` and ``None`` with at most
    ``max_depth`` nested containers — what ``json.loads`` produces. Text,
    float and integer *values* are not checked here (unpaired surrogates,
    NaN/infinities, over-long integers): :func:`plain_canonical` refuses
    them. Anything else (subclasses, read-only mappings, other types) returns
    ``False``; the caller then takes the :func:`freeze_json` path, which
    names the refusal. Never raises (but ``RecursionError`` on a host whose
    recursion limit is below ``max_depth``).
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


def _refuse_default(value: object) -> Any:
    raise TypeError("not JSON")


# The invarlock canonical profile for plain values (dict, list, tuple and JSON scalars),
# calling CPython's C encoder directly (no JSONEncoder.encode wrapper, no ``default``
# fallback per read-only mapping). A test pins it to encode_invarlock.
_C_MAKE_ENCODER: Final[Any] = json.encoder.c_make_encoder  # type: ignore[attr-defined]
_C_ENCODER: Final[Any] = (
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
_PY_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
)


def plain_canonical(value: object) -> bytes | None:
    """Return the canonical bytes *without* the final LF of a :func:`plain_json` value.

    ``None`` when the value cannot be encoded canonically (NaN or infinity,
    an integer over the interpreter's digit limit, an unpaired surrogate in
    any string or key); the caller then takes the checked path, which names
    the refusal. The bytes equal ``encode_invarlock(value)[:-1]``.
    """
    try:
        if _C_ENCODER is None:  # pragma: no cover - interpreters without the C accelerator
            return _PY_ENCODER.encode(value).encode("utf-8")
        return "".join(_C_ENCODER(value, 0)).encode("utf-8")
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None


def thaw_json(value: object) -> Any:
    """Return a plain ``dict``/``list`` deep copy of a (frozen) JSON value."""
    if isinstance(value, Mapping):
        return {key: thaw_json(child) for key, child in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(child) for child in value]
    return value


def check_text(
    value: object,
    field: str,
    *,
    max_length: int = MAX_SHORT_TEXT,
    min_length: int = 1,
    controls: bool = False,
    blank: bool = True,
) -> str:
    """Check a text field; return it.

    Args:
        value: the candidate (must be exactly ``str``).
        field: the library-chosen field name for errors.
        max_length: most code points.
        min_length: fewest code points.
        controls: whether U+0000-U+001F and U+007F are allowed.
        blank: whether an entirely (Unicode) whitespace string is allowed.
    """
    if type(value) is not str:
        raise fail("invalid_type", field)
    _check_string(value, field)
    if not min_length <= len(value) <= max_length:
        raise fail("invalid_text", field)
    if not controls and _CONTROL.search(value) is not None:
        raise fail("invalid_text", field)
    if not blank and _BLANK.fullmatch(value) is not None:
        raise fail("invalid_text", field)
    return value


def check_digest(value: object, field: str, *, nullable: bool = False) -> str | None:
    """Check a ``sha256:<64 lowercase hex>`` digest (or ``None`` when nullable)."""
    if value is None and nullable:
        return None
    if not is_digest(value):
        raise fail("invalid_digest", field)
    return value  # type: ignore[return-value]


def check_members(
    document: object,
    field: str,
    required: Collection[str],
    optional: Collection[str] = (),
) -> Mapping[str, Any]:
    """Check a closed object: a mapping with exactly the required (+ optional) members."""
    if not isinstance(document, Mapping):
        raise fail("invalid_type", field)
    for key in document:
        if key not in required and key not in optional:
            raise fail("unknown_field", field)
    for key in required:
        if key not in document:
            raise fail("missing_field", field)
    return document


def check_string_map(
    value: object, field: str, *, max_length: int = MAX_LONG_TEXT
) -> Mapping[str, str]:
    """Check a ``metadata``-style object (≤100 members, string values); return a frozen copy."""
    if not isinstance(value, Mapping):
        raise fail("invalid_type", field)
    if len(value) > MAX_MEMBERS:
        raise fail("too_many_members", field)
    frozen: dict[str, str] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise fail("invalid_json_value", field)
        _check_string(key, field)
        frozen[key] = check_text(item, field, max_length=max_length, min_length=0, controls=True)
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


def plain_mapping(value: object) -> dict[str, Any]:
    """``default`` hook of JSON encoders: serialize read-only mappings like dicts."""
    if type(value) is types.MappingProxyType:
        return value.copy()
    if isinstance(value, Mapping):
        return dict(value)
    raise fail("invalid_json_value")


# The invarlock canonical profile (sealeval.canonical.encode_invarlock) without its
# pre-encoding walk, for values assembled only from frozen, already checked parts
# (freeze_json output and validated objects). A test pins it to encode_invarlock.
_FROZEN_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
    default=plain_mapping,
)


# _FROZEN_ENCODER's C encoder itself (what its encode method builds on every call).
_C_FROZEN: Final[Any] = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None, plain_mapping, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)


def frozen_canonical(value: object) -> bytes:
    """Return the canonical bytes of a value built from frozen, checked parts only."""
    try:
        if _C_FROZEN is None:  # pragma: no cover - interpreters without the C accelerator
            return (_FROZEN_ENCODER.encode(value) + "\n").encode("utf-8")
        return ("".join(_C_FROZEN(value, 0)) + "\n").encode("utf-8")
    except (ValueError, TypeError, RecursionError):
        raise fail("invalid_json_value") from None


def frozen_digest(value: object) -> str:
    """Return ``digest(value)`` for a value built from frozen, checked parts only."""
    return digest_bytes(frozen_canonical(value))
