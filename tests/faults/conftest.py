"""The fault and bad-input suite: every entry point (the commands, the hook,
the library's log writer and reader, the importers) given what a careless
or hostile user would give it. Each trial is deterministic and bounded: a
trial that uses over 20 s of CPU, or waits over 120 s, fails as a hang instead
of stalling the suite (CPU time, so a busy machine does not make a trial a
hang; the slowest trial uses about 1 s, and a virtual machine whose host is
busy can count several times that).

What every trial asserts: no traceback, one line on stderr for an error,
the documented exit code, and no session-log line lost or merged.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest

from guard.cli import main
from tests.guard.server.conftest import ServerProcess, StartServer

HANG_CPU_SECONDS = 20.0
HANG_SECONDS = 120.0
REPO = Path(__file__).resolve().parents[2]


class Hang(Exception):
    """A trial ran past ``HANG_SECONDS``."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    if frame is not None and frame.f_lineno is None:
        # An instruction with no line number (some loops' back jumps) would give
        # the traceback an entry pytest cannot print, ending the whole run:
        # raise at the next instruction that has one instead.
        timer = signal.ITIMER_PROF if signum == signal.SIGPROF else signal.ITIMER_REAL
        signal.setitimer(timer, 0.001)
        return
    if signum == signal.SIGPROF:
        raise Hang(f"the trial used over {HANG_CPU_SECONDS} s of CPU")
    raise Hang(f"the trial ran over {HANG_SECONDS} s")


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    """Fail a trial that hangs: one that spins is stopped by its CPU time,
    a blocking ``open`` or read by the wall clock; either fails with ``Hang``."""
    previous = {sig: signal.signal(sig, _alarm) for sig in (signal.SIGALRM, signal.SIGPROF)}
    signal.setitimer(signal.ITIMER_PROF, HANG_CPU_SECONDS)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class Run:
    code: int
    out: str
    err: str

    def clean_error(self, code: int) -> str:
        """Assert the run failed with ``code`` and one line, no traceback; the line."""
        assert self.code == code, (self.code, self.err)
        assert "Traceback" not in self.err
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


CLI = Callable[..., Run]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> CLI:
    """Run the command line in this process: ``cli(*argv, stdin=b"")``."""

    def run(*argv: str | os.PathLike[str], stdin: bytes = b"") -> Run:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capsys.readouterr()
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return Run(code, out, err)

    return run


def subprocess_run(*argv: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> Run:
    """The command in a fresh process (for what needs one: resource limits)."""
    done = subprocess.run(
        [sys.executable, "-m", "guard", *argv],
        input=stdin,
        capture_output=True,
        timeout=HANG_SECONDS,
        cwd=REPO,
        env=env,
        check=False,
    )
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """``repeat-tool-guard serve`` processes (see ``tests/guard/server``), killed at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, state_dir: Path | None = None, preexec_fn: Callable[[], None] | None = None) -> ServerProcess:
        where = () if any(a in ("--uds", "--port") for a in args) else ("--port", "0")
        server = ServerProcess(state_dir or tmp_path / "state", *where, *args, preexec_fn=preexec_fn)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
        if server.proc.stderr is not None:
            server.proc.stderr.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, unmounted afterwards; skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
