"""The captured evaluation request ``invarlock/evaluation-request-v2``: load, normalize, digest.

Wire contract: ``30-request.md`` of the invarlock specification (and
``00-conventions.md`` §3 for the strict YAML); JSON Schema
``contracts/invarlock.evaluation-request-v2.schema.json`` (``$defs/authored``
and ``$defs/normalized``). See ``docs/evidence-pack.md``.

Three layers, each usable on its own:

* **Authored request** — :func:`load_authored_request` reads the YAML (or
  JSON, which is YAML) with :func:`sealeval.strict_yaml.load_strict_yaml`
  (1 MiB, 10,000 nodes, depth 64, no anchors/aliases/tags/directives/merge
  keys/duplicate keys, JSON-syntax scalars, no include keys outside
  ``comparison.{side}.service_identity.configuration``) and validates the
  closed authored schema; :func:`parse_authored_request` does the schema part
  for an already parsed value. No file is touched.
* **Normalization** — :func:`normalize_captured_request` binds an authored
  request to two loaded :class:`~sealeval.captured.run.Run` objects and a
  policy: run digests, expected-run-digest pins, the policy's case-set pin,
  declared identities against the runs, input projections, the metric
  selector. The result, :class:`NormalizedRequest`, drops every path; its
  digest (:func:`captured_request_digest`) is therefore relocation-invariant,
  and :func:`comparison_id` binds it to the run and policy digests.
* **Files** — :func:`load_captured_request` resolves the request's
  references beneath the request root (every component opened without
  following symlinks), reads the runs (adapter ``invarlock`` here, any other
  adapter through a caller-supplied :class:`RunLoader`) and the policy,
  checks the output destination and normalizes. :func:`preflight` is
  ``evaluate --preflight`` without the comparison-engine checks, which a
  caller plugs in as ``paired_check``.

Refusals are :class:`CapturedRequestError` (message ``<field>: <code>``; the
field is a fixed location such as ``comparison.baseline.path``, never a
submitted value). Run content problems stay
:class:`~sealeval.captured.CapturedRunError` (field rebased under the side),
policy problems :class:`~sealeval.captured.policy.ComparisonPolicyError`, key
problems :class:`~sealeval.captured.signing.SigningKeyError`.

The package's modules, each with one job (import from this face, not from them):

* :mod:`~sealeval.captured.request.schema` — constants, the error, the shared field checks;
* :mod:`~sealeval.captured.request.authored` — the authored request and its YAML loading;
* :mod:`~sealeval.captured.request.normalized` — normalization, digests, comparison ids;
* :mod:`~sealeval.captured.request.files` — file resolution, loading and preflight.
"""

from __future__ import annotations

from sealeval.captured.request.authored import (
    AuthoredRequest,
    SourceSpec,
    load_authored_request,
    parse_authored_request,
)
from sealeval.captured.request.files import (
    CapturedRequest,
    PairedCheck,
    PreflightResult,
    RunLoader,
    check_output_destination,
    load_captured_request,
    preflight,
    read_authored_request,
)
from sealeval.captured.request.normalized import (
    NormalizedRequest,
    authored_from_normalized,
    captured_request_digest,
    comparison_id,
    normalize_captured_request,
    parse_normalized_request,
)
from sealeval.captured.request.schema import (
    ADAPTERS,
    AUTHORED_METRICS,
    EXECUTION_MODE,
    MAX_INPUT_BYTES,
    MAX_REQUEST_BYTES,
    NORMALIZED_METRICS,
    PREFLIGHT_CHECKS,
    REQUEST_FORMAT,
    REQUEST_YAML_LIMITS,
    SIDES,
    CapturedRequestError,
)
from sealeval.captured.run_facts import RunFacts, read_run_facts, run_source

__all__ = [
    "ADAPTERS",
    "AUTHORED_METRICS",
    "EXECUTION_MODE",
    "MAX_INPUT_BYTES",
    "MAX_REQUEST_BYTES",
    "NORMALIZED_METRICS",
    "PREFLIGHT_CHECKS",
    "REQUEST_FORMAT",
    "REQUEST_YAML_LIMITS",
    "SIDES",
    "AuthoredRequest",
    "CapturedRequest",
    "CapturedRequestError",
    "NormalizedRequest",
    "PairedCheck",
    "PreflightResult",
    "RunFacts",
    "RunLoader",
    "SourceSpec",
    "authored_from_normalized",
    "captured_request_digest",
    "check_output_destination",
    "comparison_id",
    "load_authored_request",
    "load_captured_request",
    "normalize_captured_request",
    "parse_authored_request",
    "parse_normalized_request",
    "preflight",
    "read_authored_request",
    "read_run_facts",
    "run_source",
]
