"""Evidence packs end to end: ``sealeval evaluate`` + ``sealeval verify`` against invarlock 0.17.1.

Generates a deterministic (seeded) pair of canonical runs of ``--records``
cases (default 50,000, the reference's cap) — short factual questions with
1-6 word answers, subject outputs exact, re-cased, partially right or wrong —
and a request with an ``exact_match`` + ``token_f1`` policy (one slice; both sides
get the same ``--max-bootstrap-draws`` of 1,000,000,000). Then,
each side in fresh processes of its own interpreter — the reference through its
command line, sealeval through its library pipelines
(``bench/_sealeval_side.py``: :func:`sealeval.captured.evaluate.evaluate_request`
and :func:`sealeval.captured.verification.verify_with_receipt`, same arguments):

* ``evaluate REQUEST --signing-key KEY --output PACK --json`` (load, normalize,
  compare, sign, publish);
* ``verify PACK --policy … --expected-… --verifier-signing-key … --receipt R
  --json`` (examine, anchor, replay, sign the receipt).

The script checks that both sides publish **byte-identical** packs (same key,
same inputs) and **byte-identical** receipts, and prints each command's wall
time (interpreter start included, as a user sees it; with ``--repeat N`` the
fastest of N, the two sides alternating within each round) and the
reference/sealeval ratios, then the same for CPU time (user + system of the
command and of the bootstrap workers it waited for): on a loaded machine the
CPU ratio is the steadier figure.

The reference is ``--reference-python`` (a venv with ``invarlock==0.17.1``,
whose ``invarlock`` console script is used); by default the virtualenv under
``bench/.work/invarlock-venv`` (created when missing with
``/root/.pyenv/versions/3.12.1/bin/python`` or ``python3.12`` on PATH).

``--scale`` builds and verifies a 1,000,000-record pack with sealeval alone
(the reference refuses more than 50,000 records per run): the runs are
written record by record (``RunWriter``), then ``evaluate --uncapped`` and
``verify --uncapped`` run as above, and the script prints each command's wall
time and the peak resident set size of its process (``os.wait4`` rusage of
that child; target: under 2 GiB each).

``--realistic`` does the same with lm-eval-like content (``bench/_realistic.py``:
~1.4 KB few-shot inputs, ``doc-N`` ids, ``task``/``topic`` tags; the policy
above, whose slice selects ``topic: geography``) for ``--records`` cases,
written under ``--work-dir`` (default ``bench/.work``; about 2.8 GB of runs
for 1,000,000 records, deleted afterwards), and also times ``sealeval report
--uncapped --json`` on the pack: one line per command with wall time and peak
RSS (target: under 1 GiB each).

Usage: python bench/pack.py [--records 50000] [--seed 11] [--repeat 1]
                            [--reference-python PATH]
       python bench/pack.py --scale [--scale-records 1000000]
       python bench/pack.py --realistic [--records N] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sealeval.captured import RunHeader, RunWriter, Source, make_run, write_run
from sealeval.captured.signing import generate_key_directory

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _realistic import POLICY, verify_arguments  # noqa: E402

WORK = HERE / ".work"
VENV = WORK / "invarlock-venv"
PYENV_PYTHON = Path("/root/.pyenv/versions/3.12.1/bin/python")
REFERENCE_PACKAGE = "invarlock==0.17.1"
#: Both sides get the same local work budget (one slice + overall exceed the default at 50k).
BUDGET = "1000000000"
#: The local work budget of the 1,000,000-record pack (two scopes x 2,048 replicates x n).
SCALE_BUDGET = "100000000000"
RSS_LIMIT_KIB = 2 * 1024 * 1024

#: sealeval's side: the library pipelines (evaluate_request, verify_with_receipt) in a
#: fresh interpreter, taking the reference's arguments.
SEALEVAL_SIDE = [sys.executable, str(HERE / "_sealeval_side.py")]


REQUEST = """format_version: invarlock/evaluation-request-v2
execution: {mode: captured}
comparison:
  baseline: {path: inputs/baseline.json, adapter: invarlock}
  subject: {path: inputs/subject.json, adapter: invarlock}
  policy: policy.json
