"""The overlap-forensics trigram engine: integer trigram sets, prefix-filtered joins.

Private to :mod:`sealeval.session.forensics`, which owns the contract (normalization,
signals, the report); this module only turns normalized texts into candidate pairs
and exact trigram-overlap counts, vectorised with numpy. See ``docs/forensics.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

_Array = npt.NDArray[np.int64]
#: Basis points of a full match (the contract's similarity scale).
_FULL: Final = 10000


# ---------------------------------------------------------------------------
# The trigram engine: integer trigram sets in CSR form, prefix-filtered joins
# ---------------------------------------------------------------------------

#: Extension ``k`` of the prefix filter: candidate pairs must share ``min(k, I_min)``
#: tokens of their extended prefixes (see ``docs/forensics.md`` for the proof).
_EXTENSION: Final = 8
#: Largest key space mapped to dense ids with a lookup table instead of a sort.
_DENSE_SPACE: Final = 1 << 24


def _ranges(starts: _Array, lengths: _Array) -> _Array:
    """Concatenate ``arange(s, s + n)`` for every (s, n) pair, vectorized."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(offsets - starts, lengths)


def _dense_ids(values: npt.NDArray[Any], space: int) -> tuple[_Array, int]:
    """Map values in ``[0, space)`` to ids ``0..n-1`` in ascending value order."""
    if space <= _DENSE_SPACE:
        present = np.zeros(space, dtype=bool)
        present[values] = True
        table = np.cumsum(present, dtype=np.int64) - 1
        return table[values], int(table[-1]) + 1
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    fresh = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=fresh[1:])
    ids = np.empty(values.size, dtype=np.int64)
    ids[order] = np.cumsum(fresh, dtype=np.int64) - 1
    return ids, int(fresh.sum())


def _trigram_tokens(texts: Sequence[str]) -> tuple[_Array, _Array, int]:
    """Return (text index, token id, vocabulary size) for every trigram occurrence.

    Code points are first renumbered densely (alphabet size ``K``); a trigram
    is then the integer ``(c1 * K + c2) * K + c3`` and a text shorter than
    three code points contributes the single key ``K**3 + c1`` or
    ``K**3 + K + c1 * K + c2``, a range no trigram uses. Keys are finally
    renumbered densely. Occurrences are listed text by text; repeats remain.
    """
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    code_points = np.frombuffer("".join(texts).encode("utf-32-le"), dtype="<u4")
    if code_points.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, 0
    letters, alphabet = _dense_ids(code_points, int(code_points.max()) + 1)
    del code_points
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # A position starts a trigram unless it is one of the last two of its text.
    valid = np.ones(max(letters.size - 2, 0), dtype=bool)
    for tail in (ends - 1, (ends - 2)[lengths >= 2]):
        valid[tail[tail < valid.size]] = False
    keys = letters[:-2] * alphabet
    keys += letters[1:-1]
    keys *= alphabet
    keys += letters[2:]
    keys = keys[valid]
    del valid
    docs = np.repeat(np.arange(len(texts), dtype=np.int32), np.maximum(lengths - 2, 0))
    short = np.flatnonzero(lengths < 3)
    if short.size:
        base = alphabet**3
        first = letters[starts[short]]
        second = letters[np.minimum(starts[short] + 1, letters.size - 1)]
        short_keys = np.where(
            lengths[short] == 1, base + first, base + alphabet + first * alphabet + second
        )
        keys = np.concatenate((keys, short_keys))
        docs = np.concatenate((docs, short.astype(np.int32)))
    del letters
    tokens, vocabulary = _dense_ids(keys, alphabet**3 + alphabet**2 + alphabet)
    return docs.astype(np.int64), tokens, vocabulary


def _sorted_unique(values: _Array) -> _Array:
    ordered = np.sort(values)
    fresh = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=fresh[1:])
    return ordered[fresh]


