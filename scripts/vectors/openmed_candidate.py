"""Regenerator of openmed's ``candidate_runner.json`` (openmed venv; public functions only).

The ``recipe`` case builds a git workspace (two commits, three tags, four artifact files and
an evidence envelope); each ``scenario`` case edits a fresh copy of it, writes the signing
key and runs ``openmed gates agent-release`` in human and ``--json`` mode and the release
script (``openmed.eval.agent_release_candidate.main``), in-process from the workspace with
the recipe's isolated git environment; the ``packet`` cases parse and verify a signed packet
(``AgentCandidatePacket.from_dict``, ``verify``).

``vary_candidate`` makes **new repositories**: the commit dates move by a seeded number of
days and every number in the recipe's text files (module value, artifact contents) is
redrawn, so both commits, the tags and the artifact digests change; every place a case
states a commit id (the command's ``--source-sha``, an evidence file's ``source_sha``, also
upper-case, shortened or inside hex-encoded bytes) gets the new one, the tags are renamed
(also inside a revision expression), the evidence digests are renamed, and every signing
key gets fresh random bytes of its length (a key that was a cut of the recipe's key is a cut
of the new key; one that extended it extends the new key by the same bytes). A packet case
is aligned onto the regenerated ``ready`` packet (``alignment.Transplant``): an
untouched field becomes the new field, a tampered one keeps its tamper. The ``hmac`` case
needs openmed's private packet signer: copied.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from alignment import Transplant, rename_commits
from openmed.cli import main as cli_main
from openmed.eval.agent_release_candidate import AgentCandidatePacket
from openmed.eval.agent_release_candidate import main as script_main
from renaming import DIGEST, DigestRenamer

Case = dict[str, Any]

#: A commit date of the recipe.
DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00")
#: seed -> (shared ready case, regenerated ready case) for the packet cases.
READY: dict[int, tuple[Case, Case]] = {}
#: The shared file's recipe (the workspace every shared scenario edits).
RECIPES: dict[str, dict[str, Any]] = {}


def canonical(value: Any) -> str:
    """Return openmed's canonical JSON text (sorted keys, compact, ASCII escapes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest_bytes(data: bytes) -> str:
    """Return ``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def git_environment(workspace: Path, recipe: dict[str, Any]) -> dict[str, str]:
    """Return the environment without the caller's git variables, plus the runner's."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    environment.update(recipe["runner_env"])
    environment["GIT_CEILING_DIRECTORIES"] = str(workspace.parent)
    return environment


def build(recipe: dict[str, Any], workspace: Path) -> None:
    """Apply the recipe's ordered steps in the new empty directory ``workspace``."""
    workspace.mkdir(parents=True)
    for step in recipe["steps"]:
        target = workspace / step.get("path", ".")
        if step["op"] == "mkdir":
            target.mkdir(parents=True)
        elif step["op"] == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(step["content"].encode("utf-8"))
        elif step["op"] == "git":
            environment = {
                **git_environment(workspace, recipe),
                **recipe["git_env"],
                **step.get("env", {}),
            }
            subprocess.run(
                ["git", *step["args"]],
                cwd=workspace / step["cwd"],
                env=environment,
                check=True,
                capture_output=True,
            )
        else:
            raise SystemExit(f"candidate_runner.json: unknown recipe step {step['op']!r}")


def rev_parse(workspace: Path, recipe: dict[str, Any], revision: str) -> str:
    """Return the commit ``revision`` names in the recipe's checkout."""
    completed = subprocess.run(
        ["git", "rev-parse", revision],
        cwd=workspace / "checkout",
        env=git_environment(workspace, recipe),
        check=True,
        capture_output=True,
    )
    return completed.stdout.decode("utf-8").strip()