output: {evidence: evidence}
"""


def _cases(records: int, seed: int) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    rng = random.Random(seed)
    syllables = [c + v for c in ("", "b", "d", "k", "l", "m", "n", "r", "s", "t") for v in "aeiou"]
    vocabulary = sorted(
        {"".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(3000)}
    )
    topics = ("geography", "history", "science", "arithmetic")
    for index in range(records):
        answer = [rng.choice(vocabulary) for _ in range(rng.randint(1, 6))]
        shared = {
            "id": f"case-{index:07d}",
            "input": f"Q{index}: " + " ".join(rng.choice(vocabulary) for _ in range(10)) + "?",
            "expected": " ".join(answer),
            "metadata": {"topic": topics[index % len(topics)]},
        }
        difficulty = rng.random()
        outputs = []
        for skill in (0.60, 0.61):
            roll = difficulty + rng.gauss(0.0, 0.05)
            if roll < skill:
                outputs.append(
                    shared["expected"] if rng.random() < 0.8 else " ".join(answer).upper()
                )
            elif roll < skill + 0.25:
                outputs.append(" ".join([*answer[:-1], rng.choice(vocabulary)]))
            else:
                outputs.append(rng.choice(vocabulary))
        yield {**shared, "output": outputs[0]}, {**shared, "output": outputs[1]}


def _write_request(root: Path, records: int, seed: int) -> None:
    (root / "inputs").mkdir(parents=True)
    for side, name in enumerate(("baseline", "subject")):
        rows = (pair[side] for pair in _cases(records, seed))
        run = make_run(
            rows,
            source={"name": "bench", "version": "1"},
            run_id=name,
            artifact_digest="sha256:" + str(side + 1) * 64,
        )
        write_run(run, root / "inputs" / f"{name}.json")
    (root / "policy.json").write_text(json.dumps(POLICY), encoding="utf-8")
    (root / "request.yaml").write_text(REQUEST, encoding="utf-8")


def _write_streamed_request(root: Path, records: int, seed: int) -> None:
    """Like ``_write_request``, but each run is written record by record (no run in memory)."""
    (root / "inputs").mkdir(parents=True)
    for side, name in enumerate(("baseline", "subject")):
        header = RunHeader(
            source=Source("bench", "1"), run_id=name, artifact_digest="sha256:" + str(side + 1) * 64
        )
        with RunWriter(root / "inputs" / f"{name}.json", header) as writer:
            for pair in _cases(records, seed):
                writer.add(pair[side])
            writer.finish()
    (root / "policy.json").write_text(json.dumps(POLICY), encoding="utf-8")
    (root / "request.yaml").write_text(REQUEST, encoding="utf-8")


def _measured(argv: list[str], cwd: Path) -> tuple[float, int, int, dict[str, Any], float]:
    """Run one command; return (wall s, exit code, peak RSS KiB, parsed JSON stdout, CPU s).

    CPU seconds are user + system of the child and of the children it waited
    for (sealeval's bootstrap workers), from ``os.wait4``.
    """
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if not stdout.strip():
        print(stderr[-2000:], file=sys.stderr)
        sys.exit(1)
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, process.returncode, usage.ru_maxrss, json.loads(stdout), cpu


def scale(records: int, seed: int) -> int:
    """Build and verify one ``records``-record pack with sealeval alone (uncapped)."""
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK, prefix="pack-scale-") as folder:
        root = Path(folder)
        request = root / "request"
        print(f"writing 2 x {records:,} records (seed {seed}) ...", flush=True)
        _write_streamed_request(request, records, seed)
        signer = generate_key_directory(root / "signer")
        verifier = generate_key_directory(root / "verifier")
        seconds, status, peak, built, _ = _measured(
            _uncapped_evaluate(signer.private_key),
            request,
        )
        if status != 0:
            print(f"evaluate failed: {built}", file=sys.stderr)
            return 1
        size = sum(p.stat().st_size for p in (request / "pack").rglob("*") if p.is_file())
        print(
            f"pack: {records:,} records per run, {size / 1024**2:.0f} MiB, "
            f"decision {built['decision']}"
        )
        print(f"  evaluate --uncapped  {seconds:7.1f} s   peak RSS {peak / 1024:7.0f} MiB")
        arguments = verify_arguments(
            "pack",
            built,
            signer.fingerprint,
            verifier.private_key,
            str(root / "receipt.json"),
            "--max-bootstrap-draws",
            SCALE_BUDGET,
            "--json",
        )
        verify_seconds, verify_status, verify_peak, verified, _ = _measured(
            [*SEALEVAL_SIDE, "verify", *arguments, "--uncapped"], request
        )
        if verify_status not in (0, 7) or verified.get("integrity_ok") is not True:
            print(f"verify failed: {verified}", file=sys.stderr)
            return 1
        print(
            f"  verify --uncapped    {verify_seconds:7.1f} s   "
            f"peak RSS {verify_peak / 1024:7.0f} MiB"
        )
        worst = max(peak, verify_peak)
        print(f"  worst peak RSS {worst / 1024:.0f} MiB (limit {RSS_LIMIT_KIB / 1024:.0f} MiB)")
        return 0 if worst < RSS_LIMIT_KIB else 1


REALISTIC_RSS_LIMIT_KIB = 1024 * 1024


def realistic(records: int, seed: int, work_dir: Path) -> int:
    """Build, verify and render one realistic-content pack; print each command's time and RSS."""
    from _realistic import json_or_empty, measured, write_realistic_pair  # noqa: PLC0415

    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_dir, prefix="pack-realistic-") as folder:
        root = Path(folder)
        request = root / "request"
        start = time.perf_counter()
        write_realistic_pair(request / "inputs", records, seed)
        (request / "policy.json").write_text(json.dumps(POLICY), encoding="utf-8")
        (request / "request.yaml").write_text(REQUEST, encoding="utf-8")
        size = sum(p.stat().st_size for p in (request / "inputs").iterdir())
        print(
            f"wrote 2 x {records:,} realistic records ({size / 1024**2:,.0f} MiB) "
            f"in {time.perf_counter() - start:.1f} s"
        )
        signer = generate_key_directory(root / "signer")
        verifier = generate_key_directory(root / "verifier")
        rows: list[tuple[str, float, int, int, float]] = []
        seconds, status, peak, out, cpu = measured(
            _uncapped_evaluate(signer.private_key),
            request,
        )
        built = json_or_empty(out)
        rows.append(("evaluate --uncapped", seconds, status, peak, cpu))
        if status != 0 or not built:
            print(f"evaluate failed (exit {status})", file=sys.stderr)
            return 1
        arguments = verify_arguments(
            "pack",
            built,
            signer.fingerprint,
            verifier.private_key,
            str(root / "receipt.json"),
            "--max-bootstrap-draws",
            SCALE_BUDGET,
            "--json",
        )
        seconds, status, peak, out, cpu = measured(
            [*SEALEVAL_SIDE, "verify", *arguments, "--uncapped"], request
        )
        rows.append(("verify --uncapped", seconds, status, peak, cpu))
        sealeval = str(Path(sys.executable).with_name("sealeval"))
        seconds, status, peak, out, cpu = measured(
            [sealeval, "report", "pack", "--uncapped", "--json"], request
        )
        rows.append(("report --uncapped --json", seconds, status, peak, cpu))
        print(f"pack of 2 x {records:,} realistic records, decision {built['decision']}")
        for label, seconds, status, peak, cpu in rows:
            print(
                f"  {label:26} {seconds:8.1f} s wall {cpu:8.1f} s CPU"
                f"  peak RSS {peak / 1024:7,.0f} MiB  exit {status}"
            )
        worst = max(row[3] for row in rows)
        print(
            f"  worst peak RSS {worst / 1024:,.0f} MiB"
            f" (target {REALISTIC_RSS_LIMIT_KIB // 1024} MiB)"
        )
        return 0 if worst < REALISTIC_RSS_LIMIT_KIB and all(r[2] in (0, 7) for r in rows) else 1


