"""Overlap forensics: sealeval's scan against the openmed 3.1.0 reference, same run, same input.

Generates a deterministic (seeded) synthetic corpus of clinical-style outputs
and references with realistic overlaps (verbatim copies, re-cased and
re-punctuated copies, one- and two-word edits, partial copies, canaries in
outputs, shared public/shadow items), runs sealeval's scan in this process and
the reference's public entry point
``openmed.eval.governance.overlap_forensics.scan_overlap_forensics`` in a
subprocess of a separate virtualenv (inputs as JSON on stdin, canonical report
on stdout), asserts that the two reports are byte-identical, and prints both
scan times and the ratio (target: at least 20).

The reference virtualenv is created when missing under
``bench/.work/openmed-venv`` with ``python3.11 -m venv`` and
``pip install --no-deps openmed==3.1.0 pyyaml faker``. If that fails the script
says so and exits with status 2.

``--scale`` runs sealeval alone on 10,000 outputs against 100,000 references
and prints the scan time and the peak resident set size.

Usage: python bench/forensics.py [--outputs 200] [--references 2000] [--seed 7]
       [--repeat 3] [--threshold 8500] [--margin 1000]
       python bench/forensics.py --scale [--outputs 10000] [--references 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sealeval.manifest.sealed import COMPONENTS, seal_workflow_manifest
from sealeval.session.forensics import scan_overlap_forensics
from sealeval.session.holdout import MANIFEST_KINDS, commit_holdout

TARGET = 20.0
HERE = Path(__file__).resolve().parent
VENV = HERE / ".work" / "openmed-venv"
REFERENCE_PACKAGES = ["openmed==3.1.0", "pyyaml", "faker"]

# Runs inside the reference virtualenv: JSON on stdin, canonical report on stdout,
# the scan's own wall time (import and JSON parsing excluded) on stderr.
REFERENCE_RUNNER = """
import json, sys, time
from openmed.eval.governance.overlap_forensics import scan_overlap_forensics
arguments = json.loads(sys.stdin.read())
submissions = arguments.pop("submission_items")
start = time.perf_counter()
report = scan_overlap_forensics(submissions, **arguments)
seconds = time.perf_counter() - start
sys.stdout.write(report.to_json())
sys.stderr.write("scan_seconds=%r\\n" % seconds)
"""


def _words(text: str) -> list[str]:
    return text.split()


STEMS = _words(
    "patient chest heart lung fever cough pain blood pressure oxygen saturation rate pulse "
    "imaging scan xray report history allergy medication dose tablet daily twice review "
    "clinic follow plan discharge admission ward nurse doctor physician assessment exam "
    "normal abnormal stable mild moderate severe acute chronic left right upper lower "
    "bilateral infiltrate effusion edema murmur rhythm sinus tachycardia bradycardia "
    "glucose insulin renal hepatic function creatinine sodium potassium hemoglobin "
    "platelet count culture negative positive pending result labs within limits noted "
    "denies reports complains since days weeks months year old male female with without "
    "and the of for to in on at by no not is was were has had be been will should recommend"
)
SYLLABLES = _words(
    "ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge gi go ha he hi ho ka ke "
    "ki ko la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se "
    "si so su ta te ti to tu va ve vi vo za ze zi zo ph th ch st tr pr ol an en in on ur ex"
)


class Corpus:
    """A seeded clinical-style corpus: Zipf-weighted vocabulary of ~4,000 words."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        coined = {
            "".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(2, 4)))
            for _ in range(4000)
        }
        self.words = STEMS + sorted(coined - set(STEMS))
        self.rng.shuffle(self.words)
        self.weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]

    def sentence(self, low: int = 12, high: int = 40) -> str:
        count = self.rng.randint(low, high)
        words = self.rng.choices(self.words, weights=self.weights, k=count)
        words[0] = words[0].capitalize()
        text = " ".join(words)
        if self.rng.random() < 0.5:
            cut = self.rng.randint(3, max(3, count - 3))
            text = " ".join(text.split(" ")[:cut]) + ", " + " ".join(text.split(" ")[cut:])
        return text + self.rng.choice((".", ".", "!", "?", ";"))

    def edit(self, text: str, changes: int) -> str:
        words = text.split(" ")
        for _ in range(changes):
            words[self.rng.randrange(len(words))] = self.rng.choice(self.words)
        return " ".join(words)

    def recase(self, text: str) -> str:
        style = self.rng.randrange(3)
        if style == 0:
            text = text.upper()
        elif style == 1:
            text = text.lower()
        return "  " + text.replace(" ", self.rng.choice(("  ", " - ", "\t", " "))) + "!!"