class _TrigramSets:
    """Trigram sets of every distinct normalized text, as sorted token-rank arrays (CSR).

    Tokens are renumbered by ascending document frequency among the
    reference texts (ties by id): the global order used by prefix filtering,
    so the first tokens of a row are its rarest.
    """

    def __init__(self, texts: Sequence[str], reference_rows: _Array) -> None:
        docs, tokens, vocabulary = _trigram_tokens(texts)
        vocabulary = max(vocabulary, 1)
        pairs = _sorted_unique(docs * vocabulary + tokens)
        del docs, tokens
        docs, tokens = np.divmod(pairs, vocabulary)
        del pairs
        is_reference = np.zeros(len(texts), dtype=bool)
        is_reference[reference_rows] = True
        frequency = np.bincount(tokens[is_reference[docs]], minlength=vocabulary)
        rank = np.empty(vocabulary, dtype=np.int64)
        rank[np.argsort(frequency, kind="stable")] = np.arange(vocabulary, dtype=np.int64)
        ranked = np.sort(docs * vocabulary + rank[tokens])
        self.tokens: _Array = ranked % vocabulary
        self.sizes: _Array = np.bincount(docs, minlength=len(texts)).astype(np.int64)
        self.indptr: _Array = np.concatenate(([0], np.cumsum(self.sizes))).astype(np.int64)
        self.vocabulary = vocabulary

    def row(self, index: int) -> _Array:
        return self.tokens[self.indptr[index] : self.indptr[index + 1]]


