"""What one ``repeat-tool-guard hook`` process costs, and that it stays flat
as the session grows.

Claude Code starts the command hook as a fresh process for every hook event,
so what a user pays per tool call is the whole process: interpreter start,
imports, restoring the guard from its snapshot, the answer, the new snapshot.
For each session length N (earlier tool calls, a realistic mix: distinct
reads, an edit-and-test cycle, a grep loop) a state directory is prepared
the way the hook leaves it (the session's log and its snapshot), then hook
processes (a ``PreToolUse`` and its ``PostToolUse`` for one new call each
time) are timed, wall clock and CPU (user + system, which a busy shared
machine inflates less), in rounds interleaved with two baselines started the same
way: ``python -c pass`` (the interpreter alone) and ``python -c "import
msgspec"`` (the floor no process that reads the log can go below).

Two configs: the default (``remind``) and every policy on (``rescue`` with a
missing ask command, so nothing leaves the machine); with ``rescue`` on the
hook also starts an event loop, which its ask needs. The package's bytecode
is compiled first, as ``pip install`` does. A hook that had to replay its
log instead of using the snapshot says so on stderr; such a run is flagged
in the row.

With the default config the hook is also timed forwarding to a running
``repeat-tool-guard serve``, by the command ``hook-settings --serve
unix:PATH`` writes (``python -P -c ... hook --serve unix:PATH``), the server
started on a Unix socket in the same run, each session's log prepared in its
state directory and restored once (untimed) before the rounds: the process
then imports only the forwarding client. Not a test: no timing is asserted anywhere.
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from benchmarks._measure import Row
from benchmarks.settings import Settings
from bus import Bus, SessionLog
from guard import Config, RescueConfig, TurnsConfig
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import ClaudeHooks, run_hook
from guard.guard import Guard
from guard.hook_forward import forwarding_argv

__all__ = ["command_hook", "hook_calls", "prepare_session"]

SESSION = "bench-session"
REPO = Path(__file__).resolve().parents[1]


def _payload(event: str, session: str = SESSION, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "hook_event_name": event, "cwd": "/w", "transcript_path": "/t", **fields}


def hook_calls(n: int) -> list[tuple[str, dict[str, str]]]:
    """``n`` tool calls as a session makes them: distinct reads, an edit and a test run, a grep loop."""
    calls: list[tuple[str, dict[str, str]]] = []
    i = 0
    while len(calls) < n:
        calls += [("Read", {"file_path": f"src/mod{i}.py"}), ("Edit", {"file_path": f"src/mod{i}.py", "old": "a"})]
        calls += [("Bash", {"command": "pytest -q"})] + [("Grep", {"pattern": "load_config", "path": "src"})] * 4
        i += 1
    return calls[:n]


async def prepare_session(
    state: Path, n: int, config: Config, session: str = SESSION, *, snapshot: bool = True
) -> None:
    """A state directory as the hook leaves it after ``n`` tool calls: the
    session's log (written in one process, for speed) and, with ``snapshot``,
    its snapshot (from one hook invocation, which replays that log once)."""
    state.mkdir(parents=True, exist_ok=True)
    bus = Bus()
    Guard(config).attach(bus)
    with SessionLog(state / f"{session}.jsonl", session=session).attach(bus):
        hooks = ClaudeHooks(GuardLink(bus))
        await hooks.handle(_payload("UserPromptSubmit", session, prompt="find the config loader"))
        for k, (tool, args) in enumerate(hook_calls(n)):
            pre = _payload("PreToolUse", session, tool_use_id=f"t{k}", tool_name=tool, tool_input=args)
            answer = await hooks.handle(pre)
            if "permissionDecision" not in answer.get("hookSpecificOutput", {}):
                await hooks.handle(pre | {"hook_event_name": "PostToolUse", "tool_response": "ok"})
    if snapshot:
        await run_hook(_payload("UserPromptSubmit", session, prompt="go on"), state, config)


def _command() -> list[str]:
    script = Path(sys.executable).with_name("repeat-tool-guard")
    return [str(script)] if script.exists() else [sys.executable, "-m", "guard"]


def _start_server(state: Path, socket: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        [*_command(), "serve", "--uds", str(socket), "--state-dir", str(state)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    line = server.stderr.readline()
    if "listening on " not in line:
        server.kill()
        raise RuntimeError(f"the server did not start: {line}{server.stderr.read()}")
    return server


def _timed(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, bytes]:
    """Wall seconds, CPU seconds (user + system) and stderr of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, cwd=REPO, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{command[:2]} exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu, done.stderr


