"""Fail-closed evaluation sessions and their governance pieces.

Modules: ``cases`` (comparison cases and the evaluation case digest),
``holdout`` (Merkle holdout commitments), ``forensics`` (overlap forensics),
``adjudication`` (a package: blinded adjudication packets, the sealed
mapping, audits), ``budget`` (a package: feedback budget policy, the pure core
with the one ``record_official_attempt``, the in-memory ledger), ``record``
(the content-free session record), ``store`` / ``postgres_store`` (the
durable session store interface, SQLite and PostgreSQL stores),
``transaction`` (the one home of store transactions), ``durable_ledger``
(the feedback ledger in the store's database), ``store_factory`` (a store
from one location string), ``config`` (the session configuration document)
and ``session`` (the fail-closed ``EvaluationSession`` state machine).
"""
