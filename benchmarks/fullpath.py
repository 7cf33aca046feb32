"""The full path of one tool call: decide, publish the result, guard, log.

A "tool call" here is what a runtime does per call: ``await bus.decide(call)``
then ``await bus.publish(result)`` (for a denied call, the denial as its
result: the tool does not run), with every enabled policy and the session
log attached, reminders included (they are published and logged too). Each
policy that ``Config`` knows and this build implements is measured alone,
then all together; ``todo`` rows say which ones this build lacks. A
policy's row runs whole sessions (the pool of 4,096 calls, 256 with 100 KB
arguments, each batch a new guard), so a cost paid once a session, such as
``rescue`` starting its ask command, is spread over a session's calls.
Three sections: small arguments; shell commands with ~2 KB grep-like
results whose timestamps move (so comparing results means normalising
them); 100 KB arguments.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from benchmarks import stream
from benchmarks._measure import Case, Row, Timing, measure
from benchmarks.settings import Settings
from bus import Agent, Bus, SessionLog, ToolCall, ToolResult
from guard import Guard, build_policies
from guard.config import Config
from guard.policies.registry import builtin_names

__all__ = ["bench_overrides", "fullpath", "policy_configs"]

_ASK = "#!/bin/sh\necho 'Use the output you already have instead of searching again.'\n"


def bench_overrides(tmpdir: Path) -> dict[str, dict[str, Any]]:
    """Per-section settings the benchmark needs beyond the defaults: a real
    ask command for ``rescue`` (it answers once; later escalations of the
    same loop are served from the policy's advice cache)."""
    ask = tmpdir / "ask-model"
    ask.write_text(_ASK)
    ask.chmod(0o700)
    return {"rescue": {"ask_command": os.fspath(ask)}}


_POOL = 4096


def policy_configs(overrides: dict[str, dict[str, Any]]) -> tuple[dict[str, Config], list[str]]:
    """A config with each implemented policy alone (and ``all`` when there
    are several), and the sections this build does not implement yet."""
    base = Config()
    sections = list(builtin_names())
    alone: dict[str, Config] = {}
    missing: list[str] = []
    for name in sections:
        changes = {
            other: msgspec.structs.replace(
                getattr(base, other), enabled=other == name, **(overrides.get(other, {}) if other == name else {})
            )
            for other in sections
        }
        config = Config(**changes)
        if [p.name for p in build_policies(config)] == [name]:
            alone[name] = config
        else:
            missing.append(name)
    if len(alone) > 1:
        alone["all"] = Config(
            **{
                name: msgspec.structs.replace(getattr(base, name), enabled=True, **overrides.get(name, {}))
                for name in alone
            }
        )
    return alone, missing


def _pairs(count: int, arg_bytes: int, *, shell: bool = False) -> list[tuple[ToolCall, ToolResult]]:
    agent = Agent("bench")
    if shell:
        calls = stream.shell_calls(count, agent=agent)
        return list(zip(calls, stream.grep_results(calls), strict=True))
    calls = stream.calls(count, agent=agent, arg_bytes=arg_bytes)
    return list(zip(calls, stream.results(calls), strict=True))


def _bare(pairs: list[tuple[ToolCall, ToolResult]]) -> Case:
    mask = len(pairs) - 1

    async def handler(event: Any) -> None:
        return None

    async def case(n: int) -> None:
        for i in range(n):
            call, result = pairs[i & mask]
            await handler(call)
            await handler(result)

    return case


def _path(pairs: list[tuple[ToolCall, ToolResult]], settings: Settings, config: Config | None, log: bool) -> Case:
    mask = len(pairs) - 1
    path = settings.tmpdir / "fullpath.jsonl"

    async def case(n: int) -> None:
        bus = Bus()
        if config is not None:
            Guard(config).attach(bus)
        session: SessionLog | None = None
        if log:
            session = SessionLog(path).attach(bus)
        decide, publish = bus.decide, bus.publish
        try:
            for i in range(n):
                call, result = pairs[i & mask]
                decision = await decide(call)
                await publish(result if decision.allowed else ToolResult.denial(call, decision))
        finally:
            if session is not None:
                session.close()
                os.unlink(path)

    return case


async def _log_lines(pairs: list[tuple[ToolCall, ToolResult]], settings: Settings, config: Config) -> list[list[bytes]]:
    """The lines ``Bus + remind + session log`` writes for each pair (the
    call, the result, a reminder when one fires), from one pass of the pool."""
    path = settings.tmpdir / "fullpath-lines.jsonl"
    bus = Bus()
    Guard(config).attach(bus)
    with SessionLog(path).attach(bus):
        for call, result in pairs:
            decision = await bus.decide(call)
            await bus.publish(result if decision.allowed else ToolResult.denial(call, decision))
    groups: list[list[bytes]] = []
    with open(path, "rb") as file:
        file.readline()  # the header, written once per log
        for line in file:
            if line.startswith(b'{"type":"tool/call"'):
                groups.append([])
            groups[-1].append(line)
    os.unlink(path)
    return groups


def _raw_writes(groups: list[list[bytes]], settings: Settings) -> Case:
    mask = len(groups) - 1
    path = settings.tmpdir / "fullpath-raw.jsonl"

    async def case(n: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o600)
        try:
            for i in range(n):
                for line in groups[i & mask]:
                    os.write(fd, line)
        finally:
            os.close(fd)
            os.unlink(path)

    return case


async def fullpath(settings: Settings) -> list[Row]:
    configs, missing = policy_configs(bench_overrides(settings.tmpdir))
    rows: list[Row] = []
    for label, arg_bytes, shell in (
        ("small arguments", 0, False),
        ("shell commands, ~2 KB grep-like results", 0, True),
        ("100 KB arguments", stream.LARGE_ARGS_BYTES, False),
    ):
        pairs = _pairs(_POOL if not arg_bytes else 256, arg_bytes, shell=shell)
        section = f"full path per tool call, {label}"
        cases: list[tuple[str, Case]] = [
            ("runtime loop, no bus", _bare(pairs)),
            ("Bus alone", _path(pairs, settings, None, log=False)),
            ("Bus + session log", _path(pairs, settings, None, log=True)),
        ]
        cases.append(("Bus + remind", _path(pairs, settings, configs["remind"], log=False)))
        groups = await _log_lines(pairs, settings, configs["remind"])
        cases.append(("its log lines as raw os.writes", _raw_writes(groups, settings)))
        cases.extend(
            (f"Bus + {name} + session log", _path(pairs, settings, config, log=True))
            for name, config in configs.items()
        )
        # Every batch is one whole session (the pool's calls, one new guard),
        # interleaved with the others: what a policy does once per session
        # (rescue's ask command, a process start) is spread over a session's
        # calls, not over however few calls a calibrated batch would hold.
        timings = await measure(cases, seconds=settings.seconds, repeat=max(settings.repeat, 5), fixed=len(pairs))
        alone = timings["Bus alone"]
        # The floor of a tool call with remind and the log: the guard's own
        # work and the log's os.writes, each measured alone in this run.
        floor = timings["Bus + remind"].micros + timings["its log lines as raw os.writes"].micros
        for name, timing in timings.items():
            target, met = _target(name, timing, timings, floor, large=bool(arg_bytes))
            rows.append(
                Row(
                    section=section,
                    name=name,
                    rate=timing.rate,
                    unit="tool calls/s",
                    micros=timing.micros,
                    ratio=timing.rate / alone.rate,
                    baseline="Bus alone",
                    extra=(f"{timing.micros / floor:.2f}× its floor; " if name == "Bus + remind + session log" else "")
                    + (
                        _added(timing.micros, alone.micros)
                        if name not in ("runtime loop, no bus", "Bus alone", "its log lines as raw os.writes")
                        else ""
                    ),
                    target=target,
                    met=met,
                )
            )
        rows.extend(
            Row(
                section=section,
                name=f"Bus + {name} + session log",
                rate=0.0,
                unit="tool calls/s",
                extra="not in this build yet",
            )
            for name in missing
        )
    return rows


_REMIND_LOG = "Bus + remind + session log"
# Each policy's cost with the log, against remind's with the log in the same run.
_AGAINST_REMIND = {"Bus + loops + session log": 2.0, "Bus + rescue + session log": 3.0, "Bus + all + session log": 4.0}


def _target(
    name: str, timing: Timing, timings: dict[str, Timing], floor: float, *, large: bool
) -> tuple[str, bool | None]:
    """The issue's bound for a row, and whether this run met it."""
    if name == _REMIND_LOG:
        target = f"<= 1.3× its floor ({floor:.2f} us: Bus + remind, then its log lines as raw os.writes)"
        met = timing.micros <= 1.3 * floor
        if not large:
            target += ", >= 300,000/s"
            met = met and timing.rate >= 300_000
        return target, met
    if large:
        if name == "Bus + loops + session log":
            return f"<= 1.6× remind's floor ({floor:.2f} us)", timing.micros <= 1.6 * floor
        return "", None
    bound = _AGAINST_REMIND.get(name)
    if bound is None:
        return "", None
    remind = timings[_REMIND_LOG].micros
    ratio = timing.micros / remind
    return f"<= {bound:g}× {_REMIND_LOG} (this run: {ratio:.2f}×)", ratio <= bound


def _added(micros: float, base: float) -> str:
    return f"+{micros - base:.2f} us over Bus alone"
