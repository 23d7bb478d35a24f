"""Evidence envelopes (``openmed.eval.agent_release_source.v1``) and their files.

:func:`assess_evidence_file` turns the raw bytes of one envelope file into a
manifest entry and its parsed metrics (any problem is a status, never an
exception); :func:`parse_evidence_document` is the strict variant, refusing
with :class:`~sealeval.gates.candidate.vocabulary.EvidenceEnvelopeError`.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval._validate import check_closed
from sealeval.canonical import decode, digest_bytes
from sealeval.errors import CanonicalError
from sealeval.gates.candidate.vocabulary import (
    ENVELOPE_KEYS,
    SOURCE_SCHEMA,
    EvidenceEnvelopeError,
    is_source_sha,
)
from sealeval.gates.evidence import METRIC_KEYS, SLICE_KEYS, MetricEvidence
from sealeval.gates.registry import GATE_METRICS, GateError

__all__ = [
    "EvidenceFileEntry",
    "assess_evidence_file",
    "decode_evidence_bytes",
    "parse_evidence_document",
]

# ---------------------------------------------------------------------------
# Evidence envelopes


_BOMS: Final = (
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF16_BE, "utf-16"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF8, "utf-8-sig"),
)


def _detect_json_encoding(data: bytes) -> str:
    """Return the encoding of a JSON text per RFC 4627 section 3 (BOMs honoured)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    encoding = "utf-8"
    if len(data) >= 4:
        if not data[0]:
            encoding = "utf-16-be" if data[1] else "utf-32-be"
        elif not data[1]:
            encoding = "utf-16-le" if data[2] or data[3] else "utf-32-le"
    elif len(data) == 2:
        if not data[0]:
            encoding = "utf-16-be"
        elif not data[1]:
            encoding = "utf-16-le"
    return encoding


def _decode_autodetected(data: bytes) -> Any:
    """Decode JSON bytes in UTF-8/16/32 (with or without BOM), strictly otherwise."""
    try:
        text = data.decode(_detect_json_encoding(data))
    except UnicodeDecodeError:
        raise EvidenceEnvelopeError("not_utf8", "evidence") from None
    try:
        return decode(text)
    except CanonicalError as error:
        raise EvidenceEnvelopeError(error.code, "evidence") from None


def _check_keys(document: object, keys: frozenset[str], field: str) -> Mapping[str, Any]:
    return check_closed(
        document, field, keys, error=EvidenceEnvelopeError, type_code="invalid_document"
    )


def _envelope_source_sha(document: object) -> str:
    """Check the envelope's top level and return its ``source_sha``."""
    envelope = _check_keys(document, ENVELOPE_KEYS, "evidence")
    schema = envelope["schema_version"]
    if type(schema) is not str or schema != SOURCE_SCHEMA:
        raise EvidenceEnvelopeError("unsupported_version", "schema_version")
    source_sha = envelope["source_sha"]
    if not is_source_sha(source_sha):
        raise EvidenceEnvelopeError("invalid_sha", "source_sha")
    return str(source_sha)


def _parse_metric(record: object, field: str) -> MetricEvidence:
    document = _check_keys(record, METRIC_KEYS, field)
    if document["metric"] not in GATE_METRICS or type(document["metric"]) is not str:
        raise EvidenceEnvelopeError("unexpected_metric", f"{field}.metric")
    slices = document["slices"]
    if not isinstance(slices, list):
        raise EvidenceEnvelopeError("invalid_sequence", f"{field}.slices")
    for index, item in enumerate(slices):
        _check_keys(item, SLICE_KEYS, f"{field}.slices[{index}]")
    try:
        return MetricEvidence.from_dict(document)
    except GateError as error:
        name = error.field or "metric"
        raise type(error)(error.code, f"{field}.{name}") from None


def _parse_metrics(records: object, field: str) -> tuple[MetricEvidence, ...]:
    if not isinstance(records, list):
        raise EvidenceEnvelopeError("invalid_sequence", field)
    if not records:
        raise EvidenceEnvelopeError("empty", field)
    return tuple(_parse_metric(item, f"{field}[{index}]") for index, item in enumerate(records))


def parse_evidence_document(document: object) -> tuple[MetricEvidence, ...]:
    """Strictly parse decoded evidence: an array of MetricEvidence or an envelope.

    Every metric record must carry exactly the ten MetricEvidence keys, name
    one of the nine gates, and every slice exactly the six slice keys.

    Raises:
        EvidenceEnvelopeError: ``<field>: <code>`` for the shape of the file.
        GateError: ``metrics[i].<field>: <code>`` (or ``evidence[i]...``) for a
            record refused by :meth:`MetricEvidence.from_dict`.
    """
    if isinstance(document, list):
        return _parse_metrics(document, "evidence")
    _envelope_source_sha(document)
    assert isinstance(document, Mapping)
    return _parse_metrics(document["metrics"], "metrics")


def decode_evidence_bytes(data: bytes) -> Any:
    """Strictly decode an evidence file for ``sealeval gates evaluate`` (UTF-8 only).

    Raises:
        EvidenceEnvelopeError: ``evidence: <decoding code>``.
    """
    try:
        return decode(data)
    except CanonicalError as error:
        raise EvidenceEnvelopeError(error.code, "evidence") from None


#: Everything a parse of untrusted evidence may raise (``SealevalError`` is a
#: ``ValueError``); the assessment turns any of them into ``evidence_invalid``.
_PARSE_FAILURES: Final = (ValueError, TypeError, LookupError, ArithmeticError, RecursionError)


@dataclass(frozen=True, slots=True)
class EvidenceFileEntry:
    """The manifest entry of one ``--evidence`` file, with its accepted metrics."""

    file_digest: str | None
    metric_count: int
    status: str
    metrics: tuple[MetricEvidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the manifest entry ``{file_digest, metric_count, status}``."""
        return {
            "file_digest": self.file_digest,
            "metric_count": self.metric_count,
            "status": self.status,
        }


def assess_evidence_file(
    data: bytes | None, *, expected_sha: str, file_digest: str | None = None
) -> EvidenceFileEntry:
    """Assess one evidence envelope file; never raises.

    Args:
        data: the raw bytes, or ``None`` when the file is missing, not a
            regular non-symlink file, unreadable or larger than the reader's
            limit (then ``file_digest`` may still be given).
        expected_sha: the ``--source-sha`` value.
        file_digest: the digest of the file when ``data`` is ``None`` because
            the file was too large to parse (status ``evidence_invalid``).
    """
    if data is None:
        if file_digest is not None:
            return EvidenceFileEntry(file_digest, 0, "evidence_invalid")
        return EvidenceFileEntry(None, 0, "evidence_missing")
    digest = digest_bytes(data)
    try:
        document = _decode_autodetected(data)
        source_sha = _envelope_source_sha(document)
    except _PARSE_FAILURES:
        return EvidenceFileEntry(digest, 0, "evidence_invalid")
    if source_sha != expected_sha:
        return EvidenceFileEntry(digest, 0, "evidence_sha_mismatch")
    try:
        metrics = _parse_metrics(document["metrics"], "metrics")
    except _PARSE_FAILURES:
        return EvidenceFileEntry(digest, 0, "evidence_invalid")
    return EvidenceFileEntry(digest, len(metrics), "accepted", metrics)
