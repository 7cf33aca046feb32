"""How ``repeat-tool-guard audit`` scales with a session's size.

Writes one synthetic Claude Code session of ``--audit-calls`` tool calls (a mix of
distinct reads, an edit-and-test cycle and a grep loop, with results of a
few hundred bytes) and audits it, every policy on, in a fresh
``python -m guard audit`` process, against a fresh process replaying the
session log ``import`` makes of it with the same policies (what an audit
adds to the replay: the import and the measuring). Then a folder of four
such sessions (a quarter of the calls each) with ``--jobs 1`` and
``--jobs 2``, the shared corpus when it is present (``--corpus``), and
session logs of one failing call repeated ``--audit-calls`` times and a
tenth of that, audited and replayed under ``recommended``, which denies
nearly every call: their peak RSS should not grow with the denials.
Reports the wall time and each process's peak RSS. Not a test: no timing
is asserted anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._measure import Row
from benchmarks._transcripts import ClaudeCodeSession
from benchmarks.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def write_session(path: Path, calls: int) -> Path:
    """A Claude Code session of ``calls`` tool calls."""
    s = ClaudeCodeSession("scale")
    s.prompt("make the config loader read YAML too")
    listing = "src/cfg.py:12: def load_config(path):\n" * 8
    for n in range(calls):
        kind = n % 10
        if kind < 5:
            s.call("Read", {"file_path": f"src/module_{n % 997}.py"}, "def f():\n    return 1\n" * 10)
        elif kind < 7:
            s.call("Grep", {"pattern": "load_config", "path": "src"}, listing)
        elif kind == 7:
            s.call("Edit", {"file_path": "src/cfg.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"})
        else:
            s.call("Bash", {"command": "pytest -q", "description": f"run {n}"}, "1 failed", is_error=True)
    return s.write(path)


# Runs a Python command line (``-m module ...`` or ``-c code ...``) and, as it
# exits, writes its own peak RSS (VmHWM, kB) to a file: ``wait4``'s peak counts
# the benchmark process the child was forked from, whatever it has grown to.
_OWN_PEAK = """
import atexit, runpy, sys
peak, how, what, *rest = sys.argv[1:]

