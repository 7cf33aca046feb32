"""Detection cost against other loop guards installable from PyPI.

Each detector is fed the same call stream (tool, arguments, output) through
its documented per-call entry point, a fresh instance per round, and is
timed per call. Two tiny streams then show what each one flags: a real loop
(five different calls, then one call repeated ten times) and a legitimate
repeat (the same tool paging through a file with different arguments).

OpenHands' stuck detector (``openhands-sdk``) needs Python >= 3.12, so it is
listed, not measured, on older interpreters.
"""

from __future__ import annotations

import contextlib
import io
from collections import deque
from collections.abc import Callable
from typing import Any

from benchmarks import peers, stream
from benchmarks._measure import Case, Row, measure
from benchmarks.settings import Settings
from bus import Agent, Bus, ToolCall, ToolResult
from guard.actions import Action
from guard.config import RemindConfig
from guard.fingerprint import FingerprintCache
from guard.guard import Guard
from guard.policies.remind import RemindPolicy

__all__ = ["detection"]

Feed = Callable[[str, Any, str], bool]
"""One call into a detector: (tool, args, output) -> did it flag a loop."""

_OURS = "repeat-tool-guard Bus + Guard (remind)"
_OPENHANDS = "not measured: every openhands-sdk release needs Python >= 3.12"


def _remind_policy() -> Feed:
    policy = RemindPolicy(RemindConfig())
    state = policy.new_state()
    cache = FingerprintCache()
    agent = Agent("bench")

    def feed(tool: str, args: Any, output: str) -> bool:
        result = ToolResult(agent=agent, call_id="c", step=1, tool=tool, args=args, content=output)
        return policy.on_result(state, result, cache) is not None

    return feed


def _watchdog() -> Feed | None:
    module = peers.load("agent_watchdog")
    if module is None:
        return None
    dog = module.AgentWatchdog(max_budget_usd=1e12, timeout_seconds=None, max_identical_calls=3)
    run = dog.watch("bench")
    run.__enter__()  # the run lasts as long as ``feed`` holds it
    halt = module.WatchdogHalt

    def feed(tool: str, args: Any, output: str, _run: Any = run) -> bool:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # it prints each halt
                dog.record_tool_call(tool, args, output)
        except halt:
            return True
        return False

    return feed


def _loop_guard() -> Feed | None:
    module = peers.load("loop_guard")
    if module is None:
        return None
    guard = module.LoopGuard()
    proceed = module.decision.Action.CONTINUE

    def feed(tool: str, args: Any, output: str) -> bool:
        return bool(guard.check(tool, args, output).action is not proceed)

    return feed


def _agentloopguard() -> Feed | None:
    module = peers.load("agentloopguard")
    if module is None:
        return None
    alerts: list[Any] = []
    session = module.LoopGuard(on_alert="callback", alert_callback=alerts.append).session()

    def feed(tool: str, args: Any, output: str) -> bool:
        before = len(alerts)
        session.record({"tool_name": tool, "tool_args": args, "output": output})
        return len(alerts) > before

    return feed


def _loop_breaker() -> Feed | None:
    module = peers.load("agent_loop_breaker")
    if module is None:
        return None
    window: deque[dict[str, Any]] = deque(maxlen=12)
    should_stop = module.should_stop

    def feed(tool: str, args: Any, output: str) -> bool:
        window.append({"tool": tool, "args": args})
        return bool(should_stop(window))

    return feed


_PEERS: tuple[tuple[str, str, Callable[[], Feed | None]], ...] = (
    ("agent-watchdog", "AgentWatchdog.record_tool_call", _watchdog),
    ("agent-loop-guard", "LoopGuard.check", _loop_guard),
    ("agentloopguard-sdk", "GuardSession.record", _agentloopguard),
    ("agent-loop-breaker-py", "should_stop over the last 12 calls", _loop_breaker),
)


def _feed_case(make: Callable[[], Feed | None], calls: list[ToolCall], output: str) -> Case:
    async def case(n: int) -> None:
        feed = make()
        assert feed is not None
        for call in calls[:n]:
            feed(call.tool, call.args, output)

    return case


def _bus_case(calls: list[ToolCall], output: str) -> Case:
    async def case(n: int) -> None:
        bus = Bus()
        Guard().attach(bus)
        for call in calls[:n]:
            await bus.decide(call)
            await bus.publish(ToolResult.answering(call, output))

    return case


def _loop_calls() -> list[tuple[str, dict[str, Any]]]:
    distinct = [(tool, {"path": f"src/step_{i}.py"}) for i, tool in enumerate(stream.TOOLS)]
    return distinct + [("grep", {"pattern": "load_config", "path": "src"}) for _ in range(10)]


def _paging_calls() -> list[tuple[str, dict[str, Any]]]:
    return [("read_file", {"path": "src/big.py", "offset": 200 * i, "limit": 200}) for i in range(10)]


def _first_flag(feed: Feed, sequence: list[tuple[str, dict[str, Any]]], output: str) -> int | None:
    for number, (tool, args) in enumerate(sequence, start=1):
        if feed(tool, args, output):
            return number
    return None


async def _ours_flags(sequence: list[tuple[str, dict[str, Any]]], output: str) -> int | None:
    flagged: list[int] = []
    bus = Bus()
    agent = Agent("bench")

    def on_action(action: Action, trigger: Any) -> None:
        flagged.append(number)

    Guard(on_action=on_action).attach(bus)
    for number, (tool, args) in enumerate(sequence, start=1):
        call = ToolCall(agent=agent, call_id=f"c{number}", step=number, tool=tool, args=args)
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, output))
    return flagged[0] if flagged else None


def _describe(loop_at: int | None, paging: int | None) -> str:
    loop = f"flags the loop at call {loop_at}" if loop_at else "misses the loop"
    page = f"flags paging at call {paging}" if paging else "quiet on paging"
    return f"{loop}; {page}"


async def detection(settings: Settings) -> list[Row]:
    output = "src/config/loader.py:12: def load_config(path)"
    calls = stream.calls(settings.calls, agent=Agent("bench"))
    cases: list[tuple[str, Case]] = [(_OURS, _bus_case(calls, output))]
    notes = {_OURS: _describe(await _ours_flags(_loop_calls(), output), await _ours_flags(_paging_calls(), output))}
    cases.append(("repeat-tool-guard RemindPolicy.on_result", _feed_case(_remind_policy, calls, output)))
    missing: list[str] = []
    for distribution, entry, make in _PEERS:
        name = f"{distribution} {peers.version(distribution)} {entry}"
        probe = make()
        if probe is None:
            missing.append(distribution)
            continue
        cases.append((name, _feed_case(make, calls, output)))
        loop_at = _first_flag(probe, _loop_calls(), output)
        fresh = make()
        assert fresh is not None
        notes[name] = _describe(loop_at, _first_flag(fresh, _paging_calls(), output))
    timings = await measure(cases, seconds=settings.seconds, repeat=settings.repeat, fixed=len(calls))
    base = timings[_OURS].rate
    section = f"loop detection, same {len(calls):,}-call stream"
    rows = [
        Row(
            section=section,
            name=name,
            rate=timing.rate,
            unit="calls/s",
            micros=timing.micros,
            ratio=timing.rate / base,
            baseline=_OURS,
            extra=notes.get(name, ""),
        )
        for name, timing in timings.items()
    ]
    rows.extend(Row(section=section, name=name, rate=0.0, unit="calls/s", extra=peers.INSTALL_HINT) for name in missing)
    rows.append(Row(section=section, name="openhands-sdk StuckDetector", rate=0.0, unit="calls/s", extra=_OPENHANDS))
    return rows
