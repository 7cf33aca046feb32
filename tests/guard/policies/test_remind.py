"""Policy ``remind``: every behaviour of seeds 000/001 and issue 2 item 4."""

from __future__ import annotations

import gc
import importlib
import json
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bus import Agent, AgentStatus, Bus, ContextMessage, ContextSource, Decision, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import Config, FingerprintCache, Guard, RemindConfig, RemindPolicy
from tests.guard.conftest import CapturedScript, MakeScript

GENTLE = (
    "You are repeating the exact same tool call with identical arguments. Carefully analyze the previous result "
    "before calling again: if the task is not complete, try a different approach or different arguments instead "
    "of repeating the call."
)


def detailed(tool: str, count: int, arguments: str) -> str:
    return (
        "Repeated tool call detected:\n"
        f"- tool: {tool}\n"
        f"- consecutive_calls: {count}\n"
        f"- arguments: {arguments}\n"
        "The repeated calls are not making progress. Do not call this tool with these exact arguments again. "
        "Inspect the latest result and choose a different action, different arguments, or finish the task if "
        "enough evidence has been gathered."
    )


GREP = {"pattern": "load_config", "path": "src"}
GREP_CANONICAL = '{"path":"src","pattern":"load_config"}'


def reminders(script: CapturedScript) -> list[tuple[str, str]]:
    """(call_id, summary) of every reminder the guard published."""
    return [
        (m.call_id, m.source.summary)
        for m in script.capture.of(ContextMessage)
        if m.source.plugin == "repeat-tool-reminder"
    ]


def remind(**settings: Any) -> Config:
    return Config(remind=RemindConfig(**settings))


# --- the chain ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_gentle_at_first_threshold_detailed_at_later_ones_then_silent(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(12):
        await s.call("main", "grep", GREP, "no matches")
    messages = s.capture.of(ContextMessage)
    assert [(m.call_id, m.source.summary) for m in messages] == [
        ("c3", "grep × 3"),
        ("c5", "grep × 5"),
        ("c8", "grep × 8"),
    ]
    assert messages[0].text == GENTLE
    assert messages[1].text == detailed("grep", 5, GREP_CANONICAL)
    assert messages[2].text == detailed("grep", 8, GREP_CANONICAL)


@pytest.mark.anyio
async def test_different_tracked_call_resets_the_chain_to_one(make_script: MakeScript) -> None:
    s = make_script()
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", {"pattern": "other"})  # same tool, other args: a new chain of 1
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.call("main", "read", GREP)  # other tool, same args: a new chain of 1
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    assert reminders(s) == []
    await s.call("main", "grep", GREP)
    assert reminders(s) == [("c9", "grep × 3")]


@pytest.mark.anyio
async def test_untracked_call_neither_counts_nor_resets(make_script: MakeScript) -> None:
    s = make_script()  # default exclude: todo_write
    await s.call("main", "grep", GREP)
    await s.call("main", "todo_write", {"todos": []})
    await s.call("main", "grep", GREP)
    await s.call("main", "todo_write", {"todos": []})
    await s.call("main", "todo_write", {"todos": []})
    await s.call("main", "todo_write", {"todos": []})  # repeated, but transparent: never reminded
    assert reminders(s) == []
    await s.call("main", "grep", GREP)
    assert reminders(s) == [("c7", "grep × 3")]


@pytest.mark.anyio
async def test_tool_outside_include_is_transparent(make_script: MakeScript) -> None:
    s = make_script(remind(include=["grep", "mcp_*"]))
    await s.call("main", "grep", GREP)
    await s.call("main", "read", {"path": "a"})
    await s.call("main", "grep", GREP)
    for _ in range(3):
        await s.call("main", "read", {"path": "a"})
    await s.call("main", "grep", GREP)
    await s.call("main", "mcp_fs_read", {"p": 1})
    await s.call("main", "mcp_fs_read", {"p": 1})
    await s.call("main", "mcp_fs_read", {"p": 1})
    assert reminders(s) == [("c7", "grep × 3"), ("c10", "mcp_fs_read × 3")]


@pytest.mark.anyio
async def test_patterns_treat_regex_metacharacters_literally(make_script: MakeScript) -> None:
    s = make_script(remind(include=["mcp.fs[*"], exclude=[]))
    for _ in range(3):
        await s.call("main", "mcpXfs[1]+", {})  # "." is not "any character": untracked
    for _ in range(3):
        await s.call("main", "mcp.fs[1]+", {})
    assert reminders(s) == [("c6", "mcp.fs[1]+ × 3")]


