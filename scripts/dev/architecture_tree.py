"""Generate the two tables of ``docs/architecture.md``: who owns which job, and every module.

``docs/architecture.md`` keeps two generated sections:

* between ``<!-- jobs:start -->`` and ``<!-- jobs:end -->``, the table of
  cross-cutting jobs and their one home, rendered from :data:`JOBS`;
* between ``<!-- tree:start -->`` and ``<!-- tree:end -->``, the module tree
  of ``src/sealeval`` with each module's first docstring line.

Regenerate both after adding, moving or renaming a module or a job::

    python scripts/dev/architecture_tree.py --write docs/architecture.md

Without ``--write`` both sections are printed. ``--check FILE`` exits 1 when a
section in FILE differs. Every path is relative to ``src/sealeval``
(``captured/run/reader.py``; packages end in ``/`` and show their face's
docstring), the form ``tests/test_architecture.py`` looks for.

Each job also names the *marks* of its work -- a call (``os.open``), an
imported module (``import:fcntl``) or a method (``.rollback``) -- that only its
homes may use. :func:`foreign_marks` finds every use elsewhere;
``tests/test_job_homes.py`` fails on any that :data:`ALLOWED` does not
list with its reason (a list that may only shrink). The script only reads
files (``ast``); it imports nothing from the package.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "sealeval"
START = "<!-- tree:start -->"
END = "<!-- tree:end -->"
JOBS_START = "<!-- jobs:start -->"
JOBS_END = "<!-- jobs:end -->"


@dataclass(frozen=True)
class Job:
    """One cross-cutting job: its one home (paths below ``src/sealeval``) and its marks."""

    name: str
    homes: tuple[str, ...]
    notes: str
    marks: tuple[str, ...] = ()


#: Every cross-cutting job and its one home. A newcomer looks here first; a
#: change to a job changes its home (and the home's tests), never a copy.
JOBS: tuple[Job, ...] = (
    Job(
        "Opening, reading, walking and publishing named files: no-follow open, regular-file "
        "check, bounded stable reads, lock files, append files, the null device, directory "
        "chains and listings, new directories, directory fsync, exclusive atomic publish, "
        "safe destinations",
        ("_fs/",),
        "parts `_fs/_read.py`, `_fs/_walk.py`, `_fs/_write.py`, `_fs/_pipe.py`, flags and "
        "limits in `_fs/_base.py`; callers turn `FileSystemError` into their family's codes "
        "with `translated()`; `_io.py` maps it to `OutputError`; the adversarial suite's "
        "probe appends with `open_append`, the PostgreSQL store points inherited sockets at "
        "the null device with `point_at_null`; [security.md](security.md)",
        ("os.open", "os.fsync", "os.mkdir", "os.replace", "os.rename", "os.link", "os.listdir"),
    ),
    Job(
        "Closed objects (exact keys, unknown and missing fields), bounded open objects, "
        "digests, text fields, JSON values, read-only JSON copies, a JSON document or object "
        "decoded with the caller's error and codes",
        ("_validate.py",),
        "takes the caller's error class (and codes) as parameters; an unpaired surrogate "
        "in a text field is `invalid_json_value`",
    ),
    Job(
        "Canonical bytes (openmed and invarlock profiles), digests, the strict bounded JSON "
        "decoder (`lax=True` for readers that refuse non-finite numbers later), the decoders "
        "of evaluator exports (bare `NaN`) and of spans read by position",
        ("canonical.py",),
        "the only encoder and decoder of JSON input: the importers take "
        "`EVALUATOR_DECODER`, `scan_strict`, `scan_raw` and `EVALUATOR_CODES`, the "
        "streamed run reader `scan_raw`; [canonical.md](canonical.md)",
        ("json.loads", "json.load", "json.JSONDecoder", ".raw_decode", ".scan_once"),
    ),
    Job(
        "Strict YAML (JSON data only, limits on the event stream)",
        ("strict_yaml.py",),
        "configuration documents and authored requests",
        ("import:yaml",),
    ),
    Job(
        "Errors: the base, the family bases and the shared codes",
        ("errors.py",),
        "`SealevalError` → `ManifestError`, `SessionError`, `GateError` "
        "(`gates/registry.py`), `CapturedError`; [errors.md](errors.md)",
    ),
    Job(
        "Descriptor controls (fcntl / msvcrt): exclusive file locks, a pipe's buffer size",
        ("_lock.py", "_fs/_pipe.py"),
        "lock files are opened by `_fs.open_lock_file`; lock users: `session/config.py` (the "
        "ledger usage file), `captured/staging.py` (pack staging); `_fs.widen_pipe` "
        "(Linux `F_SETPIPE_SZ`, nothing elsewhere) widens the parallel importer's worker pipe",
        ("import:fcntl", "import:msvcrt"),
    ),
    Job(
        "Commit or roll back a DB-API transaction (a failed rollback is its own error), "
        "and the one rollback",
        ("_transaction.py",),
        "SQLite session transactions (`session/transaction.py`) and the OMOP loader "
        "(`gates/omop/load.py`) use `transaction`; the PostgreSQL store's retry loop "
        "(`session/postgres_store.py`) uses `roll_back`, then classifies the failure",
        (".rollback",),
    ),
    Job(
        "Session-store transactions and connections (SQLite and PostgreSQL)",
        ("session/transaction.py", "session/postgres_store.py"),
        "used by `session/store.py` and `session/durable_ledger.py`; builds on `_transaction.py`",
        ("sqlite3.connect",),
    ),
    Job(
        "Feedback-budget ledger: one `record_official_attempt`",
        ("session/budget/core.py",),
        "in memory `session/budget/ledger.py`, durable `session/durable_ledger.py`",
    ),
    Job(
        "Pinned Unicode data (14.0.0, 15.0.0) and UAX #15 normalization",
        ("_unicode.py",),
        "scorers (`captured/unicode_tables.py`), `session/forensics.py`, adversarial "
        "detection (`gates/adversarial/detection.py`) and the CLI's escaping of user text "
        "use it, never the interpreter's `unicodedata` version",
        ("import:unicodedata",),
    ),
    Job(
        "Ed25519 keys: bounded key files, PEM parsing, Ed25519 type checks, refusals "
        "mapped onto the caller's codes",
        ("_keys.py",),
        "used by `captured/signing.py` (evidence packs, receipts, signature envelopes) and "
        "`gates/candidate/keys.py` (openmed's packet signature), with `gates/runner.py` "
        "reading every candidate-runner key file (HMAC, Ed25519 private and public); each "
        "keeps its own fingerprint format and codes",
        (".load_pem_private_key", ".load_pem_public_key"),
    ),
    Job(
        "Pack staging folders: ownership locks and stale-folder removal",
        ("captured/staging.py",),
        "`captured/pack.py` publishes through it; the per-task importer stages there too",
    ),
    Job(
        "Progress of long work (a transient bar on a terminal, silent otherwise) and the "
        "planned-draws announcement",
        ("_progress.py",),
        "library functions take an optional `progress` callback",
    ),
    Job(
        "Command-line plumbing: exit codes, error routing, canonical output, escaping "
        "user text for a terminal",
        ("cli/_common.py",),
        "every `cli/*.py` is thin: parse, call the library, print; [cli.md](cli.md)",
    ),
    Job(
        "Remedy lines under size-cap and work-budget refusals",
        ("cli/_remedies.py",),
        "`compare`, `evaluate`, `verify`, `report`",
    ),
)

#: Uses of a job's marks outside its homes, by mark and module, each with its
#: reason. Entries may only go: a fixed module drops its entry (a test checks
#: every entry is still needed).
ALLOWED: dict[str, dict[str, str]] = {}


def first_line(path: Path) -> str:
    """Return the first line of the module docstring of ``path`` (or a marker)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not docstring:
        return "(no docstring)"
    return docstring.strip().splitlines()[0].strip()


