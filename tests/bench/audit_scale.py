"""How ``repeat-tool-guard audit`` scales with a session's size.

    python -m tests.bench.audit_scale [--calls 100000] [--corpus ../shared/corpus]

Writes one synthetic Claude Code session of ``--calls`` tool calls (a mix of
distinct reads, an edit-and-test cycle and a grep loop, with results of a
few hundred bytes) and audits it, every policy on, in a fresh
``python -m guard audit`` process; then does the same for the shared corpus
when it is present. Prints the file size, the calls, the wall time and the
process's peak RSS. Not a test: no timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.guard.importers._transcripts import ClaudeCodeSession

REPO = Path(__file__).resolve().parents[2]


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    args = parser.parse_args(argv)
    print(f"{'audited':<28} {'size':>9} {'calls':>8} {'wall':>8} {'peak RSS':>9}")
    with tempfile.TemporaryDirectory(prefix="rtg-audit-scale-") as tmp:
        session, report = Path(tmp) / "scale.jsonl", Path(tmp) / "report.json"
        # Written by a child too, so this process never holds the session.
        write = (
            f"from pathlib import Path; from tests.bench.audit_scale import write_session; "
            f"write_session(Path({str(session)!r}), {args.calls})"
        )
        _child([sys.executable, "-c", write], Path(tmp) / "write.out")
        seconds, peak, totals = _audit([session], report)
        size = session.stat().st_size / 1e6
        print(
            f"{'synthetic Claude session':<28} {size:>6.1f} MB {totals['calls']:>8} {seconds:>6.2f} s {peak:>6.0f} MB"
        )
        if args.corpus.is_dir():
            size = sum(p.stat().st_size for p in args.corpus.rglob("*") if p.is_file()) / 1e6
            seconds, peak, totals = _audit([args.corpus], report)
            print(f"{'shared corpus':<28} {size:>6.1f} MB {totals['calls']:>8} {seconds:>6.2f} s {peak:>6.0f} MB")


if __name__ == "__main__":
    main()
