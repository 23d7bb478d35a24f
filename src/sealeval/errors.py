"""One base error carrying a closed code; messages never carry submitted values.

Every module that refuses input defines one subclass of :class:`SealevalError`
with the closed set of codes it may raise. An error is built from a code of
that set and, optionally, a *field name* chosen by library code from a fixed
vocabulary (for example ``component_digests.tokenizer``). The message is either
``"<field>: <code>"`` or ``"<code>"`` depending on the module's wire format, so
nothing a caller submitted can reach ``str()``, ``repr()`` or a log line.

Raise these errors with ``from None`` at public boundaries so that no provider
exception (which may quote input) is chained into a traceback.

Errors come in five families, so that a caller can catch what it handles:

- :class:`ManifestError` -- sealing, component digests, configuration documents,
  tool inventories (it is itself the sealed-manifest refusal);
- :class:`SessionError` -- evaluation sessions and their governance pieces;
- ``sealeval.gates.registry.GateError`` -- release gates, evidence adapters, the
  adversarial and recovery suites, the OMOP loader and the candidate runner (it
  is itself the gate-evaluation refusal);
- :class:`CapturedError` -- captured runs, importers, scorers, comparison,
  requests, packs, verification, receipts and reports;
- ``sealeval.attest.AttestationError`` -- in-toto attestations and their DSSE
  envelopes (it is itself the attestation refusal).

``except CapturedError`` catches every captured refusal. The canonical, YAML,
output and usage errors are shared by all families and derive from
:class:`SealevalError` directly.
"""

from __future__ import annotations

import re
from typing import ClassVar

__all__ = [
    "CanonicalError",
    "CapturedError",
    "ComponentDigestError",
    "ConfigDocumentError",
    "FileSystemError",
    "ManifestError",
    "OutputError",
    "SealevalError",
    "SessionError",
    "ToolInventoryError",
    "UsageError",
    "YamlError",
    "error_classes",
]

_FIELD = re.compile(r"(?:--)?[A-Za-z0-9_][A-Za-z0-9_.\[\]-]{0,127}")
_REGISTRY: list[type[SealevalError]] = []


class SealevalError(ValueError):
    """Base class of every sealeval refusal.

    Attributes:
        code: one member of the subclass's closed ``codes`` set.
        field: a library-chosen field name, or ``None``.
    """

    codes: ClassVar[frozenset[str]] = frozenset()
    #: Whether messages take the ``<field>: <code>`` form (else ``<code>``).
    field_in_message: ClassVar[bool] = True
    #: Short description used by ``docs/errors.md``.
    module: ClassVar[str] = "sealeval"
    #: When set, a code outside ``codes`` collapses to this code instead of
    #: being a programming error (the openmed session contract needs this).
    fallback_code: ClassVar[str | None] = None

    code: str
    field: str | None

    def __init_subclass__(cls, *, family: bool = False, **kwargs: object) -> None:
        """Register every concrete error class for documentation and tests.

        A *family* base (``class SessionError(SealevalError, family=True)``)
        has no codes of its own: it is never raised, only caught, and is not
        registered.
        """
        super().__init_subclass__(**kwargs)
        if not family:
            _REGISTRY.append(cls)

    def __init__(self, code: str, field: str | None = None) -> None:
        """Build an error from a closed code and an optional fixed field name."""
        if type(code) is not str or code not in type(self).codes:
            fallback = type(self).fallback_code
            if fallback is None:
                raise RuntimeError(f"{type(self).__name__}: code outside its closed set")
            code = fallback
        if field is not None and _FIELD.fullmatch(field) is None:
            raise RuntimeError(f"{type(self).__name__}: field name outside its grammar")
        self.code = code
        self.field = field
        with_field = field is not None and type(self).field_in_message
        super().__init__(f"{field}: {code}" if with_field else code)

    def __repr__(self) -> str:
        """Show the class, code and field only."""
        return f"{type(self).__name__}(code={self.code!r}, field={self.field!r})"


def error_classes() -> tuple[type[SealevalError], ...]:
    """Return every registered error class, in definition order."""
    return tuple(_REGISTRY)


class SessionError(SealevalError, family=True):
    """Family base of every evaluation-session refusal (never raised itself)."""

    module = "sealeval.session"


class CapturedError(SealevalError, family=True):
    """Family base of every captured-evaluation refusal (never raised itself)."""

    module = "sealeval.captured"


