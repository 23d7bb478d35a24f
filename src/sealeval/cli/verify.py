"""``sealeval verify``: offline verification of a captured evidence pack with a signed receipt.

Contract: ``32-verify.md`` and ``40-cli.md`` §2 of the invarlock
specification (see ``docs/verification.md``)::

    sealeval verify EVIDENCE --trust-profile FILE --receipt OUT [--max-bootstrap-draws N] [--json]
    sealeval verify EVIDENCE --policy FILE --expected-baseline-run D --expected-subject-run D
                    --expected-request-digest D --expected-signer FP
                    --verifier-signing-key KEY --verifier-identity ID --receipt OUT [--json]

The pipeline itself is :func:`sealeval.captured.verification.verify_with_receipt`
(this module reads the options, calls it and prints). The policy, the anchors
and the verifier key are the recipient's own (a
trust profile, or explicit options — mixing the two is refused); nothing is
taken from the pack. The pack is examined, checked against the anchors, its
comparison is replayed and must reproduce the stored report byte for byte,
and a verifier-signed receipt ``invarlock/evidence-verification-receipt-v3``
is written outside the pack — also for rejections, whenever the manifest
could be identified.

Exit status: 0 integrity verified and the policy passed; 7 integrity
verified, decision ``regression`` or ``insufficient_evidence``; 6 integrity
failure; 4 contract failure; 2 incomplete (inputs, work budget, Unicode
environment, receipt destination) — no receipt. Messages are
``<field>: <code>``; no value or path is ever printed (the receipt is named
by its file name only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import click
from click.core import ParameterSource

from sealeval._progress import terminal_progress
from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import MetricSummary
from sealeval.captured.planning import DEFAULT_WORK_BUDGET
from sealeval.captured.trust import (
    TrustInputError,
    TrustInputs,
    explicit_trust_inputs,
    read_trust_profile,
)
from sealeval.captured.verification import REASONS, verify_with_receipt
from sealeval.captured.verify import VerificationOutcome
from sealeval.cli._common import (
    CONTEXT_SETTINGS,
    EXIT_ERROR,
    decision_order_option,
    printable,
    refusal_line,
)
from sealeval.cli._remedies import limit_remedy
from sealeval.errors import SealevalError

__all__ = [
    "REASONS",
    "VERIFY_FORMAT",
    "dump_json",
    "guidance",
    "metric_lines",
    "option_names",
    "verify_command",
]

#: ``format_version`` of the ``--json`` result (the reference's, for drop-in use).
VERIFY_FORMAT: Final = "invarlock/evidence-pack-verify-v2"
#: Explicit trust options (parameter name, option name), in checking order.
_EXPLICIT: Final = (
    ("policy", "policy"),
    ("expected_baseline_run", "expected_baseline_run"),
    ("expected_subject_run", "expected_subject_run"),
    ("expected_request_digest", "expected_request_digest"),
    ("expected_signer", "expected_signer"),
    ("verifier_signing_key", "verifier_signing_key"),
    ("verifier_identity", "verifier_identity"),
)
_DRAWS: Final = re.compile(r"[0-9]{1,30}")
_C1: Final = re.compile("[\x7f-\x9f]")


#: The option that supplies each explicit trust input (what the user types).
_OPTION_OF: Final = {
    "anchors.baseline_run_digest": "--expected-baseline-run",
    "anchors.subject_run_digest": "--expected-subject-run",
    "anchors.request_digest": "--expected-request-digest",
    "anchors.evidence_signer_fingerprint": "--expected-signer",
    "verifier_identity": "--verifier-identity",
    "verifier_signing_key": "--verifier-signing-key",
    "policy": "--policy",
    "receipt": "--receipt",
}


def guidance(
    error: SealevalError,
    *,
    trust_profile: str | None,
    options: Mapping[str, Any],
    receipt: str | None,
) -> list[str]:
    """Lines that name what the user must type for a missing input (never a value).

    The refusal line itself names the first missing option
    (:func:`option_names`); these lines name every other missing option at
    once, with the remedy: the digests ``sealeval evaluate`` printed, or a
    trust profile.
    """
    if error.code != "missing_input" or error.field is None:
        return []
    if trust_profile is not None:
        return ["sealeval: the trust profile (--trust-profile) lacks it; see sealeval init trust"]
    given = {
        "anchors.baseline_run_digest": options.get("expected_baseline_run"),
        "anchors.subject_run_digest": options.get("expected_subject_run"),
        "anchors.request_digest": options.get("expected_request_digest"),
        "anchors.evidence_signer_fingerprint": options.get("expected_signer"),
        "verifier_identity": options.get("verifier_identity"),
        "verifier_signing_key": options.get("verifier_signing_key"),
        "policy": options.get("policy"),
        "receipt": receipt,
    }
    missing = [option for field, option in _OPTION_OF.items() if given[field] is None]
    if error.field not in _OPTION_OF or not missing:
        return []
    others = [option for option in missing if option != _OPTION_OF[error.field]]
    lines = [f"sealeval: also missing: {', '.join(others)}"] if others else []
    if any(option.startswith("--expected-") for option in missing):
        lines.append(
            "sealeval: give the digests sealeval evaluate printed, "
            "or --trust-profile FILE (sealeval init trust writes one)"
        )
    return lines


#: What the user typed for the other inputs of ``verify`` (whatever the trust source).
_OPTION_ALWAYS: Final = {
    "pack": "EVIDENCE",
    "trust_profile": "--trust-profile",
    "receipt": "--receipt",
    "max_bootstrap_draws": "--max-bootstrap-draws",
    **{parameter: "--" + parameter.replace("_", "-") for parameter, _ in _EXPLICIT},
}


def option_names(*, trust_profile: str | None) -> dict[str, str]:
    """Map verify's field names to the options the user typed (for the refusal line).

    With a trust profile the anchors and the policy are fields of that file
    and keep their names; with explicit options each names its option
    (``anchors.baseline_run_digest`` -> ``--expected-baseline-run``).
    """
    if trust_profile is not None:
        return {field: option for field, option in _OPTION_ALWAYS.items() if field != "policy"}
    return {**_OPTION_ALWAYS, **_OPTION_OF}


class _IncompleteError(Exception):
    """An exit-2 outcome: the refusal and its reason."""

    def __init__(self, error: SealevalError, reason: str) -> None:
        super().__init__(error.code)
        self.error = error
        self.reason = reason


def dump_json(document: Mapping[str, Any]) -> str:
    """Encode a CLI result: sorted keys, compact, non-ASCII raw, control characters escaped."""
    text = encode_invarlock(document).decode("utf-8")
    return _C1.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def metric_lines(summaries: tuple[MetricSummary, ...]) -> list[str]:
    """Return one line per metric entry (plus its recorded reasons)."""
    lines: list[str] = []
    for summary in summaries:
        lines.append(
            f"{printable(summary.name)} / {printable(summary.slice)}: {summary.decision}; "
            f"{summary.usable_count} usable pairs; {summary.missing_count} missing results"
        )
        if summary.reasons:
            lines.append("Recorded reasons: " + "; ".join(summary.reasons))
    return lines


def _budget(value: str | None) -> int:
    if value is None:
        return DEFAULT_WORK_BUDGET
    if _DRAWS.fullmatch(value) is None:
        raise _IncompleteError(
            TrustInputError("invalid_budget", "max_bootstrap_draws"), "invalid_verification_inputs"
        )
    return int(value)


def _trust_inputs(
    ctx: click.Context, trust_profile: str | None, options: Mapping[str, Any]
) -> TrustInputs:
    """Read the profile (refusing explicit options given on the command line) or the options."""
    if trust_profile is not None:
        for parameter, name in _EXPLICIT:
            if ctx.get_parameter_source(parameter) == ParameterSource.COMMANDLINE:
                raise TrustInputError("mixed_trust_inputs", name)
        return read_trust_profile(trust_profile)
    return explicit_trust_inputs(
        policy=options["policy"],
        expected_baseline_run=options["expected_baseline_run"],
        expected_subject_run=options["expected_subject_run"],
        expected_request_digest=options["expected_request_digest"],
        expected_signer=options["expected_signer"],
        verifier_signing_key=options["verifier_signing_key"],
        verifier_identity=options["verifier_identity"],
    )


def _run(
    ctx: click.Context,
    evidence: str,
    *,
    trust_profile: str | None,
    receipt: str | None,
    max_draws: str | None,
    options: Mapping[str, Any],
    announce: bool = False,
) -> tuple[VerificationOutcome, bool]:
    """Read the trust inputs, then run the library pipeline; return (outcome, receipt written)."""
    try:
        budget = _budget(max_draws)
        trust = _trust_inputs(ctx, trust_profile, options)
    except SealevalError as error:
        raise _IncompleteError(error, "invalid_verification_inputs") from None
    with terminal_progress(announce=announce) as progress:
        done = verify_with_receipt(
            evidence,
            trust,
            receipt=receipt,
            max_bootstrap_draws=budget,
            uncapped=options["uncapped"],
            decision_order=options["decision_order"],
            progress=progress,
        )
    if done.outcome is None:
        assert done.error is not None
        assert done.reason is not None
        raise _IncompleteError(done.error, done.reason)
    return done.outcome, done.receipt is not None


def _result(outcome: VerificationOutcome, receipt_name: str | None) -> dict[str, Any]:
    if outcome.integrity_ok:
        assert outcome.report is not None
        return {
            "format_version": VERIFY_FORMAT,
            "kind": "captured",
            "ok": outcome.ok,
            "integrity_ok": True,
            "policy_verdict": outcome.policy_verdict,
            "decision": outcome.decision,
            "replay_status": outcome.replay_status,
            "signed_receipt": receipt_name,
            "pack_manifest_digest": outcome.pack_manifest_digest,
            "metric_summaries": [summary.to_dict() for summary in outcome.metric_summaries],
        }
    return {
        "format_version": VERIFY_FORMAT,
        "kind": "captured",
        "ok": False,
        "integrity_ok": False,
        "policy_verdict": None,
        "decision": None,
        "scoring_assurance": None,
        "signed_receipt": receipt_name,
        "errors": [str(outcome.error)],
    }


def _incomplete_result(refusal: _IncompleteError) -> dict[str, Any]:
    return {
        "format_version": VERIFY_FORMAT,
        "kind": "captured",
        "ok": False,
        "integrity_ok": None,
        "policy_verdict": None,
        "decision": None,
        "scoring_assurance": None,
        "signed_receipt": None,
        "errors": [str(refusal.error)],
        "reason": refusal.reason,
    }


def _text(outcome: VerificationOutcome, receipt_name: str | None) -> str:
    if outcome.integrity_ok:
        headline = (
            "PASS Independent captured verification complete"
            if outcome.ok
            else "FAIL captured evidence does not satisfy the approved policy"
        )
        lines = [
            headline,
            "Evidence integrity: verified",
            f"Policy result: {outcome.policy_verdict}",
            "Independent captured replay complete",
            f"Recorded decision: {outcome.decision}",
            *metric_lines(outcome.metric_summaries),
        ]
    else:
        lines = [
            f"FAIL {outcome.error}",
            "Evidence integrity: not verified; no acceptance established",
        ]
    if receipt_name is not None:
        lines.append(f"Receipt {printable(receipt_name)}")
    return "\n".join(lines) + "\n"


@click.command("verify", context_settings=CONTEXT_SETTINGS)
@click.argument("evidence", metavar="EVIDENCE")
@click.option(
    "--trust-profile",
    metavar="FILE",
    help="Recipient trust profile (invarlock/trust-inputs-v2); not with explicit anchors.",
)
@click.option("--policy", metavar="FILE", envvar="SEALEVAL_POLICY", help="The approved policy.")
@click.option(
    "--expected-baseline-run",
    "--expected-baseline",
    "expected_baseline_run",
    metavar="DIGEST",
    envvar="SEALEVAL_EXPECTED_BASELINE_RUN",
    help="Expected baseline run digest.",
)
@click.option(
    "--expected-subject-run",
    "--expected-subject",
    "expected_subject_run",
    metavar="DIGEST",
    envvar="SEALEVAL_EXPECTED_SUBJECT_RUN",
    help="Expected subject run digest.",
)
@click.option(
    "--expected-request-digest",
    metavar="DIGEST",
    envvar="SEALEVAL_EXPECTED_REQUEST_DIGEST",
    help="Expected captured request digest.",
)
@click.option(
    "--expected-signer",
    metavar="FINGERPRINT",
    envvar="SEALEVAL_EXPECTED_SIGNER",
    help="Expected pack signer key fingerprint.",
)
@click.option(
    "--verifier-signing-key",
    "--verifier-key",
    "verifier_signing_key",
    metavar="KEY",
    envvar="SEALEVAL_VERIFIER_SIGNING_KEY",
    help="Ed25519 private key (PEM) that signs the receipt.",
)
@click.option(
    "--verifier-identity",
    metavar="ID",
    envvar="SEALEVAL_VERIFIER_IDENTITY",
    help="Verifier identity recorded in the receipt.",
)
@click.option(
    "--receipt", metavar="OUT", help="Receipt destination (must not exist, outside the pack)."
)
@click.option(
    "--max-bootstrap-draws",
    "max_draws",
    metavar="N",
    help=f"Local work budget in bootstrap draws (a cap for this host) [default: "
    f"{DEFAULT_WORK_BUDGET}, enough for 1,000,000 records].",
)
@click.option(
    "--uncapped",
    is_flag=True,
    help="Read a pack built with evaluate --uncapped (beyond the reference's 50,000-record "
    "and run-size caps; run files are streamed).",
)
@decision_order_option(
    "Replay with this decision order; the pack's report must have been made with it."
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON result.")
@click.pass_context
def verify_command(
    ctx: click.Context,
    /,
    evidence: str,
    *,
    trust_profile: str | None,
    receipt: str | None,
    max_draws: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Verify a captured evidence pack against recipient-owned inputs; write a signed receipt.

    Exit 0 verified and passed, 7 verified but the policy did not pass,
    6 integrity failure, 4 contract failure (both with a signed rejection
    receipt once the manifest is identified), 2 incomplete (no receipt).
    """
    try:
        outcome, written = _run(
            ctx,
            evidence,
            trust_profile=trust_profile,
            receipt=receipt,
            max_draws=max_draws,
            options=options,
            announce=not as_json,
        )
    except _IncompleteError as refusal:
        if as_json:
            click.echo(dump_json(_incomplete_result(refusal)), nl=False)
        else:
            click.echo(
                refusal_line(refusal.error, option_names(trust_profile=trust_profile)), err=True
            )
            hints = guidance(
                refusal.error, trust_profile=trust_profile, options=options, receipt=receipt
            )
            for line in hints:
                click.echo(line, err=True)
            _remedy(refusal.error, options)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    receipt_name = Path(str(receipt)).name if written else None
    if as_json:
        click.echo(dump_json(_result(outcome, receipt_name)), nl=False)
    else:
        click.echo(_text(outcome, receipt_name), nl=False)
        if outcome.error is not None:
            _remedy(outcome.error, options)
    raise click.exceptions.Exit(outcome.status)


def _remedy(error: SealevalError, options: Mapping[str, Any]) -> None:
    """Print the option that lifts a size cap or the work budget (standard error)."""
    hint = limit_remedy("verify", error.code, error.field, uncapped=bool(options["uncapped"]))
    if hint is not None:
        click.echo(f"sealeval: {hint}", err=True)
