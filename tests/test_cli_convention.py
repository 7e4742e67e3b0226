"""One exit convention for every command: 0 done, 1 refused or a failed check, 2 usage or
unreadable input, 130 interrupted; each failure is one line on stderr."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.spec import load_spec
from pipeline.stages.build import build
from pipeline.workers import Workers
from sokoforge.cli import main

QUIET = Workers(jobs=1, show_progress=False)
REPOSITORY = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    build("v1", datasets=root, spec=load_spec("tiny"), seed=11, workers=QUIET)
    build("s1", datasets=root, spec=load_spec("tiny"), workers=QUIET)  # a secret seed
    return root


def _one_line_exit(args: list[str], code: int, **kwargs) -> str:
    result = CliRunner().invoke(main, args, **kwargs)
    assert result.exit_code == code, (args, result.output)
    assert isinstance(result.exception, SystemExit), result.exception  # no escaped exception
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_help_states_the_exit_statuses():
    out = CliRunner().invoke(main, ["--help"]).output
    for line in ("0    done", "1    a check failed or a request was refused",
                 "2    usage or unreadable input", "130  interrupted (Ctrl-C)"):
        assert line in out


@pytest.mark.parametrize("args, message", [
    (["build", "x", "--seed", "abc"], "seed must be a non-negative integer"),
    (["build", "x", "--spec", "nosuch"], "spec 'nosuch' not found"),
    (["build", "../x", "--seed", "1"], "is not allowed"),
    (["verify", "v1", "--seed", "abc"], "seed must be a non-negative integer"),
    (["verify", "nope", "--seed", "1"], "no version 'nope' under"),
    (["rotate", "r", "--from", "nope"], "no version 'nope' under"),
    (["rotate", "r", "--from", "v1", "--seed", "x"], "seed must be a non-negative integer"),
    (["reveal", "nope"], "no version 'nope'"),
    (["audit", "nope"], "no version 'nope' under"),
    (["audit", "v1", "--against", "v1"], "cannot audit v1 against itself"),
    (["stage", "generate", "x", "--spec", "nosuch"], "spec 'nosuch' not found"),
    (["import", "x", "/nonexistent/levels.xsb"], "cannot read /nonexistent/levels.xsb"),
])
def test_usage_and_unreadable_input_exit_2_in_one_line(datasets, args, message):
    assert message in _one_line_exit([*args, "--datasets", str(datasets)], 2)


@pytest.mark.parametrize("args", [
    ["verify", "v11", "--seed", "1"], ["verify", "v11"], ["audit", "v11"], ["panel", "v11"],
    ["rotate", "r", "--from", "v11"], ["reveal", "v11"], ["serve", "v11", "--port", "0"],
    ["render", "v11", "--out", "x.png"], ["arc-export", "v11", "out"],
    ["trajectories", "out", "--from", "v11", "--episodes", "1", "--seed", "1"],
    ["audit", "v1", "--against", "v11"], ["round", "open", "v11", "--closes", "2100-01-01"],
    ["round", "status", "v11"], ["round", "close", "v11"], ["round", "publish", "v11"],
    ["irt", "v11", "--db", "STORE"], ["irt", "v11", "--line", "--db", "STORE"],
])
def test_every_command_names_the_closest_version_to_an_unknown_name_in_one_wording(
        datasets, tmp_path, args):
    store = tmp_path / "s.sqlite"
    sqlite3.connect(store).close()  # a store there, so that the name is what is refused
    args = [str(store) if a == "STORE" else a for a in args]
    line = _one_line_exit([*args, "--datasets", str(datasets)], 2)
    assert line.endswith(f"no version 'v11' under {datasets}; did you mean 'v1'?"), line


def test_the_closest_version_to_an_unknown_name_is_found_case_aside(tmp_path):
    for name in ("public-S", "public-W"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text("{}")
    line = _one_line_exit(["audit", "public-s", "--datasets", str(tmp_path)], 2)
    assert line.endswith("did you mean 'public-S'?"), line
    line = _one_line_exit(["audit", "PUBLIC-SX", "--datasets", str(tmp_path)], 2)
    assert line.endswith("did you mean 'public-S'?"), line  # near, case aside


@pytest.mark.parametrize("command", [
    ["versions"], ["build", "x", "--seed", "1"], ["rotate", "r", "--from", "v1"],
    ["import", "x", "levels.xsb"], ["audit", "v1"], ["serve", "v1"], ["reveal", "v1"],
    ["round", "open", "v1", "--closes", "2100-01-01"],
    ["trajectories", "out", "--spec", "tiny", "--episodes", "1", "--seed", "1"]])
def test_every_command_on_versions_refuses_a_datasets_folder_that_is_not_there(command):
    message = _one_line_exit([*command, "--datasets", "/nonexistent"], 2)
    assert message.startswith("Error: no datasets folder at /nonexistent (from --datasets)")


@pytest.mark.parametrize("args, message", [
    (["build", "v1", "--seed", "1", "--spec", "tiny"], "version v1 already exists"),
    (["reveal", "v1"], "built from the public seed 11: nothing to reveal"),
    (["stage", "solve", "x"], "no build of x in progress"),
])
def test_refused_requests_exit_1_in_one_line(datasets, args, message):
    assert message in _one_line_exit([*args, "--datasets", str(datasets), "--quiet"]
                                     if args[0] != "reveal" else
                                     [*args, "--datasets", str(datasets)], 1)


def test_calibrate_into_a_missing_folder_is_usage(tmp_path):
    line = _one_line_exit(["calibrate", "--out", str(tmp_path / "no" / "m.json")], 2)
    assert "no writable folder there" in line


def test_serve_refuses_a_store_in_a_missing_folder(datasets, tmp_path):
    db = tmp_path / "missing" / "store.sqlite"
    line = _one_line_exit(["serve", "--datasets", str(datasets), "--db", str(db),
                           "--port", "0"], 2)
    assert line == f"Error: --db {db}: the folder {db.parent} does not exist"
    assert not db.parent.exists()
    # the same for the store named by the environment
    line = _one_line_exit(["serve", "--datasets", str(datasets), "--port", "0"], 2,
                          env={"SOKOFORGE_DB": str(db)})
    assert "does not exist" in line


def _sokoforge() -> str:
    return str(Path(sys.executable).parent / "sokoforge")  # the installed console script


@pytest.mark.slow
@pytest.mark.parametrize("sig, last, host, shown", [
    (signal.SIGINT, "stopped (Ctrl-C)", "127.0.0.1", "127.0.0.1"),
    (signal.SIGTERM, None, "::", "[::]")])  # an IPv6 address in brackets, as URLs write it
def test_a_server_says_where_it_serves_and_stops_with_0_on_ctrl_c_in_one_line_and_on_sigterm(
        datasets, tmp_path, sig, last, host, shown):
    root = tmp_path / "root"
    root.mkdir()
    (root / "demo").symlink_to(datasets / "v1", target_is_directory=True)
    (root / "public-W").symlink_to(REPOSITORY / "datasets" / "public-W",
                                   target_is_directory=True)  # a public game: a play page
    proc = subprocess.Popen([_sokoforge(), "serve", "demo", "public-W", "--datasets",
                             str(root), "--db", str(tmp_path / "s.sqlite"), "--port", "0",
                             "--host", host],
                            stderr=subprocess.PIPE, text=True)
    try:
        started = ""
        while "serving" not in started:
            started = proc.stderr.readline()
            assert started or proc.poll() is None, "the server did not start"
        base = started.split(" on ")[1].split(" ")[0]
        assert base.startswith(f"http://{shown}:") and base.split(":")[-1].isdigit(), started
        where = [proc.stderr.readline().split() for _ in range(4)]
        proc.send_signal(sig)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert where == [["home:", f"{base}/"], ["API", "docs:", f"{base}/api/docs"],
                     ["play", "public-W:", f"{base}/play/public-W"],
                     ["ARC", "face:", f"ARC_BASE_URL={base}", "(games",
                      "sokoban_v1,", "sokoban_public_W)"]]
    assert proc.returncode == 0, rest
    assert [line for line in rest.splitlines() if not line[:4].isdigit()] == (  # not a log line
        [last] if last else [])


def test_serve_help_quotes_the_line_a_server_stops_with_after_ctrl_c():
    from sokoforge.cli.serve import STOPPED_LINE

    shown = " ".join(CliRunner().invoke(main, ["serve", "--help"]).output.split())
    assert f'the one line "{STOPPED_LINE}"' in shown and STOPPED_LINE == "stopped (Ctrl-C)"


def test_an_interrupted_command_exits_130_with_one_line(datasets, monkeypatch):
    import pipeline.versions.versions

    def interrupted(_):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline.versions.versions, "version_table", interrupted)
    result = CliRunner().invoke(main, ["versions", "--datasets", str(datasets)])
    assert result.exit_code == 130
    assert result.output == "Error: interrupted\n"  # not click's "Aborted!"


# The console script's entry point, run as pip's script runs it, its import of ``module``
# held until a signal comes: a Ctrl-C at that very moment, driven rather than timed.
PAUSED_IMPORT = """
import importlib, sys, time

