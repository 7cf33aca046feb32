"""Policy ``loops``: the rules that tell a loop from legitimate repetition on
runtimes' real output formats (Gemini CLI and Codex shell results, Claude
Code's BashOutput and cancelled siblings, HTTP retries, browser scrolling)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from bus import AgentStatus
from guard import Config, LoopsConfig, LoopsPolicy, RemindConfig, parse_config
from guard.policies.progress import ProgressRule
from tests.guard.conftest import Make

pytestmark = pytest.mark.anyio


def gemini_shell(command: str, output: str, pgid: int, exit_code: str = "(none)") -> str:
    """A Gemini CLI ``run_shell_command`` result as the CLI writes it."""
    return (
        f"Command: {command}\nDirectory: (root)\nOutput: {output}\nError: (none)\nExit Code: {exit_code}\n"
        f"Signal: (none)\nBackground PIDs: (none)\nProcess Group PGID: {pgid}"
    )


def codex_exec(output: str, chunk: str, wall: float) -> str:
    """A Codex ``exec_command`` result as the CLI writes it."""
    return (
        f"Chunk ID: {chunk}\nWall time: {wall:.4f} seconds\nProcess exited with code 0\n"
        f"Original token count: 12\nOutput:\n{output}"
    )


async def test_a_gemini_cycle_of_greps_is_caught_despite_the_fresh_pgid(make: Make, anyio_backend: str) -> None:
    run = make()
    greps = [f"grep -rn 'def {name}' src" for name in ("load", "save", "parse")]
    pgid = 4100
    for _ in range(3):
        for command in greps:
            pgid += 7
            await run.do("run_shell_command", {"command": command}, gemini_shell(command, "(empty)", pgid, "1"))
    assert [kind for _, kind in run.actions][:2] == ["remind", "deny"]
    assert run.actions[1][0] == 7


async def test_codex_chunk_ids_and_wall_times_are_noise(make: Make, anyio_backend: str) -> None:
    run = make()
    for n, chunk in enumerate(("5f2a9c", "77aa01", "0b3e6d")):
        await run.do("exec_command", {"cmd": "git status"}, codex_exec("nothing to commit", chunk, 0.05 + n))
    assert run.actions == [(3, "deny")]


async def test_code_run_again_whose_json_differs_only_in_its_duration_is_a_repeat(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    for n in range(3):
        output = f'{{"status": "ok", "stdout": "", "duration_seconds": 0.{n + 3}1, "execution_count": {n + 4}}}'
        await run.do("execute_code", {"code": "print(check())"}, output)
    assert run.actions == [(3, "deny")]


@pytest.mark.parametrize(
    "result",
    [
        "Backfilled batch {n} (5000 rows)",
        "Fetched page {n} (100 records), cursor saved",
        "chunk #{n} uploaded",
        "Processed order #1023{n}: charged, receipt sent",
        "Created user qa_user_{n} (password in the QA vault)",
        "Processed task 4{n}: ok",
        "handled item {n} from queue emb (ack)",
    ],
)
async def test_a_script_run_again_on_the_next_unit_of_work_is_left_alone(
    make: Make, anyio_backend: str, result: str
) -> None:
    run = make()
    for n in range(1, 7):
        await run.do("Bash", {"command": "python scripts/backfill.py --next"}, result.format(n=n))
    assert run.actions == []


@pytest.mark.parametrize(
    ("tool", "args", "result"),
    [
        ("github_create_issue", {"repo": "acme/app", "title": "Login fails"}, "Created issue #10{n}: /issues/10{n}"),
        ("add_marker", {"time": 5, "label": "intro end"}, '{{"markerId": "marker-{n}", "time": 5}}'),
        ("mcp__slack__send_message", {"channel": "ops", "text": "deploy done"}, "Sent message msg_{n} to #ops"),
        (  # github-mcp-server's minimal answer: the new issue's URL
            "mcp__github__create_issue",
            {"owner": "acme", "repo": "app", "title": "Login fails"},
            '{{"id": "349587{n}21", "url": "https://github.com/acme/app/issues/10{n}"}}',
        ),
        ("create_api_key", {"name": "ci"}, "Created key_{n} (shown once)"),
        ("create_record", {"table": "users", "name": "x"}, '{{"id": {n}, "name": "x"}}'),
        (  # an answer pretty-printed, its first line a brace
            "create_ticket",
            {"title": "Login fails"},
            '{{\n  "number": 10{n},\n  "state": "open",\n  "title": "Login fails"\n}}',
        ),
        # a shell command whose last step makes something is judged as such a tool is
        (
            "Bash",
            {"command": "gh issue create --title 'Login fails' --body 'Steps'"},
            "https://github.com/acme/app/issues/10{n}\n",
        ),
        (
            "Bash",
            {"command": "gh -R acme/app pr create --fill"},
            "Creating pull request for fix into main\n\nhttps://github.com/acme/app/pull/{n}",
        ),
        ("Bash", {"command": "curl -s -X POST localhost:8080/api/users -d @user.json"}, '{{"id": {n}, "name": "qa"}}'),
        (
            "Bash",
            {"command": 'cd api && curl -s localhost:8080/api/jobs --json \'{{"task": "sync"}}\''},
            "Created /api/jobs/{n}",
        ),
        ("Bash", {"command": "sudo -u app glab issue create -t 'Login fails'"}, "#{n} Login fails (just now)"),
        (
            "Bash",
            {"command": "gh issue create -t 'Login fails' -b x | head -1"},
            "https://github.com/acme/app/issues/{n}",
        ),
        (
            "Bash",
            {"command": "gh issue create -t 'Login fails' -b x && echo created"},
            "https://github.com/acme/app/issues/{n}\ncreated",
        ),
        (
            "Bash",
            {"command": 'curl -s -X POST localhost:8080/api/jobs -d @job.json; echo "exit: $?"'},
            '{{"id": {n}}}\nexit: 0',
        ),
        (
            "Bash",
            {"command": "echo '{{\"task\": 1}}' | curl -s -X POST localhost:8080/api/jobs -d @-"},
            '{{"id": {n}}}',
        ),
    ],
)
async def test_the_same_call_making_one_more_each_time_is_told_once(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], result: str
) -> None:
    """A tool that makes something, or a shell command that does (a
    subcommand that says so, an HTTP request that sends a body), called
    again with the same arguments, made a duplicate each time: told at the
    third, never denied (asking for several of the same thing is no loop)."""
    run = make()
    for n in range(1, 8):
        await run.do(tool, args, result.format(n=n))
    assert run.actions == [(3, "remind")]
    assert "each time it made one more" in run.texts[0]


@pytest.mark.parametrize(
    "command",
    [
        "curl -s localhost:8080/api/attempt",
        "tmux send-keys -t app Enter",
        "python create_user.py",
        "git add -A && python scripts/deploy.py",  # judged by the step whose output is read
        "cd new-ui && curl -s localhost:8080/api/attempt",
        "curl -sG --data-urlencode q=x localhost:8080/api/attempt",
        "curl -s -G --data-urlencode q=x localhost:8080/api/attempt",
    ],
)
async def test_a_counter_in_the_answer_of_a_command_that_makes_nothing_is_a_repeat(
    make: Make, anyio_backend: str, command: str
) -> None:
    """A request that sends nothing, keys typed into a terminal and a
    script (whatever its name) make nothing a subcommand names: the number
    growing in their answer counts calls."""
    run = make()
    for n in range(1, 4):
        await run.do("Bash", {"command": command}, f"GET /api/attempt/{n} -> 503 Service busy")
    assert run.actions == [(3, "deny")]


@pytest.mark.parametrize(
    "result",
    [
        "GET /api/attempt/{n} -> 503 Service busy",
        '{{"id": {n}, "status": "failed", "reason": "lock held"}}',
        '{{"jsonrpc": "2.0", "id": {n}, "error": {{"code": -32000, "message": "nonce too low"}}}}',
        "Build number: {n}\nFAILED",
    ],
)
async def test_a_counter_in_a_path_or_an_id_of_a_call_that_makes_nothing_is_a_repeat(
    make: Make, anyio_backend: str, result: str
) -> None:
    """A request id or an attempt number grows with every call, whatever
    it does: only in the answer of a tool that makes things is a URL's
    number or a ``"number"`` the thing made."""
    run = make()
    for n in range(1, 4):
        await run.do("call_service", {"method": "deploy"}, result.format(n=n))
    assert run.actions == [(3, "deny")]


@pytest.mark.parametrize(
    ("tool", "args", "result"),
    [
        ("process_next_order", {"queue": "orders"}, "Processed order #1023{n}: charged"),  # no making word
        ("new_tab", {}, "Opened tab_{n}"),  # no arguments: one more is what it is for
        ("create_issue", {}, "Created https://github.com/acme/app/issues/10{n}"),
        ("mcp__tmux__send_keys", {"keys": "Enter"}, "started job-{n}"),  # typing into a terminal
        ("type_and_submit", {"text": "y"}, "submitted form_{n}"),
    ],
)
async def test_a_call_that_makes_the_next_item_is_otherwise_left_alone(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], result: str
) -> None:
    run = make()
    for n in range(1, 8):
        await run.do(tool, args, result.format(n=n))
    assert run.actions == []


@pytest.mark.parametrize("result", ["tick {n}\nstate: idle", "attempt #{n}: the lock is still held"])
async def test_a_counter_that_counts_the_calls_is_no_progress(make: Make, anyio_backend: str, result: str) -> None:
    run = make()
    for n in range(4):
        await run.do("Bash", {"command": "python tick.py"}, result.format(n=n))
    assert run.actions == [(3, "deny"), (4, "deny")]


@pytest.mark.parametrize(
    ("tool", "args", "result"),
    [
        ("Bash", {"command": "python check_progress.py"}, "Processed {n} of 6 files"),
        ("bash", {"command": "curl -s localhost:8000/jobs/7"}, '{{"processed": {n}, "total": 6}}'),
        ("get_job", {"id": 7}, "state: processing, processed {n}/6"),
    ],
)
async def test_a_job_checked_while_it_advances_step_by_step_is_left_alone(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], result: str
) -> None:
    run = make()
    for n in range(1, 7):
        await run.do(tool, args, result.format(n=n), seconds=30)
    assert run.actions == []


@pytest.mark.parametrize(
    "contents",
    [
        ["tick 3", "tick 5", "tick 7", "tick 9"],
        ["tick 3", "tick 2", "tick 1", "tick 0"],
        ["3 failed, 9 passed", "4 failed, 10 passed", "5 failed, 11 passed"],
        ["a 1", "b 2", "c 3"],
    ],
)
async def test_numbers_that_move_otherwise_are_news(make: Make, anyio_backend: str, contents: list[str]) -> None:
    run = make()
    for content in contents:
        await run.do("Bash", {"command": "./probe"}, content)
    assert run.actions == []


async def test_message_ids_are_noise(make: Make, anyio_backend: str) -> None:
    run = make()
    args = {"channel": "C024BE91L", "text": "Deploy finished"}
    for n in range(3):
        ts = f"17123456{n}8.00{n}200"
        await run.do(
            "slack_post_message", args, f'{{"ok":true,"channel":"C024BE91L","ts":"{ts}","message_id":"M{n}9"}}'
        )
    assert run.actions == [(3, "deny")]


async def test_an_error_report_is_compared_up_to_what_failed(make: Make, anyio_backend: str) -> None:
    run = make()
    command = {"command": "python -c 'import sys; print(sys.argv[2])'"}
    for n in range(3):
        await run.do(
            "Bash",
            command,
            'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
            f"IndexError: list index out of range\n[{n} background jobs]",
        )
    assert run.actions == [(3, "deny")]


async def test_retries_through_transient_errors_are_not_a_loop_until_their_own_count(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    fetch = {"url": "https://api.example.org/v1/items"}
    for _ in range(4):
        await run.do("WebFetch", fetch, "Request failed with status code 503 (Service Unavailable)", is_error=True)
    await run.do("WebFetch", fetch, '{"items": []}')
    assert run.actions == []
    run = make(transient_at=3, transient_deny_at=4)
    for _ in range(4):
        await run.do(
            "Bash", {"command": "curl -sf https://x.example"}, "curl: (22) 429 Too Many Requests", is_error=True
        )
    assert run.actions == [(3, "remind"), (4, "deny")]
    assert "transient" in run.texts[0]


async def test_a_repeated_script_holding_a_line_that_starts_like_a_check_is_no_poll(
    make: Make, anyio_backend: str
) -> None:
    """A heredoc's lines are the script's, not steps of the shell command."""
    run = make()
    script = "python - <<'EOF'\nimport os\nhost = os.environ.get('DB_HOST')\nprint(connect(host).count())\nEOF"
    for _ in range(3):
        await run.do("Bash", {"command": script}, "(0,)")
    assert run.actions == [(3, "deny")]


@pytest.mark.parametrize(
    "error",
    [
        'HTTP 429 Too Many Requests\n{"error": "rate_limited", "message": "Retry after 60 seconds."}',
        "Error code: 429 - Rate limit reached for requests. Please try again in 1m.",
        "503 Service Unavailable\nRetry-After: 120",
    ],
)
async def test_a_retry_sooner_than_the_wait_the_service_named_is_denied(
    make: Make, anyio_backend: str, error: str
) -> None:
    run = make()
    post = {"url": "https://api.example.org/v1/batch", "json": {"cities": ["Oslo"]}}
    for _ in range(3):
        await run.do("http_post", post, error, is_error=True, seconds=2)
    assert run.actions == [(3, "deny")]
    assert "the service said how long to wait before a retry" in run.texts[0]
    await run.do("http_post", post, '{"ok": true}', seconds=180)  # after the wait: it runs
    assert run.actions == [(3, "deny")]


async def test_retries_after_the_wait_the_service_named_run(make: Make, anyio_backend: str) -> None:
    run = make()
    post = {"url": "https://api.example.org/v1/batch"}
    for _ in range(4):  # each after the 10 s asked for
        await run.do("http_post", post, "429 Too Many Requests: retry after 10s", is_error=True, seconds=11)
    for _ in range(4):  # or a wait too short to be worth a denial
        await run.do("http_get", post, "429 Too Many Requests. Retry-After: 50ms", is_error=True, seconds=1)
    assert run.actions == []


@pytest.mark.parametrize(
    "error",
    [
        "page.goto: Timeout 30000ms exceeded.",
        "Navigation timeout of 30000 ms exceeded",
        "net::ERR_TIMED_OUT at https://example.com",
    ],
)
async def test_a_page_load_that_timed_out_is_retried_as_a_transient_failure(
    make: Make, anyio_backend: str, error: str
) -> None:
    run = make()
    for _ in range(4):
        await run.do("browser_navigate", {"url": "https://example.com"}, error, is_error=True, seconds=20)
    assert run.actions == []


async def test_an_element_that_never_appears_is_no_transient_failure(make: Make, anyio_backend: str) -> None:
    """Playwright words a locator's timeout as it words a page load's, but
    a button that is not there stays not there."""
    run = make()
    error = (
        "locator.click: Timeout 30000ms exceeded.\nCall log:\n  - waiting for getByRole('button', { name: 'Sign in' })"
    )
    for _ in range(5):
        await run.do("Bash", {"command": "npx playwright test e2e/login.spec.ts"}, error, is_error=True, seconds=40)
    assert run.actions == [(3, "remind"), (5, "deny")]


async def test_transient_failures_form_no_streak(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(6):
        await run.do("WebFetch", {"url": f"https://x.example/{n}"}, "Error: rate limit exceeded", is_error=True)
    assert run.actions == []


async def test_scrolling_is_paging_even_when_the_result_is_a_placeholder(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(10):
        await run.do("browser_scroll", {"direction": "down"}, "[screenshot]")
    for _ in range(10):
        await run.do("computer", {"action": "scroll", "coordinate": [640, 400]}, "[image]")
    for _ in range(10):  # a key press that pages, answered with text the same each time
        await run.do("computer", {"action": "key", "text": "Page_Down"}, "Pressed Page_Down")
    assert run.actions == []


async def test_arrow_keys_page_and_a_page_snapshot_taken_again_is_a_poll(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(6):  # down a menu, one key at a time
        await run.do("browser_press_key", {"key": "ArrowDown"}, "Pressed ArrowDown")
    assert run.actions == []
    for _ in range(5):  # waiting for a page to change
        await run.do("browser_snapshot", {}, '- heading "Deploying" [ref=e3]')
    assert [kind for _, kind in run.actions] == ["remind"], "a nudge to wait, not a denial"


async def test_a_result_that_is_only_a_placeholder_is_never_the_same_result(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(6):  # a "next" button clicked again and again: the screenshots are not in the transcript
        await run.do("computer", {"action": "left_click", "coordinate": [1180, 640]}, "[image]")
    await run.do("read_pdf", {"page": "x"}, "[document]\n[image]")
    assert run.actions == []
    for _ in range(3):  # text beside the placeholder is a result like any other
        await run.do("computer", {"action": "left_click", "coordinate": [10, 10]}, "Clicked.\n[image]")
    assert run.actions == [(10, "deny")]


@pytest.mark.parametrize(
    ("tool", "args", "answer"),
    [
        ("mcp__chrome-devtools__click", {"uid": "1_23"}, "Successfully clicked on the element"),
        ("click_element_by_index", {"index": 58}, "Clicked element"),  # browser-use since September 2025
    ],
)
async def test_clicks_only_acknowledged_on_a_control_nothing_names_are_told_not_denied(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], answer: str
) -> None:
    """Load more clicked five times, the tool answering only that it
    clicked: whether the page changed cannot be told, so the agent is
    told once to look, never denied."""
    run = make()
    for _ in range(5):
        await run.do(tool, args, answer)
    assert run.actions == [(3, "remind")]
    assert "only said it clicked" in run.texts[0]


async def test_a_stepper_clicked_on_a_page_that_shows_the_step_is_no_counter(make: Make, anyio_backend: str) -> None:
    """Playwright MCP answers a click with the page: Increase quantity
    clicked four times shows 2, 3, 4, 5, the step asked for, not a call
    counting its own runs; Submit, whose page stays the same, repeats."""
    page = (
        '### Page state\n- Page URL: https://shop.test/p/kettle\n```yaml\n- spinbutton "Quantity" [ref=e54]: "{n}"\n```'
    )
    run = make()
    for n in range(2, 6):
        await run.do("browser_click", {"element": "Increase quantity", "ref": "e55"}, page.format(n=n))
    assert run.actions == []
    for _ in range(3):
        await run.do("browser_click", {"element": "Submit", "ref": "e60"}, page.format(n=5))
    assert run.actions == [(7, "deny")]


async def test_an_acknowledged_click_between_looks_that_change_is_no_repeat(make: Make, anyio_backend: str) -> None:
    """Load more clicked, the page looked at, ten more items each time:
    the clicks did something, whatever their acknowledgement says."""
    run = make()
    for n in range(1, 7):
        await run.do("mcp__chrome-devtools__click", {"uid": "1_23"}, "Successfully clicked on the element")
        items = "".join(f"uid=1_{k} item {k}\n" for k in range(10 * n))
        await run.do("mcp__chrome-devtools__take_snapshot", {}, items + "uid=1_23 button Load more")
    assert run.actions == []


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("mcp__playwright__browser_mouse_wheel", {"deltaX": 0, "deltaY": 800}),  # Playwright MCP has no scroll tool
        ("mcp__playwright__browser_press_key", {"key": "Space"}),
    ],
)
async def test_playwrights_ways_of_scrolling_are_paging(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object]
) -> None:
    run = make()
    for _ in range(6):
        await run.do(tool, args, "### Ran Playwright code\n```js\nawait page.mouse.wheel(0, 800);\n```")
    assert run.actions == []


async def test_scrolling_stays_paging_after_thousands_of_other_values(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4200):  # more distinct short values than the policy remembers answers for
        await run.do("computer", {"action": f"key-{n}"}, f"pressed {n}")
    for _ in range(6):
        await run.do("computer", {"action": "scroll", "coordinate": [640, 400]}, "[image]")
    assert run.actions == []


async def test_a_tool_is_still_judged_by_its_name_after_thousands_of_other_tools(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    for n in range(4200):  # more tool names than the policy remembers what they say for
        await run.do(f"tool_{n}", {"n": n}, f"done {n}")
    for _ in range(6):
        await run.do("scroll_page", {}, "[image]")
    assert run.actions == []


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        *(("Grep", {"pattern": word, "path": "src"}) for word in ("progress", "wait", "tail", "next", "more", "down")),
        ("search_docs", {"text": "next"}),  # the text of a search, not a key pressed
        ("kv_get", {"key": "progress"}),  # a key of a store, not a poll
        ("list_events", {"type": "progress"}),
    ],
)
async def test_a_search_for_a_poll_or_paging_word_is_an_ordinary_call(
    make: Make, anyio_backend: str, tool: str, args: dict[str, str]
) -> None:
    run = make()
    for _ in range(3):
        await run.do(tool, args, "No matches found")
    assert run.actions == [(3, "deny")]


async def test_poll_and_paging_values_match_a_whole_value(make: Make, anyio_backend: str) -> None:
    run = make(poll_values=["poll"], paging_values=["next"])
    for _ in range(3):
        await run.do("water", {"action": "unpolluted"}, "ok")
    for _ in range(3):
        await run.do("water", {"action": "nextday"}, "ok")
    assert run.actions == [(3, "deny"), (6, "deny")]


async def test_paging_arguments_are_no_grind(make: Make, anyio_backend: str) -> None:
    run = make()
    for offset in range(0, 1000, 100):
        await run.do("Read", {"file_path": "big.log", "offset": offset, "limit": 100}, "(no more lines)")
    assert run.actions == []


@pytest.mark.parametrize(
    ("tool", "args", "ack"),
    [
        ("click", {"index": 7}, "🖱️ Clicked button with index 7: Load more"),
        ("browser_click", {"element": "Next page button", "ref": "e42"}, "ok"),
        ("computer", {"action": "left_click", "coordinate": [880, 412], "text": "Show more"}, "clicked"),
        ("send_keys", {"keys": "Tab"}, "⌨️  Sent keys: Tab"),
        ("go_back", {}, "🔙  Navigated back"),
        ("mcp__playwright__browser_navigate_back", {}, "ok"),
        ("click_element_by_index", {"index": 7}, "🖱️  Clicked button with index 7: Add row"),
        ("browser_click", {"element": "Increase quantity button", "ref": "e44"}, "await page.click();"),
        ("computer", {"action": "key", "text": "BackSpace"}, "Pressed BackSpace"),
        ("computer", {"action": "key", "text": "ctrl+plus"}, "Pressed ctrl+plus"),
        ("Bash", {"command": "adb shell input keyevent KEYCODE_DPAD_DOWN"}, ""),
        ("Bash", {"command": "xdotool key Tab"}, ""),
        ("exec_command", {"cmd": "tmux send-keys -t app Down"}, "Process exited with code 0\nOutput:\n"),
    ],
)
async def test_paging_or_stepping_through_a_ui_is_never_counted(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], ack: str
) -> None:
    run = make()
    for _ in range(6):
        await run.do(tool, args, ack)
    assert run.actions == []


async def test_the_same_click_on_any_other_control_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("click", {"index": 7}, "🖱️ Clicked button with index 7: Submit")
    for _ in range(3):
        await run.do("browser_click", {"element": "Next.js docs link", "ref": "e9"}, "ok")
    assert run.actions == [(3, "deny"), (6, "deny")]


@pytest.mark.parametrize("key", ["ref", "target"])  # Playwright MCP's name for the handle, then its newer one
async def test_a_click_on_the_same_element_is_the_same_call_whatever_its_snapshot_handle(
    make: Make, anyio_backend: str, key: str
) -> None:
    run = make()
    for ref in ("e40", "e51", "s3e12"):  # the form re-renders: each snapshot renumbers its elements
        page = f'- alert: "Card number is invalid"\n- textbox "Card" [ref={ref}]: 4242\n- button "Submit" [ref={ref}]'
        await run.do("browser_click", {"element": "Submit button", key: ref}, page)
    assert run.actions == [(3, "deny")]


async def test_a_snapshot_handle_names_no_element_without_its_description(make: Make, anyio_backend: str) -> None:
    run = make()
    for ref in ("e40", "e51", "e62"):  # three rows' own buttons, told apart by their handles alone
        await run.do("browser_click", {"ref": ref}, "ok")
    for ref in ("main", "release", "v2"):  # a git ref is what the call reads
        await run.do("get_file_contents", {"element": "README.md", "ref": ref}, "# Project")
    assert run.actions == []


async def test_any_other_key_pressed_through_the_shell_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("Bash", {"command": "xdotool key Return"}, "")
    for _ in range(3):
        await run.do("Bash", {"command": "tmux send-keys -t app 'make deploy' Enter"}, "")
    assert run.actions == [(3, "deny"), (6, "deny")]


async def test_a_pager_click_answered_by_the_same_page_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    page = "- Page URL: https://shop.example.com/list?page=4\n- Page Snapshot:\n" + "- listitem: product\n" * 40
    for _ in range(3):
        await run.do("browser_click", {"element": "Next page button", "ref": "e42"}, page)
    assert run.actions == [(3, "deny")]


_DASHBOARD = "- Page URL: https://ci.example.com/jobs/418\n- Page Snapshot:\n" + "- row: step ok\n" * 20


@pytest.mark.parametrize(
    ("tool", "args", "answer"),
    [
        ("click_element_by_index", {"index": 4}, "🖱️  Clicked button with index 4: Refresh"),
        ("browser_click", {"element": "Reload button", "ref": "e7"}, _DASHBOARD + "- text: Deploy #418"),
        ("computer", {"action": "left_click", "coordinate": [40, 90], "text": "Refresh page"}, "clicked"),
    ],
    ids=["acknowledged", "page-shown", "computer-use"],
)
async def test_clicking_refresh_while_a_job_runs_is_a_poll(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], answer: str
) -> None:
    run = make()
    for _ in range(6):
        await run.do(tool, args, answer, seconds=20)
        await run.do("extract_content", {"goal": "job status"}, '{"status": "Running"}', seconds=3)
    assert [kind for _, kind in run.actions if kind != "remind"] == []


@pytest.mark.parametrize(
    ("tool", "answer"),
    [("mcp__wait-timer__wait", "Waited 30 seconds."), ("mcp__windows-mcp__Wait-Tool", "Waited for 30 seconds.")],
)
async def test_an_mcp_servers_wait_tool_is_a_wait_between_polls(
    make: Make, anyio_backend: str, tool: str, answer: str
) -> None:
    """An agent that waits with an MCP server's wait tool between two looks
    at a backup waits as one that calls ``sleep``: the waits are no loop,
    and the looks are a patient poll, never denied."""
    actions = []
    for waiting in (tool, "sleep"):
        run = make()
        for _ in range(6):
            await run.do(waiting, {"duration_seconds": 30}, answer, seconds=30)
            await run.do("check_backup", {"backup_id": "bk-77"}, '{"state": "running"}', seconds=2)
        actions.append(run.actions)
    assert actions[0] == actions[1]
    assert [kind for _, kind in actions[0]] == ["remind"]


@pytest.mark.parametrize(
    ("tool", "args", "answer", "is_error"),
    [
        (  # Playwright MCP waits for a text to appear; an export that takes minutes times out a few times
            "mcp__playwright__browser_wait_for",
            {"text": "Download export.csv"},
            "### Result\nError: locator.waitFor: Timeout 30000ms exceeded.",
            True,
        ),
        ("receive_messages", {"queue": "orders", "wait_time_seconds": 20}, '{"Messages": []}', False),  # a long poll
        ("xread", {"stream": "deploys", "block_ms": 30000}, "(nil)", False),
        ("mcp__redis__xread", {"key": "deploys", "block": 5000}, "(nil)", False),
        ("receive_messages", {"queue": "orders", "wait": 20}, "[]", False),
    ],
)
async def test_a_call_that_waits_for_news_is_a_poll(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], answer: str, is_error: bool
) -> None:
    """The wait the advice to back off names, a tool's own wait argument,
    makes a poll: its unchanged answers draw back-off nudges, not a
    denial at the third."""
    run = make()
    for _ in range(7):
        await run.do(tool, args, answer, is_error=is_error, seconds=30)
    assert {kind for _, kind in run.actions} <= {"remind"}
    assert all("poll" in text for text in run.texts)


@pytest.mark.parametrize("args", [{"command": "pytest -x tests/", "wait": 30}, {"cmd": "make", "wait_seconds": 30}])
async def test_how_long_a_command_runner_waits_makes_no_poll(
    make: Make, anyio_backend: str, args: dict[str, object]
) -> None:
    """A command runner's ``wait`` is how long it waits for the command:
    the same test failing each time is a failure repeated, not a poll."""
    run = make()
    for _ in range(5):
        await run.do("run_command", args, "FAILED tests/test_a.py::test_x - AssertionError", is_error=True)
    assert run.actions == [(3, "remind"), (5, "deny")]


def test_what_a_tool_name_says_is_remembered_for_a_bounded_number_of_names() -> None:
    policy = LoopsPolicy(LoopsConfig())
    for n in range(4100):  # past the memo's limit a tool is still judged
        assert policy._clicked(f"click_{n}", {"index": 3}, "Clicked button with index 3: Load more")
    assert not policy._clicked("click_4099", {"index": 3}, "Clicked button with index 3: Submit")
    for n in range(4100):  # and what a command says
        assert policy._makes_command(f"gh issue create -t bug{n}")
    assert not policy._makes_command("python create_user.py")
    rule = ProgressRule(LoopsConfig().mutating_tools, ())
    for n in range(4100):
        assert not rule.edits_by_tool(f"tool_{n}", None)
    assert rule.edits_by_tool("Edit", None)


async def test_a_pager_click_that_fails_is_a_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(5):
        await run.do("click", {"index": 58}, "Element not clickable with index 58: Next", is_error=True)
    assert run.actions == [(3, "remind"), (5, "deny")]


@pytest.mark.parametrize(
    ("check", "answer", "failed"),
    [
        ("nvidia-smi --query-gpu=utilization.gpu --format=csv", "utilization.gpu [%]\n0 %", False),
        ("git pull --ff-only", "Already up to date.", False),
        ("pg_isready -h localhost -p 5432", "localhost:5432 - rejecting connections", True),
    ],
)
async def test_a_check_made_again_after_a_wait_is_a_poll(
    make: Make, anyio_backend: str, check: str, answer: str, failed: bool
) -> None:
    run = make()
    for _ in range(6):
        await run.do("Bash", {"command": check}, answer, is_error=failed, seconds=2)
        await run.do("Bash", {"command": "sleep 30"}, "", seconds=30)
    assert [kind for _, kind in run.actions if kind != "remind"] == []


@pytest.mark.parametrize(
    ("tool", "command", "ended", "then"),
    [
        # a pod's log is polled, as docker's is: the same lines again are a poll, nudged from the 4th
        ("Bash", "timeout 20 kubectl logs -f job/migrate --tail=3", "Exit code 124\n{out}", None),
        ("exec_command", "cd fw && timeout 5 cat /dev/ttyUSB0", "Process exited with code 124\nOutput:\n{out}", "deny"),
        ("run_shell_command", "timeout 5 adb logcat -d -t 3", "Output: {out}\nError: (none)\nExit Code: 124", "deny"),
    ],
)
async def test_a_stream_read_under_timeout_is_judged_by_what_it_read(
    make: Make, anyio_backend: str, tool: str, command: str, ended: str, then: str | None
) -> None:
    """``timeout`` stopping a command that follows a stream is how it is
    read for a while: exit 124 each time, the output new each time."""
    run = make()
    for n in range(6):
        await run.do(tool, {"command": command}, ended.format(out=f"copied {n}000 rows"), is_error=True, seconds=21)
    assert run.actions == []
    for _ in range(3):  # the same lines read again and again: a repeat like any other
        await run.do(tool, {"command": command}, ended.format(out="copied 6000 rows"), is_error=True, seconds=21)
    assert [kind for _, kind in run.actions] == ([then] if then else [])


async def test_exit_124_of_a_command_not_under_timeout_is_a_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(5):
        await run.do("Bash", {"command": "./run_checks.sh"}, f"check {n}: stale lock\nExit code 124", is_error=True)
    assert run.actions == [(3, "remind"), (5, "deny")]


ROBOCOPY = (
    "Exit code: {code}\nWall time: 0.7 seconds\nOutput:\n"
    "   ROBOCOPY     ::     Robust File Copy for Windows\n"
    "  Source : C:\\src\\web\\assets\\{name}\\\n    Dest : C:\\src\\web\\dist\\{name}\\\n"
    "{lines}\n"
    "               Total    Copied   Skipped  Mismatch    FAILED    Extras\n"
    "    Files :        {n}         {n}         0         0         {failed}         0\n"
)


@pytest.mark.parametrize(
    ("tool", "command", "result"),
    [
        (
            "shell",
            ["powershell.exe", "-Command", "robocopy assets\\{name} dist\\{name} /E"],
            ROBOCOPY.format(code=1, name="{name}", n=3, failed=0, lines="    New File  1.2 k  {name}.json"),
        ),
        (
            "Bash",
            "diff -u expected/{name}.txt out/{name}.txt",
            "Exit code 1\n--- expected\n+++ out\n-{name} 1\n+{name} 2",
        ),
        (
            "bash",
            "python3 -m pylint --disable=W {name}.py",
            "<returncode>16</returncode>\n<output>\n************* Module {name}\n"
            "{name}.py:1:0: C0114: Missing module docstring (missing-module-docstring)\n</output>",
        ),
        (
            "bash",
            "pylint --bad-names-rgxs='{name}' foo.py",
            'Exit code 18\nfoo.py:1:0: C0104: Disallowed name "{name}" (disallowed-name)\n'
            "foo.py:2:0: E0602: Undefined variable 'x' (undefined-variable)",
        ),
    ],
)
async def test_a_program_whose_exit_status_reports_what_it_found_has_not_failed(
    make: Make, anyio_backend: str, tool: str, command: Any, result: str
) -> None:
    """robocopy exits 1 when it copied files, diff when files differ: a run
    over nine folders is work done, not a streak of failures."""
    run = make()
    for name in ("locales", "fonts", "icons", "emails", "docs", "css", "js", "img", "pdf"):
        argv = [part.format(name=name) for part in command] if isinstance(command, list) else command.format(name=name)
        await run.do(tool, {"command": argv}, result.format(name=name), is_error=True)
    assert run.actions == []


async def test_a_lint_status_is_read_only_when_the_linter_ran_last(make: Make, anyio_backend: str) -> None:
    """``python -m pylint src; python -m pytest -q`` exiting 2 is pytest's
    interrupted run, not pylint's report."""
    run = make()
    for n in range(3):
        await run.do(
            "bash",
            {"command": f"python -m pylint src; python -m pytest -q tests/t{n}.py"},
            "Exit code 2\nERROR: collection interrupted: 1 error",
            is_error=True,
        )
    assert run.actions == [(3, "remind")]


