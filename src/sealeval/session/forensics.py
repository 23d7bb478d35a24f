"""Overlap forensics: content-free evidence of overlap between outputs and reference items.

Wire contract: ``openmed.eval.overlap_forensics.v1`` (policy
``openmed.eval.overlap_forensics.policy.v1``, openmed canonical JSON). A scan
compares submission text with public items, evaluator-held shadow items and
canary strings, entirely in memory, and reports only ordinal references
(``submission:000003``), scores in basis points, counts, fixed strings and
upstream digests. A signal is evidence that calls for review; it never
establishes contamination or hardcoding by itself.

The five checks are the specified all-pairs algorithm, computed without the
all-pairs loop: each text is normalized and broken into trigrams once, the
trigram sets live in compressed integer arrays, and candidate pairs come from
a prefix-filtered inverted index whose pruning provably cannot drop a pair
whose similarity reaches the threshold (see ``docs/forensics.md``). Every
score is the specified ratio of integers, computed with integer floor
division, so reports are byte-identical to the all-pairs reference.
"""

from __future__ import annotations

import bisect
import itertools
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from sealeval._progress import Progress, notify
from sealeval._unicode import PinnedTables, pinned_tables
from sealeval._validate import check_exact
from sealeval.canonical import encode_openmed, is_digest
from sealeval.errors import SessionError
from sealeval.manifest.sealed import SealedWorkflowManifest
from sealeval.session._trigram_engine import Engine
from sealeval.session.holdout import HoldoutCommitment, verify_holdout_commitment

__all__ = [
    "CHECKS",
    "CHECK_CANARY",
    "CHECK_EXACT",
    "CHECK_FUZZY",
    "CHECK_NORMALIZED",
    "CHECK_PUBLIC_VS_SHADOW",
    "DEFAULT_FUZZY_THRESHOLD_BASIS_POINTS",
    "DEFAULT_SHADOW_MARGIN_BASIS_POINTS",
    "INTERPRETATION_NO_SIGNALS",
    "INTERPRETATION_SIGNALS",
    "POLICY_VERSION",
    "REPORT_SCHEMA",
    "SCOPES",
    "UNICODE_VERSION",
    "OverlapForensicsError",
    "OverlapForensicsReport",
    "OverlapSignal",
    "TrigramSimilarity",
    "normalize_text",
    "scan_overlap_forensics",
    "trigram_similarity",
    "trigrams",
]

REPORT_SCHEMA: Final = "openmed.eval.overlap_forensics.v1"
POLICY_VERSION: Final = "openmed.eval.overlap_forensics.policy.v1"
CHECK_EXACT: Final = "exact_overlap"
CHECK_NORMALIZED: Final = "normalized_overlap"
CHECK_FUZZY: Final = "fuzzy_overlap"
CHECK_CANARY: Final = "canary_signal"
CHECK_PUBLIC_VS_SHADOW: Final = "public_vs_shadow"
#: The five checks, in the fixed "check order" (also the signal sort order).
CHECKS: Final = (
    CHECK_EXACT,
    CHECK_NORMALIZED,
    CHECK_FUZZY,
    CHECK_CANARY,
    CHECK_PUBLIC_VS_SHADOW,
)
#: Reference scopes, in their sort order.
SCOPES: Final = ("public", "shadow", "canary")
DEFAULT_FUZZY_THRESHOLD_BASIS_POINTS: Final = 8500
DEFAULT_SHADOW_MARGIN_BASIS_POINTS: Final = 1000
#: Wire constants: one of the two sentences is embedded in every report (and digest).
INTERPRETATION_SIGNALS: Final = (
    "Detected overlap or canary signals within the configured checks. These signals "
    "require review and do not by themselves establish contamination or hardcoding."
)
INTERPRETATION_NO_SIGNALS: Final = (
    "No signals were detected within the configured checks and inputs. This limited "
    "result does not establish the absence of contamination or hardcoding."
)
#: The Unicode tables the wire contract was fixed with (Python 3.11).
UNICODE_VERSION: Final = "14.0.0"

