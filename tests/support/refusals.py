"""The canary and the one refusal check of the suite.

A refusal is a :class:`~sealeval.errors.SealevalError` carrying a closed code
(and, where the rule is about one field, that field). Whatever the input was,
the error's ``str`` and ``repr`` never carry it: tests feed :data:`CANARY` (or
any string holding the marker ``CANARY``) and :func:`assert_refused` checks
that none of it comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from sealeval.errors import SealevalError

__all__ = ["CANARY", "CANARY_MARKER", "assert_refused"]

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
