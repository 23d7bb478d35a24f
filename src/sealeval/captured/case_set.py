"""Case sets (``invarlock/evaluation-case-set-v1``): planned membership, frozen and digested.

A case set lists the cases an evaluation is planned to cover — ``{id, input,
expected, metadata}`` each, independent of outputs (spec 10-run-records.md §5).
Freezing validates the cases and sorts them by id in code-point order (only
the outer list; nothing inside a case is touched); the frozen document is the
canonical form and :func:`case_set_digest` its digest, so the digest does not
depend on the order cases were supplied in. :func:`validate_run_case_set`
checks that a run covers exactly the planned cases (outputs, scores, errors
and context are ignored, so errored records still count as members).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sealeval._io import publish_exclusive
from sealeval._validate import (
    JsonValue,
    check_closed,
    check_string_map,
    check_text,
    freeze_json,
    rebased,
    thaw_json,
)
from sealeval.canonical import DecodeLimits, decode, digest_bytes, frozen_canonical, is_digest
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.run import UNLIMITED, Limits, Run

__all__ = [
    "CASE_SET_FORMAT",
    "Case",
    "CaseSet",
    "case_set_digest",
    "case_set_from_document",
    "freeze_case_set",
    "parse_case_set",
    "validate_run_case_set",
    "write_case_set",
]

CASE_SET_FORMAT: Final = "invarlock/evaluation-case-set-v1"
_CASE_MEMBERS: Final = frozenset({"id", "input", "expected", "metadata"})


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Case:
    """One planned case: ``{id: text128, input, expected, metadata}`` (closed)."""

    id: str
    input: JsonValue
    expected: JsonValue
    metadata: Mapping[str, str]

    def __post_init__(self) -> None:
        """Validate and freeze the members."""
        check_text(self.id, "case.id", error=CapturedRunError)
        object.__setattr__(
            self, "input", freeze_json(self.input, "case.input", error=CapturedRunError)
        )
        object.__setattr__(
            self, "expected", freeze_json(self.expected, "case.expected", error=CapturedRunError)
        )
        object.__setattr__(
            self,
            "metadata",
            check_string_map(self.metadata, "case.metadata", error=CapturedRunError),
        )

    def __repr__(self) -> str:
        """Never show ids or values."""
        return "Case(...)"

    def __eq__(self, other: object) -> bool:
        """Compare canonical bytes."""
        if not isinstance(other, Case):
            return NotImplemented
        return frozen_canonical(self._document(), error=CapturedRunError) == frozen_canonical(
            other._document(), error=CapturedRunError
        )

    __hash__ = None  # type: ignore[assignment]

    def _document(self) -> dict[str, Any]:
        return {
            "expected": self.expected,
            "id": self.id,
            "input": self.input,
            "metadata": self.metadata,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain wire object."""
        return thaw_json(self._document())  # type: ignore[no-any-return]

    @classmethod
    def from_document(cls, document: object) -> Case:
        """Build from a parsed case object (exactly the four members)."""
        if isinstance(document, Case):
            return document
        doc = check_closed(document, "case", _CASE_MEMBERS, error=CapturedRunError)
        return cls(
            id=doc["id"], input=doc["input"], expected=doc["expected"], metadata=doc["metadata"]
        )

    @classmethod
    def _trusted(
        cls,
        record_id: str,
        input_value: JsonValue,
        expected: JsonValue,
        metadata: Mapping[str, str],
    ) -> Case:
        """Build from parts of an already validated record, without re-checking them."""
        case = object.__new__(cls)
        object.__setattr__(case, "id", record_id)
        object.__setattr__(case, "input", input_value)
        object.__setattr__(case, "expected", expected)
        object.__setattr__(case, "metadata", metadata)
        return case


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CaseSet:
    """A frozen case set: unique ids, sorted by id in code-point order.

    Construction sorts the cases, refuses duplicates and computes
    :attr:`digest` over the canonical frozen document (``format`` included).
    """

    cases: tuple[Case, ...]
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        """Sort, check ids, digest."""
        cases = self.cases
        if isinstance(cases, str | bytes | Mapping) or not isinstance(cases, Iterable):
            raise CapturedRunError("invalid_type", "cases")
        for case in cases:
            if not isinstance(case, Case):
                raise CapturedRunError("invalid_type", "cases")
        ordered = tuple(sorted(cases, key=lambda case: case.id))
        if not ordered:
            raise CapturedRunError("no_cases", "cases")
        for position in range(1, len(ordered)):
            if ordered[position].id == ordered[position - 1].id:
                raise CapturedRunError("duplicate_id", "cases")
        object.__setattr__(self, "cases", ordered)
        object.__setattr__(self, "digest", digest_bytes(self.to_canonical()))

    def __repr__(self) -> str:
        """Show the case count and the digest only."""
        return f"CaseSet(cases={len(self.cases)}, digest={self.digest!r})"

    def __eq__(self, other: object) -> bool:
        """Compare by digest."""
        if not isinstance(other, CaseSet):
            return NotImplemented
        return self.digest == other.digest

    def __hash__(self) -> int:
        """Hash by digest."""
        return hash(self.digest)

    def __len__(self) -> int:
        """Return the number of cases."""
        return len(self.cases)

    @property
    def ids(self) -> tuple[str, ...]:
        """Case ids in frozen (code-point) order."""
        return tuple(case.id for case in self.cases)

    def _document(self) -> dict[str, Any]:
        return {"cases": [case._document() for case in self.cases], "format": CASE_SET_FORMAT}

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain frozen document."""
        return thaw_json(self._document())  # type: ignore[no-any-return]

    def to_canonical(self) -> bytes:
        """Return the canonical bytes of the frozen document (final LF included)."""
        return frozen_canonical(self._document(), error=CapturedRunError)


def freeze_case_set(
    cases: Iterable[Case | Mapping[str, Any]], *, limits: Limits = UNLIMITED
) -> CaseSet:
    """Validate planned cases and freeze them (sorted by id).

    Args:
        cases: :class:`Case` objects or objects with exactly ``id``, ``input``,
            ``expected`` and ``metadata``.
        limits: ``limits.max_records`` caps the case count (none by default;
            :data:`~sealeval.captured.run.INVARLOCK_LIMITS` gives 50,000).

    Raises:
        CapturedRunError: ``invalid_type``, ``no_cases``, ``too_many_cases``,
            a case's member refusal (field ``cases[<position>].<member>``), or
            ``duplicate_id``.
    """
    if isinstance(cases, str | bytes | Mapping) or not isinstance(cases, Iterable):
        raise CapturedRunError("invalid_type", "cases")
    items = list(cases)
    limits.check_count(len(items), cases=True, field="cases")
    built: list[Case] = []
    for position, item in enumerate(items):
        with rebased("case", f"cases[{position}]", error=CapturedRunError):
            built.append(Case.from_document(item))
    return CaseSet(tuple(built))


def case_set_from_document(document: object, *, limits: Limits = UNLIMITED) -> CaseSet:
    """Validate a case-set document ``{format, cases}`` (closed) and freeze it."""
    doc = check_closed(document, "case_set", ("format", "cases"), error=CapturedRunError)
    if doc["format"] != CASE_SET_FORMAT or type(doc["format"]) is not str:
        raise CapturedRunError("invalid_constant", "format")
    if not isinstance(doc["cases"], list | tuple):
        raise CapturedRunError("invalid_type", "cases")
    return freeze_case_set(doc["cases"], limits=limits)


def parse_case_set(data: bytes | bytearray | memoryview, *, limits: Limits = UNLIMITED) -> CaseSet:
    """Strictly decode a case-set document and freeze it.

    Raises:
        CanonicalError: the bytes are not strict JSON.
        CapturedRunError: the document is not a valid case set.
    """
    document = decode(data, limits=DecodeLimits(max_bytes=limits.max_file_bytes))
    return case_set_from_document(document, limits=limits)


def case_set_digest(cases: CaseSet | Iterable[Case | Mapping[str, Any]]) -> str:
    """Return the digest of the frozen case set (independent of the input order)."""
    if isinstance(cases, CaseSet):
        return cases.digest
    return freeze_case_set(cases).digest


def case_set_of_run(run: Run) -> CaseSet:
    """Return the case set a run covers: ``{id, input, expected, metadata}`` of each record.

    ``input`` is the record's (possibly projected) ``input``, as stored.
    """
    if not isinstance(run, Run):
        raise CapturedRunError("invalid_type", "run")
    return CaseSet(
        tuple(
            Case._trusted(record.id, record.input, record.expected, record.metadata)
            for record in run.records
        )
    )


def validate_run_case_set(run: Run, expected_digest: str) -> None:
    """Check that a run covers exactly the planned case set.

    Raises:
        CapturedRunError: ``invalid_digest`` (``expected_case_set_digest`` is
            not a lowercase ``sha256:`` digest), ``invalid_type`` (not a
            :class:`~sealeval.captured.run.Run`), ``case_set_mismatch``
            (missing or extra records, or a changed input / expected /
            metadata).
    """
    if not is_digest(expected_digest):
        raise CapturedRunError("invalid_digest", "expected_case_set_digest")
    if case_set_of_run(run).digest != expected_digest:
        raise CapturedRunError("case_set_mismatch", "run")


def write_case_set(case_set: CaseSet, destination: str | os.PathLike[str]) -> str:
    """Write the frozen case set's canonical bytes (no clobber, mode 0600); return its digest.

    Raises:
        OutputError: ``output_exists``, ``output_parent_missing``,
            ``output_unwritable``.
    """
    if not isinstance(case_set, CaseSet):
        raise CapturedRunError("invalid_type", "case_set")
    publish_exclusive(destination, case_set.to_canonical(), mode=0o600)
    return case_set.digest
