"""Alignment of tampered documents and commit ids (no reference import; tested in the suite).

Used by the openmed regenerators (``openmed_adjudication.py``, ``openmed_candidate.py``) and
checked by ``tests/test_vector_alignment.py`` without a reference venv.

``Transplant`` carries a case's documents -- copies of a reference output (its *twin*), some
tampered -- over to the twin's regenerated output, so that a valid copy becomes the new
output and a tampered copy keeps its tamper. ``rename_commits`` rewrites the commit ids a
text states (full, upper-case, shortened) for new repositories.
"""

from __future__ import annotations

import json
import re
from typing import Any

from renaming import DIGEST, DigestRenamer

#: A commit id or a prefix of one as a case states it (any case).
HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{7,40}(?![0-9A-Za-z])")


def rename_commits(text: str, commits: dict[str, str]) -> str:
    """Return ``text`` with every commit id of ``commits`` (old -> new) replaced.

    A shortened id becomes the new id shortened to the same length and an upper-case one
    stays upper-case; a hex token that starts no old commit (an unknown commit) is kept.
    """

    def commit(match: re.Match[str]) -> str:
        token = match.group(0)
        for old, new in commits.items():
            if old.startswith(token.lower()):
                renamed = new[: len(token)]
                return renamed.upper() if token.isupper() else renamed
        return token

    return HEX.sub(commit, text)


def same(left: Any, right: Any) -> bool:
    """Return whether two documents are equal, ints and floats told apart."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def index_of(item: Any, items: list[Any]) -> int | None:
    """Return the index of ``item`` in ``items`` (or None)."""
    for index, candidate in enumerate(items):
        if same(item, candidate):
            return index
    return None


class Transplant:
    """Carries one case's documents from its twin's output onto the twin's regeneration.

    - a part equal to the twin's part at the same place becomes the regenerated part there;
    - a list whose items are all items of the twin's list (reordered, some missing, none)
      becomes the regenerated items in the same arrangement;
    - a list of objects whose column (one member across the items) is a rearrangement of
      the twin's column gets the regenerated column rearranged the same way (a swap stays
      a swap);
    - any other changed value is kept (an edited text stays edited), except a digest,
      which gets a fresh renamed digest (a replaced digest stays foreign).
    """

    def __init__(self, renamer: DigestRenamer) -> None:
        """Use ``renamer`` for a digest that is not at the twin's place."""
        self.renamer = renamer

    def value(self, given: Any, old: Any, new: Any) -> Any:
        """Return ``given`` (a copy of ``old``, possibly changed) carried over to ``new``."""
        if same(given, old):
            return new
        if isinstance(given, dict) and isinstance(old, dict) and isinstance(new, dict):
            return {
                key: self.value(item, old[key], new[key])
                if key in old and key in new
                else self.fresh(item)
                for key, item in given.items()
            }
        if isinstance(given, list) and isinstance(old, list) and isinstance(new, list):
            return self.items(given, old, new)
        return self.fresh(given)

    def items(self, given: list[Any], old: list[Any], new: list[Any]) -> list[Any]:
        """Carry a list over: rearranged items, rearranged columns, or item by item."""
        places = [index_of(item, old) for item in given]
        if len(old) == len(new) and all(place is not None for place in places):
            return [new[place] for place in places if place is not None]
        rows = all(isinstance(item, dict) for item in [*given, *old, *new])
        if rows and len(given) == len(old) == len(new):
            keys = dict.fromkeys(key for item in given for key in item)
            columns = {key: self.column(key, given, old, new) for key in keys}
            return [{key: columns[key][row] for key in item} for row, item in enumerate(given)]
        carried = [self.value(item, o, n) for item, o, n in zip(given, old, new, strict=False)]
        return carried + [self.fresh(item) for item in given[len(carried) :]]

    def column(self, key: str, given: list[Any], old: list[Any], new: list[Any]) -> list[Any]:
        """Carry one member of a list of objects over (a rearranged column stays rearranged)."""
        if not all(key in row for row in [*given, *old, *new]):
            return [self.fresh(row.get(key)) for row in given]
        values = [row[key] for row in given]
        olds = [row[key] for row in old]
        news = [row[key] for row in new]
        places = [index_of(value, olds) for value in values]
        if all(place is not None for place in places) and len(set(map(str, places))) == len(places):
            return [news[place] for place in places if place is not None]
        return [self.value(v, o, n) for v, o, n in zip(values, olds, news, strict=True)]

    def fresh(self, value: Any) -> Any:
        """Return a changed value as it is, its digests renamed (a foreign digest stays so)."""
        if isinstance(value, str) and DIGEST.fullmatch(value):
            return self.renamer.digest(value)
        return self.renamer.rename(value)
