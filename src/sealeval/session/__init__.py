"""Fail-closed evaluation sessions and their governance pieces.

Modules: ``cases`` (comparison cases and the evaluation case digest),
``holdout`` (Merkle holdout commitments), ``forensics`` (overlap forensics),
``adjudication`` (blinded adjudication packets), ``budget`` (feedback budget
policy and ledger), ``record`` (the content-free session record), ``store``
(the durable session store interface and SQLite store) and ``session`` (the
fail-closed ``EvaluationSession`` state machine).
"""
