"""Fail-closed evaluation sessions and their governance pieces.

Modules: ``cases`` (comparison cases and the evaluation case digest),
``holdout`` (Merkle holdout commitments), ``forensics`` (overlap forensics),
``adjudication`` (blinded adjudication packets), ``budget`` (feedback budget
policy and ledger).
"""
