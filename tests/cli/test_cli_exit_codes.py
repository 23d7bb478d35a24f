"""Every exit code of docs/cli.md's table, provoked through the real command line.

The cases are read from the table itself: each non-empty cell (a command
row and an exit code) is one test, and a cell without a scenario below fails,
so a new row or code cannot be documented without a test. A scenario runs the
command in one shared workspace built from ``sealeval init`` (a signed pack
that passes, one that does not, the imported runs and the keys) and returns
the exit status it observed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

import sealeval.cli.demo as demo_module
from sealeval.captured.extended import EXTENSION_FORMAT
from sealeval.captured.policy import load_comparison_policy
from sealeval.cli import cli
from sealeval.manifest import COMPONENTS
from support.gates_candidate import KEY, READY, build_recipe, fresh, runner_env
from support.session_config import copy_bundle

ROOT = Path(__file__).resolve().parents[2]
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
CANDIDATE = "sha256:" + "c" * 64
SHA = "b" * 40


def exit_table() -> dict[str, dict[int, str]]:
    """The exit-code table of docs/cli.md: row label -> {code: meaning} (empty cells left out)."""
    lines = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("| command |"))
    codes = [int(cell) for cell in lines[header].strip("|").split("|")[1:]]
    rows: dict[str, dict[int, str]] = {}
    for line in lines[header + 2 :]:
        if not line.startswith("| `sealeval "):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))]
        label = cells[0].strip("`").replace("\\|", "|")
        rows[label] = {
            code: cell for code, cell in zip(codes, cells[1:], strict=True) if cell != "—"
        }
    return rows


TABLE = exit_table()
CELLS = [(label, code) for label, cells in TABLE.items() for code in cells]


@dataclass
class World:
    """The shared workspace and what the scenarios need from it."""

    root: Path
    trust: list[str]  # explicit verify options for the passing pack
    strict_trust: list[str]  # ... and for the pack whose policy does not pass
    recipe: Path  # a clean git repository for gates agent-release

    def gates_env(self, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
        """A fresh copy of the recipe repository, with the runner's environment set."""
        workspace = fresh(self.recipe, self.root / "gates" / name)
        (workspace / "signing.key").write_bytes(KEY)
        for variable in [variable for variable in os.environ if variable.startswith("GIT_")]:
            monkeypatch.delenv(variable)
        for variable, value in runner_env(workspace).items():
            monkeypatch.setenv(variable, value)
        monkeypatch.chdir(workspace)
        return workspace


