"""``sealeval._progress``: phase names and counts on a terminal, silence otherwise."""

from __future__ import annotations

import io

import pytest

from sealeval._progress import (
    PHASES,
    PLANNED_DRAWS,
    REFRESH_SECONDS,
    TerminalProgress,
    notify,
    phases_only,
    planned_draws_line,
    terminal_progress,
)
from support.refusals import CANARY


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_enabled_bar_shows_labels_and_counts_only() -> None:
    stream = io.StringIO()
    clock = _Clock()
    with terminal_progress(enabled=True, stream=stream, clock=clock) as progress:
        progress("pairing", 3, 7)
        progress(CANARY, 1, 2)  # not a phase: never shown
        progress("intervals", 2, 5)
    shown = stream.getvalue()
    assert PHASES["pairing"][0] in shown
    assert "3/7" in shown
    assert PHASES["intervals"][0] in shown
    assert "2/5" in shown
    assert CANARY not in shown


def test_redraws_are_rate_limited_by_the_injected_clock() -> None:
    stream = io.StringIO()
    clock = _Clock()
    reporter = TerminalProgress(enabled=True, stream=stream, clock=clock)
    reporter("scoring", 1, 9)
    drawn = len(stream.getvalue())
    reporter("scoring", 2, 9)  # same phase, no time passed: not redrawn
    assert len(stream.getvalue()) == drawn
    clock.now += REFRESH_SECONDS
    reporter("scoring", 3, 9)
    assert len(stream.getvalue()) > drawn
    assert "3/9" in stream.getvalue()
    reporter.close()


def test_disabled_reporter_is_silent_but_notes_and_announces() -> None:
    stream = io.StringIO()
    with terminal_progress(enabled=False, stream=stream, announce=True) as progress:
        progress("pairing", 3, 7)
        progress(PLANNED_DRAWS, 0, 100)  # binary metrics only: nothing to announce
        assert stream.getvalue() == ""
        progress(PLANNED_DRAWS, 4_096, -1)
        progress.note("next line")
    assert stream.getvalue().splitlines() == [
        planned_draws_line(4_096, -1),
        "next line",
    ]
    unlimited = "planned bootstrap draws: 4,096 (work budget: unlimited)"
    assert planned_draws_line(4_096, -1) == unlimited
    assert planned_draws_line(2_048, 10_000) == (
        "planned bootstrap draws: 2,048 (work budget: 10,000)"
    )


def test_not_a_terminal_means_no_bar() -> None:
    stream = io.StringIO()  # isatty() is False
    with terminal_progress(stream=stream) as progress:
        progress("pairing", 1, 1)
    assert stream.getvalue() == ""


def test_without_announce_the_plan_is_not_printed() -> None:
    stream = io.StringIO()
    with terminal_progress(enabled=True, stream=stream) as progress:
        progress(PLANNED_DRAWS, 4_096, 10)
    assert "planned" not in stream.getvalue()


def test_notify_and_phases_only() -> None:
    heard: list[tuple[str, int, int]] = []
    notify(None, "pairing", 1, 2)  # no callback: nothing happens
    notify(lambda *event: heard.append(event), "pairing", 1, 2)
    assert heard == [("pairing", 1, 2)]
    assert phases_only(None) is None
    filtered = phases_only(lambda *event: heard.append(event))
    assert filtered is not None
    filtered(PLANNED_DRAWS, 10, 20)
    filtered("intervals", 0, 3)
    assert heard == [("pairing", 1, 2), ("intervals", 0, 3)]


@pytest.mark.parametrize("phase", sorted(PHASES))
def test_every_phase_has_a_label_and_a_unit(phase: str) -> None:
    label, unit = PHASES[phase]
    assert label
    assert unit
    assert phase != PLANNED_DRAWS
