"""Store URIs shared by the store contract and PostgreSQL load tests.

Moved out of ``test_session_store_contract.py`` so that no test module imports another."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import psycopg


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
