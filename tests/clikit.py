"""Running ``secmeta`` as a user would, on a local store: what the configs and tokens command tests share.

    keys, path = cli_env(tmp_path, monkeypatch)     # a key file and a store path set as the CLI's defaults
    path = make_store(tmp_path, monkeypatch)        # the same, with the store created (tests/core/cli's `store`)
    code, out, err = run(capsys, "configs", ...)    # exit code, stdout, stderr (argparse's exit too)
    log_end(path)                                   # the log's end offset: unchanged means nothing was written
"""

from __future__ import annotations

from pathlib import Path

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.cli import main
from secmeta.events.keyring import Keyring

__all__ = ["TOKEN_SECRET", "cli_env", "log_end", "make_store", "run"]

TOKEN_SECRET = "cli-test-token-secret, 32 bytes or more"


def cli_env(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A new key file ``tmp_path/keys.json`` and the path ``tmp_path/store`` (not created), set as the CLI's
    defaults: $SECMETA_KEY_FILE, $SECMETA_STORE and $SECMETA_TOKEN_SECRET (TOKEN_SECRET)."""
    keys, path = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    monkeypatch.setenv("SECMETA_STORE", str(path))
    monkeypatch.setenv("SECMETA_TOKEN_SECRET", TOKEN_SECRET)
    return keys, path


def make_store(tmp_path: Path, monkeypatch, **config) -> Path:
    """A store created through the API (with ``config`` saved in its config.json), set as the CLI's default."""
    keys, path = cli_env(tmp_path, monkeypatch)
    settings = StoreConfig(**config)
    SecurityStore.open(path, settings, keyring=Keyring.load(keys)).close()
    settings.save(path)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``secmeta ARGV``: its exit code (argparse's usage exit included), stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def log_end(path: Path) -> int:
    """The end offset of the store's log (opened read-only, beside nothing else)."""
    with SecurityStore.open(path, StoreConfig.load(path), keyring=Keyring.load(None), read_only=True) as store:
        return store.log.end_offset