async def test_a_linters_fatal_or_usage_status_is_a_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for name in ("a", "b", "c"):
        await run.do(
            "bash",
            {"command": f"python -m pylint --rcfile=missing {name}.py"},
            "Exit code 32\nusage: pylint [options]\npylint: error: no such option: --rcfile=missing",
            is_error=True,
        )
    assert run.actions == [(3, "remind")]


async def test_a_program_status_past_what_reports_a_finding_is_a_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for name in ("locales", "fonts", "icons", "emails", "docs", "css", "js", "img", "pdf"):
        failed = ROBOCOPY.format(
            code=8,
            name=name,
            n=3,
            failed=3,
            lines="ERROR 5 (0x00000005) Copying File C:\\src\\web\\assets\\a.json\nAccess is denied.",
        )
        await run.do("shell", {"command": f"robocopy assets\\{name} dist\\{name} /E"}, failed, is_error=True)
    assert run.actions == [(3, "remind"), (9, "deny")]


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        ('sleep 30 && psql -Atc "select count(*) from events_v2"', "{n}"),
        ("sleep 20; du -sb /data/export", "{n}\t/data/export"),
        ("sleep 20 && kafka-consumer-groups --describe --group etl", "GROUP TOPIC PARTITION LAG\netl events 0 {n}"),
    ],
)
async def test_a_poll_watching_a_long_number_move_is_left_alone(
    make: Make, anyio_backend: str, command: str, answer: str
) -> None:
    """A row count, a byte total or a lag of seven digits or more: the
    number comparison leaves out as an id is what the poll watches."""
    run = make()
    for n in range(14):
        await run.do("Bash", {"command": command}, answer.format(n=12_400_000 + 700_000 * n), seconds=33)
    assert run.actions == []


