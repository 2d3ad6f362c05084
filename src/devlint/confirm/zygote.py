"""A warm process that forks one child per file, so that a `devlint confirm` run imports torch
once per worker thread instead of once per file.

Invariant: nothing of one file's run can reach the next. The warm process (the zygote) imports
torch, `devlint.confirm.child` and `torch._dynamo` (which the child's first torch mode imports
anyway) and does nothing else: it never imports, builds or runs user code, and never computes
with torch. Each file runs in a fresh fork of it, which never returns into the zygote's loop:
it ends with `os._exit`, whatever the user's code raises. Each fork so starts from the state a
fresh interpreter has once it has imported torch (its folder, limits, session, streams and
torch's random seed made as `python -m devlint.confirm.child` would have them).

The parent never imports torch; the zygote is started in the run's environment and answers on
a socket pair. A request carries the file's folder, its memory limit, and the child's pipes
(standard streams, result channel, progress) as file descriptors; the zygote forks, replies
with the child's pid, then with its exit status (as `subprocess.Popen.returncode` reads). Where
the zygote cannot fork safely (a thread besides numpy's BLAS pool, CUDA already initialized, no
/proc), cannot start, or has died, `spawn` answers None and the file runs in a fresh interpreter
as before.
"""
from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

_POOL: Optional[_Pool] = None


@contextmanager
def warm_processes(startup_limit: float) -> Iterator[None]:
    """Within the block, `spawn` forks each file's child from one warm process per thread,
    started on its first file within `startup_limit` seconds; on leaving, they all end."""
    global _POOL
    outer, _POOL = _POOL, _Pool(startup_limit)
    try:
        yield
    finally:
        pool, _POOL = _POOL, outer
        pool.close()


def spawn(env: dict, cwd: Path, memory: Optional[int], channel: int, progress: int) -> Optional[Child]:
    """The calling thread's zygote forks a child for one file (run in `cwd`, its address space
    limited to `memory` bytes or not at all, writing its result on `channel` and its phases on `progress`);
    None outside `warm_processes`, or where no zygote can serve."""
    pool = _POOL
    for _ in range(2):  # a zygote that died since its last file is replaced, once
        zygote = pool.zygote(env) if pool is not None else None
        child = zygote.spawn(cwd, memory, channel, progress) if zygote is not None else None
        if child is not None or zygote is None:
            return child
        pool.discard(zygote)
    return None


class _Pool:
    def __init__(self, startup_limit: float) -> None:
        self.startup_limit = startup_limit
        self.lock = threading.Lock()
        self.zygotes: dict[int, Zygote] = {}  # thread ident -> its zygote
        self.cold = False  # a zygote could not start or fork safely: the others would not either

    def zygote(self, env: dict) -> Optional[Zygote]:
        """The calling thread's zygote for `env`, started on first use; None where none can serve."""
        thread = threading.get_ident()
        with self.lock:
            if self.cold:
                return None
            zygote = self.zygotes.get(thread)
        if zygote is not None and zygote.env == env and zygote.process.poll() is None:
            return zygote
        if zygote is not None:  # another environment, or it died since its last file
            self.discard(zygote)
        zygote = Zygote.started(env, self.startup_limit)
        with self.lock:
            if zygote is None:
                self.cold = True
            else:
                self.zygotes[thread] = zygote
        return zygote

    def discard(self, zygote: Zygote) -> None:
        with self.lock:
            self.zygotes = {thread: z for thread, z in self.zygotes.items() if z is not zygote}
        zygote.close()

    def close(self) -> None:
        with self.lock:
            zygotes, self.zygotes = list(self.zygotes.values()), {}
        for zygote in zygotes:
            zygote.close()


class Zygote:
    """The parent's side of one warm process."""

    def __init__(self, env: dict, startup_limit: float) -> None:
        self.env = env
        self.socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # its standard streams are pipes, as a child's are (the forks keep the stream objects Python
        # made for them): an input at its end, an output nobody reads
        (stdin, unwritten), (unread, output) = os.pipe(), os.pipe()
        os.close(unwritten)
        os.close(unread)
        try:
            with theirs:
                # cwd: the folder that holds devlint, so that the `-m` entry on sys.path finds nothing of the user's
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "devlint.confirm.zygote", str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                    stdin=stdin, stdout=output, stderr=output,
                    start_new_session=True, env=env, cwd=str(Path(__file__).resolve().parents[2]))
        finally:
            os.close(stdin)
            os.close(output)
        self.socket.settimeout(startup_limit)
        self.ready = self._receive() == {"ready": True}
        self.socket.settimeout(None)

    @classmethod
    def started(cls, env: dict, startup_limit: float) -> Optional[Zygote]:
        """A zygote ready to fork, or None: it could not start in time, or cannot fork safely here."""
        try:
            zygote = cls(env, startup_limit)
        except OSError:  # no Unix socket pairs of this kind here
            return None
        if not zygote.ready:
            zygote.close()
            return None
        return zygote

    def _receive(self) -> Optional[dict]:
        try:
            data = self.socket.recv(4096)
        except OSError:  # a timeout, or the zygote is gone
            return None
        return json.loads(data) if data else None

    def spawn(self, cwd: Path, memory: Optional[int], channel: int, progress: int) -> Optional[Child]:
        (stdin, to_stdin), (from_stdout, stdout), (from_stderr, stderr) = os.pipe(), os.pipe(), os.pipe()
        request = json.dumps({"cwd": os.path.abspath(cwd), "memory": memory}).encode()  # the zygote's cwd is not ours
        try:
            socket.send_fds(self.socket, [request], [stdin, stdout, stderr, channel, progress])
            reply = self._receive()
        except OSError:
            reply = None
        for fd in (stdin, stdout, stderr):  # the child holds them now
            os.close(fd)
        if reply is None or "pid" not in reply:
            for fd in (to_stdin, from_stdout, from_stderr):
                os.close(fd)
            return None
        return Child(self, reply["pid"], to_stdin, from_stdout, from_stderr)

    def close(self) -> None:
        self.socket.close()  # an idle zygote reads the end of its socket and exits at once
        try:
            self.process.wait(1)
        except subprocess.TimeoutExpired:  # still waiting for a child (the run was interrupted)
            self.process.kill()
            self.process.wait()


