"""Policy ``loops`` on a real bus: result-aware repeats, cycles, polls, failures, progress."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bus import Agent, Bus, ContextMessage, ToolCall, ToolResult
from bus.testing import Capture
from guard import Config, FingerprintCache, Guard, LoopsConfig, LoopsPolicy, RemindConfig
from guard.policies.loops import LOOPS_PLUGIN
from tests.guard.conftest import Make

pytestmark = pytest.mark.anyio

GREP = {"pattern": "load_config", "path": "src"}


async def test_the_third_identical_call_with_the_same_result_is_denied(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        last = await run.do("Grep", GREP, "No matches found")
    assert run.actions == [(3, "deny")]
    assert last.denied_by == LOOPS_PLUGIN
    assert "made this exact call 2 times" in last.content


async def test_a_changing_result_is_progress_for_that_call(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(6):
        await run.do("Bash", {"command": "pytest -q"}, f"{6 - n} failed")
    assert run.actions == []


async def test_a_clock_normalises_to_one_result_read_as_a_poll(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4):
        await run.do("Bash", {"command": "date"}, f"Tue Dec  1 00:11:{10 + n:02d} UTC 2026")
    assert run.actions == [(4, "remind")]
    assert "returned the same thing 4 times" in run.texts[0]


async def test_a_cycle_draws_one_advisory_then_denials(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("ls", {}, "a b")
        await run.do("read", {"path": "a"}, "A")
    assert run.actions == [(3, "remind"), (5, "deny"), (6, "deny")]
    assert "going in a circle" in run.texts[0]


async def test_a_long_cycle_is_advised_after_two_repeats_in_a_row(make: Make, anyio_backend: str) -> None:
    run = make(advise_span=0)
    calls = [("get_record", {"n": n}, "same") for n in range(4)]
    for tool, args, out in calls * 2:
        await run.do(tool, args, out)
    assert run.actions == [(6, "remind")]


async def test_a_check_after_a_pull_runs(make: Make, anyio_backend: str) -> None:
    run = make()
    log = ("Bash", {"command": "git log -1 --oneline"}, "abc1234 fix parser")
    await run.do(*log)
    await run.do("Bash", {"command": "git push"}, "! [rejected] main -> main (fetch first)", is_error=True)
    await run.do(*log)
    await run.do("Bash", {"command": "git pull --rebase"}, "Successfully rebased and updated refs/heads/main.")
    await run.do(*log)
    assert run.actions == []


async def test_an_inbox_checked_after_sending_mail_is_checked(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(2):
        await run.do("get_inbox", {}, "0 messages")
    await run.do("send_email", {"to": "me@example.com", "body": "ping"}, "sent")
    await run.do("get_inbox", {}, "0 messages")
    assert run.actions == []


SWE_AGENT_FOOTER = "\n(Open file: /w/Deser.java)\n(Current directory: /w)\nbash-$"


async def test_a_cycle_of_text_interface_reads_is_caught(make: Make, anyio_backend: str) -> None:
    """SWE-agent's text interface names each call after its first word
    (``open``, ``search_file``, ``goto``) and passes the line as its command:
    those commands are its own read tools, so going round them is a cycle,
    not a new look after an action."""
    run = make()
    cycle = [
        ("open", "open src/Deser.java\n", "[File: /w/src/Deser.java (2200 lines total)]\n1:package x;"),
        ("search_file", 'search_file "Nulls.SKIP"\n', 'Found 2 matches for "Nulls.SKIP" in /w/src/Deser.java'),
        ("goto", "goto 2110\n", "[File: /w/src/Deser.java (2200 lines total)]\n2110:    if (skip) {"),
    ]
    for _ in range(3):
        for tool, command, result in cycle:
            await run.do(tool, {"command": command}, result + SWE_AGENT_FOOTER)
    assert run.actions[0] == (4, "remind")
    assert (7, "deny") in run.actions


async def test_the_shells_own_refusal_is_a_failure_without_an_exit_status(make: Make, anyio_backend: str) -> None:
    """SWE-agent shows no exit status: ``javac: command not found`` run
    again and again is the same failure (the shell's line counter aside),
    reminded at the third and denied at the fifth."""
    run = make()
    for n in range(5):
        await run.do(
            "javac",
            {"command": "javac -cp .:lib/* Repro.java\n"},
            f"/bin/bash: line {50776 + 15 * n}: javac: command not found" + SWE_AGENT_FOOTER,
        )
    assert run.actions == [(3, "remind"), (5, "deny")]
    assert "failed" in run.texts[0]


LOCALE_WARNING = "bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8): No such file or directory\n"


async def test_a_shell_warning_ahead_of_the_output_is_no_failure(make: Make, anyio_backend: str) -> None:
    """A container whose locale is missing prints the shell's warning ahead
    of every command's output: the tests still ran, and passed or progressed."""
    run = make()
    for n in range(6):
        await run.do(
            "bash", {"command": "python -m pytest -q tests/test_parser.py"}, LOCALE_WARNING + f"{6 - n} failed"
        )
    for n in range(10):
        await run.do("bash", {"command": f"python -m pytest -q tests/test_{n}.py"}, LOCALE_WARNING + f"{n} passed")
    assert run.actions == []


async def test_a_stated_exit_status_of_0_is_a_success_whatever_the_text(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(6):
        await run.do(
            "execute_bash",
            {"command": f"./check.sh {n}"},
            f"ERROR: optional plugin {n} missing, skipped\nall checks passed\n"
            "[The command completed with exit code 0.]",
        )
    assert run.actions == []


async def test_a_comment_with_an_apostrophe_hides_no_push(make: Make, anyio_backend: str) -> None:
    run = make()
    check = ("Bash", {"command": "curl -s https://staging.example.com/version"}, "1.4.2")
    await run.do(*check)
    await run.do(*check)
    await run.do("Bash", {"command": "# let's deploy\ngit push origin main\n# that's it"}, "main -> main")
    await run.do(*check)
    assert run.actions == []


async def test_a_comment_run_as_a_command_changes_nothing(make: Make, anyio_backend: str) -> None:
    check = {"command": "ls -l /opt/jdk/bin/javac\n"}
    missing = "ls: cannot access '/opt/jdk/bin/javac': No such file or directory" + SWE_AGENT_FOOTER
    run = make()
    for n in range(3):
        await run.do("ls", check, missing)
        await run.do("#", {"command": f"# reinstall the JDK, attempt {n}\n"}, "Your command ran successfully.")
    assert (5, "deny") in run.actions


async def test_a_page_observed_after_each_new_click_is_never_denied(make: Make, anyio_backend: str) -> None:
    """A browser agent (OpenHands ``browser_get_state``) looks at the page
    after every click; two clicks that changed nothing must not blind it
    for the clicks that follow."""
    run = make()
    await run.do("browser_get_state", {}, "documents folder")
    for element in (2224, 2299, 2356, 2434):
        await run.do("browser_click", {"index": element}, "clicked")
        await run.do("browser_get_state", {}, "documents folder")
    assert run.actions == []


async def test_the_same_action_again_with_the_same_result_changes_nothing(make: Make, anyio_backend: str) -> None:
    """A click answered only "clicked", the page looked at between clicks
    and the same each time: the clicks change nothing, and the third look
    at the same page is denied."""
    run = make()
    for _ in range(4):
        await run.do("browser_click", {"index": 7}, "clicked")
        await run.do("browser_get_state", {}, "page")
    assert [kind for _, kind in run.actions] == ["remind", "deny", "remind", "deny"]
    assert run.actions[1] == (6, "deny")


async def test_a_read_only_pipeline_with_quoted_separators_is_no_action(make: Make, anyio_backend: str) -> None:
    run = make()
    view = ("str_replace_editor", {"command": "view", "path": "/w/parser.c"}, "1\tint main;")
    for pattern in ("DECL(pattern);", "DEF(pattern);", "a|b"):
        await run.do(*view)
        await run.do("Bash", {"command": f'grep -n "{pattern}" /w/parser.c 2>&1 | head'}, "29: x")
    assert run.actions[-1] == (5, "deny")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("update_topic", {"title": "Reading the config", "summary": "step {n}"}),  # Gemini CLI
        ("tracker_update_task", {"id": "t1", "status": "in progress, pass {n}"}),  # Gemini CLI
        ("TaskUpdate", {"taskId": "1", "status": "in_progress", "note": "{n}"}),  # Claude Code
    ],
)
async def test_bookkeeping_between_the_same_reads_hides_no_loop(
    make: Make, anyio_backend: str, tool: str, args: dict[str, str]
) -> None:
    """A CLI that files every response under a topic or updates its task
    list first: that changes nothing a read could see."""
    run = make()
    for n in range(3):
        await run.do(tool, {k: v.format(n=n) for k, v in args.items()}, "Topic updated.")
        await run.do("read_file", {"file_path": "/w/config.toml"}, "[server]\nport = 80")
    assert run.actions[-1] == (6, "deny")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("TodoWrite", {"todos": [{"content": "Read the migrations", "status": "in_progress"}]}),  # Claude Code
        ("update_plan", {"explanation": "still reading", "plan": [{"step": "Read", "status": "in_progress"}]}),
        ("write_todos", {"todos": [{"description": "Read", "status": "in_progress"}]}),  # Gemini CLI
    ],
)
async def test_an_unchanged_plan_restated_while_the_work_brings_news_is_no_repeat(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object]
) -> None:
    run = make()
    for n in range(5):
        await run.do("Read", {"file_path": f"migrations/00{n}_init.sql"}, f"create table t{n}();")
        await run.do(tool, args, "Todos have been modified successfully.")
    assert run.actions == []
    for _ in range(2):  # restated with nothing new in between, or between two versions of itself
        await run.do(tool, args, "Todos have been modified successfully.")
    assert run.actions == [(12, "deny")]


