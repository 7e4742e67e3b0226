"""Importing the packages changes nothing outside them: numba's cache variable not rewritten
(libraries set their own), no plotting backend chosen; the engine's kernels still cache in
their own source-hash folder."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.kernel_cache import COMPILING_NOTICE

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import json, os, sys
ours = lambda: {k: v for k, v in os.environ.items() if k.startswith(("NUMBA", "SOKOFORGE"))}
before = ours()
import engine, engine.rules, pipeline.stages.build, pipeline.audit.audit_report, serve.app
import sokoforge.cli
import sokoforge_gym
from engine.kernel_cache import cache_dir
from engine.levels import parse_xsb
from engine.rules import step
level = parse_xsb("#####\\n#@$.#\\n#####")
step(level, level.start, 3)
print(json.dumps({"environ_kept": ours() == before,
                  "pyplot": "matplotlib.pyplot" in sys.modules,
                  "cache": str(cache_dir())}))
"""


@pytest.mark.slow
def test_importing_every_package_leaves_the_environment_and_matplotlib_alone(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["environ_kept"] and not seen["pyplot"]
    cache = Path(seen["cache"])
    assert cache.parent == tmp_path / "cache" and len(cache.name) == 12
    assert any(p.suffix == ".nbi" for p in cache.rglob("rules.*"))  # the kernel's index


# -- The kernel cache and the engine's subpackages ----------------------------------------

def _cache_run(tree: Path, cache: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                          capture_output=True, text=True)


def _cache_probe(tree: Path, cache: Path, code: str) -> str:
    return _cache_run(tree, cache, code).stdout.strip()


def test_a_change_in_an_engine_subpackage_moves_the_kernels_to_a_new_cache_folder(tmp_path):
    # a kernel inlines helpers of other files: every source below engine/ is in the hash
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "engine", tree / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = "from engine.kernel_cache import cache_dir; print(cache_dir().name)"
    before = _cache_probe(tree, tmp_path / "cache", code)
    solver = tree / "engine" / "search" / "solver.py"
    solver.write_text(solver.read_text() + "\n# a changed line\n")
    assert _cache_probe(tree, tmp_path / "cache", code) != before


def test_a_kernel_in_a_subpackage_caches_in_the_source_hash_folder_saying_it_compiles_once(
        tmp_path):
    code = ("from engine.kernel_cache import cache_dir; from engine.levels import parse_xsb; "
            "from engine.search.deadlock import dead_squares; "
            "dead_squares(parse_xsb('#####\\n#@$.#\\n#####')); print(cache_dir())")
    done = _cache_run(ROOT, tmp_path / "cache", code)
    cache = Path(done.stdout.strip())
    assert cache.parent == tmp_path / "cache"
    assert any(p.suffix == ".nbi" for p in cache.rglob("deadlock.*"))
    # the first compilation into the folder says so, in one line, and only for that folder
    assert done.stderr.splitlines() == [
        "compiling the engine's numba kernels (first use only: about 10-20 s more for a "
        f"build's grading or the vector environment's first reset and step; then loaded from "
        f"{cache})"]
    assert (cache / COMPILING_NOTICE).is_file()