async def command_hook(settings: Settings) -> list[Row]:
    compileall.compile_dir(REPO / "bus", quiet=1)
    compileall.compile_dir(REPO / "guard", quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    ask = str(settings.tmpdir / "no-such-ask-command")
    toml = settings.tmpdir / "every-policy.toml"
    toml.write_text(f'[turns]\n\n[rescue]\nask_command = "{ask}"\n')
    configs = {
        "default config (remind)": (Config(), []),
        "every policy": (Config(turns=TurnsConfig(), rescue=RescueConfig(ask_command=ask)), ["--config", str(toml)]),
    }
    rows: list[Row] = []
    for label, (config, options) in configs.items():
        states = {}
        for size in settings.hook_sizes:
            state = settings.tmpdir / f"hook-{len(rows)}-{size}"
            await prepare_session(state, size, config)
            states[size] = state
        server: subprocess.Popen[str] | None = None
        forward: list[str] = []  # the forwarding hook's whole command, as the settings hold it
        if not options:  # the server's default config is the hook's
            serve_state = settings.tmpdir / f"serve-{len(rows)}"
            for size in settings.hook_sizes:
                await prepare_session(serve_state, size, config, f"s{size}", snapshot=False)
            socket = settings.tmpdir / f"serve-{len(rows)}.sock"
            server = _start_server(serve_state, socket, env)
            forward = [*forwarding_argv(), "hook", "--serve", f"unix:{socket}"]
            for size in settings.hook_sizes:  # each session restored from its log once, untimed
                _timed(
                    forward,
                    msgspec.json.encode(_payload("UserPromptSubmit", f"s{size}", prompt="go on")),
                    env,
                )
        try:
            rows += _measure(settings, label, states, options, forward, env)
        finally:
            if server is not None:
                server.terminate()
                server.wait(60)
                assert server.stderr is not None
                server.stderr.close()
        for state in states.values():
            shutil.rmtree(state, ignore_errors=True)
    return rows


def _measure(
    settings: Settings,
    label: str,
    states: dict[int, Path],
    options: list[str],
    forward: list[str],
    env: dict[str, str],
) -> list[Row]:
    rows: list[Row] = []
    baselines = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import msgspec"': [sys.executable, "-c", "import msgspec"],
    }
    samples: dict[str, list[float]] = {name: [] for name in baselines}
    cpu: dict[str, list[float]] = {name: [] for name in baselines}
    replayed: dict[int, int] = dict.fromkeys(states, 0)
    for size in states:
        samples[f"hook, {size:,} earlier calls"] = []
        cpu[f"hook, {size:,} earlier calls"] = []
    if forward:
        for size in states:
            samples[f"hook forwarding to serve, {size:,} earlier calls"] = []
            cpu[f"hook forwarding to serve, {size:,} earlier calls"] = []
    for round_ in range(settings.hook_processes):
        for name, command in baselines.items():
            elapsed, used, _ = _timed(command, b"", env)
            samples[name].append(elapsed)
            cpu[name].append(used)
        for size, state in states.items():
            hook = [*_command(), "hook", "--state-dir", str(state), *options]
            call = _payload(
                "PreToolUse", tool_use_id=f"b{round_}", tool_name="Read", tool_input={"file_path": f"b{round_}"}
            )
            for payload in (call, call | {"hook_event_name": "PostToolUse", "tool_response": "ok"}):
                elapsed, used, stderr = _timed(hook, msgspec.json.encode(payload), env)
                samples[f"hook, {size:,} earlier calls"].append(elapsed)
                cpu[f"hook, {size:,} earlier calls"].append(used)
                replayed[size] += b"replaying" in stderr
        for size in states if forward else ():
            name = f"hook forwarding to serve, {size:,} earlier calls"
            call = _payload(
                "PreToolUse",
                f"s{size}",
                tool_use_id=f"b{round_}",
                tool_name="Read",
                tool_input={"file_path": f"b{round_}"},
            )
            for payload in (call, call | {"hook_event_name": "PostToolUse", "tool_response": "ok"}):
                elapsed, used, stderr = _timed(forward, msgspec.json.encode(payload), env)
                if stderr:
                    raise RuntimeError(f"the forwarding hook answered in-process: {stderr.decode(errors='replace')}")
                samples[name].append(elapsed)
                cpu[name].append(used)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    cpu_medians = {name: statistics.median(times) for name, times in cpu.items()}
    base = medians["python -c pass"]
    cpu_base = cpu_medians["python -c pass"]
    first = medians[f"hook, {next(iter(states)):,} earlier calls"]
    section = f"command hook per invocation, {label} (median of {settings.hook_processes} rounds)"
    for name, median in medians.items():
        sized = next((s for s in states if name == f"hook, {s:,} earlier calls"), None)
        forwarded = next((s for s in states if name == f"hook forwarding to serve, {s:,} earlier calls"), None)
        extra = (
            f"{median / base:.2f}× python -c pass; CPU {cpu_medians[name] * 1000:.1f} ms, "
            f"{cpu_medians[name] / cpu_base:.2f}× its"
        )
        target, met = "", None
        if sized is not None:
            extra += f", {median / first:.2f}× the {next(iter(states)):,}-call session"
            if replayed[sized]:
                extra += f", REPLAYED its log {replayed[sized]} times"
            target = "<= 3× python -c pass, <= 1.2× the shortest session"
            met = median <= 3 * base and median <= 1.2 * first
        elif forwarded is not None:
            target = "<= 1.5× python -c pass"
            met = median <= 1.5 * base
        rows.append(
            Row(
                section=section,
                name=name,
                rate=1 / median,
                unit="processes/s",
                micros=median * 1e6,
                ratio=base / median,
                baseline="python -c pass",
                extra=extra,
                target=target,
                met=met,
            )
        )
    return rows
