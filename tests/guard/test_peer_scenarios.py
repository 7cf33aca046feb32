"""Other loop guards' test scenarios, replayed through our four policies.

Each test rebuilds one scenario from a peer's test suite (or a reported
incident) as a scripted session on a real bus, guard and session log, and
runs it through ``remind`` (the default config), ``turns`` (a ``[turns]``
section), ``rescue`` (a ``[rescue]`` section whose ask command does not
exist, so escalations fail and fall back to the local denial) and ``loops``
with its defaults (the ``recommended`` preset). It asserts
what each policy does and at which call: ``(call number, action)``. The
comparison table built from these tests is ``docs/policies/peers.md``.

Sources (read, not copied):

- gemini-cli: ``google-gemini/gemini-cli``
  ``packages/core/src/services/loopDetectionService.test.ts`` (and the
  service itself: 5 consecutive identical calls, key ``name:JSON.stringify(args)``).
- OpenHands: ``All-Hands-AI/OpenHands`` ``tests/unit/test_is_stuck.py``
  (``openhands/controller/stuck.py``) and the SDK's StuckDetector tests
  (``OpenHands/software-agent-sdk``,
  ``openhands-sdk/openhands/sdk/conversation/stuck_detector.py``).
- oh-my-pi: ``can1357/oh-my-pi`` ``packages/ai/test/tool-call-loop-guard.test.ts``
  (``packages/ai/src/utils/tool-call-loop-guard.ts``).
- pi-repeat-tool-guard 0.1.0 (npm; ``src/index.ts``, it ships no tests).
- Claude Code issues ``anthropics/claude-code#53578``, ``#64882``, ``#29944``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import pytest

from bus import ContextMessage, Event
from guard import Action, Config, LoopsConfig, RemindConfig, RescueConfig, TurnsConfig
from tests.guard.conftest import MakeScript

pytestmark = pytest.mark.anyio


class _Call(NamedTuple):
    tool: str
    args: Any
    content: str = "ok"
    error: bool = False
    parallel: bool = False  # same model response (step) as the previous call


class _User(NamedTuple):
    text: str


class _TextTurn(NamedTuple):
    """A model response without tool calls: it uses a step, emits no event."""


_Event = _Call | _User | _TextTurn
Verdicts = dict[str, list[tuple[int, str]]]


class _Run(NamedTuple):
    verdicts: Verdicts
    texts: dict[str, list[str]]


Run = Callable[..., Awaitable[_Run]]


def call(tool: str, args: Any, content: str = "ok", *, error: bool = False, parallel: bool = False) -> _Call:
    return _Call(tool, args, content, error, parallel)


@pytest.fixture
def run(make_script: MakeScript, missing_ask_command: str, monkeypatch: pytest.MonkeyPatch) -> Run:
    """``await run(events, remind={...}, turns={...}, rescue={...}, loops={...})``: the
    events through each policy alone, each in its own session. Keyword
    dictionaries override that policy's settings."""
    monkeypatch.delenv("REPEAT_TOOL_GUARD_TURNS_THRESHOLD", raising=False)

    async def go(events: Sequence[_Event], **settings: dict[str, Any]) -> _Run:
        off = RemindConfig(enabled=False)
        configs = {
            "remind": Config(remind=RemindConfig(**settings.get("remind", {}))),
            "turns": Config(remind=off, turns=TurnsConfig(**settings.get("turns", {}))),
            "rescue": Config(
                remind=off, rescue=RescueConfig(ask_command=missing_ask_command, **settings.get("rescue", {}))
            ),
            "loops": Config(remind=off, loops=LoopsConfig(**settings.get("loops", {}))),
        }
        verdicts: Verdicts = {}
        texts: dict[str, list[str]] = {}
        for name, config in configs.items():
            script = make_script(config)
            ordinal: dict[str, int] = {}
            actions: list[Action] = []

            def listen(action: Action, _trigger: Event, actions: list[Action] = actions) -> None:
                actions.append(action)

            script.guard.add_listener(listen)
            await script.start("main")
            step = 0
            for event in events:
                if isinstance(event, _User):
                    await script.user("main", event.text)
                    continue
                if isinstance(event, _TextTurn):
                    step += 1
                    continue
                step += 0 if event.parallel else 1
                result = await script.call(
                    "main", event.tool, event.args, event.content, step=step, is_error=event.error
                )
                ordinal[result.call_id] = len(ordinal) + 1
            verdicts[name] = [(ordinal[a.call_id], a.action) for a in actions]
            texts[name] = [a.text for a in actions]
        return _Run(verdicts, texts)

    return go


