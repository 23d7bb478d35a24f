"""The run model: limits, score provenance, input projections, records and the run header.

Every type validates itself once on construction and is immutable afterwards
(tuples, read-only mappings, frozen JSON values). :class:`Limits` bounds record
count and size; :class:`InputProjection` and :func:`project_record` are the
JSON-pointer input projections with their replayable binding in
``context.input_projection``.
"""

from __future__ import annotations

import contextlib
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sealeval._validate import (
    EMPTY,
    MAX_LONG_TEXT,
    MAX_MEMBERS,
    JsonValue,
    check_closed,
    check_digest,
    check_exact,
    check_string_map,
    check_text,
    freeze_json,
    rebased,
    shared_string_map,
    thaw_json,
)
from sealeval.canonical import digest_invarlock, frozen_canonical, frozen_digest
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.likelihood import (
    LikelihoodFacts,
    Source,
    check_bound_facts,
    facts_from,
)
from sealeval.captured.service_identity import ServiceIdentity, validate_service_identity

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

#: Members every run document has (``service_identity`` is the one optional member).
RUN_REQUIRED: Final = frozenset(
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
#: Header members that follow ``records`` in a canonical run (its tail object).
TAIL_REQUIRED: Final = frozenset({"run_id", "score_provenance", "source", "source_digest"})
_RECORD_REQUIRED: Final = frozenset(RECORD_MEMBERS[:8])
_RECORD_ALL: Final = frozenset(RECORD_MEMBERS)
#: Record members without a default (the others may be absent from a document).
RECORD_NEEDED: Final = ("id", "input", "expected", "output")
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
            raise CapturedRunError("no_cases" if cases else "no_records", field)
        if self.max_records is not None and count > self.max_records:
            raise CapturedRunError("too_many_cases" if cases else "too_many_records", field)

    def check_size(self, size: int, field: str = "run") -> None:
        """Refuse a canonical size above ``max_canonical_bytes``."""
        if self.max_canonical_bytes is not None and size > self.max_canonical_bytes:
            raise CapturedRunError("too_large", field)


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
            raise CapturedRunError("invalid_constant", "score_provenance.kind")
        for name in ("source", "version", "unit"):
            check_text(getattr(self, name), f"score_provenance.{name}", error=CapturedRunError)
        check_digest(
            self.rubric_digest,
            "score_provenance.rubric_digest",
            nullable=True,
            error=CapturedRunError,
        )

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
        doc = check_closed(
            document, "score_provenance", _PROVENANCE_MEMBERS, error=CapturedRunError
        )
        return cls(
            kind=doc["kind"],
            source=doc["source"],
            version=doc["version"],
            unit=doc["unit"],
            rubric_digest=doc["rubric_digest"],
        )


def _provenance_map(value: object) -> Mapping[str, ScoreProvenance]:
    if not isinstance(value, Mapping):
        raise CapturedRunError("invalid_type", "score_provenance")
    if len(value) > MAX_MEMBERS:
        raise CapturedRunError("too_many_members", "score_provenance")
    frozen: dict[str, ScoreProvenance] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise CapturedRunError("invalid_json_value", "score_provenance")
        freeze_json(key, "score_provenance", error=CapturedRunError)
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
            raise CapturedRunError("invalid_projection", "input_projection.kind")
        pointer = self.pointer
        if (
            type(pointer) is not str
            or len(pointer) > MAX_POINTER_LENGTH
            or not pointer.startswith("/")
            or _BAD_TILDE.search(pointer) is not None
        ):
            raise CapturedRunError("invalid_projection", "input_projection.pointer")
        freeze_json(pointer, "input_projection.pointer", error=CapturedRunError)
        tokens = tuple(
            token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")
        )
        if tokens[0] not in ("input", "context"):
            raise CapturedRunError("projection_root", "input_projection.pointer")
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
        document = check_exact(
            document,
            "input_projection",
            ("kind", "pointer"),
            error=CapturedRunError,
            code="invalid_projection",
        )
        return cls(pointer=document["pointer"], kind=document["kind"])


def _resolve(projection: InputProjection, input_value: JsonValue, context: JsonValue) -> str:
    """Resolve the pointer against ``{input, context}``; the result must be text."""
    tokens = projection.tokens
    current: JsonValue = input_value if tokens[0] == "input" else context
    for token in tokens[1:]:
        if isinstance(current, Mapping):
            if token not in current:
                raise CapturedRunError("projection_unresolved", "input_projection.pointer")
            current = current[token]
        elif isinstance(current, tuple):
            if _INDEX_TOKEN.fullmatch(token) is None or int(token) >= len(current):
                raise CapturedRunError("projection_unresolved", "input_projection.pointer")
            current = current[int(token)]
        else:
            raise CapturedRunError("projection_unresolved", "input_projection.pointer")
    if type(current) is not str:
        raise CapturedRunError("projection_not_text", "input_projection.pointer")
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
    binding = check_exact(
        binding, where, _BINDING_MEMBERS, error=CapturedRunError, code="projection_binding_invalid"
    )
    try:
        projection = InputProjection.from_document(binding["configuration"])
    except CapturedRunError:
        raise CapturedRunError("projection_binding_invalid", f"{where}.configuration") from None
    source = binding["source"]
    source = check_exact(
        source,
        f"{where}.source",
        ("input", "context"),
        error=CapturedRunError,
        code="projection_binding_invalid",
    )
    original_context = source["context"]
    if isinstance(original_context, Mapping) and "input_projection" in original_context:
        raise CapturedRunError("projection_binding_invalid", f"{where}.source")
    if binding["configuration_digest"] != frozen_digest(
        binding["configuration"], error=CapturedRunError
    ):
        raise CapturedRunError("projection_replay_mismatch", f"{where}.configuration_digest")
    if binding["source_digest"] != frozen_digest(source, error=CapturedRunError):
        raise CapturedRunError("projection_replay_mismatch", f"{where}.source_digest")
    try:
        selected = _resolve(projection, source["input"], original_context)
    except CapturedRunError:
        raise CapturedRunError("projection_replay_mismatch", where) from None
    if type(record_input) is not str or selected != record_input:
        raise CapturedRunError("projection_replay_mismatch", "record.input")
    rest = {key: value for key, value in context.items() if key != "input_projection"}
    original = original_context if isinstance(original_context, Mapping) else EMPTY
    if frozen_digest(rest, error=CapturedRunError) != frozen_digest(
        original, error=CapturedRunError
    ):
        raise CapturedRunError("projection_replay_mismatch", "record.context")
    return ProjectionBinding(
        configuration=projection,
        configuration_digest=binding["configuration_digest"],
        source_input=source["input"],
        source_context=original_context,
        source_digest=binding["source_digest"],
    )


# ---------------------------------------------------------------------------
# Records


def refuse_null(document: Mapping[str, Any], member: str, field_name: str) -> None:
    """Refuse an explicit ``null`` for an optional object member (absent is fine)."""
    if member in document and document[member] is None:
        raise CapturedRunError("invalid_type", field_name)


def _check_scores(value: object) -> Mapping[str, int | float]:
    if not isinstance(value, Mapping):
        raise CapturedRunError("invalid_type", "record.scores")
    if len(value) > MAX_MEMBERS:
        raise CapturedRunError("too_many_members", "record.scores")
    frozen: dict[str, int | float] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise CapturedRunError("invalid_json_value", "record.scores")
        freeze_json(key, "record.scores", error=CapturedRunError)
        kind = type(item)
        if kind is int:
            try:
                float(item)
            except OverflowError:
                raise CapturedRunError("invalid_score", "record.scores") from None
            freeze_json(item, "record.scores", error=CapturedRunError)
        elif kind is float:
            try:
                freeze_json(item, "record.scores", error=CapturedRunError)
            except CapturedRunError:
                raise CapturedRunError("invalid_score", "record.scores") from None
        else:
            raise CapturedRunError("invalid_score", "record.scores")
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
        check_text(self.id, "record.id", error=CapturedRunError)
        for name in ("input", "expected", "output", "context"):
            object.__setattr__(
                self,
                name,
                freeze_json(getattr(self, name), f"record.{name}", error=CapturedRunError),
            )
        object.__setattr__(self, "scores", _check_scores(self.scores))
        object.__setattr__(
            self,
            "metadata",
            check_string_map(self.metadata, "record.metadata", error=CapturedRunError),
        )
        if self.error is not None:
            check_text(
                self.error,
                "record.error",
                max_length=MAX_LONG_TEXT,
                min_length=0,
                controls=True,
                error=CapturedRunError,
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
        return frozen_canonical(self._document(), error=CapturedRunError)

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
        doc = check_closed(
            document, "record", _RECORD_REQUIRED, ("likelihood",), error=CapturedRunError
        )
        refuse_null(doc, "likelihood", "record.likelihood")
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
        mapping = check_closed(
            mapping, "record", RECORD_NEEDED, _RECORD_ALL, error=CapturedRunError
        )
        refuse_null(mapping, "likelihood", "record.likelihood")
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
        raise CapturedRunError("invalid_type", "record")
    context = record.context
    if isinstance(context, Mapping) and "input_projection" in context:
        raise CapturedRunError("projection_binding_invalid", "record.context.input_projection")
    selected = _resolve(projection, record.input, context)
    configuration = projection.to_dict()
    source = {"input": record.input, "context": context}
    binding = {
        "configuration": configuration,
        "configuration_digest": frozen_digest(configuration, error=CapturedRunError),
        "source": source,
        "source_digest": frozen_digest(source, error=CapturedRunError),
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


def record_chunk(record: Record) -> bytes:
    """Return the record's bytes inside a canonical run (canonical bytes without the LF)."""
    return record.to_canonical()[:-1]


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


def check_record_likelihood(record: Record, header: RunHeader, where: str) -> None:
    """Check a record's bound likelihood facts against its run's header (field ``where``)."""
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
            raise CapturedRunError("invalid_type", "source")
        object.__setattr__(self, "source", Source.from_document(self.source))
        check_text(self.run_id, "run_id", error=CapturedRunError)
        check_digest(self.artifact_digest, "artifact_digest", nullable=True, error=CapturedRunError)
        check_digest(self.source_digest, "source_digest", nullable=True, error=CapturedRunError)
        object.__setattr__(self, "score_provenance", _provenance_map(self.score_provenance))
        if self.service_identity is not None:
            object.__setattr__(
                self, "service_identity", validate_service_identity(self.service_identity)
            )
            if self.artifact_digest is not None:
                raise CapturedRunError("artifact_digest_forbidden", "artifact_digest")
        elif self.artifact_digest is None:
            raise CapturedRunError("artifact_digest_required", "artifact_digest")

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
        head = frozen_canonical(
            {"artifact_digest": self.artifact_digest, "format": RUN_FORMAT}, error=CapturedRunError
        )
        tail = frozen_canonical(self._tail(), error=CapturedRunError)
        return head[:-2] + b',"records":[', b"]," + tail[1:]


def rebased_record(position: int) -> contextlib.AbstractContextManager[None]:
    """Re-raise a refusal at field ``record...`` inside the block as ``records[position]...``."""
    return rebased("record", f"records[{position}]", error=CapturedRunError)


class HeaderFacts:
    """The header's members read through a run-like object (``Run``, ``RunFacts``).

    A mixin without state (``__slots__ = ()``): the class using it has a
    ``header`` attribute holding the :class:`RunHeader`.
    """

    __slots__ = ()
    header: RunHeader

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