_FULL: Final = 10000
_CHECK_INDEX: Final = {name: index for index, name in enumerate(CHECKS)}
_SCOPE_INDEX: Final = {name: index for index, name in enumerate(SCOPES)}
_ITEM_FIELDS: Final = ("submission_items", "public_items", "shadow_items", "canaries")
_NOT_SEQUENCES: Final = (str, bytes, bytearray, memoryview)
_COVERAGE_KEYS: Final = frozenset(
    {
        "canary_items",
        "checks",
        "comparison_counts",
        "public_items",
        "shadow_items",
        "submission_items",
    }
)

_Array = npt.NDArray[np.int64]


class OverlapForensicsError(SessionError):
    """Refusal of an overlap forensics scan; message ``<field>: <code>``."""

    module = "sealeval.session.forensics"
    field_in_message = True
    codes = frozenset(
        {
            "invalid_sequence",
            "empty",
            "invalid_item",
            "invalid_basis_points",
            "invalid",
            "empty_after_normalization",
            "invalid_text",
            "invalid_signal",
            "invalid_report",
        }
    )


# ---------------------------------------------------------------------------
# Normalization and trigram similarity (the specified, obviously-correct forms)
# ---------------------------------------------------------------------------


class _KeepLettersAndNumbers(dict[int, int]):
    """``str.translate`` table: letters/numbers map to themselves, all else to a space.

    Entries are computed on first use from the database's ``category`` and
    cached, so each distinct code point is classified once per process.
    """

    def __init__(self, category: Callable[[str], str]) -> None:
        super().__init__()
        self._category = category

    def __missing__(self, code_point: int) -> int:
        kept = self._category(chr(code_point))[0] in "LN"
        value = code_point if kept else 0x20
        self[code_point] = value
        return value


_ASCII_TABLE: Final = {
    code_point: (code_point if chr(code_point).isalnum() else 0x20) for code_point in range(128)
}


class _Normalizer:
    """The contract's normalization with the Unicode 14.0.0 tables, on any interpreter.

    The tables are :mod:`sealeval._unicode`'s pinned 14.0.0 tables: the
    interpreter's functions where they agree with 14.0.0 on every character
    of a text (always on CPython 3.11, and for ASCII), the shipped tables
    otherwise.
    """

    def __init__(self, tables: PinnedTables) -> None:
        self._tables = tables
        self._table = _KeepLettersAndNumbers(tables.category)

    def __call__(self, text: str) -> str:
        tables = self._tables
        folded = tables.casefold(tables.normalize("NFKC", text))
        table = _ASCII_TABLE if folded.isascii() else self._table
        return " ".join(folded.translate(table).split())


def _contract_tables() -> PinnedTables:
    tables = pinned_tables(UNICODE_VERSION)
    if tables is None:  # pragma: no cover - 14.0.0 tables always ship
        raise RuntimeError("Unicode 14.0.0 tables missing from the installation")
    return tables


_normalize: Final = _Normalizer(_contract_tables())


def normalize_text(text: str) -> str:
    """Normalize one text: NFKC, full case folding, non-letters/numbers to spaces, collapse.

    Raises:
        OverlapForensicsError: ``text: invalid_text`` when ``text`` is not a ``str``.
    """
    if type(text) is not str:
        raise OverlapForensicsError("invalid_text", "text")
    return _normalize(text)


def trigrams(normalized: str) -> frozenset[str]:
    """Return the trigram set of a normalized string (the string itself if shorter than 3).

    Raises:
        OverlapForensicsError: ``normalized: invalid_text`` when not a ``str``.
    """
    if type(normalized) is not str:
        raise OverlapForensicsError("invalid_text", "normalized")
    if len(normalized) < 3:
        return frozenset((normalized,))
    return frozenset(normalized[index : index + 3] for index in range(len(normalized) - 2))


