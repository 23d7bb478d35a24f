"""Captured evaluation runs (``invarlock/evaluation-run-v1``): records, runs, digests, I/O.

A run is the normalized, hashable form of one evaluator's results (spec
10-run-records.md): a header (``source``, ``run_id``, ``artifact_digest`` or a
hosted ``service_identity``, ``source_digest``, ``score_provenance``) and an
ordered, non-empty list of records. Every type here validates itself once on
construction and is immutable afterwards (tuples, read-only mappings, frozen
JSON values), so code that receives a :class:`Run` never re-validates it.

Entry points:

* :func:`make_run` — build a run from caller records (make_run semantics:
  defaults for ``scores``/``metadata``/``error``/``context``, closed members).
* :func:`run_from_document` / :func:`parse_run` / :func:`read_run` — a run
  document (parsed value / strict JSON bytes / file), validated once.
* :func:`run_digest` — ``digest(run)``; computed once, at construction.
* :func:`write_run` — canonical bytes, atomic no-clobber publication, mode 0600.
* :class:`RunEncoder`, :class:`RunWriter` — build a canonical run record by
  record while hashing it; memory does not grow with the text already written.
  Plain ``dict`` records take a fast path (:func:`plain_record_bytes`) with
  the same bytes and refusals as :class:`Record`.
* :class:`RunReader` — stream the records of a canonical run file.
* :class:`InputProjection`, :func:`project_record` — JSON-pointer input
  projections with their replayable binding in ``context.input_projection``.

Record count and size are uncapped unless a :class:`Limits` says otherwise;
:data:`INVARLOCK_LIMITS` is the reference's 50,000-record / 128 MiB envelope,
to be used for documents meant for invarlock.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import gc
import hashlib
import json
import os
import re
import secrets
import stat
import sys
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from sealeval.canonical import DecodeLimits, decode, digest_invarlock
from sealeval.captured.errors import (
    EMPTY,
    MAX_LONG_TEXT,
    MAX_MEMBERS,
    MAX_SHORT_TEXT,
    MAX_VALUE_DEPTH,
    CapturedRunError,
    JsonValue,
    check_digest,
    check_members,
    check_string_map,
    check_text,
    fail,
    freeze_json,
    frozen_canonical,
    frozen_digest,
    plain_canonical,
    plain_json,
    rebased,
    shared_string_map,
    thaw_json,
)
from sealeval.captured.likelihood import (
    LikelihoodFacts,
    Source,
    check_bound_facts,
    check_input,
    check_reference,
    check_service,
    check_source,
    check_tail,
    facts_from,
)
from sealeval.captured.service_identity import ServiceIdentity, validate_service_identity
from sealeval.errors import CanonicalError, OutputError

__all__ = [
    "COMPAT_MAX_BYTES",
    "COMPAT_MAX_RECORDS",
    "INVARLOCK_LIMITS",
    "PROJECTION_KIND",
    "PROVENANCE_KINDS",
    "RECORD_MEMBERS",
    "RUN_FORMAT",
    "STREAM_MIN_BYTES",
    "UNLIMITED",
    "InputProjection",
    "Limits",
    "ProjectionBinding",
    "Record",
    "Run",
    "RunEncoder",
    "RunHeader",
    "RunReader",
    "RunSummary",
    "RunWriter",
    "ScoreProvenance",
    "make_run",
    "parse_run",
    "plain_record_bytes",
    "project_record",
    "read_canonical_run",
    "read_run",
    "run_digest",
    "run_from_decoded",
    "run_from_document",
    "write_run",
]

RUN_FORMAT: Final = "invarlock/evaluation-run-v1"
#: Allowed ``score_provenance[*].kind`` values.
PROVENANCE_KINDS: Final = ("judge", "human", "measurement", "external_metric")
#: The nine member names a record may have (``likelihood`` is optional).
RECORD_MEMBERS: Final = (
    "id",
    "input",
    "expected",
    "output",
    "scores",
    "metadata",
    "error",
    "context",
    "likelihood",
)
#: The only input projection kind.
PROJECTION_KIND: Final = "json-pointer"
#: Longest input projection pointer, in characters.
MAX_POINTER_LENGTH: Final = 4096
#: invarlock's records-per-run / cases-per-case-set cap.
COMPAT_MAX_RECORDS: Final = 50_000
#: invarlock's run file / canonical run size cap, in bytes.
COMPAT_MAX_BYTES: Final = 134_217_728

_RUN_REQUIRED: Final = frozenset(
    {
        "format",
        "source",
        "run_id",
        "artifact_digest",
        "source_digest",
        "score_provenance",
        "records",
    }
)
_TAIL_REQUIRED: Final = frozenset({"run_id", "score_provenance", "source", "source_digest"})
_RECORD_REQUIRED: Final = frozenset(RECORD_MEMBERS[:8])
_RECORD_ALL: Final = frozenset(RECORD_MEMBERS)
_RECORD_NEEDED: Final = ("id", "input", "expected", "output")
_PROVENANCE_MEMBERS: Final = frozenset({"kind", "source", "version", "unit", "rubric_digest"})
_BINDING_MEMBERS: Final = frozenset(
    {"configuration", "configuration_digest", "source", "source_digest"}
)
_INDEX_TOKEN: Final = re.compile(r"0|[1-9][0-9]*")
_BAD_TILDE: Final = re.compile(r"~(?![01])")


def _empty() -> Mapping[str, Any]:
    return EMPTY


# ---------------------------------------------------------------------------
# Limits


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits applied where runs, case sets and exports enter or leave.

    Attributes:
        max_records: most records per run / cases per case set / entries of an
            export payload array / expected ids; ``None`` means no cap.
        max_canonical_bytes: largest canonical run size in bytes (final LF
            included); ``None`` means no cap.
        max_file_bytes: largest file or byte string read into memory at once
            (:func:`read_run`, :func:`parse_run`, export files). Streaming
            (:class:`RunReader`) is not bound by it.
    """

    max_records: int | None = None
    max_canonical_bytes: int | None = None
    max_file_bytes: int = COMPAT_MAX_BYTES

    def __post_init__(self) -> None:
        """Refuse limits that are not positive ints."""
        for name in ("max_records", "max_canonical_bytes", "max_file_bytes"):
            value = getattr(self, name)
            if value is None and name != "max_file_bytes":
                continue
            if type(value) is not int or value < 1:
                raise ValueError("Limits: every limit must be a positive int or None")

    def check_count(self, count: int, *, cases: bool = False, field: str = "records") -> None:
        """Refuse an empty collection or one above ``max_records``."""
        if count < 1:
            raise fail("no_cases" if cases else "no_records", field)
        if self.max_records is not None and count > self.max_records:
            raise fail("too_many_cases" if cases else "too_many_records", field)

    def check_size(self, size: int, field: str = "run") -> None:
        """Refuse a canonical size above ``max_canonical_bytes``."""
        if self.max_canonical_bytes is not None and size > self.max_canonical_bytes:
            raise fail("too_large", field)


#: No record cap, no canonical size cap (files read into memory: 128 MiB).
UNLIMITED: Final = Limits()
#: The reference's envelope: 1-50,000 records, 128 MiB canonical and file size.
INVARLOCK_LIMITS: Final = Limits(
    max_records=COMPAT_MAX_RECORDS, max_canonical_bytes=COMPAT_MAX_BYTES
)


# ---------------------------------------------------------------------------
# Score provenance


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ScoreProvenance:
    """Where a recorded score comes from (closed object, all members on the wire)."""

    kind: str
    source: str
    version: str
    unit: str
    rubric_digest: str | None = None

    def __post_init__(self) -> None:
        """Check the kind, the three text members and the optional rubric digest."""
        if type(self.kind) is not str or self.kind not in PROVENANCE_KINDS:
            raise fail("invalid_constant", "score_provenance.kind")
        for name in ("source", "version", "unit"):
            check_text(getattr(self, name), f"score_provenance.{name}")
        check_digest(self.rubric_digest, "score_provenance.rubric_digest", nullable=True)

    def __repr__(self) -> str:
        """Show the kind only."""
        return f"ScoreProvenance(kind={self.kind!r})"

    def to_dict(self) -> dict[str, str | None]:
        """Return the wire object."""
        return {
            "kind": self.kind,
            "source": self.source,
            "version": self.version,
            "unit": self.unit,
            "rubric_digest": self.rubric_digest,
        }

    @classmethod
    def from_document(cls, document: object) -> ScoreProvenance:
        """Build from a parsed provenance object (closed, five members)."""
        if isinstance(document, ScoreProvenance):
            return document
        doc = check_members(document, "score_provenance", _PROVENANCE_MEMBERS)
        return cls(
            kind=doc["kind"],
            source=doc["source"],
            version=doc["version"],
            unit=doc["unit"],
            rubric_digest=doc["rubric_digest"],
        )