@pytest.mark.anyio
async def test_pattern_matching_no_tool_is_valid(make_script: MakeScript) -> None:
    s = make_script(remind(exclude=["mcp_*", "no_such_tool"]))
    for _ in range(3):
        await s.call("main", "grep", GREP)
    assert reminders(s) == [("c3", "grep × 3")]


@pytest.mark.anyio
async def test_property_order_at_any_depth_is_the_same_call(make_script: MakeScript) -> None:
    s = make_script()
    await s.call("main", "search", {"q": "x", "opts": {"case": True, "paths": [{"a": 1, "b": 2}]}})
    await s.call("main", "search", {"opts": {"paths": [{"b": 2, "a": 1}], "case": True}, "q": "x"})
    await s.call("main", "search", {"opts": {"case": True, "paths": [{"b": 2, "a": 1}]}, "q": "x"})
    await s.call("main", "search", {"q": "x", "opts": {"paths": [{"a": 1, "b": 2}], "case": True}})
    await s.call("main", "search", {"q": "x", "opts": {"paths": [{"a": 1, "b": 2}], "case": True}})
    assert reminders(s) == [("c3", "search × 3"), ("c5", "search × 5")]
    assert s.capture.of(ContextMessage)[1].text == detailed(
        "search", 5, '{"opts":{"case":true,"paths":[{"a":1,"b":2}]},"q":"x"}'
    )


@pytest.mark.anyio
async def test_raw_string_arguments_compare_as_that_string(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[2, 3]))
    raw = '{"path": "src/app.py", "line":'  # malformed JSON the runtime could not parse
    await s.call("main", "read", raw)
    await s.call("main", "read", raw)
    await s.call("main", "read", raw)
    await s.call("main", "read", '{"path": "src/app.py"}')
    assert reminders(s) == [("c2", "read × 2"), ("c3", "read × 3")]
    assert s.capture.of(ContextMessage)[1].text == detailed("read", 3, json.dumps(raw, separators=(",", ":")))


# --- thresholds, texts, preview, repeat_every ----------------------------------------------------


@pytest.mark.anyio
async def test_thresholds_are_normalized_and_the_gentle_text_follows_the_first(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[4, 2]))
    for _ in range(6):
        await s.call("main", "grep", GREP)
    messages = s.capture.of(ContextMessage)
    assert [m.source.summary for m in messages] == ["grep × 2", "grep × 4"]
    assert [m.text for m in messages] == [GENTLE, detailed("grep", 4, GREP_CANONICAL)]


@pytest.mark.anyio
async def test_single_threshold_sends_only_the_gentle_text(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[5]))
    for _ in range(12):
        await s.call("main", "grep", GREP)
    assert [(m.source.summary, m.text) for m in s.capture.of(ContextMessage)] == [("grep × 5", GENTLE)]


@pytest.mark.anyio
async def test_preview_is_capped_while_detection_compares_the_full_arguments(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[2, 3], arguments_preview_chars=24))
    payload = {"content": "a" * 386 + "END1"}
    await s.call("main", "write", payload)
    await s.call("main", "write", payload)
    await s.call("main", "write", payload)
    canonical = '{"content":"' + "a" * 386 + 'END1"}'
    assert len(canonical) == 404
    preview = '{"content":"aaaaaaaaaaaa… (+380 more chars)'
    assert s.capture.of(ContextMessage)[1].text == detailed("write", 3, preview)
    # differs only past the preview: a different call, so the chain restarts
    await s.call("main", "write", {"content": "a" * 386 + "END2"})
    await s.call("main", "write", {"content": "a" * 386 + "END1"})
    assert len(s.capture.of(ContextMessage)) == 2


@pytest.mark.anyio
async def test_short_arguments_are_quoted_whole(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[2, 3], arguments_preview_chars=len(GREP_CANONICAL)))
    for _ in range(3):
        await s.call("main", "grep", GREP)
    assert s.capture.of(ContextMessage)[1].text == detailed("grep", 3, GREP_CANONICAL)