class TrigramSimilarity(NamedTuple):
    """Trigram Jaccard similarity of two normalized strings, with its integer parts."""

    basis_points: int
    intersection: int
    union: int


def trigram_similarity(left: str, right: str) -> TrigramSimilarity:
    """Return ``floor(|T(a) & T(b)| * 10000 / |T(a) | T(b)|)`` and the two set sizes.

    Both arguments must already be normalized (see :func:`normalize_text`).

    Raises:
        OverlapForensicsError: ``left: invalid_text`` / ``right: invalid_text``.
    """
    if type(left) is not str:
        raise OverlapForensicsError("invalid_text", "left")
    if type(right) is not str:
        raise OverlapForensicsError("invalid_text", "right")
    left_set, right_set = trigrams(left), trigrams(right)
    intersection = len(left_set & right_set)
    union = len(left_set | right_set)
    basis_points = _FULL if union == 0 else intersection * _FULL // union
    return TrigramSimilarity(basis_points, intersection, union)


# ---------------------------------------------------------------------------
# Signal and report values
# ---------------------------------------------------------------------------


def _is_basis_points(value: object) -> bool:
    return type(value) is int and 0 <= value <= _FULL


def _is_ref(value: object, scope: str) -> bool:
    if type(value) is not str or not value.startswith(scope + ":"):
        return False
    number = value[len(scope) + 1 :]
    return len(number) >= 6 and number.isascii() and number.isdigit() and int(number) >= 1


def _ref(scope: str, index: int) -> str:
    return f"{scope}:{index + 1:06d}"


@dataclass(frozen=True, slots=True)
class OverlapSignal:
    """Content-free evidence of one overlap or canary finding.

    ``comparison_score_basis_points`` is set only for ``public_vs_shadow``
    (the best public similarity); it is ``None`` for every other check.
    """

    check: str
    submission_ref: str
    reference_scope: str
    reference_ref: str
    score_basis_points: int
    comparison_score_basis_points: int | None = None

    def __post_init__(self) -> None:
        """Refuse any value outside the closed contract."""
        if type(self.check) is not str or self.check not in _CHECK_INDEX:
            raise OverlapForensicsError("invalid_signal", "check")
        if not _is_ref(self.submission_ref, "submission"):
            raise OverlapForensicsError("invalid_signal", "submission_ref")
        expected_scopes = {
            CHECK_CANARY: ("canary",),
            CHECK_PUBLIC_VS_SHADOW: ("shadow",),
        }.get(self.check, ("public", "shadow"))
        if type(self.reference_scope) is not str or self.reference_scope not in expected_scopes:
            raise OverlapForensicsError("invalid_signal", "reference_scope")
        if not _is_ref(self.reference_ref, self.reference_scope):
            raise OverlapForensicsError("invalid_signal", "reference_ref")
        if not _is_basis_points(self.score_basis_points):
            raise OverlapForensicsError("invalid_signal", "score_basis_points")
        comparison = self.comparison_score_basis_points
        if self.check == CHECK_PUBLIC_VS_SHADOW:
            if not _is_basis_points(comparison):
                raise OverlapForensicsError("invalid_signal", "comparison_score_basis_points")
        elif comparison is not None:
            raise OverlapForensicsError("invalid_signal", "comparison_score_basis_points")

    @property
    def sort_key(self) -> tuple[int, str, int, str]:
        """The specified report order: check, submission ref, scope, reference ref."""
        return (
            _CHECK_INDEX[self.check],
            self.submission_ref,
            _SCOPE_INDEX[self.reference_scope],
            self.reference_ref,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "check": self.check,
            "comparison_score_basis_points": self.comparison_score_basis_points,
            "reference_ref": self.reference_ref,
            "reference_scope": self.reference_scope,
            "score_basis_points": self.score_basis_points,
            "submission_ref": self.submission_ref,
        }


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _checked_coverage(coverage: object) -> Mapping[str, Any]:
    """Return a read-only copy of a coverage mapping after checking its exact shape."""
    coverage = check_exact(
        coverage, "coverage", _COVERAGE_KEYS, error=OverlapForensicsError, code="invalid_report"
    )
    counts = {name: coverage[name] for name in _COVERAGE_KEYS if name.endswith("_items")}
    if not all(map(_is_count, counts.values())) or tuple(coverage["checks"]) != CHECKS:
        raise OverlapForensicsError("invalid_report", "coverage")
    pairs = counts["submission_items"] * (counts["public_items"] + counts["shadow_items"])
    expected = dict.fromkeys(CHECKS, pairs)
    expected[CHECK_CANARY] = counts["submission_items"] * counts["canary_items"]
    comparisons = coverage["comparison_counts"]
    if not isinstance(comparisons, Mapping) or dict(comparisons) != expected:
        raise OverlapForensicsError("invalid_report", "coverage.comparison_counts")
    return types.MappingProxyType(
        {
            **counts,
            "checks": CHECKS,
            "comparison_counts": types.MappingProxyType(
                {name: expected[name] for name in sorted(expected)}
            ),
        }
    )


