"""Integrations with the places evaluation engineers work (``docs/integrations.md``).

* :func:`compare_for_gate` / :func:`describe_outcome` — compare two runs under a
  policy from runs, paths or documents, and say why a comparison did not pass
  (the pytest plugin ``sealeval.pytest_plugin`` and CI gates use them);
* :func:`sealeval.integrations.mlflow.log_pack_to_mlflow` — log an evidence pack,
  its decision and its reports to an MLflow run (extra ``sealeval[mlflow]``).

Live objects (Inspect ``EvalLog``, lm-eval's results dictionary) become runs
through :mod:`sealeval.captured.importers.live`; the local viewer is
:mod:`sealeval.view`.

Example::

    from sealeval.integrations import compare_for_gate, describe_outcome

    report = compare_for_gate("baseline.run.json", "candidate.run.json", "policy.json")
    if not report.passed:
        raise SystemExit(describe_outcome(report))
"""

from __future__ import annotations

from sealeval.integrations.gate import GateInputError, compare_for_gate, describe_outcome

__all__ = ["GateInputError", "compare_for_gate", "describe_outcome"]