def _provenance_map(value: object) -> Mapping[str, ScoreProvenance]:
    if not isinstance(value, Mapping):
        raise fail("invalid_type", "score_provenance")
    if len(value) > MAX_MEMBERS:
        raise fail("too_many_members", "score_provenance")
    frozen: dict[str, ScoreProvenance] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise fail("invalid_json_value", "score_provenance")
        freeze_json(key, "score_provenance")
        frozen[key] = ScoreProvenance.from_document(item)
    return types.MappingProxyType(frozen)


# ---------------------------------------------------------------------------
# Input projection


@dataclass(frozen=True, slots=True, repr=False)
class InputProjection:
    """``{kind: "json-pointer", pointer}``: select the record's text input.

    The pointer (RFC 6901, ≤4096 characters) is resolved against
    ``{input: <record input>, context: <record context>}``; its first token
    must be ``input`` or ``context`` and the selected value must be a string.
    """

    pointer: str
    kind: str = PROJECTION_KIND
    tokens: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        """Check the kind and the pointer syntax; decode the tokens."""
        if self.kind != PROJECTION_KIND or type(self.kind) is not str:
            raise fail("invalid_projection", "input_projection.kind")
        pointer = self.pointer
        if (
            type(pointer) is not str
            or len(pointer) > MAX_POINTER_LENGTH
            or not pointer.startswith("/")
            or _BAD_TILDE.search(pointer) is not None
        ):
            raise fail("invalid_projection", "input_projection.pointer")
        freeze_json(pointer, "input_projection.pointer")
        tokens = tuple(
            token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")
        )
        if tokens[0] not in ("input", "context"):
            raise fail("projection_root", "input_projection.pointer")
        object.__setattr__(self, "tokens", tokens)

    def __repr__(self) -> str:
        """Show the class only."""
        return "InputProjection(...)"

    def to_dict(self) -> dict[str, str]:
        """Return the configuration object ``{kind, pointer}``."""
        return {"kind": self.kind, "pointer": self.pointer}

    @property
    def digest(self) -> str:
        """``digest({kind, pointer})`` — the binding's ``configuration_digest``."""
        return digest_invarlock(self.to_dict())

    @classmethod
    def from_document(cls, document: object) -> InputProjection:
        """Build from ``{kind, pointer}`` (exactly these members); projections pass through."""
        if isinstance(document, InputProjection):
            return document
        if not isinstance(document, Mapping) or set(document) != {"kind", "pointer"}:
            raise fail("invalid_projection", "input_projection")
        return cls(pointer=document["pointer"], kind=document["kind"])


def _resolve(projection: InputProjection, input_value: JsonValue, context: JsonValue) -> str:
    """Resolve the pointer against ``{input, context}``; the result must be text."""
    tokens = projection.tokens
    current: JsonValue = input_value if tokens[0] == "input" else context
    for token in tokens[1:]:
        if isinstance(current, Mapping):
            if token not in current:
                raise fail("projection_unresolved", "input_projection.pointer")
            current = current[token]
        elif isinstance(current, tuple):
            if _INDEX_TOKEN.fullmatch(token) is None or int(token) >= len(current):
                raise fail("projection_unresolved", "input_projection.pointer")
            current = current[int(token)]
        else:
            raise fail("projection_unresolved", "input_projection.pointer")
    if type(current) is not str:
        raise fail("projection_not_text", "input_projection.pointer")
    return current


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ProjectionBinding:
    """The replayed ``context.input_projection`` of a projected record.

    Attributes:
        configuration: the projection that selected the record's input.
        configuration_digest: ``digest(configuration)``.
        source_input: the record's original input.
        source_context: the record's original context.
        source_digest: ``digest({input, context})`` of the originals.
    """

    configuration: InputProjection
    configuration_digest: str
    source_input: JsonValue
    source_context: JsonValue
    source_digest: str

    def __repr__(self) -> str:
        """Show the class only."""
        return "ProjectionBinding(...)"

    @property
    def source_input_digest(self) -> str:
        """``digest(source.input)``, used by the comparison pairing rule."""
        return digest_invarlock(self.source_input)


def _replay(record_input: JsonValue, context: Mapping[str, JsonValue]) -> ProjectionBinding:
    """Replay a retained binding (spec 11 §10); errors are rooted at the binding."""
    where = "record.context.input_projection"
    binding = context["input_projection"]
    if not isinstance(binding, Mapping) or set(binding) != _BINDING_MEMBERS:
        raise fail("projection_binding_invalid", where)
    try:
        projection = InputProjection.from_document(binding["configuration"])
    except CapturedRunError:
        raise fail("projection_binding_invalid", f"{where}.configuration") from None
    source = binding["source"]
    if not isinstance(source, Mapping) or set(source) != {"input", "context"}:
        raise fail("projection_binding_invalid", f"{where}.source")
    original_context = source["context"]
    if isinstance(original_context, Mapping) and "input_projection" in original_context:
        raise fail("projection_binding_invalid", f"{where}.source")
    if binding["configuration_digest"] != frozen_digest(binding["configuration"]):
        raise fail("projection_replay_mismatch", f"{where}.configuration_digest")
    if binding["source_digest"] != frozen_digest(source):
        raise fail("projection_replay_mismatch", f"{where}.source_digest")
    try:
        selected = _resolve(projection, source["input"], original_context)
    except CapturedRunError:
        raise fail("projection_replay_mismatch", where) from None
    if type(record_input) is not str or selected != record_input:
        raise fail("projection_replay_mismatch", "record.input")
    rest = {key: value for key, value in context.items() if key != "input_projection"}
    original = original_context if isinstance(original_context, Mapping) else EMPTY
    if frozen_digest(rest) != frozen_digest(original):
        raise fail("projection_replay_mismatch", "record.context")
    return ProjectionBinding(
        configuration=projection,
        configuration_digest=binding["configuration_digest"],
        source_input=source["input"],
        source_context=original_context,
        source_digest=binding["source_digest"],
    )


# ---------------------------------------------------------------------------
# Records


def _refuse_null(document: Mapping[str, Any], member: str, field_name: str) -> None:
    """Refuse an explicit ``null`` for an optional object member (absent is fine)."""
    if member in document and document[member] is None:
        raise fail("invalid_type", field_name)


