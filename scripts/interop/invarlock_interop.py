"""Interoperability with the reference invarlock 0.17.1 (captured evidence), both directions.

1. **reference -> sealeval**: every pack under ``shared/vectors/invarlock/packs``
   (built by the reference) is verified by ``sealeval verify`` with its trust
   profile and must give the recorded exit code and the recorded receipt
   **byte for byte**; every tamper variant is refused with its recorded status;
   every ``receipts.json`` case re-verifies with the recorded result. In this
   run, the reference also evaluates every vector request with a fresh key;
   sealeval verifies those packs too (and its receipts must equal the
   reference's own receipts for the same inputs).
2. **sealeval -> reference**: sealeval's evaluation pipeline
   (:func:`sealeval.captured.evaluate.evaluate_request`) builds a pack from every
   vector request folder (signed with a fresh sealeval-generated key, plus one
   unsigned pack); the reference's own ``invarlock verify`` must accept each
   with the expected exit code (0 pass, 7 policy not passed, 6 unsigned),
   ``invarlock report`` must render each, and the reference's pack for the same
   request and key must be byte-identical to sealeval's.

Usage: python scripts/interop/invarlock_interop.py --reference-python PATH
(the reference venv's interpreter; its ``invarlock`` console script is used).
Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sealeval.captured.evaluate import evaluate_request
from sealeval.captured.receipt import verify_receipt
from sealeval.captured.signing import generate_key_directory, load_signing_key
from sealeval.captured.trust import explicit_trust_inputs
from sealeval.captured.verification import verify_with_receipt
from sealeval.cli.verify import verify_command
from sealeval.errors import SealevalError

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent.parent
IDENTITY = "sealeval-interop"


def _vectors() -> Path:
    configured = os.environ.get("SEALEVAL_VECTORS")
    base = Path(configured) if configured else PROJECT.parent / "shared" / "vectors"
    return base / "invarlock"


V = _vectors()


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def _evaluate(request_dir: Path, *, signing_key: Path | None, output: str) -> tuple[int, Any]:
    """``evaluate request.yaml`` through the library; return (exit code, result document)."""
    with _cwd(request_dir):
        try:
            evaluation = evaluate_request(
                "request.yaml",
                signing_key=signing_key,
                unsigned=signing_key is None,
                overrides={"output": output},
            )
        except SealevalError:
            return 2, None
    return 0, dict(evaluation.document)


def _verify(
    pack: Path, policy: Path, result: dict[str, Any], signer: str, verifier: Path, receipt: Path
) -> int:
    """``verify`` with explicit recipient inputs through the library; return the exit code."""
    trust = explicit_trust_inputs(
        policy=policy,
        expected_baseline_run=result["baseline_run_digest"],
        expected_subject_run=result["subject_run_digest"],
        expected_request_digest=result["request_digest"],
        expected_signer=signer,
        verifier_signing_key=verifier,
        verifier_identity=IDENTITY,
    )
    return verify_with_receipt(pack, trust, receipt=receipt).status


def _sealeval(command: Any, arguments: list[str], cwd: Path) -> tuple[int, Any]:
    """Run a vector's sealeval command line in-process; return (exit code, parsed JSON or None).

    Only the vectors' recorded command lines go through the CLI (they are its
    contract); everything else calls the library.
    """
    with _cwd(cwd):
        result = CliRunner().invoke(command, arguments)
    try:
        stdout = json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:
        stdout = None
    return result.exit_code, stdout


def _writable_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    for path in [target, *target.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def _restore_symlinks(directory: Path) -> None:
    """Restore the symlink the repository stores as a plain file (symlinked-payload)."""
    for candidate in directory.rglob("symlinked-payload"):
        link = candidate / "request.json"
        if link.is_file() and not link.is_symlink():
            target = link.read_text("utf-8").strip()
            link.unlink()
            link.symlink_to(target)


def _files(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


# ---------------------------------------------------------------------------
# reference -> sealeval: the vectors


def _vector_checks(work: Path) -> dict[str, bool]:
    checks: dict[str, bool] = {}
    cases = json.loads((V / "verify.json").read_text("utf-8"))["cases"]
    for index, case in enumerate(cases):
        inputs, expected = case["input"], case["expected"]
        name = inputs["pack_dir"].split("/")[1]
        cwd = _writable_copy(V / "packs" / name, work / "vectors" / f"{index}-{name}")
        _restore_symlinks(cwd)
        evidence = cwd / inputs["command"][1]
        if not evidence.exists():
            shutil.copytree(cwd / Path(inputs["pack_dir"]).relative_to(f"packs/{name}"), evidence)
        arguments = inputs["command"][1:]
        status, _ = _sealeval(verify_command, arguments, cwd)
        if "first" in expected:
            again, _ = _sealeval(verify_command, arguments, cwd)
            ok = (status, again) == (
                expected["first"]["exit_code"],
                expected["second"]["exit_code"],
            )
        else:
            ok = status == expected["exit_code"]
            receipt = cwd / arguments[arguments.index("--receipt") + 1]
            if expected.get("receipt_file"):
                ok = ok and receipt.read_bytes() == (V / expected["receipt_file"]).read_bytes()
            else:
                ok = ok and not receipt.exists()
        checks[f"vector-verify:{case['name']}"] = ok
    for case in json.loads((V / "receipts.json").read_text("utf-8"))["cases"]:
        inputs = case["input"]
        pack = (
            V / "packs" / "text-20-exact-signed" / "tampered" / "edited-subject-record"
            if inputs["pack_dir"] == "see note"
            else V / inputs["pack_dir"]
        )
        result = verify_receipt(
            V / inputs["receipt"],
            evidence=pack,
            policy=V / inputs["policy_path"],
            expected_baseline_run_digest=inputs["expected_run_digests"]["baseline"],
            expected_subject_run_digest=inputs["expected_run_digests"]["subject"],
            expected_request_digest=inputs["expected_request_digest"],
            expected_signer_fingerprint=inputs["expected_pack_signer_fingerprint"],
            expected_verifier_identity=inputs["expected_verifier_identity"],
            expected_verifier_fingerprint=inputs["expected_verifier_fingerprint"],
            expected_trust_profile_digest=inputs["expected_trust_profile_digest"],
        )
        expected = case["expected"]
        checks[f"vector-receipt:{case['name']}"] = (
            result.ok is expected["ok"]
            and result.verifier_fingerprint == expected["verifier_fingerprint"]
        )
    return checks


# ---------------------------------------------------------------------------
# Fresh packs in both directions


def _verify_arguments(
    pack: Path, policy: Path, result: dict[str, Any], signer: str, verifier: Path, receipt: Path
) -> list[str]:
    return [
        "verify",
        str(pack),
        "--policy",
        str(policy),
        "--expected-baseline-run",
        result["baseline_run_digest"],
        "--expected-subject-run",
        result["subject_run_digest"],
        "--expected-request-digest",
        result["request_digest"],
        "--expected-signer",
        signer,
        "--verifier-signing-key",
        str(verifier),
        "--verifier-identity",
        IDENTITY,
        "--receipt",
        str(receipt),
        "--json",
    ]


def _build_ours(work: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, bool]]:
    """Evaluate every vector request with sealeval; plan the reference's jobs."""
    keys = work / "keys"
    keys.mkdir()
    signer = generate_key_directory(keys / "signer")
    verifier = generate_key_directory(keys / "verifier")
    built: dict[str, Any] = {}
    jobs: list[dict[str, Any]] = []
    checks: dict[str, bool] = {}
    for case in json.loads((V / "packs.json").read_text("utf-8"))["cases"]:
        name = case["name"]
        request_dir = _writable_copy(V / case["input"]["request_dir"], work / "requests" / name)
        status, result = _evaluate(
            request_dir, signing_key=signer.private_key, output="sealeval-evidence"
        )
        checks[f"sealeval-evaluate:{name}"] = status == 0 and bool(result and result["ok"])
        if not checks[f"sealeval-evaluate:{name}"]:
            continue
        pack = request_dir / "sealeval-evidence"
        policy = work / "policies" / f"{name}.json"
        policy.parent.mkdir(exist_ok=True)
        shutil.copyfile(pack / "inputs" / "policy.json", policy)
        built[name] = {"request_dir": request_dir, "policy": policy, "result": result}
        receipts = work / "reference-receipts"
        cwd = str(request_dir)
        jobs += [
            {
                "name": f"verify:{name}",
                "cwd": cwd,
                "arguments": _verify_arguments(
                    pack,
                    policy,
                    result,
                    signer.fingerprint,
                    verifier.private_key,
                    receipts / f"{name}.sealeval-pack.json",
                ),
            },
            {"name": f"report:{name}", "cwd": cwd, "arguments": ["report", str(pack), "--json"]},
            {
                "name": f"evaluate:{name}",
                "cwd": cwd,
                "arguments": [
                    "evaluate",
                    "request.yaml",
                    "--signing-key",
                    str(signer.private_key),
                    "--output",
                    "reference-evidence",
                    "--json",
                ],
            },
        ]
    main = built.get("text-20-exact-signed")
    if main is not None:
        status, result = _evaluate(
            main["request_dir"], signing_key=None, output="sealeval-unsigned"
        )
        checks["sealeval-evaluate:unsigned"] = status == 0
        jobs.append(
            {
                "name": "verify:unsigned",
                "cwd": str(main["request_dir"]),
                "arguments": _verify_arguments(
                    main["request_dir"] / "sealeval-unsigned",
                    main["policy"],
                    main["result"],
                    signer.fingerprint,
                    verifier.private_key,
                    work / "reference-receipts" / "unsigned.json",
                ),
            }
        )
    (work / "reference-receipts").mkdir()
    context = {"signer": signer.fingerprint, "verifier": verifier.private_key, "built": built}
    return context, jobs, checks


