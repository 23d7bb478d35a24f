"""``sealeval import``: every adapters.json vector through the CLI, exit codes, output, TTY."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.captured import Limits
from sealeval.captured.importers import ImportRefusalError, adapter_names
from sealeval.captured.importers.registry import detect_adapter
from sealeval.cli import imports as imports_module
from sealeval.cli._common import CONTEXT_SETTINGS
from sealeval.cli.imports import PROGRESS_MIN_BYTES, import_command
from support.captured_importers import CANARY, message_code
from support.digests import ARTIFACT
from support.vectors import cases, decode_input, load

_ERROR = re.compile(r"sealeval: error: ([A-Za-z0-9_.\[\]-]+): ([a-z0-9_]+)\n")
_RUNNER = "from sealeval.cli.imports import import_command; import_command(prog_name='sealeval')"


def _invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(import_command, [str(arg) for arg in args], catch_exceptions=False)


def _case(name: str) -> dict[str, Any]:
    for case in load("invarlock/adapters.json")["cases"]:
        if case["name"] == name:
            return case  # type: ignore[no-any-return]
    raise AssertionError(name)


def _argv(case_input: dict[str, Any], folder: Path) -> list[str]:
    """The command line equivalent of a vector case's load_run arguments."""
    arguments = decode_input(case_input, arrays_as_tuples=False)
    source = folder / "source.data"
    if "file_text" in arguments:
        source.write_bytes(arguments["file_text"].encode("utf-8"))
    else:
        import base64  # noqa: PLC0415

        source.write_bytes(base64.b64decode(arguments["file_b64"]))
    argv = [str(source), "--adapter", arguments["adapter"], "-o", str(folder / "run.json")]
    if "source" in arguments:
        argv += ["--source", f"{arguments['source']['name']}@{arguments['source']['version']}"]
    if "run_id" in arguments:
        argv += ["--run-id", arguments["run_id"]]
    if "artifact_digest" in arguments:
        argv += ["--artifact-digest", arguments["artifact_digest"]]
    for option in ("service_identity", "score_provenance"):
        if option in arguments:
            path = folder / f"{option}.json"
            path.write_text(json.dumps(arguments[option]), encoding="utf-8")
            argv += ["--" + option.replace("_", "-"), str(path)]
    if "input_projection" in arguments:
        projection = arguments["input_projection"]
        if set(projection) != {"kind", "pointer"} or projection["kind"] != "json-pointer":
            pytest.fail("vector case shape not understood")
        argv += ["--input-projection", projection["pointer"]]
    return argv


_SUMMARY = re.compile(
    r"sealeval: imported (?P<records>[0-9]+) records \((?P<errors>[0-9]+) errored, "
    r"(?P<tasks>[0-9]+) tasks?\) with (?P<adapter>[a-z-]+); "
    r"run digest (?P<digest>sha256:[0-9a-f]{64})\n"
)
_HINT = re.compile(r"sealeval: hint: --adapter (?P<adapter>[a-z-]+) \(or auto\) reads this file\n")


@pytest.mark.parametrize("case", cases("invarlock/adapters.json"))
def test_vector_through_the_cli(case: dict[str, Any], tmp_path: Path) -> None:
    expected = case["expected"]
    result = _invoke(*_argv(case["input"], tmp_path))
    output = tmp_path / "run.json"
    if "error" in expected:
        if set(expected) != {"error"}:
            pytest.fail("vector case shape not understood")
        assert result.exit_code == 2
        assert result.stdout == ""
        # the first line is the refusal (an unknown --adapter adds the valid names); a
        # specified adapter's refusal may be preceded by a hint naming the native reader
        hint = _HINT.match(result.stderr)
        stderr = result.stderr[hint.end() :] if hint is not None else result.stderr
        if hint is not None:
            assert hint["adapter"] in adapter_names()
        match = _ERROR.fullmatch(stderr.splitlines(keepends=True)[0])
        assert match is not None, result.stderr
        assert match.group(2) == message_code(case["name"], expected["error"]["message"])
        assert not output.exists()
        return
    if set(expected) != {"run", "run_canonical", "run_digest", "source_digest", "record_count"}:
        pytest.fail("vector case shape not understood")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected["run_digest"] + "\n"
    # one summary line on standard error (no progress bar: not a terminal)
    summary = _SUMMARY.fullmatch(result.stderr)
    assert summary is not None, result.stderr
    assert int(summary["records"]) == expected["record_count"]
    assert summary["adapter"] == case["input"]["adapter"]
    assert summary["digest"] == expected["run_digest"]
    assert output.read_bytes() == expected["run_canonical"].encode("utf-8")
    assert output.stat().st_mode & 0o777 == 0o600


