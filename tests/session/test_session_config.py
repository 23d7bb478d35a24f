"""The session configuration document: strict parsing, loading, ledger usage file, clock.

Also home of the bundle helpers that ``test_cli_session.py`` imports.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sealeval.canonical import decode, encode_openmed
from sealeval.manifest.components import load_config_document
from sealeval.session import config as config_module
from sealeval.session import demo_providers
from sealeval.session.budget import LedgerUsage, SubmissionUsage
from sealeval.session.cases import ComparisonCase, SourceEvidence
from sealeval.session.config import (
    CLOCK_ENVIRONMENT_VARIABLE,
    CONFIG_FORMAT,
    SessionConfig,
    SessionConfigError,
    check_reference,
    load_session_inputs,
    open_session,
    parse_session_config,
    read_session_config,
    session_clock,
)
from support.contracts import schema
from support.refusals import CANARY, assert_refused, refusal_table, rows_for
from support.session_config import OTHER_DIGEST, base_document, copy_bundle, write_config

# ---------------------------------------------------------------------------
# Bundle helpers (shared with test_cli_session.py)


# ---------------------------------------------------------------------------
# The contract


def test_bundled_configurations_match_the_contract() -> None:
    validator = Draft202012Validator(schema("sealeval.session_config.v1"))
    folder = resources.files("sealeval") / "_data" / "demo" / "session"
    names = sorted(item.name for item in folder.iterdir() if item.name.startswith("attempt-"))
    assert names == ["attempt-1.yaml", "attempt-2.yaml", "attempt-3.yaml"]
    for name in names:
        with resources.as_file(folder / name) as path:
            document = load_config_document(path)
        validator.validate(document)
        assert isinstance(parse_session_config(document), SessionConfig)


def test_contract_refuses_what_the_parser_refuses() -> None:
    validator = Draft202012Validator(schema("sealeval.session_config.v1"))
    for _name, mutate, _message in SHAPE_REFUSALS:
        document = base_document()
        mutated = mutate(document)
        assert not validator.is_valid(mutated if mutated is not None else document), _name


# ---------------------------------------------------------------------------
# Pure parsing: one refusal per rule


def _set(path: str, value: object) -> Any:
    def mutate(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node[part]
        node[last] = value

    return mutate


def _drop(path: str) -> Any:
    def mutate(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node[part]
        del node[last]

    return mutate


# (name, mutation, expected message) — each also refused by the JSON Schema.
SHAPE_REFUSALS: list[tuple[str, Any, str]] = [
    ("not-mapping", lambda d: [d], "config: invalid_document"),
    ("format-missing", _drop("format"), "format: missing_field"),
    ("format-other", _set("format", "sealeval.session_config.v2"), "format: unsupported_version"),
    ("unknown-key", _set(CANARY, 1), "config: unknown_field"),
    ("key-missing", _drop("cases"), "cases: missing_field"),
    ("session-key", _set("session_key", CANARY), "session_key: invalid_digest"),
    ("store-foreign-dsn", _set("store", f"mysql://{CANARY}@db/x"), "store: unsupported_store"),
    (
        "store-postgres-with-usage-file",
        _set("store", f"postgresql://{CANARY}@db/x"),
        "feedback.ledger_usage: shared_store_needs_durable_ledger",
    ),
    ("store-memory", _set("store", ":memory:"), "store: invalid_path"),
    ("store-absolute", _set("store", f"/tmp/{CANARY}.sqlite3"), "store: absolute_path"),
    ("absolute", _set("manifest", f"/{CANARY}/manifest.json"), "manifest: absolute_path"),
    ("parent", _set("cases", f"../{CANARY}/cases.yaml"), "cases: parent_reference"),
    ("parent-inner", _set("cases", f"a/../{CANARY}.yaml"), "cases: parent_reference"),
    ("backslash", _set("rubric", f"{CANARY}\\rubric.yaml"), "rubric: backslash"),
    ("url", _set("manifest", f"https://example.org/{CANARY}"), "manifest: url"),
    ("url-file", _set("randomization_key", f"file:{CANARY}"), "randomization_key: url"),
    ("empty", _set("rubric", ""), "rubric: invalid_path"),
    ("dot-segment", _set("rubric", f"./{CANARY}"), "rubric: invalid_path"),
    ("empty-segment", _set("rubric", f"a//{CANARY}"), "rubric: invalid_path"),
    ("trailing-slash", _set("rubric", f"{CANARY}/"), "rubric: invalid_path"),
    ("colon", _set("rubric", f"{CANARY}/a:b"), "rubric: invalid_path"),
    ("control", _set("rubric", f"{CANARY}\n"), "rubric: invalid_path"),
    ("too-long", _set("rubric", "a" * 1025), "rubric: invalid_path"),
    ("not-text", _set("rubric", 7), "rubric: invalid_type"),
    ("components-type", _set("components", [CANARY]), "components: invalid_type"),
    ("component-unknown", _set("components.weights", {"path": "w"}), "components: unknown_field"),
    ("component-missing", _drop("components.model"), "components.model: missing_field"),
    ("component-type", _set("components.model", CANARY), "components.model: invalid_type"),
    (
        "component-both",
        _set("components.model", {"path": "workflow/model", "digest": OTHER_DIGEST}),
        "components.model: unknown_field",
    ),
    (
        "component-extra",
        _set("components.model", {"path": "workflow/model", CANARY: 1}),
        "components.model: unknown_field",
    ),
    (
        "component-no-path",
        _set("components.model", {"kind": "tree"}),
        "components.model.path: missing_field",
    ),
    (
        "component-kind",
        _set("components.model", {"path": "workflow/model", "kind": CANARY}),
        "components.model.kind: unknown_kind",
    ),
    (
        "component-digest",
        _set("components.model", {"digest": CANARY}),
        "components.model.digest: invalid_digest",
    ),
    (
        "component-path",
        _set("components.model", {"path": f"/{CANARY}"}),
        "components.model.path: absolute_path",
    ),
    ("holdout-unknown", _set("holdout.extra", "x"), "holdout: unknown_field"),
    (
        "holdout-manifest-missing",
        _drop("holdout.manifests.label"),
        "holdout.manifests.label: missing_field",
    ),
    (
        "holdout-manifest-path",
        _set("holdout.manifests.case", f"../{CANARY}"),
        "holdout.manifests.case: parent_reference",
    ),
    ("identity", _set("candidate.identity", f"{CANARY} x"), "candidate.identity: invalid_value"),
    (
        "candidate-manifests-type",
        _set("candidate.manifests", []),
        "candidate.manifests: invalid_type",
    ),
    (
        "candidate-manifests-empty",
        _set("candidate.manifests", {}),
        "candidate.manifests: invalid_value",
    ),
    (
        "candidate-manifests-key",
        _set("candidate.manifests", {f"{CANARY} x": OTHER_DIGEST}),
        "candidate.manifests: invalid_value",
    ),
    (
        "candidate-manifests-digest",
        _set("candidate.manifests", {"evaluated": CANARY}),
        "candidate.manifests: invalid_digest",
    ),
    ("provider-missing", _drop("providers.review"), "providers.review: missing_field"),
    ("provider-unknown", _set("providers.judge", {}), "providers: unknown_field"),
    (
        "entry-point",
        _set("providers.runner.entry_point", f"{CANARY}:runner"),
        "providers.runner.entry_point: invalid_entry_point",
    ),
    (
        "entry-point-no-attribute",
        _set("providers.runner.entry_point", "sealeval.session.demo_providers"),
        "providers.runner.entry_point: invalid_entry_point",
    ),
    (
        "provider-digest",
        _set("providers.scorer.digest", CANARY),
        "providers.scorer.digest: invalid_digest",
    ),
    (
        "provider-extra",
        _set("providers.scorer.path", CANARY),
        "providers.scorer: unknown_field",
    ),
    (
        "reviewer",
        _set("conflict_of_interest.reviewer_ref", f"{CANARY} x"),
        "conflict_of_interest.reviewer_ref: invalid_value",
    ),
    (
        "declaration",
        _set("conflict_of_interest.declaration_digest", CANARY),
        "conflict_of_interest.declaration_digest: invalid_digest",
    ),
    (
        "status",
        _set("conflict_of_interest.status", CANARY),
        "conflict_of_interest.status: invalid_value",
    ),
    ("corpora-missing", _drop("corpora.canaries"), "corpora.canaries: missing_field"),
    ("feedback-missing", _drop("feedback.policy"), "feedback.policy: missing_field"),
    ("feedback-type", _set("feedback", CANARY), "feedback: invalid_type"),
]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [pytest.param(mutate, message, id=name) for name, mutate, message in SHAPE_REFUSALS],
)
def test_parse_refusals(mutate: Any, message: str) -> None:
    document = base_document()
    mutated = mutate(document)
    field, _, code = message.rpartition(": ")
    error = assert_refused(
        lambda: parse_session_config(mutated if mutated is not None else document), code, field
    )
    assert isinstance(error, SessionConfigError)
    assert str(error) == message
    assert error.__cause__ is None


def test_missing_identity_is_a_cross_check() -> None:
    document = base_document()
    document["candidate"]["manifests"] = {"reference": OTHER_DIGEST}
    with pytest.raises(SessionConfigError, match=r"^candidate.manifests: missing_identity$"):
        parse_session_config(document)


def test_unknown_key_is_checked_after_the_format() -> None:
    document = base_document()
    document["format"] = "sealeval.session_config.v2"
    document["new_v2_field"] = 1
    with pytest.raises(SessionConfigError, match=r"^format: unsupported_version$"):
        parse_session_config(document)


def test_parse_accepts_digests_kinds_and_dotted_entry_points() -> None:
    document = base_document()
    document["components"]["model"] = {"digest": OTHER_DIGEST}
    document["components"]["prompt"] = {"path": "workflow/prompt.txt", "kind": "file"}
    document["providers"]["review"]["entry_point"] = "sealeval.session.demo_providers:FINDING.match"
    document["store"] = "state/.sessions.sqlite3"
    config = parse_session_config(copy.deepcopy(document))
    assert config.components["model"].digest == OTHER_DIGEST
    assert config.components["prompt"].kind == "file"
    assert config.components["tokenizer"].kind == "tree"
    assert config.components["container"].kind is None
    assert config.store == "state/.sessions.sqlite3"
    assert config.candidate_identity == "evaluated"
    assert repr(config) == "SessionConfig(<redacted>)"
    assert document["format"] == CONFIG_FORMAT


@pytest.mark.parametrize("text", ["a", "a/b.json", ".hidden", "...", "a b/c-d_e.yaml", "é/ü.json"])
def test_safe_references_pass(text: str) -> None:
    assert check_reference(text, "cases") == text


# ---------------------------------------------------------------------------
# Loading


def _refused(folder: Path, document: dict[str, Any], message: str) -> None:
    config, base = read_session_config(write_config(folder, document))
    with pytest.raises(SessionConfigError) as caught:
        load_session_inputs(config, base)
    assert str(caught.value) == message
    assert CANARY not in repr(caught.value)
    assert str(folder) not in str(caught.value)


def test_read_refusals(tmp_path: Path) -> None:
    folder = copy_bundle(tmp_path / CANARY)
    cases = [
        (folder / "missing.yaml", "config: not_found"),
        (folder / "randomization.key", "config: unknown_format"),
        (folder / "workflow", "config: unknown_format"),
    ]
    for path, message in cases:
        with pytest.raises(SessionConfigError) as caught:
            read_session_config(path)
        assert str(caught.value) == message
    with pytest.raises(SessionConfigError, match=r"^config: invalid_document$"):
        read_session_config(folder / "cases.yaml")
    (folder / "dup.yaml").write_text(f"{CANARY}: 1\n{CANARY}: 2\n", encoding="utf-8")
    with pytest.raises(SessionConfigError, match=r"^config: invalid_document$"):
        read_session_config(folder / "dup.yaml")
    (folder / "dir.yaml").mkdir()
    with pytest.raises(SessionConfigError, match=r"^config: not_regular_file$"):
        read_session_config(folder / "dir.yaml")


def test_load_reads_everything(tmp_path: Path) -> None:
    folder = copy_bundle(tmp_path / "bundle")
    config, base = read_session_config(folder / "attempt-1.yaml")
    assert base == folder.absolute()
    inputs = load_session_inputs(config, base)
    assert len(inputs.cases) == 2
    assert len(inputs.randomization_key) == 64
    assert set(inputs.snapshot()) == set(inputs.manifest.component_digests)
    assert inputs.snapshot() == dict(inputs.manifest.component_digests)
    assert repr(inputs) == "SessionInputs(cases=2)"
    assert inputs.policy.epoch_digest == inputs.holdout.commitment_digest
    with pytest.raises(TypeError):
        copy.copy(inputs)


def _write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text, encoding="utf-8")
    return name


def _at(document: dict[str, Any], dotted: str, value: object) -> None:
    """Set the member at a dotted configuration path (``holdout.manifests.label``)."""
    *parents, last = dotted.split(".")
    for name in parents:
        document = document[name]
    document[last] = value


def _points(dotted: str, name: str, content: object) -> Callable[[Path, dict[str, Any]], None]:
    """Write ``content`` (bytes, or a JSON value, or text when a ``str``) and point at it."""

    def change(folder: Path, document: dict[str, Any]) -> None:
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            _write(folder, name, content if isinstance(content, str) else json.dumps(content))
        _at(document, dotted, name)

    return change


def _edited(source: str, edit: dict[str, Any]) -> Callable[[Path], dict[str, Any]]:
    def read(folder: Path) -> dict[str, Any]:
        return {**decode((folder / source).read_bytes()), **edit}

    return read


def _points_at_edited(
    dotted: str, name: str, source: str, **edit: Any
) -> Callable[[Path, dict[str, Any]], None]:
    """Point at a copy of a bundle file with ``edit`` applied to its members."""

    def change(folder: Path, document: dict[str, Any]) -> None:
        _points(dotted, name, _edited(source, edit)(folder))(folder, document)

    return change


def _cases_with(edit: Callable[[list[Any]], list[Any] | None]) -> Callable[[Path], list[Any]]:
    def read(folder: Path) -> list[Any]:
        cases = load_config_document(folder / "cases.yaml")
        edited = edit(cases)
        return cases if edited is None else edited

    return read


def _points_at_cases(
    name: str, edit: Callable[[list[Any]], list[Any] | None]
) -> Callable[[Path, dict[str, Any]], None]:
    """Point ``cases`` at a copy of the bundle's cases with ``edit`` applied."""
    return lambda folder, document: _points("cases", name, _cases_with(edit)(folder))(
        folder, document
    )