@dataclass(frozen=True, slots=True)
class OverlapForensicsReport:
    """A versioned, content-free overlap forensics report.

    Construction re-checks the invariants of the contract: digests, threshold
    ranges, the coverage shape and its comparison counts, signals sorted in
    report order, per-check counts matching the signals, and the
    interpretation sentence matching whether any signal exists. Mappings are
    read-only; ``signals`` is a tuple.
    """

    submission_manifest_digest: str
    holdout_commitment_digest: str
    fuzzy_threshold_basis_points: int
    shadow_margin_basis_points: int
    coverage: Mapping[str, Any]
    signal_counts: Mapping[str, int]
    signals: tuple[OverlapSignal, ...]
    interpretation: str
    policy_version: str = POLICY_VERSION
    schema_version: str = REPORT_SCHEMA

    def __post_init__(self) -> None:
        """Validate every invariant; an inconsistent report cannot exist."""
        if type(self.schema_version) is not str or self.schema_version != REPORT_SCHEMA:
            raise OverlapForensicsError("invalid_report", "schema_version")
        if type(self.policy_version) is not str or self.policy_version != POLICY_VERSION:
            raise OverlapForensicsError("invalid_report", "policy_version")
        for name in ("submission_manifest_digest", "holdout_commitment_digest"):
            if not is_digest(getattr(self, name)):
                raise OverlapForensicsError("invalid_report", name)
        for name in ("fuzzy_threshold_basis_points", "shadow_margin_basis_points"):
            if not _is_basis_points(getattr(self, name)):
                raise OverlapForensicsError("invalid_report", name)
        coverage = _checked_coverage(self.coverage)
        signals = self.signals
        if type(signals) is not tuple or not all(type(s) is OverlapSignal for s in signals):
            raise OverlapForensicsError("invalid_report", "signals")
        keys = [signal.sort_key for signal in signals]
        if any(left >= right for left, right in itertools.pairwise(keys)):
            raise OverlapForensicsError("invalid_report", "signals")
        counts = dict.fromkeys(sorted(CHECKS), 0)
        for signal in signals:
            counts[signal.check] += 1
        given = self.signal_counts
        if not isinstance(given, Mapping) or dict(given) != counts:
            raise OverlapForensicsError("invalid_report", "signal_counts")
        if not all(type(value) is int for value in given.values()):
            raise OverlapForensicsError("invalid_report", "signal_counts")
        sentence = INTERPRETATION_SIGNALS if signals else INTERPRETATION_NO_SIGNALS
        if type(self.interpretation) is not str or self.interpretation != sentence:
            raise OverlapForensicsError("invalid_report", "interpretation")
        object.__setattr__(self, "coverage", coverage)
        object.__setattr__(self, "signal_counts", types.MappingProxyType(counts))

    @property
    def signals_detected(self) -> bool:
        """Whether the report holds at least one signal."""
        return bool(self.signals)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        coverage = dict(self.coverage)
        coverage["checks"] = list(CHECKS)
        coverage["comparison_counts"] = dict(self.coverage["comparison_counts"])
        return {
            "coverage": coverage,
            "fuzzy_threshold_basis_points": self.fuzzy_threshold_basis_points,
            "holdout_commitment_digest": self.holdout_commitment_digest,
            "interpretation": self.interpretation,
            "policy_version": self.policy_version,
            "schema_version": self.schema_version,
            "shadow_margin_basis_points": self.shadow_margin_basis_points,
            "signal_counts": dict(self.signal_counts),
            "signals": [signal.to_dict() for signal in self.signals],
            "signals_detected": self.signals_detected,
            "submission_manifest_digest": self.submission_manifest_digest,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


def _checked_items(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, Sequence) or isinstance(value, _NOT_SEQUENCES):
        raise OverlapForensicsError("invalid_sequence", name)
    try:
        items = tuple(value)
    except Exception:  # noqa: BLE001 - a hostile sequence must not leak its exception
        raise OverlapForensicsError("invalid_sequence", name) from None
    if not items:
        raise OverlapForensicsError("empty", name)
    for item in items:
        if type(item) is not str or not item.strip():
            raise OverlapForensicsError("invalid_item", name)
    return items


def _checked_basis_points(value: object, name: str) -> int:
    if type(value) is not int or not 0 <= value <= _FULL:
        raise OverlapForensicsError("invalid_basis_points", name)
    return value


def _manifest_digest(manifest: object) -> str:
    try:
        document = manifest.to_dict() if isinstance(manifest, SealedWorkflowManifest) else manifest
        digest = SealedWorkflowManifest.from_dict(document).manifest_digest
    except Exception:  # noqa: BLE001 - any failure to re-check the seal is "invalid"
        raise OverlapForensicsError("invalid", "submission_manifest") from None
    return digest


def _commitment_digest(commitment: object) -> str:
    try:
        document = commitment.to_dict() if isinstance(commitment, HoldoutCommitment) else commitment
        checked = HoldoutCommitment.from_dict(document)
        valid = verify_holdout_commitment(checked).valid
    except Exception:  # noqa: BLE001 - any failure of commitment verification is "invalid"
        raise OverlapForensicsError("invalid", "holdout_commitment") from None
    if not valid:
        raise OverlapForensicsError("invalid", "holdout_commitment")
    return checked.commitment_digest


def _normalized_all(items: tuple[str, ...], name: str) -> list[str]:
    cache: dict[str, str] = {}
    normalized: list[str] = []
    for item in items:
        text = cache.get(item)
        if text is None:
            text = cache[item] = _normalize(item)
            if not text:
                raise OverlapForensicsError("empty_after_normalization", name)
        normalized.append(text)
    return normalized


def _overlap_signals(
    *,
    raw_submissions: tuple[str, ...],
    submissions: list[str],
    raw_references: tuple[str, ...],
    references: list[str],
    public_count: int,
    threshold: int,
    margin: int,
    progress: Progress | None = None,
) -> list[OverlapSignal]:
    engine = Engine(submissions, references, public_count, threshold)
    # Identical normalized submissions share their matches (and the public-vs-shadow
    # outcome); only the exact-vs-normalized distinction depends on the raw text.
    found: dict[int, tuple[list[int], list[int], tuple[int, int, int] | None]] = {}
    signals: list[OverlapSignal] = []
    total = len(engine.submission_rows)
    for index, row in enumerate(engine.submission_rows):
        notify(progress, "forensics", index, total)
        cached = found.get(row)
        if cached is None:
            positions, scores = engine.matches(row)
            positions_list, scores_list = positions.tolist(), scores.tolist()
            versus = _public_vs_shadow(engine, row, positions_list, scores_list, margin)
            cached = found[row] = (positions_list, scores_list, versus)
        positions_list, scores_list, versus = cached
        submission_ref = _ref("submission", index)
        raw, text = raw_submissions[index], submissions[index]
        for position, score in zip(positions_list, scores_list, strict=True):
            scope, offset = (
                ("public", position)
                if position < public_count
                else ("shadow", position - public_count)
            )
            check = CHECK_FUZZY
            if score == _FULL:
                if raw_references[position] == raw:
                    check = CHECK_EXACT
                elif references[position] == text:
                    check = CHECK_NORMALIZED
            signals.append(
                OverlapSignal(
                    check=check,
                    submission_ref=submission_ref,
                    reference_scope=scope,
                    reference_ref=_ref(scope, offset),
                    score_basis_points=score,
                )
            )
        if versus is not None:
            shadow_index, shadow_score, public_score = versus
            signals.append(
                OverlapSignal(
                    check=CHECK_PUBLIC_VS_SHADOW,
                    submission_ref=submission_ref,
                    reference_scope="shadow",
                    reference_ref=_ref("shadow", shadow_index),
                    score_basis_points=shadow_score,
                    comparison_score_basis_points=public_score,
                )
            )
    return signals


def _public_vs_shadow(
    engine: Engine, row: int, positions: list[int], scores: list[int], margin: int
) -> tuple[int, int, int] | None:
    """Return (shadow index, S, P) when the public-vs-shadow rule fires, else ``None``.

    ``positions``/``scores`` hold every reference at or above the threshold,
    so the best shadow item (first index on ties) is among them whenever
    ``S >= threshold``, and the best public score is among them whenever any
    public item reaches the threshold; otherwise it is computed exactly.
    """
    public_count = engine.public_count
    best_shadow: tuple[int, int] | None = None
    best_public = -1
    for position, score in zip(positions, scores, strict=True):
        if position < public_count:
            best_public = max(best_public, score)
        elif best_shadow is None or score > best_shadow[1]:
            best_shadow = (position - public_count, score)
    if best_shadow is None:
        return None
    shadow_index, shadow_score = best_shadow
    if shadow_score - margin < 0:
        return None
    if best_public < 0:
        best_public = engine.best_public(row)
    if shadow_score - best_public < margin:
        return None
    return shadow_index, shadow_score, best_public


def _canary_signals(submissions: list[str], canaries: list[str]) -> list[OverlapSignal]:
    """Substring search of every canary over all submissions at once.

    Submissions are joined with U+0000, which no normalized text contains, so
    a canary occurrence never spans two submissions; after a hit the search
    resumes at the next submission, so each (submission, canary) pair is
    reported once.
    """
    joined = "\x00".join(submissions)
    starts: list[int] = []
    offset = 0
    for text in submissions:
        starts.append(offset)
        offset += len(text) + 1
    hits_by_text: dict[str, list[int]] = {}
    signals: list[OverlapSignal] = []
    for canary_index, canary in enumerate(canaries):
        hits = hits_by_text.get(canary)
        if hits is None:
            hits = []
            position = joined.find(canary)
            while position != -1:
                owner = bisect.bisect_right(starts, position) - 1
                hits.append(owner)
                if owner + 1 >= len(starts):
                    break
                position = joined.find(canary, starts[owner + 1])
            hits_by_text[canary] = hits
        canary_ref = _ref("canary", canary_index)
        signals.extend(
            OverlapSignal(
                check=CHECK_CANARY,
                submission_ref=_ref("submission", owner),
                reference_scope="canary",
                reference_ref=canary_ref,
                score_basis_points=_FULL,
            )
            for owner in hits
        )
    return signals


def _coverage(submissions: int, public: int, shadow: int, canaries: int) -> dict[str, Any]:
    pairs = submissions * (public + shadow)
    return {
        "canary_items": canaries,
        "checks": CHECKS,
        "comparison_counts": {
            CHECK_CANARY: submissions * canaries,
            CHECK_EXACT: pairs,
            CHECK_FUZZY: pairs,
            CHECK_NORMALIZED: pairs,
            CHECK_PUBLIC_VS_SHADOW: pairs,
        },
        "public_items": public,
        "shadow_items": shadow,
        "submission_items": submissions,
    }


def _counts(signals: Iterable[OverlapSignal]) -> dict[str, int]:
    counts = dict.fromkeys(sorted(CHECKS), 0)
    for signal in signals:
        counts[signal.check] += 1
    return counts


def scan_overlap_forensics(
    submission_items: Sequence[str],
    *,
    public_items: Sequence[str],
    shadow_items: Sequence[str],
    canaries: Sequence[str],
    submission_manifest: SealedWorkflowManifest | Mapping[str, Any],
    holdout_commitment: HoldoutCommitment | Mapping[str, Any],
    fuzzy_threshold_basis_points: int = DEFAULT_FUZZY_THRESHOLD_BASIS_POINTS,
    shadow_margin_basis_points: int = DEFAULT_SHADOW_MARGIN_BASIS_POINTS,
    progress: Progress | None = None,
) -> OverlapForensicsReport:
    """Scan submission text for the five forensic checks; return a content-free report.

    Args:
        submission_items: ordered submission texts (non-empty, no blank item).
        public_items: ordered public benchmark items.
        shadow_items: ordered evaluator-held shadow items.
        canaries: ordered evaluator-held canary strings.
        submission_manifest: a sealed manifest object or its document (re-checked).
        holdout_commitment: a holdout commitment object or its document (verified).
        fuzzy_threshold_basis_points: inclusive trigram-Jaccard threshold, 0..10000.
        shadow_margin_basis_points: minimum shadow-over-public difference, 0..10000.
        progress: optional :data:`sealeval._progress.Progress` callback
            (phase ``forensics``: submissions scanned of all); counts only.

    Returns:
        The report, identical to the specified all-pairs scan.

    Raises:
        OverlapForensicsError: the first failing rule, in the specified order
            (items, thresholds, manifest, commitment, normalization).
    """
    given = (submission_items, public_items, shadow_items, canaries)
    raw = [_checked_items(value, name) for value, name in zip(given, _ITEM_FIELDS, strict=True)]
    threshold = _checked_basis_points(fuzzy_threshold_basis_points, "fuzzy_threshold_basis_points")
    margin = _checked_basis_points(shadow_margin_basis_points, "shadow_margin_basis_points")
    manifest_digest = _manifest_digest(submission_manifest)
    commitment_digest = _commitment_digest(holdout_commitment)
    subs, public, shadow, marks = (
        _normalized_all(items, name) for items, name in zip(raw, _ITEM_FIELDS, strict=True)
    )
    signals = _overlap_signals(
        raw_submissions=raw[0],
        submissions=subs,
        raw_references=raw[1] + raw[2],
        references=public + shadow,
        public_count=len(public),
        threshold=threshold,
        margin=margin,
        progress=progress,
    )
    signals.extend(_canary_signals(subs, marks))
    signals.sort(key=lambda signal: signal.sort_key)
    return OverlapForensicsReport(
        submission_manifest_digest=manifest_digest,
        holdout_commitment_digest=commitment_digest,
        fuzzy_threshold_basis_points=threshold,
        shadow_margin_basis_points=margin,
        coverage=_coverage(len(subs), len(public), len(shadow), len(marks)),
        signal_counts=_counts(signals),
        signals=tuple(signals),
        interpretation=INTERPRETATION_SIGNALS if signals else INTERPRETATION_NO_SIGNALS,
    )