def _lm_eval(folder: Path) -> tuple[Path, dict[str, Any]]:
    case = _case("lm-eval-samples-generation")
    path = folder / "samples.jsonl"
    path.write_text(case["input"]["file_text"], encoding="utf-8")
    return path, case


_IDENTITY = ["--source", "acme-harness@3.1.4", "--run-id", "cli-run-1"]


def _case_identity(case: dict[str, Any]) -> list[str]:
    """The vector case's own identity options (its digest depends on them)."""
    arguments = case["input"]
    source = f"{arguments['source']['name']}@{arguments['source']['version']}"
    return [
        *("--source", source, "--run-id", arguments["run_id"]),
        *("--artifact-digest", arguments["artifact_digest"]),
    ]


def test_auto_adapter_and_exclusive_output(tmp_path: Path) -> None:
    path, case = _lm_eval(tmp_path)
    output = tmp_path / "run.json"
    identity = _case_identity(case)
    result = _invoke(path, *identity, "-o", output)
    assert result.exit_code == 0
    assert result.stdout == case["expected"]["run_digest"] + "\n"
    written = output.read_bytes()
    again = _invoke(path, *identity, "-o", output)
    assert again.exit_code == 2
    assert again.stderr == "sealeval: error: --output: output_exists\n"
    assert output.read_bytes() == written
    missing = _invoke(path, *identity, "-o", tmp_path / "x" / "r")
    assert missing.stderr == "sealeval: error: --output: output_parent_missing\n"


def test_refusals_print_field_and_code_only(tmp_path: Path) -> None:
    path, _ = _lm_eval(tmp_path)
    output = tmp_path / "run.json"
    cases_ = {
        "--artifact-digest: identities_required": [*_IDENTITY],
        "source: adapter_option_invalid": ["--source", "no-version@", "--run-id", "r"],
        "adapter: unknown_adapter": [*_IDENTITY, "--artifact-digest", ARTIFACT, "--adapter", "x"],
        "--service-identity: not_found": [*_IDENTITY, "--service-identity", tmp_path / "none"],
        "--score-provenance: invalid_json": [
            *_IDENTITY,
            "--artifact-digest",
            ARTIFACT,
            "--score-provenance",
            path,
        ],
        "input_projection.pointer: projection_root": [
            *_IDENTITY,
            "--artifact-digest",
            ARTIFACT,
            "--input-projection",
            "/expected",
        ],
    }
    for message, options in cases_.items():
        result = _invoke(path, *options, "-o", output)
        assert result.exit_code == 2, message
        assert result.stderr.splitlines()[0] == f"sealeval: error: {message}"
        assert result.stdout == ""
        assert not output.exists()


def test_compat_invarlock_applies_the_reference_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _lm_eval(tmp_path)
    monkeypatch.setattr(imports_module, "INVARLOCK_LIMITS", Limits(max_records=2))
    options = [*_IDENTITY, "--artifact-digest", ARTIFACT]
    result = _invoke(path, *options, "--compat-invarlock", "-o", tmp_path / "a.json")
    assert result.exit_code == 2
    error, remedy = result.stderr.splitlines()
    assert error == "sealeval: error: records: too_many_records"
    assert remedy.startswith("sealeval: --compat-invarlock applies invarlock's envelope")
    assert not (tmp_path / "a.json").exists()
    assert _invoke(path, *options, "-o", tmp_path / "b.json").exit_code == 0


def test_nan_metric_option(tmp_path: Path) -> None:
    path, _ = _lm_eval(tmp_path)
    path.write_text(
        path.read_text(encoding="utf-8").replace('"exact_match": 1.0', '"exact_match": NaN', 1),
        encoding="utf-8",
    )
    options = [*_IDENTITY, "--artifact-digest", ARTIFACT]
    assert _invoke(path, *options, "-o", tmp_path / "a.json").exit_code == 0
    refused = _invoke(path, *options, "--nan-as-error", "-o", tmp_path / "b.json")
    assert refused.exit_code == 2
    assert refused.stderr == "sealeval: error: line[1]: non_finite_number\n"


