"""The session configuration document (``sealeval.session_config.v1``) and its loader.

One JSON or YAML document names everything an official attempt needs: the
session key, the store, the sealed manifest and the component paths (or
digests) of the fresh snapshot, the holdout commitment and its four private
manifests, the cases, the candidate identity and manifests, the runner,
scorer and reviewer as Python entry points with their declared digests, the
rubric, the reviewer's conflict-of-interest declaration, the randomization
key, the three forensics corpora, the feedback policy and the ledger usage
file. See ``docs/sessions.md`` ("Running sessions from the command line").

The module has three layers:

* :func:`parse_session_config` is **pure**: it checks the document's shape
  and every inline value and returns a :class:`SessionConfig` holding file
  *references* (safe relative paths), never file contents;
* :func:`read_session_config` and :func:`load_session_inputs` are a thin
  loader: they read every named file strictly, import the entry points and
  return a :class:`SessionInputs`;
* :func:`open_session` locks and restores the ledger usage file, proves it
  can be rewritten atomically, opens the store and constructs the
  :class:`~sealeval.session.session.EvaluationSession`.

Every refusal is a :class:`SessionConfigError` with the message
``<field>: <code>``; the field is a fixed name (``cases``,
``providers.runner.entry_point``, ...), never a value or a path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from sealeval import _lock
from sealeval._fs import open_lock_file, read_regular, replace_atomic, translated
from sealeval._validate import check_closed
from sealeval.canonical import is_digest
from sealeval.errors import ConfigDocumentError, FileSystemError, SessionError
from sealeval.manifest.components import load_config_document
from sealeval.manifest.sealed import COMPONENTS, SealedWorkflowManifest
from sealeval.manifest.snapshot import KINDS, snapshot_components
from sealeval.session.adjudication import MIN_KEY_BYTES
from sealeval.session.budget import (
    FeedbackBudgetDecision,
    FeedbackBudgetLedger,
    FeedbackBudgetPolicy,
    FeedbackBudgetSnapshot,
    LedgerUsage,
    SubmissionUsage,
)
from sealeval.session.cases import (
    CONFLICT_STATUSES,
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    is_reference,
)
from sealeval.session.holdout import MANIFEST_KINDS, HoldoutCommitment
from sealeval.session.record import MAX_VALUE
from sealeval.session.session import BudgetLedger, EvaluationSession
from sealeval.session.store import SessionStore
from sealeval.session.store_factory import (
    is_postgres_location,
    open_budget_ledger,
    open_session_store,
)

__all__ = [
    "CLOCK_ENVIRONMENT_VARIABLE",
    "CONFIG_FORMAT",
    "CORPORA",
    "MAX_KEY_BYTES",
    "MAX_REFERENCE_LENGTH",
    "ComponentSource",
    "LedgerUsageFile",
    "OpenedSession",
    "PersistedLedger",
    "ProviderReference",
    "SessionConfig",
    "SessionConfigError",
    "SessionInputs",
    "check_reference",
    "load_session_inputs",
    "open_session",
    "parse_session_config",
    "read_session_config",
    "session_clock",
]

#: The ``format`` string of a v1 session configuration document.
CONFIG_FORMAT: Final = "sealeval.session_config.v1"
#: Environment variable that fixes the session clock (every read returns its value).
CLOCK_ENVIRONMENT_VARIABLE: Final = "SEALEVAL_SESSION_CLOCK"
#: The three forensics corpora, in binding order.
CORPORA: Final = ("public", "shadow", "canaries")
#: Longest accepted file reference, in characters.
MAX_REFERENCE_LENGTH: Final = 1024
#: Largest accepted randomization key file, in bytes.
MAX_KEY_BYTES: Final = 1 << 20
#: Largest accepted ledger usage file, in bytes.
_MAX_USAGE_BYTES: Final = 64 * 1024 * 1024

_TOP_KEYS: Final = (
    "format",
    "session_key",
    "store",
    "manifest",
    "components",
    "holdout",
    "cases",
    "candidate",
    "providers",
    "rubric",
    "conflict_of_interest",
    "randomization_key",
    "corpora",
    "feedback",
)
_PROVIDER_ORDER: Final = ("runner", "scorer", "review")
_CONFLICT_KEYS: Final = ("reviewer_ref", "declaration_digest", "status")
_CASE_KEYS: Final = frozenset({"candidate_outputs", "case_ref", "source_evidence"})
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_IDENTIFIER: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED: Final = rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})*"
_ENTRY_POINT: Final = re.compile(rf"({_DOTTED}):({_DOTTED})")
_CLOCK_TEXT: Final = re.compile(r"0|[1-9][0-9]{0,18}")


class SessionConfigError(SessionError):
    """Refusal of a session configuration, a file it names, or a session command input.

    The message is ``<field>: <code>``; the field is a fixed configuration
    path such as ``holdout.manifests.case`` or ``providers.runner``.
    """

    module = "sealeval.session.config"
    field_in_message = True
    codes = frozenset(
        {
            # the document
            "invalid_document",
            "unsupported_version",
            "unknown_field",
            "missing_field",
            "invalid_type",
            "invalid_digest",
            "invalid_value",
            # file references and the store
            "absolute_path",
            "parent_reference",
            "backslash",
            "url",
            "invalid_path",
            "unsupported_store",
            "shared_store_needs_durable_ledger",
            # components and providers
            "unknown_kind",
            "invalid_entry_point",
            "import_failed",
            "not_callable",
            # named files
            "not_found",
            "not_regular_file",
            "unreadable",
            "too_large",
            "unknown_format",
            "invalid_content",
            "too_short",
            # cross-checks
            "missing_identity",
            "manifest_mismatch",
            "epoch_mismatch",
            # the ledger usage file and the clock
            "unwritable",
            "locked",
            "invalid_clock",
        }
    )


def _fail(code: str, field: str) -> NoReturn:
    raise SessionConfigError(code, field)


# ---------------------------------------------------------------------------
# The pure layer


@dataclass(frozen=True, slots=True)
class ComponentSource:
    """Where one component's fresh digest comes from: a path (and kind) or a digest."""

    path: str | None = None
    kind: str | None = None
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderReference:
    """A provider: ``package.module:function`` and the digest the evaluator declares for it."""

    entry_point: str
    digest: str