def run_recipe(data: Any) -> dict[str, Any]:
    """Build the recipe and return its commits, tags and file digests."""
    recipe = data["recipe"]
    with tempfile.TemporaryDirectory(prefix="openmed-recipe-") as folder:
        workspace = Path(folder) / "ws"
        build(recipe, workspace)
        tags = [
            step["args"][-1]
            for step in recipe["steps"]
            if step["op"] == "git" and step["args"][0] == "tag"
        ]
        return {
            "head_sha": rev_parse(workspace, recipe, "HEAD"),
            "first_commit_sha": rev_parse(workspace, recipe, "HEAD~1"),
            "tag_shas": {
                tag: rev_parse(workspace, recipe, f"refs/tags/{tag}^{{commit}}") for tag in tags
            },
            "artifact_digests": {
                name: digest_bytes((workspace / name).read_bytes())
                for name in ("wheel", "sdist", "tool_catalog", "policy")
            },
            "evidence_file_digest": digest_bytes((workspace / "evidence.json").read_bytes()),
        }


def apply_setup(workspace: Path, given: dict[str, Any]) -> None:
    """Write the key file, then apply the scenario's setup steps."""
    (workspace / given["key_file"]).write_bytes(bytes.fromhex(given["signing_key_hex"]))
    for step in given["setup"]:
        target = workspace / step["path"]
        if step["op"] == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            if "content_hex" in step:
                target.write_bytes(bytes.fromhex(step["content_hex"]))
            else:
                target.write_bytes(step["content"].encode("utf-8"))
        elif step["op"] == "remove":
            target.unlink()
        elif step["op"] == "mkdir":
            target.mkdir(parents=True)
        elif step["op"] == "symlink":
            target.symlink_to(step["target"])
        else:
            raise SystemExit(f"candidate_runner.json: unknown setup step {step['op']!r}")


def invoke(entry: Callable[[list[str]], Any], argv: list[str]) -> tuple[int, str, str]:
    """Run an entry point in-process; return its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = entry(argv)
        except SystemExit as stop:
            code = stop.code
    return int(code or 0), out.getvalue(), err.getvalue()


@contextlib.contextmanager
def inside(workspace: Path, recipe: dict[str, Any]) -> Any:
    """Run from ``workspace`` with the recipe's isolated git environment (restored after)."""
    saved_directory, saved_environment = os.getcwd(), dict(os.environ)
    os.environ.clear()
    os.environ.update(git_environment(workspace, recipe))
    os.chdir(workspace)
    try:
        yield
    finally:
        os.chdir(saved_directory)
        os.environ.clear()
        os.environ.update(saved_environment)


