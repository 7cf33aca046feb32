"""``repeat-tool-guard hook --serve``: a command hook forwarding to a running
``serve`` prints what the in-process hook prints for the same payloads, and
carries on in-process when the server goes away."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.guard.server.conftest import REPO, StartServer
from tests.guard.server.test_claude_code_hook import remind_session


def _hook(payload: dict[str, Any], *options: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "guard", "hook", *options],
        input=json.dumps(payload).encode(),
        capture_output=True,
        cwd=REPO,
        check=True,
    )


def test_a_forwarded_session_gets_the_in_process_answers(start_server: StartServer, tmp_path: Path) -> None:
    server = start_server("--uds", str(tmp_path / "serve.sock"))
    state = tmp_path / "hook-state"
    forwarded, in_process = [], []
    for payload in remind_session():
        via_server = _hook(payload, "--serve", server.where, "--state-dir", str(state))
        assert via_server.stderr == b""
        forwarded.append(via_server.stdout)
        in_process.append(_hook(payload, "--state-dir", str(tmp_path / "own")).stdout)
    assert forwarded == in_process
    assert any(b"additionalContext" in answer for answer in forwarded)
    assert not state.exists()
    assert (tmp_path / "state" / f"{remind_session()[0]['session_id']}.jsonl").exists()

    server.stop()
    after = _hook(remind_session()[1], "--serve", server.where, "--state-dir", str(state))
    assert after.stderr == b""  # its socket is gone with it: nothing to report
    assert (state / f"{remind_session()[0]['session_id']}.jsonl").exists()


def test_a_forwarded_hook_reaches_a_tcp_server(start_server: StartServer) -> None:
    server = start_server()
    payload = remind_session()[0]
    done = _hook(payload, "--serve", server.where)
    assert done.stderr == b""
    assert done.stdout == b""