def _check_scores(value: object) -> Mapping[str, int | float]:
    if not isinstance(value, Mapping):
        raise fail("invalid_type", "record.scores")
    if len(value) > MAX_MEMBERS:
        raise fail("too_many_members", "record.scores")
    frozen: dict[str, int | float] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise fail("invalid_json_value", "record.scores")
        freeze_json(key, "record.scores")
        kind = type(item)
        if kind is int:
            try:
                float(item)
            except OverflowError:
                raise fail("invalid_score", "record.scores") from None
            freeze_json(item, "record.scores")
        elif kind is float:
            try:
                freeze_json(item, "record.scores")
            except CapturedRunError:
                raise fail("invalid_score", "record.scores") from None
        else:
            raise fail("invalid_score", "record.scores")
        frozen[sys.intern(key)] = item
    return types.MappingProxyType(frozen) if frozen else EMPTY


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Record:
    """One captured result (closed object of spec 10 §1.1), validated and immutable.

    ``input``, ``expected``, ``output`` and ``context`` are frozen JSON values
    (``None`` is kept: a null output is a result, never dropped). ``error`` is
    ``None`` or a string; any string, even ``""``, marks the record errored.
    If ``context`` carries ``input_projection`` the binding is replayed on
    construction and exposed as :attr:`projection`.
    """

    id: str
    input: JsonValue
    expected: JsonValue
    output: JsonValue
    scores: Mapping[str, int | float] = field(default_factory=_empty)
    metadata: Mapping[str, str] = field(default_factory=_empty)
    error: str | None = None
    context: JsonValue = field(default_factory=_empty)
    likelihood: LikelihoodFacts | None = None
    projection: ProjectionBinding | None = field(init=False)

    def __post_init__(self) -> None:
        """Validate every member; freeze the JSON values; replay a projection binding."""
        check_text(self.id, "record.id")
        for name in ("input", "expected", "output", "context"):
            object.__setattr__(self, name, freeze_json(getattr(self, name), f"record.{name}"))
        object.__setattr__(self, "scores", _check_scores(self.scores))
        object.__setattr__(self, "metadata", check_string_map(self.metadata, "record.metadata"))
        if self.error is not None:
            check_text(
                self.error, "record.error", max_length=MAX_LONG_TEXT, min_length=0, controls=True
            )
        if self.likelihood is not None:
            object.__setattr__(self, "likelihood", facts_from(self.likelihood, "record.likelihood"))
        context = self.context
        binding = None
        if isinstance(context, Mapping) and "input_projection" in context:
            binding = _replay(self.input, context)
        object.__setattr__(self, "projection", binding)

    def __repr__(self) -> str:
        """Never show ids or captured values."""
        return "Record(...)"

    def __eq__(self, other: object) -> bool:
        """Compare canonical bytes (``1`` differs from ``1.0``)."""
        if not isinstance(other, Record):
            return NotImplemented
        return self.to_canonical() == other.to_canonical()

    __hash__ = None  # type: ignore[assignment]

    @property
    def errored(self) -> bool:
        """Whether ``error`` is set (any string, including ``""``)."""
        return self.error is not None

    @property
    def captured_input(self) -> JsonValue:
        """The input as captured: the pre-projection original for a projected record."""
        return self.projection.source_input if self.projection is not None else self.input

    def _document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "context": self.context,
            "error": self.error,
            "expected": self.expected,
            "id": self.id,
            "input": self.input,
            "metadata": self.metadata,
            "output": self.output,
            "scores": self.scores,
        }
        if self.likelihood is not None:
            document["likelihood"] = self.likelihood.to_dict()
        return document

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain wire object (deep copy)."""
        return thaw_json(self._document())  # type: ignore[no-any-return]

    def to_canonical(self) -> bytes:
        """Return the record's own canonical bytes (final LF included)."""
        return frozen_canonical(self._document())

    @classmethod
    def _accepted(cls, record: dict[str, Any]) -> Record:
        """Build the record of a plain ``dict`` that :func:`plain_record_bytes` accepted.

        Its checks passed, so the values are only frozen (the same frozen
        values the checked path makes; pinned by a test).
        """
        built = object.__new__(cls)
        put = object.__setattr__
        put(built, "id", record["id"])
        put(built, "input", _freeze_plain(record["input"]))
        put(built, "expected", _freeze_plain(record["expected"]))
        put(built, "output", _freeze_plain(record["output"]))
        put(built, "scores", _freeze_plain(record.get("scores", EMPTY)))
        put(built, "metadata", shared_string_map(record["metadata"]))
        put(built, "error", record.get("error"))
        put(built, "context", _freeze_plain(record.get("context", EMPTY)))
        put(built, "likelihood", None)
        put(built, "projection", None)
        return built

    @classmethod
    def from_document(cls, document: object) -> Record:
        """Build from a record object of a run document (all eight members required)."""
        doc = check_members(document, "record", _RECORD_REQUIRED, ("likelihood",))
        _refuse_null(doc, "likelihood", "record.likelihood")
        return cls(
            id=doc["id"],
            input=doc["input"],
            expected=doc["expected"],
            output=doc["output"],
            scores=doc["scores"],
            metadata=doc["metadata"],
            error=doc["error"],
            context=doc["context"],
            likelihood=doc.get("likelihood"),
        )

    @classmethod
    def from_mapping(cls, mapping: object) -> Record:
        """Build from caller fields with make_run semantics (spec 10 §1.2).

        Only the nine record member names are accepted (``unknown_field``
        otherwise: map native fields explicitly); ``id``, ``input``,
        ``expected`` and ``output`` are required; ``scores``/``metadata``
        default to ``{}``, ``error`` to ``None``, ``context`` to ``{}``.
        """
        if isinstance(mapping, Record):
            return mapping
        if not isinstance(mapping, Mapping):
            raise fail("invalid_type", "record")
        for key in mapping:
            if key not in _RECORD_ALL:
                raise fail("unknown_field", "record")
        for key in _RECORD_NEEDED:
            if key not in mapping:
                raise fail("missing_field", "record")
        _refuse_null(mapping, "likelihood", "record.likelihood")
        return cls(
            id=mapping["id"],
            input=mapping["input"],
            expected=mapping["expected"],
            output=mapping["output"],
            scores=mapping.get("scores", EMPTY),
            metadata=mapping.get("metadata", EMPTY),
            error=mapping.get("error"),
            context=mapping.get("context", EMPTY),
            likelihood=mapping.get("likelihood"),
        )


def project_record(record: Record, projection: InputProjection | Mapping[str, Any]) -> Record:
    """Return ``record`` with its input replaced by the projected text.

    The new record's ``context`` keeps the original members (if it was an
    object) plus ``input_projection = {configuration, configuration_digest,
    source: {input, context}, source_digest}``, which every later validation
    replays.

    Raises:
        CapturedRunError: ``invalid_projection``, ``projection_root``,
            ``projection_binding_invalid`` (context already has
            ``input_projection``), ``projection_unresolved``,
            ``projection_not_text``.
    """
    projection = InputProjection.from_document(projection)
    if not isinstance(record, Record):
        raise fail("invalid_type", "record")
    context = record.context
    if isinstance(context, Mapping) and "input_projection" in context:
        raise fail("projection_binding_invalid", "record.context.input_projection")
    selected = _resolve(projection, record.input, context)
    configuration = projection.to_dict()
    source = {"input": record.input, "context": context}
    binding = {
        "configuration": configuration,
        "configuration_digest": frozen_digest(configuration),
        "source": source,
        "source_digest": frozen_digest(source),
    }
    new_context: dict[str, Any] = dict(context) if isinstance(context, Mapping) else {}
    new_context["input_projection"] = binding
    return Record(
        id=record.id,
        input=selected,
        expected=record.expected,
        output=record.output,
        scores=record.scores,
        metadata=record.metadata,
        error=record.error,
        context=new_context,
        likelihood=record.likelihood,
    )


def _record_chunk(record: Record) -> bytes:
    """Return the record's bytes inside a canonical run (canonical bytes without the LF)."""
    return record.to_canonical()[:-1]


# ---------------------------------------------------------------------------
# The plain-record fast path

_PLAIN_MEMBERS: Final = frozenset(RECORD_MEMBERS[:8])
_PLAIN_NEEDED: Final = frozenset(_RECORD_NEEDED)
_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")
# A record score int is refused when float() overflows; below 2**1023 it never does.
_SCORE_INT_BITS: Final = 1023
# Integers of more than 4300 digits are refused whatever the host setting; the C
# encoder refuses them by itself only while the host limit is on and at most that.
_MAX_INT_DIGITS: Final = 4300
_get_int_digits: Final = getattr(sys, "get_int_max_str_digits", lambda: _MAX_INT_DIGITS)


#: The default of an absent ``scores``/``metadata``/``context`` on the fast path
#: (only ever read and encoded, never handed out).
_NO_MEMBERS: Final[dict[str, Any]] = {}


#: A record object of a run document has exactly these many members (no likelihood).
_DOCUMENT_MEMBERS: Final = 8


def _freeze_plain(value: Any) -> Any:
    """Freeze a plain JSON value already shown valid (no checks): what ``freeze_json`` returns."""
    kind = type(value)
    if kind is dict:
        if not value:
            return EMPTY
        return types.MappingProxyType(
            {sys.intern(key): _freeze_plain(child) for key, child in value.items()}
        )
    if kind is list or kind is tuple:
        return tuple([_freeze_plain(child) for child in value])
    return value


def _plain_scores(scores: object) -> bool:
    """Whether plain ``scores`` pass Record's rules (finiteness: left to the encoder)."""
    if type(scores) is not dict or len(scores) > MAX_MEMBERS:
        return False
    for key, value in scores.items():
        kind = type(value)
        if type(key) is not str or (
            kind is not float and (kind is not int or value.bit_length() > _SCORE_INT_BITS)
        ):
            return False
    return True