@pytest.mark.anyio
async def test_past_the_highest_threshold_the_chain_is_silent_by_default(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(30):
        await s.call("main", "grep", GREP)
    assert [m.source.summary for m in s.capture.of(ContextMessage)] == ["grep × 3", "grep × 5", "grep × 8"]


@pytest.mark.anyio
async def test_repeat_every_resends_the_detailed_text_past_the_highest_threshold(make_script: MakeScript) -> None:
    s = make_script(remind(repeat_every=3))
    for _ in range(15):
        await s.call("main", "grep", GREP)
    messages = s.capture.of(ContextMessage)
    assert [m.source.summary for m in messages] == ["grep × 3", "grep × 5", "grep × 8", "grep × 11", "grep × 14"]
    assert messages[3].text == detailed("grep", 11, GREP_CANONICAL)


@pytest.mark.anyio
async def test_repeat_every_with_one_threshold_follows_gentle_with_detailed(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[2], repeat_every=1))
    for _ in range(4):
        await s.call("main", "grep", GREP)
    assert [m.text for m in s.capture.of(ContextMessage)] == [
        GENTLE,
        detailed("grep", 3, GREP_CANONICAL),
        detailed("grep", 4, GREP_CANONICAL),
    ]


# --- whose calls count ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_denied_calls_count(make_script: MakeScript) -> None:
    s = make_script()

    async def deny_grep(call: ToolCall) -> Decision | None:
        return Decision.deny("grep is disabled here", "policy-under-test") if call.tool == "grep" else None

    s.bus.intercept("policy-under-test", deny_grep)
    results = [await s.call("main", "grep", GREP) for _ in range(3)]
    assert [r.denied_by for r in results] == ["policy-under-test"] * 3
    assert reminders(s) == [("c3", "grep × 3")]


@pytest.mark.anyio
async def test_calls_with_no_agent_are_ignored(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(5):
        await s.call(None, "grep", GREP)
    assert reminders(s) == []
    assert s.guard.agent_count() == 0


@pytest.mark.anyio
async def test_each_agent_has_its_own_chain(make_script: MakeScript) -> None:
    s = make_script()
    await s.start("main")
    await s.start("sub", parent="main")
    await s.call("main", "grep", GREP)
    await s.call("sub", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.call("sub", "read", {"path": "x"})
    await s.call("main", "grep", GREP)  # main's third in a row, whatever sub does
    await s.call("sub", "grep", GREP)
    assert [(m.agent.id if m.agent else None, m.call_id) for m in s.capture.of(ContextMessage)] == [("main", "c5")]
    assert s.guard.agent_count() == 2


@pytest.mark.anyio
async def test_a_user_message_resets_that_agents_chain_only(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(2):
        await s.call("main", "grep", GREP)
        await s.call("sub", "grep", GREP)
    await s.user("main", "try the tests directory")
    await s.call("main", "grep", GREP)
    await s.call("sub", "grep", GREP)
    assert reminders(s) == [("c6", "grep × 3")]  # sub's third; main restarted at 1
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    assert reminders(s) == [("c6", "grep × 3"), ("c8", "grep × 3")]


@pytest.mark.anyio
async def test_a_user_message_before_any_call_is_harmless(make_script: MakeScript) -> None:
    s = make_script()
    await s.user("main", "hello")
    for _ in range(3):
        await s.call("main", "grep", GREP)
    assert reminders(s) == [("c3", "grep × 3")]


@pytest.mark.anyio
async def test_plugin_context_never_resets_the_chain(make_script: MakeScript) -> None:
    s = make_script()
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.context("main", "c2", "hook-bridge", "lint: 0 problems")
    await s.call("main", "grep", GREP)
    assert reminders(s) == [("c3", "grep × 3")]


@pytest.mark.anyio
async def test_disposal_drops_the_agents_state(make_script: MakeScript) -> None:
    s = make_script()
    await s.start("main")
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.call("other", "grep", GREP)
    assert s.guard.agent_count() == 2
    await s.bus.publish(AgentStatus(agent=s.agents["main"], status="idle"))
    assert s.guard.agent_count() == 2  # idle keeps the chain
    await s.dispose("main")
    assert s.guard.agent_count() == 1
    await s.call("main", "grep", GREP)  # the same handle, a fresh chain
    await s.call("main", "grep", GREP)
    assert reminders(s) == []


@pytest.mark.anyio
async def test_state_goes_with_the_agent_handle(bus: Bus) -> None:
    guard = Guard().attach(bus)
    agent: Agent | None = Agent("short-lived")
    assert agent is not None
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP)
    await bus.decide(call)
    await bus.publish(ToolResult.answering(call, "ok"))
    assert guard.agent_count() == 1
    del call
    agent = None
    gc.collect()
    assert guard.agent_count() == 0


# --- delivery ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_reminder_follows_its_result_and_never_rewrites_it(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(3):
        await s.call("main", "grep", GREP, "no matches")
    events = s.capture.events
    result, message = events[-2], events[-1]
    assert type(result) is ToolResult
    assert type(message) is ContextMessage
    assert message.seq == result.seq + 1
    assert message.call_id == result.call_id == "c3"
    assert message.agent is result.agent
    assert message.source == ContextSource(
        kind="plugin", plugin="repeat-tool-reminder", form="notice", summary="grep × 3"
    )
    assert [r.content for r in s.capture.of(ToolResult)] == ["no matches"] * 3
    assert len(s.capture.of(ToolResult)) == 3


@pytest.mark.anyio
@pytest.mark.parametrize("hook_first", [True, False], ids=["hook-subscribed-first", "guard-subscribed-first"])
async def test_another_plugins_context_on_the_same_call_keeps_both_in_subscription_order(
    bus: Bus, capture: Capture, agent: Agent, hook_first: bool
) -> None:
    async def hook(result: ToolResult) -> None:
        source = ContextSource(plugin="hook-bridge", summary="lint")
        await bus.publish(ContextMessage(agent=result.agent, call_id=result.call_id, source=source, text="lint ok"))

    if hook_first:
        bus.subscribe(ToolResult, hook)
    Guard().attach(bus)
    if not hook_first:
        bus.subscribe(ToolResult, hook)
    for i in range(1, 4):
        call = ToolCall(agent=agent, call_id=f"c{i}", step=i, tool="grep", args=GREP)
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "no matches"))
    last = capture.events[-3:]
    assert type(last[0]) is ToolResult
    plugins = [m.source.plugin for m in last[1:] if type(m) is ContextMessage]
    expected = ["hook-bridge", "repeat-tool-reminder"] if hook_first else ["repeat-tool-reminder", "hook-bridge"]
    assert plugins == expected
    texts = {m.source.plugin: (m.call_id, m.source.summary, m.text) for m in capture.of(ContextMessage)}
    assert texts["repeat-tool-reminder"] == ("c3", "grep × 3", GENTLE)
    assert texts["hook-bridge"] == ("c3", "lint", "lint ok")


