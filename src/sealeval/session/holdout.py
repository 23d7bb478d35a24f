"""Holdout commitments: four Merkle-committed private manifests of item digests.

Wire contracts (openmed canonical JSON profile):

* ``openmed.eval.holdout_commitment.v1`` — one Merkle root and one item count
  for each manifest kind, and ``commitment_digest`` over them;
* ``openmed.eval.holdout_commitment.inclusion_proof.v1`` — the sibling path
  proving that one item digest sits at one index of one committed manifest;
* ``openmed.eval.holdout_commitment.verification.v1`` — the result of checking
  a commitment or a proof, with exactly one closed reason code.

Only digests are handled: an item is the ``sha256:`` digest of private content
held by the evaluator. Leaves bind the manifest kind and the item index, nodes
bind their two children, and a level of odd length pairs its last element with
itself. The trees are built level by level with plain loops (no recursion),
in linear time and memory, so a holdout of 100,000 items is cheap.

Verifiers never raise for a bad document; builders and constructors raise
:class:`HoldoutError` with ``<field>: <code>`` messages that never carry a
submitted value.
"""

from __future__ import annotations

import hmac
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

from sealeval._validate import check_closed, check_exact, decode_document
from sealeval.canonical import digest_bytes, digest_openmed, encode_openmed, is_digest
from sealeval.errors import CanonicalError, SessionError

__all__ = [
    "COMMITMENT_SCHEMA",
    "LEAF_DOMAIN",
    "MANIFEST_KINDS",
    "NODE_DOMAIN",
    "PROOF_SCHEMA",
    "REASON_CODES",
    "VERIFICATION_SCHEMA",
    "HoldoutCommitment",
    "HoldoutError",
    "HoldoutVerification",
    "InclusionProof",
    "build_inclusion_proof",
    "commit_holdout",
    "leaf_digest",
    "leaf_preimage",
    "merkle_levels",
    "merkle_root",
    "node_digest",
    "node_preimage",
    "tree_depth",
    "verify_holdout_commitment",
    "verify_inclusion_proof",
]

COMMITMENT_SCHEMA: Final = "openmed.eval.holdout_commitment.v1"
PROOF_SCHEMA: Final = "openmed.eval.holdout_commitment.inclusion_proof.v1"
VERIFICATION_SCHEMA: Final = "openmed.eval.holdout_commitment.verification.v1"
#: The four manifest kinds, in the fixed "kind order".
MANIFEST_KINDS: Final = ("case", "label", "template", "randomization")
#: Domain-separation strings of the leaf and node hashes.
LEAF_DOMAIN: Final = "openmed.eval.holdout_commitment.leaf.v1"
NODE_DOMAIN: Final = "openmed.eval.holdout_commitment.node.v1"
#: Closed reason codes of a verification, in documentation order.
REASON_CODES: Final = (
    "valid",
    "invalid_commitment",
    "invalid_proof",
    "commitment_mismatch",
    "item_not_included",
)

_KIND_SET: Final = frozenset(MANIFEST_KINDS)
_REASON_SET: Final = frozenset(REASON_CODES)
_VERSION: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_COMMITMENT_FIELDS: Final = frozenset(
    {
        "commitment_digest",
        "holdout_version",
        "manifest_item_counts",
        "manifest_roots",
        "schema_version",
    }
)
_PROOF_FIELDS: Final = frozenset(
    {
        "commitment_digest",
        "item_digest",
        "item_index",
        "manifest_kind",
        "schema_version",
        "sibling_digests",
    }
)
# Sequences whose elements are not items: text and raw bytes.
_NOT_SEQUENCES: Final = (str, bytes, bytearray)
_LEAF_PREFIX: Final = LEAF_DOMAIN.encode("ascii") + b"\x00"
_NODE_PREFIX: Final = NODE_DOMAIN.encode("ascii") + b"\x00"
_KIND_PREFIXES: Final = {
    kind: _LEAF_PREFIX + kind.encode("ascii") + b"\x00" for kind in MANIFEST_KINDS
}


class HoldoutError(SessionError):
    """Refusal while committing a holdout, building a proof or constructing a document."""

    module = "sealeval.session.holdout"
    field_in_message = True
    codes = frozenset(
        {
            "invalid",
            "invalid_keys",
            "invalid_sequence",
            "empty",
            "invalid_item_digest",
            "unsupported_version",
            "invalid_digest",
            "invalid_count",
            "payload_mismatch",
            "commitment_mismatch",
            "invalid_document",
            "unknown_field",
            "missing_field",
        }
    )