def _ensure_reference(given: Path | None) -> Path:
    if given is not None:
        return Path(given).absolute()
    python = VENV / "bin" / "python"
    if python.exists():
        return python
    base = str(PYENV_PYTHON) if PYENV_PYTHON.exists() else shutil.which("python3.12")
    if base is None:
        print("bench/pack.py: no Python 3.12 for the invarlock reference", file=sys.stderr)
        sys.exit(2)
    print(f"creating the reference virtualenv with {REFERENCE_PACKAGE} ...", flush=True)
    try:
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", REFERENCE_PACKAGE], check=True
        )
    except (OSError, subprocess.CalledProcessError):
        print("bench/pack.py: could not install the invarlock reference", file=sys.stderr)
        sys.exit(2)
    return python


def _timed(argv: list[str], cwd: Path) -> tuple[float, int, dict[str, Any], float]:
    """Run one command; return (wall seconds, exit code, parsed JSON stdout, CPU seconds)."""
    seconds, status, _, document, cpu = _measured(argv, cwd)
    return seconds, status, document, cpu


def _verify_args(
    pack: str, built: dict[str, Any], signer: str, verifier: Path, receipt: str
) -> list[str]:
    return verify_arguments(
        pack, built, signer, verifier, receipt, "--max-bootstrap-draws", BUDGET, "--json"
    )


def _uncapped_evaluate(signer_key: Path) -> list[str]:
    """sealeval's ``evaluate --uncapped`` of the scale modes (its budget lifted to SCALE_BUDGET)."""
    return [
        *SEALEVAL_SIDE,
        "evaluate",
        "request.yaml",
        "--signing-key",
        str(signer_key),
        "--output",
        "pack",
        "--max-bootstrap-draws",
        SCALE_BUDGET,
        "--uncapped",
        "--json",
    ]


def _side(ours: bool, command: str, arguments: list[str], reference: Path) -> list[str]:
    if not ours:  # the reference's console script
        return [str(reference.with_name("invarlock")), command, *arguments]
    return [*SEALEVAL_SIDE, command, *arguments]