def run_scenario(data: Any, recipe: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario in the three modes, each in a fresh workspace."""
    argv = [*data["argv"], "--output", data["output"]]
    commands: dict[str, tuple[Callable[[list[str]], Any], list[str]]] = {
        "human": (cli_main, ["gates", "agent-release", *argv]),
        "json": (cli_main, ["gates", "agent-release", *argv, "--json"]),
        "script": (script_main, argv),
    }
    modes = {}
    with tempfile.TemporaryDirectory(prefix="openmed-candidate-") as folder:
        template = Path(folder) / "template" / "ws"
        build(recipe, template)
        for mode, (entry, arguments) in commands.items():
            workspace = Path(folder) / mode / "ws"
            shutil.copytree(template, workspace, symlinks=True)
            apply_setup(workspace, data)
            output = workspace / data["output"]
            before = output.read_bytes() if output.is_file() else None
            with inside(workspace, recipe):
                code, stdout, stderr = invoke(entry, arguments)
            after = output.read_bytes() if output.is_file() else None
            written = after.decode("utf-8") if after is not None and after != before else None
            modes[mode] = {
                "exit_code": code,
                "stdout": stdout,
                "stderr": stderr,
                "output_file": written,
            }
    expected: dict[str, Any] = {"modes": modes}
    if modes["human"]["output_file"] is not None:
        bundle = json.loads(modes["human"]["output_file"])
        expected["bundle"] = bundle
        expected["manifest_canonical"] = canonical(bundle["manifest"])
        expected["packet_canonical"] = AgentCandidatePacket.from_dict(bundle["packet"]).to_json()
        expected["manifest_digest"] = bundle["manifest_digest"]
        expected["signature"] = bundle["packet"]["signature"]
    return expected


def run_packet(data: Any) -> dict[str, Any]:
    """Parse and verify one packet document with the case's key."""
    try:
        packet = AgentCandidatePacket.from_dict(data["packet"])
    except Exception as error:  # noqa: BLE001 - any refusal is the expected output
        return {"from_dict": "error", "error_code": str(error)}
    return {
        "from_dict": "ok",
        "canonical": packet.to_json(),
        "verify": packet.verify(bytes.fromhex(data["key_hex"])),
    }


def run_candidate(data: Any) -> dict[str, Any] | None:
    """Run one ``candidate_runner.json`` case (the ``hmac`` case: None, copied)."""
    if data["op"] == "recipe":
        if not any(data["signing_key_hex"] in names.keys.values() for names in RENAMINGS.values()):
            RECIPES.setdefault("shared", data["recipe"])
        return run_recipe(data)
    if data["op"] == "scenario":
        return run_scenario(data, recipe_of(data["signing_key_hex"]))
    if data["op"] == "packet":
        return run_packet(data)
    return None


class Renaming:
    """The seeded renaming of one file: commits, tags, dates, numbers, keys and digests."""

    def __init__(self, seed: int, cases: list[Case]) -> None:
        """Derive the new recipe from the file's recipe case and build it for the new ids."""
        self.seed = seed
        self.random = random.Random(f"candidate-{seed}")
        self.digests = DigestRenamer(seed)
        recipe_case = next(case for case in cases if case["input"]["op"] == "recipe")
        old = recipe_case["expected"]
        self.base_key = recipe_case["input"]["signing_key_hex"]
        self.keys: dict[str, str] = {}
        self.tags = {tag: f"{tag}-s{seed}" for tag in old["tag_shas"]}
        days = self.random.randrange(1, 3000)
        self.dates: dict[str, str] = {}
        recipe = json.loads(json.dumps(recipe_case["input"]["recipe"]))
        for step in recipe["steps"]:
            if step["op"] == "write" and not step["path"].endswith(".json"):
                step["content"] = re.sub(r"\d+", self.number, step["content"])
            for key, value in step.get("env", {}).items():
                step["env"][key] = self.date(value, days)
            if step["op"] == "git" and step["args"][0] == "tag":
                step["args"][-1] = self.tags[step["args"][-1]]
        self.recipe = recipe
        built = run_recipe({"recipe": recipe})
        self.commits = {
            old["head_sha"]: built["head_sha"],
            old["first_commit_sha"]: built["first_commit_sha"],
        }
        self.new_recipe = self.recipe_case(recipe_case["input"])["recipe"]

    def number(self, match: re.Match[str]) -> str:
        """Return another number of the same length for a number in a recipe file."""
        length = len(match.group(0))
        low = 10 ** (length - 1) if length > 1 else 0
        return str(self.random.randrange(low, 10**length))

    def date(self, value: str, days: int) -> str:
        """Return a commit date moved by ``days`` (the same move for every date)."""
        if value not in self.dates:
            moved = datetime.fromisoformat(value) + timedelta(days=days)
            self.dates[value] = moved.isoformat()
        return self.dates[value]

    def key(self, old: str) -> str:
        """Return new key bytes (hex) for ``old``, of its length."""
        if old not in self.keys:
            if old == self.base_key:
                draw = random.Random(f"candidate-key-{self.seed}")
                self.keys[old] = draw.randbytes(len(old) // 2).hex()
            elif self.base_key.startswith(old) or old.startswith(self.base_key):
                # A cut key stays a cut of the new key; an extended one keeps its extra bytes
                # (a trailing newline stays a trailing newline).
                base = self.key(self.base_key)
                self.keys[old] = (base + old[len(base) :])[: len(old)]
            else:
                draw = random.Random(f"candidate-key-{self.seed}-{old}")
                self.keys[old] = draw.randbytes(len(old) // 2).hex()
        return self.keys[old]

    def text(self, value: str) -> str:
        """Return a text with the commits, tags and digests it states renamed."""
        value = rename_commits(value, self.commits)
        for old, new in sorted(self.tags.items(), key=lambda item: -len(item[0])):
            value = value.replace(old, new)
        return DIGEST.sub(lambda match: self.digests.digest(match.group(0)), value)

    def scenario(self, given: dict[str, Any]) -> dict[str, Any]:
        """Return a scenario's input for the new repository and key."""
        new = json.loads(json.dumps(given))
        new["argv"] = [self.text(item) for item in given["argv"]]
        for step in new["setup"]:
            if "content" in step:
                step["content"] = self.text(step["content"])
            if "content_hex" in step:
                data = bytes.fromhex(step["content_hex"]).decode("latin-1")
                step["content_hex"] = self.text(data).encode("latin-1").hex()
        new["signing_key_hex"] = self.key(given["signing_key_hex"])
        return new

    def recipe_case(self, given: dict[str, Any]) -> dict[str, Any]:
        """Return the recipe case's input: the new recipe (its evidence for the new head)."""
        recipe = json.loads(json.dumps(self.recipe))
        for step in recipe["steps"]:
            if step["op"] == "write" and step["path"].endswith(".json"):
                step["content"] = self.text(step["content"])
        return {**given, "recipe": recipe, "signing_key_hex": self.key(given["signing_key_hex"])}


RENAMINGS: dict[int, Renaming] = {}


def recipe_of(key_hex: str) -> dict[str, Any]:
    """Return the recipe a scenario runs on: a renaming's, when its key is a renamed key."""
    for names in RENAMINGS.values():
        if key_hex in names.keys.values():
            return names.new_recipe
    return RECIPES["shared"]


def renaming(seed: int, cases: list[Case]) -> Renaming:
    """Return the file's renaming for ``seed`` (built once: it builds a repository)."""
    if seed not in RENAMINGS:
        RENAMINGS[seed] = Renaming(seed, cases)
    return RENAMINGS[seed]


def ready_pair(seed: int, cases: list[Case]) -> tuple[Case, Case]:
    """Return the shared ``ready`` case and its regeneration (the packet cases' twin)."""
    if seed not in READY:
        names = renaming(seed, cases)
        shared = next(case for case in cases if case["name"] == "ready")
        given = names.scenario(shared["input"])
        READY[seed] = (shared, {"input": given, "expected": run_scenario(given, names.new_recipe)})
    return READY[seed]


def vary_candidate(case: Case, seed: int, cases: list[Case]) -> Any:
    """Return a case's input for new repositories, keys and digests (packets aligned)."""
    given = case["input"]
    names = renaming(seed, cases)
    if given["op"] == "recipe":
        return names.recipe_case(given)
    if given["op"] == "scenario":
        return names.scenario(given)
    if given["op"] == "packet":
        old, new = ready_pair(seed, cases)
        transplant = Transplant(names.digests)
        packet = transplant.value(
            given["packet"],
            old["expected"]["bundle"]["packet"],
            new["expected"]["bundle"]["packet"],
        )
        return {**given, "packet": packet, "key_hex": names.key(given["key_hex"])}
    return given


def candidate_facts(expected: dict[str, Any]) -> Any:
    """Return what a case's variation must keep: exit codes, decisions, reasons, verdicts."""
    if "modes" in expected:
        facts: dict[str, Any] = {
            mode: (entry["exit_code"], entry["stderr"], entry["output_file"] is None)
            for mode, entry in expected["modes"].items()
        }
        if "bundle" in expected:
            packet = expected["bundle"]["packet"]
            manifest = expected["bundle"]["manifest"]
            facts["packet"] = (packet["decision"], packet["reason_codes"], packet["gates"])
            facts["evidence"] = sorted(
                (entry["status"], entry["metric_count"]) for entry in manifest["evidence"]
            )
            facts["repository"] = {
                key: manifest[key]["reason_codes"] for key in ("repository", "repository_after")
            }
        return facts
    if "head_sha" in expected:
        return sorted(expected["artifact_digests"])
    if "from_dict" in expected:
        return (expected["from_dict"], expected.get("verify"), expected.get("error_code"))
    return expected
