"""docs/ stays true to the code: every closed error code is documented."""

from __future__ import annotations

import importlib
import pkgutil
import re

import sealeval
from sealeval.errors import error_classes
from support.vectors import PROJECT_ROOT

# Import every module so that every error class is registered, whatever ran before.
for _module in pkgutil.walk_packages(sealeval.__path__, "sealeval."):
    if _module.name != "sealeval.__main__":
        importlib.import_module(_module.name)

DOCS = PROJECT_ROOT / "docs"


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## `(\w+)`.*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_error_code_is_documented() -> None:
    sections = _sections((DOCS / "errors.md").read_text(encoding="utf-8"))
    classes = {cls.__name__: cls for cls in error_classes()}
    assert sorted(sections) == sorted(classes)
    for name, cls in classes.items():
        documented = set(re.findall(r"^\| `(\w+)` \|", sections[name], flags=re.MULTILINE))
        assert documented == set(cls.codes), name


def test_docs_links_resolve() -> None:
    for page in [PROJECT_ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), (page.name, target)
