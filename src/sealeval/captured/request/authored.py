"""The authored request: :class:`SourceSpec`, :class:`AuthoredRequest`, strict YAML loading.

:func:`load_authored_request` reads the YAML (or JSON) with the strict YAML
loader and validates the closed authored schema; :func:`parse_authored_request`
does the schema part for an already parsed value. No file is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sealeval._validate import thaw_json
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.likelihood import Source
from sealeval.captured.request.schema import (
    REQUEST_YAML_LIMITS,
    CapturedRequestError,
    check_authored,
    check_reference,
    control_exempt,
    freeze_request,
)
from sealeval.captured.run import (
    InputProjection,
)
from sealeval.errors import YamlError
from sealeval.strict_yaml import INCLUDE_KEYS, load_strict_yaml

# ---------------------------------------------------------------------------
# Authored request


@dataclass(frozen=True, slots=True, repr=False)
class SourceSpec:
    """One side of an authored request (``comparison.baseline`` or ``comparison.subject``).

    Attributes:
        side: ``"baseline"`` or ``"subject"``.
        document: the side exactly as authored (read-only), ``path`` included.
    """

    side: str
    document: Mapping[str, Any]

    def __repr__(self) -> str:
        """Show the side and adapter only."""
        return f"SourceSpec(side={self.side!r}, adapter={self.adapter!r})"

    @property
    def path(self) -> str:
        """The reference of the run file."""
        return str(self.document["path"])

    @property
    def adapter(self) -> str:
        """The ``load_run`` adapter name."""
        return str(self.document["adapter"])

    def declares(self, member: str) -> bool:
        """Whether the side declares ``member`` (``artifact_digest: null`` counts)."""
        return member in self.document

    @property
    def source(self) -> Source | None:
        """The declared evaluator ``{name, version}``, or ``None``."""
        value = self.document.get("source")
        return None if value is None else Source(value["name"], value["version"])

    @property
    def run_id(self) -> str | None:
        """The declared run id, or ``None``."""
        value = self.document.get("run_id")
        return None if value is None else str(value)

    @property
    def artifact_digest(self) -> str | None:
        """The declared artifact digest (``None`` when absent or hosted)."""
        value = self.document.get("artifact_digest")
        return None if value is None else str(value)

    @property
    def score_provenance(self) -> Mapping[str, Any] | None:
        """The declared score provenance (read-only), or ``None``."""
        value = self.document.get("score_provenance")
        return None if value is None else value

    @property
    def service_identity(self) -> Mapping[str, Any] | None:
        """The declared hosted descriptor (read-only), or ``None``."""
        value = self.document.get("service_identity")
        return None if value is None else value

    @property
    def input_projection(self) -> InputProjection | None:
        """The declared input projection, or ``None``."""
        value = self.document.get("input_projection")
        return None if value is None else InputProjection.from_document(value)

    @property
    def expected_run_digest(self) -> str | None:
        """The declared pin of the loaded run's digest, or ``None``."""
        value = self.document.get("expected_run_digest")
        return None if value is None else str(value)