async def test_a_stalled_poll_whose_uptime_grows_is_still_stalled(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(13):
        health = f'{{"status": "degraded", "db": "unreachable", "uptime_ms": {86_400_000 + 13_000 * n}}}'
        await run.do("Bash", {"command": "sleep 10; curl -s localhost:8080/health"}, health, seconds=13)
    assert [kind for _, kind in run.actions] == ["remind", "remind", "deny"]


async def test_a_stalled_poll_printing_the_clock_is_still_stalled(make: Make, anyio_backend: str) -> None:
    """``date +%s`` in a poll is a clock reading, not progress; a long
    number that stays put is no progress either."""
    run = make()
    for _ in range(13):
        now = int(run.clock.now)
        await run.do(
            "Bash", {"command": "sleep 10; date +%s; psql -Atc 'select 1234567'"}, f"{now}\n1234567", seconds=13
        )
    assert [kind for _, kind in run.actions] == ["remind", "remind", "deny"]


async def test_the_clock_read_between_checks_on_a_background_job_is_a_poll(make: Make, anyio_backend: str) -> None:
    """Reading the clock while a job runs elsewhere asks how long it has
    been: advice to wait longer between looks, not the denial of a repeat."""
    run = make()
    for n in range(6):
        clock = f"15:{30 + n // 2:02d}:{(20 + 17 * n) % 60:02d}"
        await run.do("Bash", {"command": "date '+%H:%M:%S'"}, clock, seconds=13)
        await run.do("Bash", {"command": "tail -3 fetch.log"}, "fetched 40 of 120 pull requests", seconds=4)
    assert all(kind == "remind" for _, kind in run.actions)
    assert run.actions[:1] == [(7, "remind")]  # the fourth look at the clock
    assert "Back off" in run.texts[0]


@pytest.mark.parametrize(
    ("tool", "args", "output"),
    [
        ("Bash", {"command": "cat last_run.txt"}, "2026-12-01T00:11:10Z"),  # a time that stays put
        ("Bash", {"command": "git rev-parse HEAD"}, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),  # an id
    ],
)
async def test_the_same_reading_again_is_a_repeat_not_a_poll(
    make: Make, anyio_backend: str, tool: str, args: dict[str, str], output: str
) -> None:
    run = make()
    for _ in range(3):
        await run.do(tool, args, output, seconds=70)
    assert run.actions == [(3, "deny")]


async def test_a_file_read_whose_content_is_a_time_is_compared_exactly(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(8):
        await run.do("Read", {"file_path": ".last_sync"}, f"2026-12-01T00:11:{10 + n:02d}Z", seconds=2)
    assert run.actions == []


async def test_the_clock_read_again_and_again_is_still_caught(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(13):
        await run.do("Bash", {"command": "date -u"}, f"Tue Dec  1 00:11:{10 + 2 * n:02d} UTC 2026", seconds=2)
    assert run.actions == [(4, "remind"), (6, "remind"), (8, "remind"), (10, "remind"), (13, "deny")]


@pytest.mark.parametrize(
    ("tool", "args", "finished"),
    [
        ("BashOutput", {"bash_id": "bash_9"}, "<status>completed</status>\n\n<exit_code>0</exit_code>"),
        ("TaskOutput", {"task_id": "b7", "block": True}, "<status>failed</status>\n<exit_code>1</exit_code>"),
    ],
)
async def test_polling_what_has_finished_is_a_repeat(
    make: Make, anyio_backend: str, tool: str, args: dict[str, str], finished: str
) -> None:
    """Back-off advice is for what is still running: once the answer says it
    finished, the same answer again is a repeat."""
    run = make()
    await run.do(tool, args, "<status>running</status>")
    for _ in range(3):
        await run.do(tool, args, finished, seconds=3)
    assert run.actions == [(4, "deny")]


@pytest.mark.parametrize(
    ("tool", "check", "last", "new"),
    [
        (
            "get_ci_status",
            {"branch": "main"},
            '{"run": 812, "status": "completed"}',
            '{"run": 813, "status": "queued"}',
        ),
        (
            "Bash",
            {"command": "sleep 10 && gh run list --limit 1 --json status,conclusion"},
            '[{"conclusion":"success","status":"completed"}]',
            '[{"conclusion":"","status":"in_progress"}]',
        ),
        (
            "Bash",
            {"command": "gh run list --limit 1"},
            "completed\tsuccess\tfix parser\tCI\tmain\tpush\t1234567890\t2m",
            "in_progress\t\tfix tz\tCI\tmain\tpush\t1234567999\t5s",
        ),
    ],
)
async def test_a_check_showing_the_last_run_finished_after_a_push_is_still_a_poll(
    make: Make, anyio_backend: str, tool: str, check: dict[str, str], last: str, new: str
) -> None:
    """After a push, a CI status tool or ``gh run list`` shows the previous
    run, finished, until the run the push started appears."""
    run = make()
    await run.do("Bash", {"command": "git push"}, "To github.com:acme/api.git\n   a..b  main -> main")
    for _ in range(3):
        await run.do(tool, check, last, seconds=8)
    await run.do(tool, check, new, seconds=8)
    assert run.actions == []


async def test_a_poll_with_one_step_finished_and_another_running_is_still_a_poll(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    for _ in range(5):
        await run.do("get_pipeline", {"id": 7}, '{"build": {"status": "completed"}, "deploy": {"status": "running"}}')
    assert [kind for _, kind in run.actions] == ["remind"]


async def test_a_poll_tool_that_takes_a_command_is_a_poll(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(6):
        await run.do("deploy_status", {"command": "show api --env prod"}, "rollout: 2 of 3 replicas", seconds=6)
    assert [kind for _, kind in run.actions if kind != "remind"] == []


async def test_waiting_on_a_page_is_a_poll(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(6):
        await run.do("browser_wait_for", {"time": 5}, "### Page state\n- heading: Generating report...", seconds=6)
    assert [kind for _, kind in run.actions if kind != "remind"] == []


async def test_a_check_denied_as_a_repeat_runs_again_after_a_wait(make: Make, anyio_backend: str) -> None:
    """Denied for returning the same twice, the agent waits before it checks
    again: what it checks may have changed since, so the check runs, as a
    poll (nudged and denied only as polls are)."""
    run = make()
    status = '{"id": "1042", "fulfillment_status": null, "note": "label printed"}'
    for _ in range(3):
        await run.do("get_order", {"order_id": "1042"}, status, seconds=45)
    assert run.actions == [(3, "deny")]
    await run.do("wait", {"seconds": 60}, "waited 60 s", seconds=60)
    shipped = await run.do("get_order", {"order_id": "1042"}, '{"id": "1042", "fulfillment_status": "fulfilled"}')
    assert shipped.denied_by is None
    assert run.actions == [(3, "deny")]


async def test_a_denied_check_made_again_without_waiting_stays_denied(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("get_order", {"order_id": "1042"}, '{"fulfillment_status": null}', seconds=45)
    await run.do("wait", {"seconds": 1}, "waited 1 s", seconds=1)  # shorter than the shortest back-off
    await run.do("get_order", {"order_id": "1042"}, "unused", seconds=1)
    assert run.actions == [(3, "deny"), (5, "deny")]


async def test_a_wait_shorter_than_the_shortest_back_off_makes_no_poll(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("Bash", {"command": "pytest -q"}, "1 failed, 14 passed", seconds=1)
        await run.do("Bash", {"command": "sleep 1"}, "", seconds=1)
    assert run.actions == [(5, "deny")]


@pytest.mark.parametrize(
    "refused",
    [
        "curl: (7) Failed to connect to localhost port 3000 after 0 ms: Connection refused",
        "psql: Fehler: Verbindung zum Server auf Socket fehlgeschlagen: Verbindungsaufbau abgelehnt",
        "psql: erreur : la connexion au serveur a échoué : Connexion refusée",
        "psql: ошибка: подключиться к серверу не удалось: в соединении отказано",
    ],
)
async def test_a_service_that_is_not_up_yet_is_a_transient_failure(
    make: Make, anyio_backend: str, refused: str
) -> None:
    run = make()
    for _ in range(6):
        await run.do("Bash", {"command": "curl -sf http://localhost:3000/api/items"}, refused, is_error=True)
    await run.do("Bash", {"command": "curl -sf http://localhost:3000/api/items"}, "ok")
    assert [kind for _, kind in run.actions if kind != "remind"] == []


async def test_counts_decay_over_an_idle_gap(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(5):
        await run.do("check_inbox", {"folder": "INBOX"}, "0 new messages", seconds=1200)
    assert run.actions == []
    run = make(decay_seconds=0)
    for _ in range(3):
        await run.do("check_inbox", {"folder": "INBOX"}, "0 new messages", seconds=1200)
    assert run.actions == [(3, "deny")]


async def test_a_loop_denied_without_a_pause_does_not_decay(make: Make, anyio_backend: str) -> None:
    run = make(halt_after=0)
    greps = [{"command": f"grep -rn {name} src"} for name in ("ipv6_re", "validate_ipv6")]
    for _ in range(30):  # every 20 s for 20 minutes: never idle for decay_seconds
        for grep in greps:
            await run.do("run_shell_command", grep, "src/validators.py:12: match", seconds=20)
    denied = [number for number, kind in run.actions if kind == "deny"]
    assert denied == list(range(5, 61))


async def test_a_failure_streak_denied_without_a_pause_does_not_decay(make: Make, anyio_backend: str) -> None:
    run = make(halt_after=0)
    for n in range(60):  # a new query every 20 s for 20 minutes, each failing the same way
        await run.do(
            "web_fetch",
            {"url": f"https://example.com/{n}"},
            "Error: browser executable missing",
            is_error=True,
            seconds=20,
        )
    denied = [number for number, kind in run.actions if kind == "deny"]
    assert denied == list(range(9, 61))


async def test_a_tool_whose_streak_was_denied_tries_again_once_something_else_succeeded(
    make: Make, anyio_backend: str
) -> None:
    """A denial for a streak asks the model to read the error or change
    approach; once it did something else that worked (read the file), its
    next attempt runs, so a fixed edit is not denied for good."""
    run = make()
    failed = (
        "Your proposed edit has introduced new syntax error(s).\nERRORS:\n- E999 IndentationError: unexpected indent"
    )

    async def edit(n: int, result: str = failed) -> None:
        await run.do("edit", {"command": f"edit {n}:{n}\n    x = {n}\nend_of_edit"}, result, is_error=result is failed)

    for n in range(1, 11):
        await edit(n)
    assert [number for number, kind in run.actions if kind == "deny"] == [9, 10]
    await run.do("open", {"path": "src/rewrite.py", "line": 960}, "960: def rewrite(node):")
    await edit(12)  # ran: failed alike
    await edit(13)  # denied again
    await run.do("open", {"path": "src/rewrite.py", "line": 970}, "970:     return node")
    await edit(15, "[File: /repo/src/rewrite.py (1098 lines total)]")  # ran: fixed
    await edit(16, "[File: /repo/src/rewrite.py (1098 lines total)]")
    assert [number for number, kind in run.actions if kind == "deny"] == [9, 10, 13]


async def test_siblings_cancelled_by_a_failure_are_not_failures(make: Make, anyio_backend: str) -> None:
    run = make()
    cancelled = "<tool_use_error>Sibling tool call errored</tool_use_error>"
    edits = [{"file_path": name, "old_string": "y", "new_string": "z"} for name in ("b.py", "c.py", "d.py")]
    step = run.next_step("main")
    await run.do(
        "Edit", {"file_path": "a.py", "old_string": "x"}, "String to replace not found", is_error=True, step=step
    )
    for edit in edits:
        await run.do("Edit", edit, cancelled, is_error=True, step=step)
    await run.do("Read", {"file_path": "a.py"}, "x = 1")
    step = run.next_step("main")  # the batch again, fixed
    await run.do("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}, "updated", step=step)
    for edit in edits:
        await run.do("Edit", edit, "updated", step=step)
    assert run.actions == []


async def test_the_same_heredoc_written_again_is_no_progress(make: Make, anyio_backend: str) -> None:
    run = make()
    write = {"command": "cat > fix.patch <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\nEOF"}
    for n in range(3):
        await run.do("Bash", write, "")
        await run.do("Edit", {"file_path": "notes.md", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, "updated")
        await run.do("Bash", {"command": "git apply fix.patch"}, "error: patch failed: x.py:1", is_error=True)
    assert run.actions == [(7, "deny")]
    assert "same content to fix.patch once more (3 times now)" in run.texts[0]


async def test_the_same_shell_edit_right_away_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(4):
        await run.do("bash", {"command": "sed -i 's/return mmsubsup/return mmsubsup/' mathml.py"}, "")
    assert run.actions == [(3, "deny"), (4, "deny")]


@pytest.mark.parametrize("restore", ["git checkout app/validators.py", "cp app/validators.py.orig app/validators.py"])
async def test_the_same_edit_made_again_after_the_file_was_restored_is_progress(
    make: Make, anyio_backend: str, restore: str
) -> None:
    run = make()
    fix = {"file_path": "app/validators.py", "old_string": "[0-9a-f:]", "new_string": "[0-9a-fA-F:]"}
    for n in range(3):
        await run.do("replace", fix, "Successfully modified file: app/validators.py (1 replacements).")
        await run.do("run_shell_command", {"command": "python3 test.py"}, f"FAIL: case {n}")
        await run.do("run_shell_command", {"command": restore}, "Updated 1 path from the index")
    assert [kind for _, kind in run.actions if kind == "deny"] == []


async def test_the_same_edit_redone_after_each_restore_with_the_same_failure_is_a_loop(
    make: Make, anyio_backend: str
) -> None:
    """Edit, the same test failure, ``git checkout`` the file, the same edit
    again: the third round is advised, the fourth edit denied."""
    run = make()
    fix = {"file_path": "src/cart.ts", "old_string": "return sum;", "new_string": "return Math.round(sum * 100) / 100;"}
    for _ in range(4):
        await run.do("Edit", fix, "The file src/cart.ts has been updated.")
        await run.do(
            "Bash", {"command": "npx jest src/cart.test.ts"}, "FAIL rounds totals\nReceived: 10.0999", is_error=True
        )
        await run.do("Bash", {"command": "git checkout -- src/cart.ts"}, "")
    assert run.actions == [(7, "remind"), (10, "deny")]
    assert "put back" in run.texts[0]


async def test_the_same_edit_redone_beside_other_changes_is_no_redo(make: Make, anyio_backend: str) -> None:
    """The same fix restored and made again with a different change beside
    it each round: what the test says is the other change's outcome."""
    run = make()
    fix = {"file_path": "src/cart.ts", "old_string": "return sum;", "new_string": "return round2(sum);"}
    for n in range(5):
        await run.do("Edit", fix, "The file src/cart.ts has been updated.")
        await run.do("Edit", {"file_path": "src/round.ts", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, "updated")
        await run.do("Bash", {"command": "npx jest src/cart.test.ts"}, "FAIL rounds totals", is_error=True)
        await run.do("Bash", {"command": "git checkout -- src/"}, "")
    assert [kind for _, kind in run.actions if kind == "deny"] == []


async def test_output_written_by_a_program_is_not_a_rewrite(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4):
        await run.do("Bash", {"command": "git diff > patch.txt && cat patch.txt"}, f"diff {n}")
        await run.do("Edit", {"file_path": "a.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, "updated")
    assert run.actions == []


async def test_a_different_write_in_between_makes_the_same_write_progress(make: Make, anyio_backend: str) -> None:
    run = make()
    first = {"file_path": "cfg.toml", "content": "a = 1\n"}
    second = {"file_path": "cfg.toml", "content": "a = 2\n"}
    for args in (first, second, first, second, first):
        await run.do("Write", args, "File written")
        await run.do("Bash", {"command": "./check"}, "failed", is_error=True)
    assert [kind for _, kind in run.actions if kind == "deny"] == []


_TO_DECIMAL = {"file_path": "price.py", "old_string": "round(x, 2)", "new_string": "Decimal(x).quantize(CENT)"}
_TO_ROUND = {"file_path": "price.py", "old_string": "Decimal(x).quantize(CENT)", "new_string": "round(x, 2)"}


async def test_an_edit_flip_flopping_between_two_versions_is_a_loop(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4):
        await run.do("Edit", _TO_DECIMAL, "The file price.py has been updated.")
        await run.do("Bash", {"command": "pytest -q"}, "FAILED test_total - assert 30.0 == 30.01", is_error=True)
        if n < 3:
            await run.do("Edit", _TO_ROUND, "The file price.py has been updated.")
            await run.do("Bash", {"command": "pytest -q"}, "FAILED test_rounding - 2.675 != 2.68", is_error=True)
    assert [(n, kind) for n, kind in run.actions if n in (9, 11, 13)] == [(9, "remind"), (11, "remind"), (13, "deny")]
    assert "same edit to price.py 3 times, with other edits to it in between" in run.texts[0]
    assert "same edit to price.py once more (4 times now)" in run.texts[2]


async def test_a_codex_patch_flip_flopping_between_two_versions_is_a_loop(make: Make, anyio_backend: str) -> None:
    run = make()
    patch = "*** Begin Patch\n*** Update File: price.py\n@@\n-{old}\n+{new}\n*** End Patch"
    forth = patch.format(old="round(x, 2)", new="Decimal(x)")
    back = patch.format(old="Decimal(x)", new="round(x, 2)")
    for args in (forth, back, forth, back, forth):  # a rollout's apply_patch: the patch text is the input
        await run.do("apply_patch", args, "Success. Updated the following files:\nM price.py")
        await run.do("exec_command", {"cmd": "pytest -q"}, "Process exited with code 1\n1 failed", is_error=True)
    assert run.actions[0] == (9, "remind")


async def test_an_untracked_editing_tool_going_back_and_forth_is_left_alone(make: Make, anyio_backend: str) -> None:
    run = make(exclude=["Edit"])
    for args in (_TO_DECIMAL, _TO_ROUND, _TO_DECIMAL, _TO_ROUND, _TO_DECIMAL, _TO_ROUND, _TO_DECIMAL):
        await run.do("Edit", args, "The file price.py has been updated.")
    assert run.actions == []


async def test_a_reverted_fix_made_again_is_progress(make: Make, anyio_backend: str) -> None:
    run = make()
    for args in (_TO_DECIMAL, _TO_ROUND, _TO_DECIMAL):  # the fix, undone to see the test fail without it, redone
        await run.do("Edit", args, "The file price.py has been updated.")
        await run.do("Bash", {"command": "pytest -q"}, "1 failed", is_error=True)
    assert run.actions == []


async def test_a_user_message_lets_the_versions_be_tried_again(make: Make, anyio_backend: str) -> None:
    run = make()
    for args in (_TO_DECIMAL, _TO_ROUND, _TO_DECIMAL, _TO_ROUND):
        await run.do("Edit", args, "The file price.py has been updated.")
        if args is _TO_DECIMAL:
            await run.user("main", "Now compare both versions once more, with the new fixtures.")
    await run.do("Edit", _TO_DECIMAL, "The file price.py has been updated.")
    assert run.actions == []


async def test_the_first_re_read_after_a_compaction_is_no_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    await run.do("Read", {"file_path": "a.py"}, "x = 1")
    await run.do("Read", {"file_path": "a.py"}, "x = 1")
    await run.bus.publish(AgentStatus(agent=run.agent("main"), status="compacted"))
    await run.do("Read", {"file_path": "a.py"}, "x = 1")
    assert run.actions == []


@pytest.mark.parametrize("answer", ["yes", "Yes!", "yep", "yeah", "sure", "go ahead", "ja", "oui", "да", "はい"])
async def test_a_yes_to_the_agents_question_is_an_instruction_in_any_language(
    make: Make, anyio_backend: str, answer: str
) -> None:
    """The agent asked "shall I run it once more?": the answer approves that call."""
    run = make()
    check = {"command": "go test ./segments/ -run TestGitStatus -count=1"}
    await run.do("Bash", check, "ok  \tsegments\t1.214s")
    await run.do("Bash", check, "ok  \tsegments\t1.214s")
    await run.user("main", answer)
    await run.do("Bash", check, "ok  \tsegments\t1.214s")
    assert run.actions == []


@pytest.mark.parametrize("text", ["again", "Try again", "run it again please", "retry", "keep polling"])
async def test_a_request_to_repeat_is_an_instruction(make: Make, anyio_backend: str, text: str) -> None:
    run = make(interjections=[r"(?i)(again|try again|retry|ok)[.!]*"])
    await run.do("Bash", {"command": "make test"}, "1 failed")
    await run.do("Bash", {"command": "make test"}, "1 failed")
    await run.user("main", text)
    await run.do("Bash", {"command": "make test"}, "1 failed")
    assert run.actions == []


@pytest.mark.parametrize(
    "text",
    [
        "start the deploy and keep polling until it is done",
        "check the deploy till it is done",
        "Keep an eye on the server logs while I click through the signup flow",
        "Prüf bitte weiter, bis der Pod läuft",
        "Continue à vérifier jusqu'à ce que le déploiement soit terminé",
        "Sigue comprobando hasta que termine el despliegue",
        "продолжай проверять, пока сборка не закончится",
        "继续检查直到部署完成",
        "デプロイが終わるまで確認し続けて",
    ],
)
async def test_asking_to_wait_lets_an_unchanged_poll_run(make: Make, anyio_backend: str, text: str) -> None:
    run = make()
    await run.user("main", text)
    for _ in range(14):
        await run.do("BashOutput", {"bash_id": "b1"}, "<status>running</status>\n<stdout>waiting</stdout>")
    assert run.actions == []


@pytest.mark.parametrize(
    ("wait", "check"),
    [
        (["powershell.exe", "-NoProfile", "-Command", "Start-Sleep -Seconds 20"], "Get-Service AcmeWorker"),
        ('powershell -Command "Start-Sleep -Seconds 20"', 'powershell -Command "(Get-Service AcmeWorker).Status"'),
        ("cmd //c timeout /t 20 /nobreak", "sc query AcmeWorker"),
    ],
)
async def test_a_windows_wait_between_checks_makes_them_a_poll(
    make: Make, anyio_backend: str, wait: object, check: str
) -> None:
    run = make()
    for _ in range(6):
        await run.do("shell", {"command": wait}, "", seconds=2)
        await run.do("shell", {"command": check}, "STATE: START_PENDING", seconds=21)
    assert {kind for _, kind in run.actions} == {"remind"}, "a poll told to back off, never denied"


@pytest.mark.parametrize(
    "check",
    [
        "kubectl -n staging get pods",
        "kubectl --context prod get deploy web -o wide",
        "kubectl --context=prod rollout status deploy/web --timeout=60s",
        "sudo docker ps --filter name=web",
        "docker compose -f deploy.yml logs --tail 20 web",
        "FORCE_COLOR=0 gh -R org/app run list --limit 1",
        "sudo systemctl status app",
        "systemctl --user status app",
        "helm -n web status app",
        "journalctl -u app -n 20 --no-pager",
        "aws ecs describe-services --cluster prod --services web",
        "gcloud run services describe api --region europe-west1",
        "ssh gpu-01 'tail -50 ~/train.log'",
        "dig +short app.example.com",
        "npm view @acme/sdk version",
        "nc -zv localhost 5432",
        "pg_isready -h db -p 5432",
        "redis-cli -h cache ping",
        "sudo -u postgres pg_isready",
        "timeout -k 5 60 kubectl get pods",
        "ssh -i deploy.pem db-01 pg_isready",
        "gcloud compute instances list --filter name=web",
        "az group show -n rg-web",
        "timeout 600 sh -c 'until kubectl get pods | grep -q Running; do sleep 10; done'",
        "until curl -sf localhost:8080/ready; do\n  sleep 2\ndone",
        "ssh -i deploy.pem web-01 -- tail -n 50 app.log",
    ],
)
async def test_a_status_check_is_a_poll_whatever_options_come_before_its_subcommand(
    make: Make, anyio_backend: str, check: str
) -> None:
    """Status checks as agents write them: options before the subcommand,
    ``sudo`` or a variable in front, and the checks of clouds, services,
    DNS and registries; Claude Code refuses a ``sleep`` first, so each
    check comes again without one."""
    run = make()
    for _ in range(9):
        await run.do("Bash", {"command": check}, "web-7d9f  0/1  Pending  0  41s", seconds=10)
    assert run.actions
    assert {kind for _, kind in run.actions} == {"remind"}, "told to back off, never denied"


async def test_copies_of_a_call_in_one_response_are_denied_but_halt_nothing(make: Make, anyio_backend: str) -> None:
    """A runtime running one response's calls one after another: six copies
    of one search are denied from the third, and the run is not ended for
    a retrying the model never saw denied; the same call in two more
    responses is."""
    run = make()
    for _ in range(6):
        await run.call("main", "web_search", {"q": "rtg"}, "3 results", step=1)
    assert [kind for _, kind in run.actions] == ["deny"] * 4
    for step in (2, 3):
        await run.call("main", "web_search", {"q": "rtg"}, "3 results", step=step)
    assert [kind for _, kind in run.actions][-3:] == ["deny", "deny", "halt"]


async def test_a_check_printing_its_own_refused_connection_is_a_poll(make: Make, anyio_backend: str) -> None:
    """A script that catches its request's failure and prints it exits 0:
    one line saying the service is not up yet is a poll's answer."""
    run = make()
    check = 'try { Invoke-WebRequest -Uri "https://localhost:44395/" } catch { Write-Host "FAILED: $_" }'
    refused = "FAILED — No connection could be made because the target machine actively refused it. (localhost:44395)"
    for _ in range(8):
        await run.do("PowerShell", {"command": check}, refused, seconds=9)
    assert [kind for _, kind in run.actions] == ["remind"] * 3, "told to back off at the 4th, 6th and 8th"


async def test_a_log_full_of_refused_connections_read_again_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    log = "12:00:01 connect: connection refused\n12:00:02 connect: connection refused\n12:00:03 retrying\n"
    for _ in range(3):
        await run.do("Read", {"file_path": "/srv/app/app.log"}, log)
    assert run.actions == [(3, "deny")]


@pytest.mark.parametrize(
    "command",
    [
        "ssh build-01 make -C /srv/app",
        "ssh host make",
        "aws lambda invoke --function-name get-user-profile out.json",
        "aws sns publish --topic-arn arn:x --message 'please wait for it'",
        "gcloud functions call list-users",
        "az group create --name rg --location westeurope",
    ],
)
async def test_a_command_that_only_mentions_a_status_check_is_no_poll(
    make: Make, anyio_backend: str, command: str
) -> None:
    run = make()
    for _ in range(3):
        await run.do("Bash", {"command": command}, "Nothing to be done.")
    assert run.actions == [(3, "deny")]


async def test_a_link_error_that_mentions_getaddrinfo_is_no_network_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    error = (
        "warning: Using 'getaddrinfo' in statically linked applications requires at runtime the shared libraries\n"
        "undefined reference to `ssl_init'\ncollect2: error: ld returned 1 exit status"
    )
    for _ in range(5):
        await run.do("Bash", {"command": "gcc -static -o app main.c"}, error, is_error=True)
    assert run.actions == [(3, "remind"), (5, "deny")]


@pytest.mark.parametrize(
    "error",
    [
        "fatal: unable to access 'https://github.com/acme/app.git/': Could not resolve host: github.com",
        "npm ERR! request to https://registry.npmjs.org/left-pad failed, reason: getaddrinfo EAI_AGAIN npmjs.org",
        'Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: TLS handshake timeout',
        "dial tcp 10.0.0.5:443: i/o timeout",
        "error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly\nfatal: early EOF",
        "curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to api.example.com:443",
        "urllib.error.URLError: <urlopen error [Errno 11001] getaddrinfo failed>",
    ],
)
async def test_a_network_failure_retried_is_transient(make: Make, anyio_backend: str, error: str) -> None:
    run = make()
    for _ in range(5):
        await run.do("Bash", {"command": "git push origin main"}, error, is_error=True)
    assert run.actions == [(5, "remind")], "a back-off advisory at the fifth, no denial"


async def test_changing_directory_between_runs_of_a_failing_build_is_no_repeat(make: Make, anyio_backend: str) -> None:
    """In a shell that persists between calls, ``cd`` and ``export`` change
    what the next command does: the same build run in each package, or
    with each setting fixed in turn, is no retry of one failure."""
    run = make()
    for package in ("api", "web", "cli", "sdk", "docs", "infra"):
        await run.do("Bash", {"command": f"cd /repo/packages/{package}"}, "")
        await run.do(
            "Bash", {"command": "npm run build"}, f"Exit code 2\nsrc/{package}.ts(3,1): error TS2304", is_error=True
        )
    for setting in ("DJANGO_SETTINGS_MODULE=app.settings", "DATABASE_URL=sqlite://", "SECRET_KEY=x"):
        await run.do("execute_bash", {"command": f"export {setting}"}, "")
        await run.do(
            "execute_bash", {"command": "python -m pytest tests"}, "Exit code 1\nImproperlyConfigured", is_error=True
        )
    assert [kind for _, kind in run.actions if kind == "deny"] == []


async def test_changing_to_the_same_directory_before_the_same_failing_build_is_a_retry(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    for _ in range(5):
        await run.do("Bash", {"command": "cd /repo/packages/api"}, "")
        await run.do("Bash", {"command": "npm run build"}, "Exit code 2\nsrc/api.ts(3,1): error TS2304", is_error=True)
    assert "deny" in [kind for _, kind in run.actions]


async def test_powershell_reads_between_the_same_failing_build_are_no_news(make: Make, anyio_backend: str) -> None:
    run = make()
    build = ["powershell.exe", "-Command", "dotnet build"]
    for n in range(3):
        await run.do("shell", {"command": build}, "error CS0246: type 'Foo' not found", is_error=True)
        await run.do("shell", {"command": ["pwsh", "-c", f"Get-Content src/App.cs | Select-String Foo -Context {n}"]})
    assert run.actions[0] == (5, "remind")


async def test_a_grind_returns_the_same_result_to_other_arguments(make: Make, anyio_backend: str) -> None:
    run = make()
    for word in ("load", "Load", "loader", "loading", "LOAD"):
        await run.do("Bash", {"command": f"grep -c {word} src/app.py"}, "0")
    assert run.actions == [(4, "remind")]
    assert "grep has returned the same result 4 times" in run.texts[0]


async def test_a_search_tool_giving_the_same_answer_to_other_queries_grinds(make: Make, anyio_backend: str) -> None:
    run = make()
    chunks = "[1] Refunds are issued within 14 days of a return being received (policy.md#refunds)\n" * 3
    for query in ("refund window", "how long do refunds take", "refund processing time", "refund days"):
        await run.do("search_knowledge_base", {"query": query, "top_k": 3}, chunks)
    assert run.actions == [(4, "remind")]
    assert "search_knowledge_base has returned the same result 4 times" in run.texts[0]


async def test_a_search_tools_few_words_are_no_grind(make: Make, anyio_backend: str) -> None:
    run = make()
    for query in ("nanobot release notes", "nanobot mcp support", "nanobot telegram channel", "nanobot benchmark"):
        await run.do("web_search", {"query": query}, f"results for {query}: ...")
    for query in ("SELECT 1 FROM a", "SELECT 1 FROM b", "SELECT 1 FROM c", "SELECT 1 FROM d"):
        await run.do("sql_db_query", {"query": query}, "[]")
    assert run.actions == []


async def test_other_pages_are_no_grind_but_other_values_of_any_type_are(make: Make, anyio_backend: str) -> None:
    run = make()
    for offset in range(0, 600, 100):  # each call's arguments parsed afresh, as a runtime does
        args = json.loads(f'{{"file_path": "a.log", "offset": {offset}, "view": {{"wrap": false}}}}')
        await run.do("Read", args, "same")
    assert run.actions == []
    run = make()
    for n in range(4):  # a list argument that changes
        await run.do("Read", {"file_path": "b.log", "lines": [n, n + 50], "view": {"wrap": False}}, "same")
    assert run.actions == [(4, "remind")]
    run = make()
    for key in ("pattern", "glob", "type", "regex"):  # other arguments altogether
        await run.do("Search", {"path": "src", key: "x"}, "src/a.py")
    assert run.actions == [(4, "remind")]


async def test_empty_results_and_unnamed_targets_are_no_grind(make: Make, anyio_backend: str) -> None:
    run = make()
    for word in ("load", "save", "parse", "dump", "read"):
        await run.do("Bash", {"command": f"grep -rn {word} src"}, "")
    for n in range(5):
        await run.do("TodoWrite", {"todos": [{"content": f"step {n}"}]}, "Todos have been modified successfully")
    assert run.actions == []


async def test_a_search_finding_nothing_under_new_patterns_is_no_grind(make: Make, anyio_backend: str) -> None:
    run = make()
    for pattern in ("**/Cargo.toml", "**/pyproject.toml", "**/biome.json", "**/turbo.json", "**/moon.yml"):
        await run.do("glob", {"pattern": pattern, "path": "/repo"}, "No files found")
    for word in ("load", "save", "parse", "dump", "read"):
        await run.do("Grep", {"pattern": word, "path": "src"}, "No matches found")
    assert run.actions == []
    for word in ("load", "save", "parse", "dump"):
        await run.do("Grep", {"pattern": word, "path": "src"}, "src/app.py:1: import x")
    assert run.actions == [(14, "remind")], "an answer that is found content still grinds"


async def test_a_runtimes_stand_in_for_an_empty_output_is_no_grind(make: Make, anyio_backend: str) -> None:
    run = make()
    for word in ("check_unused_imports", "unused-import", "unused_import", "unused", "W0611"):
        await run.do(
            "grep",
            {"command": f"grep -n {word} pylint/checkers/imports.py"},
            "Your command ran successfully and did not produce any output.",
        )
    for word in ("load", "save", "parse", "dump", "read"):
        await run.do("Bash", {"command": f"grep -rn {word} src"}, "Command produced no output")
    for n, name in enumerate(("Cargo.toml", "pyproject.toml", "biome.json", "turbo.json", "moon.yml")):
        command = f"find . -name {name}"
        await run.do("run_shell_command", {"command": command}, gemini_shell(command, "(empty)", 700 + n, "0"))
    for word in ("resolveIdentity", "resolve_identity", "identityResolver", "getIdentity", "currentUser"):
        await run.do("grep_search", {"pattern": word}, f'No matches found for pattern "{word}" in path "src".')
    for n, name in enumerate(("a.toml", "b.toml", "c.toml", "d.toml", "e.toml")):  # Gemini CLI's current form
        await run.do(
            "run_shell_command", {"command": f"find . -name {name}"}, f"Output: (empty)\nProcess Group PGID: {n}"
        )
    assert run.actions == []


@pytest.mark.parametrize(
    "call",
    [
        lambda n, command: ("run_shell_command", {"command": command}, gemini_shell(command, "src/app.py:12: ok", n)),
        lambda n, _: (
            "fetch",
            {"url": f"https://news.example.com/a/123?variant={n}"},
            f"Contents of https://news.example.com/a/123?variant={n}:\nSubscribe to read this article.",
        ),
    ],
    ids=["gemini-shell", "fetch-server"],
)
async def test_a_result_quoting_its_own_arguments_grinds_on_the_rest(
    make: Make, anyio_backend: str, call: Callable[[int, str], tuple[str, dict[str, object], str]]
) -> None:
    run = make()
    for n, word in enumerate(("TODO", "FIXME", "XXX", "HACK")):
        await run.do(*call(n, f"grep -rn {word} src/"))
    assert run.actions == [(4, "remind")]


async def test_gemini_shell_failures_are_not_lumped_into_one_kind(make: Make, anyio_backend: str) -> None:
    run = make()
    for n, (command, output) in enumerate(
        [
            ("grep -rn foo src", "(empty)"),
            ("grep -rn foo lib", "grep: lib: No such file or directory"),
            ("grep -rn bar src", "(empty)"),
            ("grep -rn baz src", "(empty)"),
        ]
    ):
        await run.do(
            "run_shell_command", {"command": command}, gemini_shell(command, output, 900 + n, "1"), is_error=True
        )
    assert run.actions == []


async def test_per_tool_settings_override_the_section(tmp_path: object, make: Make, anyio_backend: str) -> None:
    config = parse_config(
        {
            "remind": {"enabled": False},
            "loops": {
                "tools": {
                    "Grep": {"deny_at": 5},
                    "mcp__jobs__*": {"kind": "poll", "poll_nudge_at": 2},
                    "mcp__noise__*": {"kind": "exclude"},
                    "search": {"identity_args": ["query"]},
                }
            },
        }
    )
    run = make(**{k: getattr(config.loops, k) for k in ("tools",)})
    for _ in range(4):
        await run.do("Grep", {"pattern": "x"}, "none")
    for _ in range(3):
        await run.do("mcp__noise__ping", {}, "pong")
    assert run.actions == [(3, "remind")]  # two repeats in a row: a cycle forming
    await run.do("Grep", {"pattern": "x"}, "none")
    assert run.actions[-1] == (8, "deny")
    for n in range(3):
        await run.do("search", {"query": "q", "request_nonce": n}, "3 hits")
    assert run.actions[-1] == (11, "deny")
    for _ in range(3):
        await run.do("mcp__jobs__get", {"id": 1}, "queued")
    assert run.actions[-1] == (13, "remind")


async def test_tool_hints_decide_progress(make: Make, anyio_backend: str) -> None:
    run = make()
    call = run.hinted
    await call("Grep", {"pattern": "x"}, "none", {})
    await call("Grep", {"pattern": "x"}, "none", {})
    await call("create_ticket", {"title": "bug"}, "created #7", {"readOnlyHint": False})  # changes things: progress
    await call("Grep", {"pattern": "x"}, "none", {})
    assert run.actions == []
    await call("write_summary", {"id": 1}, "summary", {"readOnlyHint": True})  # read-only despite its name
    await call("Grep", {"pattern": "x"}, "none", {})
    await call("Grep", {"pattern": "x"}, "none", {})
    assert run.actions == [(6, "remind"), (7, "deny")]


async def test_equal_arguments_under_other_annotations_are_read_under_their_own(make: Make, anyio_backend: str) -> None:
    run = make()
    call = run.hinted
    await call("Grep", {"pattern": "x"}, "none", {})
    await call("Grep", {"pattern": "x"}, "none", {})
    await call("ticket", {"id": 1}, "ticket #1: open", {"readOnlyHint": True})
    await call("ticket", {"id": 1}, "ticket #1: closed", {"readOnlyHint": False})  # this time it changed things
    await call("Grep", {"pattern": "x"}, "none", {})
    assert run.actions == []


async def test_a_call_holding_an_ignored_argument_is_read_apart_from_one_without(
    make: Make, anyio_backend: str
) -> None:
    run = make(ignored_args=["action"])
    await run.do("search", {"query": "q", "action": "scroll"}, "3 hits")  # paging: an argument says so
    for _ in range(3):
        await run.do("search", {"query": "q"}, "3 hits")  # the same fingerprint, but no paging
    assert run.actions == [(4, "deny")]


def test_bad_tool_settings_name_their_key() -> None:
    from guard import ConfigError

    with pytest.raises(ConfigError, match=r'loops.tools."Bash".kind'):
        parse_config({"loops": {"tools": {"Bash": {"kind": "sometimes"}}}})
    with pytest.raises(ConfigError, match=r'loops.tools."Bash".deny_at'):
        parse_config({"loops": {"tools": {"Bash": {"deny_at": 1}}}})
    with pytest.raises(ConfigError, match=r"loops.grind_deny_at"):
        Config(remind=RemindConfig(enabled=False), loops=LoopsConfig(grind_at=4, grind_deny_at=3))


async def test_a_background_job_polled_until_it_completes_is_left_alone(make: Make, anyio_backend: str) -> None:
    run = make()
    for second, status in enumerate(["running", "running", "running", "completed"]):
        await run.do(
            "BashOutput",
            {"bash_id": "bash_3"},
            f"<status>{status}</status>\n<stdout>Installing dependencies...</stdout>\n"
            f"<timestamp>2026-11-30T10:00:{10 + 5 * second:02d}Z</timestamp>",
            seconds=5,
        )
    assert run.actions == []


async def test_hints_without_a_read_only_hint_and_an_explicit_setting_leave_the_rules(
    make: Make, anyio_backend: str
) -> None:
    policy_config = parse_config({"loops": {"tools": {"create_*": {"mutating": False}}}}).loops
    from guard import LoopsPolicy

    policy = LoopsPolicy(policy_config)
    assert policy.rules("create_ticket", {"readOnlyHint": False}).mutating is False
    assert policy.rules("ping", {"idempotentHint": True}) is policy.rules("ping")
    for n in range(4100):  # the memo is bounded; a tool past its limit is still judged
        policy.rules(f"tool_{n}")
    assert policy.rules("tool_4099").deny_at == policy_config.deny_at


async def test_ignored_args_of_one_tool_and_paging_by_kind(make: Make, anyio_backend: str) -> None:
    tools = parse_config(
        {"loops": {"tools": {"Bash": {"ignored_args": ["timeout"]}, "viewer_*": {"kind": "paging"}}}}
    ).loops.tools
    run = make(tools=tools)
    for n in range(3):
        await run.do("Bash", {"command": "make", "timeout": 60 + n}, "up to date")
    for _ in range(5):
        await run.do("viewer_next", {}, "[page]")
    assert run.actions == [(3, "deny")]


async def test_grind_can_be_off(make: Make, anyio_backend: str) -> None:
    run = make(grind_at=0)
    for word in ("a", "b", "c", "d", "e"):
        await run.do("Bash", {"command": f"grep -c {word} src/app.py"}, "0")
    assert run.actions == []


async def test_an_echo_written_again_is_a_rewrite(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(3):
        await run.do("Bash", {"command": "echo 'x = 1' > cfg.py"}, "")
        await run.do("Edit", {"file_path": "b.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, "updated")
    assert run.actions == [(5, "deny")]
    run = make()
    for n in range(3):
        await run.do("Bash", {"command": "python - <<'EOF' > out.txt\nprint(1)\nEOF"}, "")
        await run.do("Edit", {"file_path": "b.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, "updated")
    assert run.actions == []


async def test_raw_string_arguments_are_judged_as_usual(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("shell", "ls -la {", "a b")
    assert run.actions == [(3, "deny")]


async def test_a_file_read_is_compared_exactly(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4):
        # changed by something the guard does not see (a formatter, another process): fresh contents each time
        await run.do("Read", {"file_path": "VERSION"}, f"version = {n + 4}\nbuilt 2026-11-30T10:0{n}:00Z\n")
    assert run.actions == []
    for _ in range(3):
        await run.do("Read", {"file_path": "setup.cfg"}, "[metadata]\nname = app\n")
    assert run.actions == [(7, "deny")]


# a result each of loops' yes/no checks of a result's text answers yes to
_CHECKED = {
    "cancelled": ("Bash", {"command": "make"}, "[Request interrupted by user]", True),
    "an error": ("Bash", {"command": "make"}, "ERROR: build failed", False),
    "a poll state": ("deploy", {"name": "web"}, "status: running", False),
    "transient": ("WebFetch", {"url": "https://x.example"}, "Request failed with status code 503", True),
}


@pytest.mark.parametrize("name", _CHECKED)
async def test_a_result_past_every_checks_head_is_read_as_a_short_one(
    make: Make, anyio_backend: str, name: str
) -> None:
    tool, args, text, is_error = _CHECKED[name]
    acted = []
    for content in ("plain output", text, text + "\n" + "x" * 400):
        run = make(transient_at=3, transient_deny_at=4)
        for _ in range(6):
            await run.do(tool, args, content, is_error=is_error)
        acted.append(run.actions)
    plain, short, long = acted
    assert short == long
    assert short != plain  # the check changed what was done


async def test_an_agents_targets_and_written_files_are_kept_bounded(make: Make, anyio_backend: str) -> None:
    run = make()
    sizes = []
    for n in range(600):  # a long session reading ever new files, then writing them
        await run.do("Read", {"file_path": f"src/gen/m{n}.py"}, f"x = {n}")
    watches = run.guard.watches(run.agent("main"))
    assert watches is not None
    sizes.append(len(watches[0].state.grinds))  # type: ignore[attr-defined]
    for n in range(600):
        await run.do("Write", {"file_path": f"src/gen/out{n}.py", "content": f"y = {n}"}, "File written")
    sizes.append(len(watches[0].state.writes))  # type: ignore[attr-defined]
    assert sizes == [256, 256]
    for word in ("load", "Load", "loader", "loading", "LOAD"):  # what is touched now is still tracked
        await run.do("Bash", {"command": f"grep -c {word} src/app.py"}, "0")
    assert run.actions[-1:] == [(1204, "remind")]


@pytest.mark.parametrize(
    ("tool", "args", "status", "seconds", "calls"),
    [
        ("Bash", {"command": "argocd app get api"}, "Sync Status:  Synced\nHealth Status:  Progressing", 60, 10),
        (
            "Bash",
            {"command": "kubectl argo rollouts get rollout checkout -n prod"},
            "Status:  ॥ Paused\nStep:  1/8",
            60,
            10,
        ),
        ("Bash", {"command": "flux get kustomizations"}, "apps\tUnknown\tReconciliation in progress", 60, 10),
        (
            "Bash",
            {"command": "curl -s https://api.vercel.com/v13/deployments/dpl_1 | jq .readyState"},
            '"BUILDING"',
            60,
            10,
        ),
        ("get_application", {"applicationName": "api"}, '{"status": {"health": {"status": "Progressing"}}}', 60, 10),
        # a Bash result as its hook sends it, markdown, a tag
        (
            "Bash",
            {"command": "./job-status 7"},
            '{"stdout": "{\\"id\\": 7, \\"status\\": \\"running\\"}", "stderr": ""}',
            30,
            6,
        ),
        ("Bash", {"command": "./job-status 7"}, "**Status:** In Progress", 30, 6),
        ("Bash", {"command": "./job-status 7"}, "| Field | Value |\n|---|---|\n| Status | Running |", 30, 6),
        ("Bash", {"command": "./job-status 7"}, "<job><state>pending</state></job>", 30, 6),
        # a table with a status column: workers an orchestrating agent started, a markdown report
        (
            "exec_command",
            {"cmd": "workmux status"},
            "WORKTREE  STATUS   ELAPSED  TITLE\nworker-a  working  3m       worker-a\nworker-b  idle     3m       b",
            120,
            8,
        ),
        ("Bash", {"command": "./vm-state web-1"}, "CREATING", 30, 6),
        # a state under a key with a prefix (Shopify's, Stripe's), CloudFormation's, Azure's, a shipment's
        ("get_order", {"order_id": "1042"}, '{"id": "1042", "fulfillment_status": "processing"}', 45, 6),
        ("get_job", {"id": 7}, '{"job_state": "RUNNING"}', 45, 6),
        ("aws_cfn_describe", {"stack": "api"}, '{"StackStatus": "UPDATE_ROLLBACK_IN_PROGRESS"}', 45, 6),
        ("get_deployment", {"id": "d1"}, '{"provisioningState": "InProgress"}', 45, 6),
        ("track_parcel", {"id": "1Z999"}, '{"tracking_status": "in_transit"}', 45, 6),
        (
            "Bash",
            {"command": "tkn pipelinerun list"},
            "NAME          STARTED         DURATION   STATUS\nbuild-run-7   1 minute ago    ---        Running",
            60,
            8,
        ),
        (
            "Bash",
            {"command": "sky jobs queue"},
            "ID  TASK  NAME   SUBMITTED   #RECOVERIES  STATUS\n2   -     eval   1 min ago   0            PENDING\n"
            "1   -     train  5 mins ago  0            SUCCEEDED",
            60,
            8,
        ),
    ],
)
async def test_a_check_whose_state_is_still_moving_is_a_poll_never_denied_at_a_patient_pace(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], status: str, seconds: int, calls: int
) -> None:
    """A rollout, a canary paused between steps, a reconciliation, a job
    whose status a Bash result, a markdown report or a tag gives: each
    state says it is still moving, so the check is a poll, and a poll that
    waits half a minute or more is never denied however long it takes."""
    run = make()
    for _ in range(calls):
        await run.do(tool, args, status, seconds=seconds)
    assert "deny" not in {action for _, action in run.actions}


async def test_searches_failing_with_nothing_found_are_no_failure_streak(make: Make, anyio_backend: str) -> None:
    """smolagents' web search raises when it finds nothing, and says to
    try a shorter query: the agent following that advice is no streak of
    one error, and the broad query it ends with runs."""
    run = make()
    for n in range(8):
        query = f'"Article 5" "AI Act" ruling variant {n}'
        failure = (
            f"Error executing tool 'web_search' with arguments {{'query': '{query}'}}: "
            "Exception: No results found! Try a less restrictive/shorter query."
        )
        await run.do("web_search", {"query": query}, failure, is_error=True)
    await run.do("web_search", {"query": "AI Act article 5 court"}, "1. CJEU opinion on prohibited AI practices")
    assert run.actions == []
    for _ in range(3):  # the same failing query again is still a repeat
        await run.do("web_search", {"query": "x"}, "Error: No results found! Try a shorter query.", is_error=True)
    assert run.actions == [(12, "remind")]


async def test_a_supervisor_handing_the_same_worker_new_work_is_no_repeat(make: Make, anyio_backend: str) -> None:
    """LangGraph's supervisor hands each company to one research worker and
    the worker hands back; each search in between brings news."""
    run = make()
    for company in ("Meta", "Apple", "Amazon", "Netflix", "Google"):
        await run.do("transfer_to_research_expert", {}, "Successfully transferred to research_expert")
        found = f"{company} had {len(company)}0000 employees"
        await run.do("web_search", {"query": f"{company} headcount 2024"}, found)
        await run.do("transfer_back_to_supervisor", {}, "Successfully transferred back to supervisor")
    assert run.actions == []


@pytest.mark.parametrize(
    ("tool", "args", "content"),
    [
        (
            "Read",
            {"file_path": "/repo/jobs.py"},
            "class JobStatus(Enum):\n    RUNNING = 1\n\nif job is JobStatus.RUNNING:",
        ),
        ("python_repl", {"code": "print(game.state)"}, "game.state -> running"),
        ("WebFetch", {"url": "https://example.com/roadmap"}, "Feature A status: Updating docs is the last item."),
        ("get_subscription", {"id": "sub_1"}, '{"id": "sub_1", "status": "paused"}'),
        ("Bash", {"command": "workmux status"}, "WORKTREE  STATUS  TITLE\nworker-a  done    a\nworker-b  idle    b"),
        ("Read", {"file_path": "/repo/NOTES.md"}, "Weekly STATUS\nWe are  building  a new release."),
        ("Read", {"file_path": "/repo/PLAN.md"}, "| Step | Status |\n|---|---|\n| Backfill | In progress |"),
        ("Bash", {"command": "workmux status"}, "WORKTREE  STATUS   TITLE\nworker-a  waiting  asks which branch"),
        ("Bash", {"command": "./report"}, "NAME   STATUS\nbuild  done\n\nNext:  running  the deploy"),
    ],
)
async def test_a_state_word_in_code_prose_or_a_state_that_waits_on_someone_is_no_poll(
    make: Make, anyio_backend: str, tool: str, args: dict[str, object], content: str
) -> None:
    """``JobStatus.RUNNING`` in a source file, ``state -> running`` in a
    REPL, a status word opening a sentence, a subscription paused until
    someone resumes it: none says a job is still moving, so reading it again
    unchanged is a repeat."""
    run = make()
    for _ in range(3):
        await run.do(tool, args, content, seconds=45)
    assert run.actions == [(3, "deny")]


async def test_an_edit_whose_text_is_never_found_is_still_a_failure_streak(make: Make, anyio_backend: str) -> None:
    """Serena's ``replace_regex`` says ``No matches found`` when its regex
    misses: an edit failing, not a search finding nothing."""
    run = make()
    for n in range(3):
        failure = f"Error: No matches found for regex 'def handler_{n}\\(' in file 'src/app.py'."
        await run.do(
            "replace_regex", {"relative_path": "src/app.py", "regex": f"def handler_{n}\\("}, failure, is_error=True
        )
    assert run.actions == [(3, "remind")]


async def test_tests_run_after_each_undo_that_reverts_an_edit_are_no_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    for n in range(4, 0, -1):
        await run.do("mcp__editor__undo", {}, f"Reverted edit #{n} in src/api.ts")
        await run.do("Bash", {"command": "npm test"}, "1 failing\n  api returns 404")
    assert run.actions == []


async def test_a_file_comparing_a_status_in_code_read_again_is_a_repeat(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do("Read", {"file_path": "/repo/worker.py"}, 'if job.status == "running":\n    wait(job)')
    assert run.actions == [(3, "deny")]


async def test_a_clock_stepped_back_during_a_wait_leaves_the_check_a_poll(make: Make, anyio_backend: str) -> None:
    """NTP correcting a clock, a machine resumed from sleep: a check stamped
    before the last one still came after the agent waited, and a retry after
    the wait a service asked for is no earlier for the step."""
    run = make()
    for n in range(6):
        await run.do("Bash", {"command": "sleep 30"}, "", seconds=30)
        if n == 2:
            run.clock.now -= 90
        await run.do("Bash", {"command": "ls dist/"}, "app.js")
    assert "deny" not in {action for _, action in run.actions}
    limited = "HTTP 429 Too Many Requests\nRetry-After: 60"
    for n in range(5):
        if n == 2:
            run.clock.now -= 600
        await run.do("WebFetch", {"url": "https://api.example.com/v1/items"}, limited, is_error=True, seconds=65)
    assert "deny" not in {action for _, action in run.actions}


_PODS = "NAME  READY  STATUS\nweb-1  0/1  Pending"
_LIMITED = "429 Too Many Requests: retry after 20s"
_UNTIMED_SESSIONS: dict[str, list[tuple[str, dict[str, Any], str, bool, float]]] = {
    # (tool, arguments, result, failed, seconds the call takes), in turn
    "checks after long sleeps": [
        ("Bash", {"command": "sleep 30"}, "", False, 30),
        ("Bash", {"command": "ls"}, "a", False, 0),
    ]
    * 6,
    "checks after short sleeps": [
        ("Bash", {"command": "sleep 1"}, "", False, 1),
        ("Bash", {"command": "ls"}, "a", False, 0),
    ]
    * 6,
    "a patient poll": [
        ("Bash", {"command": "kubectl get pods"}, _PODS, False, 0),
        ("Bash", {"command": "sleep 60"}, "", False, 60),
    ]
    * 14,
    "a hurried poll": [
        ("Bash", {"command": "kubectl get pods"}, _PODS, False, 0),
        ("Bash", {"command": "sleep 5"}, "", False, 5),
    ]
    * 14,
    # the wait inside the check: the call takes as long as it sleeps
    "a poll that sleeps before each check": [
        ("Bash", {"command": "sleep 120 && gh run view 42"}, "in_progress", False, 120)
    ]
    * 16,
    "retries after the wait asked for": [
        ("http_post", {"url": "https://api.example.org/v1"}, _LIMITED, True, 0),
        ("sleep", {"seconds": 25}, "", False, 25),
    ]
    * 6,
    "retries sooner than asked": [
        ("http_post", {"url": "https://api.example.org/v1"}, _LIMITED, True, 0),
        ("wait", {"ms": 2000}, "", False, 2),
    ]
    * 6,
    "Windows waits": [
        ("shell", {"command": ["powershell.exe", "-Command", "Start-Sleep -Seconds 20"]}, "", False, 20),
        ("shell", {"command": "sc query AcmeWorker"}, "STATE: STOPPED", False, 0),
        ("shell", {"command": "Start-Sleep -Milliseconds 20000"}, "", False, 20),
        ("shell", {"command": "sc query AcmeWorker"}, "STATE: STOPPED", False, 0),
        ("shell", {"command": "cmd //c timeout /t 20 /nobreak"}, "", False, 20),
        ("shell", {"command": "sc query AcmeWorker"}, "STATE: STOPPED", False, 0),
        ("Bash", {"command": "sleep 1m"}, "", False, 60),
        ("shell", {"command": "sc query AcmeWorker"}, "STATE: STOPPED", False, 0),
    ]
    * 2,
}


@pytest.mark.parametrize("session", sorted(_UNTIMED_SESSIONS))
async def test_a_transcript_without_times_is_judged_as_its_sleeps_say_it_waited(
    make: Make, anyio_backend: str, session: str
) -> None:
    """A format without times imports with every ``ts`` 0: each sleep's own
    duration says how long the agent waited, so the session is judged as it
    was live, with a clock."""
    live, untimed = make(), make()
    untimed.clock.now = 0.0  # as a format without times imports
    for tool, args, content, failed, seconds in _UNTIMED_SESSIONS[session]:
        await live.do(tool, args, content, is_error=failed, seconds=seconds)
        await untimed.do(tool, args, content, is_error=failed, seconds=0)
    assert untimed.actions == live.actions
    denied = "deny" in {kind for _, kind in live.actions}
    assert denied == (session in ("checks after short sleeps", "a hurried poll", "retries sooner than asked"))


@pytest.mark.parametrize(
    ("tool", "wait", "answer"),
    [
        ("exec_command", {"cmd": "sleep 120"}, "Process running with session ID 4"),  # past Codex's 10 s yield
        ("Bash", {"command": "sleep 60", "run_in_background": True}, "Command running in background with ID: b1"),
    ],
)
async def test_with_a_clock_a_sleep_waited_as_long_as_the_clock_says(
    make: Make, anyio_backend: str, tool: str, wait: dict[str, Any], answer: str
) -> None:
    """A sleep may come back before its time (a tool's limit, the
    background): where there is a clock, what it says counts, not the sleep's word."""
    run = make()
    for _ in range(3):
        await run.do("Bash", {"command": "pytest -q"}, "1 failed, 14 passed", seconds=1)
        await run.do(tool, wait, answer, seconds=1)
    assert run.actions == [(5, "deny")]


async def test_a_sleep_the_shell_refused_waited_for_nothing(make: Make, anyio_backend: str) -> None:
    run = make()
    run.clock.now = 0.0
    refused = "Blocked: standalone sleep 30. To wait for a condition, use Monitor with an until-loop."
    for _ in range(3):
        await run.do("Bash", {"command": "pytest -q"}, "1 failed, 14 passed", seconds=0)
        await run.do("Bash", {"command": "sleep 30"}, refused, is_error=True, seconds=0)
    assert run.actions == [(5, "deny")]


@pytest.mark.parametrize(
    "keep",
    ["go test ./... 2>&1 | tail -20", "npm test 2>&1 | tail -n 30", "pytest -q | tail -5", "npm test |& tail -5"],
)
async def test_a_run_whose_output_a_pipe_feeds_to_tail_is_no_poll(make: Make, anyio_backend: str, keep: str) -> None:
    """``| tail`` keeps the end of a test run's output: the run failing the
    same way again and again is a repeat, not a poll to back off from."""
    run = make()
    for _ in range(5):
        await run.do("Bash", {"command": keep}, "FAIL\tsegments\t0.9s\nexit status 1", is_error=True, seconds=3)
    assert [kind for _, kind in run.actions][-1] == "deny"
    assert "poll" not in " ".join(run.texts)


@pytest.mark.parametrize(
    "check",
    [
        "tail -20 logs/app.log",
        "cd srv && tail -n 5 out.log",
        "false || tail -3 build.log",
        "kubectl logs deploy/api -n staging | tail -5",
        "grep -i error /var/log/app.log | tail -20",
        "find . -name '*.log' | xargs tail -n 5",
        "Get-Content build.log -Tail 20",
    ],
)
async def test_a_tail_of_a_log_is_a_poll(make: Make, anyio_backend: str, check: str) -> None:
    run = make()
    for _ in range(6):
        await run.do("Bash", {"command": check}, "[info] still indexing", seconds=3)
    assert "deny" not in {kind for _, kind in run.actions}


@pytest.mark.parametrize(
    ("tool", "args", "answer"),
    [
        ("read_background_output", {"pid": 16403, "delay_ms": 5000}, "Full Log Output:\nBuild started, compiling...\n"),
        ("list_background_processes", {}, "- [PID 16403] RUNNING: npm run build"),
        # as Codex's hooks name it, after its namespace: the wait ran out while the subagent works
        ("multi_agent_v1wait_agent", {"targets": ["agent-1"], "timeout_ms": 30000}, '{"status":{},"timed_out":true}'),
    ],
)
async def test_checking_on_a_background_job_with_the_clis_own_tool_is_a_poll(
    make: Make, anyio_backend: str, tool: str, args: dict[str, Any], answer: str
) -> None:
    run = make()
    for _ in range(8):
        await run.do(tool, args, answer, seconds=6)
    assert "deny" not in {kind for _, kind in run.actions}


async def test_reading_a_background_tasks_output_file_again_is_a_poll(make: Make, anyio_backend: str) -> None:
    """Claude Code writes a background command's output to ``tasks/<id>.output``
    and tells the model to ``Read`` it to check on it: a quiet build reads
    the same each time."""
    run = make()
    output = {"file_path": "/tmp/claude-1000/-work-app/tasks/b7x2k9.output"}
    for _ in range(8):
        await run.do("Read", output, "     1\t> app@1.0.0 build\n     2\t> vite build", seconds=10)
    assert "deny" not in {kind for _, kind in run.actions}
    for path in ("/work/app/build.output.txt", "/home/dev/app/tasks/report.output"):
        another = make()
        for _ in range(3):
            await another.do("Read", {"file_path": path}, "same", seconds=10)
        assert [kind for _, kind in another.actions] == ["deny"], "any other file read again is a repeat"


async def test_telling_a_subagent_to_go_on_after_it_reported_progress_is_no_repeat(
    make: Make, anyio_backend: str
) -> None:
    """An orchestrator drives a subagent chunk by chunk: the same "continue",
    answered with the same receipt, after each new report."""
    go_on = {"target": "agent-1", "message": "Good. Continue with the next chunk."}
    wait = {"targets": ["agent-1"], "timeout_ms": 60000}
    run = make()
    for chunk in range(1, 6):
        report = f'{{"status":{{"agent-1":{{"completed":"Chunk {chunk} done: files migrated."}}}}}}'
        await run.do("multi_agent_v1wait_agent", wait, report)
        await run.do("multi_agent_v1send_input", go_on, '{"submission_id":"sub"}')
    assert run.actions == []
    stuck = make()
    for _ in range(4):
        await stuck.do("multi_agent_v1wait_agent", wait, '{"status":{"agent-1":{"failed":"no access"}}}')
        await stuck.do("multi_agent_v1send_input", go_on, '{"submission_id":"sub"}')
    assert "deny" in {kind for _, kind in stuck.actions}, "nothing new in between: a loop"


async def test_a_page_opened_again_is_no_content_written_again(make: Make, anyio_backend: str) -> None:
    """Playwright MCP has no reload: an agent opens the URL again, and its
    navigate tool declares that it changes things. Opened again while the
    page changes, it is watched, not denied as the same file written once
    more; opened again onto the same page, it is a repeat as any call."""
    run = make()
    page = "### Page\n- Page URL: http://127.0.0.1/status\n### Snapshot\n- heading: {state}"
    for state in ("running 10%", "running 40%", "running 80%", "finished"):
        await run.hinted("browser_navigate", {"url": "http://127.0.0.1/status"}, page.format(state=state), {})
    assert run.actions == []
    for _ in range(2):
        await run.hinted("browser_navigate", {"url": "http://127.0.0.1/status"}, page.format(state="finished"), {})
    assert run.actions == [(6, "deny")]
    hints = {"readOnlyHint": False}
    for state in ("v1", "v2", "v3", "v4"):
        await run.hinted("browser_navigate", {"url": "http://127.0.0.1/app"}, page.format(state=state), hints)
    assert run.actions == [(6, "deny")]


async def test_files_read_together_are_compared_exactly(make: Make, anyio_backend: str) -> None:
    """The MCP filesystem server's read_multiple_files returns the files'
    content: a commit id or a row count in it is the news, not noise."""
    run = make()
    for sha in ("3f9a2c1d7e", "8b1e0f4a2c", "c0ffee1234"):
        await run.do("read_multiple_files", {"paths": [".git/refs/heads/main"]}, f".git/refs/heads/main:\n{sha}\n")
    for rows in (12_400_000, 13_100_000, 13_900_000):
        await run.do("read_multiple_files", {"paths": ["progress.json"]}, f'progress.json:\n{{"rows_done": {rows}}}')
    assert run.actions == []
    for _ in range(3):
        await run.do("read_multiple_files", {"paths": ["a.txt", "b.txt"]}, "a.txt:\nA\n---\nb.txt:\nB")
    assert run.actions == [(9, "deny")]


async def test_a_batch_of_rows_changed_again_is_progress_until_none_are(make: Make, anyio_backend: str) -> None:
    """Deleting in batches (LIMIT 100) to keep locks short: each run changes
    the next hundred rows; once it changes none, running it again is a
    repeat."""
    run = make()
    delete = {"query": "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE processed = 1 LIMIT 100)"}
    for _ in range(4):
        await run.do("write_query", delete, "[{'affected_rows': 100}]")
    await run.do("write_query", delete, "[{'affected_rows': 37}]")
    assert run.actions == []
    for _ in range(3):
        await run.do("write_query", delete, "[{'affected_rows': 0}]")
    assert run.actions == [(8, "deny")]
    update = {"sql": "UPDATE users SET active = 1 WHERE id = 5"}  # no batch: the same row each time
    for _ in range(3):
        await run.do("execute_sql", update, "1 row affected")
    assert run.actions[-1] == (11, "deny")


@pytest.mark.parametrize(
    ("tool", "args", "answer"),
    [
        ("query", {"query": "WITH b AS (SELECT id FROM ev LIMIT 1000) DELETE FROM ev WHERE id IN (SELECT id FROM b)"},
         '{"command": "DELETE", "rowCount": 1000}'),
        ("execute_sql", {"sql": "DELETE TOP (1000) FROM ev WHERE day < '2025-01-01'"}, "(1000 rows affected)"),
        ("mysql_query", {"sql": "DELETE FROM ev WHERE day < '2025-01-01' LIMIT 1000"}, "Rows affected: 1000"),
        ("Bash", {"command": "psql -c \"DELETE FROM ev WHERE id IN (SELECT id FROM ev LIMIT 1000)\""}, "DELETE 1000"),
        ("Bash", {"command": "docker exec db psql -U app -c 'DELETE FROM ev WHERE ctid IN "
                  "(SELECT ctid FROM ev LIMIT 1000)'"}, "DELETE 1000"),
        ("run_sql", {"sqlQuery": "UPDATE ev SET done = 1 WHERE done = 0 LIMIT 500"}, '{"affectedRows": 500}'),
    ],
)  # fmt: skip
async def test_batches_of_every_database_are_progress(
    make: Make, anyio_backend: str, tool: str, args: dict[str, str], answer: str
) -> None:
    run = make()
    for _ in range(6):
        await run.do(tool, args, answer)
    assert run.actions == []


async def test_a_batch_that_never_runs_out_is_advised_once_and_never_denied(make: Make, anyio_backend: str) -> None:
    """Its WHERE still matches the rows it changed: it answers alike for ever."""
    run = make()
    update = {"sql": "UPDATE jobs SET attempts = attempts + 1 WHERE status = 'failed' LIMIT 100"}
    for _ in range(30):
        await run.do("execute_sql", update, "100 rows affected")
    assert run.actions == [(20, "remind")]
    assert "check that each run changes rows the next one no longer matches" in run.texts[0]


async def test_reads_in_bursts_between_sleeps_are_still_denied(make: Make, anyio_backend: str) -> None:
    """A wait lets one check through; the same read made again right after
    it is a repeat again, so a loop that sleeps between bursts is stopped."""
    run = make()
    for _ in range(5):
        await run.do("Read", {"file_path": "/r/a.py"}, "def login(user):\n    return check(user)\n")
        await run.do("Read", {"file_path": "/r/a.py"}, "def login(user):\n    return check(user)\n")
        await run.do("Bash", {"command": "sleep 5"}, "", seconds=5)
    assert "halt" in {kind for _, kind in run.actions}


async def test_a_user_asking_to_keep_watching_leaves_file_reads_and_searches_judged(
    make: Make, anyio_backend: str
) -> None:
    run = make()
    await run.user("main", "Keep polling order 1042 until it ships.")
    for _ in range(3):
        await run.do("Read", {"file_path": "/r/a.py"}, "x = 1")
    for _ in range(3):
        await run.do("search_docs", {"query": "shipping"}, "3 articles: returns, refunds, tracking")
    assert run.actions == [(3, "deny"), (6, "deny")]


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/r/orders.py", 'def ship(self):\n    self.order_status = "processing"\n'),
        ("/r/worker.py", 'log.info("status: uploading %s", name)\n'),
    ],
)
async def test_a_state_written_in_source_code_is_no_poll(
    make: Make, anyio_backend: str, path: str, content: str
) -> None:
    run = make()
    for _ in range(3):
        await run.do("Read", {"file_path": path}, content)
    assert run.actions == [(3, "deny")]


async def test_a_status_file_whose_only_change_is_its_heartbeat_is_a_stalled_poll(
    make: Make, anyio_backend: str
) -> None:
    """A stuck job keeps stamping its status file: the time is no news."""
    run = make()
    for n in range(15):
        status = f'{{"status": "running", "step": 1200, "updated_at": "2026-12-06T03:{n:02d}:00Z"}}'
        await run.do("Read", {"file_path": "/work/run/status.json"}, status, seconds=2)
    assert ("deny" in {kind for _, kind in run.actions}, run.actions[0]) == (True, (4, "remind"))


@pytest.mark.parametrize(
    "status",
    [
        "runner status: running\nprocessing job {n} of 40",
        "status: running, processed {n}s of 120s of video",
        '{{"state": "uploading", "elapsed": "{n}m", "remaining": "{left}m"}}',
    ],
)
async def test_a_status_file_whose_step_moves_on_is_a_poll_making_progress(
    make: Make, anyio_backend: str, status: str
) -> None:
    run = make()
    for n in range(15):
        await run.do("Read", {"file_path": "/work/runner.txt"}, status.format(n=n, left=40 - n), seconds=7)
    assert run.actions == []


@pytest.mark.parametrize(
    "status",
    ["state: running, last heartbeat {n} seconds ago", "state: running for {n}m{n}s", "state: running, uptime {n}s"],
)
async def test_a_status_file_whose_age_alone_moves_is_a_stalled_poll(
    make: Make, anyio_backend: str, status: str
) -> None:
    run = make()
    for n in range(15):
        await run.do("Read", {"file_path": "/work/run/status.txt"}, status.format(n=n + 1), seconds=7)
    assert "deny" in {kind for _, kind in run.actions}


async def test_a_patient_poll_told_a_wait_is_not_told_it_again_after_each_news(make: Make, anyio_backend: str) -> None:
    """Codex's ``write_stdin`` waiting its longest (30 s) on a benchmark
    that prints a line every few minutes: one nudge, not one per stall."""
    run = make()
    for line in range(5):
        for _ in range(6):
            await run.do(
                "write_stdin", {"session_id": 7, "chars": ""}, f"Output:\n[result] case {line} done", seconds=34
            )
    assert run.actions == [(4, "remind")]


async def test_a_poll_never_told_a_wait_is_nudged_after_news_as_any_poll(make: Make, anyio_backend: str) -> None:
    """Polled a minute apart it needed no nudge; fast after news, it is
    nudged from the fourth unchanged poll as ever."""
    run = make()
    for _ in range(6):
        await run.do("BashOutput", {"bash_id": "b1"}, "building...", seconds=65)
    assert run.actions == []
    for _ in range(6):
        await run.do("BashOutput", {"bash_id": "b1"}, "linking...", seconds=2)
    assert run.actions[0] == (10, "remind")


async def test_after_an_idle_gap_a_poll_is_told_each_wait_again(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(8):
        await run.do("BashOutput", {"bash_id": "b1"}, "building...", seconds=2)
    told = len(run.actions)
    await run.do("BashOutput", {"bash_id": "b1"}, "done", seconds=1000)  # much later: another build
    for _ in range(4):
        await run.do("BashOutput", {"bash_id": "b1"}, "building again...", seconds=2)
    assert "wait about 5 seconds" in run.texts[told]


async def test_a_record_with_a_status_of_another_service_is_no_failure(make: Make, anyio_backend: str) -> None:
    run = make()
    for _ in range(3):
        await run.do(
            "get_component", {"name": "payments"}, '{"status": 503, "component": "payments", "since": "09:12"}'
        )
    assert run.actions == [(3, "deny")]
