"""What the session-store tests share: record chains, the store-refusal check, store URIs.

Used by ``test_session_store.py`` (SQLite specifics), ``test_session_store_contract.py``
(every back end) and the PostgreSQL load tests, so that no test module imports another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import pytest

from sealeval.errors import SealevalError
from sealeval.session.record import EvaluationSessionError, SessionRecord, SessionStep
from sealeval.session.store import SessionStore
from support.session_world import digest_of

#: The binding digest of the records :func:`record_chain` builds by default.
BINDING = digest_of("binding")
#: Budget and watermark digests the store tests bind.
BUDGET = digest_of("budget")
MARK_A = digest_of("watermark-a")
MARK_B = digest_of("watermark-b")
_PHASES = ("verified", "cases", "forensics", "adjudication", "release_claimed", "released")


def record_chain(key: str, count: int = 6, *, binding: str = BINDING) -> list[SessionRecord]:
    """Return records with 0..``count`` steps, each extending the previous by one."""
    records = [SessionRecord(session_key=key, binding_digest=binding)]
    for index in range(count):
        step = SessionStep(_PHASES[index], digest_of(f"step{index}"), index, 100 + index, None)
        records.append(records[-1].with_step(step))
    return records


def advance_to(store: SessionStore, records: list[SessionRecord], steps: int) -> None:
    """Save ``records[0]`` and then each next record up to ``records[steps]``."""
    store.save(records[0], None)
    for index in range(1, steps + 1):
        store.save(records[index], records[index - 1])


def store_error(
    action: Callable[[], object], kind: type[SealevalError] = EvaluationSessionError
) -> Any:
    """Return the refusal ``action`` raises: exactly ``kind``, nothing chained or in context."""
    with pytest.raises(kind) as caught:
        action()
    error = caught.value
    assert type(error) is kind
    assert error.__cause__ is None
    assert error.__context__ is None
    return error


def store_code(action: Callable[[], object]) -> str:
    """Return the code of a store refusal whose message is the bare code."""
    error = store_error(action)
    assert str(error) == error.code
    return str(error.code)


def pg_uri(
    dsn: str, *, schema: str | None = None, password: str | None = None, user: str | None = None
) -> str:
    """Return a ``postgresql://`` URI for a libpq DSN (``search_path`` set to ``schema``)."""
    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    user = quote(user if user is not None else str(parts.get("user", "")), safe="")
    secret = password if password is not None else str(parts.get("password", ""))
    credentials = f"{user}:{quote(secret, safe='')}@" if secret else f"{user}@"
    query = {"connect_timeout": "10"}
    if schema is not None:
        query["options"] = f"-c search_path={schema}"
    host = quote(str(parts.get("host", "127.0.0.1")), safe="")
    port = parts.get("port", "5432")
    database = quote(str(parts.get("dbname", "postgres")), safe="")
    return f"postgresql://{credentials}{host}:{port}/{database}?{urlencode(query, quote_via=quote)}"
