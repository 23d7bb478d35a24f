"""The canary and the one refusal check of the suite.

A refusal is a :class:`~sealeval.errors.SealevalError` carrying a closed code
(and, where the rule is about one field, that field). Whatever the input was,
the error's ``str`` and ``repr`` never carry it: tests feed :data:`CANARY` (or
any string holding the marker ``CANARY``) and :func:`assert_refused` checks
that none of it comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from sealeval.errors import SealevalError

__all__ = [
    "CANARY",
    "CANARY_MARKER",
    "assert_refused",
    "assert_refused_as",
    "codes_of",
    "refusal_table",
    "rows_for",
]

#: The marker every canary string of the suite carries.
CANARY_MARKER = "CANARY"
#: The suite's canary: a made-up patient name and record number.
CANARY = "PHI-CANARY-7f3a-jane-doe-MRN-0042"


def assert_refused(
    refusal: Callable[[], object] | pytest.ExceptionInfo[BaseException] | BaseException,
    code: str,
    field: str | None = None,
    *,
    canaries: Iterable[str] = (),
) -> SealevalError:
    """Assert a refusal with exactly ``code`` (and ``field``) that echoes no canary.

    ``refusal`` is a callable (called here, it must raise), a
    ``pytest.raises`` result, or the raised exception. ``field``, when given,
    must equal the error's ``field`` attribute. Neither ``str`` nor ``repr`` of
    the error may contain :data:`CANARY`, the marker ``CANARY`` or any of
    ``canaries``. Returns the error for further checks.
    """
    if isinstance(refusal, pytest.ExceptionInfo):
        error: BaseException = refusal.value
    elif isinstance(refusal, BaseException):
        error = refusal
    else:
        with pytest.raises(SealevalError) as raised:
            refusal()
        error = raised.value
    assert isinstance(error, SealevalError), f"not a SealevalError: {type(error).__name__}"
    assert error.code == code, f"code {error.code!r}, expected {code!r}"
    if field is not None:
        assert error.field == field, f"field {error.field!r}, expected {field!r}"
    for text in (str(error), repr(error)):
        for canary in (CANARY, CANARY_MARKER, *canaries):
            assert canary not in text, f"{type(error).__name__}({error.code}) echoes a canary"
    return error


def rows_for(expected: object, **variants: object) -> list[tuple[object, ...]]:
    """Return the table rows of one rule: every variant refused the same way.

    Each keyword becomes the row ``(id, variant, *expected)`` (``expected``
    unpacked when it is a tuple), its id the keyword with ``_`` written ``-``.
    A table is then a list of such groups and single rows, so a rule's bad
    inputs stand together under one stated expectation.
    """
    tail = expected if isinstance(expected, tuple) else (expected,)
    return [(name.replace("_", "-"), variant, *tail) for name, variant in variants.items()]


def refusal_table(*rows: tuple[Any, ...]) -> list[Any]:
    """Return one parametrized refusal table from rows ``(id, action, expected)``.

    ``expected`` is the error's exact message: ``"<field>: <code>"`` (or the
    bare code of an error without a field in its message). Each row becomes
    ``pytest.param(action, expected, id=id)``; ids must be unique.
    """
    ids = [row[0] for row in rows]
    assert len(set(ids)) == len(ids), "refusal table ids must be unique"
    return [pytest.param(action, expected, id=row_id) for row_id, action, expected in rows]


def codes_of(table: Sequence[Any]) -> set[str]:
    """Return the codes a :func:`refusal_table` exercises (for an every-code check)."""
    return {param.values[1].rpartition(": ")[2] for param in table}


def assert_refused_as(
    refusal: Callable[[], object] | pytest.ExceptionInfo[BaseException] | BaseException,
    expected: str,
    error: type[SealevalError],
) -> SealevalError:
    """Assert a refusal of class ``error`` whose message is exactly ``expected``.

    :func:`assert_refused` with the code and field taken from ``expected``
    (``"<field>: <code>"`` or a bare code); the code must be one the class
    declares and the error must carry no cause (nothing of the input chained).
    """
    field, _, code = expected.rpartition(": ")
    refused = assert_refused(refusal, code, field or None)
    assert isinstance(refused, error), f"{type(refused).__name__}, expected {error.__name__}"
    assert str(refused) == expected
    assert refused.code in error.codes
    assert refused.__cause__ is None
    return refused
