"""Service identities and their refusal table.

Moved out of ``test_captured_service_identity.py`` so that no test module imports another."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from sealeval.canonical import digest_invarlock
from sealeval.captured import (
    Harness,
    ObservationWindow,
    ServiceIdentity,
    evaluated_subject_digest,
    validate_service_identity,
)
from support.digests import ARTIFACT
from support.refusals import rows_for
from support.vectors import load


def valid_identity(**changes: Any) -> dict[str, Any]:
    """Return a fresh copy of the vector set's valid descriptor, with changes applied."""
    case = next(c for c in load("invarlock/service_identity.json")["cases"] if c["name"] == "valid")
    identity: dict[str, Any] = copy.deepcopy(case["input"]["service_identity"])
    for key, value in changes.items():
        if value is _DROP:
            del identity[key]
        else:
            identity[key] = value
    return identity


_DROP = object()


def _with_configuration(configuration: Any) -> dict[str, Any]:
    return valid_identity(
        configuration=configuration, configuration_digest=digest_invarlock(configuration)
    )


def _window(started_at: Any, ended_at: Any = "2025-03-01T11:00:00Z") -> dict[str, Any]:
    return valid_identity(observation_window={"started_at": started_at, "ended_at": ended_at})


IDENTITY_REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    ("not-object", lambda: validate_service_identity("hosted"), "invalid_type"),
    (
        "unknown-member",
        lambda: validate_service_identity(valid_identity(region="eu")),
        "unknown_field",
    ),
    (
        "missing-member",
        lambda: validate_service_identity(valid_identity(harness=_DROP)),
        "missing_field",
    ),
    (
        "kind",
        lambda: validate_service_identity(valid_identity(kind="artifact")),
        "invalid_constant",
    ),
    *rows_for(
        "invalid_text",
        provider_blank=lambda: validate_service_identity(valid_identity(provider="\u00a0 ")),
        provider_513=lambda: validate_service_identity(valid_identity(provider="p" * 513)),
        provider_empty=lambda: validate_service_identity(valid_identity(provider="")),
        provider_del=lambda: validate_service_identity(valid_identity(provider="a\x7f")),
    ),
    (
        "provider-number",
        lambda: validate_service_identity(valid_identity(provider=1)),
        "invalid_type",
    ),
    (
        "observed-model-empty",
        lambda: validate_service_identity(valid_identity(observed_model="")),
        "invalid_text",
    ),
    (
        "configuration-list",
        lambda: validate_service_identity(valid_identity(configuration=[])),
        "invalid_type",
    ),
    (
        "configuration-101",
        lambda: validate_service_identity(_with_configuration({f"k{i}": i for i in range(101)})),
        "too_many_members",
    ),
    (
        "configuration-nan",
        lambda: validate_service_identity(valid_identity(configuration={"t": math.nan})),
        "invalid_json_value",
    ),
    (
        "configuration-digest-uppercase",
        lambda: validate_service_identity(
            valid_identity(configuration_digest=valid_identity()["configuration_digest"].upper())
        ),
        "invalid_digest",
    ),
    (
        "configuration-digest-mismatch",
        lambda: validate_service_identity(valid_identity(configuration={"temperature": 1.0})),
        "configuration_digest_mismatch",
    ),
    ("harness-list", lambda: validate_service_identity(valid_identity(harness=[])), "invalid_type"),
    (
        "harness-extra",
        lambda: validate_service_identity(
            valid_identity(harness={**valid_identity()["harness"], "x": "y"})
        ),
        "unknown_field",
    ),
    (
        "harness-digest",
        lambda: validate_service_identity(
            valid_identity(harness={**valid_identity()["harness"], "source_digest": "sha256:"})
        ),
        "invalid_digest",
    ),
    (
        "window-list",
        lambda: validate_service_identity(valid_identity(observation_window=[])),
        "invalid_type",
    ),
    (
        "window-missing-end",
        lambda: validate_service_identity(
            valid_identity(observation_window={"started_at": "2025-03-01T10:00:00Z"})
        ),
        "missing_field",
    ),
    ("timestamp-number", lambda: validate_service_identity(_window(20250301)), "invalid_type"),
    *rows_for(
        "invalid_timestamp",
        timestamp_offset=lambda: validate_service_identity(_window("2025-03-01T10:00:00+00:00")),
        timestamp_7_digits=lambda: validate_service_identity(
            _window("2025-03-01T10:00:00.1234567Z")
        ),
        timestamp_trailing_dot=lambda: validate_service_identity(_window("2025-03-01T10:00:00.Z")),
        timestamp_feb_30=lambda: validate_service_identity(_window("2025-02-30T10:00:00Z")),
        timestamp_leap_second=lambda: validate_service_identity(_window("2025-06-30T23:59:60Z")),
        timestamp_hour_24=lambda: validate_service_identity(_window("2025-03-01T24:00:00Z")),
        timestamp_year_0=lambda: validate_service_identity(_window("0000-01-01T00:00:00Z")),
        timestamp_non_ascii_digits=lambda: validate_service_identity(
            _window("\u0662\u0660\u0662\u0665-03-01T10:00:00Z")
        ),
        timestamp_newline=lambda: validate_service_identity(_window("2025-03-01T10:00:00Z\n")),
    ),
    (
        "window-reversed",
        lambda: validate_service_identity(
            _window("2025-03-01T10:00:00.000001Z", "2025-03-01T10:00:00Z")
        ),
        "reversed_window",
    ),
    (
        "over-1-mib",
        lambda: validate_service_identity(_with_configuration({"blob": "x" * 1_048_576})),
        "too_large",
    ),
    (
        "window-direct-reversed",
        lambda: ObservationWindow("2025-03-02T00:00:00Z", "2025-03-01T00:00:00Z"),
        "reversed_window",
    ),
    (
        "harness-direct",
        lambda: Harness(name=" ", version="1", source_digest=ARTIFACT),
        "invalid_text",
    ),
    (
        "subject-without-either",
        lambda: evaluated_subject_digest(
            type("Bare", (), {"artifact_digest": None, "service_identity": None})()
        ),
        "artifact_digest_required",
    ),
    (
        "create-configuration-list",
        lambda: ServiceIdentity.create(**{**_create_arguments(), "configuration": []}),
        "invalid_type",
    ),
]


def _create_arguments() -> dict[str, Any]:
    identity = valid_identity()
    del identity["kind"], identity["configuration_digest"]
    return identity