@dataclass(frozen=True, slots=True, repr=False)
class AuthoredRequest:
    """A validated authored request (closed schema; files not yet touched).

    Construct with :func:`parse_authored_request` or :func:`load_authored_request`.

    Attributes:
        document: the request exactly as authored (read-only JSON value).
        baseline: the baseline side.
        subject: the subject side.
        policy: the reference of the policy file.
        output: the reference of the evidence destination.
        metric: the metric selector, or ``None``.
    """

    document: Mapping[str, Any]
    baseline: SourceSpec = field(init=False)
    subject: SourceSpec = field(init=False)
    policy: str = field(init=False)
    output: str = field(init=False)
    metric: str | None = field(init=False)

    def __post_init__(self) -> None:
        """Freeze and validate the document (structural service-identity checks only)."""
        if not isinstance(self.document, Mapping):
            raise CapturedRequestError("not_mapping", "request")
        try:
            document = freeze_request(self.document)
        except CapturedRunError as error:
            raise CapturedRequestError(error.code, "request") from None
        check_authored(document, full_identity=False)
        comparison = document["comparison"]
        object.__setattr__(self, "document", document)
        object.__setattr__(self, "baseline", SourceSpec("baseline", comparison["baseline"]))
        object.__setattr__(self, "subject", SourceSpec("subject", comparison["subject"]))
        object.__setattr__(self, "policy", comparison["policy"])
        object.__setattr__(self, "output", document["output"]["evidence"])
        object.__setattr__(self, "metric", comparison.get("metric"))

    def __repr__(self) -> str:
        """Show the adapters only."""
        return (
            f"AuthoredRequest(baseline={self.baseline.adapter!r}, subject={self.subject.adapter!r})"
        )

    def side(self, name: str) -> SourceSpec:
        """Return the ``"baseline"`` or ``"subject"`` side."""
        if name == "baseline":
            return self.baseline
        if name == "subject":
            return self.subject
        raise CapturedRequestError("invalid_type", "side")

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the document."""
        result: dict[str, Any] = thaw_json(self.document)
        return result

    def with_references(
        self,
        *,
        baseline_path: str | None = None,
        subject_path: str | None = None,
        policy: str | None = None,
        output: str | None = None,
    ) -> AuthoredRequest:
        """Return a copy with some references replaced (each re-checked as a reference)."""
        document = self.to_dict()
        comparison = document["comparison"]
        if baseline_path is not None:
            comparison["baseline"]["path"] = check_reference(
                baseline_path, "comparison.baseline.path"
            )
        if subject_path is not None:
            comparison["subject"]["path"] = check_reference(subject_path, "comparison.subject.path")
        if policy is not None:
            comparison["policy"] = check_reference(policy, "comparison.policy")
        if output is not None:
            document["output"]["evidence"] = check_reference(output, "output.evidence")
        return AuthoredRequest(document)


def parse_authored_request(document: object) -> AuthoredRequest:
    """Validate a parsed authored request (a JSON object) against the closed schema.

    Raises:
        CapturedRequestError: ``not_mapping``, ``invalid_json_value``,
            ``unsupported_format``, ``unknown_field``, ``missing_field``,
            ``invalid_type``, ``invalid_constant``, ``invalid_text``,
            ``invalid_reference``, ``invalid_digest``, ``invalid_projection``,
            ``invalid_pointer``, ``unknown_adapter``, ``unknown_metric``,
            ``too_many_members``, ``judge_required``, ``judge_forbidden``,
            ``judge_unsupported``, ``projection_forbidden``,
            ``artifact_digest_required``, ``artifact_digest_forbidden``,
            ``invalid_service_identity``.
    """
    return AuthoredRequest(document)  # type: ignore[arg-type]


def load_authored_request(data: bytes | bytearray | memoryview | str) -> AuthoredRequest:
    """Load an authored request from strict YAML (or JSON) text and validate it.

    Raises:
        CapturedRequestError: a strict-YAML code (``too_large``, ``not_utf8``,
            ``duplicate_key``, ``merge_key``, ``anchor_or_alias``,
            ``tag_or_directive``, ``too_many_nodes``, ``too_deep``,
            ``invalid_boolean`` … ``include_key``, ``not_mapping``; field
            ``request``) or a schema code (see :func:`parse_authored_request`).
    """
    try:
        value = load_strict_yaml(
            data,
            limits=REQUEST_YAML_LIMITS,
            require_mapping=True,
            forbidden_keys=INCLUDE_KEYS,
            forbidden_keys_exempt=control_exempt,
        )
    except YamlError as error:
        code = error.code if error.code in CapturedRequestError.codes else "invalid_yaml"
        raise CapturedRequestError(code, "request") from None
    except TypeError:
        raise CapturedRequestError("invalid_type", "request") from None
    return parse_authored_request(value)
