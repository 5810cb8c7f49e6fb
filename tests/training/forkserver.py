"""Running a project's scripts without paying a framework's import each time.

A script run (``python train.py ...``) spends most of a short test run importing torch (and
torch._dynamo, which torch.optim pulls in) or MindSpore: about 4 of its 6 seconds here. This
module is that interpreter, started once per test worker and framework with the framework
imported; each run is a fork of it that runs the script as ``python SCRIPT ARGS`` would, as
``__main__`` with its argv, directory, environment and standard streams, and ends as that
interpreter ends (threads joined, atexit handlers run, an uncaught exception printed and exit
1). The training is the framework's own, in a process of its own; what a fresh interpreter
does before the script's first line (a missing or broken framework, an import-time setting)
is covered by the launcher, image and checks tests, which start their interpreters fresh.

``TRAIN_TEMPLATE_FORKSERVER=0`` runs every script in a fresh interpreter instead.

Run as ``python forkserver.py FRAMEWORK SOCKET``; the client is :class:`Server`."""

from __future__ import annotations

import atexit
import builtins
import contextlib
import importlib
import importlib.machinery
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import tokenize
import traceback
import types
from collections.abc import Mapping
from pathlib import Path

# What each framework's runs import before their first line, imported once here.
PRELOAD = {
    "pytorch": ("numpy", "yaml", "torch", "torch._dynamo", "torch.utils.data"),
    "mindspore": ("numpy", "yaml", "mindspore", "mindspore.dataset", "mindspore.nn"),
}


# A project's framework, by what its model imports.
IMPORTS = {"mindspore": "import mindspore", "pytorch": "import torch"}
# Variables an interpreter or a framework reads as it starts, before a script's first line: a
# run whose environment sets them otherwise than the server's starts a fresh interpreter.
AT_START = ("PYTHON", "OMP_", "MKL_", "KMP_", "GLOG", "TORCH_", "MS_", "LD_")
SET_PER_RUN = ("PYTHONPATH", "PYTHON")
BASE_PATH: list[str] = []  # the server's sys.path without its script's directory


# --- the server: one process, one run at a time ------------------------------------------------


def _run_script(request: dict) -> int:
    """In the forked child: the script as ``python SCRIPT ARGS`` runs it; its exit status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    path = os.path.abspath(sys.argv[0])  # a script's __file__, as Python 3.9 and later set it
    # As the interpreter starts: the script's directory, then PYTHONPATH, then the rest.
    extra = [entry for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [os.path.dirname(path), *extra, *BASE_PATH]
    try:
        _exec_main(path)
        code = 0
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt as uncaught:
        _print_uncaught(uncaught, path)
        code = -signal.SIGINT
    except BaseException as uncaught:  # noqa: BLE001 - the interpreter's own handling of it
        _print_uncaught(uncaught, path)
        code = 1
    # The interpreter's own end: non-daemon threads joined, then the atexit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    return code


def _exec_main(path: str) -> None:
    """The script as the module __main__, as the interpreter runs ``python SCRIPT`` (runpy's
    run_path would make sys.argv[0] absolute)."""
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    with tokenize.open(path) as source:  # its coding line, if any, as the interpreter reads it
        code = compile(source.read(), path, "exec")
    exec(code, main.__dict__)  # noqa: S102 - what python SCRIPT does


def _print_uncaught(error: BaseException, path: str) -> None:
    """The traceback an interpreter prints, from the script's first frame (not this module's,
    which a fresh interpreter does not pass through)."""
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename != path:
        frames = frames.tb_next
    traceback.print_exception(type(error), error, frames or error.__traceback__)


def _child(conn: socket.socket, listener: socket.socket, request: dict, fds: list[int]) -> None:
    listener.close()
    conn.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    code = 1
    try:
        code = _run_script(request)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing left to write
                stream.flush()
        if code < 0:  # ended by Ctrl-C: as Python does, by the signal itself
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)


def serve(framework: str, path: str) -> None:
    BASE_PATH.extend(sys.path[1:])
    for name in PRELOAD[framework]:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    print("ready", flush=True)
    parent = os.getppid()
    listener.settimeout(5)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test worker is gone: so is its server
                return
            continue
        conn.settimeout(None)
        with conn:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            request = json.loads(message)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(conn, listener, request, fds)
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):  # a client gone (timed out) is no reason to stop
                conn.sendall(f"{pid}\n".encode())
            _, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())


# --- the client: a test worker's runs -----------------------------------------------------------


class Server:
    """A fork server for one framework, started on first use, ended with the test worker."""

    def __init__(self, framework: str) -> None:
        self.directory = tempfile.mkdtemp(prefix=f"forkserver-{framework}-")
        self.path = os.path.join(self.directory, "socket")
        self.process = subprocess.Popen(
            [sys.executable, __file__, framework, self.path],
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            cwd=self.directory,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the {framework} fork server did not start: {line!r}")

    def run(
        self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """``python ARGV`` in cwd, as subprocess.run(capture_output=True, timeout=...) runs it:
        stdin empty, the exit status negative for a signal, killed at the timeout."""
        with (
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            open(os.devnull, "rb") as null,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn,
        ):
            conn.connect(self.path)
            request = json.dumps({"argv": argv, "cwd": str(cwd), "env": env}).encode()
            socket.send_fds(conn, [request], [null.fileno(), out.fileno(), err.fileno()])
            replies = conn.makefile("r")
            pid = int(replies.readline())
            conn.settimeout(timeout)
            try:
                code = int(replies.readline())
            except TimeoutError:  # as subprocess.run: the run killed, then the exception
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(argv, timeout) from None
            out.seek(0)
            err.seek(0)
            stdout, stderr = (f.read().decode(errors="replace") for f in (out, err))
        return subprocess.CompletedProcess(["python", *argv], code, stdout, stderr)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        shutil.rmtree(self.directory, ignore_errors=True)


_servers: dict[str, Server] = {}


def server(framework: str) -> Server:
    """This test worker's server for a framework, started on first use."""
    if framework not in _servers:
        _servers[framework] = Server(framework)
        atexit.register(_servers[framework].close)
    return _servers[framework]


def _at_start(env: Mapping[str, str]) -> dict[str, str]:
    # PYTHONPATH is the request's sys.path; PYTHON names the launch scripts' interpreter, which
    # neither Python nor a framework reads (the run's environment still holds both).
    return {k: v for k, v in env.items() if k.startswith(AT_START) and k not in SET_PER_RUN}


def forkable(project: Path, argv: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """The framework whose server runs ``python ARGV`` in the project as a fresh interpreter
    would: a script, run with the variables read at start-up as the server has them; None
    for a fresh interpreter (and for every run with TRAIN_TEMPLATE_FORKSERVER=0)."""
    if env.get("TRAIN_TEMPLATE_FORKSERVER", "1") == "0":
        return None
    if not argv or not argv[0].endswith(".py") or _at_start(env) != _at_start(os.environ):
        return None
    try:
        model = (project / "src" / "model.py").read_text(encoding="utf-8")
    except OSError:
        return None
    return next((name for name, word in IMPORTS.items() if word in model), None)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
