"""What `secmeta` prints when it cannot do what was asked: one line naming the problem.

``main`` catches ``SecmetaError`` (every error secmeta raises on purpose) and ``OSError``
(a file or directory it could not use); anything else is a bug and keeps its traceback.
A bad value on the command line exits 2 (a usage error); a file it could not use exits 1.
"""

from __future__ import annotations

from secmeta.core.cli import main
from secmeta.events.keyring import Keyring


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_question_about_two_resources_is_refused_naming_the_options(capsys):
    code, out, err = _run(capsys, "who-could", "--store", "unused", "--operation", "READ", "--topic", "orders",
                          "--group", "etl")
    assert (code, out) == (2, "")
    assert err == ("secmeta: error: give exactly one resource: --topic, --group, --cluster, --transactional-id, "
                   "--delegation-token or --user-principal\n")


def test_a_tables_directory_under_a_file_is_one_error_line(tmp_path, capsys):
    keys, store = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    assert _run(capsys, "init", "--store", str(store), "--key-file", str(keys))[0] == 0
    assert _run(capsys, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic",
                "orders", "--store", str(store), "--key-file", str(keys))[0] == 0
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    code, out, err = _run(capsys, "spark", "compact", "--store", str(store), "--key-file", str(keys),
                          "--tables", str(not_a_dir / "tables"), "--once")
    assert (code, out) == (1, "")
    assert err.startswith("secmeta: error: ") and err.count("\n") == 1
    assert "Not a directory" in err and str(not_a_dir / "tables") in err
