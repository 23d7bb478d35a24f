"""``evaluator-json`` and ``evaluator-native-json`` (spec 11 §7).

* **``evaluator-json``** reads an ``invarlock/evaluator-export-v1`` envelope
  ``{format, evaluator, source_version, run_id, payload}`` (the file
  :func:`~sealeval.captured.export.export_evaluator_result` writes). The
  envelope is checked as the core checks it (closed object, evaluator one of
  the 19 names, non-blank ``source_version``, ``run_id`` text, payload an
  object or a non-empty array, nesting ≤64 levels); the caller's ``source``
  must be ``{name: evaluator, version: source_version}`` and ``run_id`` the
  envelope's (``export_identity_mismatch``); then the profile named by
  ``evaluator`` maps the payload (:mod:`~sealeval.captured.importers.profiles`).
* **``evaluator-native-json``** reads an evaluator's own JSON. ``source`` and
  ``run_id`` are required up front (``identities_required``): the profile is
  the one named by ``source.name``; the value is handled as the payload of an
  envelope with ``evaluator = source.name``, ``source_version =
  source.version`` (a ``langfuse`` file, the experiment result, is first
  wrapped in the Langfuse capture envelope with ``sdk_version =
  source.version``). This format is never chosen by ``--adapter auto``: an
  evaluator's raw JSON has no marker of its own.

Memory: the document is decoded once (≤128 MiB file); the envelope is checked
without copying the payload, and records are mapped one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from sealeval._validate import check_closed, check_text
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.export import EVALUATOR_NAMES, EXPORT_FORMAT, MAX_EXPORT_DEPTH
from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.jsonl import Binding, DocumentImporter, refuse, sniff
from sealeval.captured.importers.langfuse_json import LANGFUSE_FORMAT, langfuse_records
from sealeval.captured.importers.profiles import EvaluatorNativeProfile, profile_for
from sealeval.captured.likelihood import Source

__all__ = ["EvaluatorJsonImporter", "EvaluatorNativeJsonImporter"]

_MEMBERS: Final = ("format", "evaluator", "source_version", "run_id", "payload")

Prepared = Callable[[], Iterator[dict[str, Any]]]


def _check_members(
    document: object, field: str, required: Any, optional: Any = ()
) -> Mapping[str, Any]:
    return check_closed(document, field, required, optional, error=CapturedRunError)


def _check_text(value: object, field: str, **options: Any) -> str:
    return check_text(value, field, error=CapturedRunError, **options)


def _depth_within(value: object, limit: int) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True


def _check_export(
    evaluator: object, source_version: object, run_id: object, payload: object
) -> EvaluatorNativeProfile:
    """Apply the envelope rules of ``invarlock/evaluator-export-v1`` (without copying)."""
    if type(evaluator) is not str or evaluator not in EVALUATOR_NAMES:
        raise CapturedRunError("unsupported_evaluator", "evaluator")
    _check_text(source_version, "source_version", blank=False)
    _check_text(run_id, "run_id")
    if type(payload) is list:
        if not payload:
            raise CapturedRunError("no_records", "payload")
    elif type(payload) is not dict:
        raise CapturedRunError("invalid_type", "payload")
    if not _depth_within(payload, MAX_EXPORT_DEPTH - 1):
        raise CapturedRunError("too_deep", "payload")
    return profile_for(evaluator)


def _bound(
    profile: EvaluatorNativeProfile,
    export_source: Source,
    export_run_id: str,
    payload: Any,
    binding: Binding,
) -> Prepared:
    if binding.source is None or binding.source != export_source:
        raise CapturedRunError("export_identity_mismatch", "source")
    if binding.run_id is None or binding.run_id != export_run_id:
        raise CapturedRunError("export_identity_mismatch", "run_id")
    profile.check_identity(payload, export_source, export_run_id)
    return lambda: profile.map_payload(payload)


class EvaluatorJsonImporter(DocumentImporter):
    """The ``evaluator-json`` adapter (see the module docstring)."""

    name = "evaluator-json"

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a top-level object whose ``format`` is the evaluator export envelope's."""
        del path
        found = sniff(head)
        return found.kind == "object" and found.text("format") == EXPORT_FORMAT

    def parse(self, data: bytes, options: ImportOptions) -> Any:
        """Decode and check the envelope (returns the envelope)."""
        envelope = super().parse(data, options)
        document = _check_members(envelope, "export", _MEMBERS)
        if document["format"] != EXPORT_FORMAT or type(document["format"]) is not str:
            raise CapturedRunError("invalid_constant", "format")
        _check_export(
            document["evaluator"],
            document["source_version"],
            document["run_id"],
            document["payload"],
        )
        return document

    def bind(self, document: Any, binding: Binding, options: ImportOptions) -> Prepared:
        """Require the caller's source and run id to be the envelope's."""
        del options
        profile = profile_for(document["evaluator"])
        source = Source(document["evaluator"], document["source_version"])
        return _bound(profile, source, document["run_id"], document["payload"], binding)

    def unbound(self, document: Any, options: ImportOptions) -> Prepared:
        """Return the profile's mapping without identity checks (the Importer protocol path)."""
        del options
        profile = profile_for(document["evaluator"])
        payload = document["payload"]
        return lambda: profile.map_payload(payload)

    def rows(self, prepared: Any, options: ImportOptions) -> RecordSource:
        """Map the payload with the evaluator's profile."""
        del options
        return prepared()  # type: ignore[no-any-return]


class EvaluatorNativeJsonImporter(DocumentImporter):
    """The ``evaluator-native-json`` adapter (see the module docstring)."""

    name = "evaluator-native-json"

    def detect(self, head: bytes, path: Path) -> bool:
        """Never: raw evaluator JSON carries no marker (name the adapter explicitly)."""
        del head, path
        return False

    def bind(self, document: Any, binding: Binding, options: ImportOptions) -> Prepared:
        """Wrap the value as an export of ``source.name`` / ``source.version`` / ``run_id``."""
        del options
        source, run_id = binding.source, binding.run_id
        if source is None:
            raise refuse("identities_required", "source")
        if run_id is None:
            raise refuse("identities_required", "run_id")
        payload = document
        if source.name == "langfuse":
            payload = {"format": LANGFUSE_FORMAT, "sdk_version": source.version, "result": document}
        profile = _check_export(source.name, source.version, run_id, payload)
        return _bound(profile, source, run_id, payload, binding)

    def unbound(self, document: Any, options: ImportOptions) -> Prepared:
        """Use the profile named by ``options.source_name`` (the Importer protocol path)."""
        if options.source_name is None:
            raise refuse("identities_required", "source")
        profile = profile_for(options.source_name)
        if options.source_name == "langfuse":
            if type(document) is not dict:
                raise refuse("not_object", "result")
            return lambda: langfuse_records(document)
        return lambda: profile.map_payload(document)

    def rows(self, prepared: Any, options: ImportOptions) -> RecordSource:
        """Map the payload with the profile."""
        del options
        return prepared()  # type: ignore[no-any-return]
