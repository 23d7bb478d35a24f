"""in-toto Statement v1: subjects, predicate type, predicate, canonical payload bytes.

Wire format (https://github.com/in-toto/attestation, ``spec/v1/statement.md``)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": <text>, "digest": {"sha256": <64 hex>}}, ...],
     "predicateType": <URI>, "predicate": {...}}

The payload bytes are the openmed canonical JSON of the statement (ASCII,
sorted keys, no spaces, no final newline); a reader refuses any other
spelling of the same statement, so one statement has exactly one payload.
sealeval subjects carry exactly one digest, ``sha256``.
"""

from __future__ import annotations

import copy
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sealeval._validate import EMPTY, check_exact, decode_object
from sealeval.attest._errors import AttestationError
from sealeval.canonical import DecodeLimits, encode_openmed, is_digest
from sealeval.errors import CanonicalError

__all__ = [
    "MAX_SUBJECTS",
    "PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "Statement",
    "Subject",
    "parse_statement",
]

#: ``_type`` of every statement.
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
#: DSSE ``payloadType`` of an in-toto statement.
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
#: Most subjects accepted in one statement.
MAX_SUBJECTS: Final = 64
_NAME: Final = re.compile(r"[^\x00-\x1f\x7f]{1,255}")
_HEX: Final = re.compile(r"[0-9a-f]{64}")
_STATEMENT_KEYS: Final = frozenset({"_type", "subject", "predicateType", "predicate"})
_SUBJECT_KEYS: Final = frozenset({"name", "digest"})
_DIGEST_KEYS: Final = frozenset({"sha256"})
_LIMITS: Final = DecodeLimits(max_bytes=16 * 1024 * 1024, max_depth=64)


@dataclass(frozen=True, slots=True)
class Subject:
    """One attested artifact: a name and its ``sha256:<hex>`` digest.

    Attributes:
        name: 1 to 255 characters, no control characters.
        digest: ``sha256:`` + 64 lowercase hex digits.
    """

    name: str
    digest: str

    def __post_init__(self) -> None:
        """Refuse a name or digest outside the grammar."""
        if type(self.name) is not str or _NAME.fullmatch(self.name) is None:
            raise AttestationError("invalid_subject", "subject.name")
        if not is_digest(self.digest):
            raise AttestationError("invalid_subject", "subject.digest")

    def to_dict(self) -> dict[str, Any]:
        """Return the in-toto ResourceDescriptor ``{name, digest: {sha256}}``."""
        return {"name": self.name, "digest": {"sha256": self.digest.removeprefix("sha256:")}}

    @classmethod
    def from_dict(cls, document: object) -> Subject:
        """Parse a ResourceDescriptor carrying exactly ``name`` and a ``sha256`` digest."""
        document = check_exact(
            document, "subject", _SUBJECT_KEYS, error=AttestationError, code="invalid_subject"
        )
        digest = check_exact(
            document["digest"],
            "subject.digest",
            _DIGEST_KEYS,
            error=AttestationError,
            code="invalid_subject",
        )
        value = digest["sha256"]
        if type(value) is not str or _HEX.fullmatch(value) is None:
            raise AttestationError("invalid_subject", "subject.digest")
        return cls(name=document["name"], digest="sha256:" + value)


@dataclass(frozen=True, slots=True, repr=False)
class Statement:
    """An in-toto Statement v1 with its canonical payload bytes.

    Construction checks the structure only (subjects, a predicate that is a
    canonical JSON object); the predicate's meaning is checked by
    :func:`sealeval.attest.check_statement`. ``predicate`` is a read-only
    view of a private copy.
    """

    predicate_type: str
    subjects: tuple[Subject, ...]
    predicate: Mapping[str, Any]
    payload: bytes = field(init=False)

    def __post_init__(self) -> None:
        """Validate and compute the payload bytes."""
        if type(self.predicate_type) is not str or not self.predicate_type:
            raise AttestationError("invalid_statement", "predicateType")
        if type(self.subjects) is not tuple or not all(
            type(item) is Subject for item in self.subjects
        ):
            raise AttestationError("invalid_type", "subject")
        if not self.subjects:
            raise AttestationError("no_subject", "subject")
        if len(self.subjects) > MAX_SUBJECTS:
            raise AttestationError("invalid_statement", "subject")
        if not isinstance(self.predicate, Mapping):
            raise AttestationError("invalid_statement", "predicate")
        predicate = copy.deepcopy(dict(self.predicate))
        object.__setattr__(self, "predicate", types.MappingProxyType(predicate))
        try:
            payload = encode_openmed(self.to_dict()).encode("ascii")
        except CanonicalError:
            raise AttestationError("invalid_statement", "predicate") from None
        object.__setattr__(self, "payload", payload)

    def __repr__(self) -> str:
        """Show the predicate type and subject count only."""
        return f"Statement(predicate_type={self.predicate_type!r}, subjects={len(self.subjects)})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "_type": STATEMENT_TYPE,
            "subject": [item.to_dict() for item in self.subjects],
            "predicateType": self.predicate_type,
            "predicate": copy.deepcopy(dict(self.predicate)),
        }


def parse_statement(payload: bytes) -> Statement:
    """Strictly parse payload bytes into a :class:`Statement`.

    Raises:
        AttestationError: ``invalid_statement``, ``invalid_subject``,
            ``no_subject``, ``non_canonical_payload``.
    """
    document = decode_object(
        payload,
        "payload",
        error=AttestationError,
        limit=_LIMITS,
        codes=EMPTY,
        other_code="invalid_statement",
        object_code="invalid_statement",
    )
    check_exact(
        document, "payload", _STATEMENT_KEYS, error=AttestationError, code="invalid_statement"
    )
    if document["_type"] != STATEMENT_TYPE:
        raise AttestationError("invalid_statement", "_type")
    subjects = document["subject"]
    if not isinstance(subjects, list):
        raise AttestationError("invalid_statement", "subject")
    statement = Statement(
        predicate_type=document["predicateType"],
        subjects=tuple(Subject.from_dict(item) for item in subjects),
        predicate=document["predicate"],
    )
    if statement.payload != payload:
        raise AttestationError("non_canonical_payload", "payload")
    return statement
