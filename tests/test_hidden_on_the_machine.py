"""Hidden stays hidden on the machine: every file written for a hidden version (its build
folder, levels, stages, panel and audit report) is 0600 in 0700 folders, while a public one,
built or imported, has the modes the umask gives."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from public_support import public_and_hidden

from sokoforge.cli import main

PUBLIC_BOARDS = "Level 1\n#####\n#@$.#\n#####\n\nLevel 2\n######\n#@ $.#\n######\n"
HIDDEN_BOARDS = "Level 1\n######\n#@$ .#\n######\n\nLevel 2\n#######\n#@ $ .#\n#######\n"


def umask() -> int:
    """This process's umask, read without changing it (Linux's /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line in /proc/self/status")


def modes(folder: Path) -> dict[str, int]:
    """The permission bits of ``folder`` ('.') and of everything under it, by relative path."""
    out = {".": stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        out[str(path.relative_to(folder))] = stat.S_IMODE(path.lstat().st_mode)
    return out


def assert_private(folder: Path, besides: tuple[str, ...] = ()) -> None:
    """``folder`` and every folder under it 0700, every file 0600 (but those ``besides``)."""
    wrong = {name: oct(mode) for name, mode in modes(folder).items()
             if mode != (0o700 if (folder / name).is_dir() else 0o600) and name not in besides}
    assert not wrong, wrong


def cli(*args: str) -> None:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> Path:
    """``pub`` (a small public W) and ``hid`` (the tiny hidden game), built in-process."""
    return public_and_hidden(tmp_path_factory.mktemp("datasets"), 4)


@pytest.mark.slow
def test_a_built_hidden_version_its_panel_and_its_audit_are_its_owner_s_alone(datasets):
    assert (datasets / "hid" / "stages").is_dir()
    assert (datasets / "hid" / "levels.parquet").is_file()
    assert_private(datasets / "hid")
    cli("panel", "hid", "--datasets", str(datasets), "--quiet")
    cli("audit", "hid", "--datasets", str(datasets))
    assert (datasets / "hid" / "report" / "panel.parquet").is_file()
    assert (datasets / "hid" / "report" / "report.html").is_file()
    assert_private(datasets / "hid")


def test_a_hidden_build_in_progress_is_private_from_its_first_stage(datasets):
    cli("stage", "generate", "h2", "--spec", "tiny", "--seed", "3", "--datasets", str(datasets),
        "--quiet")
    assert (datasets / ".build" / "h2" / "stages" / "generate.parquet").is_file()
    assert_private(datasets / ".build" / "h2")
    cli("build", "--abandon", "h2", "--datasets", str(datasets))


def test_a_public_version_has_the_umask_s_modes(datasets):
    folders, files = 0o777 & ~umask(), 0o666 & ~umask()
    for name, mode in modes(datasets / "pub").items():
        assert mode == (folders if (datasets / "pub" / name).is_dir() else files), name


def test_an_imported_version_has_the_modes_of_a_built_one_of_its_visibility(datasets, tmp_path):
    public, hidden = tmp_path / "public.xsb", tmp_path / "hidden.xsb"
    public.write_text(PUBLIC_BOARDS)
    hidden.write_text(HIDDEN_BOARDS)
    cli("import", "ipub", str(public), "--public", "--datasets", str(datasets), "--quiet")
    cli("import", "ihid", str(hidden), "--hidden", "--datasets", str(datasets), "--quiet")
    assert modes(datasets / "ipub")["."] == modes(datasets / "pub")["."]
    assert modes(datasets / "ipub")["levels.parquet"] == modes(datasets / "pub")["levels.parquet"]
    assert (datasets / "ihid" / "sources" / "hidden.xsb").is_file()
    assert_private(datasets / "ihid")
