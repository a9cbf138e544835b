"""The floors of ../shared/DESIGN.md hold: events <- projections <- core <- consumers.

Every floor is a subpackage of ``secmeta`` (pyproject maps the folders), and nothing imports
one as a top-level name. A floor imports only its own package and the floors below it. The sources are parsed
with ``ast``, not imported, so an import inside a function (the usual way to hide a
dependency) counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("events", "projections", "core", "consumers")
MAY_IMPORT = {
    "events": {"events"},
    "projections": {"events", "projections"},
    "core": {"events", "projections", "core"},
    "consumers": {"events", "projections", "core", "consumers"},
}


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, the source of ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            found.append((node.lineno, name))
    return found


def _modules(package: str):
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        parts = ("secmeta", *path.relative_to(REPO_ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        yield path, ".".join(parts[:-1] if is_package else parts), is_package


def _floor(name: str) -> str | None:
    """The floor a module name belongs to (``secmeta.core.x`` -> ``core``), or None."""
    parts = name.split(".")
    return parts[1] if parts[0] == "secmeta" and len(parts) > 1 and parts[1] in FLOORS else None


@pytest.mark.parametrize("floor", list(MAY_IMPORT))
def test_a_floor_imports_nothing_from_a_floor_above(floor):
    modules = list(_modules(floor))
    assert modules, f"no Python files under {floor}/"
    wrong = []
    for path, module, is_package in modules:
        for line, name in imported_modules(path.read_text(), module, is_package):
            above = _floor(name)
            if above is not None and above not in MAY_IMPORT[floor]:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name}")
    assert not wrong, f"{floor} may import only {sorted(MAY_IMPORT[floor])}:\n" + "\n".join(wrong)


def test_imports_are_found_in_functions_and_relative_ones_resolved():
    source = (
        "import json\n"
        "from .keyring import SealedSecret\n"
        "from .. import events\n"
        "def handler():\n"
        "    from secmeta.consumers.spark.tables import Tables\n"
        "    import secmeta.consumers.kafka.wire\n"
    )
    assert sorted(imported_modules(source, "secmeta.core.cli.common")) == [
        (1, "json"), (2, "secmeta.core.cli.keyring"), (3, "secmeta.core"), (5, "secmeta.consumers.spark.tables"),
        (6, "secmeta.consumers.kafka.wire"),
    ]
    assert imported_modules("from .records import Envelope\n", "secmeta.events", is_package=True) == [
        (1, "secmeta.events.records")]


@pytest.mark.parametrize("folder", [*FLOORS, "scripts", "tests"])
def test_nothing_imports_a_floor_as_a_top_level_name(folder):
    """`import core` or `from events.x import y` would load a second copy, or someone else's module."""
    wrong = []
    for path in sorted((REPO_ROOT / folder).rglob("*.py")):
        for line, name in imported_modules(path.read_text(), "secmeta.x"):
            if name.split(".")[0] in FLOORS:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name}")
    assert not wrong, "import these through the secmeta package:\n" + "\n".join(wrong)