def _entries(directory: Path) -> list[Path]:
    children = [
        child
        for child in directory.iterdir()
        if (child.suffix == ".py" and child.name != "__init__.py")
        or (child.is_dir() and (child / "__init__.py").is_file())
    ]
    return sorted(children, key=lambda child: (child.is_dir(), child.name))


def tree_lines(directory: Path = PACKAGE, depth: int = 0) -> list[str]:
    """Return the Markdown list of ``directory``'s modules and packages, recursively."""
    lines: list[str] = []
    for child in _entries(directory):
        relative = child.relative_to(PACKAGE).as_posix()
        indent = "  " * depth
        if child.is_dir():
            lines.append(f"{indent}- `{relative}/`: {first_line(child / '__init__.py')}")
            lines += tree_lines(child, depth + 1)
        else:
            lines.append(f"{indent}- `{relative}`: {first_line(child)}")
    return lines


def render() -> str:
    """Return the generated section, markers included."""
    head = f"- `src/sealeval/` (`__init__.py`): {first_line(PACKAGE / '__init__.py')}"
    return "\n".join([START, head, *("  " + line for line in tree_lines()), END])


def render_jobs() -> str:
    """Return the generated jobs table, markers included."""
    rows = [
        "| Job | The one home | Notes |",
        "| --- | --- | --- |",
        *(
            f"| {job.name} | {', '.join(f'`{home}`' for home in job.homes)} | {job.notes} |"
            for job in JOBS
        ),
    ]
    return "\n".join([JOBS_START, *rows, JOBS_END])


