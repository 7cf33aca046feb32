"""The ask command contract, against real executables written into tmp_path."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from guard import ASK_MODEL_ENV, AskCommand
from guard.policies.escalation import answer_by
from tests.conftest import AskScript
from tests.processes import children, running

pytestmark = pytest.mark.anyio

# A safety net so a broken kill cannot hang the suite; not a speed assertion.
_NEVER = 60


async def _gone(*pids: int) -> bool:
    """True once every pid has stopped running. A SIGKILL lands
    asynchronously, so this waits for it, within a generous bound."""
    with anyio.move_on_after(10):
        while any(running(pid) for pid in pids):
            await anyio.sleep(0.01)
    return not any(running(pid) for pid in pids)


async def _ask(command: Path | str, question: str = "what now?", **kwargs: int) -> tuple[str | None, str, bool]:
    ask = AskCommand(str(command), model="opus", timeout_ms=kwargs.pop("timeout_ms", 10_000), **kwargs)
    with anyio.fail_after(_NEVER):
        outcome = await ask.ask(question)
    return outcome.advice, outcome.reason, outcome.truncated


async def test_stdout_with_exit_zero_is_the_advice(ask_script: AskScript, anyio_backend: str) -> None:
    command = ask_script("echo '  Read src/cfg.py line 12; stop grepping.  '")
    assert await _ask(command) == ("Read src/cfg.py line 12; stop grepping.", "ok", False)


async def test_question_is_one_argv_element_with_no_shell_and_no_stdin(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    seen = tmp_path / "seen"
    command = ask_script(
        "import os, sys\n"
        f"seen = open({str(seen)!r}, 'w')\n"
        "seen.write(repr((sys.argv[1:], sys.stdin.read(), os.environ.get('ASK_MODEL'))))\n"
        "print('advice')",
        shebang=f"#!{sys.executable}",
    )
    question = 'line one\nit\'s $(touch pwned) `id` && "quoted" *'

    assert (await _ask(command, question))[0] == "advice"

    assert seen.read_text() == repr(([question], "", "opus"))
    assert not (tmp_path / "pwned").exists()
    assert ASK_MODEL_ENV == "ASK_MODEL"


async def test_non_zero_exit_is_unavailable_and_names_the_status(ask_script: AskScript, anyio_backend: str) -> None:
    command = ask_script("echo 'partial advice'\necho 'not logged in' >&2\nexit 1")
    assert await _ask(command) == (None, "exit status 1: not logged in", False)


async def test_exit_without_stderr_names_only_the_status(ask_script: AskScript, anyio_backend: str) -> None:
    assert await _ask(ask_script("exit 3")) == (None, "exit status 3", False)


async def test_death_by_signal_is_unavailable(ask_script: AskScript, anyio_backend: str) -> None:
    assert await _ask(ask_script("echo advice\nkill -9 $$")) == (None, "killed by signal 9", False)


async def test_empty_or_blank_output_is_unavailable(ask_script: AskScript, anyio_backend: str) -> None:
    assert await _ask(ask_script("true")) == (None, "empty output", False)
    assert await _ask(ask_script("printf '  \\n\\t\\n'", name="blank")) == (None, "empty output", False)


async def test_missing_command_is_unavailable(missing_ask_command: str, anyio_backend: str) -> None:
    assert await _ask(missing_ask_command) == (None, f"ask command not found: {missing_ask_command}", False)


@pytest.mark.parametrize(("model", "why"), [("opus\ud800", "surrogates not allowed"), ("o\x00", "embedded null byte")])
async def test_a_model_the_os_cannot_take_is_unavailable_and_leaves_no_process(
    model: str, why: str, ask_script: AskScript, anyio_backend: str
) -> None:
    command = ask_script("echo 'edit the file instead'")
    before = set(children(os.getpid()))
    with anyio.fail_after(_NEVER):
        outcome = await AskCommand(str(command), model=model, timeout_ms=10_000).ask("what now?")
    assert outcome.advice is None
    assert outcome.reason.startswith(f"ask command could not start: {command}: ")
    assert why in outcome.reason
    with anyio.move_on_after(10):
        while set(children(os.getpid())) - before:  # the ask's watchdog, told there is nothing to guard
            await anyio.sleep(0.01)
    assert set(children(os.getpid())) - before == set()


@pytest.mark.parametrize(("key", "value"), [("timeout_ms", -5), ("timeout_ms", "45000"), ("max_output", 0)])
def test_a_limit_that_is_no_positive_count_is_refused_naming_it(key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"AskCommand\({key}=\.\.\.\) must be an integer >= 1, got "):
        AskCommand("ask", model="opus", **{"timeout_ms": 1000, key: value})


async def test_non_executable_file_is_unavailable(ask_script: AskScript, anyio_backend: str) -> None:
    command = ask_script("echo advice")
    command.chmod(0o644)
    assert await _ask(command) == (None, f"ask command is not executable: {command}", False)


async def test_file_that_cannot_be_executed_is_unavailable(tmp_path: Path, anyio_backend: str) -> None:
    command = tmp_path / "garbage"
    command.write_bytes(b"\x7fELF not really")
    command.chmod(0o755)
    advice, reason, _ = await _ask(command)
    assert advice is None
    assert reason.startswith(f"ask command could not start: {command}: ")


async def test_hang_past_timeout_kills_the_whole_process_group(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    pids = tmp_path / "pids"
    command = ask_script(f"sleep 300 &\necho $$ $! > {pids}\nwait")

    advice, reason, _ = await _ask(command, timeout_ms=500)

    assert (advice, reason) == (None, "timed out after 500 ms (process group killed)")
    assert await _gone(*(int(p) for p in pids.read_text().split()))


async def test_an_ask_ends_when_its_answer_is_due(ask_script: AskScript, tmp_path: Path, anyio_backend: str) -> None:
    """A server answering a hook that waits a few seconds: the ask ends
    then, whatever its own timeout, and its process with it."""
    pids = tmp_path / "pids"
    command = ask_script(f"echo $$ > {pids}\nsleep 300")
    with answer_by(time.monotonic() + 1.2):
        advice, reason, _ = await _ask(command, timeout_ms=60_000)
    assert advice is None
    assert reason.startswith("timed out after 1"), reason
    assert reason.endswith(" ms (process group killed)")
    assert await _gone(int(pids.read_text()))


async def test_an_ask_due_in_under_a_second_is_not_started(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = ask_script(f"touch {tmp_path / 'asked'}\necho advice")
    with answer_by(time.monotonic() + 60), answer_by(time.monotonic() + 0.5):  # the earliest holds
        advice, reason, _ = await _ask(command)
    assert advice is None
    assert reason.startswith("not asked: its answer is due before an ask could end")
    assert not (tmp_path / "asked").exists()
    assert await _ask(command) == ("advice", "ok", False), "out of the block, asks run to their own timeout"


DAEMON = (
    # a grandchild that leaves the ask's process group and session, as a
    # daemonizing tool does: setsid, then a double fork
    "import os, sys, time\n"
    "if os.fork():\n    sys.exit(0)\n"
    "os.setsid()\n"
    "if os.fork():\n    sys.exit(0)\n"
    "open(sys.argv[1], 'a').write(f'{os.getpid()}\\n')\n"
    "time.sleep(300)\n"
)


@pytest.mark.parametrize("ending", ["timeout", "answer"])
async def test_a_grandchild_that_calls_setsid_dies_with_the_ask(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str, ending: str
) -> None:
    pids = tmp_path / "pids"
    daemon = tmp_path / "daemon.py"
    daemon.write_text(DAEMON)
    then = "sleep 300" if ending == "timeout" else "echo advice"
    command = ask_script(
        f"{sys.executable} {daemon} {pids}\nsetsid sleep 300 &\necho $! >> {pids}\n"
        f"while [ $(wc -l < {pids}) -lt 2 ]; do sleep 0.01; done\n{then}"
    )
    advice, reason, _ = await _ask(command, timeout_ms=2000 if ending == "timeout" else 30_000)
    assert (advice, reason) == (
        (None, "timed out after 2000 ms (process group killed)") if ending == "timeout" else ("advice", "ok")
    )
    escaped = [int(p) for p in pids.read_text().split()]
    assert len(escaped) == 2
    assert await _gone(*escaped)


async def test_background_child_holding_stdout_does_not_delay_the_answer(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    pids = tmp_path / "pids"
    command = ask_script(f"sleep 300 &\necho $! > {pids}\necho 'use the cached answer'")

    assert await _ask(command, timeout_ms=30_000) == ("use the cached answer", "ok", False)
    assert await _gone(int(pids.read_text()))


async def test_ten_megabytes_of_output_are_capped(ask_script: AskScript, anyio_backend: str) -> None:
    command = ask_script("head -c 10000000 /dev/zero | tr '\\000' a")

    advice, reason, truncated = await _ask(command, max_output=1000)

    assert reason == "ok"
    assert truncated
    assert advice == "a" * 1000 + "\n… (+9999000 more bytes of output dropped)"


async def test_non_utf8_output_is_decoded_with_replacement(ask_script: AskScript, anyio_backend: str) -> None:
    command = ask_script("printf 'caf\\351 \\377advice\\n'")
    assert await _ask(command) == ("caf\ufffd \ufffdadvice", "ok", False)


async def test_cancelled_ask_kills_the_process_group(ask_script: AskScript, tmp_path: Path, anyio_backend: str) -> None:
    pids = tmp_path / "pids"
    command = ask_script(f"sleep 300 &\necho $$ $! > {pids}\nwait")
    ask = AskCommand(str(command), model="opus", timeout_ms=60_000)

    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(ask.ask, "q")
            while not pids.exists() or not pids.read_text().strip():
                await anyio.sleep(0.01)
            group.cancel_scope.cancel()

    assert await _gone(*(int(p) for p in pids.read_text().split()))


async def test_tilde_in_command_is_the_home_directory(
    ask_script: AskScript, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    ask_script("echo from home", name="ask-home")
    monkeypatch.setenv("HOME", str(tmp_path))

    ask = AskCommand("~/ask-home", model="opus", timeout_ms=10_000)

    assert ask.command == os.path.join(str(tmp_path), "ask-home")
    assert (await ask.ask("q")).advice == "from home"


async def test_long_stderr_keeps_only_its_last_line(ask_script: AskScript, anyio_backend: str) -> None:
    command = ask_script('i=0; while [ $i -lt 500 ]; do echo "noise line $i" >&2; i=$((i+1)); done; exit 2')
    assert await _ask(command) == (None, "exit status 2: noise line 499", False)


async def test_outcome_reports_wall_time(ask_script: AskScript, anyio_backend: str) -> None:
    outcome = await AskCommand(str(ask_script("echo ok")), model="m", timeout_ms=10_000).ask("q")
    assert outcome.ok
    assert outcome.elapsed_ms > 0


async def test_nul_bytes_in_the_question_do_not_stop_the_ask(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    seen = tmp_path / "seen"
    command = ask_script(f"printf '%s' \"$1\" > {seen}\necho advice")
    assert (await _ask(command, "binary\x00output"))[0] == "advice"
    assert seen.read_text() == "binary\ufffdoutput"


async def test_a_bare_name_is_looked_up_on_path(
    ask_script: AskScript, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    command = ask_script("echo found on PATH", name="my-ask")
    monkeypatch.setenv("PATH", f"{command.parent}{os.pathsep}{os.environ['PATH']}")
    assert await _ask("my-ask") == ("found on PATH", "ok", False)
    assert await _ask("no-such-ask-command") == (None, "ask command not found: no-such-ask-command", False)