# ---------------------------------------------------------------------------
# Predicates


def _is_kind(value: object) -> bool:
    # The type check comes first so that an unhashable value cannot raise.
    return type(value) is str and value in _KIND_SET


def _is_index(value: object) -> bool:
    """Return whether ``value`` is exactly an ``int`` (bools refused) and not negative."""
    return type(value) is int and value >= 0


def _is_sequence(value: object) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, _NOT_SEQUENCES)


def _is_count(value: object) -> bool:
    return type(value) is int and value > 0


# ---------------------------------------------------------------------------
# Hash constructions


def _leaf_bytes(kind: str, index: int, item_digest: str) -> bytes:
    return _KIND_PREFIXES[kind] + str(index).encode("ascii") + b"\x00" + item_digest.encode("ascii")


def _node_bytes(left: str, right: str) -> bytes:
    return _NODE_PREFIX + left.encode("ascii") + b"\x00" + right.encode("ascii")


def _leaf(kind: str, index: int, item_digest: str) -> str:
    """Hash one leaf of already-checked inputs."""
    return digest_bytes(_leaf_bytes(kind, index, item_digest))


def _node(left: str, right: str) -> str:
    """Hash one interior node over two already-checked child digests."""
    return digest_bytes(_node_bytes(left, right))


def _check_leaf_inputs(manifest_kind: object, item_index: object, item_digest: object) -> None:
    if not _is_kind(manifest_kind):
        raise HoldoutError("invalid", "manifest_kind")
    if not _is_index(item_index):
        raise HoldoutError("invalid", "item_index")
    if not is_digest(item_digest):
        raise HoldoutError("invalid_digest", "item_digest")


def leaf_preimage(manifest_kind: str, item_index: int, item_digest: str) -> bytes:
    """Return the exact bytes hashed for one leaf.

    ``LEAF_DOMAIN 0x00 kind 0x00 decimal(index) 0x00 item_digest`` (ASCII).

    Raises:
        HoldoutError: ``manifest_kind: invalid``, ``item_index: invalid`` (not
            exactly an ``int``, or negative) or ``item_digest: invalid_digest``.
    """
    _check_leaf_inputs(manifest_kind, item_index, item_digest)
    return _leaf_bytes(manifest_kind, item_index, item_digest)


def leaf_digest(manifest_kind: str, item_index: int, item_digest: str) -> str:
    """Return the leaf digest of item ``item_index`` of manifest ``manifest_kind``.

    Raises:
        HoldoutError: as :func:`leaf_preimage`.
    """
    _check_leaf_inputs(manifest_kind, item_index, item_digest)
    return _leaf(manifest_kind, item_index, item_digest)


def _check_node_inputs(left: object, right: object) -> None:
    if not is_digest(left):
        raise HoldoutError("invalid_digest", "left")
    if not is_digest(right):
        raise HoldoutError("invalid_digest", "right")


def node_preimage(left: str, right: str) -> bytes:
    """Return the exact bytes hashed for one interior node: ``NODE_DOMAIN 0x00 L 0x00 R``.

    Raises:
        HoldoutError: ``left: invalid_digest`` or ``right: invalid_digest``.
    """
    _check_node_inputs(left, right)
    return _node_bytes(left, right)


def node_digest(left: str, right: str) -> str:
    """Return the digest of the interior node over ``left`` and ``right``.

    Raises:
        HoldoutError: as :func:`node_preimage`.
    """
    _check_node_inputs(left, right)
    return _node(left, right)


# ---------------------------------------------------------------------------
# Merkle trees


def tree_depth(item_count: int) -> int:
    """Return the number of levels above the leaves (= siblings in a proof).

    That is the number of halvings, rounding up, that bring ``item_count``
    down to 1: ``0`` for one item, ``1`` for two, ``2`` for three or four.

    Raises:
        HoldoutError: ``item_count: invalid_count`` unless exactly an ``int`` >= 1.
    """
    if not _is_count(item_count):
        raise HoldoutError("invalid_count", "item_count")
    return (item_count - 1).bit_length()


def _next_level(level: list[str]) -> list[str]:
    """Pair neighbours; the last element of an odd-length level pairs with itself."""
    size = len(level)
    parents = [_node(level[i], level[i + 1]) for i in range(0, size - 1, 2)]
    if size % 2:
        parents.append(_node(level[-1], level[-1]))
    return parents


