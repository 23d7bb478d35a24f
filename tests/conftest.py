"""The suite's one conftest: the canary, vectors, workspaces, PostgreSQL and refusals.

Every fixture the suite shares is registered here and nowhere else:

* ``canary``: the suite's canary string (:data:`support.refusals.CANARY`);
  feed it through any input and it must never come back in an error, a log or
  a report;
* ``assert_refused``: :func:`support.refusals.assert_refused`, which checks a
  refusal is a ``SealevalError`` with exactly a code (and field) and that no
  canary is in its ``str``/``repr``;
* ``vectors_root``: the golden-vector directory (``$SEALEVAL_VECTORS``, default
  ``../shared/vectors``); parametrize tables load cases at import time with
  ``support.vectors.cases``/``load``;
* ``workspace``: a fresh private (``0700``) directory for one test, empty, with
  no link in its path;
* ``postgres_dsn``: a database on a real, throwaway PostgreSQL server for the
  whole session (``support.postgres``).

Importable helpers (used at import time, or shared by several modules) live in
the ``support`` package beside this file; no test module imports another test
module (``tests/test_architecture.py`` checks it). Test modules live in folders
mirroring the package (``tests/captured/`` beside ``src/sealeval/captured/``);
this file puts ``tests/`` on ``sys.path`` so ``support`` imports from any of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import postgres, refusals, vectors


@pytest.fixture
def canary() -> str:
    """The suite's canary string."""
    return refusals.CANARY


@pytest.fixture(name="assert_refused")
def assert_refused_fixture() -> Callable[..., object]:
    """The refusal check (see :func:`support.refusals.assert_refused`)."""
    return refusals.assert_refused


@pytest.fixture
def vectors_root() -> Path:
    """The golden-vector directory."""
    return vectors.vectors_dir()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh, empty, private directory for one test."""
    root = tmp_path / "workspace"
    root.mkdir(mode=0o700)
    return root


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A libpq DSN on a real PostgreSQL server shared by the session (never skipped)."""
    yield from postgres.session_dsn()