class CanonicalError(SealevalError):
    """Refusal of the canonical JSON encoder or the strict decoder."""

    module = "sealeval.canonical"
    field_in_message = False
    codes = frozenset(
        {
            # encoding
            "non_finite",
            "non_string_key",
            "unsupported_type",
            "unpaired_surrogate",
            "integer_too_long",
            "too_deep",
            # decoding
            "too_large",
            "byte_order_mark",
            "not_utf8",
            "invalid_json",
            "duplicate_key",
            "non_standard_constant",
            "non_finite_number",
            "string_too_long",
            "too_many_containers",
            "too_many_items",
        }
    )


class YamlError(SealevalError):
    """Refusal of the strict YAML loader."""

    module = "sealeval.strict_yaml"
    field_in_message = False
    codes = frozenset(
        {
            "too_large",
            "not_utf8",
            "invalid_yaml",
            "anchor_or_alias",
            "tag_or_directive",
            "too_many_nodes",
            "too_deep",
            "merge_key",
            "duplicate_key",
            "invalid_key",
            "invalid_boolean",
            "invalid_null",
            "invalid_integer",
            "invalid_float",
            "multiple_documents",
            "empty_document",
            "byte_order_mark",
            "unpaired_surrogate",
            "integer_too_long",
            "not_mapping",
            "include_key",
        }
    )


class ManifestError(SealevalError):
    """Refusal while sealing or reconstructing a sealed workflow manifest."""

    module = "sealeval.manifest.sealed"
    codes = frozenset(
        {
            "invalid_mapping",
            "invalid_keys",
            "invalid_digest",
            "unsupported_version",
            "payload_mismatch",
            "invalid_document",
            "unknown_field",
            "missing_field",
        }
    )


class ComponentDigestError(ManifestError):
    """Refusal of a component digest helper (file, directory tree)."""

    module = "sealeval.manifest.components"
    codes = frozenset(
        {
            "not_found",
            "not_regular_file",
            "not_directory",
            "symlink_escapes_tree",
            "dangling_symlink",
            "symlink_loop",
            "special_file",
            "undecodable_name",
            "too_deep",
            "too_many_entries",
            "file_changed",
            "unreadable",
            "unknown_kind",
        }
    )


class ConfigDocumentError(ManifestError):
    """Refusal of a configuration document before it is digested."""

    module = "sealeval.manifest.components"
    codes = frozenset(
        {
            "not_found",
            "not_regular_file",
            "too_large",
            "unknown_format",
            "invalid_document",
            "unreadable",
        }
    )


class ToolInventoryError(ManifestError):
    """Refusal of a tool inventory that is not canonical and PHI-safe."""

    module = "sealeval.manifest.tool_inventory"
    codes = frozenset(
        {
            "invalid_document",
            "empty_inventory",
            "too_many_tools",
            "invalid_tool",
            "duplicate_tool",
            "invalid_name",
            "invalid_schema",
            "unknown_keyword",
            "free_text",
            "credential",
            "endpoint",
            "arguments",
            "clinical_value",
            "path",
            "too_deep",
        }
    )


class FileSystemError(SealevalError):
    """Refusal of the hardened file-system edge (``sealeval._fs``).

    Family-neutral: callers translate it into their own family's error with
    ``sealeval._fs.translated`` (the codes below are what they map).
    """

    module = "sealeval._fs"
    codes = frozenset(
        {
            "not_found",
            "not_regular_file",
            "not_directory",
            "unreadable",
            "too_large",
            "file_changed",
            "special_file",
            "symlink_escapes_tree",
            "dangling_symlink",
            "symlink_loop",
            "undecodable_name",
            "too_deep",
            "too_many_entries",
            "output_exists",
            "output_parent_missing",
            "output_unwritable",
            "unsafe_destination",
            "unsupported_platform",
        }
    )


class OutputError(SealevalError):
    """Refusal to publish an output file."""

    module = "sealeval.io"
    codes = frozenset(
        {"output_exists", "output_unwritable", "output_parent_missing", "unsafe_destination"}
    )


class UsageError(SealevalError):
    """Refusal of a command-line argument (the CLI exits with status 2)."""

    module = "sealeval.cli"
    codes = frozenset(
        {
            "unknown_component",
            "unknown_kind",
            "invalid_assignment",
            "duplicate_component",
            "demo_dir_not_ours",
            "unknown_suite",
            # click usage errors, reduced (sealeval.cli._common.closed_usage_errors)
            "unknown_option",
            "missing_option",
            "missing_argument",
            "invalid_choice",
            "invalid_value",
            "invalid_option_usage",
            "invalid_argument",
            "unexpected_argument",
            "unknown_command",
            "missing_command",
            # operating-system errors that escaped a command
            "not_found",
            "permission_denied",
            "no_space",
            "os_error",
            "model_signature_incomplete",
            "model_signature_needs_directory",
        }
    )