async def test_a_handoff_made_again_for_each_new_ticket_is_no_repeat(make: Make, anyio_backend: str) -> None:
    """An Agents SDK run over a batch of tickets hands each to billing and
    back; only the reads between bring news."""
    run = make()
    for n in range(4):
        await run.do("get_ticket", {"id": f"T-{n}"}, f'{{"id": "T-{n}", "customer": "cus_{n}", "topic": "refund"}}')
        await run.do("transfer_to_billing_agent", {}, '{"assistant": "Billing Agent"}')
        await run.do("get_invoice", {"customer": f"cus_{n}"}, f'{{"amount": {100 + n}}}')
        await run.do("transfer_to_triage_agent", {}, '{"assistant": "Triage Agent"}')
    assert run.actions == []
    for _ in range(2):  # handed back and forth with nothing new in between
        await run.do("transfer_to_billing_agent", {}, '{"assistant": "Billing Agent"}')
        await run.do("transfer_to_triage_agent", {}, '{"assistant": "Triage Agent"}')
    assert run.actions == [(18, "remind"), (20, "deny")]


async def test_a_plan_flipped_back_and_forth_is_a_loop(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(6):
        status = "in_progress" if n % 2 == 0 else "pending"
        await run.do("update_plan", {"plan": [{"step": "Fix flaky test", "status": status}]}, "Plan updated")
    assert [kind for _, kind in run.actions][:2] == ["remind", "deny"]


@pytest.mark.parametrize(
    "shell",
    [
        lambda command: ("shell", {"command": ["bash", "-lc", command], "workdir": "/w"}),
        lambda command: ("exec_command", {"cmd": command, "workdir": "/w"}),
    ],
    ids=["codex-shell-argv", "codex-exec-command"],
)
async def test_codex_shell_reads_in_a_rollout_are_reads(
    make: Make, anyio_backend: str, shell: Callable[[str], tuple[str, dict[str, object]]]
) -> None:
    """A Codex rollout keeps a command as the model wrote it (an argv list,
    or ``cmd``): paging through a file with ``sed -n`` changes nothing."""
    run = make()
    for n in range(3):
        await run.do(*shell("git status --short"), " M src/app.py")
        await run.do(*shell(f"sed -n {n * 40 + 1},{n * 40 + 40}p src/app.py"), f"lines of app.py, part {n}")
    assert run.actions[-1] == (5, "deny")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("search_and_replace", {"path": "src/a.py", "search": "old", "replace": "new"}),  # Roo Code's editor
        ("Bash", {"command": "awk -i inplace '{sub(/old/, \"new\")} 1' src/a.py"}),
        ("Bash", {"command": "find build -name '*.o' -delete"}),
    ],
)
async def test_a_check_after_an_action_that_looks_like_a_read_runs(
    make: Make, anyio_backend: str, tool: str, args: dict[str, str]
) -> None:
    run = make()
    for _ in range(2):
        await run.do("Bash", {"command": "pytest -q"}, "1 failed, 3 passed", is_error=True)
    await run.do(tool, args, "")
    await run.do("Bash", {"command": "pytest -q"}, "1 failed, 3 passed", is_error=True)
    assert run.actions == []