def _mkdir_named(dotted: str, name: str) -> Callable[[Path, dict[str, Any]], None]:
    def change(folder: Path, document: dict[str, Any]) -> None:
        (folder / name).mkdir()
        _at(document, dotted, name)

    return change


LOAD_REFUSALS = refusal_table(
    ("cases-missing", lambda f, d: _at(d, "cases", f"{CANARY}.yaml"), "cases: not_found"),
    ("cases-not-json", _points("cases", "c1.json", "["), "cases: invalid_document"),
    *rows_for(
        "cases: invalid_content",
        cases_missing_members=_points("cases", "c2.json", [{"case_ref": CANARY}]),
        cases_empty=_points("cases", "c3.json", []),
        cases_item_not_object=_points("cases", "c30.json", [CANARY]),
        cases_not_a_list=_points("cases", "c31.json", {"case_ref": CANARY}),
        cases_item_a_list=_points("cases", "c32.json", [[]]),
        cases_evidence_not_a_list=_points_at_cases(
            "c35.json", lambda cases: cases[0].update(source_evidence={CANARY: CANARY})
        ),
        cases_duplicate_ref=_points_at_cases("c4.json", lambda cases: [cases[0], cases[0]]),
    ),
    ("cases-a-folder", _mkdir_named("cases", "workflow.yaml"), "cases: not_regular_file"),
    (
        "manifest-invalid",
        _points("manifest", "m.json", {"schema_version": CANARY}),
        "manifest: invalid_content",
    ),
    (
        "candidate-manifest-mismatch",
        lambda f, d: _at(d, "candidate.manifests.evaluated", OTHER_DIGEST),
        "candidate.manifests: manifest_mismatch",
    ),
    (
        "holdout-commitment-edited",
        _points_at_edited(
            "holdout.commitment",
            "hc.json",
            "holdout/commitment.json",
            holdout_version="other-version",
        ),
        "holdout.commitment: invalid_content",
    ),
    (
        "holdout-label-not-digests",
        _points("holdout.manifests.label", "l.json", [CANARY]),
        "holdout.manifests.label: invalid_content",
    ),
    (
        "holdout-template-empty",
        _points("holdout.manifests.template", "t.json", []),
        "holdout.manifests.template: invalid_content",
    ),
    *rows_for(
        "providers.runner: import_failed",
        runner_module_missing=lambda f, d: _at(
            d, "providers.runner.entry_point", "sealeval_no_such_module_x:runner"
        ),
    ),
    (
        "scorer-name-missing",
        lambda f, d: _at(
            d, "providers.scorer.entry_point", "sealeval.session.demo_providers:no_such_name"
        ),
        "providers.scorer: import_failed",
    ),
    (
        "review-not-callable",
        lambda f, d: _at(
            d, "providers.review.entry_point", "sealeval.session.demo_providers:__all__"
        ),
        "providers.review: not_callable",
    ),
    *rows_for(
        "rubric: invalid_content",
        rubric_invalid=_points("rubric", "r.json", [{"criterion_ref": CANARY}]),
        rubric_empty=_points("rubric", "r2.json", []),
    ),
    (
        "key-missing",
        lambda f, d: _at(d, "randomization_key", f"{CANARY}.key"),
        "randomization_key: not_found",
    ),
    (
        "key-short",
        _points("randomization_key", "short.key", b"x" * 31),
        "randomization_key: too_short",
    ),
    (
        "key-over-1mib",
        _points("randomization_key", "big.key", b"x" * ((1 << 20) + 1)),
        "randomization_key: too_large",
    ),
    (
        "key-a-folder",
        lambda f, d: _at(d, "randomization_key", "holdout"),
        "randomization_key: not_regular_file",
    ),
    ("public-empty", _points("corpora.public", "p.json", []), "corpora.public: invalid_content"),
    (
        "shadow-blank",
        _points("corpora.shadow", "s.json", ["  "]),
        "corpora.shadow: invalid_content",
    ),
    (
        "canaries-not-text",
        _points("corpora.canaries", "k.json", [1]),
        "corpora.canaries: invalid_content",
    ),
    (
        "policy-other-epoch",
        _points_at_edited(
            "feedback.policy", "pol.json", "feedback-policy.json", epoch_digest=OTHER_DIGEST
        ),
        "feedback.policy: epoch_mismatch",
    ),
    (
        "policy-invalid",
        _points_at_edited(
            "feedback.policy",
            "pol2.json",
            "feedback-policy.json",
            epoch_digest=OTHER_DIGEST,
            rerun_limit=-1,
        ),
        "feedback.policy: invalid_content",
    ),
)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the demo bundle for the load refusals (each writes its own file names)."""
    return copy_bundle(tmp_path_factory.mktemp("load") / CANARY)


@pytest.mark.parametrize(("change", "message"), LOAD_REFUSALS)
def test_load_refusal(
    bundle: Path, change: Callable[[Path, dict[str, Any]], None], message: str
) -> None:
    document = base_document()
    change(bundle, document)
    _refused(bundle, document, message)


# ---------------------------------------------------------------------------
# Clock


def test_clock() -> None:
    fixed = session_clock({CLOCK_ENVIRONMENT_VARIABLE: "1000"})
    assert (fixed(), fixed()) == (1000, 1000)
    assert session_clock({CLOCK_ENVIRONMENT_VARIABLE: str(2**63 - 1)})() == 2**63 - 1
    assert session_clock({CLOCK_ENVIRONMENT_VARIABLE: "0"})() == 0
    wall = session_clock({})()
    assert type(wall) is int
    assert wall > 1_600_000_000
    for text in ("-1", "01", "1.5", "", " 1", CANARY, str(2**63), "9" * 40):
        with pytest.raises(SessionConfigError) as caught:
            session_clock({CLOCK_ENVIRONMENT_VARIABLE: text})
        assert str(caught.value) == "clock: invalid_clock"


# ---------------------------------------------------------------------------
# The ledger usage file


def _clock() -> int:
    return 1000


def test_usage_file_refusals(tmp_path: Path) -> None:
    folder = copy_bundle(tmp_path / CANARY)
    d = base_document()
    d["feedback"]["ledger_usage"] = f"{CANARY}-missing/usage.json"
    with (
        pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: unwritable$"),
        open_session(write_config(folder, d), clock=_clock),
    ):
        pass
    assert not (folder / "sessions.sqlite3").exists()

    d = base_document()
    d["feedback"]["ledger_usage"] = "holdout"
    with (
        pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: not_regular_file$"),
        open_session(write_config(folder, d), clock=_clock),
    ):
        pass

    d = base_document()
    d["feedback"]["ledger_usage"] = _write(folder, "bad-usage.json", json.dumps({CANARY: 1}))
    with (
        pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: invalid_content$"),
        open_session(write_config(folder, d), clock=_clock),
    ):
        pass

    # Usage its policy could never produce (3 attempts with a limit of 2).
    config, base = read_session_config(folder / "attempt-1.yaml")
    inputs = load_session_inputs(config, base)
    impossible = LedgerUsage(
        entries={
            (inputs.policy.epoch_digest, inputs.manifest.manifest_digest): SubmissionUsage(
                detailed_feedback_used=1, official_attempts=3, scored_attempts=3
            )
        }
    )
    (folder / "ledger-usage.json").write_text(impossible.to_json(), encoding="ascii")
    with (
        pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: invalid_content$"),
        open_session(folder / "attempt-1.yaml", clock=_clock),
    ):
        pass
    assert not (folder / "sessions.sqlite3").exists()


def test_usage_file_is_locked_while_a_session_is_open(tmp_path: Path) -> None:
    folder = copy_bundle(tmp_path / "bundle")
    lock = os.open(folder / "ledger-usage.json.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with (
            pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: locked$"),
            open_session(folder / "attempt-1.yaml", clock=_clock),
        ):
            pass
    finally:
        os.close(lock)
    with open_session(folder / "attempt-1.yaml", clock=_clock) as opened:
        assert repr(opened) == "OpenedSession()"
        assert repr(opened.ledger) == "PersistedLedger()"
        with (
            pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: locked$"),
            open_session(folder / "attempt-2.yaml", clock=_clock),
        ):
            pass
    # Created on first use, empty.
    assert decode((folder / "ledger-usage.json").read_bytes())["entries"] == []


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_usage_lock_file_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    folder = copy_bundle(tmp_path / "bundle")
    lock = folder / "ledger-usage.json.lock"
    elsewhere = tmp_path / "elsewhere"
    if kind == "symlink":
        lock.symlink_to(elsewhere)  # never followed, never created through
    else:
        os.mkfifo(lock)  # refused without blocking (sealeval._fs.open_lock_file)
    with (
        pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: unwritable$"),
        open_session(folder / "attempt-1.yaml", clock=_clock),
    ):
        pass
    assert not elsewhere.exists()
    assert not (folder / "sessions.sqlite3").exists()


def test_usage_of_other_epochs_is_kept(tmp_path: Path) -> None:
    folder = copy_bundle(tmp_path / "bundle")
    other = LedgerUsage(
        entries={
            (OTHER_DIGEST, OTHER_DIGEST): SubmissionUsage(official_attempts=1, scored_attempts=1)
        }
    )
    (folder / "ledger-usage.json").write_text(other.to_json(), encoding="ascii")
    with open_session(folder / "attempt-1.yaml", clock=_clock) as opened:
        feedback = opened.session.run()
    assert feedback.decision.feedback_level == "detailed"
    stored = LedgerUsage.from_json((folder / "ledger-usage.json").read_bytes())
    assert len(stored.entries) == 2
    assert (
        stored.entries[(OTHER_DIGEST, OTHER_DIGEST)] == other.entries[(OTHER_DIGEST, OTHER_DIGEST)]
    )
    assert encode_openmed(stored.to_dict()) == (folder / "ledger-usage.json").read_text()


def test_file_reads_fail_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "key"
    target.write_bytes(b"k" * 40)

    def broken(*_args: object, **_kwargs: object) -> Any:
        raise PermissionError(CANARY)

    with monkeypatch.context() as patch:
        patch.setattr(os, "read", broken)
        with pytest.raises(SessionConfigError, match=r"^randomization_key: unreadable$"):
            config_module._read_bytes(target, "randomization_key", 100)
    with monkeypatch.context() as patch:
        patch.setattr(os, "open", broken)
        with pytest.raises(SessionConfigError, match=r"^randomization_key: unreadable$"):
            config_module._read_bytes(target, "randomization_key", 100)
    usage_file = config_module.LedgerUsageFile(tmp_path / "missing" / "usage.json")
    with pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: unwritable$"):
        usage_file.write(LedgerUsage())
    assert not list(tmp_path.glob("**/*.tmp"))
    # A destination that cannot be replaced (a non-empty folder) leaves no temporary file.
    (tmp_path / "folder" / "inner").mkdir(parents=True)
    usage_file = config_module.LedgerUsageFile(tmp_path / "folder")
    with pytest.raises(SessionConfigError, match=r"^feedback.ledger_usage: unwritable$"):
        usage_file.write(LedgerUsage())
    assert not list(tmp_path.glob(".*.tmp"))


def test_cases_need_an_evidence_list(tmp_path: Path) -> None:
    folder = copy_bundle(tmp_path / "bundle")
    cases = load_config_document(folder / "cases.yaml")
    cases[0]["source_evidence"] = cases[0]["source_evidence"][0]
    d = base_document()
    d["cases"] = _write(folder, "c.json", json.dumps(cases))
    _refused(folder, d, "cases: invalid_content")


def test_demo_providers_are_deterministic() -> None:
    evidence = (
        SourceEvidence(evidence_ref="n1", content="SYNTHETIC finding-b and finding-a"),
        SourceEvidence(evidence_ref="n2", content="SYNTHETIC nothing here"),
    )
    output = demo_providers.runner(evidence)
    assert output == "SYNTHETIC summary. n1: finding-a finding-b; n2: no findings"
    case = ComparisonCase(
        case_ref="c", source_evidence=evidence, candidate_outputs={"a": "x", "b": "y"}
    )
    assert demo_providers.scorer(case, output) == 0.0
    assert demo_providers.review(()) is None
    with pytest.raises(TypeError):
        demo_providers.review((object(),))  # type: ignore[arg-type]