@pytest.mark.anyio
async def test_every_reminder_is_a_structlog_event(make_script: MakeScript) -> None:
    s = make_script()
    with capture_logs() as logs:
        for _ in range(5):
            await s.call("main", "grep", GREP)
    events = [e for e in logs if e["event"] == "guard.remind"]
    assert events == [
        {"event": "guard.remind", "log_level": "info", "policy": "remind", "agent": "main", "tool": "grep",
         "count": 3, "threshold": 3},
        {"event": "guard.remind", "log_level": "info", "policy": "remind", "agent": "main", "tool": "grep",
         "count": 5, "threshold": 5},
    ]  # fmt: skip


@pytest.mark.anyio
async def test_repeated_reminders_log_the_highest_threshold(make_script: MakeScript) -> None:
    s = make_script(remind(thresholds=[2], repeat_every=2))
    with capture_logs() as logs:
        for _ in range(4):
            await s.call("main", "grep", GREP)
    assert [(e["count"], e["threshold"]) for e in logs if e["event"] == "guard.remind"] == [(2, 2), (4, 2)]


# --- the snapshot of both forms, as the session log records them ---------------------------------


@pytest.mark.anyio
async def test_snapshot_of_both_reminder_forms_in_the_session_log(make_script: MakeScript) -> None:
    s = make_script()
    await s.start("main")
    for _ in range(5):
        await s.call("main", "grep", GREP, "no matches")
    s.close()
    lines = [line for line in s.log.path.read_text(encoding="utf-8").splitlines() if '"context/message"' in line]
    assert lines == [
        '{"type":"context/message","seq":8,"ts":1764489603.0,"agent":"main","call_id":"c3",'
        '"source":{"kind":"plugin","plugin":"repeat-tool-reminder","form":"notice","summary":"grep × 3"},'
        '"text":"You are repeating the exact same tool call with identical arguments. Carefully analyze the previous '
        "result before calling again: if the task is not complete, try a different approach or different arguments "
        'instead of repeating the call."}',
        '{"type":"context/message","seq":13,"ts":1764489605.0,"agent":"main","call_id":"c5",'
        '"source":{"kind":"plugin","plugin":"repeat-tool-reminder","form":"notice","summary":"grep × 5"},'
        '"text":"Repeated tool call detected:\\n- tool: grep\\n- consecutive_calls: 5\\n'
        '- arguments: {\\"path\\":\\"src\\",\\"pattern\\":\\"load_config\\"}\\n'
        "The repeated calls are not making progress. Do not call this tool with these exact arguments again. "
        "Inspect the latest result and choose a different action, different arguments, or finish the task if "
        'enough evidence has been gathered."}',
    ]


