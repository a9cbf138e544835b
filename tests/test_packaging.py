"""The secmeta distribution ships one import package, `secmeta`, its console script and the Avro schemas."""

import ast
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
FLOORS = ("core", "events", "projections", "consumers")


@pytest.mark.parametrize("name", FLOORS)
def test_each_folder_is_a_subpackage_of_secmeta(name):
    """secmeta.core is core/ of this checkout, and so on for each folder pyproject maps."""
    module = importlib.import_module(f"secmeta.{name}")
    assert module.__file__ is not None, f"secmeta.{name} is a namespace package, not ours"
    assert Path(module.__file__).resolve().is_relative_to(REPO_ROOT / name), module.__file__


def test_every_package_folder_is_shipped():
    """Every folder with an __init__.py is listed in pyproject's packages, and nothing else is."""
    listed = set(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"secmeta"} | {
        "secmeta." + ".".join(p.parent.relative_to(REPO_ROOT).parts)
        for name in FLOORS for p in (REPO_ROOT / name).rglob("__init__.py")
    }
    assert listed == found, f"missing: {sorted(found - listed)}; not a package: {sorted(listed - found)}"


def test_the_public_api_is_secmeta_s():
    """`from secmeta import SecurityStore` gives the store, as secmeta.core does."""
    import secmeta
    import secmeta.core

    assert secmeta.SecurityStore is secmeta.core.SecurityStore
    assert set(secmeta.__all__) == set(secmeta.core.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        secmeta.nothing  # noqa: B018


@pytest.mark.parametrize("package", ["secmeta.core", "secmeta.events"])
def test_a_package_s_names_are_those_its_type_checkers_see(package):
    """Each public name of a package whose names load on first use (events/lazy_exports.py) is the
    object its ``if TYPE_CHECKING`` block imports for type checkers, and nothing else is public."""
    module = importlib.import_module(package)
    seen = {}
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imported in node.body:
                seen.update({alias.name: imported.module for alias in imported.names})
    assert sorted(module.__all__) == sorted(seen)
    for name, home in seen.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_secmeta_embeds_in_an_application_with_its_own_core_and_events(tmp_path):
    """An application whose own top-level `core` and `events` modules are first on its path
    still opens a store, and keeps its own modules."""
    for name in ("core", "events", "projections", "consumers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f'WHO = "the application {name}"\n')
    (tmp_path / "app.py").write_text(
        "import core, events, projections, consumers\n"
        "from secmeta import AclBinding, RequestContext, SecurityStore, StoreConfig\n"
        "from secmeta.events.keyring import Keyring\n"
        "import sys\n"
        "from secmeta import AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType\n"
        "ctx = RequestContext('User:admin', '127.0.0.1')\n"
        "with SecurityStore.open(sys.argv[1], StoreConfig(), keyring=Keyring.generate()) as store:\n"
        "    store.create_acls([AclBinding.of(ResourceType.TOPIC, 't', PatternType.LITERAL, 'User:a', '*',\n"
        "                                     AclOperation.READ, AclPermissionType.ALLOW)], context=ctx)\n"
        "    print(len(store.describe_acls(AclBindingFilter.any(), context=ctx)))\n"
        "print(core.WHO, events.WHO, projections.WHO, consumers.WHO, sep='|')\n"
    )
    result = subprocess.run([sys.executable, "app.py", str(tmp_path / "store")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "1", "the application core|the application events|the application projections|the application consumers"]


def test_console_script_is_installed_next_to_the_interpreter():
    """The `secmeta` console script is installed in the running venv's bin directory."""
    bin_dir = Path(sys.executable).parent
    assert shutil.which("secmeta", path=str(bin_dir)) is not None, f"no secmeta in {bin_dir}"


def test_console_script_entry_point_targets_the_cli():
    """The installed distribution's `secmeta` entry point is secmeta.core.cli:main."""
    scripts = importlib.metadata.distribution("secmeta").entry_points.select(
        group="console_scripts"
    )
    assert {ep.name: ep.value for ep in scripts}.get("secmeta") == "secmeta.core.cli:main"


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
    schemas = importlib.resources.files("secmeta.events").joinpath("schemas")
    assert schemas.is_dir(), "events/schemas is missing"
    names = [entry.name for entry in schemas.iterdir() if entry.name.endswith(".avsc")]
    assert names, "no .avsc found under events/schemas"


def test_every_avsc_is_declared_as_package_data():
    """Every .avsc file in the events package is matched by a package-data glob."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["secmeta.events"]
    events_dir = REPO_ROOT / "events"
    # setuptools expands package-data with recursive glob semantics, as Path.glob does.
    shipped = {path for pattern in globs for path in events_dir.glob(pattern)}
    found = set(events_dir.rglob("*.avsc"))
    uncovered = sorted(p.relative_to(events_dir).as_posix() for p in found - shipped)
    assert not uncovered, f"not shipped as package data (pyproject globs {globs}): {uncovered}"


def test_the_version_secmeta_prints_is_the_distribution_s():
    """`secmeta --version` reads secmeta.__version__ (no importlib.metadata at start); pyproject.toml takes the
    distribution's version from it, so the two cannot differ."""
    import secmeta

    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "secmeta.__version__"}
    result = subprocess.run([str(Path(sys.executable).parent / "secmeta"), "--version"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.stdout == f"secmeta {secmeta.__version__}\n"