def _plain_members(record: dict[str, Any]) -> bool:
    """Whether a plain record's members, id, scores, metadata and error pass Record's rules."""
    if not (record.keys() <= _PLAIN_MEMBERS and record.keys() >= _PLAIN_NEEDED):
        return False  # unknown_field, missing_field, or likelihood (the Record path)
    record_id = record["id"]
    if (
        type(record_id) is not str
        or not 0 < len(record_id) <= MAX_SHORT_TEXT
        or _CONTROL_CHARS.search(record_id) is not None
    ):
        return False
    if not _plain_scores(record.get("scores", _NO_MEMBERS)):
        return False
    metadata = record.get("metadata", _NO_MEMBERS)
    if type(metadata) is not dict or len(metadata) > MAX_MEMBERS:
        return False
    for key, value in metadata.items():
        if type(key) is not str or type(value) is not str or len(value) > MAX_LONG_TEXT:
            return False
    error = record.get("error")
    return error is None or (type(error) is str and len(error) <= MAX_LONG_TEXT)


def _plain_within(value: object, max_depth: int, trusted: set[int], height: int) -> bool:
    """:func:`plain_json`, but a container in ``trusted`` (``height`` deep) is not walked."""
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return kind in _PLAIN_SCALARS
    if id(value) in trusted and height <= max_depth:
        return True
    if not max_depth:
        return False
    max_depth -= 1
    children: Iterable[Any] = value  # type: ignore[assignment]
    if kind is dict:
        mapping: dict[Any, Any] = value  # type: ignore[assignment]
        if not all(type(key) is str for key in mapping):
            return False
        children = mapping.values()
    for child in children:
        if type(child) not in _PLAIN_SCALARS and not _plain_within(
            child, max_depth, trusted, height
        ):
            return False
    return True


def _plain_values(
    record: dict[str, Any],
    values: tuple[Any, ...],
    decoded: tuple[dict[str, Any], int] | None,
) -> bool:
    """Whether every value has the plain shape; see :func:`plain_record_bytes`."""
    try:
        if decoded is None:
            for value in values:
                if type(value) not in _PLAIN_SCALARS and not plain_json(value):
                    return False
        elif decoded[0] is record:
            # the record is the decoded row: its values are the row's own members
            # (or the empty default), nested less deep than the row
            return True
        else:
            row, height = decoded
            trusted = {id(row)}
            for item in row.values():
                if type(item) not in _PLAIN_SCALARS:
                    trusted.add(id(item))
            for value in values:
                if type(value) not in _PLAIN_SCALARS and not _plain_within(
                    value, MAX_VALUE_DEPTH, trusted, height
                ):
                    return False
    except RecursionError:  # a host recursion limit below the depth limit
        return False
    return True


def plain_record_bytes(
    record: dict[str, Any], *, decoded: tuple[dict[str, Any], int] | None = None
) -> tuple[str, bytes] | None:
    """Return ``(id, canonical bytes without the LF)`` of a plain record, or ``None``.

    The fast path of :meth:`RunEncoder.add` for records given as a plain
    ``dict`` of plain JSON values (what importers make from ``json.loads``):
    one :func:`~sealeval.captured.errors.plain_json` walk per value, the
    text, score and metadata rules of :class:`Record`, then one call of the C
    JSON encoder — no frozen copy, no per-mapping ``default`` hook. It only
    *accepts*: ``None`` means "not shown valid here" (a rule broken, or a
    record outside the fast path: ``likelihood``, a retained
    ``context.input_projection``, read-only mappings, subclasses, integers
    while the host disables its digit limit) and the caller builds a
    :class:`Record`, which accepts or names the refusal exactly as before.
    So the fast path never changes a refusal, and the bytes it returns equal
    ``Record.from_mapping(record).to_canonical()[:-1]`` (pinned by a
    property test). Never raises.

    ``decoded`` is ``(row, height)`` when the record was mapped from ``row``,
    an object exactly as the strict JSON decoder returned it (exact JSON types,
    ``str`` keys, nested at most ``height`` deep) and not modified since (see
    ``LinesImporter.parallel_safe``): the row and its members are then not
    walked again where they appear in the record (within the depth limit).
    """
    if type(record) is not dict or not _plain_members(record):
        return None
    context = record.get("context", _NO_MEMBERS)
    if type(context) is dict and "input_projection" in context:
        return None  # the binding is replayed by Record
    input_value = record["input"]
    expected = record["expected"]
    output = record["output"]
    if not _plain_values(record, (input_value, expected, output, context), decoded):
        return None
    if not 0 < _get_int_digits() <= _MAX_INT_DIGITS:
        return None
    record_id: str = record["id"]
    data = plain_canonical(
        {
            "context": context,
            "error": record.get("error"),
            "expected": expected,
            "id": record_id,
            "input": input_value,
            "metadata": record.get("metadata", _NO_MEMBERS),
            "output": output,
            "scores": record.get("scores", _NO_MEMBERS),
        }
    )
    return None if data is None else (record_id, data)


def _check_record_likelihood(record: Record, header: RunHeader, where: str) -> None:
    if record.likelihood is not None:
        check_bound_facts(
            record.likelihood,
            input_value=record.captured_input,
            expected=record.expected,
            source=header.source,
            artifact_digest=header.artifact_digest,
            service_identity=header.service_identity,
            field=f"{where}.likelihood",
        )