async def test_a_denial_ignored_three_times_asks_for_a_halt(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(5):
        await run.do("Grep", GREP, "No matches found")
    assert run.actions == [(3, "deny"), (4, "deny"), (5, "deny"), (5, "halt")]
    assert "denied 3 times" in run.texts[-1]


async def test_halting_can_be_switched_off(make: Make, anyio_backend: str) -> None:
    run = make(halt_after=0)
    for _ in range(6):
        await run.do("Grep", GREP, "No matches found")
    assert [kind for _, kind in run.actions] == ["deny"] * 4


async def test_ignored_args_do_not_make_a_new_call(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(3):
        await run.do("Bash", {"command": "ls", "description": f"list ({n})"}, "a")
    assert run.actions == [(3, "deny")]


@pytest.mark.parametrize("nudge", ["Come on", "weiter", "Mach weiter bitte!", "continúa", "继续", "続けて", "계속"])
async def test_an_interjection_does_not_reset_but_an_instruction_does(
    make: Make, anyio_backend: str, nudge: str
) -> None:
    run = make()
    await run.do("Grep", GREP, "none")
    await run.do("Grep", GREP, "none")
    await run.user("main", nudge)
    await run.do("Grep", GREP, "none")
    assert run.actions == [(3, "deny")]
    await run.user("main", "I added the loader, grep again")
    await run.do("Grep", GREP, "none")
    await run.do("Grep", GREP, "none")
    assert run.actions == [(3, "deny")]


async def test_an_edit_voids_counts_but_the_same_edit_again_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    write = {"file_path": "a.py", "content": "x = 1\n"}
    await run.do("Grep", GREP, "none")
    await run.do("Grep", GREP, "none")
    await run.do("Write", write, "written")
    await run.do("Grep", GREP, "none")
    await run.do("Write", write, "written")
    await run.do("Write", write, "written")
    assert run.actions == [(5, "remind"), (6, "deny")]


async def test_the_same_edit_reporting_a_changed_file_is_progress(make: Make, anyio_backend: str) -> None:
    run = make()
    edit = {"command": "edit 166:171\n    if (cause != null) {\nend_of_edit"}  # a line-range edit: not idempotent
    test = {"command": "python test_cause.py"}
    for lines in (211, 212, 213):
        await run.do("edit", edit, f"[File: Deserializer.java ({lines} lines total)]")
        await run.do("bash", test, "Exception occurred: Cause cannot be null")
    assert run.actions == []
    await run.do("edit", edit, "[File: Deserializer.java (213 lines total)]")  # the same outcome: no change
    await run.do("bash", test, "Exception occurred: Cause cannot be null")
    assert [kind for _, kind in run.actions] == ["remind"]


async def test_a_failed_edit_is_no_progress(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.do("Grep", GREP, "none")
    await run.do("Grep", GREP, "none")
    await run.do("Edit", {"file_path": "a.py", "old_string": "x"}, "String to replace not found", is_error=True)
    await run.do("Grep", GREP, "none")
    assert run.actions == [(4, "deny")]


async def test_an_edit_of_an_untracked_tool_still_voids_counts(make: Make, anyio_backend: str) -> None:
    run = make(exclude=["Edit"])
    await run.do("Grep", GREP, "none")
    await run.do("Grep", GREP, "none")
    await run.do("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, "updated")
    await run.do("Grep", GREP, "none")
    assert run.actions == []


async def test_the_same_call_failing_is_advised_at_the_third_failure_and_denied_at_the_fifth(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    fetch = {"url": "https://example.org/x"}
    for _ in range(6):
        await run.do("WebFetch", fetch, "Request failed with status code 404", is_error=True)
    assert run.actions == [(3, "remind"), (5, "deny"), (6, "deny")]
    assert "failed 3 times" in run.texts[0]


async def test_two_failures_then_success_is_left_alone(make: Make, anyio_backend: str) -> None:
    run = make()
    fetch = {"url": "https://example.org/x"}
    await run.do("WebFetch", fetch, "404", is_error=True)
    await run.do("WebFetch", fetch, "404", is_error=True)
    await run.do("WebFetch", fetch, "the page")
    assert run.actions == []


async def test_the_same_error_kind_with_varying_arguments_is_a_streak(make: Make, anyio_backend: str) -> None:
    run = make(streak_deny_at=5)
    for n in range(6):
        await run.do("search_code", {"q": n}, f"Error: tool 'search_code' not found ({n})", is_error=True)
    assert run.actions == [(3, "remind"), (6, "deny")]
    assert "same kind of error" in run.texts[0]
    assert "has failed 5 times in a row" in run.texts[1]


async def test_error_text_without_the_flag_is_a_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(3):
        await run.do(
            "str_replace_editor",
            {"command": "str_replace", "path": "/w/a.c", "old_str": f"x{n}"},
            f"ERROR:\nNo replacement was performed, old_str `x{n}` did not appear verbatim in /w/a.c.",
        )
    assert run.actions == [(3, "remind")]


async def test_a_one_line_error_text_without_the_flag_is_a_failure(make: Make, anyio_backend: str) -> None:
    """Crush issue #2856: an MCP search tool answers every query with
    ``Error: 401 Unauthorized`` as text, without the error flag, and the
    agent keeps rewording the query."""
    run = make()
    for n in range(9):
        await run.do("notion_search", {"query": f"roadmap {n}"}, "Error: 401 Unauthorized")
    assert run.actions == [(3, "remind"), (9, "deny")]


@pytest.mark.parametrize(
    "answer",
    [
        '{"status":"error","error":"Figma API error: 429 - {\\"status\\":429,\\"err\\":\\"Rate limit exceeded\\"}"}',
        '{"ok": false, "error": "ratelimited"}',
        '{\n  "error": {\n    "code": 429,\n    "message": "Quota exceeded",\n    "status": "RESOURCE_EXHAUSTED"\n'
        "  }\n}",
        # a Google ADK tool's answer, an HTTP answer returned as is, an MCP SDK's text for a tool that raised
        '{"status": "error", "error_message": "503 Service Unavailable. Please try again later."}',
        '{"status_code": 503, "body": "Service Unavailable"}',
        '{"status_code": 429, "body": ""}',
        "Error executing tool get_node_tree: 503 Service Unavailable",
    ],
)
async def test_a_rate_limit_a_json_answer_reports_without_the_flag_is_retried_as_one(
    make: Make, anyio_backend: str, answer: str
) -> None:
    """A Figma MCP server answers a rate limit as ``{"status": "error",
    ...}`` text, without the error flag (seen in real Gemini CLI sessions):
    the same call retried after waiting is backed off at the fifth, as a
    flagged 429 is, not denied at the third as an unchanged answer."""
    run = make()
    for _ in range(6):
        await run.do("get_node_tree", {"file_key": "V9fF", "node_id": "153:184"}, answer, seconds=20)
    assert run.actions == [(5, "remind")]
    assert "transient error" in run.texts[0]


async def test_an_error_a_google_adk_tool_returns_counts_in_a_failure_streak(make: Make, anyio_backend: str) -> None:
    """ADK tools report failure as ``{"status": "error", "error_message":
    ...}`` (a raised exception ends the run): refunds failing alike for
    every amount tried are a streak of one kind of error."""
    run = make()
    for amount in (4000, 3000, 2000, 1000, 500, 100, 50, 10, 1):
        answer = (
            f'{{"status": "error", "error_message": "amount_too_large: Refund amount ({amount}) is greater than '
            'unrefunded amount (0)."}'
        )
        await run.do("create_refund", {"charge": "ch_1", "amount": amount}, answer)
    assert run.actions == [(3, "remind"), (9, "deny")]


@pytest.mark.parametrize(
    "answer",
    [
        '{{"id": {n}, "status": "error", "message": "worker crashed"}}',
        '{{"status": "failed", "error": null}}',
        '{{"success": false, "message": "No results found for query {n}"}}',  # a search that found nothing
        '{{"error": "", "rows": [{n}]}}',
        '{{"status_code": 200, "body": "job {n}: failed"}}',
    ],
)
async def test_a_record_whose_status_says_failed_is_an_answer(make: Make, anyio_backend: str, answer: str) -> None:
    """A job's record that says the job failed answers a status check, and
    a search that found nothing answers too; the request did not fail:
    nine looked up one after another are no failure streak."""
    run = make()
    for n in range(9):
        await run.do("get_job", {"id": n}, answer.format(n=n))
    assert run.actions == []


async def test_a_servers_read_named_for_its_thing_first_changes_nothing(make: Make, anyio_backend: str) -> None:
    """A real autopilot session (OpenAgentsInc/openagents): the issue queue
    asked three times, the same answer, only a ``directive_get`` read in
    between, which changes nothing the queue could show."""
    run = make()
    for _ in range(3):
        await run.do("mcp__issues__issue_ready", {}, "No ready issues available")
        await run.do("mcp__issues__directive_get", {"id": "d-12"}, "# Directive d-12\nShip the sync engine.")
    assert run.actions[1] == (5, "deny"), "the queue asked a third time, unchanged"
    assert [kind for _, kind in run.actions] == ["remind", "deny", "deny"]


@pytest.mark.parametrize(
    ("tool", "key"),
    [("mcp__pg__run_query", "sql"), ("mcp__mysql__mysql_query", "query"), ("mcp__postgres__query", "sql")],
)
async def test_a_query_tool_running_a_statement_that_changes_data_acts(
    make: Make, anyio_backend: str, tool: str, key: str
) -> None:
    """Data fixed through a query tool between two looks at the same check:
    the check may answer the same while the fix is incomplete, and the next
    fix is no repeat; a SELECT between them changes nothing."""
    fixes = [
        "UPDATE orders SET customer_id = 7 WHERE customer_id IS NULL",
        "-- the empty ones\nDELETE FROM orders WHERE customer_id IS NULL AND total = 0",
        "SELECT 1; insert into customers(id, email) select nextval('c'), email from orders where customer_id is null",
        "WITH moved AS (UPDATE orders SET customer_id = 9 WHERE id = 140 RETURNING id) SELECT count(*) FROM moved",
    ]
    run = make()
    for sql in fixes:
        await run.do("check_orders", {}, "2 violations: orders without a customer")
        await run.do(tool, {key: sql}, "OK")
    assert run.actions == []
    for _ in range(3):
        await run.do("check_orders", {}, "2 violations: orders without a customer")
        await run.do(tool, {key: "SELECT count(*) FROM orders WHERE customer_id IS NULL"}, "2")
    assert "deny" in [kind for _, kind in run.actions]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("WebSearch", {"query": "update node to 20 on ubuntu"}),  # a search's words, not SQL
        ("search_issues", {"query": "create user returns 500"}),
        ("mcp__pg__query", {"sql": "SET search_path TO app; SELECT count(*) FROM orders"}),
        ("mcp__pg__query", {"sql": "COPY (SELECT id FROM orders) TO STDOUT"}),
    ],
)
async def test_a_search_or_a_query_that_only_reads_changes_nothing(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object]
) -> None:
    """Reworded searches between looks at the same page: the look repeated
    is the loop, whatever word the search opens with."""
    run = make()
    for n in range(3):
        await run.do("WebFetch", {"url": "https://example.com/notes"}, "# Notes\nnothing new")
        await run.do(tool, {**args, "n": n}, "3 results")
    assert "deny" in [kind for _, kind in run.actions]


async def test_a_query_tool_given_its_sql_in_a_list_is_judged_by_its_name(make: Make, anyio_backend: str) -> None:
    """Arguments a runtime passed as a list, not an object: no SQL to read,
    the tool reads by its name, and the same look thrice is a loop."""
    run = make()
    for _ in range(3):
        await run.do("mcp__pg__query", ["SELECT count(*) FROM orders"], "2")
    assert run.actions == [(3, "deny")]


async def test_thoughts_and_comments_that_differ_are_different_calls(make: Make, anyio_backend: str) -> None:
    """tau-bench's airline agent thinks before it hands a customer over; a
    support agent comments on one ticket three times: what they say is the
    call, not a reason given for it."""
    run = make()
    for n in range(4):
        await run.do("think", {"thought": f"option {n} breaks the fare rules"}, "")
        await run.do("jira_add_comment", {"issue_key": "OPS-311", "comment": f"step {n} deployed"}, "Comment added")
    assert run.actions == []


async def test_a_tool_answering_only_timeout_to_every_query_is_a_failure_streak(make: Make, anyio_backend: str) -> None:
    """ZeroClaw's loop detector test: a fetch tool times out whatever it is
    asked, reported as the text ``timeout``."""
    run = make()
    for n in range(9):
        await run.do("web_fetch", {"q": f"query {n}"}, "timeout")
    assert run.actions == [(3, "remind"), (9, "deny")]
    run = make()
    for n in range(9):  # a text that only mentions a timeout is an answer
        await run.do("web_fetch", {"q": f"query {n}"}, "the request timeout is 30 s")
    assert run.actions == []


async def test_a_longer_text_that_opens_with_error_is_not_a_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(9):
        await run.do("Read", {"file_path": f"logs/{n}.log"}, "error: disk full\nretrying\nok")
    assert run.actions == []


async def test_a_success_ends_the_streak_and_streak_denial_can_be_off(make: Make, anyio_backend: str) -> None:
    run = make(error_deny_at=0, streak_deny_at=0)
    for n in range(7):
        await run.do("tool", {"n": n}, "Error: broken", is_error=True)
    assert run.actions == [(3, "remind")]
    for _ in range(5):
        await run.do("other", {}, "Error: broken", is_error=True)
    assert run.actions == [(3, "remind"), (10, "remind")]
    await run.do("tool", {"n": 99}, "fine")
    for n in range(3):
        await run.do("tool", {"m": n}, "", is_error=True)
    assert run.actions == [(3, "remind"), (10, "remind")]


async def test_a_poll_whose_output_advances_is_never_acted_on(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(8):
        await run.do("BashOutput", {"bash_id": "b1"}, f"<status>running</status>\nline {n}")
    assert run.actions == []


async def test_an_unchanged_poll_backs_off_before_any_denial(make: Make, anyio_backend: str) -> None:
    run = make(poll_nudge_at=2, poll_deny_after=5, poll_deny_seconds=0)
    for _ in range(7):
        await run.do("Bash", {"command": "kubectl get pods"}, "api 0/1 Pending", seconds=2)
    assert run.actions == [(2, "remind"), (4, "remind"), (6, "deny"), (7, "deny")]
    assert "wait about 5 seconds" in run.texts[0]
    assert "wait about 10 seconds" in run.texts[1]
    assert "despite the advice to back off" in run.texts[2]


async def test_an_unchanged_poll_is_denied_after_its_time(make: Make, anyio_backend: str) -> None:
    run = make(poll_deny_seconds=100)
    for _ in range(7):
        await run.do("BashOutput", {"bash_id": "b1"}, "<status>running</status>", seconds=20)
    # every poll 20 s apart: it already waits longer than the first nudges would
    # name, so it is nudged to the next wait, then denied once unchanged for 100 s
    assert run.actions == [(4, "remind"), (6, "deny"), (7, "deny")]
    assert "wait about 30 seconds" in run.texts[0]
    assert "over 2 min" in run.texts[1]
    assert "poll it again only after waiting at least 30 seconds (the tool's own wait" in run.texts[1]
    assert "until <check>; do sleep 30; done" in run.texts[1]


async def test_a_poll_that_already_waits_the_longest_back_off_is_never_denied(make: Make, anyio_backend: str) -> None:
    """A CI run or a deploy takes half an hour; an agent that checks it once a
    minute is doing what a nudge would ask of it."""
    run = make()
    for _ in range(40):
        await run.do("Bash", {"command": "sleep 60 && gh run view 7712"}, "* build (in_progress)", seconds=61)
    assert run.actions == []


async def test_a_poll_that_waits_half_the_longest_back_off_is_nudged_never_denied(
    make: Make, anyio_backend: str
) -> None:
    """Waiting 45 s between checks of a pending CI run is backing off, if not
    as far as the nudge asks: it is told once to wait longer, never denied
    nor halted, however long the run takes."""
    run = make()
    for _ in range(30):
        await run.do("Bash", {"command": "gh pr checks 42"}, "build\tpending\t0\thttps://ci/1", seconds=46)
    assert run.actions == [(4, "remind")]
    assert "wait about 60 seconds" in run.texts[0]


async def test_typing_into_a_session_is_no_poll(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("write_stdin", {"session_id": 4, "chars": "y\n"}, "ok")
    assert run.actions == [(3, "deny")]


async def test_a_result_reporting_a_pending_state_is_a_poll(make: Make, anyio_backend: str) -> None:
    run = make(poll_tools=[], poll_nudge_at=2)
    for _ in range(3):
        await run.do("ci", {"run": 7}, "status: in_progress")
    assert run.actions == [(2, "remind")]


async def test_a_failing_poll_backs_off_rather_than_counting_as_failures(make: Make, anyio_backend: str) -> None:
    run = make(poll_nudge_at=2)
    health = {"command": "curl -fsS http://localhost:8080/health"}
    for _ in range(4):
        await run.do("Bash", health, "curl: (7) Failed to connect", is_error=True)
    await run.do("Bash", health, "ok")
    assert run.actions == [(2, "remind"), (4, "remind")]


async def test_excluded_calls_are_not_counted(make: Make, anyio_backend: str) -> None:
    run = make(exclude=["todo_write"], exclude_commands=["^sleep"])
    for _ in range(4):
        await run.do("todo_write", {}, "ok")
        await run.do("Bash", {"command": "sleep 5"}, "")
    assert run.actions == []


async def test_a_call_the_guard_was_not_asked_about_still_counts(anyio_backend: str) -> None:
    policy = LoopsPolicy(LoopsConfig())
    state = policy.new_state()
    cache = FingerprintCache()
    agent = Agent("main")
    actions = []
    for n in range(3):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="ls", args={})
        actions.append(policy.on_result(state, ToolResult.answering(call, "a"), cache))
    assert actions[1] is None
    assert actions[2] is not None
    assert actions[2].action == "remind"
    call = ToolCall(agent=agent, call_id="c9", step=9, tool="ls", args={})
    denial = await policy.on_call(state, call, cache)
    assert denial is not None
    assert denial.action == "deny"
    other = ToolResult.answering(call, "denied elsewhere", denied_by="someone-else")
    assert policy.on_result(state, other, cache) is None


async def test_a_halt_survives_a_signature_that_fell_out_of_the_window(anyio_backend: str) -> None:
    policy = LoopsPolicy(LoopsConfig(window=3, deny_at=3, halt_after=1))
    state = policy.new_state()
    cache = FingerprintCache()
    agent = Agent("main")
    for n in range(2):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="ls", args={})
        assert await policy.on_call(state, call, cache) is None
        policy.on_result(state, ToolResult.answering(call, "a"), cache)
    call = ToolCall(agent=agent, call_id="c3", step=3, tool="ls", args={})
    assert await policy.on_call(state, call, cache) is not None
    state.signatures.clear()
    halt = policy.on_result(state, ToolResult.answering(call, "denied", denied_by=LOOPS_PLUGIN), cache)
    assert halt is not None
    assert halt.action == "halt"
    assert halt.count == 1


async def test_signatures_leave_with_the_window(make: Make, anyio_backend: str) -> None:
    run = make(window=3)
    await run.do("Grep", GREP, "none")
    for n in range(3):
        await run.do("Read", {"n": n}, "x")
    await run.do("Grep", GREP, "none")
    await run.do("Grep", GREP, "none")
    assert run.actions == []


async def test_the_guard_publishes_the_advisory_after_the_result(anyio_backend: str) -> None:
    bus = Bus()
    Guard(Config(remind=RemindConfig(enabled=False), loops=LoopsConfig())).attach(bus)
    capture = Capture().attach(bus)
    agent = Agent("main")
    for n, args in enumerate([{"a": 1}, {"b": 1}, {"a": 1}]):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="get", args=args)
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "same"))
    (message,) = capture.of(ContextMessage)
    assert message.source.plugin == LOOPS_PLUGIN
    assert message.source.summary == "get × 2"


