"""Write the detection benchmark's synthetic sessions and their labels.

    python -m benchmarks.detection.build

Each scenario below is a short agent session, written as a real session log
(``scenarios/NAME.jsonl``, through a real bus and session log, no guard
attached) with its repetitive stretches labelled ``loop``, ``legit`` or
``unclear`` by what the agent's user would want, and why. The labels go to
``scenarios.toml``. Both files are data: the scorer (``run.py``) reads them;
this script is only how they were made.

A loop: the same call three or more times with the same or an equivalent
result and nothing changed in between, a cycle with unchanged results, or
the same failure again. Legit: paging, polling whose output changes,
edit→run cycles, a retry that then succeeds, distinct arguments.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from bus import Agent, AgentStatus, Bus, SessionLog, ToolCall, ToolResult, UserMessage
from bus.testing import FakeClock

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
LABELS = HERE / "scenarios.toml"


class Session:
    """One scripted agent session; ``stretch`` marks the calls it wraps."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.clock = FakeClock()
        self.bus = Bus(clock=self.clock)
        self.log = SessionLog(SCENARIOS / f"{name}.jsonl", session=name, clock=self.clock).attach(self.bus)
        self.agent = Agent("main")
        self.calls = 0
        self.step = 0
        self._ids = itertools.count(1)
        self.stretches: list[dict[str, Any]] = []

    async def start(self, task: str) -> None:
        await self.bus.publish(AgentStatus(agent=self.agent, status="started"))
        await self.user(task)

    async def user(self, text: str) -> None:
        await self.bus.publish(UserMessage(agent=self.agent, text=text))

    async def call(
        self, tool: str, args: Any, content: str = "ok", *, error: bool = False, seconds: float = 3.0
    ) -> None:
        self.clock.advance(seconds)
        self.step += 1
        self.calls += 1
        call = ToolCall(agent=self.agent, call_id=f"c{next(self._ids)}", step=self.step, tool=tool, args=args)
        await self.bus.decide(call)
        await self.bus.publish(ToolResult.answering(call, content, is_error=error))

    @contextmanager
    def stretch(self, label: str, kind: str, reason: str, *, period: int = 1) -> Iterator[None]:
        first = self.calls + 1
        yield
        self.stretches.append(
            {
                "file": f"{self.name}.jsonl",
                "calls": [first, self.calls],
                "label": label,
                "kind": kind,
                "period": period,
                "reason": reason,
            }
        )

    def close(self) -> None:
        self.log.close()


Script = Callable[[Session], Awaitable[None]]
_SCRIPTS: dict[str, Script] = {}


def scenario(fn: Script) -> Script:
    _SCRIPTS[fn.__name__.lstrip("_")] = fn
    return fn


def _bash(command: str, description: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"command": command}
    if description is not None:
        args["description"] = description
    return args


# ------------------------------------------------------------------ polling


@scenario
async def _bashoutput_install_advances(s: Session) -> None:
    await s.start("install the dependencies and run the test suite")
    await s.call(
        "Bash", {"command": "npm ci", "run_in_background": True}, "Command running in background with ID: bash_1"
    )
    with s.stretch("legit", "poll", "BashOutput on a background install whose output grows on every poll"):
        lines: list[str] = []
        for n in range(8):
            lines.append(f"added {40 * (n + 1)} packages in {n + 2}s")
            await s.call(
                "BashOutput",
                {"bash_id": "bash_1"},
                "<status>running</status>\n<stdout>\n" + "\n".join(lines) + "\n</stdout>",
                seconds=5,
            )
    await s.call("BashOutput", {"bash_id": "bash_1"}, "<status>completed</status>\n<exit_code>0</exit_code>", seconds=5)
    await s.call("Bash", _bash("npm test", "Run the tests"), "42 passing")


