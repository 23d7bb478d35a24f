"""The overlap-forensics trigram engine: integer trigram sets, prefix-filtered joins.

Private to :mod:`sealeval.session.forensics`, which owns the contract (normalization,
signals, the report); this module only turns normalized texts into candidate pairs
and exact trigram-overlap counts, vectorised with numpy. See ``docs/forensics.md``.
"""

from __future__ import annotations

from collections import deque
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
#: Code points tokenized at once: every occurrence-level array lives one chunk at a time.
_CHUNK_CODE_POINTS: Final = 1 << 18
#: Index arrays hold 32-bit integers while every value they can hold is below this bound,
#: and 64-bit integers past it (same values, same results).
_NARROW_LIMIT: Final = 1 << 31
#: Code points are below this base (``sys.maxunicode + 1``): a trigram is the integer
#: ``(c1 * B + c2) * B + c3``, below ``B**3``; shorter texts key above it.
_BASE: Final = 0x110000


def _index_dtype(bound: int) -> type[np.signedinteger[Any]]:
    """Return ``int32`` when every value to hold is below ``bound`` <= 2**31, else ``int64``."""
    return np.int32 if bound <= _NARROW_LIMIT else np.int64


def _ranges(starts: _Array, lengths: _Array) -> _Array:
    """Concatenate ``arange(s, s + n)`` for every (s, n) pair, vectorized."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(offsets - starts, lengths)


def _sorted_unique(values: _Array) -> _Array:
    ordered = np.sort(values)
    fresh = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=fresh[1:])
    return ordered[fresh]


def _chunks(lengths: list[int]) -> list[tuple[int, int]]:
    """Split texts ``0..n-1`` into ``[first, end)`` runs of at most ``_CHUNK_CODE_POINTS`` points.

    A text longer than the bound is a chunk of its own; an empty list has no chunk.
    """
    bounds: list[tuple[int, int]] = []
    first, held = 0, 0
    for index, length in enumerate(lengths):
        if held and held + length > _CHUNK_CODE_POINTS:
            bounds.append((first, index))
            first, held = index, 0
        held += length
    if first < len(lengths):
        bounds.append((first, len(lengths)))
    return bounds


def _chunk_keys(texts: Sequence[str]) -> tuple[_Array, _Array]:
    """Return (text position, key) of every trigram occurrence of a few texts.

    A trigram is the integer ``(c1 * B + c2) * B + c3`` of its code points
    (``B`` = :data:`_BASE`); a text shorter than three code points contributes
    the single key ``B**3 + c1`` or ``B**3 + B + c1 * B + c2``, a range no
    trigram uses (all below ``2**63``). Ascending keys are the order of
    ascending code-point tuples, trigrams before shorter texts.
    """
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    points = np.frombuffer("".join(texts).encode("utf-32-le"), dtype="<u4").astype(np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # A position starts a trigram unless it is one of the last two of its text.
    valid = np.ones(max(points.size - 2, 0), dtype=bool)
    for tail in (ends - 1, (ends - 2)[lengths >= 2]):
        valid[tail[tail < valid.size]] = False
    keys = points[:-2] * _BASE
    keys += points[1:-1]
    keys *= _BASE
    keys += points[2:]
    keys = keys[valid]
    del valid
    docs = np.repeat(np.arange(len(texts), dtype=np.int64), np.maximum(lengths - 2, 0))
    short = np.flatnonzero((lengths < 3) & (lengths > 0))
    if short.size:
        base = _BASE**3
        first = points[starts[short]]
        second = points[np.minimum(starts[short] + 1, points.size - 1)]
        short_keys = np.where(
            lengths[short] == 1, base + first, base + _BASE + first * _BASE + second
        )
        keys = np.concatenate((keys, short_keys))
        docs = np.concatenate((docs, short))
    return docs, keys


class _Chunk:
    """The distinct trigrams of a run of texts: per text their count, then their ids.

    ``tokens`` first holds ids into the chunk's own sorted ``vocabulary``
    (keys), then, after :meth:`globalize`, ids into the global one.
    """

    __slots__ = ("sizes", "tokens", "vocabulary")

    def __init__(self, texts: Sequence[str]) -> None:
        docs, keys = _chunk_keys(texts)
        vocabulary, local = np.unique(keys, return_inverse=True)
        del keys
        width = max(int(vocabulary.size), 1)
        # Texts in a chunk (at most _CHUNK_CODE_POINTS, or one longer text) times keys
        # (at most one per code point): far below 2**63.
        pairs = _sorted_unique(docs * width + local.reshape(-1))
        del docs, local
        docs, tokens = np.divmod(pairs, width)
        del pairs
        self.sizes: _Array = np.bincount(docs, minlength=len(texts)).astype(np.int64)
        self.tokens: npt.NDArray[Any] = tokens.astype(_index_dtype(width))
        self.vocabulary: _Array = vocabulary

    def globalize(self, vocabulary: _Array, dtype: type[np.signedinteger[Any]]) -> None:
        """Renumber ``tokens`` as ids into the global sorted ``vocabulary``."""
        mapping = np.searchsorted(vocabulary, self.vocabulary).astype(dtype)
        self.tokens = mapping[self.tokens]
        self.vocabulary = np.zeros(0, dtype=np.int64)

    def docs(self) -> _Array:
        """Return the chunk-local text position of every distinct trigram."""
        return np.repeat(np.arange(self.sizes.size, dtype=np.int64), self.sizes)


class _TrigramSets:
    """Trigram sets of every distinct normalized text, as sorted token-rank arrays (CSR).

    Token ids number the distinct trigram keys in ascending order; ranks
    renumber them by ascending document frequency among the reference texts
    (ties by id): the global order used by prefix filtering, so the first
    tokens of a row are its rarest. Texts are tokenized in chunks of at most
    :data:`_CHUNK_CODE_POINTS` code points, so only the distinct trigrams of
    each text (32-bit ids while fewer than 2**31 exist) are held at once,
    never an array per occurrence of the whole corpus.
    """

    def __init__(self, texts: Sequence[str], reference_rows: _Array) -> None:
        chunks: deque[_Chunk] = deque()
        firsts: list[int] = []
        for first, end in _chunks([len(text) for text in texts]):
            chunks.append(_Chunk(texts[first:end]))
            firsts.append(first)
        pieces = [chunk.vocabulary for chunk in chunks]
        keys = np.unique(np.concatenate(pieces)) if pieces else np.zeros(0, dtype=np.int64)
        del pieces
        vocabulary = max(int(keys.size), 1)
        dtype = _index_dtype(vocabulary)
        is_reference = np.zeros(len(texts), dtype=bool)
        is_reference[reference_rows] = True
        frequency = np.zeros(vocabulary, dtype=np.int64)
        for chunk, first in zip(chunks, firsts, strict=True):
            chunk.globalize(keys, dtype)
            selected = is_reference[first : first + chunk.sizes.size][chunk.docs()]
            frequency += np.bincount(chunk.tokens[selected], minlength=vocabulary)
        del keys
        rank = np.empty(vocabulary, dtype=dtype)
        rank[np.argsort(frequency, kind="stable")] = np.arange(vocabulary, dtype=dtype)
        del frequency
        sizes = [np.zeros(0, dtype=np.int64)]
        tokens = np.empty(sum(int(chunk.tokens.size) for chunk in chunks), dtype=dtype)
        offset = 0
        while chunks:
            chunk = chunks.popleft()  # released before the next chunk is ranked
            # Each text's ranks in ascending order (the text is the high part of the key;
            # chunk texts times distinct trigrams stays below 2**63 under 2**45 characters).
            ranked = np.sort(chunk.docs() * vocabulary + rank[chunk.tokens])
            tokens[offset : offset + ranked.size] = ranked % vocabulary
            offset += ranked.size
            sizes.append(chunk.sizes)
            del chunk, ranked
        self.tokens: npt.NDArray[Any] = tokens
        self.sizes: _Array = np.concatenate(sizes)
        self.indptr: _Array = np.concatenate(([0], np.cumsum(self.sizes))).astype(np.int64)
        self.vocabulary = vocabulary

    def row(self, index: int) -> npt.NDArray[Any]:
        return self.tokens[self.indptr[index] : self.indptr[index + 1]]


class _Postings:
    """Inverted index token -> ascending positions in ``rows``, over the first ``spans`` tokens."""

    def __init__(self, sets: _TrigramSets, rows: _Array, spans: _Array) -> None:
        lengths = np.minimum(spans, sets.sizes[rows])
        tokens = sets.tokens[_ranges(sets.indptr[rows], lengths)]
        owners = np.repeat(np.arange(rows.size, dtype=_index_dtype(rows.size)), lengths)
        self.references: npt.NDArray[Any] = owners[np.argsort(tokens, kind="stable")]
        counts = np.bincount(tokens, minlength=sets.vocabulary)
        self.indptr: _Array = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    def gather(self, tokens: npt.NDArray[Any]) -> npt.NDArray[Any]:
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
        owners = np.repeat(np.arange(rows.size, dtype=_index_dtype(rows.size)), lengths)
        frequency = np.bincount(tokens, minlength=sets.vocabulary)
        by_frequency = np.argsort(-frequency, kind="stable")[:_DENSE_TOKENS]
        dense = by_frequency[frequency[by_frequency] * _DENSE_FRACTION >= max(rows.size, 1)]
        # Bit positions of the dense tokens (at most _DENSE_TOKENS), -1 for the others.
        self.bit: npt.NDArray[np.int32] = np.full(sets.vocabulary, -1, dtype=np.int32)
        self.bit[dense] = np.arange(dense.size, dtype=np.int32)
        self.words = max(1, -(-dense.size // 64))
        positions = self.bit[tokens]
        in_bits = positions >= 0
        self.bits = np.zeros(rows.size * self.words, dtype=np.uint64)
        flat = owners[in_bits].astype(np.int64) * self.words + positions[in_bits] // 64
        np.bitwise_or.at(
            self.bits,
            flat,
            np.left_shift(np.uint64(1), (positions[in_bits] % 64).astype(np.uint64)),
        )
        # Word-major layout: one contiguous row of per-reference words per bit word.
        self.bits = np.ascontiguousarray(self.bits.reshape(rows.size, self.words).T)
        sparse = ~in_bits
        sparse_tokens, sparse_owners = tokens[sparse], owners[sparse]
        self.references: npt.NDArray[Any] = sparse_owners[np.argsort(sparse_tokens, kind="stable")]
        counts = np.bincount(sparse_tokens, minlength=sets.vocabulary)
        self.indptr: _Array = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.size = rows.size

    def intersections(self, tokens: npt.NDArray[Any]) -> _Array:
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