# ---------------------------------------------------------------------------
# Runs


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class RunHeader:
    """Every run member except ``records`` (and the constant ``format``).

    Exactly one of ``artifact_digest`` and ``service_identity`` is set: a
    hosted run has ``artifact_digest=None``; any other run must name the
    artifact digest it is attributed to.
    """

    source: Source
    run_id: str
    artifact_digest: str | None
    source_digest: str | None = None
    score_provenance: Mapping[str, ScoreProvenance] = field(default_factory=_empty)
    service_identity: ServiceIdentity | None = None

    def __post_init__(self) -> None:
        """Validate the members and the artifact / service-identity coupling."""
        if not isinstance(self.source, Source | Mapping):
            raise fail("invalid_type", "source")
        object.__setattr__(self, "source", Source.from_document(self.source))
        check_text(self.run_id, "run_id")
        check_digest(self.artifact_digest, "artifact_digest", nullable=True)
        check_digest(self.source_digest, "source_digest", nullable=True)
        object.__setattr__(self, "score_provenance", _provenance_map(self.score_provenance))
        if self.service_identity is not None:
            object.__setattr__(
                self, "service_identity", validate_service_identity(self.service_identity)
            )
            if self.artifact_digest is not None:
                raise fail("artifact_digest_forbidden", "artifact_digest")
        elif self.artifact_digest is None:
            raise fail("artifact_digest_required", "artifact_digest")

    def __repr__(self) -> str:
        """Never show identities."""
        return "RunHeader(...)"

    @property
    def evaluated_subject_digest(self) -> str:
        """``digest(service_identity)`` when hosted, else ``artifact_digest``."""
        if self.service_identity is not None:
            return self.service_identity.digest
        assert self.artifact_digest is not None
        return self.artifact_digest

    def _tail(self) -> dict[str, Any]:
        tail: dict[str, Any] = {
            "run_id": self.run_id,
            "score_provenance": {
                key: value.to_dict() for key, value in self.score_provenance.items()
            },
            "source": self.source.to_dict(),
            "source_digest": self.source_digest,
        }
        if self.service_identity is not None:
            tail["service_identity"] = self.service_identity.to_dict()
        return tail

    def to_dict(self) -> dict[str, Any]:
        """Return the header members as a plain wire object (no ``records``)."""
        return {"artifact_digest": self.artifact_digest, "format": RUN_FORMAT, **self._tail()}

    def canonical_parts(self) -> tuple[bytes, bytes]:
        """Return ``(prefix, suffix)`` of the canonical run around its record list.

        Canonical key order is ``artifact_digest, format, records, run_id,
        score_provenance, [service_identity,] source, source_digest``, so a run's
        canonical bytes are ``prefix + b",".join(record bytes) + suffix`` where
        ``prefix`` ends with ``"records":[`` and ``suffix`` starts with ``],``
        and ends with the final LF.
        """
        head = frozen_canonical({"artifact_digest": self.artifact_digest, "format": RUN_FORMAT})
        tail = frozen_canonical(self._tail())
        return head[:-2] + b',"records":[', b"]," + tail[1:]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """What a streaming write or read established about a run."""

    run_digest: str
    record_count: int
    canonical_size: int


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Run:
    """A validated, immutable evaluation run.

    Construction performs the run-level checks (at least one record, every
    record's likelihood facts bound to this run, unique ids) and hashes the
    canonical bytes once: :attr:`digest` is the run digest and
    :attr:`canonical_size` its byte length. Records keep the caller's order.
    Equality and hashing use the digest.
    """

    header: RunHeader
    records: tuple[Record, ...]
    digest: str = field(init=False)
    canonical_size: int = field(init=False)
    index: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        """Check the records against the header and each other; hash once."""
        header = self.header
        if not isinstance(header, RunHeader):
            raise fail("invalid_type", "header")
        records = self.records
        if not isinstance(records, tuple):
            if isinstance(records, str | bytes | Mapping) or not isinstance(records, Iterable):
                raise fail("invalid_type", "records")
            records = tuple(records)
            object.__setattr__(self, "records", records)
        self._check_records()
        hasher = hashlib.sha256()
        size = 0
        for chunk in self.iter_canonical():
            hasher.update(chunk)
            size += len(chunk)
        object.__setattr__(self, "digest", "sha256:" + hasher.hexdigest())
        object.__setattr__(self, "canonical_size", size)

    def _check_records(self) -> None:
        """Run the run-level record checks: typed records, likelihood bindings, unique ids."""
        header = self.header
        records = self.records
        if not records:
            raise fail("no_records", "records")
        for position, record in enumerate(records):
            if not isinstance(record, Record):
                raise fail("invalid_type", f"records[{position}]")
            _check_record_likelihood(record, header, f"records[{position}]")
        index: dict[str, int] = {}
        for position, record in enumerate(records):
            if record.id in index:
                raise fail("duplicate_id", f"records[{position}].id")
            index[record.id] = position
        object.__setattr__(self, "index", types.MappingProxyType(index))

    @classmethod
    def _hashed(cls, header: RunHeader, records: tuple[Record, ...], digest: str, size: int) -> Run:
        """Build a run whose canonical bytes were already hashed record by record.

        Only for callers that encoded exactly :meth:`iter_canonical`'s bytes
        (``run_from_document``'s fast path): every check but the hashing runs.
        """
        run = object.__new__(cls)
        object.__setattr__(run, "header", header)
        object.__setattr__(run, "records", records)
        run._check_records()
        object.__setattr__(run, "digest", digest)
        object.__setattr__(run, "canonical_size", size)
        return run

    def __repr__(self) -> str:
        """Show the record count and the digest only."""
        return f"Run(records={len(self.records)}, digest={self.digest!r})"

    def __eq__(self, other: object) -> bool:
        """Compare by digest."""
        if not isinstance(other, Run):
            return NotImplemented
        return self.digest == other.digest

    def __hash__(self) -> int:
        """Hash by digest."""
        return hash(self.digest)

    def __len__(self) -> int:
        """Return the number of records."""
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        """Iterate the records in stored order."""
        return iter(self.records)

    @property
    def source(self) -> Source:
        """The evaluator that produced the run."""
        return self.header.source

    @property
    def run_id(self) -> str:
        """The run's identifier."""
        return self.header.run_id

    @property
    def artifact_digest(self) -> str | None:
        """The attributed artifact (``None`` for hosted runs)."""
        return self.header.artifact_digest

    @property
    def source_digest(self) -> str | None:
        """SHA-256 of the raw native bytes the run was imported from, or ``None``."""
        return self.header.source_digest

    @property
    def score_provenance(self) -> Mapping[str, ScoreProvenance]:
        """Provenance of recorded scores, by score name."""
        return self.header.score_provenance

    @property
    def service_identity(self) -> ServiceIdentity | None:
        """The hosted-service descriptor, or ``None``."""
        return self.header.service_identity

    @property
    def evaluated_subject_digest(self) -> str:
        """``digest(service_identity)`` when hosted, else ``artifact_digest``."""
        return self.header.evaluated_subject_digest

    @property
    def ids(self) -> tuple[str, ...]:
        """Record ids in stored order."""
        return tuple(self.index)

    def record(self, record_id: str) -> Record:
        """Return the record with this id (``KeyError`` if absent)."""
        return self.records[self.index[record_id]]

    def iter_canonical(self) -> Iterator[bytes]:
        """Yield the canonical bytes in pieces: prefix, each record (with separators), suffix."""
        prefix, suffix = self.header.canonical_parts()
        separator = prefix
        for record in self.records:
            yield separator + _record_chunk(record)
            separator = b","
        yield suffix

    def to_canonical(self) -> bytes:
        """Return the canonical bytes (final LF included); ``sha256`` of them is the digest."""
        return b"".join(self.iter_canonical())

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain wire document."""
        document = self.header.to_dict()
        document["records"] = [record.to_dict() for record in self.records]
        return document


def _indexed(position: int) -> contextlib.AbstractContextManager[None]:
    return rebased("record", f"records[{position}]")


def _build_records(records: object, limits: Limits) -> list[Record]:
    """Count first, then build each record with make_run semantics."""
    if isinstance(records, str | bytes | Mapping) or not isinstance(records, Iterable):
        raise fail("invalid_type", "records")
    if isinstance(records, Sequence):
        limits.check_count(len(records))
    built: list[Record] = []
    for position, item in enumerate(records):
        if limits.max_records is not None and position >= limits.max_records:
            raise fail("too_many_records", "records")
        with _indexed(position):
            built.append(Record.from_mapping(item))
    limits.check_count(len(built))
    return built


def make_run(
    records: Iterable[Record | Mapping[str, Any]],
    *,
    source: Source | Mapping[str, Any],
    run_id: str,
    artifact_digest: str | None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    source_digest: str | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    limits: Limits = UNLIMITED,
) -> Run:
    """Build and validate a run from caller records (spec 10 §1.2).

    Args:
        records: :class:`Record` objects or mappings with at most the nine
            record members (defaults: ``scores={}``, ``metadata={}``,
            ``error=None``, ``context={}``). Order is kept, never sorted.
        source: ``{name, version}`` of the evaluator.
        run_id: the run's identifier (text128).
        artifact_digest: the evaluated artifact, or ``None`` for a hosted run.
        service_identity: the hosted-service descriptor (then
            ``artifact_digest`` must be ``None``).
        source_digest: ``sha256:`` of the raw native bytes, or ``None``.
        score_provenance: provenance per recorded score name.
        input_projection: optional projection applied to every record after
            it is built (:func:`project_record`).
        limits: record-count and canonical-size caps (none by default).

    Raises:
        CapturedRunError: the first refusal; fields name the member
            (``records[<position>].<member>`` for records).
    """
    projection = (
        None if input_projection is None else InputProjection.from_document(input_projection)
    )
    built = _build_records(records, limits)
    header = RunHeader(
        source=source,  # type: ignore[arg-type]
        run_id=run_id,
        artifact_digest=artifact_digest,
        source_digest=source_digest,
        score_provenance=EMPTY if score_provenance is None else score_provenance,  # type: ignore[arg-type]
        service_identity=service_identity,  # type: ignore[arg-type]
    )
    if projection is not None:
        for position, record in enumerate(built):
            with _indexed(position):
                built[position] = project_record(record, projection)
    run = Run(header, tuple(built))
    limits.check_size(run.canonical_size)
    return run


def _header_from(document: Mapping[str, Any], artifact_digest: object) -> RunHeader:
    _refuse_null(document, "service_identity", "service_identity")
    return RunHeader(
        source=document["source"],
        run_id=document["run_id"],
        artifact_digest=artifact_digest,  # type: ignore[arg-type]
        source_digest=document["source_digest"],
        score_provenance=document["score_provenance"],
        service_identity=document.get("service_identity"),
    )


@contextlib.contextmanager
def paused_full_collections() -> Iterator[None]:
    """Suspend full (oldest-generation) garbage collections while a run is built.

    Building a run keeps every record alive, and the collector's full passes
    over every live container, repeated as the heap grows, dominated the time
    (50,000 harness rows through ``load_run``: 12.7 s with them, 8.2 s
    without). Young collections still run, so short-lived cycles are freed as
    usual. The previous thresholds are restored on exit.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0] or 700, thresholds[1] or 10, 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def run_from_document(document: object, *, limits: Limits = UNLIMITED) -> Run:
    """Validate a parsed run document once and return the typed run.

    The document need not have been canonical bytes; every member is
    required except ``service_identity`` (records: all eight members,
    ``likelihood`` optional). A :class:`Run` is returned as is (after the
    limits check).

    Raises:
        CapturedRunError: the first refusal (``too_many_records`` is checked
            before anything else, as the reference does).
    """
    with paused_full_collections():
        return _run_from(document, limits, decoded=False)