held, entry = sys.argv[1:]

class PauseAt:
    def find_spec(self, name, path=None, target=None):
        if name == held:
            print("importing", name, flush=True)
            time.sleep(60)

sys.meta_path.insert(0, PauseAt())
sys.argv = ["sokoforge", "versions"]
module, _, function = entry.partition(":")
sys.exit(getattr(importlib.import_module(module), function)())
"""


@pytest.mark.parametrize("module", ["click", "numpy"])
def test_ctrl_c_during_the_imports_exits_130_with_one_line(module):
    import tomllib

    from sokoforge.cli.errors import Interrupted
    from sokoforge.command import INTERRUPTED, INTERRUPTED_LINE

    entry = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["scripts"]
    proc = subprocess.Popen([sys.executable, "-P", "-c", PAUSED_IMPORT, module,
                             entry["sokoforge"]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPOSITORY)
    try:
        assert proc.stdout.readline() == f"importing {module}\n", proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err, out) == (130, "Error: interrupted\n", "")
    # the very line and status a command interrupted later ends with
    assert (INTERRUPTED, INTERRUPTED_LINE) == (Interrupted().exit_code,
                                               f"Error: {Interrupted().message}")


@pytest.mark.parametrize("to", ["process", "another thread"])
def test_ctrl_c_exits_130_with_one_line(to):
    """A real SIGINT to a real process: ``play`` waiting on a server that never answers. The
    kernel may hand a process's signal to any of its threads (numpy's, say): it must wake the
    event loop all the same."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(60)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([_sokoforge(), "play", "--url", url, "--key", "k"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            conn, _ = server.accept()  # the client is inside the command, waiting for us
            with conn:
                conn.recv(1024)
                threads = sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task"))
                began = time.monotonic()
                os.kill(threads[1] if to == "another thread" else proc.pid, signal.SIGINT)
                out, err = proc.communicate(timeout=10)
                took = time.monotonic() - began
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert took < 2.0
    assert err.strip().splitlines() == ["Error: interrupted"]
    assert out == ""


