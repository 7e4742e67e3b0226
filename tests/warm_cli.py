"""``sokoforge`` commands in processes forked from an interpreter that has imported the project
already: a real process each (its own pid, signals, exit status, stdin, stdout and stderr; a
child of that interpreter, not of the test), as
``python -c "from sokoforge.cli import main; main()" ARGS`` would be, without its second or so
of imports. For tests of a command's behaviour, not of a fresh interpreter's start.

The forking interpreter (one per test process, started on first use, ending with it) is
single-threaded: it accepts a request on a Unix socket (argv, environment, working folder,
descriptor limit, and the child's three standard descriptors), forks, sends back the child's
pid, then its exit status (as ``Popen.returncode`` gives it) once it has reaped it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, NoReturn

PRELOAD = ("sokoforge.cli", "serve.run", "serve.stores.sqlite", "serve.stores.sqlite_file",
           "pipeline.stages.build", "pipeline.rotate")
_MAX_REQUEST = 1 << 20
_lock = threading.Lock()
_server: tuple[subprocess.Popen, str] | None = None


class Forked:
    """A command's process, as ``subprocess.Popen`` gives one (the parts tests use)."""

    def __init__(self, conn: socket.socket, pid: int, stdout: Any, stderr: Any,
                 args: list[str]) -> None:
        self.conn, self.pid, self.stdout, self.stderr, self.args = conn, pid, stdout, stderr, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.conn], [], [], 0)[0]:
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._collect()
        assert self.returncode is not None
        return self.returncode

    def _collect(self) -> None:
        self.returncode = int(_line(self.conn))
        self.conn.close()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        """Everything left on the piped stdout and stderr (read whole, each in a thread), then
        the exit status."""
        pipes = [f for f in (self.stdout, self.stderr) if f is not None]
        got: dict[Any, str] = {}
        readers = [threading.Thread(target=lambda f=f: got.__setitem__(f, f.read()), daemon=True)
                   for f in pipes]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout)
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(timeout)
        for f in pipes:
            f.close()
        return got.get(self.stdout), got.get(self.stderr)


def _forking_interpreter() -> str:
    """The socket of this process's forking interpreter, started on first use."""
    global _server
    with _lock:
        if _server is None or _server[0].poll() is not None:
            path = os.path.join(tempfile.mkdtemp(prefix="sokoforge-warm-"), "fork.sock")
            proc = subprocess.Popen([sys.executable, "-P", __file__, path],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            atexit.register(_end, proc)
            _server = (proc, path)
        return _server[1]


def _end(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        proc.stdin.close()  # type: ignore[union-attr]
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def start(args: list[str], *, env: dict[str, str] | None = None, cwd: Path | str | None = None,
          stdout: Any = None, stderr: Any = subprocess.PIPE,
          nofile: int | None = None) -> Forked:
    """``sokoforge ARGS`` forked (``stdout``/``stderr``: ``subprocess.PIPE`` for a text pipe,
    None to share this process's, or an open file), in ``cwd`` with ``env`` (default: this
    environment) and at most ``nofile`` open descriptors."""
    ends: list[int] = [os.open(os.devnull, os.O_RDONLY)]
    mine: list[Any] = []
    for fd, how in ((1, stdout), (2, stderr)):
        if how == subprocess.PIPE:
            r, w = os.pipe()
            ends.append(w)
            mine.append(open(r, encoding="utf-8", errors="replace"))
        else:  # this process's own, or a file's
            ends.append(os.dup(fd if how is None else how if isinstance(how, int)
                               else how.fileno()))
            mine.append(None)
    conn, pid = _ask(args, ends, env=os.environ if env is None else env, cwd=cwd, nofile=nofile)
    return Forked(conn, pid, mine[0], mine[1], ["sokoforge", *args])


def _ask(args: list[str], fds: list[int], *, env: Any, cwd: Path | str | None,
         nofile: int | None, socket_path: str | None = None) -> tuple[socket.socket, int]:
    """Send the request (and ``fds``, closed here) to the forking interpreter; its connection
    (which gets the exit status) and the child's pid."""
    request = {"args": list(args), "env": dict(env), "cwd": str(cwd or os.getcwd()),
               "nofile": nofile}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path or _forking_interpreter())
    try:
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
    finally:
        for fd in fds:
            os.close(fd)
    return conn, int(_line(conn))


def _line(conn: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        part = conn.recv(64)
        assert part, "the forking interpreter ended before its child"
        line += part
    return line


def command() -> list[str]:
    """An argv prefix that runs ``sokoforge ARGS`` forked, from a shell too (a script on PATH):
    a small client passes the forking interpreter its own stdin, stdout, stderr, environment
    and folder, and exits with the command's status."""
    return [sys.executable, "-S", "-P", __file__, "--run", _forking_interpreter()]


def _client(socket_path: str, args: list[str]) -> None:
    conn, _ = _ask(args, [os.dup(0), os.dup(1), os.dup(2)], env=os.environ, cwd=None,
                   nofile=None, socket_path=socket_path)
    code = int(_line(conn))
    if code < 0:
        os.kill(os.getpid(), -code)
    sys.exit(code)


def run(args: list[str], *, timeout: float | None = None, **kw: Any
        ) -> subprocess.CompletedProcess:
    """``subprocess.run(..., capture_output=True, text=True)`` of ``sokoforge ARGS``, forked."""
    proc = start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    try:
        out, err = proc.communicate(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode or 0, out, err)


# -- the forking interpreter ----------------------------------------------------------------------

def _child(request: dict, fds: list[int], sockets: list[socket.socket], others: list[int]
           ) -> NoReturn:
    """In the fork: the request's descriptors as 0, 1 and 2, its folder and environment,
    then the command, whose ``SystemExit`` (or error) ends the process as it ends ``python -c``
    (threads joined, exit handlers run: loky's workers stopped, say)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for sock in sockets:  # by their objects, whose collection would close a reused number
        sock.close()
    for fd in others:
        os.close(fd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["nofile"] is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (request["nofile"],) * 2)
    from sokoforge.cli import main

    sys.argv = ["-c", *request["args"]]  # as `python -c "...; main()" ARGS` has it
    main()
    sys.exit(0)


def _serve(path: str) -> None:
    """Accept requests until stdin ends; fork each; report each child's exit status."""
    import importlib
    import warnings

    # its threads (numpy's OpenBLAS, jemalloc's, polars' spill cleaner) hold no lock a child
    # needs: the server forks its workers past the same imports
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    stdin = sys.stdin.fileno()
    while True:
        try:
            ready, _, _ = select.select([listener, stdin, wake_r], [], [])
        except InterruptedError:
            continue
        if stdin in ready and not os.read(stdin, 1024):
            return
        if wake_r in ready:
            os.read(wake_r, 1024)
        if listener in ready:
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                _child(request, fds, [listener, conn, *children.values()], [wake_r, wake_w])
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            conn.sendall(f"{pid}\n".encode())
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            done = children.pop(pid, None)
            if done is not None:
                with contextlib.suppress(OSError):
                    done.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                done.close()


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        _client(sys.argv[2], sys.argv[3:])
    else:
        _serve(sys.argv[1])