async def test_a_signature_still_in_the_window_keeps_its_count(make: Make, anyio_backend: str) -> None:
    run = make(window=3)
    for tool in ("get_a", "get_b", "get_a", "get_c", "get_a"):
        await run.do(tool, {}, "same")
    assert run.actions == [(3, "remind"), (5, "deny")]


async def test_different_programs_failing_alike_are_no_streak(make: Make, anyio_backend: str) -> None:
    run = make()
    for command in ("make", "cd /w && make clean && make", "rm -rf build && make"):
        await run.do("Bash", {"command": command}, "Exit code 2\nmake: *** No rule to make target", is_error=True)
    assert run.actions == [(3, "remind")]
    for command in ("pytest -q a", "ruff check b", "mypy c"):
        await run.do("Bash", {"command": command}, "Exit code 1\nerror: something failed", is_error=True)
    assert run.actions == [(3, "remind")]


async def test_a_shell_tool_refusing_every_command_draws_its_own_advisories(make: Make, anyio_backend: str) -> None:
    """Gemini CLI's shell tool rejects whatever it is given, so no program
    ran (no exit status) and no program fails three times: the tool's own
    streak is advised at three and again at eight, never denied."""
    run = make()
    programs = ["git-filter-repo", "python", "winget", "java", "robocopy", "cp", "pip", "dir", "git"]
    for program in programs:
        refused = "Command rejected because it could not be parsed safely"
        await run.do("run_shell_command", {"command": f"{program} --version"}, refused, is_error=True)
    assert run.actions == [(3, "remind"), (8, "remind")]
    assert "whatever command it was given" in run.texts[0]
    await run.do("run_shell_command", {"command": "dir"}, "Output: a.txt\nExit Code: 0")
    for n in range(3):  # a success ends the tool's streak
        await run.do("run_shell_command", {"command": f"ver{n}"}, "Command rejected: nope", is_error=True)
    assert run.actions == [(3, "remind"), (8, "remind"), (13, "remind")]