def build(outputs: int, references: int, seed: int) -> dict[str, Any]:
    corpus = Corpus(seed)
    rng = corpus.rng
    public_count = references // 2
    public = [corpus.sentence() for _ in range(public_count)]
    shadow = [corpus.sentence() for _ in range(references - public_count)]
    for index in rng.sample(range(len(shadow)), max(1, len(shadow) // 100)):
        shadow[index] = rng.choice(public)  # items published in both pools
    canaries = [f"CANARY-{rng.getrandbits(40):010x}" for _ in range(max(4, outputs // 20))]
    submissions = []
    for _ in range(outputs):
        roll = rng.random()
        if roll < 0.40:
            text = corpus.sentence()
        elif roll < 0.48:
            text = rng.choice(public)
        elif roll < 0.56:
            text = rng.choice(shadow)
        elif roll < 0.64:
            text = corpus.recase(rng.choice(shadow + public))
        elif roll < 0.74:
            text = corpus.edit(rng.choice(shadow), rng.randint(1, 2))
        elif roll < 0.80:
            text = corpus.edit(rng.choice(public), 1)
        elif roll < 0.88:
            source = rng.choice(shadow + public).split(" ")
            half = len(source) // 2
            text = " ".join(source[:half]) + " " + corpus.sentence(6, 15)
        elif roll < 0.94:
            text = corpus.sentence() + " ref " + rng.choice(canaries).lower()
        else:
            text = corpus.sentence(1, 3)
        submissions.append(text)
    digests = {name: "sha256:" + f"{index:x}" * 64 for index, name in enumerate(COMPONENTS, 1)}
    commitment = commit_holdout(
        "bench-forensics",
        {kind: ["sha256:" + f"{index + 10:x}" * 64] for index, kind in enumerate(MANIFEST_KINDS)},
    )
    return {
        "submission_items": submissions,
        "public_items": public,
        "shadow_items": shadow,
        "canaries": canaries,
        "submission_manifest": seal_workflow_manifest(digests).to_dict(),
        "holdout_commitment": commitment.to_dict(),
    }


def ours(arguments: dict[str, Any]) -> tuple[str, float]:
    given = dict(arguments)
    submissions = given.pop("submission_items")
    start = time.perf_counter()
    report = scan_overlap_forensics(submissions, **given)
    seconds = time.perf_counter() - start
    return report.to_json(), seconds


def ensure_reference() -> Path:
    python = VENV / "bin" / "python"
    check = [str(python), "-c", "import openmed.eval.governance.overlap_forensics"]
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return python
    interpreter = shutil.which("python3.11") or shutil.which("python3")
    steps = [
        [interpreter or "python3", "-m", "venv", str(VENV)],
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", *REFERENCE_PACKAGES],
        check,
    ]
    print(f"creating the reference virtualenv in {VENV} ...", flush=True)
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print("REFERENCE UNAVAILABLE: could not install openmed 3.1.0 into", VENV)
            print("failed step:", " ".join(step))
            print(done.stderr.strip()[-2000:])
            sys.exit(2)
    return python


def reference(python: Path, arguments: dict[str, Any]) -> tuple[str, float]:
    done = subprocess.run(
        [str(python), "-c", REFERENCE_RUNNER],
        input=json.dumps(arguments),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print("REFERENCE FAILED:", done.stderr.strip()[-2000:])
        sys.exit(2)
    seconds = float(done.stderr.strip().rsplit("scan_seconds=", 1)[1])
    return done.stdout, seconds


def compare(args: argparse.Namespace) -> int:
    python = ensure_reference()
    arguments = build(args.outputs, args.references, args.seed)
    arguments["fuzzy_threshold_basis_points"] = args.threshold
    arguments["shadow_margin_basis_points"] = args.margin
    print(
        f"corpus: {args.outputs} outputs x {args.references} references "
        f"(seed {args.seed}, threshold {args.threshold} bp, margin {args.margin} bp)"
    )
    theirs, reference_seconds = reference(python, arguments)
    best = float("inf")
    text = ""
    for _ in range(args.repeat):
        text, seconds = ours(arguments)
        best = min(best, seconds)
    if text != theirs:
        print("MISMATCH: the reports differ")
        print("ours:     ", text[:400])
        print("reference:", theirs[:400])
        return 1
    counts = json.loads(text)["signal_counts"]
    ratio = reference_seconds / best
    print(f"reports byte-identical ({len(text)} bytes); signal counts {counts}")
    print(f"reference (openmed 3.1.0): {reference_seconds:8.3f} s")
    print(f"sealeval (best of {args.repeat}):   {best:8.3f} s")
    print(
        f"ratio: {ratio:.1f}x (target >= {TARGET:.0f}x) -> {'OK' if ratio >= TARGET else 'BELOW'}"
    )
    return 0 if ratio >= TARGET else 1


def scale(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    arguments = build(args.outputs, args.references, args.seed)
    arguments["fuzzy_threshold_basis_points"] = args.threshold
    arguments["shadow_margin_basis_points"] = args.margin
    built = time.perf_counter() - start
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text, seconds = ours(arguments)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    counts = json.loads(text)["signal_counts"]
    print(f"corpus: {args.outputs} outputs x {args.references} references, built in {built:.1f} s")
    print(f"signal counts {counts}")
    print(f"sealeval scan: {seconds:.2f} s")
    print(f"peak RSS: {peak / 1024:.0f} MiB (before the scan: {before / 1024:.0f} MiB)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scale", action="store_true", help="ours alone at 10,000 x 100,000")
    parser.add_argument("--outputs", type=int)
    parser.add_argument("--references", type=int)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threshold", type=int, default=8500)
    parser.add_argument("--margin", type=int, default=1000)
    args = parser.parse_args()
    if args.scale:
        args.outputs = args.outputs or 10_000
        args.references = args.references or 100_000
        return scale(args)
    args.outputs = args.outputs or 200
    args.references = args.references or 2_000
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