def test_help_uses_the_shared_settings() -> None:
    assert import_command.context_settings == CONTEXT_SETTINGS
    result = _invoke("-h")
    assert result.exit_code == 0
    for option in ("--adapter", "--source", "--run-id", "--artifact-digest", "--service-identity"):
        assert option in result.stdout
    assert "--compat-invarlock" in result.stdout


def test_cli_never_echoes_canaries(tmp_path: Path) -> None:
    folder = tmp_path / CANARY
    folder.mkdir()
    row = {"id": CANARY, "input": CANARY, "expected": CANARY, "output": CANARY}
    sources = {
        "dup": json.dumps(row) + "\n" + json.dumps(row) + "\n",
        "bad": f'{{"{CANARY}": \n',
        "extra": json.dumps({**row, CANARY: 1}) + "\n",
        "good": json.dumps(row) + "\n",
    }
    for name, text in sources.items():
        path = folder / f"{CANARY}-{name}.jsonl"
        path.write_text(text, encoding="utf-8")
        for adapter in ("jsonl", "auto"):
            result = _invoke(
                path,
                "--adapter",
                adapter,
                "--source",
                f"{CANARY}@1",
                "--run-id",
                CANARY,
                "--artifact-digest",
                ARTIFACT,
                "-o",
                folder / f"{CANARY}-{name}-{adapter}.json",
            )
            assert CANARY not in result.output
            assert CANARY not in (result.stderr or "")
            assert str(tmp_path) not in result.output
            assert result.exit_code == (0 if name == "good" else 2)


def _subprocess_argv(path: Path, output: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        _RUNNER,
        str(path),
        *_IDENTITY,
        "--artifact-digest",
        ARTIFACT,
        "-o",
        str(output),
    ]


def _big_source(folder: Path) -> Path:
    path = folder / "big.jsonl"
    filler = "tokens " * 500
    with path.open("w", encoding="utf-8") as handle:
        index = 0
        while handle.tell() < PROGRESS_MIN_BYTES + 65_536:
            handle.write(
                json.dumps({"id": f"r{index}", "input": filler, "expected": "x", "output": "y"})
                + "\n"
            )
            index += 1
    return path


