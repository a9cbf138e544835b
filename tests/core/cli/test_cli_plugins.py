"""Commands from the ``secmeta.commands`` entry-point group, with and without their extras installed.

An install without an extra is made real: a copy of this venv's site-packages (symlinks)
without that extra's package, used by a fresh interpreter started with ``-S``.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from secmeta.core.cli import main

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
RUN_CLI = "import site, sys; site.addsitedir(sys.argv.pop(1)); from secmeta.core.cli import main; sys.exit(main(sys.argv[1:]))"


def _listed_commands(help_text: str) -> set[str]:
    """The command names `secmeta --help` lists under COMMAND."""
    body = help_text.split("COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    return {line.split()[0] for line in body.splitlines() if line.startswith("    ") and not line.startswith("     ")}


def _site_without(tmp_path: Path, package: str) -> Path:
    """This venv's site-packages without ``package`` (its import package and its .dist-info)."""
    site = tmp_path / f"site-packages-without-{package}"
    site.mkdir()
    hidden = [entry for entry in SITE_PACKAGES.iterdir() if entry.name.lower().startswith(package)]
    assert hidden, f"{package} is not installed in {SITE_PACKAGES}"
    for entry in SITE_PACKAGES.iterdir():
        if entry not in hidden:
            (site / entry.name).symlink_to(entry)
    return site


def _secmeta(site: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", "-c", RUN_CLI, str(site), *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)


def test_with_every_extra_the_consumers_commands_are_listed(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    listed = _listed_commands(capsys.readouterr().out)
    assert {"kafka", "audit", "spark", "demo"} <= listed
    assert {"acls", "configs", "tokens", "log", "serve"} <= listed


def test_without_the_spark_extra_the_spark_commands_say_what_to_install(tmp_path):
    site = _site_without(tmp_path, "pyspark")
    listing = _secmeta(site, tmp_path, "--help")
    assert listing.returncode == 0, listing.stderr
    listed = _listed_commands(listing.stdout)
    assert "spark" not in listed and {"kafka", "audit", "demo", "acls"} <= listed
    hint = ("secmeta: error: the spark commands need the spark extra: pip install 'secmeta[spark]' "
            "(not installed: pyspark)\n")
    for argv in (["spark", "query", "acls", "--tables", str(tmp_path)], ["spark", "--help"], ["spark"]):
        asked = _secmeta(site, tmp_path, *argv)
        assert (asked.returncode, asked.stdout, asked.stderr) == (2, "", hint), argv


def test_without_the_kafka_extra_kafka_and_audit_say_what_to_install(tmp_path):
    site = _site_without(tmp_path, "confluent_kafka")
    listed = _listed_commands(_secmeta(site, tmp_path, "--help").stdout)
    assert not {"kafka", "audit"} & listed and {"spark", "demo", "acls"} <= listed
    for command, argv in (("kafka", ["kafka", "publish", "--once", "--bootstrap-server", "127.0.0.1:9"]),
                          ("audit", ["audit", "run", "--bootstrap-server", "127.0.0.1:9"])):
        asked = _secmeta(site, tmp_path, *argv)
        assert asked.returncode == 2 and asked.stdout == ""
        assert asked.stderr == (f"secmeta: error: the {command} commands need the kafka extra: "
                                "pip install 'secmeta[kafka]' (not installed: confluent-kafka)\n")


def test_without_an_extra_the_store_commands_still_work(tmp_path):
    site = _site_without(tmp_path, "pyspark")
    keys = tmp_path / "keys.json"
    made = _secmeta(site, tmp_path, "keys", "generate", "--key-file", str(keys))
    assert made.returncode == 0, made.stderr
    assert keys.exists()