@scenario
async def _bashoutput_running_spinner(s: Session) -> None:
    await s.start("build the docker image")
    await s.call("Bash", {"command": "docker build -t app .", "run_in_background": True}, "running with ID: bash_7")
    with s.stretch(
        "unclear",
        "poll",
        "BashOutput of a running build polled every 10 s: only its spinner and elapsed time change; "
        "backing off is wanted, a denial is not",
    ):
        frames = "⠋⠙⠹⠸⠼⠴"
        for n in range(5):
            await s.call(
                "BashOutput",
                {"bash_id": "bash_7"},
                f"<status>running</status>\n<stdout>\n#8 {frames[n]} RUN pip install -r requirements.txt "
                f"{12.5 * (n + 1):.1f}s\n</stdout>",
                seconds=10,
            )
        await s.call("BashOutput", {"bash_id": "bash_7"}, "<status>completed</status>\n<exit_code>0</exit_code>")


@scenario
async def _codex_write_stdin_polling(s: Session) -> None:
    await s.start("run the integration tests")
    await s.call(
        "exec_command",
        {"cmd": ["bash", "-lc", "pytest tests/integration -x"], "yield_time_ms": 10000},
        "Process running with session ID 41932\nWall time: 10.0 seconds\nOutput:\n....",
    )
    with s.stretch("legit", "poll", "Codex write_stdin with empty input polling an exec session; output advances"):
        dots = "...."
        for n in range(7):
            dots += "." * (n + 2)
            await s.call(
                "write_stdin",
                {"session_id": 41932, "chars": "", "yield_time_ms": 10000},
                f"Process running with session ID 41932\nWall time: {10.0 * (n + 2):.1f} seconds\nOutput:\n{dots}",
                seconds=10,
            )
    await s.call(
        "write_stdin",
        {"session_id": 41932, "chars": "", "yield_time_ms": 10000},
        "Process exited with code 0\nWall time: 95.3 seconds\nOutput:\n62 passed",
    )


@scenario
async def _codex_poll_silent_process(s: Session) -> None:
    await s.start("start the dev server and check it comes up")
    await s.call(
        "exec_command",
        {"cmd": ["bash", "-lc", "npm run dev"], "yield_time_ms": 1000},
        "Process running with session ID 7781\nWall time: 1.0 seconds\nOutput:\n",
    )
    with s.stretch(
        "unclear",
        "poll",
        "write_stdin polls of a process that prints nothing: backing off is wanted, a denial is not",
    ):
        for n in range(6):
            await s.call(
                "write_stdin",
                {"session_id": 7781, "chars": "", "yield_time_ms": 1000},
                f"Process running with session ID 7781\nWall time: {1.0 + n * 1.5:.1f} seconds\nOutput:\n",
                seconds=2,
            )


@scenario
async def _process_output_grows(s: Session) -> None:
    await s.start("run the migration and tell me when it is done")
    await s.call("process", {"action": "start", "command": "./migrate.sh"}, "started pid 3318")
    with s.stretch("legit", "poll", "a process poll whose output grows each time"):
        for n in range(6):
            rows = "\n".join(f"migrated table {t}" for t in range(n + 1))
            await s.call("process", {"action": "poll", "pid": 3318}, f"pid 3318 running\n{rows}", seconds=8)
    await s.call("process", {"action": "poll", "pid": 3318}, "pid 3318 exited 0")


@scenario
async def _gh_run_watch_changes(s: Session) -> None:
    await s.start("push the fix and wait for CI")
    await s.call("Bash", _bash("git push"), "To github.com:org/app.git\n   1a2b3c4..5d6e7f8  fix -> fix")
    with s.stretch("legit", "poll", "gh run view: the job list advances step by step, then completes"):
        steps = ["queued", "in_progress (setup)", "in_progress (build)", "in_progress (test)", "completed: success"]
        for n, state in enumerate(steps):
            await s.call(
                "Bash",
                _bash("gh run view 9912", f"Check CI status ({n + 1})"),
                f"fix · 9912\nTriggered via push about {n + 1} minutes ago\nstatus: {state}",
                seconds=40,
            )


