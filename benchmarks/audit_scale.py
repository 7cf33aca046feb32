"""How ``repeat-tool-guard audit`` scales with a session's size.

Writes one synthetic Claude Code session of ``--audit-calls`` tool calls (a mix of
distinct reads, an edit-and-test cycle and a grep loop, with results of a
few hundred bytes) and audits it, every policy on, in a fresh
``python -m guard audit`` process; then does the same for the shared corpus
when it is present (``--corpus``). Reports the file size, the calls, the
wall time and the process's peak RSS. Not a test: no timing is asserted anywhere.
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


def _child(command: list[str], stdout: Path) -> tuple[float, float]:
    """Run ``command`` with stdout to a file: its wall seconds and its own
    peak RSS in MB (``wait4`` reports that child alone; the benchmark's
    process stays small, so the fork it starts from adds nothing)."""
    started = time.perf_counter()
    with open(stdout, "wb") as out:
        process = subprocess.Popen(command, stdout=out, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def _audit(paths: list[Path], out: Path) -> tuple[float, float, dict[str, int]]:
    """Wall seconds, peak RSS in MB, and the report's totals."""
    seconds, peak = _child([sys.executable, "-m", "guard", "audit", *map(str, paths), "--json"], out)
    totals = json.loads(out.read_bytes())["totals"]
    return seconds, peak, {k: totals[k] for k in ("files", "sessions", "calls")}


def _row(name: str, paths: list[Path], size: float, out: Path) -> Row:
    seconds, peak, totals = _audit(paths, out)
    return Row(
        section="audit, every policy, one fresh process each",
        name=name,
        rate=totals["calls"] / seconds,
        unit="calls/s",
        extra=f"{size:.1f} MB, {totals['calls']:,} calls in {seconds:.2f} s, peak RSS {peak:.0f} MB",
    )


async def audit_scale(settings: Settings) -> list[Row]:
    session, report = settings.tmpdir / "scale.jsonl", settings.tmpdir / "report.json"
    # Written by a child too, so this process never holds the session.
    write = (
        f"from pathlib import Path; from benchmarks.audit_scale import write_session; "
        f"write_session(Path({str(session)!r}), {settings.audit_calls})"
    )
    _child([sys.executable, "-c", write], settings.tmpdir / "write.out")
    rows = [_row("synthetic Claude Code session", [session], session.stat().st_size / 1e6, report)]
    session.unlink()
    corpus = settings.corpus
    if corpus is not None and corpus.is_dir():
        size = sum(p.stat().st_size for p in corpus.rglob("*") if p.is_file()) / 1e6
        rows.append(_row("shared corpus", [corpus], size, report))
    return rows
