"""The secmeta distribution ships our packages, its console script and the Avro schemas."""

import importlib
import importlib.metadata
import importlib.resources
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL_PACKAGES = ("core", "events", "projections", "consumers")


@pytest.mark.parametrize("name", TOP_LEVEL_PACKAGES)
def test_top_level_package_comes_from_this_repository(name):
    """Each package imports from this checkout, not from a same-named PyPI distribution."""
    module = importlib.import_module(name)
    assert module.__file__ is not None, f"{name} is a namespace package, not ours"
    path = Path(module.__file__).resolve()
    assert path.is_relative_to(REPO_ROOT / name), f"{name} imported from {path}"


def test_console_script_is_installed_next_to_the_interpreter():
    """The `secmeta` console script is installed in the running venv's bin directory."""
    bin_dir = Path(sys.executable).parent
    assert shutil.which("secmeta", path=str(bin_dir)) is not None, f"no secmeta in {bin_dir}"


def test_console_script_entry_point_targets_the_cli():
    """The installed distribution's `secmeta` entry point is core.cli:main."""
    scripts = importlib.metadata.distribution("secmeta").entry_points.select(
        group="console_scripts"
    )
    assert {ep.name: ep.value for ep in scripts}.get("secmeta") == "core.cli:main"


def test_installed_console_script_runs():
    """The installed `secmeta` script starts and prints its usage."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "secmeta"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower()


def test_avro_schemas_are_found_as_package_resources():
    """importlib.resources finds at least one .avsc under events/schemas."""
    schemas = importlib.resources.files("events").joinpath("schemas")
    assert schemas.is_dir(), "events/schemas is missing"
    names = [entry.name for entry in schemas.iterdir() if entry.name.endswith(".avsc")]
    assert names, "no .avsc found under events/schemas"


def test_every_avsc_is_declared_as_package_data():
    """Every .avsc file in the events package is matched by a package-data glob."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["events"]
    events_dir = REPO_ROOT / "events"
    # setuptools expands package-data with recursive glob semantics, as Path.glob does.
    shipped = {path for pattern in globs for path in events_dir.glob(pattern)}
    found = set(events_dir.rglob("*.avsc"))
    uncovered = sorted(p.relative_to(events_dir).as_posix() for p in found - shipped)
    assert not uncovered, f"not shipped as package data (pyproject globs {globs}): {uncovered}"