@scenario
async def _kubectl_pending_forever(s: Session) -> None:
    await s.start("deploy to staging and confirm the pod is up")
    await s.call("Bash", _bash("kubectl apply -f deploy.yaml"), "deployment.apps/api configured")
    with s.stretch(
        "loop",
        "stalled poll",
        "kubectl get pods 14 times in 40 s, always the same Pending pod: the agent polls fast and never looks "
        "at why it is pending",
    ):
        for n in range(14):
            await s.call(
                "Bash",
                _bash("kubectl get pods -l app=api"),
                f"NAME                   READY   STATUS    RESTARTS   AGE\napi-7d9c6b8f5d-x2x9q   0/1     Pending   0"
                f"          {3 * n + 3}s",
                seconds=3,
            )


@scenario
async def _tail_log_unchanged(s: Session) -> None:
    await s.start("wait for the nightly export to finish")
    with s.stretch(
        "loop",
        "stalled poll",
        "tail of a log that stopped changing, polled 12 times in a minute; the writer had crashed",
    ):
        for _ in range(12):
            await s.call(
                "Bash",
                _bash("tail -n 5 /var/log/export.log"),
                "2026-11-30T23:59:01Z rows=120000\n2026-11-30T23:59:02Z flushing",
                seconds=5,
            )


@scenario
async def _sleep_then_check(s: Session) -> None:
    await s.start("wait for the release build, then publish")
    with s.stretch("legit", "poll", "sleep 30, then the build status, until it is done: the status advances"):
        for state in ("queued", "building 20%", "building 60%", "building 90%", "done"):
            await s.call("Bash", _bash("sleep 30"), "", seconds=30)
            await s.call("Bash", _bash("./ci status release-7"), f"release-7: {state}")


@scenario
async def _openhands_empty_command_reads_output(s: Session) -> None:
    await s.start("run the full test suite")
    await s.call("execute_bash", {"command": "make test", "is_input": False}, "[Command still running...]")
    with s.stretch("legit", "poll", "OpenHands reading a running command's output with an empty command"):
        for n in range(6):
            await s.call("execute_bash", {"command": "", "is_input": True}, f"ok {n * 40} tests\n[still running]")


@scenario
async def _pytest_failing_other_tests(s: Session) -> None:
    await s.start("find which tests fail and why")
    await s.call(
        "Bash", _bash("pytest -q"), "Exit code 1\nFAILED tests/test_a.py::test_x - KeyError\n3 failed", error=True
    )
    with s.stretch("legit", "distinct args", "running one failing test after another to read each failure"):
        for name, error in (("test_x", "KeyError"), ("test_y", "TypeError"), ("test_z", "ValueError")):
            await s.call(
                "Bash",
                _bash(f"pytest -q tests/test_a.py::{name}"),
                f"Exit code 1\nFAILED tests/test_a.py::{name} - {error}: bad input\n1 failed in 0.2s",
                error=True,
            )
        await s.call("Bash", _bash("ls tests"), "test_a.py\ntest_b.py")
        await s.call("Bash", _bash("git log --oneline -3"), "5d6e7f8 fix\n1a2b3c4 add")


# ------------------------------------------------------------------- paging


@scenario
async def _browser_scrolls(s: Session) -> None:
    await s.start("find the pricing table on the vendor's site")
    await s.call("browser_navigate", {"url": "https://vendor.example/docs"}, "Page: Docs home")
    with s.stretch("legit", "paging", "scrolling a page down ten times, new content each time"):
        for n in range(10):
            await s.call("browser_scroll", {"direction": "down"}, f"Visible: section {n + 2} of the docs page")


@scenario
async def _read_file_in_pages(s: Session) -> None:
    await s.start("summarise the long design document")
    with s.stretch("legit", "paging", "reading one file page by page: the offset changes every call"):
        for n in range(8):
            await s.call("Read", {"file_path": "docs/design.md", "offset": 1 + 200 * n, "limit": 200}, f"page {n}")


@scenario
async def _search_results_pages(s: Session) -> None:
    await s.start("list every open issue about the importer")
    with s.stretch("legit", "paging", "an API paged with a cursor: distinct arguments, distinct results"):
        for n in range(6):
            await s.call(
                "github_search_issues",
                {"query": "importer is:open", "page": n + 1},
                f"issues {10 * n + 1}-{10 * n + 10}",
            )


