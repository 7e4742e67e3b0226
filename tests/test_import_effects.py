"""Importing the packages changes nothing outside them: numba's cache variable not rewritten
(libraries set their own), no plotting backend chosen; the engine's kernels still cache in
their own source-hash folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import json, os, sys
ours = lambda: {k: v for k, v in os.environ.items() if k.startswith(("NUMBA", "SOKOFORGE"))}
before = ours()
import engine, engine.rules, pipeline.build, pipeline.audit_report, serve.app, sokoforge.cli
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