class _Postings:
    """Inverted index token -> ascending positions in ``rows``, over the first ``spans`` tokens."""

    def __init__(self, sets: _TrigramSets, rows: _Array, spans: _Array) -> None:
        lengths = np.minimum(spans, sets.sizes[rows])
        tokens = sets.tokens[_ranges(sets.indptr[rows], lengths)]
        owners = np.repeat(np.arange(rows.size, dtype=np.int64), lengths)
        self.references: _Array = owners[np.argsort(tokens, kind="stable")]
        counts = np.bincount(tokens, minlength=sets.vocabulary)
        self.indptr: _Array = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    def gather(self, tokens: _Array) -> _Array:
        """Concatenate the posting lists of ``tokens`` (each position once per token)."""
        indptr, references = self.indptr, self.references
        pieces = [references[indptr[token] : indptr[token + 1]] for token in tokens.tolist()]
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def _ceil_div(numerator: Any, denominator: int) -> Any:
    return -(-numerator // denominator)


class Engine:
    """Exact similarities for every (submission, reference) pair that can matter."""

    def __init__(
        self,
        submissions: Sequence[str],
        references: Sequence[str],
        public_count: int,
        threshold: int,
    ) -> None:
        distinct: dict[str, int] = {}
        self.submission_rows = [distinct.setdefault(text, len(distinct)) for text in submissions]
        self.reference_rows = np.fromiter(
            (distinct.setdefault(text, len(distinct)) for text in references),
            dtype=np.int64,
            count=len(references),
        )
        self.sets = _TrigramSets(list(distinct), self.reference_rows)
        self.reference_sizes = self.sets.sizes[self.reference_rows]
        self.public_count = public_count
        self.threshold = threshold
        self._mask = np.zeros(self.sets.vocabulary, dtype=bool)
        self._prefix_index: _Postings | None = None
        if threshold > 0:
            # Each reference is indexed under its extended prefix (threshold 0: no index).
            sizes = self.reference_sizes
            spans = sizes - _ceil_div(threshold * sizes, _FULL) + _EXTENSION
            self._prefix_index = _Postings(self.sets, self.reference_rows, spans)
        self._public_counter: _FullCounter | None = None

    def _intersections(self, row: int, candidates: _Array) -> _Array:
        """``|T(row) & T(reference)|`` for each candidate reference, exactly."""
        mask = self._mask
        tokens = self.sets.row(row)
        mask[tokens] = True
        try:
            rows = self.reference_rows[candidates]
            lengths = self.sets.sizes[rows]
            hits = mask[self.sets.tokens[_ranges(self.sets.indptr[rows], lengths)]]
            offsets = np.cumsum(lengths) - lengths
            return np.add.reduceat(hits, offsets, dtype=np.int64)
        finally:
            mask[tokens] = False

    def _candidates(self, row: int, size: int, index: _Postings) -> _Array:
        """Return the references that pass the extended-prefix count and size filters."""
        threshold = self.threshold
        least = _ceil_div(threshold * size, _FULL)  # |A & B| >= ceil(T * |A| / 10000)
        postings = index.gather(self.sets.row(row)[: size - least + _EXTENSION])
        if postings.size == 0:
            return postings
        shared = np.bincount(postings, minlength=self.reference_rows.size)
        candidates = np.flatnonzero(shared >= min(_EXTENSION, least))
        sizes = self.reference_sizes[candidates]
        needed = np.minimum(_EXTENSION, _ceil_div(threshold * (size + sizes), _FULL + threshold))
        keep: npt.NDArray[np.bool_] = (
            (shared[candidates] >= needed)
            & (threshold * sizes <= _FULL * size)
            & (threshold * size <= _FULL * sizes)
        )
        return candidates[keep]

    def matches(self, row: int) -> tuple[_Array, _Array]:
        """Return every reference whose similarity reaches the threshold, with the score.

        Returned in ascending reference position. With threshold 0 every
        reference qualifies.
        """
        size = int(self.sets.sizes[row])
        if self._prefix_index is None:
            candidates = np.arange(self.reference_rows.size, dtype=np.int64)
        else:
            candidates = self._candidates(row, size, self._prefix_index)
        if candidates.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        shared = self._intersections(row, candidates)
        scores = shared * _FULL // (size + self.reference_sizes[candidates] - shared)
        keep = scores >= self.threshold
        return candidates[keep], scores[keep]

    def best_public(self, row: int) -> int:
        """Return the maximum similarity of ``row`` to any public item, exactly."""
        if self._public_counter is None:
            self._public_counter = _FullCounter(self.sets, self.reference_rows[: self.public_count])
        shared = self._public_counter.intersections(self.sets.row(row))
        size = int(self.sets.sizes[row])
        sizes = self.reference_sizes[: self.public_count]
        return int((shared * _FULL // (size + sizes - shared)).max())


#: Tokens held in at least 1/32 of the counted rows (at most 1024 of them) are
#: counted with bitsets and popcounts instead of posting lists.
_DENSE_FRACTION: Final = 32
_DENSE_TOKENS: Final = 1024
_BYTE_POPCOUNT: Final = np.array([bin(value).count("1") for value in range(256)], dtype=np.int64)


def _popcount(words: npt.NDArray[np.uint64]) -> Any:
    """Count the set bits of each ``uint64`` word (``np.bitwise_count`` or a byte table)."""
    bitwise_count = getattr(np, "bitwise_count", None)
    if bitwise_count is not None:
        return bitwise_count(words)
    as_bytes = np.ascontiguousarray(words).view(np.uint8).reshape(words.size, 8)
    return _BYTE_POPCOUNT[as_bytes].sum(axis=1)


class _FullCounter:
    """Exact ``|T(query) & T(row)|`` for every row of a group, in one pass.

    Frequent tokens are stored as per-row bitsets (popcount of an AND), the
    others as posting lists (a bincount): both are exact integer counts.
    """

    def __init__(self, sets: _TrigramSets, rows: _Array) -> None:
        lengths = sets.sizes[rows]
        tokens = sets.tokens[_ranges(sets.indptr[rows], lengths)]
        owners = np.repeat(np.arange(rows.size, dtype=np.int64), lengths)
        frequency = np.bincount(tokens, minlength=sets.vocabulary)
        by_frequency = np.argsort(-frequency, kind="stable")[:_DENSE_TOKENS]
        dense = by_frequency[frequency[by_frequency] * _DENSE_FRACTION >= max(rows.size, 1)]
        self.bit: _Array = np.full(sets.vocabulary, -1, dtype=np.int64)
        self.bit[dense] = np.arange(dense.size, dtype=np.int64)
        self.words = max(1, -(-dense.size // 64))
        positions = self.bit[tokens]
        in_bits = positions >= 0
        self.bits = np.zeros(rows.size * self.words, dtype=np.uint64)
        flat = owners[in_bits] * self.words + positions[in_bits] // 64
        np.bitwise_or.at(
            self.bits,
            flat,
            np.left_shift(np.uint64(1), (positions[in_bits] % 64).astype(np.uint64)),
        )
        # Word-major layout: one contiguous row of per-reference words per bit word.
        self.bits = np.ascontiguousarray(self.bits.reshape(rows.size, self.words).T)
        sparse = ~in_bits
        sparse_tokens, sparse_owners = tokens[sparse], owners[sparse]
        self.references: _Array = sparse_owners[np.argsort(sparse_tokens, kind="stable")]
        counts = np.bincount(sparse_tokens, minlength=sets.vocabulary)
        self.indptr: _Array = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.size = rows.size

    def intersections(self, tokens: _Array) -> _Array:
        positions = self.bit[tokens]
        dense = positions[positions >= 0]
        indptr, references = self.indptr, self.references
        pieces = [
            references[indptr[token] : indptr[token + 1]]
            for token in tokens[positions < 0].tolist()
        ]
        shared = (
            np.bincount(np.concatenate(pieces), minlength=self.size)
            if pieces
            else np.zeros(self.size, dtype=np.int64)
        )
        if dense.size:
            query = np.zeros(self.words, dtype=np.uint64)
            np.bitwise_or.at(
                query, dense // 64, np.left_shift(np.uint64(1), (dense % 64).astype(np.uint64))
            )
            for word in np.flatnonzero(query).tolist():
                shared += _popcount(self.bits[word] & query[word])
        return shared
