"""Replaying a session log as verdicts, and checking the recorded guard messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bus import Agent, AgentStatus, Bus, ContextMessage, LogReader, SessionLog, ToolCall, ToolResult
from guard import (
    Action,
    Config,
    FingerprintCache,
    Guard,
    LoopsConfig,
    Policy,
    RemindConfig,
    RescueConfig,
    TurnsConfig,
    Verdict,
    load_config,
    replay_log,
)
from guard.actions import action_for
from guard.audit import audit_config
from guard.importers import open_sessions, write_log
from guard.policies.rescue import RecordedAnswers, advice_in
from guard.verdicts import RecordedOutputError, replay_events
from tests.conftest import AskScript
from tests.guard.conftest import MakeScript, OnCallPolicy
from tests.guard.importers._transcripts import corpus_file, looping_claude_code

GREP = {"pattern": "x"}
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _write_log(path: Path, events: list[dict[str, Any]]) -> Path:
    lines = [{"type": "session/start", "v": 1, "session": "t", "ts": 0.0}]
    lines += [{"seq": i, "ts": float(i), **event} for i, event in enumerate(events, start=1)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _call(call_id: str, step: int, tool: str = "grep", agent: str | None = "main") -> dict[str, Any]:
    return {"type": "tool/call", "agent": agent, "call_id": call_id, "step": step, "tool": tool, "args": GREP}


def _result(call_id: str, step: int, tool: str = "grep", agent: str | None = "main") -> dict[str, Any]:
    return {**_call(call_id, step, tool, agent), "type": "tool/result", "content": "ok"}


@pytest.mark.anyio
async def test_call_number_is_the_triggering_calls_ordinal_even_for_parallel_calls(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    for step in range(1, 4):  # each response asks for grep and read in parallel
        grep, read = f"g{step}", f"r{step}"
        events += [_call(grep, step), _call(read, step, "read"), _result(grep, step), _result(read, step, "read")]
    log = _write_log(tmp_path / "parallel.jsonl", events)
    outcome = await replay_log(log, Config(remind=RemindConfig(exclude=("read",))))
    [verdict] = outcome.verdicts
    assert (verdict.seq, verdict.call_number, verdict.tool, verdict.count) == (11, 5, "grep", 3)


@pytest.mark.anyio
async def test_a_log_of_results_alone_numbers_the_synthesized_calls(tmp_path: Path) -> None:
    events = [_result("a", 1, agent="sub"), _result("b", 1, "read", agent=None)]
    events += [_result(f"c{i}", i) for i in range(1, 4)]
    log = _write_log(tmp_path / "results.jsonl", events)
    outcome = await replay_log(log)
    assert [(v.seq, v.call_number, v.agent) for v in outcome.verdicts] == [(5, 5, "main")]
    assert outcome.differences != []  # the reminder was never recorded in this log


@pytest.mark.anyio
async def test_verdicts_are_reported_as_they_happen_and_counted(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(5):
        await s.call("main", "grep", GREP)
    await s.context("main", "c5", "hook-bridge", "lint: 0 problems")  # not the guard's: replayed as recorded
    s.close()
    heard: list[Verdict] = []
    outcome = await replay_log(s.log.path, on_verdict=heard.append)
    assert heard == outcome.verdicts
    assert [(v.call_number, v.count) for v in heard] == [(3, 3), (5, 5)]
    assert outcome.counts() == {"remind": 2}
    assert outcome.differences == []
    assert outcome.report.events == 13


@pytest.mark.anyio
@pytest.mark.parametrize(
    "scenario", ["loops/repeat_denied_then_halt", "rescue/incident_192", "remind/gentle_then_detailed"]
)
async def test_a_replay_that_keeps_nothing_hands_out_and_counts_the_same_verdicts(scenario: str) -> None:
    log = SCENARIOS / f"{scenario}.jsonl"
    config = load_config(log.with_suffix(".toml")) if log.with_suffix(".toml").exists() else Config()
    kept = await replay_log(log, config)
    heard: list[Verdict] = []
    bare = await replay_log(log, config, on_verdict=heard.append, keep=False)
    assert heard == kept.verdicts != []
    assert (bare.verdicts, bare.differences) == ([], [])
    assert (bare.counts(), bare.checked, bare.unanswered) == (kept.counts(), kept.checked, kept.unanswered)
    events = [event for event in LogReader(log) if not Guard(config).owns(event)]
    streamed = await replay_events(events, config, keep=False)
    assert (streamed.verdicts, streamed.differences, streamed.checked) == ([], [], {})


@pytest.mark.anyio
async def test_check_finds_a_tampered_a_missing_and_an_extra_message(make_script: MakeScript, tmp_path: Path) -> None:
    s = make_script()
    for _ in range(5):
        await s.call("main", "grep", GREP)
    s.close()
    lines = s.log.path.read_text(encoding="utf-8").splitlines(keepends=True)
    reminders = [i for i, line in enumerate(lines) if '"repeat-tool-reminder"' in line]
    assert len(reminders) == 2

    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(lines).replace("Carefully analyze", "Please analyze"), encoding="utf-8")
    [diff] = (await replay_log(tampered)).differences
    seqs = [json.loads(lines[i])["seq"] for i in reminders]
    assert (diff.what, diff.kind, diff.seq) == ("context message", "changed", seqs[0])
    assert diff.recorded is not None
    assert "Please analyze" in diff.recorded
    assert diff.regenerated is not None
    assert "Carefully analyze" in diff.regenerated

    missing = tmp_path / "missing.jsonl"
    missing.write_text("".join(line for i, line in enumerate(lines) if i != reminders[1]), encoding="utf-8")
    [diff] = (await replay_log(missing)).differences
    assert (diff.kind, diff.recorded) == ("missing", None)
    assert diff.regenerated is not None
    assert "consecutive_calls: 5" in diff.regenerated

    # replayed with thresholds the recording did not use: the second message is not regenerated
    [diff] = (await replay_log(s.log.path, Config(remind=RemindConfig(thresholds=(3,))))).differences
    assert (diff.kind, diff.seq) == ("extra", seqs[1])
    assert diff.regenerated is None


@pytest.mark.anyio
async def test_an_action_on_a_call_is_placed_at_that_call(tmp_path: Path) -> None:
    events = [_call("a1", 1), _call("a2", 1), _result("a1", 1), _result("a2", 1)]
    log = _write_log(tmp_path / "calls.jsonl", events)
    outcome = await replay_log(log, policies=[OnCallPolicy("gate", "deny")])
    assert [(v.seq, v.call_number, v.action) for v in outcome.verdicts] == [(2, 2, "deny")]


@pytest.mark.anyio
async def test_recorded_halt_requests_are_regenerated_not_republished(tmp_path: Path) -> None:
    """A halt request is guard output like a reminder: replay withholds the
    recorded one, regenerates it, and ``--check`` compares the two."""
    ladder = SCENARIOS / "turns" / "ladder.jsonl"
    config = load_config(ladder.with_suffix(".toml"))
    intact = await replay_log(ladder, config)
    assert [v.action for v in intact.verdicts].count("halt") == 1
    assert intact.differences == []

    text = ladder.read_text(encoding="utf-8")
    assert text.count('"status":"halt-requested"') == 1
    tampered = tmp_path / "ladder.jsonl"
    tampered.write_text(
        text.replace(
            '"status":"halt-requested","parent":null,"reason":"',
            '"status":"halt-requested","parent":null,"reason":"EDITED ',
        ),
        encoding="utf-8",
    )
    [diff] = (await replay_log(tampered, config)).differences
    assert "EDITED" in (diff.recorded or "")
    assert (diff.what, diff.kind) == ("halt request", "changed")
    assert (diff.regenerated or "").startswith('{"agent": "main", "reason": "tool-loop-guard: ')


@pytest.mark.anyio
async def test_an_output_recorded_a_few_events_after_where_the_replay_makes_it_is_no_difference(
    tmp_path: Path,
) -> None:
    """While the guard awaited a subscriber of its own reminder, the agent's
    other tasks went on publishing: the log holds their events (a denied
    call's result) before the guard's halt request, which a replay, applying
    one event at a time, makes at once. Moved far, it is a difference."""
    ladder = SCENARIOS / "turns" / "ladder.jsonl"
    config = load_config(ladder.with_suffix(".toml"))
    lines = _lines(ladder)
    (halt,) = [i for i, line in enumerate(lines) if line.get("status") == "halt-requested"]
    assert lines[halt + 2]["denied_by"] == "tool-loop-guard"
    moved = lines[:halt] + lines[halt + 1 : halt + 3] + [lines[halt]] + lines[halt + 3 :]
    for seq, line in enumerate(moved[1:], 1):
        line["seq"] = seq
    assert (await replay_log(_write(tmp_path / "moved.jsonl", moved), config)).differences == []

    far = [dict(line) for line in lines[:halt] + lines[halt + 1 :]]
    ts = lines[-1]["ts"]
    padding = [{"type": "user/message", "seq": 0, "ts": ts, "agent": "other", "text": f"pad {n}"} for n in range(40)]
    far = far + padding + [dict(lines[halt])]
    for seq, line in enumerate(far[1:], 1):
        line["seq"] = seq
    kinds = sorted(
        (d.what, d.kind) for d in (await replay_log(_write(tmp_path / "far.jsonl", far), config)).differences
    )
    assert kinds == [("halt request", "extra"), ("halt request", "missing")]


# --- every guard action is compared: denials, escalations, halts, any policy's messages -------

INCIDENT = SCENARIOS / "rescue" / "incident_192.jsonl"


def _incident_config() -> Config:
    return load_config(INCIDENT.with_suffix(".toml"))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def _denials(lines: list[dict[str, Any]]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.get("denied_by") == "loop-rescue"]


@pytest.mark.anyio
async def test_check_compares_every_recorded_denial_and_escalation() -> None:
    outcome = await replay_log(INCIDENT, _incident_config())
    assert outcome.differences == []
    assert outcome.checked["denial"] == 91
    assert outcome.counts()["rescue"] > 0


@pytest.mark.anyio
async def test_a_tampered_denial_text_is_a_difference(tmp_path: Path) -> None:
    lines = _lines(INCIDENT)
    first = _denials(lines)[0]
    lines[first]["content"] = lines[first]["content"].replace("3 times", "2 times")
    [diff] = (await replay_log(_write(tmp_path / "t.jsonl", lines), _incident_config())).differences
    assert (diff.what, diff.kind, diff.seq) == ("denial", "changed", lines[first]["seq"])
    assert "2 times" in (diff.recorded or "")
    assert "3 times" in (diff.regenerated or "")


@pytest.mark.anyio
async def test_a_log_lacking_the_denials_the_replay_makes_is_a_difference(tmp_path: Path) -> None:
    lines = _lines(INCIDENT)
    for i in _denials(lines):  # the log says these calls ran
        lines[i] = {**lines[i], "denied_by": None, "is_error": False, "content": "src/cfg.rs:12"}
    differences = (await replay_log(_write(tmp_path / "ran.jsonl", lines), _incident_config())).differences
    assert len(differences) == 91
    assert {(d.what, d.kind) for d in differences} == {("denial", "missing")}


@pytest.mark.anyio
async def test_a_denial_by_another_plugin_is_replayed_not_compared(tmp_path: Path) -> None:
    lines = _lines(INCIDENT)
    first = _denials(lines)[0]
    lines[first]["denied_by"] = "permissions"
    [diff] = (await replay_log(_write(tmp_path / "other.jsonl", lines), _incident_config())).differences
    assert (diff.what, diff.kind, diff.recorded) == ("denial", "missing", None)


@pytest.mark.anyio
async def test_recorded_advice_answers_the_escalation_and_a_tampered_one_is_a_difference(tmp_path: Path) -> None:
    """Escalation advice is its own field of the denied result: the replay
    answers from it (not from the denial's prose), and ``--check`` notices
    when it no longer matches the text the model read."""
    lines = _lines(INCIDENT)
    escalations = [i for i in _denials(lines) if "advises:" in lines[i]["content"]]
    assert escalations
    for i in escalations:
        lines[i]["advice"] = advice_in(lines[i]["content"])
    intact = _write(tmp_path / "advice.jsonl", lines)
    assert (await replay_log(intact, _incident_config())).differences == []
    assert RecordedAnswers.from_log(intact).answers == RecordedAnswers.from_log(INCIDENT).answers

    first = escalations[0]
    lines[first]["advice"] = "Delete the repository."
    differences = (await replay_log(_write(tmp_path / "forged.jsonl", lines), _incident_config())).differences
    diff = differences[0]
    assert (diff.what, diff.kind, diff.seq) == ("denial", "changed", lines[first]["seq"])
    assert "Delete the repository." in (diff.regenerated or "")
    assert "Delete the repository." not in json.loads(diff.recorded or "{}")["text"]
    # the forged advice is reused for the rest of the epoch: each reuse differs too
    assert {(d.what, d.kind) for d in differences} == {("denial", "changed")}


@pytest.mark.anyio
async def test_a_missing_escalation_is_a_difference(tmp_path: Path) -> None:
    lines = _lines(INCIDENT)
    first = next(i for i in _denials(lines) if "advises:" in lines[i]["content"])
    call_id = lines[first]["call_id"]
    del lines[first]
    outcome = await replay_log(_write(tmp_path / "gone.jsonl", lines), _incident_config())
    # the call itself has no result to compare, but its advice is gone from the
    # log, and the later denials that reused it no longer match the replay's
    assert outcome.unanswered == 1
    assert outcome.differences
    assert all(d.what == "denial" and call_id not in (d.recorded or "") for d in outcome.differences)


@pytest.mark.anyio
async def test_a_call_cancelled_while_the_guard_escalates_replays_clean(tmp_path: Path, ask_script: AskScript) -> None:
    asked = tmp_path / "asked"
    # the first ask outlives the runtime's patience; the next one answers
    ask = ask_script(f'[ -f {asked} ] && exec echo "Edit src/cfg.py."\ntouch {asked}\nsleep 300')
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(ask), cooldown_ms=0))
    log, bus, agent = tmp_path / "s.jsonl", Bus(), Agent("main")
    with SessionLog(log).attach(bus):
        Guard(config).attach(bus)
        for n in range(1, 8):
            call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP)
            if n == 5:  # the runtime gives up on the call while it is asked about: no result
                async with anyio.create_task_group() as group:
                    group.start_soon(bus.decide, call)
                    while not asked.exists():
                        await anyio.sleep(0.01)
                    group.cancel_scope.cancel()
                continue
            with anyio.fail_after(60):
                decision = await bus.decide(call)
            denied = ToolResult.answering(call, decision.reason or "", denied_by=decision.by, advice=decision.advice)
            await bus.publish(denied if not decision.allowed else ToolResult.answering(call, "same"))
    assert asked.exists()

    outcome = await replay_log(log, config)
    assert [v.action for v in outcome.verdicts] == ["deny", "deny", "escalation-failed", "rescue", "rescue"]
    assert (outcome.unanswered, outcome.differences) == (1, [])


@pytest.mark.anyio
async def test_a_result_whose_delivery_was_cancelled_replays_clean(tmp_path: Path) -> None:
    config = Config(loops=LoopsConfig())
    log, bus, agent = tmp_path / "s.jsonl", Bus(), Agent("main")

    async def forward(message: ContextMessage) -> None:  # a runtime pushing each reminder to a UI
        await anyio.sleep(0.1)

    with SessionLog(log).attach(bus):
        Guard(config).attach(bus)
        bus.subscribe(ContextMessage, forward)
        for n in range(1, 9):
            call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="bash", args={"command": "cat x.txt"})
            decision = await bus.decide(call)
            with anyio.move_on_after(0.02):  # the runtime's timeout, while a reminder is delivered
                await bus.publish(
                    ToolResult.answering(call, "same") if decision.allowed else ToolResult.denial(call, decision)
                )

    outcome = await replay_log(log, config)
    assert "halt" in {v.action for v in outcome.verdicts}
    assert outcome.differences == []


class _EveryThird(Policy[list[int]]):
    """A custom policy: a note after every third result."""

    name = "every-third"
    plugin = "every-third-note"

    def new_state(self) -> list[int]:
        return [0]

    def on_result(self, state: list[int], result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        state[0] += 1
        if state[0] % 3:
            return None
        return action_for(result, policy=self.name, kind="remind", count=state[0], text=f"{state[0]} calls so far")


@pytest.mark.anyio
async def test_a_tampered_message_of_a_custom_policy_is_a_difference(tmp_path: Path) -> None:
    log = tmp_path / "custom.jsonl"
    bus = Bus()
    with SessionLog(log).attach(bus):
        Guard(policies=[_EveryThird()]).attach(bus)
        agent = Agent("main")
        for n in range(6):
            call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="grep", args=GREP)
            await bus.decide(call)
            await bus.publish(ToolResult.answering(call, "ok"))
    intact = await replay_log(log, policies=[_EveryThird()])
    assert (len(intact.verdicts), intact.differences, intact.checked) == (2, [], {"context message": 2})

    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text(log.read_text(encoding="utf-8").replace("6 calls so far", "6 calls, all fine"))
    [diff] = (await replay_log(tampered, policies=[_EveryThird()])).differences
    assert (diff.what, diff.kind) == ("context message", "changed")
    assert "all fine" in (diff.recorded or "")


@pytest.mark.anyio
async def test_messages_of_a_policy_the_replay_does_not_run_are_another_plugins(make_script: MakeScript) -> None:
    """What is guard output is decided by the replay's policies: a log's
    ``turns`` messages and denials, replayed with ``remind`` alone, are
    replayed as recorded, like any other plugin's."""
    s = make_script(Config(turns=TurnsConfig(threshold=3, deny_after=1)))
    for _ in range(5):
        await s.call("main", "grep", GREP)
    s.close()
    both = await replay_log(s.log.path, s.guard.config)
    assert both.differences == []
    assert both.checked == {"context message": 3, "denial": 2}
    remind_only = await replay_log(s.log.path, Config())
    assert remind_only.differences == []
    assert remind_only.checked == {"context message": 2}


@pytest.mark.anyio
async def test_a_halt_request_names_its_plugin_and_another_plugins_halt_is_replayed(tmp_path: Path) -> None:
    log = tmp_path / "halts.jsonl"
    bus = Bus()
    config = load_config(SCENARIOS / "turns" / "ladder.toml")
    with SessionLog(log).attach(bus):
        Guard(config).attach(bus)
        agent = Agent("main")
        await bus.publish(AgentStatus(agent=agent, status="halt-requested", reason="budget spent", by="budget"))
        for n in range(12):
            call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="grep", args=GREP)
            decision = await bus.decide(call)
            content = "ok" if decision.allowed else decision.reason or ""
            await bus.publish(ToolResult.answering(call, content, is_error=not decision.allowed, denied_by=decision.by))
    halts = [line for line in _lines(log) if line.get("status") == "halt-requested"]
    assert [h["by"] for h in halts] == ["budget", "tool-loop-guard"]
    outcome = await replay_log(log, config)
    assert outcome.differences == []
    assert outcome.checked["halt request"] == 1


@pytest.mark.anyio
async def test_a_recorded_denial_the_replay_does_not_make_is_extra(make_script: MakeScript, tmp_path: Path) -> None:
    s = make_script()
    for _ in range(2):
        await s.call("main", "grep", GREP)
    s.close()
    lines = _lines(s.log.path)
    last = max(i for i, line in enumerate(lines) if line["type"] == "tool/result")
    lines[last] |= {"denied_by": "repeat-tool-reminder", "is_error": True, "content": "denied, says the log"}
    [diff] = (await replay_log(_write(tmp_path / "forged.jsonl", lines))).differences
    assert (diff.what, diff.kind, diff.seq, diff.regenerated) == ("denial", "extra", lines[last]["seq"], None)


@pytest.mark.anyio
async def test_a_missing_halt_request_is_a_difference(tmp_path: Path) -> None:
    ladder = SCENARIOS / "turns" / "ladder.jsonl"
    lines = [line for line in _lines(ladder) if line.get("status") != "halt-requested"]
    [diff] = (
        await replay_log(_write(tmp_path / "no-halt.jsonl", lines), load_config(ladder.with_suffix(".toml")))
    ).differences
    assert (diff.what, diff.kind, diff.recorded) == ("halt request", "missing", None)


@pytest.mark.anyio
@pytest.mark.parametrize("transcript", ["loop", "openhands/output.jsonl"])
async def test_a_replayed_stream_gives_every_verdict_its_written_log_gives(transcript: str, tmp_path: Path) -> None:
    path = looping_claude_code(tmp_path / "loop.jsonl") if transcript == "loop" else corpus_file(transcript)
    config = audit_config()
    for session in open_sessions(path):
        log = tmp_path / f"{session.session}.imported.jsonl"
        write_log(session, log)
        from_log: list[Any] = []
        expected = await replay_log(log, config, then=from_log.append)
        streamed: list[Any] = []
        outcome = await replay_events(session.events(), config, then=streamed.append)
        assert outcome.verdicts == expected.verdicts
        assert outcome.differences == expected.differences
        assert [(e.seq, type(e)) for e in streamed] == [(e.seq, type(e)) for e in from_log]
        assert (await replay_events(session.events(), config)).verdicts == expected.verdicts
    assert expected.verdicts, "the transcript should make the guard act"


@pytest.mark.anyio
async def test_a_stream_holding_the_guards_own_output_is_refused_at_that_event() -> None:
    """The recorded advice that answers rescue's escalations comes after the
    call it answers: a stream read once cannot hold it up front."""
    path = SCENARIOS / "rescue" / "incident_192.jsonl"
    config = audit_config(load_config(path.with_suffix(".toml")))
    (session,) = open_sessions(path)
    seen: list[Any] = []
    with pytest.raises(RecordedOutputError, match="event 126 is the guard's own recorded output"):
        await replay_events(session.events(), config, then=seen.append)
    assert [e.seq for e in seen] == list(range(1, 126))


@pytest.mark.anyio
async def test_a_program_run_again_on_its_log_replays_each_run_afresh(tmp_path: Path) -> None:
    from guard.sessions.link import GuardLink
    from guard.sessions.resume import resume_link

    log = tmp_path / "agent.jsonl"
    config = load_config("recommended")
    read = {"file_path": "/src/app.py"}

    async def run(calls: int) -> list[bool]:
        link = GuardLink(config=config, log=log)  # continues the log, with a guard of its own
        agent = link.agent("main")
        await agent.start()
        allowed = []
        for i in range(calls):
            agent.begin_step()
            decision = await agent.call(f"c{i}", "Read", read)
            allowed.append(decision.allowed)
            if decision.allowed:
                await agent.result(f"c{i}", "print('hello')")
            else:
                await agent.denied(f"c{i}", decision)
        link.close()
        return allowed

    assert await run(3) == [True, True, False]
    assert await run(1) == [True]  # the second run starts afresh
    outcome = await replay_log(log, config)
    assert outcome.differences == []
    assert [(v.seq, v.action) for v in outcome.verdicts] == [(6, "deny")]
    # a restore of the log (a server resuming it) stands where the last run left it
    link, resumed = await resume_link(log, "agent", config)
    with resumed:
        [agent] = link.links()
        agent.begin_step()
        assert (await agent.call("c1", "Read", read)).allowed
        await agent.result("c1", "print('hello')")
        agent.begin_step()
        assert not (await agent.call("c2", "Read", read)).allowed


@pytest.mark.anyio
@pytest.mark.parametrize("reused", [False, True], ids=["own-ids", "one-id-and-step"])
async def test_results_delivered_twice_replay_as_the_live_guard_saw_them(tmp_path: Path, reused: bool) -> None:
    path = tmp_path / "twice.jsonl"
    config = load_config("recommended")
    bus = Bus()
    Guard(config).attach(bus)
    agent = Agent("main")
    allowed = []
    with SessionLog(path).attach(bus):
        for step in range(1, 5):
            call_id, step = ("x", 0) if reused else (f"c{step}", step)  # a loop of one's own may reuse both
            call = ToolCall(agent=agent, call_id=call_id, step=step, tool="Read", args={"file_path": "/a.py"})
            decision = await bus.decide(call)
            allowed.append(decision.allowed)
            result = ToolResult.answering(call, "x = 1") if decision.allowed else ToolResult.denial(call, decision)
            for _ in range(2):  # each result, the denials too, delivered twice
                await bus.publish(msgspec.structs.replace(result))
    assert allowed == [True, True, False, False]
    outcome = await replay_log(path, config)
    assert outcome.differences == []
    assert [v.action for v in outcome.verdicts] == ["deny", "deny"]


@pytest.mark.anyio
async def test_a_session_published_with_numeric_call_ids_replays_whole(tmp_path: Path) -> None:
    path = tmp_path / "numeric.jsonl"
    config = load_config("recommended")
    bus = Bus()
    Guard(config).attach(bus)
    agent = Agent("main")
    with SessionLog(path).attach(bus):
        for number in range(1, 4):  # a runtime whose call ids are numbers
            call = ToolCall(agent=agent, call_id=number, step=number, tool="grep", args=GREP)  # type: ignore[arg-type]
            decision = await bus.decide(call)
            await bus.publish(
                ToolResult.answering(call, "ok") if decision.allowed else ToolResult.denial(call, decision)
            )
    outcome = await replay_log(path, config)
    assert (outcome.report.events, outcome.report.skipped, outcome.report.mistyped) == (6, 0, 0)  # read back live
    assert [(v.call_number, v.action) for v in outcome.verdicts] == [(3, "deny")]
    assert outcome.differences == []


def test_halts_of_several_agents_recorded_out_of_order_a_few_events_on_are_no_difference() -> None:
    """A fleet's workers append each halt after its trigger, and the other
    agents' events land in between: the alignment pairs one agent's halt
    with another's, which is no change when each was made nearby."""
    from guard.verdicts import _compare, _Output

    def denial(seq: int, agent: str) -> _Output:
        return _Output("denial", seq, (("agent", agent), ("text", "denied")))

    def halt(seq: int, agent: str) -> _Output:
        return _Output("halt request", seq, (("agent", agent), ("reason", "the run should end")))

    recorded = [denial(37, "a0"), denial(38, "a2"), denial(39, "a1"), halt(40, "a0"), denial(41, "a3")]
    recorded += [halt(42, "a2"), halt(43, "a1"), halt(44, "a3")]
    fresh = [denial(37, "a0"), halt(37, "a0"), denial(38, "a2"), halt(38, "a2"), denial(39, "a1"), halt(39, "a1")]
    fresh += [denial(41, "a3"), halt(41, "a3")]
    assert _compare(recorded, fresh) == []
    edited = [*recorded[:-1], halt(44, "a4")]  # a halt no agent was regenerated for is still one
    assert [(d.kind, d.seq) for d in _compare(edited, fresh)] == [("missing", 41), ("extra", 44)]


def test_an_output_made_in_its_place_in_order_but_far_from_where_it_was_recorded_is_a_difference() -> None:
    from guard.verdicts import _compare, _Output

    def denial(seq: int, agent: str, call_id: str) -> _Output:
        return _Output("denial", seq, (("agent", agent), ("call_id", call_id), ("text", "denied")))

    halt = _Output("halt request", 9, (("agent", "a1"), ("reason", "the run should end")))
    recorded = [denial(1, "a2", "c22"), denial(7, "a1", "c7"), halt, denial(10, "a1", "c10"), denial(34, "a2", "c34")]
    fresh = [denial(7, "a1", "c7"), denial(10, "a1", "c10"), denial(22, "a2", "c22"), denial(34, "a2", "c34")]
    fresh.append(_Output("halt request", 49, halt.key))  # made 40 events from where it was recorded
    assert [(d.kind, d.what, d.seq) for d in _compare(recorded, fresh)] == [
        ("extra", "halt request", 9),
        ("missing", "halt request", 49),
    ]


def test_an_output_made_a_few_events_from_where_it_was_recorded_is_one_output() -> None:
    """Each output missing where it was recorded pairs with the same output
    made within 32 events, each made one used once; others stay differences."""
    from guard.verdicts import Difference, _unmoved

    def missing(seq: int, text: str) -> Difference:
        return Difference(what="context message", seq=seq, recorded=text, regenerated=None)

    def made(seq: int, text: str) -> Difference:
        return Difference(what="context message", seq=seq, recorded=None, regenerated=text)

    kept = [missing(10, "b"), missing(30, "a"), made(80, "a")]  # nothing made of "b"; "a" made 50 events on
    paired = [missing(10, "a"), missing(12, "a"), made(11, "a"), made(13, "a")]
    assert _unmoved([*paired, *kept]) == kept
