"""Every refusal belongs to one family, so callers can catch what they handle."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import sealeval
from sealeval.attest import AttestationError
from sealeval.captured.policy import load_comparison_policy
from sealeval.errors import (
    CanonicalError,
    CapturedError,
    ComponentDigestError,
    ConfigDocumentError,
    FileSystemError,
    ManifestError,
    OutputError,
    SealevalError,
    SessionError,
    ToolInventoryError,
    UsageError,
    YamlError,
    error_classes,
)
from sealeval.gates.registry import GateError

FAMILIES = (ManifestError, SessionError, GateError, CapturedError, AttestationError)
SHARED = (CanonicalError, YamlError, OutputError, UsageError, FileSystemError)
PACKAGE_FAMILY = {
    "sealeval.session": SessionError,
    "sealeval.gates": GateError,
    "sealeval.captured": CapturedError,
    "sealeval.attest": AttestationError,
}


def _import_everything() -> None:
    for info in pkgutil.walk_packages(sealeval.__path__, "sealeval."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)


def test_every_error_class_is_in_exactly_one_family_or_shared() -> None:
    _import_everything()
    classes = error_classes()
    assert len(classes) > 30
    for cls in classes:
        if cls in SHARED:
            assert cls.__bases__ == (SealevalError,)
            continue
        families = [family for family in FAMILIES if issubclass(cls, family)]
        assert len(families) == 1, cls.__name__


@pytest.mark.parametrize(("prefix", "family"), sorted(PACKAGE_FAMILY.items()))
def test_classes_defined_in_a_family_package_belong_to_that_family(
    prefix: str, family: type[SealevalError]
) -> None:
    _import_everything()
    owned = [cls for cls in error_classes() if cls.__module__.startswith(prefix + ".")]
    assert owned, prefix
    for cls in owned:
        assert issubclass(cls, family), cls.__name__


@pytest.mark.parametrize("family", [SessionError, CapturedError])
def test_family_bases_are_never_raised_and_not_registered(family: type[SealevalError]) -> None:
    assert family not in error_classes()
    assert family.codes == frozenset()
    with pytest.raises(RuntimeError):
        family("too_large")


def test_manifest_family_holds_the_component_and_inventory_errors() -> None:
    for cls in (ComponentDigestError, ConfigDocumentError, ToolInventoryError):
        assert issubclass(cls, ManifestError)


def test_except_captured_error_catches_a_captured_refusal() -> None:
    with pytest.raises(CapturedError) as caught:
        load_comparison_policy(b"{}")
    assert caught.value.code