def run_from_decoded(document: object, *, limits: Limits = UNLIMITED) -> Run:
    """Validate a decoded run document once and return the typed run.

    :func:`run_from_document` for a document exactly as
    :func:`~sealeval.canonical.decode` returned it (default depth limit, not
    modified since). Such a document holds only exact JSON types within the depth limit, so
    plain records are not walked again before they are encoded; the result
    and every refusal are those of :func:`run_from_document`.
    """
    with paused_full_collections():
        return _run_from(document, limits, decoded=True)


def _run_from(document: object, limits: Limits, *, decoded: bool) -> Run:
    if isinstance(document, Run):
        limits.check_count(len(document.records))
        limits.check_size(document.canonical_size)
        return document
    if not isinstance(document, Mapping):
        raise fail("invalid_type", "run")
    records = document.get("records")
    if (
        isinstance(records, list | tuple)
        and limits.max_records is not None
        and len(records) > limits.max_records
    ):
        raise fail("too_many_records", "records")
    doc = check_members(document, "run", _RUN_REQUIRED, ("service_identity",))
    if doc["format"] != RUN_FORMAT or type(doc["format"]) is not str:
        raise fail("invalid_constant", "format")
    if not isinstance(records, list | tuple):
        raise fail("invalid_type", "records")
    header = _header_from(doc, doc["artifact_digest"])
    built: list[Record] = []
    # Each record is validated once: a plain record (as decoded from JSON) through
    # plain_record_bytes, which also gives its canonical bytes, anything else through
    # Record.from_document. The run digest is hashed from those bytes as they come.
    hasher = hashlib.sha256()
    prefix, suffix = header.canonical_parts()
    separator = prefix
    size = 0
    for position, item in enumerate(records):
        record, chunk = _document_record(item, position, decoded=decoded)
        built.append(record)
        hasher.update(separator)
        hasher.update(chunk)
        size += len(separator) + len(chunk)
        separator = b","
    if not built:
        raise fail("no_records", "records")
    hasher.update(suffix)
    size += len(suffix)
    run = Run._hashed(header, tuple(built), "sha256:" + hasher.hexdigest(), size)
    limits.check_count(len(run.records))
    limits.check_size(run.canonical_size)
    return run


def parse_run(data: bytes | bytearray | memoryview, *, limits: Limits = UNLIMITED) -> Run:
    """Strictly decode run bytes (canonical or not) and validate them.

    Raises:
        CanonicalError: the bytes are not strict JSON (or exceed
            ``limits.max_file_bytes``).
        CapturedRunError: the document is not a valid run.
    """
    with paused_full_collections():
        document = decode(data, limits=DecodeLimits(max_bytes=limits.max_file_bytes))
        return _run_from(document, limits, decoded=True)


