"""One home for each job: the generated job table is current and each job's work stays home.

``scripts/dev/architecture_tree.py`` holds the job list (``JOBS``) that
``docs/architecture.md`` shows as "Where each job lives". Each job names the
marks of its work (a call such as ``os.open``, an import such as
``import:fcntl``, a method such as ``.rollback``); a module outside the job's
homes that uses one is a copy of the job, unless ``ALLOWED`` lists it with its
reason. ``ALLOWED`` may only shrink: an entry no longer needed fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

import sealeval
from support.scripts import load_script
from support.vectors import PROJECT_ROOT

PACKAGE = Path(sealeval.__file__).resolve().parent
SCRIPT = PROJECT_ROOT / "scripts" / "dev" / "architecture_tree.py"
ARCHITECTURE = PROJECT_ROOT / "docs" / "architecture.md"


@pytest.fixture(scope="module")
def tree() -> ModuleType:
    return load_script("architecture_tree", SCRIPT)


def test_the_architecture_page_is_generated(tree: ModuleType) -> None:
    assert tree.main(["--check", str(ARCHITECTURE)]) == 0, (
        "docs/architecture.md drifted: python scripts/dev/architecture_tree.py --write "
        "docs/architecture.md"
    )
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert tree.render_jobs() in text
    assert tree.render() in text


def test_every_job_names_homes_that_exist(tree: ModuleType) -> None:
    assert len(tree.JOBS) >= 10
    for job in tree.JOBS:
        assert job.homes, job.name
        for home in job.homes:
            path = PACKAGE / home
            assert path.is_dir() if home.endswith("/") else path.is_file(), home
    names = [job.name for job in tree.JOBS]
    assert len(names) == len(set(names))
    marks = [mark for job in tree.JOBS for mark in job.marks]
    assert len(marks) == len(set(marks)), "a mark belongs to one job"


def test_the_newcomer_jobs_are_all_named(tree: ModuleType) -> None:
    named = " ".join(job.name.lower() for job in tree.JOBS)
    for job in (
        "no-follow open",
        "bounded stable reads",
        "closed objects",
        "canonical bytes",
        "errors",
        "locks",
        "transaction",
        "progress",
        "ed25519",
        "yaml",
        "unicode",
    ):
        assert job in named, job


def test_marks_are_found_in_code_not_in_text(tree: ModuleType) -> None:
    code = ast.parse(
        '"""os.open in a docstring is no use."""\n'
        "import fcntl\n"
        "from yaml import safe_load\n"
        "fd = os.open(path, flags)\n"
        "connection.rollback()\n"
        "# json.loads in a comment is no use\n"
    )
    found = set(tree.marks_in(code))
    assert {"import:fcntl", "import:yaml", "os.open", ".rollback"} <= found
    assert "json.loads" not in found


def test_json_encoding_and_decoding_have_one_home(tree: ModuleType) -> None:
    code = ast.parse(
        "import json\n"
        "from json import dumps\n"
        "text = json.dumps(value)\n"
        "json.dump(value, handle)\n"
        "encoder = json.JSONEncoder(sort_keys=True)\n"
        "quote = json.encoder.encode_basestring\n"
        "make = json.encoder.c_make_encoder\n"
        "value = json.loads(text)\n"
    )
    (job,) = [job for job in tree.JOBS if "json.loads" in job.marks]
    assert job.homes == ("canonical.py",)
    found = set(tree.marks_in(code)) & set(job.marks)
    assert found == {
        "import:json",
        "json.dumps",
        "json.dump",
        "json.JSONEncoder",
        ".encode_basestring",
        ".c_make_encoder",
        "json.loads",
    }


def test_each_job_stays_in_its_home(tree: ModuleType) -> None:
    foreign = tree.foreign_marks()
    unlisted = {
        mark: sorted(set(modules) - set(tree.ALLOWED.get(mark, {})))
        for mark, modules in foreign.items()
    }
    unlisted = {mark: modules for mark, modules in unlisted.items() if modules}
    assert unlisted == {}, (
        "these modules repeat a job outside its home (docs/architecture.md, 'Where each "
        "job lives'): call the home instead"
    )


def test_the_allowance_only_shrinks(tree: ModuleType) -> None:
    foreign = tree.foreign_marks()
    marks = {mark for job in tree.JOBS for mark in job.marks}
    stale = {
        mark: sorted(set(modules) - set(foreign.get(mark, {})))
        for mark, modules in tree.ALLOWED.items()
    }
    stale = {mark: modules for mark, modules in stale.items() if modules}
    assert stale == {}, "these modules no longer need their ALLOWED entry: drop it"
    assert set(tree.ALLOWED) <= marks
    for modules in tree.ALLOWED.values():
        assert all(reason.strip() for reason in modules.values())