def tell() -> None:
    with open("/proc/self/status") as status, open(peak, "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])

atexit.register(tell)
if how == "-m":
    sys.argv = [what, *rest]
    runpy.run_module(what, run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c", *rest]
    exec(compile(what, "<string>", "exec"), {"__name__": "__main__"})
"""


def _child(command: list[str], stdout: Path) -> tuple[float, float, float]:
    """Run ``command`` (``python -m ...`` or ``python -c ...``) with stdout to
    a file: its wall seconds, its CPU seconds (user and system, its worker
    processes included) and its own peak RSS in MB."""
    peak = stdout.with_suffix(".peak")
    started = time.perf_counter()
    with open(stdout, "wb") as out:
        process = subprocess.Popen([command[0], "-c", _OWN_PEAK, str(peak), *command[1:]], stdout=out, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, int(peak.read_text()) / 1024


def _audit(paths: list[Path], out: Path, jobs: int = 1) -> tuple[float, float, float, dict[str, int]]:
    """Wall and CPU seconds, peak RSS in MB, and the report's totals."""
    command = [sys.executable, "-m", "guard", "audit", *map(str, paths), "--json", "--jobs", str(jobs)]
    seconds, cpu, peak = _child(command, out)
    totals = json.loads(out.read_bytes())["totals"]
    return seconds, cpu, peak, {k: totals[k] for k in ("files", "sessions", "calls")}


_REPLAY = """
import logging, sys, anyio, structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
from guard.audit import audit_config
from guard.verdicts import replay_log
anyio.run(replay_log, sys.argv[1], audit_config())
"""


def _row(name: str, paths: list[Path], size: float, out: Path) -> Row:
    seconds, _, peak, totals = _audit(paths, out)
    return Row(
        section="audit, every policy, one fresh process each",
        name=name,
        rate=totals["calls"] / seconds,
        unit="calls/s",
        extra=f"{size:.1f} MB, {totals['calls']:,} calls in {seconds:.2f} s, peak RSS {peak:.0f} MB",
    )


def _against_replay(session: Path, settings: Settings) -> list[Row]:
    """The audit of ``session`` against a replay (every policy, as the audit
    runs them) of the session log ``import`` makes of it: each a fresh
    process, interleaved over two rounds, the faster of each kept. Compared
    by CPU seconds: both are one process doing one thing, and on a shared
    machine their wall time also counts the other jobs' turns."""
    log, out = settings.tmpdir / "imported.jsonl", settings.tmpdir / "report.json"
    _child([sys.executable, "-m", "guard", "import", str(session), "-o", str(log)], settings.tmpdir / "import.out")
    replay: list[tuple[float, float, float]] = []
    audited: list[tuple[float, float, float, dict[str, int]]] = []
    for _ in range(2):
        replay.append(_child([sys.executable, "-c", _REPLAY, str(log)], settings.tmpdir / "replay.out"))
        audited.append(_audit([session], out))
    log.unlink()
    base_wall, base, base_peak = min(replay, key=lambda run: run[1])
    wall, cpu, peak, totals = min(audited, key=lambda run: run[1])
    calls = totals["calls"]
    section = f"audit, one {session.stat().st_size / 1e6:.0f} MB session of {calls:,} calls, every policy"
    return [
        Row(
            section=section,
            name="replay_log of its imported log",
            rate=calls / base,
            unit="calls/CPU-s",
            ratio=1.0,
            baseline="replay_log of its imported log",
            extra=f"{base:.2f} CPU-s ({base_wall:.2f} s wall), peak RSS {base_peak:.0f} MB",
        ),
        Row(
            section=section,
            name="repeat-tool-guard audit",
            rate=calls / cpu,
            unit="calls/CPU-s",
            ratio=base / cpu,
            baseline="replay_log of its imported log",
            extra=f"{cpu:.2f} CPU-s ({cpu / base:.2f}x the replay's; {wall:.2f} s wall), peak RSS {peak:.0f} MB",
            target="<= 1.5x the replay's CPU time",
            met=cpu <= 1.5 * base,
        ),
    ]


def _folder(settings: Settings) -> list[Row]:
    """A folder of four independent sessions (a quarter of the calls each),
    audited in one process and with two."""
    folder, out = settings.tmpdir / "folder", settings.tmpdir / "report.json"
    folder.mkdir(exist_ok=True)
    calls = max(settings.audit_calls // 4, 1)
    write = (
        f"from pathlib import Path; from benchmarks.audit_scale import write_session\n"
        f"for n in range(4): write_session(Path({str(folder)!r}) / f's{{n}}.jsonl', {calls})"
    )
    _child([sys.executable, "-c", write], settings.tmpdir / "write.out")
    timed = {jobs: _audit([folder], out, jobs) for jobs in (1, 2)}
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    one = timed[1][0]  # wall time: what running on both cores is for
    section = f"audit, a folder of 4 sessions, {timed[1][3]['calls']:,} calls in all"
    return [
        Row(
            section=section,
            name=f"--jobs {jobs}",
            rate=totals["calls"] / seconds,
            unit="calls/s",
            ratio=one / seconds,
            baseline="--jobs 1",
            extra=f"{seconds:.2f} s, peak RSS {peak:.0f} MB",
        )
        for jobs, (seconds, _, peak, totals) in timed.items()
    ]


_REPEATS = """
import sys
from bus import Agent, SessionLog, ToolCall, ToolResult
agent = Agent("main")
with SessionLog(sys.argv[1]) as log:
    for n in range(int(sys.argv[2])):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="Bash", args={"command": "pytest -q"})
        log.write_many([call, ToolResult.answering(call, "FAILED tests/test_x.py::test_a", is_error=True)])
"""


def _repeats(settings: Settings) -> list[Row]:
    """Audit and replay (``recommended``) of a log of one failing call
    repeated: what they keep must not grow with the calls denied."""
    rows = []
    for calls in (max(settings.audit_calls // 10, 1), settings.audit_calls):
        log = settings.tmpdir / "repeats.jsonl"
        log.unlink(missing_ok=True)
        _child([sys.executable, "-c", _REPEATS, str(log), str(calls)], settings.tmpdir / "write.out")
        for what, command in (
            ("audit", ["audit", str(log), "--config", "recommended", "--json"]),
            ("replay", ["replay", str(log), "--config", "recommended"]),
        ):
            seconds, _, peak = _child([sys.executable, "-m", "guard", *command], settings.tmpdir / "repeats.out")
            rows.append(
                Row(
                    section="audit, every policy, one fresh process each",
                    name=f"{what}, one failing call repeated {calls:,} times",
                    rate=calls / seconds,
                    unit="calls/s",
                    extra=f"recommended denies nearly all; peak RSS {peak:.0f} MB",
                )
            )
        log.unlink()
    return rows


async def audit_scale(settings: Settings) -> list[Row]:
    session = settings.tmpdir / "scale.jsonl"
    # Written by a child too, so this process never holds the session.
    write = (
        f"from pathlib import Path; from benchmarks.audit_scale import write_session; "
        f"write_session(Path({str(session)!r}), {settings.audit_calls})"
    )
    _child([sys.executable, "-c", write], settings.tmpdir / "write.out")
    rows = _against_replay(session, settings)
    session.unlink()
    rows += _folder(settings)
    rows += _repeats(settings)
    corpus = settings.corpus
    if corpus is not None and corpus.is_dir():
        size = sum(p.stat().st_size for p in corpus.rglob("*") if p.is_file()) / 1e6
        rows.append(_row("shared corpus", [corpus], size, settings.tmpdir / "report.json"))
    return rows