def _open_regular(path: str | os.PathLike[str], field_name: str) -> int:
    """Open a regular file for reading, refusing symlinks, FIFOs and devices."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise fail("not_found", field_name) from None
    except OSError as error:
        code = "not_regular_file" if error.errno in (errno.ELOOP, errno.EISDIR) else "unreadable"
        raise fail(code, field_name) from None
    regular = stat.S_ISREG(os.fstat(fd).st_mode)
    if regular:
        os.set_blocking(fd, True)
    else:
        os.close(fd)
        raise fail("not_regular_file", field_name)
    return fd


def read_file_bytes(path: str | os.PathLike[str], max_bytes: int, field_name: str) -> bytes:
    """Read a whole regular file (not a symlink) of at most ``max_bytes`` bytes."""
    fd = _open_regular(path, field_name)
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError:  # pragma: no cover - a read error after a successful open
        raise fail("unreadable", field_name) from None
    if len(data) > max_bytes:
        raise fail("too_large", field_name)
    return data


def read_run(path: str | os.PathLike[str], *, limits: Limits = UNLIMITED) -> Run:
    """Read a run file (regular file, not a symlink, ≤ ``limits.max_file_bytes``).

    The file is read once and validated once; it need not be canonical (the
    run's digest is that of its canonical form). For files too large for
    memory use :class:`RunReader`.

    Raises:
        CapturedRunError: ``not_found``, ``not_regular_file``, ``unreadable``,
            ``too_large`` (field ``run``), or any run refusal.
        CanonicalError: the bytes are not strict JSON.
    """
    return parse_run(read_file_bytes(path, limits.max_file_bytes, "run"), limits=limits)


def run_digest(run: Run | Mapping[str, Any]) -> str:
    """Return ``digest(run)`` — the run's identity in requests, packs and receipts.

    A :class:`Run` carries its digest already; a parsed document is validated
    first (:func:`run_from_document`).
    """
    if isinstance(run, Run):
        return run.digest
    return run_from_document(run).digest


# ---------------------------------------------------------------------------
# Streaming: encoder, writer, reader


class RunEncoder:
    """Encode and hash a canonical run one record at a time (pure, no I/O).

    ``add`` validates a record against the header (likelihood bindings, id
    uniqueness, limits) and returns the bytes to append — the run prefix
    before the first record, a ``,`` before later ones. ``finish`` returns the
    suffix. The concatenation is byte-identical to :meth:`Run.to_canonical`
    of the same run and :attr:`digest` equals its digest. Memory: one set of
    record ids (at most 128 code points each) and one record at a time.
    After any refusal the encoder is unusable (``invalid_state``).
    """

    def __init__(self, header: RunHeader, *, limits: Limits = UNLIMITED) -> None:
        """Start a run with a validated header."""
        if not isinstance(header, RunHeader):
            raise fail("invalid_type", "header")
        self._header = header
        self._limits = limits
        self._prefix, self._suffix = header.canonical_parts()
        self._hash = hashlib.sha256()
        self._ids: set[str] = set()
        self._size = 0
        self._state = "open"

    @property
    def header(self) -> RunHeader:
        """The run header."""
        return self._header

    @property
    def record_count(self) -> int:
        """Records accepted so far."""
        return len(self._ids)

    def _emit(self, chunk: bytes) -> bytes:
        self._size += len(chunk)
        self._limits.check_size(self._size)
        self._hash.update(chunk)
        return chunk

    def add(self, record: Record | Mapping[str, Any]) -> bytes:
        """Validate one record and return the bytes that append it to the run.

        Mappings are built with make_run semantics (:meth:`Record.from_mapping`).
        A plain ``dict`` of plain JSON values (as ``json.loads`` makes them)
        takes the fast path, :func:`plain_record_bytes`: the same bytes and
        the same refusals, without building a :class:`Record`.
        """
        if self._state != "open":
            raise fail("invalid_state", "encoder")
        try:
            return self._accept(record)
        except BaseException:
            self._state = "failed"
            raise

    def _accept(self, record: Record | Mapping[str, Any]) -> bytes:
        position = len(self._ids)
        limit = self._limits.max_records
        if limit is not None and position >= limit:
            raise fail("too_many_records", "records")
        if type(record) is dict:
            plain = plain_record_bytes(record)
            if plain is not None:
                return self._append(plain[0], plain[1])
        with _indexed(position):
            typed = Record.from_mapping(record)
        _check_record_likelihood(typed, self._header, f"records[{position}]")
        if typed.id in self._ids:
            raise fail("duplicate_id", f"records[{position}].id")
        chunk = (self._prefix if position == 0 else b",") + _record_chunk(typed)
        self._emit(chunk)
        self._ids.add(typed.id)
        return chunk

    def _append(self, record_id: str, data: bytes, *, count: bool = False) -> bytes:
        """Append a record that :func:`plain_record_bytes` accepted (its id and bytes).

        The record-count limit is checked first when ``count`` (else by the caller).
        """
        position = len(self._ids)
        limit = self._limits.max_records
        if count and limit is not None and position >= limit:
            raise fail("too_many_records", "records")
        if record_id in self._ids:
            raise fail("duplicate_id", f"records[{position}].id")
        chunk = (self._prefix if position == 0 else b",") + data
        self._emit(chunk)
        self._ids.add(record_id)
        return chunk

    def _add_plain_bytes(self, record_id: str, data: bytes) -> bytes:
        """Append ``plain_record_bytes(record)`` computed elsewhere (a worker process).

        Internal: the pair must come from :func:`plain_record_bytes` (which
        accepted the record); the run-level checks (count limit, unique id,
        size limit) happen here exactly as in :meth:`add`.
        """
        if self._state != "open":
            raise fail("invalid_state", "encoder")
        try:
            return self._append(record_id, data, count=True)
        except BaseException:
            self._state = "failed"
            raise

    def finish(self) -> bytes:
        """Close the record list and return the suffix (final LF included)."""
        if self._state != "open":
            raise fail("invalid_state", "encoder")
        if not self._ids:
            self._state = "failed"
            raise fail("no_records", "records")
        try:
            self._emit(self._suffix)
        except BaseException:
            self._state = "failed"
            raise
        self._state = "finished"
        return self._suffix

    @property
    def summary(self) -> RunSummary:
        """Digest, count and size; available after :meth:`finish`."""
        if self._state != "finished":
            raise fail("invalid_state", "encoder")
        return RunSummary(
            run_digest="sha256:" + self._hash.hexdigest(),
            record_count=len(self._ids),
            canonical_size=self._size,
        )


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _ExclusiveFile:
    """A temporary file beside ``destination``, hard-linked into place on publish."""

    def __init__(self, destination: str | os.PathLike[str], mode: int) -> None:
        self.destination = Path(destination)
        parent = self.destination.parent
        if os.path.lexists(self.destination):
            raise OutputError("output_exists", "output")
        if not parent.is_dir():
            raise OutputError("output_parent_missing", "output")
        self.temporary = parent / f".{self.destination.name}.{secrets.token_hex(8)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.temporary, flags, mode)
            os.fchmod(fd, mode)
        except OSError:
            raise OutputError("output_unwritable", "output") from None
        self._handle: IO[bytes] | None = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        if self._handle is None:
            raise fail("invalid_state", "output")
        try:
            self._handle.write(data)
        except OSError:  # pragma: no cover - disk full or I/O error
            self.discard()
            raise OutputError("output_unwritable", "output") from None

    def publish(self) -> None:
        handle = self._handle
        assert handle is not None  # write() refuses a discarded file first
        self._handle = None
        try:
            try:
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                handle.close()
            os.link(self.temporary, self.destination)
        except FileExistsError:
            raise OutputError("output_exists", "output") from None
        except OSError:
            raise OutputError("output_unwritable", "output") from None
        finally:
            with contextlib.suppress(OSError):
                self.temporary.unlink()
        _fsync_directory(self.destination.parent)

    def discard(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()
            with contextlib.suppress(OSError):
                self.temporary.unlink()


class RunWriter:
    """Write a canonical run file record by record, hashing the same bytes.

    The bytes go to a fresh temporary file beside ``destination`` (mode
    0600); :meth:`finish` appends the suffix, flushes, and hard-links the file
    into place, refusing an existing destination (atomic, no clobber).
    Leaving the ``with`` block without :meth:`finish` — or any refusal —
    discards the temporary file; nothing is published. The file is
    byte-identical to :func:`write_run` of the same run.

    Example::

        header = RunHeader(source=Source("acme", "1.0"), run_id="r1", artifact_digest=digest)
        with RunWriter(path, header) as writer:
            for row in rows:
                writer.add({"id": row.id, "input": row.prompt, "expected": row.ref,
                            "output": row.answer})
            summary = writer.finish()
    """

    def __init__(
        self,
        destination: str | os.PathLike[str],
        header: RunHeader,
        *,
        limits: Limits = UNLIMITED,
        mode: int = 0o600,
    ) -> None:
        """Validate the header and open the temporary file."""
        self._encoder = RunEncoder(header, limits=limits)
        self._file = _ExclusiveFile(destination, mode)
        self._summary: RunSummary | None = None

    def __enter__(self) -> RunWriter:
        """Return the writer."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Discard the temporary file unless :meth:`finish` succeeded."""
        if self._summary is None:
            self.abort()

    @property
    def record_count(self) -> int:
        """Records written so far."""
        return self._encoder.record_count

    def add(self, record: Record | Mapping[str, Any]) -> None:
        """Validate and append one record (see :meth:`RunEncoder.add`)."""
        try:
            chunk = self._encoder.add(record)
        except BaseException:
            self.abort()
            raise
        self._file.write(chunk)

    def _add_plain_bytes(self, record_id: str, data: bytes) -> None:
        """Append a record encoded by :func:`plain_record_bytes` elsewhere (internal)."""
        try:
            chunk = self._encoder._add_plain_bytes(record_id, data)
        except BaseException:
            self.abort()
            raise
        self._file.write(chunk)

    def finish(self) -> RunSummary:
        """Append the suffix, publish the file and return its digest, count and size."""
        try:
            self._file.write(self._encoder.finish())
            self._file.publish()
        except BaseException:
            self.abort()
            raise
        self._summary = self._encoder.summary
        return self._summary

    def abort(self) -> None:
        """Discard everything written; safe to call more than once."""
        self._file.discard()


def write_run(run: Run, destination: str | os.PathLike[str], *, limits: Limits = UNLIMITED) -> str:
    """Write ``canonical_bytes(run)`` with atomic no-clobber publication (mode 0600).

    Memory stays at one record's bytes. Returns the run digest, which is
    also the SHA-256 of the file.

    Raises:
        CapturedRunError: ``invalid_type``, ``too_many_records``, ``too_large``
            (limits).
        OutputError: ``output_exists``, ``output_parent_missing``,
            ``output_unwritable``.
    """
    if not isinstance(run, Run):
        raise fail("invalid_type", "run")
    limits.check_count(len(run.records))
    limits.check_size(run.canonical_size)
    target = _ExclusiveFile(destination, 0o600)
    try:
        for chunk in run.iter_canonical():
            target.write(chunk)
        target.publish()
    except BaseException:
        target.discard()
        raise
    return run.digest


_PREFIX: Final = re.compile(
    r'\{"artifact_digest":(null|"sha256:[0-9a-f]{64}"),'
    r'"format":"invarlock/evaluation-run-v1","records":\['
)
_PREFIX_MAX: Final = 160
_SUFFIX_MAX: Final = 8 * 1_048_576
_RAW_DECODER: Final = json.JSONDecoder(strict=True)


class _Scanner:
    """A UTF-8 text window over a binary file, growing only for the record being read."""

    def __init__(self, handle: IO[bytes], chunk_size: int) -> None:
        self.handle = handle
        self.chunk_size = chunk_size
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.eof = False

    def fill(self, wanted: int) -> None:
        """Read until ``wanted`` characters are available after ``pos`` or EOF."""
        if self.pos > self.chunk_size and self.pos * 2 > len(self.text):
            self.text = self.text[self.pos :]
            self.pos = 0
        while not self.eof and len(self.text) - self.pos < wanted:
            try:
                raw = self.handle.read(max(self.chunk_size, wanted - (len(self.text) - self.pos)))
            except OSError:  # pragma: no cover - a read error after a successful open
                raise fail("unreadable", "run") from None
            self.eof = not raw
            try:
                self.text += self.decoder.decode(raw, final=self.eof)
            except UnicodeDecodeError:
                raise fail("not_canonical", "run") from None

    def peek(self) -> str:
        """Return the next character ('' at EOF)."""
        self.fill(1)
        return self.text[self.pos : self.pos + 1]


class RunReader:
    """Stream the records of a *canonical* run file with bounded memory.

    Iterate once; each yielded :class:`Record` is fully validated on its own
    and checked against everything known so far (ids unique, likelihood facts
    bound to the artifact digest in the file prefix and consistent with each
    other). The run header follows the records in canonical order, so the
    remaining run-level checks (likelihood facts against ``source`` and the
    service identity, canonical form of the suffix, limits) happen when the
    iteration ends: **records are provisional until the iterator is
    exhausted without error**; then :attr:`header` and :attr:`summary`
    (digest, count, size) are available.

    Only canonical bytes are accepted (``not_canonical`` otherwise: use
    :func:`read_run` for other encodings). Memory: the set of ids, one record
    (at most ``max_record_bytes``) and one read chunk.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[bytes],
        *,
        limits: Limits = UNLIMITED,
        max_record_bytes: int = COMPAT_MAX_BYTES,
        chunk_size: int = 1_048_576,
    ) -> None:
        """Remember the file (a path, or a binary handle the caller owns and closes).

        Nothing is read until iteration; a handle is read from its current
        position to its end.
        """
        self._path = path
        self._limits = limits
        self._max_record_bytes = max_record_bytes
        self._chunk_size = chunk_size
        self._started = False
        self._header: RunHeader | None = None
        self._summary: RunSummary | None = None

    @property
    def header(self) -> RunHeader:
        """The validated header (after complete iteration)."""
        if self._header is None:
            raise fail("invalid_state", "reader")
        return self._header

    @property
    def summary(self) -> RunSummary:
        """Digest, count and size (after complete iteration)."""
        if self._summary is None:
            raise fail("invalid_state", "reader")
        return self._summary

    def __iter__(self) -> Iterator[Record]:
        """Yield the records in file order (single use)."""
        if self._started:
            raise fail("invalid_state", "reader")
        self._started = True
        source = self._path
        if not isinstance(source, str | os.PathLike):
            yield from self._records(_Scanner(source, self._chunk_size))
            return
        fd = _open_regular(source, "run")
        with os.fdopen(fd, "rb") as handle:
            yield from self._records(_Scanner(handle, self._chunk_size))

    def _next_object(self, scanner: _Scanner) -> tuple[Any, int]:
        grow = self._chunk_size
        while True:
            try:
                return _RAW_DECODER.raw_decode(scanner.text, scanner.pos)
            except json.JSONDecodeError:
                if scanner.eof:
                    raise fail("not_canonical", "run") from None
                if len(scanner.text) - scanner.pos > self._max_record_bytes:
                    raise fail("too_large", "run") from None
                scanner.fill(len(scanner.text) - scanner.pos + grow)
                grow *= 2
            except (ValueError, RecursionError):
                raise fail("not_canonical", "run") from None

    def _records(self, scanner: _Scanner) -> Iterator[Record]:
        limits = self._limits
        hasher = hashlib.sha256()
        size = 0
        scanner.fill(_PREFIX_MAX)
        match = _PREFIX.match(scanner.text)
        if match is None:
            raise fail("not_canonical", "run")
        prefix = match.group(0).encode("utf-8")
        artifact = None if match.group(1) == "null" else match.group(1)[1:-1]
        hasher.update(prefix)
        size += len(prefix)
        scanner.pos = match.end()
        ids: set[str] = set()
        bound: tuple[int, LikelihoodFacts] | None = None
        if scanner.peek() == "]":
            raise fail("no_records", "records")
        while True:
            position = len(ids)
            if limits.max_records is not None and position >= limits.max_records:
                raise fail("too_many_records", "records")
            if scanner.peek() != "{":
                raise fail("not_canonical", f"records[{position}]")
            start = scanner.pos
            document, end = self._next_object(scanner)
            chunk = scanner.text[start:end].encode("utf-8")
            record = _canonical_record(document, chunk, position)
            scanner.pos = end
            if record.id in ids:
                raise fail("duplicate_id", f"records[{position}].id")
            bound = _check_streamed_likelihood(record, artifact, bound, position)
            ids.add(record.id)
            separator = scanner.peek()
            if separator not in (",", "]"):
                raise fail("not_canonical", "run")
            hasher.update(chunk)
            size += len(chunk)
            if separator == ",":
                hasher.update(b",")
                size += 1
                scanner.pos += 1
            limits.check_size(size)
            yield record
            if separator == "]":
                break
        self._header = self._finish(scanner, artifact, (hasher, size), bound, len(ids))

    def _finish(
        self,
        scanner: _Scanner,
        artifact: str | None,
        digested: tuple[Any, int],
        bound: tuple[int, LikelihoodFacts] | None,
        count: int,
    ) -> RunHeader:
        hasher, size = digested
        scanner.fill(_SUFFIX_MAX + 1)
        rest = scanner.text[scanner.pos :]
        if len(rest) > _SUFFIX_MAX or not scanner.eof:
            raise fail("too_large", "run")
        if not rest.startswith("],"):
            raise fail("not_canonical", "run")
        try:
            tail = decode("{" + rest[2:])
        except CanonicalError:
            raise fail("not_canonical", "run") from None
        doc = check_members(tail, "run", _TAIL_REQUIRED, ("service_identity",))
        header = _header_from(doc, artifact)
        suffix = rest.encode("utf-8")
        if suffix != header.canonical_parts()[1]:
            raise fail("not_canonical", "run")
        if bound is not None:
            position, facts = bound
            where = f"records[{position}].likelihood"
            check_service(facts, header.service_identity, where)
            check_source(facts, header.source, where)
        hasher.update(suffix)
        size += len(suffix)
        self._limits.check_size(size)
        self._summary = RunSummary(
            run_digest="sha256:" + hasher.hexdigest(), record_count=count, canonical_size=size
        )
        return header


#: Uncapped canonical run files at least this large are streamed into a run
#: (:func:`read_canonical_run`) instead of being held whole next to their document.
STREAM_MIN_BYTES: Final = 32 * 1_048_576


def read_canonical_run(
    source: str | os.PathLike[str] | IO[bytes], *, limits: Limits = UNLIMITED
) -> Run:
    """Read a *canonical* run file into a :class:`Run` without holding its text.

    :class:`RunReader` validates and hashes the records as they stream in, so
    the memory is the run's records themselves, not the file bytes and a
    decoded document next to them (what :func:`read_run` holds for a
    moment). Non-canonical bytes are refused with ``not_canonical``; callers
    that accept any strict JSON fall back to :func:`read_run`.

    Raises:
        CapturedRunError: as :class:`RunReader`.
    """
    reader = RunReader(source, limits=limits)
    with paused_full_collections():
        records = tuple(reader)
    summary = reader.summary
    return Run._hashed(reader.header, records, summary.run_digest, summary.canonical_size)


def _document_record(item: object, position: int, *, decoded: bool) -> tuple[Record, bytes]:
    """Build one record object of a run document; return it and its canonical bytes.

    A plain record (all eight members, no ``likelihood``) is validated and
    encoded by :func:`plain_record_bytes` and frozen without a second check;
    anything else goes through :meth:`Record.from_document`, which names the
    refusal. ``decoded``: ``item`` is exactly as the strict decoder returned it.
    """
    if type(item) is dict and len(item) == _DOCUMENT_MEMBERS:
        accepted = plain_record_bytes(item, decoded=(item, 0) if decoded else None)
        if accepted is not None:
            return Record._accepted(item), accepted[1]
    with _indexed(position):
        record = Record.from_document(item)
    return record, _record_chunk(record)


def _canonical_record(document: object, chunk: bytes, position: int) -> Record:
    """Build the record decoded from ``chunk``; refuse unless ``chunk`` is its canonical form."""
    record, canonical = _document_record(document, position, decoded=False)
    if chunk != canonical:
        raise fail("not_canonical", f"records[{position}]")
    return record


def _check_streamed_likelihood(
    record: Record,
    artifact: str | None,
    bound: tuple[int, LikelihoodFacts] | None,
    position: int,
) -> tuple[int, LikelihoodFacts] | None:
    """Check what can be checked before the header is known; keep the first facts.

    Every valid run binds all likelihood facts to one source, one service
    identity digest (or none) and, when hosted, one configuration digest, so
    later facts must agree with the first ones; the first ones are checked
    against the header at the end.
    """
    facts = record.likelihood
    if facts is None:
        return bound
    where = f"records[{position}].likelihood"
    check_reference(facts, record.expected, where)
    check_input(facts, record.captured_input, where)
    check_tail(facts, record.expected, artifact, where)
    if bound is None:
        return (position, facts)
    first = bound[1]
    if facts.service_identity_digest != first.service_identity_digest:
        raise fail("likelihood_binding_mismatch", f"{where}.service_identity_digest")
    if (
        first.service_identity_digest is not None
        and facts.configuration_digest != first.configuration_digest
    ):
        raise fail("likelihood_binding_mismatch", f"{where}.configuration_digest")
    if facts.source != first.source:
        raise fail("likelihood_binding_mismatch", f"{where}.source")
    return bound