# ------------------------------------------------------------------ retries


@scenario
async def _retry_after_404s(s: Session) -> None:
    await s.start("fetch the release notes")
    with s.stretch("legit", "retry", "two identical 404s while the release publishes, then success"):
        for _ in range(2):
            await s.call(
                "WebFetch",
                {"url": "https://example.org/releases/v2.json", "prompt": "list the changes"},
                "Request failed with status code 404",
                error=True,
                seconds=20,
            )
        await s.call(
            "WebFetch",
            {"url": "https://example.org/releases/v2.json", "prompt": "list the changes"},
            "v2: new importer, faster replay",
        )


@scenario
async def _retry_through_a_deploy(s: Session) -> None:
    await s.start("check the new endpoint once the deploy is live")
    with s.stretch("legit", "retry", "three 503s while the deploy rolls out, then the endpoint answers"):
        for _ in range(3):
            await s.call(
                "Bash",
                _bash("curl -fsS https://staging.example.org/api/v2/items"),
                "curl: (22) The requested URL returned error: 503",
                error=True,
                seconds=15,
            )
        await s.call("Bash", _bash("curl -fsS https://staging.example.org/api/v2/items"), '{"items": []}')


@scenario
async def _flaky_test_retry(s: Session) -> None:
    await s.start("the deploy step failed with a timeout; try again")
    with s.stretch("legit", "retry", "a network timeout retried once, then success"):
        await s.call("Bash", _bash("./deploy.sh staging"), "Error: ETIMEDOUT connecting to 10.0.0.4:443", error=True)
        await s.call("Bash", _bash("./deploy.sh staging"), "deployed build 5d6e7f8 to staging in 41s")


@scenario
async def _same_404_again_and_again(s: Session) -> None:
    await s.start("fetch the API reference")
    with s.stretch("loop", "same failure", "the same URL fetched five times, the same 404 every time"):
        for _ in range(5):
            await s.call(
                "WebFetch",
                {"url": "https://example.org/api/v3/reference", "prompt": "extract endpoints"},
                "Request failed with status code 404",
                error=True,
            )


# ------------------------------------------------------------ re-reads


@scenario
async def _reread_after_external_change(s: Session) -> None:
    await s.start("watch config.yaml while I edit it and tell me when the port is 8080")
    await s.call("Read", {"file_path": "config.yaml"}, "port: 8000\nhost: a")
    await s.call("Read", {"file_path": "main.py"}, "import app")
    await s.call("Read", {"file_path": "config.yaml"}, "port: 8000\nhost: a")
    await s.user("I changed it now")
    await s.call("Read", {"file_path": "main.py"}, "import app")
    with s.stretch(
        "legit",
        "re-read",
        "a re-read after the file changed on disk (the user edited it), after an earlier back-and-forth",
    ):
        await s.call("Read", {"file_path": "config.yaml"}, "port: 8080\nhost: a")
        await s.call("Read", {"file_path": "main.py"}, "import app\nimport config")
        await s.call("Read", {"file_path": "config.yaml"}, "port: 8080\nhost: b")


@scenario
async def _reread_after_a_failed_edit(s: Session) -> None:
    await s.start("rename the config flag")
    with s.stretch("legit", "re-read", "the file re-read to copy the exact text after an edit failed, then the edit"):
        await s.call("Read", {"file_path": "cli.py"}, "    parser.add_argument('--cfg')")
        await s.call(
            "Edit",
            {"file_path": "cli.py", "old_string": 'add_argument("--cfg")', "new_string": 'add_argument("--config")'},
            "<tool_use_error>String to replace not found in file.</tool_use_error>",
            error=True,
        )
        await s.call("Read", {"file_path": "cli.py"}, "    parser.add_argument('--cfg')")
        await s.call(
            "Edit",
            {"file_path": "cli.py", "old_string": "add_argument('--cfg')", "new_string": "add_argument('--config')"},
            "The file cli.py has been updated.",
        )
        await s.call("Bash", _bash("pytest -q"), "9 passed in 0.4s")


