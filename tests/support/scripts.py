"""Load a script of ``scripts/`` (not a package) as a module, for the tests that check it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(name: str, path: Path) -> ModuleType:
    """Execute the script at ``path`` as module ``name`` (registered in ``sys.modules``).

    Registered first, so that dataclasses resolve their annotations and a script
    importing a sibling by name (``import renaming``) finds the one loaded here.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