def run(*args: str) -> int:
    """Run ``sealeval ARGS`` in-process and return its exit status."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False).exit_code


def _out(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _trust(result: dict[str, str], policy: str, signer: str) -> list[str]:
    return [
        "--policy",
        policy,
        "--expected-baseline-run",
        result["baseline_run_digest"],
        "--expected-subject-run",
        result["subject_run_digest"],
        "--expected-request-digest",
        result["request_digest"],
        "--expected-signer",
        signer,
        "--verifier-signing-key",
        "keys/private.pem",
        "--verifier-identity",
        "example.org/verifier",
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("exit-codes")
    before = Path.cwd()
    os.chdir(root)
    try:
        _out("init", "policy")
        _out("init", "request")
        signer = DIGEST.findall(_out("evaluate", "--keygen", "keys"))[0]
        passing = json.loads(
            _out("evaluate", "request.yaml", "--signing-key", "keys/private.pem", "--json")
        )
        policy = (root / "policy.yaml").read_text(encoding="utf-8")
        strict = policy.replace("minimum_count: 10 ", "minimum_count: 1000")
        assert strict != policy  # 200 pairs: insufficient_evidence under this policy
        (root / "strict.yaml").write_text(strict, encoding="utf-8")
        request = (root / "request.yaml").read_text(encoding="utf-8")
        (root / "request-strict.yaml").write_text(
            request.replace("policy: policy.yaml", "policy: strict.yaml").replace(
                "evidence: evidence", "evidence: evidence-strict"
            ),
            encoding="utf-8",
        )
        failing = json.loads(
            _out("evaluate", "request-strict.yaml", "--signing-key", "keys/private.pem", "--json")
        )
        assert failing["decision"] == "insufficient_evidence"
        _out("verify", "evidence", *_trust(passing, "policy.yaml", signer), "--receipt", "r.json")
        for side in ("baseline", "subject"):
            _out(
                "import",
                f"inputs/{side}.jsonl",
                "--adapter",
                "jsonl",
                "--source",
                "demo-evaluator@1.0",
                "--run-id",
                side,
                "--artifact-digest",
                "sha256:" + ("1" if side == "baseline" else "2") * 64,
                "-o",
                f"{side}.run.json",
            )
        recipe = root / "recipe" / "ws"
        build_recipe(recipe)
        yield World(
            root=root,
            trust=_trust(passing, "policy.yaml", signer),
            strict_trust=_trust(failing, "strict.yaml", signer),
            recipe=recipe,
        )
    finally:
        os.chdir(before)


Scenario = Callable[[World, Path, pytest.MonkeyPatch], int]
SCENARIOS: dict[tuple[str, int], Scenario] = {}


def scenario(label: str, code: int) -> Callable[[Scenario], Scenario]:
    """Register the scenario that provokes ``code`` for the table row ``label``."""

    def register(function: Scenario) -> Scenario:
        SCENARIOS[(label, code)] = function
        return function

    return register


# ---------------------------------------------------------------------------
# init, import, plan, compare


INIT = "sealeval init policy|request|session|trust|gate-sources"


@scenario(INIT, 0)
def _init_written(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("init", "gate-sources", "-o", str(tmp / "gate-sources.yaml"))


@scenario(INIT, 2)
def _init_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("init", "policy")  # policy.yaml exists: never replaced


def _import(output: str, *extra: str) -> int:
    return run(
        "import",
        "inputs/baseline.jsonl",
        "--adapter",
        "jsonl",
        "--source",
        "demo-evaluator@1.0",
        "--run-id",
        "baseline",
        "-o",
        output,
        *extra,
    )


@scenario("sealeval import", 0)
def _import_written(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return _import(str(tmp / "run.json"), "--artifact-digest", "sha256:" + "1" * 64)


@scenario("sealeval import", 2)
def _import_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return _import(str(tmp / "run.json"))  # no --artifact-digest: identities_required


@scenario("sealeval plan", 0)
def _plan_planned(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("plan", "--policy", "policy.yaml", "--baseline", "baseline.run.json")


@scenario("sealeval plan", 2)
def _plan_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("plan", "--policy", str(tmp / "missing.yaml"))


@scenario("sealeval compare", 0)
def _compare_passed(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("compare", "baseline.run.json", "subject.run.json", "--policy", "policy.yaml")


@scenario("sealeval compare", 2)
def _compare_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("compare", "inputs/baseline.jsonl", "subject.run.json", "--policy", "policy.yaml")


@scenario("sealeval compare", 7)
def _compare_not_passed(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("compare", "baseline.run.json", "subject.run.json", "--policy", "strict.yaml")


# ---------------------------------------------------------------------------
# evaluate, verify, report, view


@scenario("sealeval evaluate", 0)
def _evaluate_published(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("evaluate", "request.yaml", "--unsigned", "--output", f"ev-{tmp.name}")


@scenario("sealeval evaluate", 2)
def _evaluate_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("evaluate", "request.yaml", "--output", f"ev-{tmp.name}")  # no signing mode


@scenario("sealeval evaluate", 7)
def _evaluate_fail_on_policy(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run(
        "evaluate",
        "request-strict.yaml",
        "--unsigned",
        "--fail-on-policy",
        "--output",
        f"ev-{tmp.name}",
    )


@scenario("sealeval verify", 0)
def _verify_passed(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("verify", "evidence", *w.trust, "--receipt", str(tmp / "r.json"))


@scenario("sealeval verify", 2)
def _verify_incomplete(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("verify", "evidence", *w.trust[2:], "--receipt", str(tmp / "r.json"))  # no policy


@scenario("sealeval verify", 4)
def _verify_contract_failure(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    shutil.copytree("evidence", tmp / "pack")
    (tmp / "pack" / "extra.txt").write_text("x", encoding="utf-8")  # not in the manifest
    return run("verify", str(tmp / "pack"), *w.trust, "--receipt", str(tmp / "r.json"))


@scenario("sealeval verify", 6)
def _verify_integrity_failure(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    shutil.copytree("evidence", tmp / "pack")
    run_file = tmp / "pack" / "records" / "subject.json"
    run_file.write_bytes(run_file.read_bytes().replace(b'"id"', b'"Id"', 1))
    return run("verify", str(tmp / "pack"), *w.trust, "--receipt", str(tmp / "r.json"))


@scenario("sealeval verify", 7)
def _verify_not_passed(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("verify", "evidence-strict", *w.strict_trust, "--receipt", str(tmp / "r.json"))


@scenario("sealeval report", 0)
def _report_rendered(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("report", "evidence", "--html", str(tmp / "report.html"))


@scenario("sealeval report", 2)
def _report_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("report", "evidence", "--html", "policy.yaml")  # the destination exists


@scenario("sealeval extended", 0)
def _extended_sealed(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    policy_digest = load_comparison_policy(Path("policy.yaml")).digest
    extension = {"format": EXTENSION_FORMAT, "policy_digest": policy_digest}
    (tmp / "extension.json").write_text(json.dumps(extension), encoding="utf-8")
    return run(
        "extended",
        "evidence",
        "--extension",
        str(tmp / "extension.json"),
        "--signing-key",
        "keys/private.pem",
        "--output",
        str(tmp / "extended.seal.json"),
    )


@scenario("sealeval extended", 2)
def _extended_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("extended", "evidence", "--check", str(tmp / "missing.seal.json"))


@scenario("sealeval view", 0)
def _view_stopped(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("sealeval")), "view", str(w.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert "Ctrl-C stops" in process.stdout.readline()  # serving
        process.send_signal(signal.SIGINT)
        return process.wait(timeout=30)
    finally:
        process.kill() if process.poll() is None else None


@scenario("sealeval view", 2)
def _view_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("view", str(w.root), "--port", "70000")


# ---------------------------------------------------------------------------
# manifest, session


def _components(tmp: Path) -> list[str]:
    (tmp / "prompt.txt").write_text("hello", encoding="utf-8")
    digests = [
        ["--digest", f"{name}=sha256:{index:064x}"]
        for index, name in enumerate(COMPONENTS, 1)
        if name != "prompt"
    ]
    return [*(arg for pair in digests for arg in pair), "--prompt", str(tmp / "prompt.txt")]


@scenario("sealeval manifest digest|seal", 0)
def _manifest_written(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("manifest", "seal", *_components(tmp), "-o", str(tmp / "manifest.json"))


@scenario("sealeval manifest digest|seal", 2)
def _manifest_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("manifest", "digest", "file", str(tmp / "missing.txt"))


@scenario("sealeval manifest verify", 0)
def _manifest_eligible(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    assert _manifest_written(w, tmp, mp) == 0
    return run("manifest", "verify", str(tmp / "manifest.json"), *_components(tmp))


@scenario("sealeval manifest verify", 1)
def _manifest_drift(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    assert _manifest_written(w, tmp, mp) == 0
    arguments = _components(tmp)
    (tmp / "prompt.txt").write_text("changed", encoding="utf-8")
    return run("manifest", "verify", str(tmp / "manifest.json"), *arguments)


@scenario("sealeval manifest verify", 2)
def _manifest_verify_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("manifest", "verify", str(tmp / "missing.json"), *_components(tmp))


def _session(tmp: Path, mp: pytest.MonkeyPatch, attempts: int) -> int:
    mp.setenv("SEALEVAL_SESSION_CLOCK", "1000")
    bundle = copy_bundle(tmp / "session")
    codes = [run("session", "run", str(bundle / f"attempt-{n}.yaml")) for n in range(1, 4)]
    return codes[attempts - 1]


@scenario("sealeval session run", 0)
def _session_released(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return _session(tmp, mp, 1)


@scenario("sealeval session run", 1)
def _session_budget(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return _session(tmp, mp, 3)  # the third attempt: rerun_budget_exhausted


@scenario("sealeval session run", 2)
def _session_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("session", "run", str(tmp / "missing.yaml"))


@scenario("sealeval session show", 0)
def _session_shown(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    assert _session(tmp, mp, 1) == 0
    return run("session", "show", str(tmp / "session" / "sessions.sqlite3"))


@scenario("sealeval session show", 2)
def _session_show_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("session", "show", str(tmp / "missing.sqlite3"))


# ---------------------------------------------------------------------------
# gates


BASE = READY["input"]["argv"]


@scenario("sealeval gates agent-release", 0)
def _release_ready(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    w.gates_env(mp, tmp.name)
    return run("gates", "agent-release", *BASE, "--output", "bundle.json")


@scenario("sealeval gates agent-release", 1)
def _release_not_ready(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    workspace = w.gates_env(mp, tmp.name)
    (workspace / "checkout" / "dirty.txt").write_text("x", encoding="utf-8")  # dirty_tree
    return run("gates", "agent-release", *BASE, "--output", "bundle.json")


@scenario("sealeval gates agent-release", 2)
def _release_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    w.gates_env(mp, tmp.name)
    assert run("gates", "agent-release", *BASE, "--output", "bundle.json") == 0
    return run("gates", "agent-release", *BASE, "--output", "bundle.json")  # output exists


def _bundle(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> Path:
    assert _release_ready(w, tmp, mp) == 0
    return Path("bundle.json")


@scenario("sealeval gates verify-packet", 0)
def _packet_valid(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    bundle = _bundle(w, tmp, mp)
    return run("gates", "verify-packet", str(bundle), "--hmac-key-file", "signing.key")


@scenario("sealeval gates verify-packet", 1)
def _packet_invalid(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    bundle = _bundle(w, tmp, mp)
    Path("wrong.key").write_bytes(bytes(reversed(KEY)))
    return run("gates", "verify-packet", str(bundle), "--hmac-key-file", "wrong.key")


@scenario("sealeval gates verify-packet", 2)
def _packet_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("gates", "verify-packet", str(tmp / "missing.json"), "--hmac-key-file", "x.key")


def _gate_evidence(tmp: Path, name: str) -> str:
    evidence = resources.files("sealeval") / "_data" / "gates" / f"{name}.json"
    (tmp / f"{name}.json").write_bytes(evidence.read_bytes())  # as `sealeval demo` writes it
    return str(tmp / f"{name}.json")


@scenario("sealeval gates evaluate", 0)
def _gates_ready(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    path = _gate_evidence(tmp, "baseline_pass")
    return run("gates", "evaluate", path, "--candidate-digest", CANDIDATE)


@scenario("sealeval gates evaluate", 1)
def _gates_not_ready(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    path = _gate_evidence(tmp, "critical_failure")
    return run("gates", "evaluate", path, "--candidate-digest", CANDIDATE)


@scenario("sealeval gates evaluate", 2)
def _gates_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    path = _gate_evidence(tmp, "baseline_pass")
    return run("gates", "evaluate", path, "--candidate-digest", "sha256:short")


@scenario("sealeval gates run-suite", 0)
def _suite_written(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("gates", "run-suite", "recovery", "--source-sha", SHA, "-o", str(tmp / "s.json"))


@scenario("sealeval gates run-suite", 2)
def _suite_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("gates", "run-suite", "recovery", "--source-sha", SHA, "-o", "policy.yaml")


# ---------------------------------------------------------------------------
# attest, demo


@scenario("sealeval attest manifest|release|receipt", 0)
def _attest_written(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    envelope = str(tmp / "receipt.dsse.json")
    return run("attest", "receipt", "r.json", "--signing-key", "keys/private.pem", "-o", envelope)


@scenario("sealeval attest manifest|release|receipt", 2)
def _attest_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    envelope = str(tmp / "receipt.dsse.json")
    return run(
        "attest", "receipt", "policy.yaml", "--signing-key", "keys/private.pem", "-o", envelope
    )


@scenario("sealeval attest verify", 0)
def _attest_verified(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    assert _attest_written(w, tmp, mp) == 0
    envelope = str(tmp / "receipt.dsse.json")
    return run("attest", "verify", envelope, "--public-key", "keys/public.pem")


@scenario("sealeval attest verify", 1)
def _attest_untrusted(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    assert _attest_written(w, tmp, mp) == 0
    assert run("evaluate", "--keygen", str(tmp / "other")) == 0
    envelope = str(tmp / "receipt.dsse.json")
    return run("attest", "verify", envelope, "--public-key", str(tmp / "other" / "public.pem"))


@scenario("sealeval attest verify", 2)
def _attest_verify_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("attest", "verify", str(tmp / "missing.json"), "--public-key", "keys/public.pem")


@scenario("sealeval demo", 0)
def _demo_behaved(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    return run("demo", "--out", str(tmp / "demo-out"))


@scenario("sealeval demo", 1)
def _demo_misbehaved(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    # The gates section reports that the fixtures did not give READY / NOT_READY.
    mp.setattr(demo_module, "_gates_section", lambda *_args: False)
    return run("demo", "--out", str(tmp / "demo-out"))


@scenario("sealeval demo", 2)
def _demo_refused(w: World, tmp: Path, mp: pytest.MonkeyPatch) -> int:
    (tmp / "mine").mkdir()
    (tmp / "mine" / "keep.txt").write_text("not the demo's", encoding="utf-8")
    return run("demo", "--out", str(tmp / "mine"))  # a folder the demo did not create


# ---------------------------------------------------------------------------


def test_the_table_names_every_command_once() -> None:
    commands = {label.split()[1] for label in TABLE}
    from sealeval.cli import COMMANDS  # noqa: PLC0415

    assert commands == set(COMMANDS)
    assert all(0 in cells and 2 in cells for cells in TABLE.values())  # success and refusal


def test_every_scenario_is_a_documented_cell() -> None:
    assert set(SCENARIOS) <= set(CELLS), "a scenario for a code the table does not document"


@pytest.mark.parametrize(("label", "code"), CELLS, ids=[f"{label} -> {c}" for label, c in CELLS])
def test_exit_code(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, label: str, code: int
) -> None:
    provoke = SCENARIOS.get((label, code))
    assert provoke is not None, f"docs/cli.md documents exit {code} of {label}: add a scenario"
    monkeypatch.chdir(world.root)
    assert provoke(world, tmp_path, monkeypatch) == code
