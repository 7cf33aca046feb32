"""``.ci/run`` installs the agent CLIs the end-to-end tests name, at the same versions."""

from __future__ import annotations

from pathlib import Path

from tests.agent_clis import CODEX_VERSION, GEMINI_VERSION

CI_RUN = Path(__file__).resolve().parents[1] / ".ci" / "run"


def test_ci_installs_the_pinned_agent_clis() -> None:
    script = CI_RUN.read_text()
    assert f"@openai/codex@{CODEX_VERSION}" in script
    assert f"@google/gemini-cli@{GEMINI_VERSION}" in script
    assert "REPEAT_TOOL_GUARD_NPM_CLIS" in script