# ------------------------------------------------------------------ gemini-cli


async def test_five_identical_calls_are_answered_by_every_policy_by_the_fifth(run: Run, anyio_backend: str) -> None:
    """gemini-cli ``should not detect a loop for fewer than TOOL_CALL_LOOP_THRESHOLD
    identical calls`` / ``should detect a loop on the TOOL_CALL_LOOP_THRESHOLD-th
    identical call``: gemini flags the 5th identical call, not the 4th."""
    out = await run([call("testTool", {"param": "value"})] * 5)
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind")],
        "turns": [(5, "remind")],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed")],
        "loops": [(3, "deny"), (4, "deny"), (5, "deny"), (5, "halt")],
    }


async def test_ten_identical_reads_keep_drawing_an_answer(run: Run, anyio_backend: str) -> None:
    """gemini-cli ``should detect a loop on subsequent identical calls`` and
    ``Iterative Loop State: should correctly transition from Strike 1 to
    Strike 2`` (the call after a detection is flagged again); Claude Code
    #53578 (10+ identical ``Read`` calls on one file). ``remind`` goes silent
    past its last threshold by design (``repeat_every`` changes that);
    ``turns`` climbs its ladder; ``rescue`` denies every further attempt."""
    out = await run([call("Read", {"file_path": "src/arrange-grouping.service.ts"}, "export class ...")] * 10)
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind"), (8, "remind")],
        "turns": [(5, "remind"), (7, "deny"), (8, "deny"), (9, "deny"), (9, "halt"), (10, "deny")],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed")] + [(n, "deny") for n in range(6, 11)],
        "loops": [
            (3, "deny"),
            (4, "deny"),
            (5, "deny"),
            (5, "halt"),
            (6, "deny"),
            (7, "deny"),
            (8, "deny"),
            (9, "deny"),
            (10, "deny"),
        ],
    }


async def test_three_distinct_calls_cycled_three_times(run: Run, anyio_backend: str) -> None:
    """gemini-cli ``should not detect a loop for different tool calls``: the
    same three calls (two argument values, two tools) cycled. gemini and the
    chain/turn policies see no loop; ``rescue``'s window sees each call for
    the third time in its third round and denies it (a cycle of any period
    within the window is caught, seed 003). ``loops`` takes unknown tools for
    actions that may change something, so the first round's news starts its
    counts over: it advises at 6 and denies at 9."""
    cycle = [
        call("testTool", {"param": "value1"}),
        call("testTool", {"param": "value2"}),
        call("anotherTool", {"param": "value1"}),
    ]
    out = await run(cycle * 3)
    assert out.verdicts == {
        "remind": [],
        "turns": [],
        "rescue": [(7, "deny"), (8, "deny"), (9, "deny")],
        "loops": [(6, "remind"), (9, "deny")],
    }


async def test_another_plugins_message_between_repeats_does_not_reset(
    make_script: MakeScript, anyio_backend: str
) -> None:
    """gemini-cli ``should not reset tool call counter for other event types``
    (a thought between identical calls): here another plugin's
    ``context/message`` after the 4th call. ``remind`` still reminds at 5."""
    script = make_script(Config())
    await script.start("main")
    for _ in range(4):
        last = await script.call("main", "testTool", {"param": "value"})
    await script.context("main", last.call_id, "linter", "style note")
    await script.call("main", "testTool", {"param": "value"})
    summaries = [m.source.summary for m in script.capture.of(ContextMessage) if m.source.plugin != "linter"]
    assert summaries == ["testTool × 3", "testTool × 5"]


