"""Evaluator exports, capture, and the input capabilities of a run.

* :class:`EvaluatorExport` — the ``invarlock/evaluator-export-v1`` envelope
  (spec 10 §6): ``{format, evaluator, source_version, run_id, payload}``. Its
  file bytes are *not* canonical (default JSON separators, insertion key
  order, raw non-ASCII, no final newline), so a run imported from one binds
  the exact file bytes in ``source_digest``.
* :class:`EvaluatorProfile` — the seam to the 19 evaluator-native profiles
  (spec 11 §8), implemented by the importers: a profile turns an evaluator's
  result into the export payload and an export's payload into records.
* :func:`capture_evaluator_run` — build a run from captured records, with an
  optional JSON-pointer input projection (spec 11 §10).
* :func:`run_from_evaluator_export` — the ``evaluator-json`` adapter core:
  identity checks, the profile's records, capture.
* :func:`export_evaluator_result` — write an export file after checking that
  it yields exactly the planned case ids (spec 11 §9).
* :func:`evaluator_input_capabilities` — which records can feed exact match,
  normalized NLL and judges (spec 11 §11).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from sealeval._io import publish_exclusive
from sealeval._validate import JsonValue, check_closed, check_text, freeze_json, thaw_json
from sealeval.canonical import (
    DecodeLimits,
    decode,
    digest_bytes,
    encode_python_default,
    plain_mapping,
)
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.likelihood import Source
from sealeval.captured.run import (
    UNLIMITED,
    InputProjection,
    Limits,
    Record,
    Run,
    ScoreProvenance,
    make_run,
    read_file_bytes,
)
from sealeval.captured.service_identity import ServiceIdentity
from sealeval.errors import OutputError, SealevalError

__all__ = [
    "BATCH_PROFILES",
    "DELEGATING_PROFILES",
    "EVALUATOR_NAMES",
    "EXPORT_FORMAT",
    "MAX_EXPORT_DEPTH",
    "SCALAR_PROFILES",
    "Capability",
    "EvaluatorExport",
    "EvaluatorProfile",
    "InputCapabilities",
    "capture_evaluator_run",
    "evaluator_export_from_document",
    "evaluator_input_capabilities",
    "export_evaluator_result",
    "parse_evaluator_export",
    "read_evaluator_export",
    "run_from_evaluator_export",
]

EXPORT_FORMAT: Final = "invarlock/evaluator-export-v1"
#: Profiles that delegate to a native adapter (spec 11 §8).
DELEGATING_PROFILES: Final = ("lm-evaluation-harness", "inspect-ai", "promptfoo", "langfuse")
#: Scalar profiles: one payload entry per case (spec 11 §8.1).
SCALAR_PROFILES: Final = (
    "deepeval",
    "ragas",
    "lighteval",
    "hugging-face-evaluate",
    "autoevals",
    "openevals",
    "arize-phoenix-evals",
    "opik",
)
#: Batch profiles: one report per run (spec 11 §8.2).
BATCH_PROFILES: Final = (
    "pydantic-evals",
    "azure-ai-evaluation",
    "evidently",
    "mlflow",
    "garak",
    "openai-evals",
    "trulens",
)
#: The 19 evaluator names, in the reference's order.
EVALUATOR_NAMES: Final = (
    "lm-evaluation-harness",
    "inspect-ai",
    "promptfoo",
    "deepeval",
    "ragas",
    "lighteval",
    "hugging-face-evaluate",
    "pydantic-evals",
    "autoevals",
    "openevals",
    "mlflow",
    "garak",
    "openai-evals",
    "arize-phoenix-evals",
    "langfuse",
    "opik",
    "azure-ai-evaluation",
    "evidently",
    "trulens",
)
#: Deepest nesting of an export envelope (the envelope object is level 1).
MAX_EXPORT_DEPTH: Final = 64

_EXPORT_MEMBERS: Final = ("format", "evaluator", "source_version", "run_id", "payload")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class EvaluatorExport:
    """A validated ``invarlock/evaluator-export-v1`` envelope.

    ``payload`` is a frozen JSON object, or a non-empty array; its shape is
    the profile's business. Key order is kept, so :meth:`to_bytes`
    reproduces the reference's export file bytes exactly.
    """

    evaluator: str
    source_version: str
    run_id: str
    payload: JsonValue

    def __post_init__(self) -> None:
        """Validate the envelope members and freeze the payload (depth ≤64 overall)."""
        if type(self.evaluator) is not str or self.evaluator not in EVALUATOR_NAMES:
            raise CapturedRunError("unsupported_evaluator", "evaluator")
        check_text(self.source_version, "source_version", blank=False, error=CapturedRunError)
        check_text(self.run_id, "run_id", error=CapturedRunError)
        payload = self.payload
        if isinstance(payload, list | tuple):
            if not payload:
                raise CapturedRunError("no_records", "payload")
        elif not isinstance(payload, Mapping):
            raise CapturedRunError("invalid_type", "payload")
        frozen = freeze_json(
            payload, "payload", max_depth=MAX_EXPORT_DEPTH - 1, error=CapturedRunError
        )
        object.__setattr__(self, "payload", frozen)

    def __repr__(self) -> str:
        """Show the evaluator name only."""
        return f"EvaluatorExport(evaluator={self.evaluator!r})"

    @property
    def source(self) -> Source:
        """``{name: evaluator, version: source_version}`` — the run's required source."""
        return Source(self.evaluator, self.source_version)

    @property
    def entry_count(self) -> int | None:
        """Length of an array payload, ``None`` for an object payload."""
        return len(self.payload) if isinstance(self.payload, tuple) else None

    def _document(self) -> dict[str, Any]:
        return {
            "format": EXPORT_FORMAT,
            "evaluator": self.evaluator,
            "source_version": self.source_version,
            "run_id": self.run_id,
            "payload": self.payload,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain envelope (member order as written)."""
        return thaw_json(self._document())  # type: ignore[no-any-return]

    def to_bytes(self) -> bytes:
        """Return the export file bytes.

        JSON with the default separators ``", "`` and ``": "``, keys in
        insertion order, non-ASCII raw, shortest round-trip floats, UTF-8, no
        trailing newline — byte-identical to the reference's writer.
        """
        text = encode_python_default(self._document(), default=plain_mapping)
        return text.encode("utf-8")


def evaluator_export_from_document(
    document: object, *, limits: Limits = UNLIMITED
) -> EvaluatorExport:
    """Validate a parsed envelope (closed object) and return it typed.

    Raises:
        CapturedRunError: ``invalid_type``, ``unknown_field``,
            ``missing_field``, ``invalid_constant`` (``format``),
            ``unsupported_evaluator``, ``invalid_text``, ``no_records`` /
            ``too_many_records`` (array payload), ``invalid_json_value``,
            ``too_deep``.
    """
    doc = check_closed(document, "export", _EXPORT_MEMBERS, error=CapturedRunError)
    if doc["format"] != EXPORT_FORMAT or type(doc["format"]) is not str:
        raise CapturedRunError("invalid_constant", "format")
    export = EvaluatorExport(
        evaluator=doc["evaluator"],
        source_version=doc["source_version"],
        run_id=doc["run_id"],
        payload=doc["payload"],
    )
    _check_entry_count(export, limits)
    return export


def _check_entry_count(export: EvaluatorExport, limits: Limits) -> None:
    count = export.entry_count
    if count is not None and limits.max_records is not None and count > limits.max_records:
        raise CapturedRunError("too_many_records", "payload")


def parse_evaluator_export(
    data: bytes | bytearray | memoryview, *, limits: Limits = UNLIMITED
) -> EvaluatorExport:
    """Strictly decode export file bytes and validate the envelope.

    The run imported from these bytes must record ``source_digest =
    digest_bytes(data)`` (pass it to :func:`run_from_evaluator_export`).

    Raises:
        CanonicalError: not strict JSON (or larger than ``limits.max_file_bytes``).
        CapturedRunError: see :func:`evaluator_export_from_document`.
    """
    document = decode(data, limits=DecodeLimits(max_bytes=limits.max_file_bytes))
    return evaluator_export_from_document(document, limits=limits)


def read_evaluator_export(
    path: str | os.PathLike[str], *, limits: Limits = UNLIMITED
) -> tuple[EvaluatorExport, str]:
    """Read an export file once; return the envelope and ``source_digest`` of its bytes."""
    data = read_file_bytes(path, limits.max_file_bytes, "export")
    return parse_evaluator_export(data, limits=limits), digest_bytes(data)


class EvaluatorProfile(Protocol):
    """One evaluator-native profile (spec 11 §8), implemented by an importer.

    A profile raises a :class:`~sealeval.errors.SealevalError` for input it
    refuses; any other exception escaping it becomes ``profile_failed``
    (the exception, which may quote input, is discarded).
    """

    def native_payload(self, result: object) -> object:
        """Convert an evaluator's in-memory result to the plain-JSON export payload.

        Scalar profiles return the list of normalized entries, batch profiles
        the JSON-normalized report (tables as row lists), the others the
        result as given.
        """
        ...

    def records(self, export: EvaluatorExport) -> Iterable[Record | Mapping[str, Any]]:
        """Map an export's payload to records (make_run member names, in order).

        ``export.source`` and ``export.run_id`` are the run's identity;
        profiles with identity rules of their own (langfuse) check them here.
        """
        ...


def _profile(profiles: Mapping[str, EvaluatorProfile], evaluator: str) -> EvaluatorProfile:
    if not isinstance(profiles, Mapping):
        raise CapturedRunError("invalid_type", "profiles")
    profile = profiles.get(evaluator)
    if profile is None:
        raise CapturedRunError("profile_unavailable", "evaluator")
    return profile


def _payload_of(profile: EvaluatorProfile, result: object) -> object:
    try:
        return profile.native_payload(result)
    except SealevalError:
        raise
    except Exception:  # noqa: BLE001 - a profile's own exception may quote input
        raise CapturedRunError("profile_failed", "profile") from None


def _records_of(profile: EvaluatorProfile, export: EvaluatorExport) -> list[Any]:
    try:
        return list(profile.records(export))
    except SealevalError:
        raise
    except Exception:  # noqa: BLE001 - a profile's own exception may quote input
        raise CapturedRunError("profile_failed", "profile") from None


def capture_evaluator_run(
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
    """Build a run from captured records (spec 11 §10).

    The run is built with make_run semantics (:func:`~sealeval.captured.run.make_run`);
    with ``input_projection`` every record's input is replaced by the
    selected text and the original is retained in
    ``context.input_projection``. Native importers pass ``source_digest =
    digest_bytes(raw file bytes)``.

    Raises:
        CapturedRunError: any run refusal, or ``invalid_projection``,
            ``projection_root``, ``projection_unresolved``,
            ``projection_not_text``, ``projection_binding_invalid``.
    """
    return make_run(
        records,
        source=source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        source_digest=source_digest,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
    )


def run_from_evaluator_export(
    export: EvaluatorExport,
    *,
    profiles: Mapping[str, EvaluatorProfile],
    source: Source | Mapping[str, Any],
    run_id: str,
    source_digest: str | None,
    artifact_digest: str | None = None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    limits: Limits = UNLIMITED,
) -> Run:
    """Turn a validated export into a run (the ``evaluator-json`` adapter core, spec 11 §7).

    The caller's ``source`` must equal ``{name: evaluator, version:
    source_version}`` and ``run_id`` the envelope's; the profile named by
    ``export.evaluator`` maps the payload to records, which are captured
    with ``source_digest`` (the SHA-256 of the raw file bytes the export came
    from: the envelope file, or the evaluator's native file).

    Raises:
        CapturedRunError: ``export_identity_mismatch``, ``profile_unavailable``,
            ``profile_failed``, or any capture refusal.
    """
    if not isinstance(export, EvaluatorExport):
        raise CapturedRunError("invalid_type", "export")
    caller_source = Source.from_document(source)
    if caller_source != export.source:
        raise CapturedRunError("export_identity_mismatch", "source")
    if run_id != export.run_id or type(run_id) is not str:
        raise CapturedRunError("export_identity_mismatch", "run_id")
    profile = _profile(profiles, export.evaluator)
    records = _records_of(profile, export)
    return capture_evaluator_run(
        records,
        source=caller_source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        source_digest=source_digest,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
    )


def _expected_ids(value: object, limits: Limits) -> frozenset[str]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise CapturedRunError("invalid_expected_ids", "expected_ids")
    items = list(value)
    if not items or (limits.max_records is not None and len(items) > limits.max_records):
        raise CapturedRunError("invalid_expected_ids", "expected_ids")
    for item in items:
        if type(item) is not str or not item.strip():
            raise CapturedRunError("invalid_expected_ids", "expected_ids")
    ids = frozenset(items)
    if len(ids) != len(items):
        raise CapturedRunError("invalid_expected_ids", "expected_ids")
    return ids


def export_evaluator_result(
    evaluator: str,
    result: object,
    destination: str | os.PathLike[str],
    *,
    expected_ids: Iterable[str],
    source_version: str,
    run_id: str,
    profiles: Mapping[str, EvaluatorProfile],
    artifact_digest: str | None = None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    limits: Limits = UNLIMITED,
) -> Run:
    """Write an evaluator's result as an export file, if it covers exactly the planned ids.

    Steps (spec 11 §9): the profile converts ``result`` to the payload; the
    envelope bytes are built (:meth:`EvaluatorExport.to_bytes`); the planned
    ``expected_ids`` are checked; the bytes are parsed back and imported
    exactly as ``evaluator-json`` would (``source_digest`` = SHA-256 of the
    bytes); the run's id set must equal ``expected_ids``; only then are the
    bytes published at ``destination`` (exclusive creation, mode 0600).

    Returns:
        The run a later import of ``destination`` yields.

    Raises:
        CapturedRunError: ``unsupported_evaluator``, ``profile_unavailable``,
            ``profile_failed``, envelope refusals, ``too_large``,
            ``invalid_expected_ids``, any import refusal, ``export_ids_mismatch``.
        OutputError: ``output_exists`` (checked before any work and again at
            publication), ``output_parent_missing``, ``output_unwritable``.
    """
    if type(evaluator) is not str or evaluator not in EVALUATOR_NAMES:
        raise CapturedRunError("unsupported_evaluator", "evaluator")
    profile = _profile(profiles, evaluator)
    payload = _payload_of(profile, result)
    export = EvaluatorExport(
        evaluator=evaluator,
        source_version=source_version,
        run_id=run_id,
        payload=payload,  # type: ignore[arg-type]  # validated by the constructor
    )
    _check_entry_count(export, limits)
    data = export.to_bytes()
    if len(data) > limits.max_file_bytes:
        raise CapturedRunError("too_large", "export")
    ids = _expected_ids(expected_ids, limits)
    if os.path.lexists(destination):
        raise OutputError("output_exists", "output")
    run = run_from_evaluator_export(
        parse_evaluator_export(data, limits=limits),
        profiles=profiles,
        source=export.source,
        run_id=run_id,
        source_digest=digest_bytes(data),
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
    )
    if frozenset(run.index) != ids:
        raise CapturedRunError("export_ids_mismatch", "expected_ids")
    publish_exclusive(destination, data, mode=0o600)
    return run


# ---------------------------------------------------------------------------
# Input capabilities


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Capability:
    """Which records can feed one kind of evaluator input."""

    usable_count: int
    unavailable_ids: tuple[str, ...]
    required_facts: tuple[str, ...]

    def __repr__(self) -> str:
        """Show counts only (ids are caller data)."""
        return (
            f"Capability(usable_count={self.usable_count}, unavailable={len(self.unavailable_ids)})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return ``{usable_count, unavailable_ids, required_facts}``."""
        return {
            "usable_count": self.usable_count,
            "unavailable_ids": list(self.unavailable_ids),
            "required_facts": list(self.required_facts),
        }


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class InputCapabilities:
    """The three capabilities of a run (spec 11 §11)."""

    exact_match: Capability
    normalized_nll_per_utf8_byte: Capability
    judge: Capability

    def __repr__(self) -> str:
        """Show usable counts only."""
        return (
            f"InputCapabilities(exact_match={self.exact_match.usable_count}, "
            f"normalized_nll_per_utf8_byte={self.normalized_nll_per_utf8_byte.usable_count}, "
            f"judge={self.judge.usable_count})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the three objects in the specified member order."""
        return {
            "exact_match": self.exact_match.to_dict(),
            "normalized_nll_per_utf8_byte": self.normalized_nll_per_utf8_byte.to_dict(),
            "judge": self.judge.to_dict(),
        }


_EXACT_FACTS: Final = ("text_reference", "text_output", "no_row_error")
_NLL_FACTS: Final = ("bound_reference_likelihood", "no_row_error")
_JUDGE_FACTS: Final = ("text_input", "text_output", "text_or_absent_reference", "no_row_error")


def _capability(records: tuple[Record, ...], usable: Any, facts: tuple[str, ...]) -> Capability:
    unavailable = tuple(record.id for record in records if record.errored or not usable(record))
    return Capability(
        usable_count=len(records) - len(unavailable),
        unavailable_ids=unavailable,
        required_facts=facts,
    )


def evaluator_input_capabilities(run: Run) -> InputCapabilities:
    """Report which records can feed exact match, normalized NLL and judges.

    A record is usable only without an error, and when: exact match —
    ``expected`` and ``output`` are strings; normalized NLL — it has
    likelihood facts (already bound by run validation); judge — ``input``
    and ``output`` are strings and ``expected`` is a string or ``null``.
    Unavailable ids are listed in record order.
    """
    if not isinstance(run, Run):
        raise CapturedRunError("invalid_type", "run")
    records = run.records
    return InputCapabilities(
        exact_match=_capability(
            records,
            lambda r: type(r.expected) is str and type(r.output) is str,
            _EXACT_FACTS,
        ),
        normalized_nll_per_utf8_byte=_capability(
            records, lambda r: r.likelihood is not None, _NLL_FACTS
        ),
        judge=_capability(
            records,
            lambda r: (
                type(r.input) is str
                and type(r.output) is str
                and (r.expected is None or type(r.expected) is str)
            ),
            _JUDGE_FACTS,
        ),
    )