@dataclass(frozen=True, slots=True, repr=False)
class SessionConfig:
    """A parsed ``sealeval.session_config.v1`` document (file references, not contents).

    Every ``str`` naming a file is a safe relative reference (see
    :func:`check_reference`), resolved against the configuration file's
    folder by the loader.
    """

    session_key: str
    store: str
    manifest: str
    components: Mapping[str, ComponentSource]
    holdout_commitment: str
    holdout_manifests: Mapping[str, str]
    cases: str
    candidate_identity: str
    candidate_manifests: Mapping[str, str]
    providers: Mapping[str, ProviderReference]
    rubric: str
    conflict_of_interest: ConflictOfInterestMetadata
    randomization_key: str
    corpora: Mapping[str, str]
    feedback_policy: str
    #: The reference-compatible in-memory ledger's usage file, or ``None`` for
    #: the durable ledger kept in the session store itself.
    ledger_usage: str | None

    def __repr__(self) -> str:
        """Show nothing but the type: the document names private files and identities."""
        return "SessionConfig(<redacted>)"


def check_reference(value: object, field: str) -> str:
    """Return ``value`` if it is a safe relative file reference, else refuse it.

    A safe reference is a ``str`` of 1 to 1024 characters without control
    characters, not a URL (``scheme:``), not absolute (leading ``/``),
    without backslashes, without ``..`` segments, and without empty or ``.``
    segments or any other ``:``.

    Raises:
        SessionConfigError: ``<field>: invalid_type | invalid_path | url |
            absolute_path | backslash | parent_reference``.
    """
    if type(value) is not str:
        _fail("invalid_type", field)
    if not value or len(value) > MAX_REFERENCE_LENGTH or _CONTROL.search(value):
        _fail("invalid_path", field)
    if _SCHEME.match(value):
        _fail("url", field)
    if value.startswith("/"):
        _fail("absolute_path", field)
    if "\\" in value:
        _fail("backslash", field)
    segments = value.split("/")
    if ".." in segments:
        _fail("parent_reference", field)
    if any(segment in ("", ".") for segment in segments) or ":" in value:
        _fail("invalid_path", field)
    return value


def _mapping(value: object, field: str, *, code: str = "invalid_type") -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _fail(code, field)
    return value


