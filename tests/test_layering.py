"""The floors of ../shared/DESIGN.md hold: events <- projections <- core <- consumers.

A floor imports only its own package and the floors below it. The sources are parsed
with ``ast``, not imported, so an import inside a function (the usual way to hide a
dependency) counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
OURS = ("events", "projections", "core", "consumers", "scripts", "tests")
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
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        yield path, ".".join(parts[:-1] if is_package else parts), is_package


@pytest.mark.parametrize("floor", list(MAY_IMPORT))
def test_a_floor_imports_nothing_from_a_floor_above(floor):
    modules = list(_modules(floor))
    assert modules, f"no Python files under {floor}/"
    wrong = []
    for path, module, is_package in modules:
        for line, name in imported_modules(path.read_text(), module, is_package):
            top = name.split(".")[0]
            if top in OURS and top not in MAY_IMPORT[floor]:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {name}")
    assert not wrong, f"{floor} may import only {sorted(MAY_IMPORT[floor])}:\n" + "\n".join(wrong)


def test_imports_are_found_in_functions_and_relative_ones_resolved():
    source = (
        "import json\n"
        "from .keyring import SealedSecret\n"
        "from .. import events\n"
        "def handler():\n"
        "    from consumers.spark.tables import Tables\n"
        "    import consumers.kafka.wire\n"
    )
    assert sorted(imported_modules(source, "core.cli.common")) == [
        (1, "json"), (2, "core.cli.keyring"), (3, "core"), (5, "consumers.spark.tables"), (6, "consumers.kafka.wire"),
    ]
    assert imported_modules("from .records import Envelope\n", "events", is_package=True) == [(1, "events.records")]