def _leaves(kind: str, items: Sequence[str]) -> list[str]:
    return [_leaf(kind, index, item) for index, item in enumerate(items)]


def _root(kind: str, items: Sequence[str]) -> str:
    level = _leaves(kind, items)
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def _checked_item_digests(item_digests: object) -> tuple[str, ...]:
    """Check a caller's item list (``item_digests`` field) and return it as a tuple."""
    if not _is_sequence(item_digests):
        raise HoldoutError("invalid_sequence", "item_digests")
    items: tuple[str, ...] = tuple(item_digests)
    if not items or not all(map(is_digest, items)):
        raise HoldoutError("invalid", "item_digests")
    return items


def merkle_levels(manifest_kind: str, item_digests: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Return every level of one manifest's tree, leaves first and ``(root,)`` last.

    Raises:
        HoldoutError: ``manifest_kind: invalid``, ``item_digests:
            invalid_sequence`` (not a sequence, or text/bytes) or
            ``item_digests: invalid`` (empty, or an item that is not a digest).
    """
    if not _is_kind(manifest_kind):
        raise HoldoutError("invalid", "manifest_kind")
    items = _checked_item_digests(item_digests)
    level = _leaves(manifest_kind, items)
    levels = [tuple(level)]
    while len(level) > 1:
        level = _next_level(level)
        levels.append(tuple(level))
    return tuple(levels)


def merkle_root(manifest_kind: str, item_digests: Sequence[str]) -> str:
    """Return the Merkle root of one manifest (a single item's root is its leaf).

    Raises:
        HoldoutError: as :func:`merkle_levels`.
    """
    if not _is_kind(manifest_kind):
        raise HoldoutError("invalid", "manifest_kind")
    return _root(manifest_kind, _checked_item_digests(item_digests))


# ---------------------------------------------------------------------------
# Commitment


def _derive_commitment_digest(
    holdout_version: str, roots: Mapping[str, str], counts: Mapping[str, int]
) -> str:
    try:
        return digest_openmed(
            {
                "holdout_version": holdout_version,
                "manifest_item_counts": dict(counts),
                "manifest_roots": dict(roots),
                "schema_version": COMMITMENT_SCHEMA,
            }
        )
    except CanonicalError:
        # Versions and roots are ASCII by grammar; only a count too long to
        # write in decimal can fail to serialize.
        raise HoldoutError("invalid_count", "manifest_item_counts") from None


def _check_version(holdout_version: object) -> None:
    if type(holdout_version) is not str or _VERSION.fullmatch(holdout_version) is None:
        raise HoldoutError("invalid", "holdout_version")


def _checked_kind_map(value: object, name: str) -> Mapping[Any, Any]:
    return check_exact(value, name, _KIND_SET, error=HoldoutError, code="invalid_keys")


@dataclass(frozen=True, slots=True)
class HoldoutCommitment:
    """A published holdout commitment: four roots, four counts and their digest.

    Construction re-checks everything in the specified order (schema,
    version, roots, counts, digest grammar, then the recomputed digest with a
    constant-time comparison). ``manifest_roots`` and ``manifest_item_counts``
    are read-only mappings in kind order.
    """

    holdout_version: str
    manifest_roots: Mapping[str, str]
    manifest_item_counts: Mapping[str, int]
    commitment_digest: str
    schema_version: str = field(default=COMMITMENT_SCHEMA)

    def __post_init__(self) -> None:
        """Validate in the specified order; an invalid commitment cannot exist."""
        if type(self.schema_version) is not str or self.schema_version != COMMITMENT_SCHEMA:
            raise HoldoutError("unsupported_version", "schema_version")
        _check_version(self.holdout_version)
        given_roots = _checked_kind_map(self.manifest_roots, "manifest_roots")
        roots = {kind: given_roots[kind] for kind in MANIFEST_KINDS}
        if not all(map(is_digest, roots.values())):
            raise HoldoutError("invalid_digest", "manifest_roots")
        given_counts = _checked_kind_map(self.manifest_item_counts, "manifest_item_counts")
        counts = {kind: given_counts[kind] for kind in MANIFEST_KINDS}
        if not all(map(_is_count, counts.values())):
            raise HoldoutError("invalid_count", "manifest_item_counts")
        if not is_digest(self.commitment_digest):
            raise HoldoutError("invalid_digest", "commitment_digest")
        expected = _derive_commitment_digest(self.holdout_version, roots, counts)
        if not hmac.compare_digest(self.commitment_digest, expected):
            raise HoldoutError("payload_mismatch", "commitment_digest")
        object.__setattr__(self, "manifest_roots", types.MappingProxyType(roots))
        object.__setattr__(self, "manifest_item_counts", types.MappingProxyType(counts))

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "commitment_digest": self.commitment_digest,
            "holdout_version": self.holdout_version,
            "manifest_item_counts": dict(self.manifest_item_counts),
            "manifest_roots": dict(self.manifest_roots),
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> HoldoutCommitment:
        """Build from a parsed document with exactly the five fields, then re-check it.

        Raises:
            HoldoutError: ``commitment: invalid_document`` (not a mapping),
                ``commitment: unknown_field``, ``<field>: missing_field``, or
                any constructor refusal.
        """
        document = check_closed(
            document,
            "commitment",
            sorted(_COMMITMENT_FIELDS),
            error=HoldoutError,
            type_code="invalid_document",
            missing_prefix="",
        )
        return cls(
            holdout_version=document["holdout_version"],
            manifest_roots=document["manifest_roots"],
            manifest_item_counts=document["manifest_item_counts"],
            commitment_digest=document["commitment_digest"],
            schema_version=document["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> HoldoutCommitment:
        """Strictly parse a commitment document and re-check its digest.

        Raises:
            HoldoutError: ``commitment: invalid_document`` for bytes that are
                not one strict JSON document, else as :meth:`from_dict`.
        """
        return cls.from_dict(decode_document(data, "commitment", error=HoldoutError))


def commit_holdout(
    holdout_version: str, manifests: Mapping[str, Sequence[str]]
) -> HoldoutCommitment:
    """Commit to the four private, ordered manifests of item digests.

    Args:
        holdout_version: the public version label (``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``).
        manifests: exactly the four kinds, each a non-empty sequence of item
            digests in item order. Repeated digests are allowed.

    Raises:
        HoldoutError: ``holdout_version: invalid``, ``manifests:
            invalid_keys``, then per kind in kind order
            ``manifests.<kind>: invalid_sequence`` (not a sequence, or
            text/bytes), ``manifests.<kind>: empty`` or
            ``manifests.<kind>: invalid_item_digest``.
    """
    _check_version(holdout_version)
    given = _checked_kind_map(manifests, "manifests")
    checked: dict[str, tuple[str, ...]] = {}
    for kind in MANIFEST_KINDS:
        value = given[kind]
        name = f"manifests.{kind}"
        if not _is_sequence(value):
            raise HoldoutError("invalid_sequence", name)
        items = tuple(value)
        if not items:
            raise HoldoutError("empty", name)
        if not all(map(is_digest, items)):
            raise HoldoutError("invalid_item_digest", name)
        checked[kind] = items
    roots = {kind: _root(kind, items) for kind, items in checked.items()}
    counts = {kind: len(items) for kind, items in checked.items()}
    return HoldoutCommitment(
        holdout_version=holdout_version,
        manifest_roots=roots,
        manifest_item_counts=counts,
        commitment_digest=_derive_commitment_digest(holdout_version, roots, counts),
    )


# ---------------------------------------------------------------------------
# Inclusion proofs


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """Proof that ``item_digest`` is item ``item_index`` of one committed manifest.

    Construction checks the document's shape only (the checks that make a
    proof ``invalid_proof`` before it meets a commitment); whether it proves
    anything is decided by :func:`verify_inclusion_proof`.
    ``sibling_digests`` is a tuple, leaf level first.
    """

    commitment_digest: str
    manifest_kind: str
    item_index: int
    item_digest: str
    sibling_digests: Sequence[str]
    schema_version: str = field(default=PROOF_SCHEMA)

    def __post_init__(self) -> None:
        """Validate the shape; a malformed proof cannot exist."""
        if type(self.schema_version) is not str or self.schema_version != PROOF_SCHEMA:
            raise HoldoutError("unsupported_version", "schema_version")
        if not is_digest(self.commitment_digest):
            raise HoldoutError("invalid_digest", "commitment_digest")
        if not _is_kind(self.manifest_kind):
            raise HoldoutError("invalid", "manifest_kind")
        if not _is_index(self.item_index):
            raise HoldoutError("invalid", "item_index")
        if not is_digest(self.item_digest):
            raise HoldoutError("invalid_digest", "item_digest")
        if not _is_sequence(self.sibling_digests):
            raise HoldoutError("invalid_sequence", "sibling_digests")
        siblings = tuple(self.sibling_digests)
        if not all(map(is_digest, siblings)):
            raise HoldoutError("invalid_digest", "sibling_digests")
        object.__setattr__(self, "sibling_digests", siblings)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "commitment_digest": self.commitment_digest,
            "item_digest": self.item_digest,
            "item_index": self.item_index,
            "manifest_kind": self.manifest_kind,
            "schema_version": self.schema_version,
            "sibling_digests": list(self.sibling_digests),
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> InclusionProof:
        """Build from a parsed document with exactly the six fields.

        Raises:
            HoldoutError: ``proof: invalid_document`` (not a mapping),
                ``proof: unknown_field``, ``<field>: missing_field``, or any
                constructor refusal.
        """
        document = check_closed(
            document,
            "proof",
            sorted(_PROOF_FIELDS),
            error=HoldoutError,
            type_code="invalid_document",
            missing_prefix="",
        )
        return cls(
            commitment_digest=document["commitment_digest"],
            manifest_kind=document["manifest_kind"],
            item_index=document["item_index"],
            item_digest=document["item_digest"],
            sibling_digests=document["sibling_digests"],
            schema_version=document["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> InclusionProof:
        """Strictly parse a proof document.

        Raises:
            HoldoutError: ``proof: invalid_document`` for bytes that are not
                one strict JSON document, else as :meth:`from_dict`.
        """
        return cls.from_dict(decode_document(data, "proof", error=HoldoutError))


def build_inclusion_proof(
    commitment: HoldoutCommitment,
    manifest_kind: str,
    item_index: int,
    item_digests: Sequence[str],
) -> InclusionProof:
    """Prove that item ``item_index`` of the private manifest is in ``commitment``.

    Args:
        commitment: the published commitment object.
        manifest_kind: one of :data:`MANIFEST_KINDS`.
        item_index: 0-based position of the item.
        item_digests: the full ordered private manifest of that kind; it must
            reproduce the committed count and root.

    Raises:
        HoldoutError: in this order ``commitment: invalid``, ``manifest_kind:
            invalid``, ``item_digests: invalid_sequence``, ``item_digests:
            invalid``, ``item_index: invalid`` (not exactly an ``int``, or
            outside ``0..n-1``), ``item_digests: commitment_mismatch`` (count
            or recomputed root differs from the commitment).
    """
    if not isinstance(commitment, HoldoutCommitment):
        raise HoldoutError("invalid", "commitment")
    if not _is_kind(manifest_kind):
        raise HoldoutError("invalid", "manifest_kind")
    items = _checked_item_digests(item_digests)
    if not _is_index(item_index) or item_index >= len(items):
        raise HoldoutError("invalid", "item_index")
    if len(items) != commitment.manifest_item_counts[manifest_kind]:
        raise HoldoutError("commitment_mismatch", "item_digests")
    siblings: list[str] = []
    position = item_index
    level = _leaves(manifest_kind, items)
    while len(level) > 1:
        neighbour = position - 1 if position % 2 else position + 1
        siblings.append(level[neighbour] if neighbour < len(level) else level[position])
        level = _next_level(level)
        position //= 2
    if not hmac.compare_digest(level[0], commitment.manifest_roots[manifest_kind]):
        raise HoldoutError("commitment_mismatch", "item_digests")
    return InclusionProof(
        commitment_digest=commitment.commitment_digest,
        manifest_kind=manifest_kind,
        item_index=item_index,
        item_digest=items[item_index],
        sibling_digests=tuple(siblings),
    )


# ---------------------------------------------------------------------------
# Verification


@dataclass(frozen=True, slots=True)
class HoldoutVerification:
    """Result of a holdout verification: exactly one closed reason code.

    ``valid`` is true exactly when the reason is ``"valid"``. The result
    never carries a submitted value.
    """

    valid: bool
    reason_codes: tuple[str, ...]
    schema_version: str = field(default=VERIFICATION_SCHEMA)

    def __post_init__(self) -> None:
        """Refuse results outside the closed contract."""
        if type(self.schema_version) is not str or self.schema_version != VERIFICATION_SCHEMA:
            raise HoldoutError("unsupported_version", "schema_version")
        codes = self.reason_codes
        if (
            type(codes) is not tuple
            or len(codes) != 1
            or type(codes[0]) is not str
            or codes[0] not in _REASON_SET
        ):
            raise HoldoutError("invalid", "reason_codes")
        if type(self.valid) is not bool or self.valid != (codes[0] == "valid"):
            raise HoldoutError("invalid", "valid")

    @classmethod
    def of(cls, reason: str) -> HoldoutVerification:
        """Return the result for one reason code of :data:`REASON_CODES`."""
        return cls(valid=reason == "valid", reason_codes=(reason,))

    @property
    def reason(self) -> str:
        """The single reason code."""
        return self.reason_codes[0]

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "reason_codes": list(self.reason_codes),
            "schema_version": self.schema_version,
            "valid": self.valid,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


def _as_commitment(commitment: object) -> HoldoutCommitment | None:
    """Return the commitment if it passes every check, else ``None``; never raises."""
    try:
        if isinstance(commitment, HoldoutCommitment):
            # Re-check: the object could have been altered behind its back.
            return HoldoutCommitment.from_dict(commitment.to_dict())
        return HoldoutCommitment.from_dict(commitment)
    except Exception:  # noqa: BLE001 - hostile mappings must not make verification raise
        return None


def verify_holdout_commitment(commitment: object) -> HoldoutVerification:
    """Check a commitment (object or parsed document); never raises.

    Returns:
        ``valid`` when it has exactly the five fields, the v1 schema, a valid
        version, four digest roots, four positive integer counts and a
        matching ``commitment_digest``; otherwise ``invalid_commitment``.
    """
    if _as_commitment(commitment) is None:
        return HoldoutVerification.of("invalid_commitment")
    return HoldoutVerification.of("valid")


def _as_proof(proof: object) -> InclusionProof | None:
    """Return the proof if its shape is valid, else ``None``; never raises."""
    try:
        if isinstance(proof, InclusionProof):
            return InclusionProof.from_dict(proof.to_dict())
        return InclusionProof.from_dict(proof)
    except Exception:  # noqa: BLE001 - hostile mappings must not make verification raise
        return None


def _fold(proof: InclusionProof, count: int) -> str | None:
    """Recompute the root from the proof; ``None`` when a self-pairing is violated."""
    current = _leaf(proof.manifest_kind, proof.item_index, proof.item_digest)
    index = proof.item_index
    size = count
    for sibling in proof.sibling_digests:
        if index % 2:
            current = _node(sibling, current)
        else:
            if index + 1 >= size and not hmac.compare_digest(sibling, current):
                return None
            current = _node(current, sibling)
        index //= 2
        size = (size + 1) // 2
    return current


def _path_reason(commitment: HoldoutCommitment, proof: InclusionProof) -> str:
    """Apply steps 5-7: bounds and path length, the fold, the root comparison."""
    count = commitment.manifest_item_counts[proof.manifest_kind]
    if proof.item_index >= count or len(proof.sibling_digests) != tree_depth(count):
        return "invalid_proof"
    root = _fold(proof, count)
    if root is None:
        return "invalid_proof"
    if hmac.compare_digest(root, commitment.manifest_roots[proof.manifest_kind]):
        return "valid"
    return "item_not_included"


def verify_inclusion_proof(commitment: object, proof: object) -> HoldoutVerification:
    """Check an inclusion proof against a commitment; never raises for documents.

    Both arguments may be objects or parsed documents. Reasons, first match:
    ``invalid_commitment``; ``invalid_proof`` (shape); ``commitment_mismatch``
    (the proof names another commitment); ``invalid_proof`` (index beyond the
    committed count, wrong number of siblings, or an odd last element whose
    sibling is not itself); ``item_not_included`` (the recomputed root differs);
    else ``valid``.
    """
    checked_commitment = _as_commitment(commitment)
    if checked_commitment is None:
        return HoldoutVerification.of("invalid_commitment")
    checked_proof = _as_proof(proof)
    if checked_proof is None:
        return HoldoutVerification.of("invalid_proof")
    if not hmac.compare_digest(
        checked_proof.commitment_digest, checked_commitment.commitment_digest
    ):
        return HoldoutVerification.of("commitment_mismatch")
    return HoldoutVerification.of(_path_reason(checked_commitment, checked_proof))
