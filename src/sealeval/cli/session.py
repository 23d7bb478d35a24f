"""``sealeval session``: run an official attempt from a configuration; show a store.

``session run CONFIG`` loads a ``sealeval.session_config.v1`` document (see
:mod:`sealeval.session.config`), runs (or replays) every step of the
fail-closed session and prints the outcome the feedback budget allows.
``session show DB`` opens a SQLite session store read-only and prints its
content-free records and budget rows. Nothing submitted (texts, outputs,
identities, keys, paths) is ever printed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import click

from sealeval._progress import Progress, terminal_progress
from sealeval.canonical import encode_openmed, is_digest
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_NEGATIVE, EXIT_OK, refusals_exit
from sealeval.session.budget import FeedbackBudgetDecision, LedgerUsage
from sealeval.session.config import SessionConfigError, open_session, session_clock
from sealeval.session.record import TERMINAL_PHASES, EvaluationSessionError, SessionRecord
from sealeval.session.store_factory import is_postgres_location, read_session_store

__all__ = [
    "RUN_SCHEMA",
    "SHOW_SCHEMA",
    "AttemptOutcome",
    "BudgetRow",
    "StoreListing",
    "describe_listing",
    "describe_outcome",
    "read_store",
    "run_attempt",
    "session",
]

#: ``schema_version`` of the ``session run --json`` document.
RUN_SCHEMA: Final = "sealeval.session_run.v1"
#: ``schema_version`` of the ``session show --json`` document.
SHOW_SCHEMA: Final = "sealeval.session_show.v1"
_DENIED: Final = "rerun_budget_exhausted"


# ---------------------------------------------------------------------------
# session run


@dataclass(frozen=True, slots=True, repr=False)
class AttemptOutcome:
    """What one official attempt produced: the decision, and scores only if detailed."""

    session_key: str
    session_digest: str
    decision: FeedbackBudgetDecision
    per_case_scores: tuple[float, ...] | None

    def __repr__(self) -> str:
        """Show the feedback level only."""
        return f"AttemptOutcome(feedback_level={self.decision.feedback_level!r})"

    @property
    def released(self) -> bool:
        """Whether feedback was released (else the budget denied the attempt)."""
        return self.decision.accepted

    def to_dict(self) -> dict[str, Any]:
        """Return the ``sealeval.session_run.v1`` document."""
        scores = self.per_case_scores
        return {
            "decision": self.decision.to_dict(),
            "outcome": "released" if self.released else "budget_denied",
            "per_case_scores": None if scores is None else list(scores),
            "schema_version": RUN_SCHEMA,
            "session_digest": self.session_digest,
            "session_key": self.session_key,
        }


def run_attempt(
    config: str | os.PathLike[str],
    *,
    clock: Callable[[], int],
    store_override: str | None = None,
    progress: Progress | None = None,
) -> AttemptOutcome:
    """Run (or replay) one official attempt from a configuration file.

    ``progress`` (optional) hears the session's ``cases``, ``forensics`` and
    ``adjudication`` phases (counts only; :mod:`sealeval._progress`).

    Returns the outcome of a released attempt or of a budget denial
    (``rerun_budget_exhausted``, recorded as ``budget_denied``).

    Raises:
        SessionConfigError: a configuration, file or ledger usage refusal.
        EvaluationSessionError: any other session refusal.
    """
    with open_session(config, clock=clock, store_override=store_override) as opened:
        try:
            feedback = opened.session.run(progress=progress)
        except EvaluationSessionError as error:
            denial = opened.ledger.last_decision
            if error.code != _DENIED or denial is None or denial.accepted:
                raise
            return AttemptOutcome(
                session_key=opened.session.session_key,
                session_digest=opened.session.record.session_digest,
                decision=denial,
                per_case_scores=None,
            )
        return AttemptOutcome(
            session_key=opened.session.session_key,
            session_digest=feedback.session_digest,
            decision=feedback.decision,
            per_case_scores=feedback.per_case_scores,
        )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def describe_outcome(outcome: AttemptOutcome) -> list[str]:
    """Return the readable lines of an outcome (scores only for a detailed decision)."""
    decision = outcome.decision
    lines = [
        f"session key     {outcome.session_key}",
        f"session digest  {outcome.session_digest}",
    ]
    if not decision.accepted:
        lines.append(f"feedback        refused: {decision.reason_code}")
    elif decision.feedback_level == "detailed":
        lines.append(
            f"feedback        detailed (official attempt {decision.official_attempt_number})"
        )
        for index, score in enumerate(outcome.per_case_scores or (), 1):
            lines.append(f"  case {index}".ljust(16) + repr(score))
        lines.append("  mean".ljust(16) + repr(decision.detailed_score))
    elif decision.feedback_level == "coarse":
        lines.append(
            f"feedback        coarse: band {decision.coarse_band} "
            f"(official attempt {decision.official_attempt_number})"
        )
    else:  # pragma: no cover - a session always records a score, never a failure
        lines.append(f"feedback        {decision.feedback_level}")
    lines.append(
        "budget          "
        f"{_plural(decision.attempts_remaining, 'official attempt')} left, "
        f"{_plural(decision.detailed_feedback_remaining, 'detailed result')} left"
    )
    return lines


# ---------------------------------------------------------------------------
# session show


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """One budget row: its key, watermark, and whether a session holds its claim."""

    budget_key: str
    watermark: str
    claimed: bool

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {"budget_key": self.budget_key, "claimed": self.claimed, "watermark": self.watermark}


@dataclass(frozen=True, slots=True)
class StoreListing:
    """The content-free contents of a session store: records, budget rows, durable usage."""

    sessions: tuple[SessionRecord, ...]
    budgets: tuple[BudgetRow, ...]
    ledger_usage: LedgerUsage | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the ``sealeval.session_show.v1`` document."""
        return {
            "budgets": [row.to_dict() for row in self.budgets],
            "ledger_usage": None if self.ledger_usage is None else self.ledger_usage.to_dict(),
            "schema_version": SHOW_SCHEMA,
            "sessions": [record.to_dict() for record in self.sessions],
        }


