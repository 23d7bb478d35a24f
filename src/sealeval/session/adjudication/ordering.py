"""The secret randomization key, keyed orderings, rotation and aliases.

Candidates and cases are ordered by keyed HMAC (:func:`keyed_hmac`), the
candidate order is rotated by one position per case (:func:`rotated_order`)
and identities become positional aliases (:func:`alias_for_slot`). The key
never appears in a ``repr``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from typing import NoReturn

from sealeval.session.adjudication.vocabulary import (
    ALIASES,
    CANDIDATE_ORDER_DOMAIN,
    CASE_ORDER_DOMAIN,
    MIN_KEY_BYTES,
    ORDER_DOMAINS,
    AdjudicationError,
)
from sealeval.session.cases import (
    MAX_CANDIDATES,
    ComparisonCase,
    ConflictOfInterestMetadata,
    is_reference,
)

__all__ = [
    "RandomizationKey",
    "alias_for_slot",
    "candidate_base_order",
    "keyed_case_order",
    "keyed_hmac",
    "require_cleared_reviewer",
    "rotated_order",
]

# ---------------------------------------------------------------------------
# The secret key


class RandomizationKey:
    """The secret key behind the orderings and the mapping commitment.

    Holds at least :data:`MIN_KEY_BYTES` bytes (use ``secrets.token_bytes(32)``
    or more). The object is immutable, never shows its bytes (``repr`` and
    ``str`` are redacted), cannot be pickled, and compares by identity.
    """

    __slots__ = ("_material",)
    _material: bytes

    def __init__(self, material: bytes) -> None:
        """Wrap ``material``; refuse anything but ``bytes`` of at least 32 bytes.

        Raises:
            AdjudicationError: ``randomization_key: invalid_key``.
        """
        if not isinstance(material, bytes) or len(material) < MIN_KEY_BYTES:
            raise AdjudicationError("invalid_key", "randomization_key")
        object.__setattr__(self, "_material", bytes(material))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        """Refuse mutation."""
        raise AttributeError("RandomizationKey is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        """Refuse mutation."""
        raise AttributeError("RandomizationKey is immutable")

    def __repr__(self) -> str:
        """Show nothing of the key."""
        return "RandomizationKey(<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        """Refuse pickling: a key must not be persisted by accident."""
        raise TypeError("RandomizationKey cannot be pickled")

    def __copy__(self) -> RandomizationKey:
        """Return ``self``: the key is immutable."""
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> RandomizationKey:
        """Return ``self``: the key is immutable."""
        return self

    def _mac(self, domain: str, message: bytes) -> bytes:
        """Return HMAC-SHA256(key, ASCII(domain) || 0x00 || message)."""
        return hmac.new(
            self._material, domain.encode("ascii") + b"\x00" + message, hashlib.sha256
        ).digest()


def coerce_key(value: object) -> RandomizationKey:
    """Return ``value`` as a :class:`RandomizationKey` (from bytes) or refuse ``invalid_key``."""
    if isinstance(value, RandomizationKey):
        return value
    if isinstance(value, bytes):
        return RandomizationKey(value)
    raise AdjudicationError("invalid_key", "randomization_key")


# ---------------------------------------------------------------------------
# Keyed orderings, rotation and aliases


def keyed_hmac(key: RandomizationKey | bytes, domain: str, value: str) -> bytes:
    """Return keyed(key, domain, value) = HMAC-SHA256(key, ASCII(domain) || 0x00 || UTF-8(value)).

    Args:
        key: the randomization key (or its bytes, at least 32).
        domain: ``candidate-order-v1`` or ``case-order-v1``.
        value: a candidate identity or case reference.

    Returns:
        The raw 32-byte tag.

    Raises:
        AdjudicationError: ``randomization_key: invalid_key``,
            ``domain: invalid_domain`` or ``value: invalid_reference``.
    """
    secret = coerce_key(key)
    if type(domain) is not str or domain not in ORDER_DOMAINS:
        raise AdjudicationError("invalid_domain", "domain")
    if not is_reference(value):
        raise AdjudicationError("invalid_reference", "value")
    return secret._mac(domain, value.encode("utf-8"))


def sorted_keyed(key: RandomizationKey, domain: str, values: Iterable[str]) -> list[str]:
    """Sort by (keyed tag bytes, value): one HMAC per value, O(n log n)."""
    return sorted(values, key=lambda value: (key._mac(domain, value.encode("utf-8")), value))


def candidate_base_order(
    key: RandomizationKey | bytes, identities: Iterable[str]
) -> tuple[str, ...]:
    """Return the candidate base order: identities sorted by (keyed tag, identity).

    Raises:
        AdjudicationError: ``randomization_key: invalid_key``,
            ``candidate_identity: invalid_reference`` or
            ``candidate_identity: duplicate_reference``.
    """
    secret = coerce_key(key)
    items = tuple(identities)
    if not all(is_reference(identity) for identity in items):
        raise AdjudicationError("invalid_reference", "candidate_identity")
    if len(set(items)) != len(items):
        raise AdjudicationError("duplicate_reference", "candidate_identity")
    return tuple(sorted_keyed(secret, CANDIDATE_ORDER_DOMAIN, items))


def keyed_case_order(
    key: RandomizationKey | bytes, cases: Iterable[ComparisonCase]
) -> tuple[ComparisonCase, ...]:
    """Return the cases sorted by (keyed tag of ``case_ref``, ``case_ref``).

    Raises:
        AdjudicationError: ``randomization_key: invalid_key``,
            ``cases: invalid_sequence`` or ``cases: duplicate_reference``.
    """
    secret = coerce_key(key)
    items = tuple(cases)
    if any(type(case) is not ComparisonCase for case in items):
        raise AdjudicationError("invalid_sequence", "cases")
    by_ref = {case.case_ref: case for case in items}
    if len(by_ref) != len(items):
        raise AdjudicationError("duplicate_reference", "cases")
    return tuple(by_ref[ref] for ref in sorted_keyed(secret, CASE_ORDER_DOMAIN, by_ref))


def rotated_order(base: Sequence[str], position: int) -> tuple[str, ...]:
    """Return ``base`` rotated left by ``position mod len(base)``.

    The k-th case in keyed case order uses ``rotated_order(base, k)``.
    """
    if not base:
        return ()
    shift = position % len(base)
    return tuple(base[shift:]) + tuple(base[:shift])


def alias_for_slot(slot: int) -> str:
    """Return the alias of slot ``slot`` (0 -> ``candidate-a`` ... 25 -> ``candidate-z``).

    Raises:
        AdjudicationError: ``slot: invalid_alias`` outside 0..25.
    """
    if type(slot) is not int or not 0 <= slot < MAX_CANDIDATES:
        raise AdjudicationError("invalid_alias", "slot")
    return ALIASES[slot]


def require_cleared_reviewer(conflict_of_interest: object) -> ConflictOfInterestMetadata:
    """Return the metadata when the reviewer is cleared; refuse otherwise.

    Raises:
        AdjudicationError: ``conflict_of_interest: invalid_metadata`` (not a
            :class:`ConflictOfInterestMetadata`) or
            ``conflict_of_interest: reviewer_recused``.
    """
    if type(conflict_of_interest) is not ConflictOfInterestMetadata:
        raise AdjudicationError("invalid_metadata", "conflict_of_interest")
    if conflict_of_interest.status != "cleared":
        raise AdjudicationError("reviewer_recused", "conflict_of_interest")
    return conflict_of_interest
