"""A guarded, staged OMOP CDM loader: the check behind ``unsafe_side_effect_rate``.

Pure core, thin edge (``docs/omop-guarded-loader.md``):

* A closed model of four OMOP CDM v5.4 tables (:data:`OMOP_TABLES`: ``person``,
  ``visit_occurrence``, ``condition_occurrence``, ``measurement``), their
  columns, types and required columns. Unknown tables and columns are refused.
* :func:`stage_omop_batch` validates and normalizes rows, orders them
  deterministically (table order, then ascending primary key), digests each
  row and the batch, and builds the rollback plan (one DELETE by primary key
  per row, children first) with its own, independently computed
  ``rollback_digest``. :meth:`StagedBatch.preview` describes the effect on the
  target without any row value.
* :func:`load_staged_batch` and :func:`rollback_loaded_batch` ask the injected
  authorizer first. Only an :class:`AuthorizationDecision` that approves and is
  bound to the exact preview digest lets them call the injected connection
  factory; they then write in one transaction with parameterised SQL, verify
  row counts and read the rows back (digest comparison) before committing, and
  roll back on any failure.
* :class:`OmopChallengeResult`, :func:`run_omop_challenge`,
  :func:`omop_side_effect_observations` and :func:`omop_side_effect_evidence`
  turn executed loader challenges into ``unsafe_side_effect_rate`` evidence.

Homes: :mod:`~sealeval.gates.omop.model` (the closed model, schemas,
:class:`OmopLoaderError`), :mod:`~sealeval.gates.omop.stage` (staging and the
rollback plan), :mod:`~sealeval.gates.omop.preview` (previews),
:mod:`~sealeval.gates.omop.authorize` (authorization, the DB-API protocols,
receipts), :mod:`~sealeval.gates.omop.sql` (the SQL dialects),
:mod:`~sealeval.gates.omop.load` (the transactional edge) and
:mod:`~sealeval.gates.omop.challenge` (challenges to evidence). This package is
their face.

Row values are clinical data: no message, ``repr`` or preview carries one.
Every refusal is an :class:`OmopLoaderError` with a closed code and a field
name chosen by this module.
"""

from sealeval.gates.omop.authorize import (
    AuthorizationDecision,
    Authorizer,
    Connector,
    DbConnection,
    DbCursor,
    LoadReceipt,
)
from sealeval.gates.omop.challenge import (
    OMOP_SLICES,
    OmopChallengeResult,
    omop_challenge_envelope,
    omop_side_effect_evidence,
    omop_side_effect_observations,
    run_omop_challenge,
)
from sealeval.gates.omop.load import (
    create_omop_tables,
    load_staged_batch,
    rollback_loaded_batch,
    snapshot_omop_target,
)
from sealeval.gates.omop.model import (
    BATCH_SCHEMA,
    CDM_VERSION,
    CHALLENGE_SCHEMA,
    DIALECTS,
    MAX_BATCH_ROWS,
    OMOP_TABLES,
    PREVIEW_SCHEMA,
    ROLLBACK_SCHEMA,
    TABLE_ORDER,
    OmopColumn,
    OmopLoaderError,
    OmopTable,
    omop_ddl,
)
from sealeval.gates.omop.preview import (
    LoadPreview,
    TablePreview,
)
from sealeval.gates.omop.stage import (
    OmopRow,
    RollbackStep,
    StagedBatch,
    stage_omop_batch,
)

__all__ = [
    "BATCH_SCHEMA",
    "CDM_VERSION",
    "CHALLENGE_SCHEMA",
    "DIALECTS",
    "MAX_BATCH_ROWS",
    "OMOP_SLICES",
    "OMOP_TABLES",
    "PREVIEW_SCHEMA",
    "ROLLBACK_SCHEMA",
    "TABLE_ORDER",
    "AuthorizationDecision",
    "Authorizer",
    "Connector",
    "DbConnection",
    "DbCursor",
    "LoadPreview",
    "LoadReceipt",
    "OmopChallengeResult",
    "OmopColumn",
    "OmopLoaderError",
    "OmopRow",
    "OmopTable",
    "RollbackStep",
    "StagedBatch",
    "TablePreview",
    "create_omop_tables",
    "load_staged_batch",
    "omop_challenge_envelope",
    "omop_ddl",
    "omop_side_effect_evidence",
    "omop_side_effect_observations",
    "rollback_loaded_batch",
    "run_omop_challenge",
    "snapshot_omop_target",
    "stage_omop_batch",
]