def read_store(location: str | os.PathLike[str], *, session_key: str | None = None) -> StoreListing:
    """Read a session store (a SQLite file or a PostgreSQL DSN) without writing to it.

    A SQLite file is opened read-only (a missing file is refused, nothing is
    created); a PostgreSQL database must already hold the tables. The durable
    ledger's usage is included when the store holds one.

    Raises:
        SessionConfigError: ``db: not_found | not_regular_file``,
            ``session: invalid_digest | not_found``.
        EvaluationSessionError: ``store_failed`` (not a sealeval store,
            unreachable, unreadable), ``record_invalid`` (a stored record or
            row that does not parse strictly); never quoting the location.
    """
    if session_key is not None and not is_digest(session_key):
        raise SessionConfigError("invalid_digest", "session")
    text = os.fspath(location)
    if not is_postgres_location(text):
        source = Path(text).absolute()
        if not source.exists():
            raise SessionConfigError("not_found", "db")
        if not source.is_file():
            raise SessionConfigError("not_regular_file", "db")
        text = str(source)
    stored = read_session_store(text)
    sessions = stored.sessions
    if session_key is not None:
        sessions = tuple(record for record in sessions if record.session_key == session_key)
        if not sessions:
            raise SessionConfigError("not_found", "session")
    return StoreListing(
        sessions=sessions,
        budgets=tuple(
            BudgetRow(
                budget_key=row.budget_key, watermark=row.watermark, claimed=row.claim is not None
            )
            for row in stored.budgets
        ),
        ledger_usage=stored.ledger_usage,
    )


def describe_listing(listing: StoreListing) -> list[str]:
    """Return the readable lines of a listing: per session its steps, terminal phase and band."""
    lines = [_plural(len(listing.sessions), "session")]
    for record in listing.sessions:
        steps = record.steps
        terminal = steps[-1] if steps and steps[-1].phase in TERMINAL_PHASES else None
        lines.append(f"session {record.session_key}")
        lines.append(f"  digest    {record.session_digest}")
        lines.append("  steps     " + (" ".join(step.phase for step in steps) or "(none)"))
        if terminal is None:
            lines.append("  terminal  - (in progress)")
        else:
            band = "-" if terminal.band is None else str(terminal.band)
            lines.append(
                f"  terminal  {terminal.phase} (official attempts {terminal.count}, band {band})"
            )
    lines.append(_plural(len(listing.budgets), "budget"))
    for row in listing.budgets:
        lines.append(f"budget {row.budget_key}")
        lines.append(f"  claimed   {'yes' if row.claimed else 'no'}")
    if listing.ledger_usage is None:
        lines.append("budget usage: not in this store (in-memory ledger with a usage file)")
    else:
        usage = listing.ledger_usage.to_dict()
        lines.append("budget usage (durable ledger in this store):")
        lines.append("  " + encode_openmed(usage))
    return lines


# ---------------------------------------------------------------------------
# The click group


@click.group(context_settings=CONTEXT_SETTINGS)
def session() -> None:
    """Run fail-closed evaluation sessions and inspect their store."""


@session.command("run", context_settings=CONTEXT_SETTINGS)
@click.argument("config", metavar="CONFIG", type=click.Path(path_type=Path))
@click.option(
    "--store",
    "store",
    metavar="LOCATION",
    default=None,
    help="Session store to use instead of the configuration's: a SQLite file or a "
    "postgresql:// DSN (put the password in PGPASSWORD or ~/.pgpass, not here).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the canonical outcome document.")
@refusals_exit
def run_command(config: Path, store: str | None, as_json: bool) -> None:
    """Run (or resume) one official attempt from a session configuration.

    CONFIG is a sealeval.session_config.v1 document (JSON or YAML); every file it names
    is relative to its folder. Prints the per-case scores and the mean for a detailed
    decision, the band for a coarse one, plus the session digest and remaining budget.
    Without feedback.ledger_usage the budget is charged to the durable ledger kept in the
    store itself (required for a shared PostgreSQL store). Exit status: 0 feedback
    released, 1 refused by the budget (rerun_budget_exhausted), 2 usage, configuration or
    input error, or any other session refusal.
    """
    clock = session_clock(os.environ)
    with terminal_progress() as progress:
        outcome = run_attempt(config, clock=clock, store_override=store, progress=progress)
    if as_json:
        click.echo(encode_openmed(outcome.to_dict()))
    else:
        for line in describe_outcome(outcome):
            click.echo(line)
    raise click.exceptions.Exit(EXIT_OK if outcome.released else EXIT_NEGATIVE)


@session.command("show", context_settings=CONTEXT_SETTINGS)
# A plain string: a postgresql:// DSN must not be normalised like a path.
@click.argument("db", metavar="STORE")
@click.option("--session", "session_key", metavar="KEY", help="Show only this session key.")
@click.option("--json", "as_json", is_flag=True, help="Print the canonical listing document.")
@refusals_exit
def show_command(db: str, session_key: str | None, as_json: bool) -> None:
    """Show the content-free records, budget rows and durable budget usage of a store.

    STORE is a SQLite file (opened read-only) or a postgresql:// DSN (read in one snapshot;
    a SELECT-only role suffices). Exit status: 0 shown, 2 usage or input error.
    """
    listing = read_store(db, session_key=session_key)
    if as_json:
        click.echo(encode_openmed(listing.to_dict()))
    else:
        for line in describe_listing(listing):
            click.echo(line)
