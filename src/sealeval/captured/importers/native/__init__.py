"""Native importers: result files evaluation tools write on disk, read without re-running.

Each importer turns one tool's recorded per-case results into canonical
records (see ``docs/importers.md``, "Native formats", for every mapping,
quirk and refusal). ``load_run`` finds them in :data:`NATIVE_IMPORTERS`.
Auto-detection never claims a layout that a specified adapter reads
(Inspect JSON logs, lm-eval ≥0.4.3 JSONL, promptfoo JSONL); ``auto`` reads
such a file with the native importer when the specified adapter refuses it
(:data:`~sealeval.captured.importers.registry.FALLBACKS`).
"""

from __future__ import annotations

from typing import Final

from sealeval.captured.importers.base import Importer
from sealeval.captured.importers.native.deepeval_test_run import (
    DeepEvalEvaluationResultImporter,
    DeepEvalTestRunImporter,
)
from sealeval.captured.importers.native.folders import (
    InspectFolderImporter,
    LmEvalFolderImporter,
)
from sealeval.captured.importers.native.garak import GarakReportImporter
from sealeval.captured.importers.native.inspect_eval import InspectEvalImporter
from sealeval.captured.importers.native.inspect_log import InspectJsonLogImporter
from sealeval.captured.importers.native.langfuse import (
    LangfuseExperimentItemsImporter,
    LangfuseExperimentResultImporter,
    UnsafeLangfuseExperimentResultImporter,
)
from sealeval.captured.importers.native.lighteval import LightevalDetailsImporter
from sealeval.captured.importers.native.lm_eval_files import LmEvalLogSamplesImporter
from sealeval.captured.importers.native.mlflow_eval_table import MlflowEvalTableImporter
from sealeval.captured.importers.native.mlflow_tables import MlflowResultTableImporter
from sealeval.captured.importers.native.openai_evals import OpenAIEvalsLogImporter
from sealeval.captured.importers.native.opik import OpikEvaluationResultImporter
from sealeval.captured.importers.native.phoenix_evals import PhoenixEvalsRowsImporter
from sealeval.captured.importers.native.promptfoo_results import PromptfooResultsImporter
from sealeval.captured.importers.native.pydantic_evals import PydanticEvalsReportImporter
from sealeval.captured.importers.native.ragas import RagasResultRowsImporter
from sealeval.captured.importers.native.ragas_csv import RagasResultCsvImporter
from sealeval.captured.importers.native.single_case import (
    AutoevalsScoresImporter,
    OpenevalsResultsImporter,
)

__all__ = ["NATIVE_IMPORTERS"]

#: One instance per native format, in documentation order.
NATIVE_IMPORTERS: Final[tuple[Importer, ...]] = (
    InspectEvalImporter(),
    InspectJsonLogImporter(),
    LmEvalLogSamplesImporter(),
    PromptfooResultsImporter(),
    DeepEvalTestRunImporter(),
    DeepEvalEvaluationResultImporter(),
    PydanticEvalsReportImporter(),
    OpenAIEvalsLogImporter(),
    GarakReportImporter(),
    MlflowResultTableImporter(),
    MlflowEvalTableImporter(),
    LangfuseExperimentResultImporter(),
    UnsafeLangfuseExperimentResultImporter(),
    LangfuseExperimentItemsImporter(),
    RagasResultRowsImporter(),
    RagasResultCsvImporter(),
    LightevalDetailsImporter(),
    PhoenixEvalsRowsImporter(),
    OpikEvaluationResultImporter(),
    AutoevalsScoresImporter(),
    OpenevalsResultsImporter(),
    LmEvalFolderImporter(),
    InspectFolderImporter(),
)
