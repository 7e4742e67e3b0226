"""A store location that names no store (``sqlite:///path``, ``mysql://...``) is refused in
one line, exit 2, by every command that takes ``--db``, and no file is created."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sokoforge.cli import main

COMMANDS = [["serve", "demo"], ["round", "close", "v"], ["irt", "v"], ["review", "v"],
            ["audit", "v"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("location", ["sqlite:///{tmp}/s.sqlite", "mysql://u:secret@h/db"])
def test_a_url_that_is_not_postgresql_is_refused_in_one_line_by_every_command_taking_db(
        tmp_path, monkeypatch, command, location):
    monkeypatch.chdir(tmp_path)
    db = location.format(tmp=tmp_path)
    done = CliRunner().invoke(main, [*command, "--db", db, "--datasets", str(tmp_path)])
    assert done.exit_code == 2, done.output
    assert done.output.count("\n") == 1 and "names no store" in done.output, done.output
    assert "secret" not in done.output
    assert list(tmp_path.iterdir()) == []  # no ./sqlite:/... folder, no store


@pytest.mark.slow  # the serve command's imports, before the check: ~3 s when first imported
def test_serve_refuses_a_url_that_is_not_postgresql_from_its_environment_too(tmp_path,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOKOFORGE_DB", f"sqlite:///{tmp_path}/s.sqlite")
    done = CliRunner().invoke(main, ["serve", "demo", "--datasets", str(tmp_path)])
    assert done.exit_code == 2 and "names no store" in done.output, done.output
    assert list(tmp_path.iterdir()) == []


def test_opening_a_store_by_a_url_that_is_not_postgresql_is_refused_below_the_cli():
    from serve.stores import BadLocation, open_store, read_store

    for call in (lambda: open_store("sqlite:///s.sqlite"),
                 lambda: read_store("sqlite:///s.sqlite", lambda store: store.versions())):
        with pytest.raises(BadLocation, match="names no store"):
            call()
