"""``sealeval evaluate``: build and publish a captured evidence pack ``invarlock/evidence-pack-v2``.

Contract: ``30-request.md``, ``31-pack.md`` and ``40-cli.md`` §1 of the
invarlock specification (see ``docs/evidence-pack.md`` and
``docs/verification.md``)::

    sealeval evaluate REQUEST (--signing-key KEY | --unsigned) [--preflight] [--json]
                      [--fail-on-policy] [--max-bootstrap-draws N]
                      [--baseline-run P] [--subject-run P] [--output P] [--request-root DIR]
    sealeval evaluate --keygen DIR [--json]
    sealeval evaluate --freeze-cases FILE [--case-set-output FILE] [--json]

The pipeline itself is :mod:`sealeval.captured.evaluate` (this module parses
options, calls it and prints). The request (strict YAML) names both runs — a canonical run (adapter
``invarlock``) or a native export read by :func:`sealeval.captured.importers.load_run`
— the approved policy and the evidence destination (which must not exist).
``evaluate`` loads and normalizes the request, compares the runs, and
publishes the pack atomically and no-clobber: signed with an Ed25519 key, or
explicitly ``unsigned_local`` (such packs can be rendered but never
verified). ``--preflight`` runs every check without writing anything.

Exit status: 0 published (any decision) or preflight passed; 7 published
with ``--fail-on-policy`` and a decision other than ``pass``; 2 any request,
input, budget, destination or signing error (``sealeval: error: <field>:
<code>`` on standard error, or the JSON result with ``--json``). Messages
never contain values or paths; paths in results are request-relative.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import click
from click.core import ParameterSource

from sealeval._progress import terminal_progress
from sealeval.captured.case_set import parse_case_set, write_case_set
from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS, ComparisonReport
from sealeval.captured.evaluate import (
    PREFLIGHT_FORMAT,
    RESULT_FORMAT,
    Evaluation,
    evaluate_request,
    failure_document,
    native_run_loader,
    preflight_request,
)
from sealeval.captured.planning import DEFAULT_WORK_BUDGET
from sealeval.captured.run import INVARLOCK_LIMITS, read_file_bytes
from sealeval.captured.signing import generate_key_directory
from sealeval.cli._common import (
    CONTEXT_SETTINGS,
    EXIT_ERROR,
    EXIT_OK,
    decision_order_option,
    printable,
    refusal_line,
    shared_remedy,
)
from sealeval.cli._remedies import CAP_CODES, limit_remedy
from sealeval.cli.verify import dump_json, metric_lines
from sealeval.errors import CanonicalError, CapturedError, SealevalError

__all__ = [
    "EXIT_POLICY_NOT_PASSED",
    "PREFLIGHT_FORMAT",
    "RESULT_FORMAT",
    "SETUP_FORMAT",
    "EvaluateError",
    "evaluate_command",
    "native_run_loader",
    "option_names",
]

#: ``--fail-on-policy`` and the decision is not ``pass``.
EXIT_POLICY_NOT_PASSED: Final = 7
#: ``format_version`` of a setup action's result (``--keygen``/``--freeze-cases --json``).
SETUP_FORMAT: Final = "invarlock/evaluation-setup-v1"

_DRAWS: Final = re.compile(r"[0-9]{1,30}")
_MAX_CASE_SET_BYTES: Final = 134_217_728
#: Evaluation options a setup action may not be combined with (parameter names).
_EVALUATION_OPTIONS: Final = (
    "signing_key",
    "unsigned",
    "preflight",
    "fail_on_policy",
    "max_draws",
    "baseline_run",
    "subject_run",
    "output",
    "request_root",
)


class EvaluateError(CapturedError):
    """Refusal of the ``evaluate`` command line itself (exit 2)."""

    module = "sealeval.cli.evaluate"
    codes = frozenset(
        {
            "request_required",
            "conflicting_actions",
            "invalid_budget",
            "case_set_output_without_freeze",
            "invalid_json",
        }
    )


def _budget(value: str | None, *, uncapped: bool = False) -> int:
    """Parse ``--max-bootstrap-draws``; default: the reference's, or sealeval's when uncapped.

    Within invarlock's envelope the default stays the reference's 102,400,000
    (the preflight document states it, byte for byte as the reference); with
    ``--uncapped`` it is :data:`~sealeval.captured.planning.DEFAULT_WORK_BUDGET`.
    """
    if value is None:
        return DEFAULT_WORK_BUDGET if uncapped else DEFAULT_MAX_BOOTSTRAP_DRAWS
    if _DRAWS.fullmatch(value) is None:
        raise EvaluateError("invalid_budget", "max_bootstrap_draws")
    return int(value)


def _given(ctx: click.Context, parameter: str) -> bool:
    """Whether an option was given on the command line or through the environment."""
    source = ctx.get_parameter_source(parameter)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


# ---------------------------------------------------------------------------
# Setup actions


def _setup_result(action: str | None, details: Mapping[str, Any] | None, error: str | None) -> str:
    return dump_json(
        {
            "format_version": SETUP_FORMAT,
            "action": action,
            "ok": error is None,
            "details": None if error is not None else dict(details or {}),
            "errors": [] if error is None else [error],
        }
    )


def _keygen(directory: str) -> dict[str, Any]:
    generated = generate_key_directory(directory)
    return {
        "private_key": str(Path(directory) / generated.private_key.name),
        "public_key": str(Path(directory) / generated.public_key.name),
        "public_key_fingerprint": generated.fingerprint,
    }


def _freeze(source: str, output: str | None) -> dict[str, Any]:
    data = read_file_bytes(Path(source), _MAX_CASE_SET_BYTES, "case_set")
    try:
        case_set = parse_case_set(data, limits=INVARLOCK_LIMITS)
    except CanonicalError:
        raise EvaluateError("invalid_json", "case_set") from None
    if output is not None:
        write_case_set(case_set, output)
    return {"case_count": len(case_set.cases), "case_set_digest": case_set.digest, "output": output}


def _setup(
    ctx: click.Context,
    *,
    request: str | None,
    keygen: str | None,
    freeze_cases: str | None,
    case_set_output: str | None,
    as_json: bool,
) -> None:
    """Run exactly one setup action (no request, no evaluation option)."""
    action = "keygen" if keygen is not None else "freeze_cases"
    try:
        if keygen is not None and freeze_cases is not None:
            raise EvaluateError("conflicting_actions", "setup")
        if request is not None or any(_given(ctx, name) for name in _EVALUATION_OPTIONS):
            raise EvaluateError("conflicting_actions", "setup")
        if case_set_output is not None and freeze_cases is None:
            raise EvaluateError("case_set_output_without_freeze", "case_set_output")
        if keygen is not None:
            details = _keygen(keygen)
        else:
            assert freeze_cases is not None
            details = _freeze(freeze_cases, case_set_output)
    except SealevalError as error:
        if as_json:
            click.echo(_setup_result(action, None, str(error)), nl=False)
        else:
            destination = "--keygen" if action == "keygen" else "--case-set-output"
            click.echo(refusal_line(error, {**_TYPED, "output": destination}), err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    if as_json:
        click.echo(_setup_result(action, details, None), nl=False)
    elif action == "keygen":
        click.echo(f"Key pair written; public key fingerprint {details['public_key_fingerprint']}")
    else:
        click.echo(f"Case set frozen: {details['case_count']} cases; {details['case_set_digest']}")


# ---------------------------------------------------------------------------
# Evaluation


def _evaluation_text(document: Mapping[str, Any], report: ComparisonReport) -> str:
    """Return the human result (the reference's lines: decision, signing, metrics, evidence)."""
    signing = (
        "Signing: Signed evidence"
        if document["authentication"] == "signed"
        else "Signing: Unsigned local evidence"
    )
    lines = [
        "Captured evidence created",
        f"Recorded policy result: {document['decision']}",
        signing,
        "Independent verification: not performed",
        *metric_lines(report.metric_summaries()),
        f"Evidence: {document['evidence']}",
    ]
    return "\n".join(lines) + "\n"


#: What the user can type to get past a refusal (code -> remedy), printed after the error.
_REMEDIES: Final = {
    "signing_key_required": "give --signing-key KEY (sealeval evaluate --keygen DIR makes one) "
    "or --unsigned",
    "signing_mode_conflict": "give either --signing-key KEY or --unsigned, not both",
    "output_exists": "the evidence folder exists: remove it or give --output DIR",
}


def remedy(error: SealevalError, *, uncapped: bool = False) -> str | None:
    """Return the remedy line for a refusal, naming options (never a value), or ``None``."""
    if error.code in CAP_CODES or error.code == "work_budget_exceeded":
        return limit_remedy("evaluate", error.code, error.field, uncapped=uncapped)
    return _REMEDIES.get(error.code) or shared_remedy(error.code)


#: What the user typed for evaluate's own inputs (field -> argument or option).
_TYPED: Final = {
    "request": "REQUEST",
    "signing_key": "--signing-key",
    "max_bootstrap_draws": "--max-bootstrap-draws",
    "request_root": "--request-root",
    "case_set": "--freeze-cases",
    "case_set_output": "--case-set-output",
    "keygen": "--keygen",
}
#: The request fields an override option replaces (option parameter -> field).
_OVERRIDDEN: Final = {
    "baseline_run": ("comparison.baseline.path", "--baseline-run"),
    "subject_run": ("comparison.subject.path", "--subject-run"),
    "output": ("output.evidence", "--output"),
}


def option_names(overrides: Mapping[str, object]) -> dict[str, str]:
    """Map evaluate's field names to what the user typed (for the refusal line).

    A request field replaced by an option (``--baseline-run``) is named by
    that option; other request fields keep their names (they are in the
    request file the user wrote).
    """
    named = dict(_TYPED)
    for parameter, (field, option) in _OVERRIDDEN.items():
        if overrides.get(parameter) is not None:
            named[field] = option
    return named


def next_steps(document: Mapping[str, Any], signer: str | None) -> str:
    """Return what ``verify`` needs: every digest and the verify command line.

    Printed on standard error so that standard output keeps the reference's lines.
    """
    lines = [
        f"Pack manifest digest: {document['pack_manifest_digest']}",
        f"Baseline run digest: {document['baseline_run_digest']}",
        f"Subject run digest: {document['subject_run_digest']}",
        f"Request digest: {document['request_digest']}",
        f"Policy digest: {document['policy_digest']}",
    ]
    if signer is not None:
        lines += [
            f"Signer fingerprint: {signer}",
            "Verify (the recipient, with their own policy copy and receipt key):",
            f"  sealeval verify {printable(str(document['evidence']))} --policy POLICY"
            f" --expected-baseline-run {document['baseline_run_digest']}"
            f" --expected-subject-run {document['subject_run_digest']}"
            f" --expected-request-digest {document['request_digest']}"
            f" --expected-signer {signer}"
            " --verifier-signing-key KEY --verifier-identity ID --receipt receipt.json",
        ]
    else:
        lines.append("Unsigned local evidence cannot be verified (sign with --signing-key KEY).")
    return "\n".join(lines) + "\n"


def _preflight_text(document: Mapping[str, Any]) -> str:
    lines = [
        "Captured preflight passed (nothing scored into evidence, nothing written)",
        f"Requested signing: {document['requested_authentication']}",
        f"Records: {document['record_count']}; scopes: {document['scope_count']}",
        f"Bootstrap draws: {document['required_bootstrap_draws']} of "
        f"{document['max_bootstrap_draws']} allowed",
        f"Request digest: {document['request_digest']}",
    ]
    return "\n".join(lines) + "\n"


def _run(
    ctx: click.Context,
    request: str,
    *,
    signing_key: str | None,
    unsigned: bool,
    run_preflight: bool,
    max_draws: str | None,
    overrides: Mapping[str, str | None],
    uncapped: bool,
    decision_order: str,
    announce: bool,
) -> Evaluation:
    budget = _budget(max_draws, uncapped=uncapped)
    key = signing_key
    if unsigned and ctx.get_parameter_source("signing_key") == ParameterSource.ENVIRONMENT:
        key = None  # an environment-provided key is ignored under --unsigned
    pipeline = preflight_request if run_preflight else evaluate_request
    with terminal_progress(announce=announce) as progress:
        return pipeline(
            request,
            signing_key=key,
            unsigned=unsigned,
            overrides=overrides,
            max_bootstrap_draws=budget,
            decision_order=decision_order,
            uncapped=uncapped,
            progress=progress,
        )


def _failure(run_preflight: bool, signing_key: str | None, unsigned: bool, error: str) -> str:
    requested = "unsigned_local" if unsigned and signing_key is None else "signed"
    return dump_json(
        failure_document(preflight=run_preflight, requested_authentication=requested, error=error)
    )


def _check_usage(
    ctx: click.Context, request: str | None, *, as_json: bool, case_set_output: str | None
) -> None:
    """Refuse a missing request and option combinations click cannot express (exit 2)."""
    if request is None:
        error = EvaluateError("request_required", "request")
        if as_json:
            click.echo(_setup_result(None, None, str(error)), nl=False)
        else:
            click.echo(refusal_line(error, _TYPED), err=True)
        raise click.exceptions.Exit(EXIT_ERROR)
    if ctx.params["fail_on_policy"] and ctx.params["run_preflight"]:
        raise click.UsageError("--fail-on-policy cannot be used with --preflight", ctx)
    if case_set_output is not None:
        raise click.UsageError("--case-set-output requires --freeze-cases", ctx)


@click.command("evaluate", context_settings=CONTEXT_SETTINGS)
@click.argument("request", required=False, metavar="[REQUEST]")
@click.option(
    "--signing-key",
    metavar="KEY",
    envvar="SEALEVAL_SIGNING_KEY",
    help="Ed25519 private key (PEM) that signs the pack [env: SEALEVAL_SIGNING_KEY].",
)
@click.option(
    "--unsigned", is_flag=True, help="Publish unsigned_local evidence (never verifiable)."
)
@click.option("--preflight", "run_preflight", is_flag=True, help="Check everything; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON result.")
@click.option(
    "--fail-on-policy",
    is_flag=True,
    help="Exit 7 after publication unless the decision is pass (not with --preflight).",
)
@click.option(
    "--max-bootstrap-draws",
    "max_draws",
    metavar="N",
    help=f"Local work budget in bootstrap draws [default: {DEFAULT_MAX_BOOTSTRAP_DRAWS}; "
    f"with --uncapped {DEFAULT_WORK_BUDGET}].",
)
@click.option(
    "--uncapped",
    is_flag=True,
    help="Lift the reference's 50,000-record and run-size caps (the pack verifies in sealeval "
    "only, with verify --uncapped).",
)
@decision_order_option(
    "width_first checks interval width before the regression bounds (the pack verifies "
    "in sealeval only, with verify --decision-order width_first)."
)
@click.option("--baseline-run", metavar="P", help="Replace the baseline path (inside the root).")
@click.option("--subject-run", metavar="P", help="Replace the subject path (inside the root).")
@click.option("--output", metavar="P", help="Replace output.evidence (inside the root).")
@click.option("--request-root", metavar="DIR", help="Resolve references below DIR instead.")
@click.option("--keygen", metavar="DIR", help="Write a new key pair into DIR (must not exist).")
@click.option("--freeze-cases", metavar="FILE", help="Validate and freeze a planned case set.")
@click.option("--case-set-output", metavar="FILE", help="Write the frozen case set (no clobber).")
@click.pass_context
def evaluate_command(
    ctx: click.Context,
    /,
    request: str | None,
    *,
    signing_key: str | None,
    unsigned: bool,
    run_preflight: bool,
    as_json: bool,
    fail_on_policy: bool,
    max_draws: str | None,
    uncapped: bool,
    decision_order: str,
    baseline_run: str | None,
    subject_run: str | None,
    output: str | None,
    request_root: str | None,
    keygen: str | None,
    freeze_cases: str | None,
    case_set_output: str | None,
) -> None:
    """Compare the runs a captured REQUEST names and publish an evidence pack.

    Exit 0 published (or preflight passed), 7 published with --fail-on-policy
    and a decision other than pass, 2 on any error (nothing is published).
    """
    if keygen is not None or freeze_cases is not None:
        _setup(
            ctx,
            request=request,
            keygen=keygen,
            freeze_cases=freeze_cases,
            case_set_output=case_set_output,
            as_json=as_json,
        )
        return
    _check_usage(ctx, request, as_json=as_json, case_set_output=case_set_output)
    assert request is not None
    overrides = {
        "request_root": request_root,
        "baseline_run": baseline_run,
        "subject_run": subject_run,
        "output": output,
    }
    try:
        evaluation = _run(
            ctx,
            request,
            signing_key=signing_key,
            unsigned=unsigned,
            run_preflight=run_preflight,
            max_draws=max_draws,
            overrides=overrides,
            uncapped=uncapped,
            decision_order=decision_order,
            announce=not as_json,
        )
    except SealevalError as error:
        if as_json:
            click.echo(_failure(run_preflight, signing_key, unsigned, str(error)), nl=False)
        else:
            click.echo(refusal_line(error, option_names(overrides)), err=True)
            hint = remedy(error, uncapped=uncapped)
            if hint is not None:
                click.echo(f"sealeval: {hint}", err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    document, report = evaluation.document, evaluation.report
    if as_json:
        click.echo(dump_json(document), nl=False)
    elif report is None:
        click.echo(_preflight_text(document), nl=False)
    else:
        click.echo(_evaluation_text(document, report), nl=False)
        published = evaluation.published
        signer = None if published is None else published.signing_key_fingerprint
        click.echo(next_steps(document, signer), nl=False, err=True)
    if fail_on_policy and document.get("decision") != "pass":
        raise click.exceptions.Exit(EXIT_POLICY_NOT_PASSED)
    raise click.exceptions.Exit(EXIT_OK)
