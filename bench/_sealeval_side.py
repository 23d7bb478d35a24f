"""sealeval's side of ``bench/pack.py``: the library pipelines in a fresh process.

``python bench/_sealeval_side.py evaluate REQUEST --signing-key KEY --output PACK
[--max-bootstrap-draws N] [--uncapped] --json`` calls
:func:`sealeval.captured.evaluate.evaluate_request`; ``... verify PACK --policy P
--expected-baseline-run D --expected-subject-run D --expected-request-digest D
--expected-signer FP --verifier-signing-key KEY --verifier-identity ID --receipt R
[--max-bootstrap-draws N] [--uncapped] --json`` calls
:func:`sealeval.captured.verification.verify_with_receipt`. Both take the
reference's option names (the benchmark gives both sides the same arguments),
print one JSON document and exit with the command's status, so the wall time
includes interpreter start as a user sees it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS
from sealeval.captured.evaluate import evaluate_request
from sealeval.captured.trust import explicit_trust_inputs
from sealeval.captured.verification import verify_with_receipt
from sealeval.errors import SealevalError


def _evaluate(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    try:
        evaluation = evaluate_request(
            args.target,
            signing_key=args.signing_key,
            overrides={"output": args.output},
            max_bootstrap_draws=args.max_bootstrap_draws,
            uncapped=args.uncapped,
        )
    except SealevalError as error:
        return 2, {"ok": False, "errors": [str(error)]}
    return 0, dict(evaluation.document)


def _verify(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    trust = explicit_trust_inputs(
        policy=args.policy,
        expected_baseline_run=args.expected_baseline_run,
        expected_subject_run=args.expected_subject_run,
        expected_request_digest=args.expected_request_digest,
        expected_signer=args.expected_signer,
        verifier_signing_key=args.verifier_signing_key,
        verifier_identity=args.verifier_identity,
    )
    done = verify_with_receipt(
        args.target,
        trust,
        receipt=args.receipt,
        max_bootstrap_draws=args.max_bootstrap_draws,
        uncapped=args.uncapped,
    )
    outcome = done.outcome
    return done.status, {
        "ok": outcome is not None and outcome.ok,
        "integrity_ok": None if outcome is None else outcome.integrity_ok,
        "decision": None if outcome is None else outcome.decision,
        "errors": [str(error)] if (error := done.error or (outcome and outcome.error)) else [],
    }


def main(argv: list[str]) -> int:
    """Run one pipeline; print its JSON document; return its exit status."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=("evaluate", "verify"))
    parser.add_argument("target")
    parser.add_argument("--max-bootstrap-draws", type=int, default=DEFAULT_MAX_BOOTSTRAP_DRAWS)
    parser.add_argument("--uncapped", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--signing-key")
    parser.add_argument("--output")
    for option in (
        "--policy",
        "--expected-baseline-run",
        "--expected-subject-run",
        "--expected-request-digest",
        "--expected-signer",
        "--verifier-signing-key",
        "--verifier-identity",
        "--receipt",
    ):
        parser.add_argument(option)
    args = parser.parse_args(argv)
    status, document = (_evaluate if args.command == "evaluate" else _verify)(args)
    sys.stdout.write(encode_invarlock(document).decode("utf-8"))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