# --- large arguments -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_10mb_argument_is_canonicalized_once_per_call_and_not_kept(
    bus: Bus, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module("guard.fingerprint")
    real = module.canonical_json
    sizes: list[int] = []

    def counting(value: Any) -> bytes:
        encoded: bytes = real(value)
        sizes.append(len(encoded))
        return encoded

    monkeypatch.setattr(module, "canonical_json", counting)
    guard = Guard(remind(thresholds=[2, 3], arguments_preview_chars=40)).attach(bus)
    capture = Capture().attach(bus)
    big = {"content": "x" * 10_000_000}
    for i in range(1, 4):
        call = ToolCall(agent=agent, call_id=f"c{i}", step=i, tool="write", args=big)
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "written"))
    assert sizes == [10_000_014] * 3
    assert capture.of(ContextMessage)[1].text == detailed(
        "write", 3, '{"content":"' + "x" * 28 + "… (+9999974 more chars)"
    )
    watches = guard.watches(agent)
    assert watches is not None
    chain = cast(Any, watches[0]).state
    assert (chain.count, len(chain.digest)) == (3, 16)
    assert set(type(chain).__slots__) == {"count", "digest"}


# --- the policy against a reference model --------------------------------------------------------

_TOOLS = ["grep", "read", "todo_write", "mcp.fs[1]+", "mcp_x", "r.d"]
_PATTERNS = ["grep", "mcp*", "*_write", "mcp.fs[*", "r*d", "nothing*", "*"]
_ARGS: list[Any] = [
    {"a": 1, "b": {"c": [1, 2]}},
    {"b": {"c": [1, 2]}, "a": 1},
    {"a": 1, "b": {"c": [2, 1]}},
    '{"a": 1',
    "{}",
    {},
    None,
]
_RESET = ("<user message>", None)


def _reference_match(pattern: str, tool: str) -> bool:
    parts = pattern.split("*")
    if len(parts) == 1:
        return tool == pattern
    head, *middle, tail = parts
    if len(tool) < len(head) + len(tail) or not tool.startswith(head) or not tool.endswith(tail):
        return False
    rest = tool[len(head) : len(tool) - len(tail)]
    for part in middle:
        found = rest.find(part)
        if found < 0:
            return False
        rest = rest[found + len(part) :]
    return True


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(st.sampled_from([*((t, a) for t in _TOOLS for a in range(len(_ARGS))), _RESET]), max_size=40),
    include=st.lists(st.sampled_from(_PATTERNS), max_size=2),
    exclude=st.lists(st.sampled_from(_PATTERNS), max_size=2),
)
def test_chain_counts_equal_a_reference_model(
    events: list[tuple[str, int | None]], include: list[str], exclude: list[str]
) -> None:
    policy = RemindPolicy(RemindConfig(thresholds=(2,), include=tuple(include), exclude=tuple(exclude), repeat_every=1))
    state = policy.new_state()
    agent = Agent("main")
    cache = FingerprintCache()
    last: tuple[str, str] | None = None
    count = 0
    for number, (tool, arg_index) in enumerate(events):
        if arg_index is None:
            policy.on_user_message(state, UserMessage(agent=agent, text="new direction"))
            last, count = None, 0
            continue
        args = _ARGS[arg_index]
        result = ToolResult(agent=agent, call_id=f"c{number}", step=number, tool=tool, args=args)
        action = policy.on_result(state, result, cache)
        tracked = (not include or any(_reference_match(p, tool) for p in include)) and not any(
            _reference_match(p, tool) for p in exclude
        )
        if not tracked:
            assert action is None
            continue
        key = (tool, json.dumps(args, sort_keys=True))
        count = count + 1 if key == last else 1
        last = key
        if count == 1:
            assert action is None
        else:
            assert action is not None
            assert (action.count, action.tool, action.call_id) == (count, tool, f"c{number}")


def test_policy_names_a_missing_agent_as_none() -> None:
    policy = RemindPolicy(RemindConfig(thresholds=(2,)))
    state = policy.new_state()
    cache = FingerprintCache()
    for i in range(2):
        action = policy.on_result(state, ToolResult(agent=None, call_id=f"c{i}", step=i, tool="t"), cache)
    assert action is not None
    assert action.agent is None
