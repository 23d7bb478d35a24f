"""Spying on ``compare``'s whole-run paths: shared by the streamed compare tests."""

from __future__ import annotations

from typing import Any

import pytest

import sealeval.cli.compare as compare_module

#: What ``compare`` calls only when it holds whole runs in memory.
HELD_RUN_CALLS = ("read_run_file", "compare_runs", "scope_values")


def spy_held_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each call of :data:`HELD_RUN_CALLS` made by ``compare`` (the calls still run)."""
    calls: list[str] = []
    for name in HELD_RUN_CALLS:
        original = getattr(compare_module, name)

        def spied(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(compare_module, name, spied)
    return calls
