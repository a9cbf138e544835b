"""The README's quick start and Python snippet run as written, each in a fresh directory and process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from secmeta.core import Keyring, SecurityStore

README = Path(__file__).resolve().parent.parent / "README.md"


def block(section: str, language: str) -> str:
    """The first ``language`` code block under the README heading ``section``."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n")
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(text, start)
    assert match, f"no {language} block under {section}"
    return match.group(1)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECMETA_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's `secmeta`
    return env


def test_quick_start_commands_run_as_written(tmp_path):
    """Every quick-start command exits 0 (bash -e), the listed ACL shows and the decision is ALLOWED."""
    result = subprocess.run(["bash", "-e", "-c", block("Quick start", "sh")], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "User:alice" in result.stdout and "ALLOWED" in result.stdout.upper()


def test_python_snippet_runs_as_written(tmp_path):
    """The snippet runs in a fresh interpreter and leaves alice's credential and ACL in my-store."""
    result = subprocess.run([sys.executable, "-c", block("Using the store", "python")], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    with SecurityStore.open(tmp_path / "my-store", keyring=Keyring.from_file(tmp_path / "keys.json"),
                            read_only=True) as store:
        assert "alice" in store.image.scram and len(store.image.acls) == 1
        assert store.authorize("User:alice", "10.1.1.1", "Read", "topic", "orders-eu")


def test_the_json_of_a_write_has_the_shape_the_readme_shows(tmp_path):
    """The CLI section's example of a write's --json (``{"log": {"first_offset": 12, "next_offset": 16}, "added":
    [...], ...}``) has the keys `acls --add --json` prints, run as a user would in a fresh store (the README
    showed two of its four keys); its offsets count the events written."""
    import json

    text = " ".join(README.read_text().split())
    example = re.search(r"e\.g\. `acls --add`.s `(\{\"log\": .*?\})`", text)
    assert example, "no write JSON example in the README"
    shown = json.loads(example.group(1).replace("[...]", "[]"))
    env = {**_env(), "SECMETA_KEY_FILE": "keys.json", "SECMETA_STORE": "my-store"}

    def secmeta(*argv: str) -> str:
        done = subprocess.run(["secmeta", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    secmeta("keys", "generate", "--key-file", "keys.json")
    secmeta("init")
    printed = json.loads(secmeta("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                                 "--topic", "a", "--topic", "b", "--json"))
    assert set(printed) == set(shown) and set(printed["log"]) == set(shown["log"])
    assert printed["log"]["next_offset"] - printed["log"]["first_offset"] == len(printed["added"]) == 2
