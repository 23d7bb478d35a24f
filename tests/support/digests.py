"""Neutral digests the tests pass where a run needs an identity digest.

Any well-formed ``sha256:`` digest would do (none of them is read from, or
compared with, a vector file); they live here once so every test module and
support module passes the same values instead of defining its own twin.
"""

from __future__ import annotations

#: The model artifact a test run was captured from (``--artifact-digest``).
ARTIFACT = "sha256:" + "a7" * 32
#: The subject's artifact where a comparison needs two distinct ones (``ARTIFACT``: the baseline).
SUBJECT_ARTIFACT = "sha256:" + "5b" * 32
#: A run's configuration digest (``configuration_digest``).
CONFIG = "sha256:" + "c0" * 32
#: A run's tokenizer digest (``tokenizer_digest``).
TOKENIZER = "sha256:" + "70" * 32
