"""Real evaluator samples for the integration tests: an Inspect log and a regressed copy.

The baseline is the real Inspect ``.eval`` log of ``../shared/samples/evaluators``.
The regressed candidate is the same log after a model that answers ``q1``
wrongly: its output and its recorded grades changed through inspect_ai's own
objects and written with inspect_ai's own ``write_eval_log``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log, write_eval_log
from inspect_ai.model import ModelOutput

from support.vectors import samples_dir

SAMPLES = samples_dir()
BASELINE_ARTIFACT = "sha256:" + "ab" * 32
CANDIDATE_ARTIFACT = "sha256:" + "cd" * 32
#: The sample the regressed candidate gets wrong.
FLIPPED_ID = "q1"
WRONG_ANSWER = "5"


def inspect_eval_log() -> Path:
    return next((SAMPLES / "inspect_ai" / "logs").glob("*.eval"))


def inspect_version() -> str:
    return str(read_eval_log(inspect_eval_log(), header_only=True).eval.packages["inspect_ai"])


def provenance() -> dict[str, Any]:
    """Score provenance of Inspect's recorded ``includes`` grades."""
    return {
        "includes": {
            "kind": "external_metric",
            "source": "inspect_ai",
            "version": inspect_version(),
            "unit": "score",
            "rubric_digest": None,
        }
    }


def policy(*, minimum_count: int = 2) -> dict[str, Any]:
    """A policy on the recorded ``includes`` grade: the candidate must keep at least 0.6."""
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [
            {
                "accepted_provenance": provenance()["includes"],
                "aggregation": "mean",
                "configuration": {},
                "direction": "higher",
                "kind": "recorded",
                "maximum_interval_width": 2,
                "maximum_regression": 1,
                "minimum_count": minimum_count,
                "name": "includes",
                "score_key": "includes",
                "subject_minimum": 0.6,
                "unit": "score",
            }
        ],
        "slices": [{"name": "easy", "where": {"difficulty": "easy"}}],
    }


def model_output(model: str, content: str, *, message_id: str) -> ModelOutput:
    """``ModelOutput.from_content`` with a fixed message id.

    inspect_ai draws a fresh random id for every new assistant message, and a
    run keeps the upstream record (message id included) inside its digested
    bytes: without a fixed id, two builds of the same fixture differ.
    """
    output = ModelOutput.from_content(model=model, content=content)
    choices = [
        choice.model_copy(update={"message": choice.message.model_copy(update={"id": message_id})})
        for choice in output.choices
    ]
    return output.model_copy(update={"choices": choices})


def regressed_log() -> EvalLog:
    """The baseline log after a model that answers ``q1`` wrongly (grades follow)."""
    log = read_eval_log(inspect_eval_log())
    samples = []
    for sample in log.samples or []:
        if sample.id == FLIPPED_ID:
            scores = {
                name: score.model_copy(
                    update={"value": "I", "answer": WRONG_ANSWER}
                    if isinstance(score.value, str)
                    else {}
                )
                for name, score in (sample.scores or {}).items()
            }
            output = model_output(
                log.eval.model, WRONG_ANSWER, message_id=f"regressed-{FLIPPED_ID}"
            )
            samples.append(sample.model_copy(update={"output": output, "scores": scores}))
        else:
            samples.append(sample)
    return log.model_copy(update={"samples": samples})


def write_regressed_log(directory: Path) -> Path:
    """Write the regressed candidate with inspect_ai's own writer; return the ``.eval`` path."""
    path = directory / "candidate.eval"
    write_eval_log(regressed_log(), str(path), format="eval")
    return path


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# lm-evaluation-harness multiple choice (no errored documents: a comparison can pass)


def lm_eval_mc_samples() -> Path:
    return next((SAMPLES / "lm_eval" / "out").rglob("samples_toy_mc_*.jsonl"))


def lm_eval_version() -> str:
    results = next(lm_eval_mc_samples().parent.glob("results_*.json"))
    return str(json.loads(results.read_text(encoding="utf-8"))["lm_eval_version"])


def mc_provenance() -> dict[str, Any]:
    """Score provenance of lm-eval's recorded ``acc``."""
    return {
        "acc": {
            "kind": "measurement",
            "source": "lm-evaluation-harness",
            "version": lm_eval_version(),
            "unit": "score",
            "rubric_digest": None,
        }
    }


def mc_policy() -> dict[str, Any]:
    """The candidate's accuracy must stay at or above 0.3 (the baseline's is 1/3)."""
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [
            {
                "accepted_provenance": mc_provenance()["acc"],
                "aggregation": "mean",
                "configuration": {},
                "direction": "higher",
                "kind": "recorded",
                "maximum_interval_width": 2,
                "maximum_regression": 1,
                "minimum_count": 3,
                "name": "acc",
                "score_key": "acc",
                "subject_minimum": 0.3,
                "unit": "score",
            }
        ],
        "slices": [],
    }


def regressed_mc_rows() -> tuple[list[dict[str, Any]], str]:
    """The real rows after a model that loses every document it got right; and one lost id."""
    rows = [
        json.loads(line) for line in lm_eval_mc_samples().read_text(encoding="utf-8").splitlines()
    ]
    lost = ""
    for row in rows:
        if row["acc"] == 1.0:
            lost = str(row["doc_id"])
            gold = int(row["target"])
            wrong = (gold + 1) % len(row["filtered_resps"])
            for key in ("filtered_resps",):
                values = row[key]
                values[gold], values[wrong] = values[wrong], values[gold]
            row["resps"] = [[value] for value in row["filtered_resps"]]
            row["acc"] = row["acc_norm"] = 0.0
    assert lost
    return rows, lost


def write_regressed_mc(directory: Path) -> Path:
    """Write the regressed candidate beside nothing else (same file name pattern)."""
    rows, _ = regressed_mc_rows()
    path = directory / lm_eval_mc_samples().name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