def test_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    path = _big_source(tmp_path)
    quiet = subprocess.run(
        _subprocess_argv(path, tmp_path / "quiet.json"),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert quiet.returncode == 0
    digest = quiet.stdout.decode().strip()
    summary = _SUMMARY.fullmatch(quiet.stderr.decode())  # the summary only: no progress bar
    assert summary is not None
    assert summary["digest"] == digest
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    process = subprocess.Popen(
        _subprocess_argv(path, tmp_path / "tty.json"),
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
    )
    os.close(secondary)
    shown = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(primary, 65_536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    assert process.stdout is not None
    stdout = process.stdout.read().decode()
    assert process.wait(timeout=60) == 0
    os.close(primary)
    assert stdout.strip() == digest
    assert b"importing" in shown
    assert b"with jsonl; run digest " + digest.encode() in shown
    assert (tmp_path / "tty.json").read_bytes() == (tmp_path / "quiet.json").read_bytes()


def test_progress_bar_starts_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar redraws from its callback, so a large import may still fork its worker."""
    path = _big_source(tmp_path)
    monkeypatch.setattr(imports_module, "is_terminal", lambda: True)
    before = set(threading.enumerate())  # other tests (mlflow) may leave threads behind
    with imports_module._progress_bar(path) as update:
        assert update is not None
        update(1, 2)
        update(2, 2)
        assert set(threading.enumerate()) <= before


# ---------------------------------------------------------------------------
# Summary, hints, fit and completeness (issue 14)


def _lm_samples(name: str) -> Path:
    folder = Path(__file__).resolve().parents[2].parent / "shared/samples/evaluators/lm_eval/out"
    return next(folder.rglob(f"samples_{name}_*.jsonl"))


def _jsonl_count(path: Path) -> tuple[int, int, set[str]]:
    """An independent reader: records, errored records, tasks of a JSONL file of records."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    tasks = {row.get("metadata", {}).get("task") for row in rows} - {None}
    return len(rows), sum(1 for row in rows if row.get("error") is not None), tasks


def test_summary_as_json(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [
        {"id": "a", "input": "x", "expected": "y", "output": "y", "metadata": {"task": "t1"}},
        {"id": "b", "input": "x", "expected": "y", "output": None, "error": "boom"},
        {"id": "c", "input": "x", "expected": "y", "output": "n", "metadata": {"task": "t2"}},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    argv = [*_IDENTITY, "--artifact-digest", ARTIFACT, "--json"]
    result = _invoke(path, *argv, "-o", tmp_path / "run.json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    records, errored, tasks = _jsonl_count(path)
    assert document["records"] == records
    assert document["errored_records"] == errored
    assert set(document["tasks"]) == tasks
    assert document["adapter"] == "jsonl"
    run = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert len(run["records"]) == records
    assert result.stderr == ""


def test_auto_reads_lm_eval_filters_and_a_named_contract_adapter_hints(tmp_path: Path) -> None:
    path = _lm_samples("toy_gen")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    documents = {row["doc_id"] for row in lines}
    filters = {row["filter"] for row in lines}
    argv = ["--run-id", "cli-run-1", "--artifact-digest", ARTIFACT]  # version: the file's
    auto = _invoke(path, *argv, "-o", tmp_path / "auto.json")
    assert auto.exit_code == 0, auto.stderr
    summary = _SUMMARY.fullmatch(auto.stderr)
    assert summary is not None
    assert summary["adapter"] == "lm-eval-log-samples"
    assert int(summary["records"]) == len(documents) * len(filters) == len(lines)
    assert int(summary["tasks"]) == 1
    named = _invoke(path, *argv, "--adapter", "lm-eval-samples", "-o", tmp_path / "named.json")
    assert named.exit_code == 2
    hint = _HINT.match(named.stderr)
    assert hint is not None
    assert hint["adapter"] == "lm-eval-log-samples"
    assert _ERROR.fullmatch(named.stderr[hint.end() :]) is not None
    assert not (tmp_path / "named.json").exists()


def test_named_adapter_that_does_not_fit_names_the_reader(tmp_path: Path) -> None:
    path = _lm_samples("toy_gen")
    result = _invoke(
        path, *_IDENTITY, "--artifact-digest", ARTIFACT, "--adapter", "jsonl", "-o", tmp_path / "r"
    )
    assert result.exit_code == 2
    assert result.stderr == "sealeval: error: adapter[lm-eval-samples]: adapter_mismatch\n"


@pytest.mark.parametrize(
    "document",
    [
        {"testRunLink": "https://app.confident-ai.com/" + CANARY},
        {"testRunLink": CANARY, "testRunId": CANARY},
    ],
    ids=["link-only", "link-and-id"],
)
def test_a_deepeval_run_uploaded_to_confident_ai_gets_its_remedy(
    tmp_path: Path, document: dict[str, str]
) -> None:
    """.latest_test_run.json holding only the link: unknown_format, the remedy, never the link."""
    folder = tmp_path / ".deepeval"
    folder.mkdir()
    path = folder / ".latest_test_run.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = _invoke(path, "--artifact-digest", ARTIFACT, "-o", tmp_path / "run.json")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "sealeval: error: adapter: unknown_format"
    assert lines[1].startswith("sealeval: hint: this DeepEval file holds only the link")
    assert "DEEPEVAL_RESULTS_FOLDER" in lines[1]
    assert len(lines) == 2
    assert CANARY not in result.stderr + result.stdout
    assert not (tmp_path / "run.json").exists()
    with pytest.raises(ImportRefusalError) as refused:
        detect_adapter(path)
    assert (refused.value.code, refused.value.remedy) == ("unknown_format", "deepeval_uploaded")
    assert CANARY not in str(refused.value) + repr(refused.value)


@pytest.mark.parametrize(
    "document",
    [
        {"testRunLink": CANARY, "testRunData": CANARY},  # holds (broken) results: not the case
        {"link": CANARY},
        [{"testRunLink": CANARY}],
    ],
    ids=["with-results", "other-object", "array"],
)
def test_other_unknown_files_get_no_deepeval_remedy(tmp_path: Path, document: object) -> None:
    path = tmp_path / "unknown.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = _invoke(path, "--artifact-digest", ARTIFACT, "-o", tmp_path / "run.json")
    assert result.exit_code == 2
    assert "DeepEval" not in result.stderr
    assert CANARY not in result.stderr