async def test_a_program_the_refusing_shell_tool_keeps_refusing_is_never_denied(make: Make, anyio_backend: str) -> None:
    """A Gemini CLI shell that refuses every command, ``git`` among them
    most: the tool failed, not ``git``, so ``git`` draws neither its own
    advisory after the tool's nor a denial at its eighth refusal."""
    run = make()
    refused = "Command rejected because it could not be parsed safely"
    commands = ["git status", "git log -1", "dir", "git diff", "python -V", "git fetch", "git pull --rebase"]
    commands += ["git -C . status", "git remote -v", "git branch -a", "git stash list"]
    for command in commands:
        await run.do("run_shell_command", {"command": command}, refused, is_error=True)
    assert [kind for _, kind in run.actions] == ["remind", "remind"]
    assert all("whatever command it was given" in text for text in run.texts)


async def test_a_program_failing_for_real_after_one_other_failed_alike_is_still_denied(
    make: Make, anyio_backend: str
) -> None:
    """A shell that states no exit status (every failure joins the tool's
    streak): ``python3`` failing once and then ``python`` nine times alike is
    ``python``'s loop, not the tool refusing everything."""
    run = make()
    missing = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'flask'"
    await run.do("execute_command", {"command": "python3 app.py"}, missing, is_error=True)
    for port in range(9):
        await run.do("execute_command", {"command": f"python app.py --port 80{port}"}, missing, is_error=True)
    assert (10, "deny") in run.actions, "python failed eight times: its ninth attempt is denied"


