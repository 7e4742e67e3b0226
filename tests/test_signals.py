"""SIGTERM of a pipeline command or script: its worker processes end within seconds, it exits
143 with one line, and an interrupted build resumes (or is dropped by ``build --abandon``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import warm_cli

ROOT = Path(__file__).resolve().parent.parent
SOKOFORGE = [sys.executable, "-P", "-c", "from sokoforge.cli import main; main()"]
WORKERS_START = 180.0  # seconds for the command to reach its parallel work (a loaded machine)
STOPPED_WITHIN = 10.0  # seconds from SIGTERM to the exit and the workers gone


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux's /proc children lists)."""
    out, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                found = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out += found
            todo += found
    return out


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def loky_workers(pid: int) -> list[int]:
    workers = []
    for child in descendants(pid):
        try:
            if b"loky" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.append(child)
        except OSError:
            continue
    return workers


def terminated_while_busy(args: list[str], cwd: Path, workers: int = 2,
                          env: dict | None = None) -> tuple[subprocess.Popen, str, list[int]]:
    """Start ``args``, wait until ``workers`` loky workers compute, send SIGTERM: the process
    (ended), its stderr and the workers it had."""
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + WORKERS_START
        while len(had := loky_workers(proc.pid)) < workers:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.1)
        time.sleep(0.25)  # busy with their first tasks (a busy build ends about 1 s later)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=STOPPED_WITHIN)
        while any(running(w) for w in had) and time.monotonic() < sent + STOPPED_WITHIN:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not [w for w in had if running(w)], "workers outlived the command"
    return proc, err, had


def assert_one_line_143(proc: subprocess.Popen, err: str, line: str) -> None:
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == line, err


KILL_LOKY_WORKERS = """
import multiprocessing, os, time
from joblib.externals.loky import ProcessPoolExecutor
from pipeline.workers import end_local_workers
pool = ProcessPoolExecutor(max_workers=2)
busy = pool.submit(time.sleep, 60)
pool.submit(os.getpid).result(timeout=120)
print(*[c.pid for c in multiprocessing.active_children()], flush=True)
end_local_workers()
"""


@pytest.mark.slow
def test_ending_local_workers_kills_loky_s_own_processes_at_once():
    """loky's worker processes have no ``kill()``: they are ended by the signal itself, the
    busy one and the idle one, whenever a stop finds them still listed."""
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", KILL_LOKY_WORKERS], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    workers = [int(p) for p in done.stdout.split()]
    assert len(workers) == 2 and not [w for w in workers if running(w)]
    assert time.monotonic() - began < 60  # not the busy worker's minute


@pytest.mark.slow
def test_sigterm_of_build_jobs_2_ends_its_workers_exits_143_and_the_build_resumes(tmp_path):
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    # a 1,000-level pool: still busy seconds after its workers start, on a warm cache and an
    # idle machine (a tiny game, even with ten times its candidates, can be built by then)
    build = ["build", "t1", "--spec", "adaptive", "--seed", "3", "--jobs", "2", "--datasets",
             str(datasets)]
    proc, err, _ = terminated_while_busy([*SOKOFORGE, *build], tmp_path)
    assert_one_line_143(proc, err, "Error: terminated")
    assert (datasets / ".build" / "t1" / "stages" / "build.json").is_file()
    assert not (datasets / ".build" / "t1.lock").exists() and not (datasets / "t1").exists()
    resumed = warm_cli.run([*build, "--quiet"], cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert (datasets / "t1" / "levels.parquet").is_file()


@pytest.mark.slow
def test_sigterm_of_rotate_jobs_2_ends_its_workers_exits_143_leaving_a_resumable_build(
        tmp_path):
    from pipeline.spec import load_spec
    from pipeline.stages.build import build
    from pipeline.workers import Workers

    datasets = tmp_path / "datasets"
    build("base", datasets=datasets, spec=load_spec("tiny"), seed=11,
          workers=Workers(show_progress=False))
    proc, err, _ = terminated_while_busy(
        [*SOKOFORGE, "rotate", "r1", "--from", "base", "--seed", "21", "--jobs", "2",
         "--datasets", str(datasets)], tmp_path)
    assert_one_line_143(proc, err, "Error: terminated")
    assert (datasets / ".build" / "r1" / "stages" / "build.json").is_file()
    assert not (datasets / ".build" / "r1.lock").exists() and not (datasets / "r1").exists()


@pytest.mark.slow
def test_sigterm_of_panel_jobs_2_ends_its_workers_and_writes_nothing(tmp_path):
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    shutil.copytree(ROOT / "datasets" / "demo", datasets / "demo")
    proc, err, _ = terminated_while_busy(
        [*SOKOFORGE, "panel", "demo", "--jobs", "2", "--datasets", str(datasets)], tmp_path)
    assert_one_line_143(proc, err, "Error: terminated")
    assert not (datasets / "demo" / "report" / "panel.parquet").exists()


@pytest.mark.slow
def test_sigterm_of_the_rotation_sweep_stops_it_while_its_workers_are_busy(tmp_path):
    proc, err, _ = terminated_while_busy(
        [sys.executable, str(ROOT / "scripts" / "rotation_sweep.py"), "--spec", "tiny",
         "--count", "1", "--chain", "2", "--jobs", "2"], tmp_path, env={"TMPDIR": str(tmp_path)})
    assert_one_line_143(proc, err, "terminated")
    assert not list(tmp_path.glob("sokoforge-rotation-sweep-*"))  # its folder removed


@pytest.mark.parametrize("secret", [False, True])
def test_build_abandon_drops_an_interrupted_build_and_its_unused_secret(tmp_path, secret):
    from click.testing import CliRunner

    from sokoforge.cli import main

    datasets = tmp_path / "datasets"
    datasets.mkdir()
    seed = [] if secret else ["--seed", "3"]
    started = CliRunner().invoke(main, ["stage", "generate", "a1", "--spec", "tiny", *seed,
                                        "--datasets", str(datasets), "--quiet"])
    assert started.exit_code == 0, started.output
    assert (datasets / ".secrets" / "a1.seed").is_file() == secret
    dropped = CliRunner().invoke(main, ["build", "--abandon", "a1", "--datasets", str(datasets)])
    assert dropped.exit_code == 0, dropped.output
    assert not (datasets / ".build").exists() and not (datasets / ".secrets" / "a1.seed").exists()
    again = CliRunner().invoke(main, ["build", "--abandon", "a1", "--datasets", str(datasets)])
    assert again.exit_code == 1 and again.output.startswith("Error: no interrupted build of a1")
    assert len(again.output.strip().splitlines()) == 1