def _in_home(relative: str, homes: tuple[str, ...]) -> bool:
    return any(
        relative.startswith(home) if home.endswith("/") else relative == home for home in homes
    )


def marks_in(tree: ast.AST) -> Iterator[str]:
    """Yield every mark a module's syntax tree uses (calls, imports, methods)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (f"import:{alias.name.split('.')[0]}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield f"import:{node.module.split('.')[0]}"
        elif isinstance(node, ast.Attribute):
            yield f".{node.attr}"
            if isinstance(node.value, ast.Name):
                yield f"{node.value.id}.{node.attr}"


def foreign_marks() -> dict[str, dict[str, int]]:
    """Return ``{mark: {module: uses}}`` for every job mark used outside the job's homes."""
    homes = {mark: job.homes for job in JOBS for mark in job.marks}
    found: dict[str, dict[str, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("_data/"):
            continue
        for mark in marks_in(ast.parse(path.read_text(encoding="utf-8"))):
            if mark in homes and not _in_home(relative, homes[mark]):
                uses = found.setdefault(mark, {})
                uses[relative] = uses.get(relative, 0) + 1
    return found


def _replace(text: str, section: str) -> str:
    start_marker, end_marker = (
        (JOBS_START, JOBS_END) if section.startswith(JOBS_START) else (START, END)
    )
    start, end = text.index(start_marker), text.index(end_marker) + len(end_marker)
    return text[:start] + section + text[end:]


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the tree section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="FILE", help="replace the section in FILE")
    group.add_argument("--check", type=Path, metavar="FILE", help="exit 1 on drift")
    arguments = parser.parse_args(argv)
    sections = (render_jobs(), render())
    if arguments.write is not None:
        text = arguments.write.read_text(encoding="utf-8")
        for section in sections:
            text = _replace(text, section)
        arguments.write.write_text(text, encoding="utf-8")
        return 0
    if arguments.check is not None:
        text = arguments.check.read_text(encoding="utf-8")
        if any(_replace(text, section) != text for section in sections):
            print(f"{arguments.check}: drifted; rerun with --write", file=sys.stderr)
            return 1
        return 0
    print("\n\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
