"""The README's quick start as a new user types it: `make install` (the venv these tests run
in), `make serve` (the command its recipe runs), the venv on the PATH, then `sokoforge play`
as written; it ends with a played game, its scorecard's page and a clean Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from serve_support import Api, Process

ROOT = Path(__file__).resolve().parent.parent
SOKOFORGE = [sys.executable, "-c", "from sokoforge.cli import main; main()"]


def quick_start() -> list[str]:
    """The quick start's two blocks, one command a line, their comments left out."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text.split("From a fresh clone to a played game", 1)[1].split("\n## ", 1)[0]
    blocks = part.split("```\n")[1::2][:2]
    return [re.sub(r"\s+#\s.*$", "", line).strip() for block in blocks
            for line in block.splitlines() if line.strip()]


def recipe(target: str, *flags: str) -> list[str]:
    """What `make TARGET` runs here, as `make -n` prints it (nothing is run; ``-B``: as if
    nothing were made yet)."""
    # a make of its own, not a sub-make of the `make test` running this (whose MAKEFLAGS and
    # MAKELEVEL would add "make[1]: Entering directory" lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(["make", "--no-print-directory", "-n", *flags, target], cwd=ROOT,
                          env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (target, done.stderr)
    return done.stdout.splitlines()


@pytest.mark.slow
def test_the_readmes_quick_start_goes_from_a_fresh_clone_to_a_played_game(tmp_path):
    from sokoforge.cli import main

    bin_dir = tmp_path / "bin"  # what `source .venv/bin/activate` puts first on the PATH
    bin_dir.mkdir()
    (bin_dir / "sokoforge").write_text(f"#!/bin/sh\nexec {shlex.join(SOKOFORGE)} \"$@\"\n")
    (bin_dir / "sokoforge").chmod(0o755)
    env = dict(os.environ)
    port = next(p.default for p in main.commands["serve"].params if p.name == "port")
    readme_url = f"http://127.0.0.1:{port}"
    running: Process | None = None
    played = ""
    lines = quick_start()
    assert lines and lines[0] == "make install" and "make serve" in lines
    try:
        for line in lines:
            if line == "make install":
                recipe("install")  # the target is there (this venv is what it made)
            elif line.startswith("make "):
                serve = shlex.split(recipe(line.split()[1])[-1])  # .venv/bin/sokoforge serve ...
                assert Path(serve[0]).name == "sokoforge" and serve[1] == "serve"
                # its own default store, in the folder it is started from; a free port
                running = Process(ROOT / "datasets", None, versions=tuple(serve[2:]),
                                  cwd=tmp_path)
            elif line == "source .venv/bin/activate":
                env["PATH"] = f"{bin_dir}:{env['PATH']}"
            else:
                assert running is not None and readme_url in line, line
                done = subprocess.run(["bash", "-c", line.replace(readme_url, running.base)],
                                      cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=300)
                assert done.returncode == 0, (line, done.stdout, done.stderr)
                played = done.stdout
        assert running is not None and played, lines
        score, page = played.split("\nscorecard: ")
        assert json.loads(score)["episodes"] == 100  # the demo, played whole
        anyone = Api(running.base)
        assert "NAME" in anyone.ok("GET", page.strip().removeprefix(running.base))
        assert "public-W" in anyone.ok("GET", "/play/public-W")
        running.proc.send_signal(signal.SIGINT)  # Ctrl-C stops it
        rest = running.proc.communicate(timeout=60)[1]
        assert running.proc.returncode == 0 and rest.strip().endswith("stopped (Ctrl-C)"), rest
        running = None
    finally:
        if running is not None:
            running.stop()
    assert (tmp_path / "sokoforge.sqlite").is_file()  # the store, where it was started


def readme_python_snippets() -> list[str]:
    """Every ```python block of the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


@pytest.mark.slow
def test_every_readme_snippets_imports_are_installed_by_make_install_or_install_examples():
    """A snippet imports the standard library, the project, its dependencies (`make
    install`), or the `examples` extra (`make install-examples`, which the README names)."""
    import ast
    import tomllib
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = {canonicalize_name(Requirement(r).name) for r in
                 project["dependencies"] + project["optional-dependencies"]["examples"]}
    own = {"engine", "pipeline", "serve", "sokoforge", "sokoforge_gym"}
    dists = packages_distributions()
    imported = set()
    for snippet in readme_python_snippets():
        for node in ast.walk(ast.parse(snippet)):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    foreign = imported - own - set(sys.stdlib_module_names)
    assert {"datasets", "arc_agi"} <= foreign  # what this test is about: both are seen
    missing = {m: dists.get(m) for m in foreign
               if not {canonicalize_name(d) for d in dists.get(m, [])} & installed}
    assert missing == {}
    assert "`make install-examples`" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert any("pip install --quiet -e '.[examples]'" in line
               for line in recipe("install-examples", "-B"))
