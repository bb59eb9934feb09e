"""The docs name the code as it is: docs/architecture.md's module map against the tree, the
README's first screen and its length."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
MODULE = re.compile(r"harness/[\w/]+\.py")


def _modules() -> set[str]:
    """Every module of the harness package but the packages' own __init__.py."""
    return {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "harness").rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def _named() -> set[str]:
    return set(MODULE.findall(ARCHITECTURE.read_text()))


def test_every_module_is_in_the_map() -> None:
    missing = sorted(_modules() - _named())
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_every_module_the_map_names_exists() -> None:
    gone = sorted(m for m in _named() if not (REPO / m).is_file())
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"


def test_the_map_lives_only_in_architecture() -> None:
    """The README links the map instead of keeping a second copy that drifts."""
    readme = (REPO / "README.md").read_text()
    assert len(set(MODULE.findall(readme)) & _modules()) <= 3


def test_readme_fits_its_bound_and_links_exist() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (REPO / target).exists(), f"README links {target}, which does not exist"


def test_readme_lists_every_command() -> None:
    from harness.cli import COMMANDS

    readme = (REPO / "README.md").read_text()
    for name in (m.NAME for m in COMMANDS):
        assert f"`harness {name}" in readme, f"README's table of commands lacks harness {name}"


def test_schema_version_in_architecture_is_the_code_s() -> None:
    from harness.core.schema import SCHEMA_VERSION

    text = ARCHITECTURE.read_text()
    versions = {int(v) for v in re.findall(r"`schema_version` (\d+)", text)}
    assert versions == {SCHEMA_VERSION}