@scenario
async def _edit_then_reread(s: Session) -> None:
    await s.start("fix the off-by-one in pager.py")
    with s.stretch("legit", "edit-run", "read, edit, re-read to check, run tests: each edit different"):
        for n in range(4):
            await s.call("Read", {"file_path": "pager.py"}, f"version {n}")
            await s.call("Edit", {"file_path": "pager.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}, "updated")
            await s.call("Bash", _bash("pytest -q tests/test_pager.py"), f"{4 - n} failed, {n + 3} passed in 0.4s")


@scenario
async def _edit_run_cycle_sed(s: Session) -> None:
    await s.start("make the build pass")
    with s.stretch("legit", "edit-run", "shell-only edit→run cycle: sed -i, then the build, five times"):
        for n in range(5):
            await s.call("bash", _bash(f"sed -i 's/x{n}/x{n + 1}/' src/lib.rs"), "")
            await s.call("bash", _bash("cargo build 2>&1 | tail -3"), f"error[E0308]: mismatched types (fix {n})")


# ---------------------------------------------------- loops of one call


@scenario
async def _same_grep_ten_times(s: Session) -> None:
    await s.start("find where the config is loaded")
    await s.call("Glob", {"pattern": "src/**/*.py"}, "src/a.py\nsrc/b.py")
    with s.stretch("loop", "repeat", "the same grep ten times, the same empty result"):
        for _ in range(10):
            await s.call("Grep", {"pattern": "load_config", "path": "src"}, "No matches found")


@scenario
async def _date_31_times(s: Session) -> None:
    await s.start("what time is it in UTC?")
    with s.stretch("loop", "repeat", "`date` run again and again: only the clock changes, the answer is known"):
        for n in range(31):
            await s.call("Bash", _bash("date -u"), f"Tue Dec  1 00:{11 + n // 60:02d}:{(10 + 2 * n) % 60:02d} UTC 2026")


@scenario
async def _description_changes_each_call(s: Session) -> None:
    await s.start("check the test suite")
    with s.stretch(
        "loop",
        "cosmetic args",
        "the same pytest run six times; only Claude Code's Bash `description` is reworded each time",
    ):
        for n in range(6):
            await s.call(
                "Bash",
                _bash(
                    "pytest -q", ["Run tests", "Run the tests again", "Re-run tests", "Check tests", "Tests", "Run"][n]
                ),
                "1 failed, 41 passed in 3.21s",
            )


@scenario
async def _task_progress_field(s: Session) -> None:
    await s.start("list the routes")
    with s.stretch("loop", "cosmetic args", "Cline's task_progress checklist rewritten on every identical read"):
        for n in range(5):
            await s.call(
                "read_file",
                {"path": "src/routes.ts", "task_progress": f"- [x] step {n}\n- [ ] step {n + 1}"},
                "export const routes = []",
            )


@scenario
async def _intent_field(s: Session) -> None:
    await s.start("check the lockfile")
    with s.stretch("loop", "cosmetic args", "a harness __intent field worded anew on every identical call"):
        for n in range(5):
            await s.call(
                "read",
                {"path": "package-lock.json", "__intent": f"verify the lockfile ({n})"},
                '{"lockfileVersion": 3}',
            )


@scenario
async def _three_identical_writes(s: Session) -> None:
    await s.start("create the settings module")
    with s.stretch("loop", "identical writes", "the same file written with the same content three times"):
        for _ in range(3):
            await s.call(
                "Write", {"file_path": "settings.py", "content": "DEBUG = False\n"}, "File written: settings.py"
            )


@scenario
async def _same_write_same_failure(s: Session) -> None:
    await s.start("make test_f pass")
    with s.stretch(
        "loop",
        "identical writes",
        "write the same content, run the same failing test, five times",
        period=2,
    ):
        for _ in range(5):
            await s.call("write", {"path": "a.py", "content": "def f():\n    return 1\n"}, "wrote a.py")
            await s.call("bash", _bash("pytest -q"), "1 failed in 0.12s")


# ------------------------------------------------------------ cycles


@scenario
async def _period_two_cycle(s: Session) -> None:
    await s.start("find why the service does not start")
    with s.stretch("loop", "cycle", "ls and the same log read alternating, nothing changes", period=2):
        for _ in range(5):
            await s.call("terminal", {"command": "ls"}, "app.py\nservice.log")
            await s.call("file_read", {"path": "service.log"}, "ERROR bind: address in use")


@scenario
async def _period_five_cycle(s: Session) -> None:
    await s.start("figure out which module registers the handler")
    calls = [
        ("Grep", {"pattern": "register_handler"}, "src/a.py:3"),
        ("Read", {"file_path": "src/a.py"}, "def register_handler(): ..."),
        ("Grep", {"pattern": "handler ="}, "src/b.py:9"),
        ("Read", {"file_path": "src/b.py"}, "handler = make()"),
        ("Bash", _bash("git log -1 --format=%h src/b.py"), "5d6e7f8"),
    ]
    with s.stretch("loop", "cycle", "the same five calls cycled three times, every result unchanged", period=5):
        for tool, args, out in calls * 3:
            await s.call(tool, args, out)


@scenario
async def _parallel_batch_repeated(s: Session) -> None:
    await s.start("compare the two implementations")
    with s.stretch("loop", "cycle", "both files re-read on every later turn with no change", period=2):
        for _ in range(5):
            await s.call("Read", {"file_path": "a.py"}, "A")
            await s.call("Read", {"file_path": "b.py"}, "B")


_SWE_AGENT_STATE = "\n(Open file: /w/src/Deser.java)\n(Current directory: /w)\nbash-$"


@scenario
async def _swe_agent_text_interface_cycle(s: Session) -> None:
    await s.start("find where null values are skipped")
    calls = [
        ("open", "open src/Deser.java\n", "[File: /w/src/Deser.java (2200 lines total)]\n1:package x;"),
        ("search_file", 'search_file "Nulls.SKIP"\n', 'Found 2 matches for "Nulls.SKIP" in /w/src/Deser.java'),
        ("goto", "goto 2110\n", "[File: /w/src/Deser.java (2200 lines total)]\n2110:    if (skip) {"),
        ("search_dir", 'search_dir "Nulls.SKIP" src\n', 'Found 7 matches for "Nulls.SKIP" in /w/src'),
    ]
    with s.stretch(
        "loop",
        "cycle",
        "SWE-agent's text interface (each call named after its command) going round open, search_file, goto "
        "and search_dir three times, every result unchanged",
        period=4,
    ):
        for tool, command, out in calls * 3:
            await s.call(tool, {"command": command}, out + _SWE_AGENT_STATE)


@scenario
async def _swe_agent_edit_and_rerun(s: Session) -> None:
    await s.start("make the reproduction pass")
    reason = "SWE-agent edits the file and re-runs the script; its output changes each time"
    with s.stretch("legit", "edit-run", reason):
        for n in range(4):
            await s.call(
                "edit",
                {"command": f"edit 12:12\n    return parse(value, {n})\nend_of_edit\n"},
                f"[File: /w/repro.py (30 lines total)]\n12:    return parse(value, {n})" + _SWE_AGENT_STATE,
            )
            await s.call(
                "python",
                {"command": "python repro.py\n"},
                f"AssertionError: expected 4, got {n}" + _SWE_AGENT_STATE,
            )


@scenario
async def _swe_agent_rerun_between_shell_reads(s: Session) -> None:
    await s.start("find why the reproduction fails")
    reads = ["git log --oneline -3\n", "sed -n 10,40p repro.py\n", "cd /w && grep -rn parse src\n"]
    with s.stretch(
        "loop",
        "repeat",
        "SWE-agent re-runs the same script with the same output, only git log, sed -n and grep between",
    ):
        for n, command in enumerate(reads):
            failed = "AssertionError: expected 4, got 3" + _SWE_AGENT_STATE
            await s.call("python", {"command": "python repro.py\n"}, failed)
            await s.call(command.split()[0], {"command": command}, f"read {n}" + _SWE_AGENT_STATE)


@scenario
async def _locale_warning_ahead_of_test_runs(s: Session) -> None:
    await s.start("make the parser tests pass")
    warning = "bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8): No such file or directory\n"
    with s.stretch(
        "legit",
        "edit-run",
        "a container's locale warning ahead of every output; the tests run and pass one more each time",
    ):
        for n in range(5):
            await s.call("bash", {"command": "python -m pytest -q tests/test_parser.py"}, warning + f"{5 - n} failed")
            await s.call("bash", {"command": f"sed -i 's/x{n}/y{n}/' parser.py"}, warning)


# ----------------------------------------------------- failure streaks


@scenario
async def _shell_command_not_found(s: Session) -> None:
    await s.start("compile the reproduction")
    with s.stretch(
        "loop",
        "same failure",
        "javac is not installed: `javac: command not found` five times, shown without an exit status "
        "(only the shell's line counter changes)",
    ):
        for n in range(5):
            await s.call(
                "javac",
                {"command": "javac -cp .:lib/* Repro.java\n"},
                f"/bin/bash: line {50776 + 15 * n}: javac: command not found" + _SWE_AGENT_STATE,
            )


@scenario
async def _unknown_tool_varying_args(s: Session) -> None:
    await s.start("search the code base")
    with s.stretch("loop", "error streak", "an unknown tool called 11 times with different arguments"):
        for n in range(11):
            await s.call(
                "search_code",
                {"query": f"handler variant {n}"},
                f"Error: tool 'search_code' not found. Available tools: Read, Grep, Bash (request {n})",
                error=True,
            )


@scenario
async def _openhands_failed_str_replace(s: Session) -> None:
    await s.start("fix the parser")
    await s.call(
        "str_replace_editor", {"command": "view", "path": "/w/parser.c"}, "Here's the result of running `cat -n`"
    )
    with s.stretch(
        "loop",
        "failed edits",
        "OpenHands str_replace failing 10 times: old_str not found, recorded as ERROR: text without the error flag",
    ):
        for n in range(10):
            await s.call(
                "str_replace_editor",
                {"command": "str_replace", "path": "/w/parser.c", "old_str": f"return x{n};", "new_str": "return y;"},
                f"ERROR:\nNo replacement was performed, old_str `return x{n};` did not appear verbatim in /w/parser.c.",
            )


@scenario
async def _failed_edits_then_success(s: Session) -> None:
    await s.start("rename the helper")
    with s.stretch("legit", "retry", "two failed edits with different old strings, then one that applies"):
        for n in range(2):
            await s.call(
                "Edit",
                {"file_path": "util.py", "old_string": f"def helpr{n}(", "new_string": "def helper("},
                "<tool_use_error>String to replace not found in file.</tool_use_error>",
                error=True,
            )
        await s.call("Edit", {"file_path": "util.py", "old_string": "def helpr(", "new_string": "def helper("}, "ok")
        await s.call("Bash", _bash("pytest -q"), "12 passed in 0.31s")


@scenario
async def _make_fails_same_way(s: Session) -> None:
    await s.start("build the project")
    with s.stretch(
        "loop", "error streak", "the build fails with the same missing-directory error whatever make target is tried"
    ):
        for command in ("make", "make clean && make", "make -j4", "make all", "make release", "make -B"):
            await s.call(
                "execute_bash",
                {"command": f"cd /w/app && {command}"},
                "/bin/sh: 1: cd: can't cd to /w/app/build/release\nmake: *** [Makefile:41: build] Error 2",
                error=True,
            )


@scenario
async def _distinct_failing_greps(s: Session) -> None:
    await s.start("find any use of the old API")
    with s.stretch("legit", "distinct args", "greps for different names, each finding nothing (exit 1, no output)"):
        for name in ("oldApi", "old_api", "OldAPI", "legacyApi", "v1Client"):
            await s.call("execute_bash", {"command": f"grep -rn {name} src"}, "", error=True)


@scenario
async def _distinct_test_failures(s: Session) -> None:
    await s.start("get the suite green")
    with s.stretch("legit", "edit-run", "a test run between edits, failing differently as each fix lands"):
        for n in range(4):
            await s.call(
                "Edit", {"file_path": "m.py", "old_string": f"a{n}", "new_string": f"a{n + 1}"}, "The file was updated"
            )
            await s.call(
                "Bash",
                _bash("pytest -x -q"),
                f"FAILED tests/test_m.py::test_{n} - AssertionError\n1 failed, {n} passed",
                error=True,
            )


# --------------------------------------------------------- interjections


@scenario
async def _done_interjection(s: Session) -> None:
    await s.start("find the config loader")
    with s.stretch("loop", "interjection", "the same grep, with the user's bare 'Done' and 'Come on' between repeats"):
        await s.call("Grep", {"pattern": "load_config"}, "No matches found")
        await s.call("Grep", {"pattern": "load_config"}, "No matches found")
        await s.user("Done")
        await s.call("Grep", {"pattern": "load_config"}, "No matches found")
        await s.user("Come on")
        await s.call("Grep", {"pattern": "load_config"}, "No matches found")
        await s.call("Grep", {"pattern": "load_config"}, "No matches found")


@scenario
async def _please_continue_interjection(s: Session) -> None:
    await s.start("summarise the failing tests")
    with s.stretch(
        "loop", "interjection", "the runtime's canned 'please continue' between identical test runs does not reset"
    ):
        for _ in range(2):
            await s.call("Bash", _bash("pytest -q"), "3 failed, 9 passed in 1.02s")
            await s.user("please continue")
            await s.call("Bash", _bash("pytest -q"), "3 failed, 9 passed in 1.13s")


@scenario
async def _instruction_resets(s: Session) -> None:
    await s.start("grep for the loader")
    await s.call("Grep", {"pattern": "loader"}, "No matches found")
    await s.call("Grep", {"pattern": "loader"}, "No matches found")
    await s.user("I just pushed the loader on this branch; grep again")
    with s.stretch("legit", "re-read", "a grep repeated because the user says the code changed"):
        await s.call("Grep", {"pattern": "loader"}, "src/loader.py:1: def loader():")
        await s.call("Read", {"file_path": "src/loader.py"}, "def loader(): ...")


# ------------------------------------------------------- distinct work


@scenario
async def _distinct_reads(s: Session) -> None:
    await s.start("review the package")
    with s.stretch("legit", "distinct args", "twelve reads of twelve different files"):
        for n in range(12):
            await s.call("Read", {"file_path": f"src/module_{n}.py"}, "x = 1")


@scenario
async def _todo_updates(s: Session) -> None:
    await s.start("plan and do the refactor")
    with s.stretch("legit", "distinct args", "todo list updated after each step, each time different"):
        for n in range(5):
            await s.call("TodoWrite", {"todos": [{"content": f"step {k}", "done": k < n} for k in range(5)]}, "ok")
            await s.call("Edit", {"file_path": "r.py", "old_string": f"s{n}", "new_string": f"s{n + 1}"}, "updated")


async def _build_one(name: str, script: Script) -> list[dict[str, Any]]:
    session = Session(name)
    try:
        await script(session)
    finally:
        session.close()
    return session.stretches


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


async def _build() -> None:
    if SCENARIOS.exists():
        shutil.rmtree(SCENARIOS)
    SCENARIOS.mkdir(parents=True)
    lines = [
        "# Labelled stretches of the synthetic sessions in scenarios/ (written by build.py).",
        "# calls: first and last call number of the stretch (1-based, every call of the log);",
        "# period: calls of the first round, which are not wasted.",
        "",
    ]
    for name, script in sorted(_SCRIPTS.items()):
        for stretch in await _build_one(name, script):
            lines += [
                "[[stretch]]",
                f"file = {_toml_string(stretch['file'])}",
                f"calls = [{stretch['calls'][0]}, {stretch['calls'][1]}]",
                f"label = {_toml_string(stretch['label'])}",
                f"kind = {_toml_string(stretch['kind'])}",
                f"period = {stretch['period']}",
                f"reason = {_toml_string(stretch['reason'])}",
                "",
            ]
    LABELS.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    anyio.run(_build)