def _check_fresh(
    work: Path, context: dict[str, Any], results: dict[str, Any]
) -> tuple[dict[str, bool], dict[str, bool]]:
    """Judge the reference's results; verify the reference's fresh packs with sealeval."""
    reference: dict[str, bool] = {}
    ours: dict[str, bool] = {}
    load_signing_key(context["verifier"])  # the verifier key is readable by both sides
    for name, built in context["built"].items():
        expected_exit = 0 if built["result"]["decision"] == "pass" else 7
        verified = results.get(f"verify:{name}", {})
        stdout = verified.get("stdout_json") or {}
        reference[f"reference-verify:{name}"] = (
            verified.get("exit_code") == expected_exit and stdout.get("integrity_ok") is True
        )
        reported = results.get(f"report:{name}", {})
        reference[f"reference-report:{name}"] = reported.get("exit_code") == 0
        evaluated = results.get(f"evaluate:{name}", {})
        request_dir: Path = built["request_dir"]
        theirs = request_dir / "reference-evidence"
        ours[f"identical-pack:{name}"] = evaluated.get("exit_code") == 0 and _files(
            theirs
        ) == _files(request_dir / "sealeval-evidence")
        if evaluated.get("exit_code") != 0:
            continue
        receipt = work / "sealeval-receipts" / f"{name}.reference-pack.json"
        receipt.parent.mkdir(exist_ok=True)
        with _cwd(request_dir):
            status = _verify(
                theirs,
                built["policy"],
                evaluated["stdout_json"],
                context["signer"],
                context["verifier"],
                receipt,
            )
        reference_receipt = work / "reference-receipts" / f"{name}.sealeval-pack.json"
        ours[f"sealeval-verify-reference-pack:{name}"] = (
            status == expected_exit
            and reference_receipt.exists()
            and receipt.read_bytes() == reference_receipt.read_bytes()
        )
    unsigned = results.get("verify:unsigned")
    if unsigned is not None:
        reference["reference-verify:unsigned"] = unsigned.get("exit_code") == 6
    return reference, ours


def main() -> int:
    """Run both directions and print every check."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reference-python", required=True, type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sealeval-invarlock-interop-") as tmp:
        work = Path(tmp)
        context, jobs, build_checks = _build_ours(work)
        plan = work / "plan.json"
        plan.write_text(json.dumps({"jobs": jobs}), "utf-8")
        completed = subprocess.run(
            [str(args.reference_python), str(HERE / "invarlock_reference_side.py"), str(plan)],
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0 or not completed.stdout.strip():
            print("reference side failed to run:", completed.stderr[-2000:], file=sys.stderr)
            return 1
        results = json.loads(completed.stdout)["results"]
        reference_checks, fresh_checks = _check_fresh(work, context, results)
        our_checks = {**build_checks, **fresh_checks, **_vector_checks(work)}
    failed = 0
    for direction, checks in (
        ("sealeval -> invarlock", reference_checks),
        ("invarlock -> sealeval", our_checks),
    ):
        for name, ok in sorted(checks.items()):
            print(f"{direction:22} {name:60} {'ok' if ok else 'FAILED'}")
            failed += not ok
        if not checks:
            print(f"{direction:22} no checks ran")
            failed += 1
    total = len(reference_checks) + len(our_checks)
    print(f"interop: {total - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
