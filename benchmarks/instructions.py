"""Instructions a tool call costs, counted by callgrind: the figure that does
not swing with a shared machine's load.

    python -m benchmarks.instructions [--calls 1200] [--warmup 200] [POLICY ...]

Each POLICY (``remind``, ``turns``, ``loops``, ``rescue``, ``all``; default
``remind loops``), configured as the ``fullpath`` section configures it, runs
a bus + session log + guard over that section's small-argument call stream,
once for ``--calls`` calls and once for ``--warmup`` calls, each under
``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0``. The difference
divided by the calls between is what one more call costs, start-up and
imports left out. Ratios are against the first POLICY. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

POLICIES = ("remind", "turns", "loops", "rescue", "all")


def run(policy: str, count: int) -> None:
    """The measured program: ``count`` calls of the stream through ``policy``."""
    import logging

    import anyio
    import structlog

    from benchmarks import stream
    from benchmarks.fullpath import bench_overrides, policy_configs
    from bus import Agent, Bus, SessionLog, ToolResult
    from guard import Guard

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    calls = stream.calls(4096, agent=Agent("main"))
    results = stream.results(calls)

    async def main() -> None:
        with tempfile.TemporaryDirectory() as folder:
            configs, _ = policy_configs(bench_overrides(Path(folder)))  # the configs the timed sections run
            bus = Bus()
            Guard(configs[policy]).attach(bus)
            with SessionLog(Path(folder) / "s.jsonl").attach(bus):
                for call, result in zip(calls[:count], results, strict=False):
                    decision = await bus.decide(call)
                    await bus.publish(result if decision.allowed else ToolResult.denial(call, decision))

    anyio.run(main)


def _instructions(policy: str, count: int) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/cg.out", sys.executable,
             "-m", "benchmarks.instructions", "--run", policy, str(count)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"callgrind reported no count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="*", metavar="POLICY", help=f"{', '.join(POLICIES)} (default: remind loops)")
    parser.add_argument("--calls", type=int, default=1200)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--run", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        run(args.run[0], int(args.run[1]))
        return 0
    if args.calls <= args.warmup:
        parser.error("--calls must be more than --warmup")
    for policy in args.policies:
        if policy not in POLICIES:
            parser.error(f"unknown policy {policy!r}: pick from {', '.join(POLICIES)}")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    base = 0.0
    for policy in args.policies or ["remind", "loops"]:
        per_call = (_instructions(policy, args.calls) - _instructions(policy, args.warmup)) / (args.calls - args.warmup)
        base = base or per_call
        print(f"{policy:8} + log  {per_call:>10,.0f} instructions a call  {per_call / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