async def test_programs_that_ran_and_failed_alike_are_no_refusal_of_the_tool(make: Make, anyio_backend: str) -> None:
    """mini-swe-agent states each command's exit status as
    ``<returncode>2</returncode>``: a program ran, so different commands
    failing with one exception are no shell tool refusing them."""
    run = make()
    for command in (
        "cat > conf.py <<EOF\nx = 1\nEOF\nsphinx-build . out",
        "cd repro && sphinx-build . out",
        "make html",
    ):
        await run.do(
            "bash",
            {"command": command},
            "<returncode>2</returncode>\n<output>\nException occurred:\n</output>",
            is_error=True,
        )
    assert not any("whatever command it was given" in text for text in run.texts)


async def test_a_refused_poll_command_does_not_end_the_shell_tools_streak(make: Make, anyio_backend: str) -> None:
    """``tail`` and ``wc -l`` are polls, and a failed poll joins no streak,
    but the tool refusing it is no success of the tool either."""
    run = make()
    refused = "Command rejected because it could not be parsed safely"
    for program in ("python", "tail -n 5 app.log", "java", "wc -l data.csv", "pip"):
        await run.do("run_shell_command", {"command": f"{program} --version"}, refused, is_error=True)
    assert [kind for _, kind in run.actions] == ["remind"]


async def test_failures_in_one_model_response_are_one_attempt(make: Make, anyio_backend: str) -> None:
    """Three reads requested together, all outside the workspace: the model
    saw none of the errors before asking for the others."""
    run = make()
    outside = "File path must be within one of the workspace directories: /home/m"
    for path in ("/etc/pam.d/sudo", "/etc/pam.d/system-auth", "/etc/ssh/sshd_config"):
        await run.call("main", "read_file", {"file_path": path}, outside, is_error=True, step=7, seconds=0.05)
    assert run.actions == []
    for path in ("/etc/hosts", "/etc/fstab"):  # two more responses, failing alike
        await run.do("read_file", {"file_path": path}, outside, is_error=True)
    assert [kind for _, kind in run.actions] == ["remind"]


async def test_a_step_that_never_moves_on_hides_no_streak(make: Make, anyio_backend: str) -> None:
    """A runtime that numbers no steps (or a call never answered keeps the
    step open): failures seconds apart are attempts one after another."""
    run = make()
    for n in range(9):
        await run.do("str_replace", {"path": "a.py", "old": f"x{n}"}, "Error: old not found", is_error=True, step=1)
    assert run.actions == [(3, "remind"), (9, "deny")]