def test_reveal_without_a_terminal_refuses_unless_yes(datasets):
    line = _one_line_exit(["reveal", "s1", "--force", "--datasets", str(datasets)], 2)
    assert "no terminal to ask on; pass --yes" in line
    assert not (datasets / "s1" / "reveal.json").exists()
    shown = CliRunner().invoke(main, ["reveal", "s1", "--yes", "--force", "--datasets",
                                      str(datasets)])
    assert shown.exit_code == 0 and shown.stdout.strip().isdigit()
    assert (datasets / "s1" / "reveal.json").exists()


def test_reveal_asks_first_and_a_no_reveals_nothing(tmp_path, monkeypatch):
    import sokoforge.cli.rotate

    build("s2", datasets=tmp_path, spec=load_spec("tiny"), workers=QUIET)
    monkeypatch.setattr(sokoforge.cli.rotate, "interactive", lambda: True)
    no = CliRunner().invoke(main, ["reveal", "s2", "--force", "--datasets", str(tmp_path)],
                            input="n\n")
    assert no.exit_code == 1
    assert "Print the secret seed of s2" in no.stderr and no.stdout == ""
    assert "Error: s2: seed not revealed" in no.stderr
    assert not (tmp_path / "s2" / "reveal.json").exists()
    yes = CliRunner().invoke(main, ["reveal", "s2", "--force", "--datasets", str(tmp_path)],
                             input="y\n")
    assert yes.exit_code == 0 and yes.stdout.strip().isdigit()
    assert (tmp_path / "s2" / "reveal.json").exists()


def test_readme_cli_table_names_every_command_with_options_it_has():
    """The README's table of commands is `sokoforge --help`: the same commands, and every
    --option a row shows exists on that command."""
    import re

    import click

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme.split("## The CLI", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cell = re.match(r"\| `([a-z][a-z-]*)([^`]*)` \|", line)
        if cell:
            rows[cell.group(1)] = cell.group(2)
    assert set(rows) == set(main.commands)
    for name, usage in rows.items():
        command = main.commands[name]
        options = {o for p in command.params if isinstance(p, click.Option)
                   for o in p.opts + p.secondary_opts}
        if isinstance(command, click.Group):
            options |= {o for sub in command.commands.values() for p in sub.params
                        if isinstance(p, click.Option) for o in p.opts}
        shown = set(re.findall(r"--[a-z][a-z-]*", usage))
        assert shown <= options, f"{name}: {sorted(shown - options)} not options of {name}"
        required = {p.opts[0] for sub in [command, *getattr(command, "commands", {}).values()]
                    for p in sub.params if isinstance(p, click.Option) and p.required}
        assert required <= shown, f"{name}: the row omits {sorted(required - shown)}"
    # play needs a key or a name to register (one of the two, so neither is click-required)
    assert "--register NAME\\|--key KEY" in table


def test_no_help_points_to_a_file_the_repository_does_not_have():
    """Every document or repository path a --help names (``docs/...``, ``X.md``,
    ``pipeline/...``) is there: help may not send a user to a file they cannot open."""
    import re

    import click

    root = Path(__file__).resolve().parent.parent
    commands = [("sokoforge", main)]
    helps = []
    while commands:
        name, command = commands.pop()
        with click.Context(command, info_name=name) as context:
            helps.append((name, command.get_help(context)))
        commands += [(f"{name} {sub}", c) for sub, c in getattr(command, "commands", {}).items()]
    named = 0
    for name, text in helps:
        text = " ".join(text.split())  # a path that help wrapped onto two lines, joined
        for path in re.findall(r"(?<![\w/.$])((?:docs|pipeline|serve|engine|scripts|"
                               r"benchmarks|deploy)/[\w./-]*\w|[A-Z]\w*\.md)\b", text):
            named += 1
            assert (root / path).exists(), f"`{name} --help` names {path}, which is not there"
    assert named >= 2  # the theme fields' page, the difficulty model: the check sees paths