class Child:
    """The parent's handle on a child forked by a zygote: what `run_child` uses of a Popen."""

    def __init__(self, zygote: Zygote, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: Optional[int] = None  # stays None if the zygote died before telling it
        self.streams = (stdin, stdout, stderr)

    def communicate(self, input: bytes) -> tuple[bytes, bytes]:
        """Write `input` to the child's stdin, read its stdout and stderr to their end, wait."""
        stdin, stdout, stderr = self.streams
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [threading.Thread(target=_drain, args=(fd, sink)) for fd, sink in ((stdout, out), (stderr, err))]
        for reader in readers:
            reader.start()
        try:
            view = memoryview(input)
            while view:
                view = view[os.write(stdin, view):]
        except BrokenPipeError:  # it ended without reading its job
            pass
        finally:
            os.close(stdin)
        for reader in readers:
            reader.join()
        self.wait()
        return b"".join(out), b"".join(err)

    def wait(self) -> Optional[int]:
        if self.returncode is None:
            reply = self.zygote._receive() or {}
            self.returncode = reply.get("returncode")
        return self.returncode


def _drain(fd: int, sink: list) -> None:
    sink.extend(iter(lambda: os.read(fd, 1 << 16), b""))
    os.close(fd)


# --- the zygote itself ------------------------------------------------------------------------------
def serve(fd: int) -> None:
    """Import torch, say whether forking is safe here, then fork one child per request until the
    parent closes its end (or dies)."""
    import warnings

    _die_with_parent()
    connection = socket.socket(fileno=fd)
    try:
        import numpy  # noqa: F401 - torch imports it too; here first, to tell its threads from others'
    except Exception:  # noqa: BLE001 - absent or broken: torch's import decides
        pass
    # numpy's BLAS starts an idle thread pool as it loads, and stops it around each fork itself
    # (pthread_atfork); any other thread could hold a lock that a fork would copy, held forever
    blas_threads = _threads()
    import torch

    from devlint.confirm import child

    try:  # what the child's recorders (torch modes) import on first use: 1.5 s a file, paid here once
        import torch._dynamo  # noqa: F401
    except Exception:  # noqa: BLE001 - a torch that lacks it or refuses this Python: the child fares as it can
        pass
    forkable = (threading.active_count() == 1 and blas_threads is not None and _threads() == blas_threads
                and not torch.cuda.is_initialized())
    connection.send(json.dumps({"ready": forkable}).encode())
    while forkable:
        try:
            data, fds, _, _ = socket.recv_fds(connection, 65536, 8)
        except OSError:
            break
        if not data:
            break
        request = json.loads(data)
        try:
            with warnings.catch_warnings():  # Python 3.12+ warns of the BLAS threads; an error filter would lose the child
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:
            reply = {"error": str(exc)}
        else:
            if pid == 0:
                _child(connection, request, fds, torch, child)
            reply = {"pid": pid}
        for received in fds:
            os.close(received)
        try:
            connection.send(json.dumps(reply).encode())
            if "pid" in reply:
                _, status = os.waitpid(pid, 0)
                connection.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            break
    os._exit(0)  # skip the interpreter's teardown (seconds with torch loaded)


def _child(connection: socket.socket, request: dict, fds: list[int], torch, child) -> None:
    """In the fork: become what `python -m devlint.confirm.child` started in the file's folder
    would be, run the file, and exit; never returns into the zygote's loop."""
    import traceback

    status = 1
    try:
        connection.close()
        stdin, stdout, stderr, channel, progress = fds
        for fd, standard in ((stdin, 0), (stdout, 1), (stderr, 2)):  # first, so that what follows can report
            os.dup2(fd, standard)
            os.close(fd)
        os.setsid()
        limit_resources(request["memory"])
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]  # as `-m` puts it; signal handlers are a fresh interpreter's (the zygote set none)
        sys.argv = [child.__file__, str(channel), str(progress)]
        # a fresh interpreter seeds torch's CPU generator from the OS (random reseeds itself at a fork)
        torch.default_generator.seed()
        status = child.work(channel, progress)
    except SystemExit as exc:  # as the interpreter reports an uncaught one
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter reports an uncaught exception
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - a closed stream must not keep the fork alive
                pass
        os._exit(status)


def limit_resources(memory: Optional[int]) -> None:
    """What a file's process may take: `memory` bytes of address space (None: no limit, for runs
    that may initialize CUDA), and no core dump. Called in the new process before it runs anything
    (a fork, or a `preexec_fn`: hence `resource` is imported with this module, not here)."""
    if memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _threads() -> Optional[int]:
    """The threads of this process (Python's and native ones), or None where /proc cannot tell."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _die_with_parent() -> None:
    """End the zygote with the thread that started it (Linux); elsewhere it ends when its socket does."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    serve(int(sys.argv[1]))