async def test_searches_that_find_nothing_under_other_names_are_never_denied(make: Make, anyio_backend: str) -> None:
    """``grep`` exits 1 with no output when a name is not there: each such
    answer is information, and says nothing that could be one kind of
    error."""
    run = make()
    for n in range(12):
        await run.do("Bash", {"command": f"grep -rn 'handler_{n}' src/"}, "Exit code 1", is_error=True)
    assert run.actions == []


async def test_a_shell_programs_failure_streak_names_the_program(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(9):
        await run.do(
            "Bash", {"command": f"python tool.py -n {n}"}, "ModuleNotFoundError: No module named 'yaml'", is_error=True
        )
    assert run.actions == [(3, "remind"), (9, "deny")]
    assert run.texts[0].startswith("loop-detector: `python` (Bash) has failed 3 times in a row")
    assert "`python` (Bash) has failed 8 times in a row" in run.texts[1]


async def test_a_multi_line_script_is_its_programs_not_its_last_lines(make: Make, anyio_backend: str) -> None:
    """``python -c "…"`` over several lines, or a script in a heredoc: the
    program is the one the script is handed to, so scripts of different
    programs failing alike are no streak, and one program's are named for it."""
    run = make()
    for program in (
        'python -c "import a\nprint(a.b)"',
        'node -e "const a = 1;\nconsole.log(b)"',
        "ruby - <<'RB'\nputs b\nRB",
    ):
        await run.do("Bash", {"command": program}, "Exit code 1\nerror: name b is not defined", is_error=True)
    assert run.actions == []
    for n in range(3):
        script = f'python -c "import wrapt\nprint({n})"'
        await run.do("Bash", {"command": script}, "ImportError: cannot import name 'formatargspec'", is_error=True)
    assert run.actions == [(6, "remind")]
    assert run.texts[0].startswith("loop-detector: `python` (Bash) has failed 3 times in a row")


async def test_a_bare_sleep_is_a_wait_not_a_loop(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4):
        await run.do("Bash", {"command": "sleep 30"}, "")
        await run.do("Bash", {"command": "./ci status"}, f"step {n}")
    assert run.actions == []


async def test_a_poll_named_by_its_argument_whose_output_progresses_is_left_alone(
    make: Make, anyio_backend: str
) -> None:
    """OpenClaw's ``process`` tool polled for a running job's next line: each
    result differs from the last by one number grown by one, which for any
    other call would be a counter counting its own runs."""
    run = make()
    for n in range(6):
        await run.do("process", {"action": "poll", "sessionId": "sess-1"}, f"line {n}")
    assert run.actions == []


async def test_an_action_argument_that_is_not_a_poll_word_keeps_the_counter_rule(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    for n in range(3):
        await run.do("process", {"action": "start", "sessionId": "sess-1"}, f"attempt {n}")
    assert run.actions == [(3, "deny")]


async def test_an_empty_shell_command_reads_output_as_a_poll(make: Make, anyio_backend: str) -> None:
    run = make(poll_nudge_at=2)
    for _ in range(3):
        await run.do("execute_bash", {"command": "", "is_input": True}, "[still running]")
    assert run.actions == [(2, "remind")]


async def test_a_poller_that_already_waits_is_nudged_with_a_longer_wait(make: Make, anyio_backend: str) -> None:
    run = make(poll_nudge_at=2)
    for _ in range(6):
        await run.do("write_stdin", {"session_id": 3, "chars": ""}, "Process running\nOutput:\n", seconds=12)
    # 12 s apart: it already waits 5 and 10 s, so the first nudge names 30 s,
    # the second 60 s, and then it has been told every wait there is
    assert run.actions == [(2, "remind"), (4, "remind")]
    assert "wait about 30 seconds" in run.texts[0]
    assert "wait about 60 seconds" in run.texts[1]


async def test_prefixes_and_assignments_do_not_name_the_program(make: Make, anyio_backend: str) -> None:
    run = make()
    for command in ("FOO=1 timeout 30 ./build.sh", "sudo -E ./build.sh --fast", "nohup ./build.sh x"):
        await run.do("Bash", {"command": command}, "Error: toolchain missing", is_error=True)
    assert run.actions == [(3, "remind")]


async def test_a_user_asking_for_n_runs_gets_them(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.user("main", "Run the flaky test six times and tell me how often it fails")
    for _ in range(7):
        await run.do("Bash", {"command": "pytest -q tests/test_flaky.py"}, "1 passed in 4.1s")
    assert run.actions == [(7, "deny")]
    await run.user("main", "now look at the log instead")
    for _ in range(3):
        await run.do("Bash", {"command": "pytest -q tests/test_flaky.py"}, "1 passed in 4.1s")
    assert run.actions == [(7, "deny"), (10, "deny")]


@pytest.mark.parametrize(
    ("request_text", "tool", "args", "answer", "beyond"),
    [
        # each job is new, but its id is noise: past the six asked for, a repeat
        (
            "Submit six training runs",
            "Bash",
            {"command": "sbatch train.sh"},
            "Submitted batch job 4812345",
            (7, "deny"),
        ),
        # "queued" reads as a poll's state: past the six asked for, a poll told to back off
        ("Spin up 6 load-test workers against staging", "dispatch_task", {"task": "load"}, "queued", (8, "remind")),
        # blank rows asked for: only calls that make something get them
        (
            "Add 6 blank rows at the bottom of the Leads sheet.",
            "append_row",
            {"sheet": "Leads", "values": ["", "", ""]},
            '{"updatedRange": "Leads!A12:C", "updatedRows": 1}',
            (7, "deny"),
        ),
    ],
)
async def test_a_user_asking_for_n_runs_or_workers_gets_them(
    make: Make, anyio_backend: str, request_text: str, tool: str, args: dict[str, str], answer: str, beyond: object
) -> None:
    run = make()
    await run.user("main", request_text)
    for _ in range(6):
        await run.do(tool, args, answer)
    assert run.actions == []
    for _ in range(2):
        await run.do(tool, args, answer)
    assert run.actions[0] == beyond


async def test_a_user_asking_for_n_of_the_same_thing_is_told_only_past_them(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.user("main", "Create 5 identical 'Onboarding checklist' placeholder tickets, one per new hire.")
    for n in range(1, 8):
        await run.do("create_ticket", {"subject": "Onboarding checklist"}, f"Created ticket #45{n}")
    assert run.actions == [(6, "remind")]
    assert "each time it made one more" in run.texts[0]


async def test_things_to_make_asked_for_let_no_other_call_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.user("main", "create 10 AGENTS.md files, one per package, then make the pool test pass")
    for _ in range(6):
        await run.do("Bash", {"command": "pytest tests/test_pool.py"}, "1 failed: test_pool_size", is_error=True)
    assert run.actions == [(3, "remind"), (5, "deny"), (6, "deny")]


async def test_a_user_asking_to_keep_polling_gets_an_unchanged_read_until_it_changes(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    await run.user("main", "Keep polling order 1042 until it ships.")
    for _ in range(8):
        await run.do("get_order", {"order_id": "1042"}, '{"id": "1042", "fulfillment_status": null}', seconds=45)
    await run.do("get_order", {"order_id": "1042"}, '{"id": "1042", "fulfillment_status": "fulfilled"}')
    assert run.actions == []


async def test_a_user_asking_to_watch_a_page_gets_its_unchanged_fetches(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.user("main", "Watch the payments provider incident page and tell me when it's resolved.")
    for _ in range(5):
        await run.do("fetch_url", {"url": "https://status.acme.test/incidents/x1"}, "Status: investigating")
    assert run.actions == []


async def test_a_user_asking_to_keep_using_a_tool_gets_its_calls(make: Make, anyio_backend: str) -> None:
    """crewAI's repeated-tool-usage task: the user tells the agent to keep
    calling one tool, and it does, getting the same answer each time."""
    run = make()
    await run.user(
        "main", "The final answer is 42. But don't give it yet, instead keep using the `get_final_answer` tool."
    )
    for _ in range(4):
        await run.do("get_final_answer", {}, "42")
    assert run.actions == []


async def test_requested_repeats_can_be_ignored(make: Make, anyio_backend: str) -> None:
    run = make(requested_repeats=False)
    await run.user("main", "retry 5 times")
    for _ in range(3):
        await run.do("Bash", {"command": "./deploy.sh"}, "deployed")
    assert run.actions == [(3, "deny")]


async def test_a_failing_flaky_test_the_user_asked_to_rerun_is_not_denied(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.user("main", "The test is flaky: run it a few times and tell me how often it fails")
    for _ in range(5):
        await run.do("Bash", {"command": "pytest -q tests/test_flaky.py"}, "1 failed in 4.1s", is_error=True)
    assert run.actions == []
    await run.do("Bash", {"command": "pytest -q tests/test_flaky.py"}, "1 failed in 4.1s", is_error=True)
    assert run.actions == [(6, "deny")]


async def test_a_re_read_after_a_failed_edit_draws_no_advisory(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.do("Read", {"file_path": "a.py"}, "x = 1")
    await run.do("Edit", {"file_path": "a.py", "old_string": "x=1"}, "String not found", is_error=True)
    await run.do("Read", {"file_path": "a.py"}, "x = 1")
    assert run.actions == []
    await run.do("Grep", {"pattern": "y"}, "none")
    await run.do("Read", {"file_path": "a.py"}, "x = 1")  # third time, nothing changed
    assert run.actions == [(5, "deny")]


async def test_calls_whose_results_never_come_are_kept_to_a_bound(anyio_backend: str) -> None:
    bus = Bus()
    guard = Guard(Config(remind=RemindConfig(enabled=False), loops=LoopsConfig())).attach(bus)
    agent = Agent("main")
    for n in range(200):  # an interrupted run: calls of 10 KB arguments whose results never arrive
        args = {"path": f"src/f{n}.py", "content": "x" * 10_000}
        await bus.decide(ToolCall(agent=agent, call_id=f"lost{n}", step=n, tool="Write", args=args))
    [watch] = guard.watches(agent) or []
    assert len(watch.state.calls) == 64  # type: ignore[attr-defined]
    decisions = []
    for n in range(3):
        call = ToolCall(agent=agent, call_id=f"g{n}", step=200 + n, tool="Grep", args=GREP)
        decisions.append((await bus.decide(call)).allowed)
        await bus.publish(ToolResult.answering(call, "No matches found"))
    assert decisions == [True, True, False]


NOT_FOUND_ANSWERS = (
    "I could not find an explicit maximum upload size in the docs I accessed.",
    "The documentation I reviewed does not state a max upload size.",
    "No maximum upload size is documented in the pages available to me.",
    "I was unable to locate the upload size limit in the documentation.",
    "The docs don't seem to mention a specific upload size limit.",
)


async def test_a_subagent_asked_again_that_finds_nothing_in_new_words_is_a_repeat(
    make: Make, anyio_backend: str
) -> None:
    """The parent relaunches a subagent with the same prompt; each time it
    says, in new words, that it found nothing."""
    run = make()
    task = {
        "description": "Find the upload limit",
        "prompt": "Find the Files API's maximum upload size; cite the page.",
    }
    for answer in NOT_FOUND_ANSWERS:
        await run.do("Task", task, answer, seconds=90)
    assert run.actions == [(4, "deny"), (5, "deny")]


async def test_a_subagent_asked_again_that_then_finds_it_is_left_alone(make: Make, anyio_backend: str) -> None:
    run = make()
    task = {
        "description": "Find the upload limit",
        "prompt": "Find the Files API's maximum upload size; cite the page.",
    }
    for answer in (*NOT_FOUND_ANSWERS[:2], "It is 512 MB per file: docs/files.md#limits.", *NOT_FOUND_ANSWERS[2:4]):
        await run.do("Task", task, answer, seconds=90)
    assert run.actions == []
    run = make()
    for n, answer in enumerate(NOT_FOUND_ANSWERS):  # other questions, each answered "not found"
        await run.do("Task", {"prompt": f"Find the limit of API {n}."}, answer, seconds=90)
    assert run.actions == []


async def test_an_answer_that_only_mentions_a_miss_is_not_a_miss(make: Make, anyio_backend: str) -> None:
    """A subagent working through a batch says what it did first and what it
    could not do after; a log watched for new lines holds a `404 Not Found`."""
    run = make()
    task = {"prompt": "Migrate the next 10 unmigrated test files to pytest; report what is left."}
    for n in range(5):
        answer = f"Migrated files {10 * n} to {10 * n + 9}. I could not verify test_mod{n}.py: it needs a database."
        await run.do("Task", task, answer, seconds=90)
    for n in range(5):
        log = f'10.0.0.{n} "GET /api/v2/item/{n} HTTP/1.1" 404 Not Found\n10.0.0.9 "GET /health" 200 OK'
        await run.do("Bash", {"command": "kubectl logs deploy/gateway --since=30s"}, log, seconds=20)
    assert run.actions == []