def _closed(
    value: object, field: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    """Return a mapping with exactly ``keys`` (+ ``optional``): unknown first, then missing.

    A missing member is named ``<field>.<key>``, the first in the order of ``keys``.
    """
    return check_closed(
        value, field, keys, optional, error=SessionConfigError, missing_prefix=f"{field}."
    )


def _digest(value: object, field: str) -> str:
    if not is_digest(value):
        _fail("invalid_digest", field)
    return value  # type: ignore[return-value]


def _store(value: object) -> str:
    """Return a PostgreSQL DSN unchanged, or a checked relative SQLite file reference."""
    if is_postgres_location(value):
        return value  # type: ignore[return-value]
    if type(value) is str and _SCHEME.match(value) and "://" in value:
        _fail("unsupported_store", "store")
    return check_reference(value, "store")


def _component(name: str, value: object) -> ComponentSource:
    field = f"components.{name}"
    entry = _mapping(value, field)
    if "digest" in entry:
        _closed(entry, field, ("digest",))
        return ComponentSource(digest=_digest(entry["digest"], f"{field}.digest"))
    _closed(entry, field, ("path",), ("kind",))
    path = check_reference(entry["path"], f"{field}.path")
    kind = entry.get("kind")
    if "kind" in entry and (type(kind) is not str or kind not in KINDS):
        _fail("unknown_kind", f"{field}.kind")
    return ComponentSource(path=path, kind=kind)


def _components(value: object) -> dict[str, ComponentSource]:
    document = _closed(value, "components", COMPONENTS)
    return {name: _component(name, document[name]) for name in COMPONENTS}


def _provider(name: str, value: object) -> ProviderReference:
    field = f"providers.{name}"
    entry = _closed(value, field, ("entry_point", "digest"))
    entry_point = entry["entry_point"]
    if type(entry_point) is not str or _ENTRY_POINT.fullmatch(entry_point) is None:
        _fail("invalid_entry_point", f"{field}.entry_point")
    return ProviderReference(
        entry_point=entry_point, digest=_digest(entry["digest"], f"{field}.digest")
    )


def _candidate(value: object) -> tuple[str, dict[str, str]]:
    document = _closed(value, "candidate", ("identity", "manifests"))
    identity = document["identity"]
    if not is_reference(identity):
        _fail("invalid_value", "candidate.identity")
    given = _mapping(document["manifests"], "candidate.manifests")
    if not given or not all(map(is_reference, given)):
        _fail("invalid_value", "candidate.manifests")
    if not all(map(is_digest, given.values())):
        _fail("invalid_digest", "candidate.manifests")
    if identity not in given:
        _fail("missing_identity", "candidate.manifests")
    return identity, dict(given)


def _conflict(value: object) -> ConflictOfInterestMetadata:
    document = _closed(value, "conflict_of_interest", _CONFLICT_KEYS)
    if not is_reference(document["reviewer_ref"]):
        _fail("invalid_value", "conflict_of_interest.reviewer_ref")
    declaration = _digest(document["declaration_digest"], "conflict_of_interest.declaration_digest")
    status = document["status"]
    if type(status) is not str or status not in CONFLICT_STATUSES:
        _fail("invalid_value", "conflict_of_interest.status")
    return ConflictOfInterestMetadata(
        reviewer_ref=document["reviewer_ref"], declaration_digest=declaration, status=status
    )


def parse_session_config(document: object) -> SessionConfig:
    """Strictly parse a decoded ``sealeval.session_config.v1`` document (no I/O).

    Checks, first failure wins: the document is a mapping
    (``config: invalid_document``); ``format`` is present and exactly
    :data:`CONFIG_FORMAT` (``format: missing_field | unsupported_version``);
    no unknown top-level key (``config: unknown_field``); every key present
    (``<key>: missing_field``); then each value in document order.

    Raises:
        SessionConfigError: ``<field>: <code>``, never quoting a value.
    """
    top = _mapping(document, "config", code="invalid_document")
    if "format" not in top:
        _fail("missing_field", "format")
    if type(top["format"]) is not str or top["format"] != CONFIG_FORMAT:
        _fail("unsupported_version", "format")
    check_closed(top, "config", _TOP_KEYS, error=SessionConfigError, missing_prefix="")
    session_key = _digest(top["session_key"], "session_key")
    store = _store(top["store"])
    manifest = check_reference(top["manifest"], "manifest")
    components = _components(top["components"])
    holdout = _closed(top["holdout"], "holdout", ("commitment", "manifests"))
    commitment = check_reference(holdout["commitment"], "holdout.commitment")
    listed = _closed(holdout["manifests"], "holdout.manifests", MANIFEST_KINDS)
    holdout_manifests = {
        kind: check_reference(listed[kind], f"holdout.manifests.{kind}") for kind in MANIFEST_KINDS
    }
    cases = check_reference(top["cases"], "cases")
    identity, candidate_manifests = _candidate(top["candidate"])
    listed = _closed(top["providers"], "providers", _PROVIDER_ORDER)
    providers = {name: _provider(name, listed[name]) for name in _PROVIDER_ORDER}
    rubric = check_reference(top["rubric"], "rubric")
    conflict = _conflict(top["conflict_of_interest"])
    key = check_reference(top["randomization_key"], "randomization_key")
    listed = _closed(top["corpora"], "corpora", CORPORA)
    corpora = {name: check_reference(listed[name], f"corpora.{name}") for name in CORPORA}
    feedback = _closed(top["feedback"], "feedback", ("policy",), ("ledger_usage",))
    ledger_usage = feedback.get("ledger_usage")
    if ledger_usage is not None and is_postgres_location(store):
        # A usage file beside one host cannot serialise a budget shared by many.
        _fail("shared_store_needs_durable_ledger", "feedback.ledger_usage")
    return SessionConfig(
        session_key=session_key,
        store=store,
        manifest=manifest,
        components=components,
        holdout_commitment=commitment,
        holdout_manifests=holdout_manifests,
        cases=cases,
        candidate_identity=identity,
        candidate_manifests=candidate_manifests,
        providers=providers,
        rubric=rubric,
        conflict_of_interest=conflict,
        randomization_key=key,
        corpora=corpora,
        feedback_policy=check_reference(feedback["policy"], "feedback.policy"),
        ledger_usage=(
            None if ledger_usage is None else check_reference(ledger_usage, "feedback.ledger_usage")
        ),
    )


def session_clock(environ: Mapping[str, str]) -> Callable[[], int]:
    """Return the session clock: wall-clock integer seconds, or a fixed test value.

    When ``environ`` holds :data:`CLOCK_ENVIRONMENT_VARIABLE`, every read
    returns its value (a decimal integer in ``0 .. 2**63 - 1``, no sign, no
    leading zeros).

    Raises:
        SessionConfigError: ``clock: invalid_clock`` for any other value.
    """
    text = environ.get(CLOCK_ENVIRONMENT_VARIABLE)
    if text is None:
        return lambda: math.floor(time.time())
    if _CLOCK_TEXT.fullmatch(text) is None or int(text) > MAX_VALUE:
        _fail("invalid_clock", "clock")
    fixed = int(text)
    return lambda: fixed


# ---------------------------------------------------------------------------
# The loader


@dataclass(frozen=True, slots=True, repr=False)
class SessionInputs:
    """Everything a session configuration names, loaded and checked.

    Holds clinical text, identities and the raw randomization key: its
    ``repr`` shows counts only and it must never be logged or persisted.
    """

    config: SessionConfig
    base: Path
    manifest: SealedWorkflowManifest
    component_paths: Mapping[str, Path]
    component_digests: Mapping[str, str]
    component_kinds: Mapping[str, str]
    holdout: HoldoutCommitment
    holdout_manifests: Mapping[str, tuple[str, ...]]
    cases: tuple[ComparisonCase, ...]
    providers: Mapping[str, Callable[..., object]]
    rubric: tuple[RubricCriterion, ...]
    randomization_key: bytes
    corpora: Mapping[str, tuple[str, ...]]
    policy: FeedbackBudgetPolicy

    def __repr__(self) -> str:
        """Show counts only."""
        return f"SessionInputs(cases={len(self.cases)})"

    def __reduce__(self) -> NoReturn:
        """Refuse pickling: the inputs hold the randomization key and clinical text."""
        raise TypeError("SessionInputs cannot be pickled")

    def snapshot(self) -> dict[str, str]:
        """Compute the fresh component snapshot (as ``sealeval manifest verify`` does)."""
        return snapshot_components(
            self.component_paths, self.component_digests, self.component_kinds
        )


def _load(base: Path, reference: str, field: str) -> Any:
    try:
        return load_config_document(base / reference)
    except ConfigDocumentError as error:
        raise SessionConfigError(error.code, field) from None


_FAILED: Final = object()


def _build(field: str, action: Callable[[], Any]) -> Any:
    """Run a constructor over loaded content; any refusal is ``<field>: invalid_content``.

    The constructors refuse with their family's closed codes (the shape checks
    here with ``invalid_content`` itself); whatever they raise is replaced by
    ``<field>: invalid_content``, its message and cause dropped unseen.
    """
    try:
        result = action()
    except Exception:  # noqa: BLE001 - the constructor's error is dropped unseen
        result = _FAILED
    if result is _FAILED:
        _fail("invalid_content", field)
    return result


def _read_bytes(path: Path, field: str, limit: int) -> bytes:
    """Read a regular file of at most ``limit`` bytes, verbatim (``sealeval._fs``: never blocks)."""
    with translated(SessionConfigError, field, {"file_changed": "unreadable"}):
        return read_regular(path, limit=limit, follow_symlinks=True)


def read_session_config(path: str | os.PathLike[str]) -> tuple[SessionConfig, Path]:
    """Read and parse a configuration file; return it and its folder (absolute).

    The format comes from the suffix (``.json``, ``.yaml``, ``.yml``).

    Raises:
        SessionConfigError: ``config: not_found | not_regular_file | unreadable
            | too_large | unknown_format | invalid_document``, then as
            :func:`parse_session_config`.
    """
    source = Path(path).absolute()
    try:
        document = load_config_document(source)
    except ConfigDocumentError as error:
        raise SessionConfigError(error.code, "config") from None
    return parse_session_config(document), source.parent


def _digest_list(value: object, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(map(is_digest, value)):
        _fail("invalid_content", field)
    return tuple(value)


def _texts(value: object, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        _fail("invalid_content", field)
    if not all(type(item) is str and item.strip() for item in value):
        _fail("invalid_content", field)
    return tuple(value)


def _case(value: object) -> ComparisonCase:
    if not isinstance(value, Mapping) or set(value) != _CASE_KEYS:
        _fail("invalid_content", "cases")
    evidence = value["source_evidence"]
    if not isinstance(evidence, list):
        _fail("invalid_content", "cases")
    return ComparisonCase(
        case_ref=value["case_ref"],
        source_evidence=tuple(SourceEvidence.from_dict(item) for item in evidence),
        candidate_outputs=value["candidate_outputs"],
    )


def _cases(value: object) -> tuple[ComparisonCase, ...]:
    if not isinstance(value, list) or not value:
        _fail("invalid_content", "cases")
    cases = tuple(_case(item) for item in value)
    if len({case.case_ref for case in cases}) != len(cases):
        _fail("invalid_content", "cases")
    return cases


def _rubric(value: object) -> tuple[RubricCriterion, ...]:
    if not isinstance(value, list) or not value:
        _fail("invalid_content", "rubric")
    return tuple(RubricCriterion.from_dict(item) for item in value)


def _import_entry_point(reference: ProviderReference, field: str) -> Callable[..., object]:
    match = _ENTRY_POINT.fullmatch(reference.entry_point)
    if match is None:  # pragma: no cover - parse_session_config checked the grammar
        _fail("invalid_entry_point", f"{field}.entry_point")
    found: object = None
    failed = False
    try:
        found = importlib.import_module(match.group(1))
        for name in match.group(2).split("."):
            found = getattr(found, name)
    except Exception:  # noqa: BLE001 - an import error may quote the module's source
        failed = True
    if failed:
        _fail("import_failed", field)
    if not callable(found):
        _fail("not_callable", field)
    return found


def load_session_inputs(config: SessionConfig, base: Path) -> SessionInputs:
    """Load every file a parsed configuration names and import its entry points.

    Files are read relative to ``base`` in document order; each failure is
    ``<field>: <code>`` with the configuration field of the file
    (``not_found``, ``not_regular_file``, ``unreadable``, ``too_large``,
    ``unknown_format``, ``invalid_document`` for the file itself,
    ``invalid_content`` for a document its type refuses), then the
    cross-checks ``candidate.manifests: manifest_mismatch``,
    ``randomization_key: too_short`` and ``feedback.policy: epoch_mismatch``.
    The component files are not read here: they are digested at ``verify``
    and again at ``run_cases``. The ledger usage file is read by
    :func:`open_session`.

    Raises:
        SessionConfigError: as above, plus ``providers.<name>: import_failed
            | not_callable``.
    """
    loaded_manifest = _load(base, config.manifest, "manifest")
    manifest = _build("manifest", lambda: SealedWorkflowManifest.from_dict(loaded_manifest))
    if config.candidate_manifests[config.candidate_identity] != manifest.manifest_digest:
        _fail("manifest_mismatch", "candidate.manifests")
    paths = {
        name: base / source.path
        for name, source in config.components.items()
        if source.path is not None
    }
    digests = {
        name: source.digest
        for name, source in config.components.items()
        if source.digest is not None
    }
    kinds = {
        name: source.kind for name, source in config.components.items() if source.kind is not None
    }
    commitment = _load(base, config.holdout_commitment, "holdout.commitment")
    holdout = _build("holdout.commitment", lambda: HoldoutCommitment.from_dict(commitment))
    holdout_manifests: dict[str, tuple[str, ...]] = {}
    for kind in MANIFEST_KINDS:
        field = f"holdout.manifests.{kind}"
        items = _load(base, config.holdout_manifests[kind], field)
        holdout_manifests[kind] = _build(field, functools.partial(_digest_list, items, field))
    loaded_cases = _load(base, config.cases, "cases")
    cases = _build("cases", lambda: _cases(loaded_cases))
    providers = {
        name: _import_entry_point(reference, f"providers.{name}")
        for name, reference in config.providers.items()
    }
    loaded_rubric = _load(base, config.rubric, "rubric")
    rubric = _build("rubric", lambda: _rubric(loaded_rubric))
    key = _read_bytes(base / config.randomization_key, "randomization_key", MAX_KEY_BYTES)
    if len(key) < MIN_KEY_BYTES:
        _fail("too_short", "randomization_key")
    corpora: dict[str, tuple[str, ...]] = {}
    for name in CORPORA:
        field = f"corpora.{name}"
        items = _load(base, config.corpora[name], field)
        corpora[name] = _build(field, functools.partial(_texts, items, field))
    loaded_policy = _load(base, config.feedback_policy, "feedback.policy")
    policy = _build("feedback.policy", lambda: FeedbackBudgetPolicy.from_dict(loaded_policy))
    if policy.epoch_digest != holdout.commitment_digest:
        _fail("epoch_mismatch", "feedback.policy")
    return SessionInputs(
        config=config,
        base=base,
        manifest=manifest,
        component_paths=paths,
        component_digests=digests,
        component_kinds=kinds,
        holdout=holdout,
        holdout_manifests=holdout_manifests,
        cases=cases,
        providers=providers,
        rubric=rubric,
        randomization_key=key,
        corpora=corpora,
        policy=policy,
    )


# ---------------------------------------------------------------------------
# The ledger usage file


_USAGE_FIELD: Final = "feedback.ledger_usage"


class LedgerUsageFile:
    """The ledger usage file: exclusively locked, read strictly, replaced atomically.

    :meth:`lock` takes a non-blocking ``flock`` on ``<file>.lock`` (POSIX);
    :meth:`read` returns the stored :class:`LedgerUsage` (empty when the file
    does not exist yet); :meth:`write` replaces the file through a temporary
    file, ``fsync``, ``rename`` and an ``fsync`` of the folder.
    """

    __slots__ = ("_lock_fd", "_path")

    def __init__(self, path: Path) -> None:
        """Bind the file (nothing is opened until :meth:`lock`)."""
        self._path = path
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the exclusive lock on ``<usage file>.lock`` (created when absent)."""
        lock_path = self._path.with_name(self._path.name + ".lock")
        try:
            fd = open_lock_file(lock_path, create=True)
        except FileSystemError:  # a symlink, a folder, a FIFO, or no permission
            _fail("unwritable", _USAGE_FIELD)
        try:
            _lock.lock_exclusive(fd)
        except OSError as error:
            os.close(fd)
            code = "locked" if isinstance(error, BlockingIOError) else "unwritable"
            raise SessionConfigError(code, _USAGE_FIELD) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        """Release the lock (the lock file stays: removing it would race)."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                _lock.unlock(self._lock_fd)
            os.close(self._lock_fd)
            self._lock_fd = None

    def read(self) -> LedgerUsage:
        """Return the stored usage, or an empty one when the file does not exist yet."""
        if not os.path.lexists(self._path):
            return LedgerUsage()
        data = _read_bytes(self._path, _USAGE_FIELD, _MAX_USAGE_BYTES)
        usage: LedgerUsage = _build(_USAGE_FIELD, lambda: LedgerUsage.from_json(data))
        return usage

    def write(self, usage: LedgerUsage) -> None:
        """Replace the file atomically (temporary file, fsync, rename, fsync folder)."""
        data = usage.to_json().encode("ascii")
        with translated(SessionConfigError, _USAGE_FIELD, default="unwritable"):
            replace_atomic(self._path, data, mode=0o600)


class RecordingLedger:
    """Any budget ledger, remembering the last decision it returned (for the CLI outcome).

    Every call is delegated unchanged; an official attempt goes through the
    wrapped ledger (whose ``record_official_attempt`` calls the one core,
    :func:`sealeval.session.budget.record_official_attempt`), then
    :meth:`_recorded` runs before the decision is returned.
    """

    __slots__ = ("_ledger", "last_decision")

    def __init__(self, ledger: BudgetLedger) -> None:
        """Wrap ``ledger``."""
        self._ledger = ledger
        #: The decision of the last official attempt (a denial included), or ``None``.
        self.last_decision: FeedbackBudgetDecision | None = None

    def __repr__(self) -> str:
        """Show nothing of the usage."""
        return f"{type(self).__name__}()"

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        """Return the policy of an epoch."""
        return self._ledger.policy_for(epoch_digest)

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        """Return the usage snapshot of a pair."""
        return self._ledger.snapshot(epoch_digest, submission_digest)

    def record_official_attempt(
        self,
        epoch_digest: object,
        submission_digest: object,
        *,
        score: object = None,
        infrastructure_failure_digest: object = None,
    ) -> FeedbackBudgetDecision:
        """Record one attempt through the wrapped ledger, run :meth:`_recorded`, remember it."""
        decision = self._ledger.record_official_attempt(
            epoch_digest,
            submission_digest,
            score=score,
            infrastructure_failure_digest=infrastructure_failure_digest,
        )
        self._recorded()
        self.last_decision = decision
        return decision

    def _recorded(self) -> None:
        """Run after every official attempt, before its decision is returned (nothing here)."""


class PersistedLedger(RecordingLedger):
    """A :class:`~sealeval.session.session.BudgetLedger` whose usage survives the process.

    Wraps an in-memory :class:`FeedbackBudgetLedger` restored from the
    ledger usage file (entries of this policy's epoch; entries of other
    epochs are kept untouched) and rewrites the file atomically after every
    official attempt, *before* the decision is returned to the session. A
    failed write raises, so the session stops with ``feedback_failed`` and
    releases nothing (its claim stays: lost feedback, never twice).
    """

    __slots__ = ("_file", "_memory", "_others")

    def __init__(
        self, policy: FeedbackBudgetPolicy, usage: LedgerUsage, file: LedgerUsageFile
    ) -> None:
        """Restore the ledger from ``usage``.

        Raises:
            SessionConfigError: ``feedback.ledger_usage: invalid_content``
                when the stored usage contradicts the policy.
        """
        epoch = policy.epoch_digest
        ours = {key: value for key, value in usage.entries.items() if key[0] == epoch}
        self._others: dict[tuple[str, str], SubmissionUsage] = {
            key: value for key, value in usage.entries.items() if key[0] != epoch
        }
        self._memory: FeedbackBudgetLedger = _build(
            _USAGE_FIELD, lambda: FeedbackBudgetLedger([policy], usage=LedgerUsage(entries=ours))
        )
        self._file = file
        super().__init__(self._memory)

    def usage(self) -> LedgerUsage:
        """Return the whole usage to persist: this epoch's entries and the others."""
        return LedgerUsage(entries={**self._others, **self._memory.export_usage().entries})

    def _recorded(self) -> None:
        """Persist the usage atomically (a failed write raises: no decision is returned)."""
        self._file.write(self.usage())


@dataclass(frozen=True, slots=True, repr=False)
class OpenedSession:
    """A constructed session and the ledger it charges."""

    session: EvaluationSession
    ledger: PersistedLedger | RecordingLedger
    inputs: SessionInputs

    def __repr__(self) -> str:
        """Show nothing of the inputs."""
        return "OpenedSession()"


def _store_location(config: SessionConfig, base: Path) -> str:
    """Return a PostgreSQL DSN as given, or a SQLite reference resolved against the folder."""
    if is_postgres_location(config.store):
        return config.store
    return str(base / config.store)


@contextlib.contextmanager
def open_session(
    path: str | os.PathLike[str],
    *,
    clock: Callable[[], int],
    store_override: str | None = None,
) -> Iterator[OpenedSession]:
    """Load a configuration and yield its session with the ledger it charges.

    Order: read and parse the configuration (``store_override``, e.g.
    ``sealeval session run --store postgresql://...``, replaces its ``store``
    and follows the same rules); load every named file and import the
    providers; then either

    * without ``feedback.ledger_usage``: open the store and its **durable
      ledger** (budget policy and usage in the store's database, charged in
      the same transaction that uses up the release claim), or
    * with ``feedback.ledger_usage`` (the reference-compatible in-memory
      ledger, SQLite only): lock the usage file (``<file>.lock``), read it (an
      absent file is an empty usage) and rewrite it atomically — the proof
      that it can be persisted — before the store or any session step is
      touched; the lock is held until the block exits;

    and construct the session.

    Raises:
        SessionConfigError: as :func:`read_session_config` and
            :func:`load_session_inputs`, ``store: unsupported_store``,
            ``feedback.ledger_usage: shared_store_needs_durable_ledger``, or
            ``feedback.ledger_usage: unwritable | locked | not_regular_file |
            unreadable | too_large | invalid_content``.
        EvaluationSessionError: from the store, the ledger and session
            construction (never quoting the store location).
    """
    config, base = read_session_config(path)
    if store_override is not None:
        config = dataclasses.replace(config, store=_store(store_override))
        if config.ledger_usage is not None and is_postgres_location(config.store):
            _fail("shared_store_needs_durable_ledger", "feedback.ledger_usage")
    inputs = load_session_inputs(config, base)
    if config.ledger_usage is None:
        store = open_session_store(_store_location(config, base))
        durable = RecordingLedger(open_budget_ledger(store, [inputs.policy]))
        yield OpenedSession(
            session=_construct(config, inputs, ledger=durable, store=store, clock=clock),
            ledger=durable,
            inputs=inputs,
        )
        return
    usage_file = LedgerUsageFile(base / config.ledger_usage)
    usage_file.lock()
    try:
        usage = usage_file.read()
        ledger = PersistedLedger(inputs.policy, usage, usage_file)
        usage_file.write(ledger.usage())
        store = open_session_store(_store_location(config, base))
        yield OpenedSession(
            session=_construct(config, inputs, ledger=ledger, store=store, clock=clock),
            ledger=ledger,
            inputs=inputs,
        )
    finally:
        usage_file.unlock()


def _construct(
    config: SessionConfig,
    inputs: SessionInputs,
    *,
    ledger: BudgetLedger,
    store: SessionStore,
    clock: Callable[[], int],
) -> EvaluationSession:
    """Build the session from a parsed configuration and its loaded inputs."""
    return EvaluationSession(
        session_key=config.session_key,
        manifest=inputs.manifest,
        component_snapshot=inputs.snapshot,
        holdout=inputs.holdout,
        holdout_manifests=inputs.holdout_manifests,
        cases=inputs.cases,
        candidate_identity=config.candidate_identity,
        candidate_manifests=config.candidate_manifests,
        runner=inputs.providers["runner"],
        scorer=inputs.providers["scorer"],
        review=inputs.providers["review"],
        provider_digests={name: ref.digest for name, ref in config.providers.items()},
        rubric=inputs.rubric,
        conflict_of_interest=config.conflict_of_interest,
        randomization_key=inputs.randomization_key,
        public_items=inputs.corpora["public"],
        shadow_items=inputs.corpora["shadow"],
        canaries=inputs.corpora["canaries"],
        ledger=ledger,
        store=store,
        clock=clock,
    )
