"""Hidden stays hidden by construction: in a fresh clone, building a hidden version, serving it
and a refused serve leave `git status` clean, while a public version shows up to be committed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import warm_cli
from serve_support import Process

pytestmark = pytest.mark.slow  # every test here takes seconds

ROOT = Path(__file__).resolve().parent.parent


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


def _fresh_clone(tmp: Path) -> Path:
    """The files this checkout would commit (tracked or new, not ignored), as they are now,
    committed in a new repository."""
    clone = tmp / "clone"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "clone")
    return clone


def _sokoforge(clone: Path, *args: str) -> subprocess.CompletedProcess:
    """``sokoforge ARGS`` in ``clone``, run by the checkout's code (its compiled kernels
    cached), forked from a warm interpreter."""
    return warm_cli.run([*args, "--datasets", str(clone / "datasets")], cwd=clone, timeout=600)


def test_a_hidden_version_its_store_and_a_refused_serve_leave_a_fresh_clone_clean(tmp_path):
    clone = _fresh_clone(tmp_path)
    assert _git(clone, "status", "--porcelain") == ""
    built = _sokoforge(clone, "build", "h1", "--spec", "tiny", "--quiet")  # a secret seed
    assert built.returncode == 0, built.stderr
    assert (clone / "datasets" / ".secrets" / "h1.seed").is_file()
    server = Process(clone / "datasets", None, versions=("h1",), cwd=clone)  # ./sokoforge.sqlite
    try:
        refused = _sokoforge(clone, "serve", "h1", "--port", "0")  # the store is in use
        assert refused.returncode == 1 and "in use" in refused.stderr
        assert _git(clone, "status", "--porcelain", "--ignored=no") == ""  # while serving
    finally:
        server.stop()
    assert (clone / "sokoforge.sqlite").is_file()
    assert _git(clone, "status", "--porcelain", "--ignored=no") == ""
    assert "datasets/h1/" not in _git(clone, "ls-files", "--others", "--exclude-standard")


def test_a_public_version_shows_up_to_be_committed(tmp_path):
    clone = _fresh_clone(tmp_path)
    built = _sokoforge(clone, "build", "p1", "--spec", "public/W", "--seed", "5", "--quiet")
    assert built.returncode == 0, built.stderr
    assert _git(clone, "status", "--porcelain").splitlines() == ["?? datasets/p1/"]
