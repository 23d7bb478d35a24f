"""The speed targets against invarlock 0.17.1: one table for every bench that prints one.

``bench/compare.py`` prints, and ``bench/margins.py`` checks, these same
figures (reference time / sealeval time, at least).
"""

from __future__ import annotations

from typing import Final

#: Minimum ratio (reference / sealeval) per command, as ``bench/margins.py`` labels them.
SPEED_TARGETS: Final = {
    "evaluate": 10.0,
    "verify": 10.0,
    "compare exact_match": 10.0,
    "compare token_f1": 15.0,
}