async def test_key_order_does_not_make_a_new_call(run: Run, anyio_backend: str) -> None:
    """gemini-cli keys a call on ``JSON.stringify(args)``, so the same
    arguments in another key order reset its count (the false negative seed
    002 names). Ours canonicalize: five calls alternating key order are five
    identical calls for every policy."""
    orders = [{"pattern": "load_config", "path": "src"}, {"path": "src", "pattern": "load_config"}]
    out = await run([call("grep", orders[n % 2]) for n in range(5)])
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind")],
        "turns": [(5, "remind")],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed")],
        "loops": [(3, "deny"), (4, "deny"), (5, "deny"), (5, "halt")],
    }


# ------------------------------------------------------------------- OpenHands

_LS = call("terminal", {"command": "ls"}, "file1.txt\nfile2.txt")


async def test_same_command_same_output_four_times(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_is_stuck_repeating_action_observation`` (SDK:
    ``test_repeating_action_observation_stuck``, and ``..._not_stuck_less_than_4_repeats``):
    stuck at the 4th identical action/observation pair. ``remind`` and
    ``rescue`` answer at the 3rd; ``turns`` (threshold 5) stays silent."""
    out = await run([_LS] * 4)
    assert out.verdicts == {
        "remind": [(3, "remind")],
        "turns": [],
        "rescue": [(3, "deny"), (4, "deny")],
        "loops": [(3, "deny"), (4, "deny")],
    }


async def test_same_failing_command_three_times(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_is_stuck_repeating_action_error`` (SDK
    ``test_repeating_action_error_stuck``): the same command failing three
    times, with different error texts, is stuck at the 3rd."""
    errors = ["Command not found", "Command still not found or another error", "Different error"]
    out = await run([call("terminal", {"command": "invalid_command"}, text, error=True) for text in errors])
    assert out.verdicts == {"remind": [(3, "remind")], "turns": [], "rescue": [(3, "deny")], "loops": [(3, "remind")]}


async def test_two_calls_alternating_three_times(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_is_stuck_repeating_action_observation_pattern`` (SDK:
    the alternating pattern over 6 events): ``ls``, read ``file1.txt``, three
    times. ``remind`` and ``turns`` ignore alternation by design; ``rescue``
    denies the third ``ls`` (call 5) and the third read."""
    read = call("file_read", {"path": "file1.txt"}, "File content")
    out = await run([_LS, read] * 3)
    assert out.verdicts == {
        "remind": [],
        "turns": [],
        "rescue": [(5, "deny"), (6, "deny")],
        "loops": [(3, "remind"), (5, "deny"), (6, "deny")],
    }


async def test_a_user_message_starts_the_count_over(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_interactive_mode_resets_after_user_message`` (SDK
    ``test_reset_after_user_message``): in interactive mode only history after
    the last user message counts. Ours always reset on a genuine user message
    (OpenHands' headless mode would instead flag the 4th ``ls`` across it)."""
    out = await run([_LS, _LS, _User("Hello"), _LS, _LS, _LS, _LS])
    assert out.verdicts == {
        "remind": [(5, "remind")],
        "turns": [],
        "rescue": [(5, "deny"), (6, "deny")],
        "loops": [(5, "deny"), (6, "deny")],
    }


async def test_distinct_commands_and_reads_are_not_stuck(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_is_stuck_not_stuck`` (SDK ``test_not_stuck_with_different_actions``):
    ``ls``, read f1, ``pwd``, read f2, a user message, ``pwd``, read f2.
    ``loops`` compares results, so the second ``pwd`` with the same output
    draws one advisory (the user's "Done" is an interjection, not a new
    instruction); nothing is denied."""
    pwd = call("terminal", {"command": "pwd"}, "/home/user")
    events: list[_Event] = [
        _LS,
        call("file_read", {"path": "file1.txt"}),
        pwd,
        call("file_read", {"path": "file2.txt"}),
        _User("Done"),
        pwd,
        call("file_read", {"path": "file2.txt"}),
    ]
    out = await run(events)
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": [(5, "remind")]}


async def test_same_code_with_a_different_error_line_is_still_a_repeat(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_is_not_stuck_invalid_syntax_error_random_lines``: the
    same cell run four times, its SyntaxError reported at a different line
    each time, is *not* stuck for OpenHands (outputs differ). Ours judge the
    call, not its output: the identical cell is a repeat."""
    code = "edit_file_by_replace(\n    'book_store.py',\n    to_replace=\"def total(basket):\""
    out = await run(
        [call("execute_ipython_cell", {"code": code}, f"Cell In[1], line {10 * n}\nSyntaxError") for n in range(1, 5)]
    )
    assert out.verdicts == {"remind": [(3, "remind")], "turns": [], "rescue": [(3, "deny"), (4, "deny")], "loops": []}


async def test_listing_distinct_directories_and_files_is_not_stuck(run: Run, anyio_backend: str) -> None:
    """OpenHands ``test_is_not_stuck_context_window_error_with_other_events``:
    ``ls 0`` ... ``ls 8`` with reads of ``file0``, ``file2``, ... between them.
    Every listing is identical, so ``loops`` advises once at the fourth
    directory (a grind); nothing is denied."""
    events: list[_Event] = []
    for n in range(9):
        events.append(call("terminal", {"command": f"ls {n}"}, "file1.txt\nfile2.txt"))
        if n % 2 == 0:
            events.append(call("file_read", {"path": f"file{n}.txt"}, f"File content {n}"))
    out = await run(events)
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": [(6, "remind")]}


# -------------------------------------------------------------------- oh-my-pi

_PYTEST = call("bash", {"command": "pytest -q", "timeout": 120}, "1263 passed, 4 skipped")


async def test_fifth_identical_turn_draws_an_advisory_quoting_the_result(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``detects the fifth consecutive identical tool call``: the
    detection carries the tool, the count 5 and a result summary; so does
    ``turns``' advisory (seed 002 is modelled on this guard)."""
    out = await run([_PYTEST] * 5)
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind")],
        "turns": [(5, "remind")],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed")],
        "loops": [(3, "deny"), (4, "deny"), (5, "deny"), (5, "halt")],
    }
    assert "called bash with identical arguments in 5 consecutive turns" in out.texts["turns"][0]
    assert "Its last result (truncated): 1263 passed, 4 skipped" in out.texts["turns"][0]


async def test_a_harness_intent_field_hides_the_loop_unless_ignored(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``canonicalizes argument key order and ignores harness intent
    fields``: its harness adds an intent field (``_i`` here) to every call, worded
    anew each time. Exact matching makes every call distinct, so ``remind``
    and ``turns`` (exact by their seeds unless given ``ignored_args``) miss
    it; ``rescue``'s default ``ignored_args`` (the shared list) names intent
    fields, and ``turns`` sees it once told."""
    reads = [call("read", {"path": "a.ts", "_i": f"check the file again ({n})"}) for n in range(1, 6)]
    out = await run(reads)
    assert out.verdicts == {
        "remind": [],
        "turns": [],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed")],
        "loops": [(3, "deny"), (4, "deny"), (5, "deny"), (5, "halt")],
    }
    out = await run(reads, remind={"ignored_args": ("_i",)}, turns={"ignored_args": ("_i",)})
    assert out.verdicts["remind"] == [(3, "remind"), (5, "remind")]
    assert out.verdicts["turns"] == [(5, "remind")]


async def test_a_different_call_in_between_resets(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``resets the consecutive count on a different call``:
    ``pytest``, read, ``pytest`` (its threshold 3) is no loop for anyone."""
    out = await run([_PYTEST, call("read", {"path": "src/index.ts"}), _PYTEST])
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": [(3, "remind")]}


async def test_a_loop_on_the_todo_tool_is_seen_by_turns_only(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``re-detects continued identical calls past the threshold
    (issue #12564)``: a loop of identical calls to the todo tool. FINDING:
    ``remind`` and ``rescue`` exclude ``todo_write`` by default (seeds 000/003:
    bookkeeping must not launder a loop), which also makes a loop made *of*
    bookkeeping invisible to them; ``turns`` has no default exemptions."""
    out = await run([call("todo_write", {})] * 10)
    assert out.verdicts == {
        "remind": [],
        "turns": [(5, "remind"), (7, "deny"), (8, "deny"), (9, "deny"), (9, "halt"), (10, "deny")],
        "rescue": [],
        "loops": [
            (3, "deny"),
            (4, "deny"),
            (5, "deny"),
            (5, "halt"),
            (6, "deny"),
            (7, "deny"),
            (8, "deny"),
            (9, "deny"),
            (10, "deny"),
        ],
    }


_POLL_VALVES: dict[str, dict[str, Any]] = {
    "remind": {"exclude": ("todo_write", "job", "hub")},
    "turns": {"exempt": ("job", "hub")},
    "rescue": {"exclude": (*RescueConfig().exclude, "job", "hub")},
    "loops": {"exclude": (*LoopsConfig().exclude, "job", "hub")},
}


async def test_an_exempt_polling_tool_is_never_flagged(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``ignores exempt polling tools`` (``job`` with ``poll``): with
    the tool excluded/exempt in each policy, six identical polls pass."""
    out = await run([call("job", {"poll": ["abc"]}, "running")] * 6, **_POLL_VALVES)
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": []}


async def test_an_exempt_poll_between_identical_turns_does_not_break_the_run(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``does not reset consecutive counter when an exempt polling
    turn occurs between identical turns``: ``pytest`` and an exempt ``hub``
    wait alternate. Exempt calls are transparent to every policy."""
    out = await run([_PYTEST, call("hub", {"op": "wait"})] * 5, **_POLL_VALVES)
    assert out.verdicts == {
        "remind": [(5, "remind"), (9, "remind")],
        "turns": [(9, "remind")],
        "rescue": [(5, "deny"), (7, "deny"), (9, "escalation-failed")],
        "loops": [(5, "deny"), (7, "deny"), (9, "deny"), (9, "halt")],
    }


async def test_the_same_batch_of_parallel_calls_every_turn(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``counts consecutive identical multi-call batches`` and ``treats
    reordered parallel calls as the same batch``; Claude Code #64882 (both
    files re-read on every later turn). Within a turn the calls alternate, so
    ``remind`` never sees two identical calls in a row; ``turns`` counts each
    pair per turn and advises both at turn 5; ``rescue`` denies from the
    third round."""
    a, b = call("Read", {"file_path": "a.py"}), call("Read", {"file_path": "b.py"})
    events: list[_Event] = []
    for n in range(5):
        first, second = (a, b) if n % 2 == 0 else (b, a)
        events += [first, second._replace(parallel=True)]
    out = await run(events)
    assert out.verdicts == {
        "remind": [],
        "turns": [(9, "remind"), (10, "remind")],
        "rescue": [(5, "deny"), (6, "deny"), (7, "deny"), (8, "deny"), (9, "escalation-failed"), (10, "deny")],
        "loops": [
            (4, "remind"),
            (5, "deny"),
            (6, "deny"),
            (7, "deny"),
            (8, "deny"),
            (9, "deny"),
            (9, "halt"),
            (10, "deny"),
            (10, "halt"),
        ],
    }


async def test_a_turn_without_tool_calls_breaks_a_turn_run(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``resets on a turn with no tool calls``: four identical turns,
    a text-only response, four more. ``turns`` sees the step gap and starts
    over; ``remind`` and ``rescue`` count calls, not turns."""
    echo = call("bash", {"command": "echo a"}, "a")
    out = await run([echo] * 4 + [_TextTurn()] + [echo] * 4)
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind"), (8, "remind")],
        "turns": [],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed"), (6, "deny"), (7, "deny"), (8, "deny")],
        "loops": [(3, "deny"), (4, "deny"), (5, "deny"), (5, "halt"), (6, "deny"), (7, "deny"), (8, "deny")],
    }


async def test_alternating_distinct_batches(run: Run, anyio_backend: str) -> None:
    """oh-my-pi ``does not count alternating distinct batches``: batch A (two
    calls) and batch B (one call) alternate. Silent for oh-my-pi, ``remind``
    and ``turns``; ``rescue`` denies each call of the cycle in its third round."""
    batch_a = [call("bash", {"command": "echo a"}), call("read", {"path": "a.ts"}, parallel=True)]
    batch_b = [call("bash", {"command": "echo b"})]
    out = await run((batch_a + batch_b) * 3)
    assert out.verdicts == {
        "remind": [],
        "turns": [],
        "rescue": [(7, "deny"), (8, "deny"), (9, "deny")],
        "loops": [(4, "remind"), (6, "remind"), (7, "deny"), (8, "deny"), (9, "deny")],
    }


# -------------------------------------------------------- pi-repeat-tool-guard


async def test_the_gentle_reminder_comes_at_the_first_threshold_whatever_it_is(run: Run, anyio_backend: str) -> None:
    """pi-repeat-tool-guard hard-codes its gentle text to the count 3, so
    with thresholds ``2,4`` it never sends it (seed 000 fixes this in the
    port). Ours: gentle at 2, detailed at 4."""
    out = await run([call("grep", {"pattern": "TODO"})] * 4, remind={"thresholds": (2, 4)})
    assert out.verdicts == {
        "remind": [(2, "remind"), (4, "remind")],
        "turns": [],
        "rescue": [(3, "deny"), (4, "deny")],
        "loops": [(3, "deny"), (4, "deny")],
    }
    assert out.texts["remind"][0].startswith("You are repeating the exact same tool call")
    assert out.texts["remind"][1].startswith("Repeated tool call detected:\n- tool: grep\n- consecutive_calls: 4")


async def test_an_excluded_bookkeeping_call_does_not_launder_the_loop(run: Run, anyio_backend: str) -> None:
    """pi-repeat-tool-guard's exclusion semantics (kept on purpose by seed
    000): ``grep X``, ``todo_write``, ``grep X``, ... is a run of ``grep X``.
    ``turns`` has no default exemption, so the todo turns break its run."""
    grep, todo = call("grep", {"pattern": "X"}), call("todo_write", {"todos": []})
    out = await run([grep, todo, grep, todo, grep])
    assert out.verdicts == {
        "remind": [(5, "remind")],
        "turns": [],
        "rescue": [(5, "deny")],
        "loops": [(3, "remind"), (5, "deny")],
    }


# ---------------------------------------------------------- Claude Code issues


async def test_the_same_failing_edit_retried(run: Run, anyio_backend: str) -> None:
    """Claude Code #29944: an identical ``Edit`` retried after it failed. A
    failed edit is no progress, so ``rescue`` keeps counting."""
    edit = call(
        "Edit",
        {"file_path": "a.py", "old_string": "def f(:", "new_string": "def f():"},
        "String to replace not found in file.",
        error=True,
    )
    out = await run([edit] * 5)
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind")],
        "turns": [(5, "remind")],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed")],
        "loops": [(3, "remind"), (5, "deny")],
    }


# ------------------------------------------------- legitimate repeats and loops


async def test_polling_a_changing_status_is_nagged_unless_excluded(run: Run, anyio_backend: str) -> None:
    """Polling a CI run whose status changes. FINDING: ``remind``, ``turns``
    and ``rescue`` treat it as a loop by default (OpenHands compares results
    and would not; they never do). ``rescue``'s ``exclude_commands`` frees the
    one command; ``remind`` and ``turns`` can only exempt the whole ``bash``
    tool. ``loops`` compares results and knows a poll: one back-off nudge at
    the fourth unchanged status, never a denial."""
    polls = [call("bash", {"command": "gh run view 42"}, "in_progress" if n < 5 else "completed") for n in range(6)]
    out = await run(polls)
    assert out.verdicts == {
        "remind": [(3, "remind"), (5, "remind")],
        "turns": [(5, "remind")],
        "rescue": [(3, "deny"), (4, "deny"), (5, "escalation-failed"), (6, "deny")],
        "loops": [(4, "remind")],
    }
    out = await run(polls, rescue={"exclude_commands": (r"^gh run view \d+$",)})
    assert out.verdicts["rescue"] == []


async def test_paging_through_a_file_is_silent(run: Run, anyio_backend: str) -> None:
    """Reading one file page by page (gemini-cli's LLM check lists
    "sequential processing" as not a loop): the offset changes every call."""
    pages = [call("Read", {"file_path": "big.log", "offset": 200 * n, "limit": 200}) for n in range(10)]
    out = await run(pages)
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": []}


@pytest.mark.parametrize(
    ("edit_tool", "build_tool"),
    [("Edit", "Bash"), ("replace", "run_shell_command"), ("str_replace_editor", "execute_bash")],
    ids=["claude-code", "gemini-cli", "openhands"],
)
async def test_an_edit_build_cycle_is_silent(run: Run, edit_tool: str, build_tool: str, anyio_backend: str) -> None:
    """An edit-build cycle, each edit different (gemini-cli's LLM check:
    "re-running a build to verify a fix is normal workflow"; seed 003's
    ``cargo clippy`` around edits), in three runtimes' tool names. Before
    gemini-cli's ``replace`` counted as progress, ``rescue`` denied its third
    ``npm test``."""
    events: list[_Event] = []
    for n in range(5):
        args = {"file_path": "a.ts", "old_string": f"v{n}", "new_string": f"v{n + 1}"}
        if edit_tool == "str_replace_editor":
            args = {"command": "str_replace", "path": "a.ts", "old_str": f"v{n}", "new_str": f"v{n + 1}"}
        events += [call(edit_tool, args), call(build_tool, {"command": "npm test"}, f"{5 - n} failing")]
    out = await run(events)
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": []}


@pytest.mark.parametrize(
    ("view", "edit"),
    [
        ({"command": "view", "path": "a.py"}, {"command": "str_replace", "path": "a.py"}),
        ({"file_path": "a.py"}, {"file_path": "a.py"}),
    ],
    ids=["claude-api-text-editor", "claude-code"],
)
async def test_rereading_a_file_after_editing_it_is_silent(
    run: Run, view: dict[str, str], edit: dict[str, str], anyio_backend: str
) -> None:
    """Read a file, edit it, read it again to check, five times. With the
    Claude API text editor (one tool, ``view`` and ``str_replace``) ``rescue``
    used to deny the third ``view``: the tool was not known as an editor."""
    view_tool, edit_tool = ("str_replace_based_edit_tool",) * 2 if "command" in view else ("Read", "Edit")
    events: list[_Event] = []
    for n in range(5):
        events += [
            call(view_tool, view, f"line {n}"),
            call(edit_tool, {**edit, "old_str": f"{n}", "new_str": f"{n + 1}"}),
        ]
    out = await run(events)
    assert out.verdicts == {"remind": [], "turns": [], "rescue": [], "loops": []}


async def test_rewriting_the_same_content_before_each_build(run: Run, anyio_backend: str) -> None:
    """The loop gemini-cli's LLM check describes ("edit_file → run_build →
    edit_file → run_build where each iteration applies the same edit and
    encounters the same error") and OpenHands' alternating pattern: write the
    same content, run the same failing tests. Alternation hides it from
    ``remind`` and ``turns`` (by design); ``rescue`` used to count every
    write as progress and saw nothing. Now the same edit again is no
    progress: the third ``pytest`` is denied, and so is every later attempt."""
    write = call("write", {"path": "a.py", "content": "def f():\n    return 1\n"})
    out = await run([write, call("bash", {"command": "pytest -q"}, "1 failed")] * 5)
    assert out.verdicts == {
        "remind": [],
        "turns": [],
        "rescue": [(6, "deny"), (7, "deny"), (8, "deny"), (9, "deny"), (10, "escalation-failed")],
        "loops": [
            (4, "remind"),
            (5, "deny"),
            (6, "deny"),
            (7, "deny"),
            (8, "deny"),
            (9, "deny"),
            (9, "halt"),
            (10, "deny"),
            (10, "halt"),
        ],
    }