def _print_timings(
    records: int,
    size: int,
    decision: str,
    timings: dict[tuple[str, str], float],
    cpu_times: dict[tuple[str, str], float],
) -> None:
    print(f"\npack: {records:,} records per run, {size / 1024**2:.1f} MiB, decision {decision}")
    for step in ("evaluate", "verify", "total"):
        steps = ("evaluate", "verify") if step == "total" else (step,)
        ours = sum(timings[("sealeval", name)] for name in steps)
        theirs = sum(timings[("invarlock", name)] for name in steps)
        ours_cpu = sum(cpu_times[("sealeval", name)] for name in steps)
        theirs_cpu = sum(cpu_times[("invarlock", name)] for name in steps)
        print(
            f"  {step:8}  sealeval {ours:8.2f} s   invarlock {theirs:8.2f} s"
            f"   ratio {theirs / ours:6.2f}x   (CPU {ours_cpu:7.2f} s vs {theirs_cpu:7.2f} s,"
            f" CPU ratio {theirs_cpu / ours_cpu:6.2f}x)"
        )


def main() -> int:
    """Generate, run both sides, check identical outputs, print the timings."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--reference-python", type=Path)
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--scale-records", type=int, default=1_000_000)
    parser.add_argument("--realistic", action="store_true")
    parser.add_argument("--work-dir", type=Path, default=WORK)
    args = parser.parse_args()
    if args.realistic:
        return realistic(args.records, args.seed, args.work_dir)
    if args.scale:
        return scale(args.scale_records, args.seed)
    reference = _ensure_reference(args.reference_python)
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK, prefix="pack-") as folder:
        root = Path(folder)
        request = root / "request"
        print(f"generating {args.records:,} paired cases (seed {args.seed}) ...", flush=True)
        _write_request(request, args.records, args.seed)
        signer = generate_key_directory(root / "signer")
        verifier = generate_key_directory(root / "verifier")
        timings: dict[tuple[str, str], float] = {}
        cpu_times: dict[tuple[str, str], float] = {}
        outputs: dict[str, dict[str, Any]] = {}

        def keep(side: str, step: str, seconds: float, cpu: float) -> None:
            timings[(side, step)] = min(timings.get((side, step), seconds), seconds)
            cpu_times[(side, step)] = min(cpu_times.get((side, step), cpu), cpu)

        # the sides alternate within each round, so both meet the same load
        for attempt in range(args.repeat):
            for side in ("sealeval", "invarlock"):
                pack = f"{side}-{attempt}"
                seconds, status, built, cpu = _timed(
                    _side(
                        side == "sealeval",
                        "evaluate",
                        [
                            "request.yaml",
                            "--signing-key",
                            str(signer.private_key),
                            "--output",
                            pack,
                            "--max-bootstrap-draws",
                            BUDGET,
                            "--json",
                        ],
                        reference,
                    ),
                    request,
                )
                if status != 0:
                    print(f"{side} evaluate failed: {built}", file=sys.stderr)
                    return 1
                keep(side, "evaluate", seconds, cpu)
                receipt = str(root / f"{side}-{attempt}.receipt.json")
                seconds, status, verified, cpu = _timed(
                    _side(
                        side == "sealeval",
                        "verify",
                        _verify_args(
                            pack, built, signer.fingerprint, verifier.private_key, receipt
                        ),
                        reference,
                    ),
                    request,
                )
                if status not in (0, 7) or verified.get("integrity_ok") is not True:
                    print(f"{side} verify failed: {verified}", file=sys.stderr)
                    return 1
                keep(side, "verify", seconds, cpu)
                outputs[side] = {"pack": request / pack, "receipt": Path(receipt), "built": built}

        def files(directory: Path) -> dict[str, bytes]:
            return {
                p.relative_to(directory).as_posix(): p.read_bytes()
                for p in sorted(directory.rglob("*"))
                if p.is_file()
            }

        identical_pack = files(outputs["sealeval"]["pack"]) == files(outputs["invarlock"]["pack"])
        identical_receipt = (
            outputs["sealeval"]["receipt"].read_bytes()
            == outputs["invarlock"]["receipt"].read_bytes()
        )
        size = sum(len(data) for data in files(outputs["sealeval"]["pack"]).values())
        decision = outputs["sealeval"]["built"]["decision"]
        _print_timings(args.records, size, decision, timings, cpu_times)
        print(f"  packs byte-identical: {identical_pack}")
        print(f"  receipts byte-identical: {identical_receipt}")
        return 0 if identical_pack and identical_receipt else 1


if __name__ == "__main__":
    sys.exit(main())
