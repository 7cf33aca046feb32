"""Every example in README.md and docs/ runs as written.

Each page's fenced blocks run in order in one fresh directory (holding
``scenarios`` and ``examples`` links to the repository's), offline:

- ``python``: run as a script in a subprocess (an agent program, one with a
  ``GuardLink``, twice: a second run on the same session log must work too). A model the
  example names is served by a local stand-in through the provider's
  base-URL variables (``tests/fake_providers.py``: a model that keeps calling
  one tool); the Claude Code CLI gets the scripted fake Anthropic API
  (``tests/claude_cli.py``). No real key, no network.
- ``toml``: a valid config (``guard.parse_config``); ``json`` and ``yaml``: parse.
- ``sh``/``bash``: each line in ``bash -e`` with this installation's
  ``repeat-tool-guard`` on ``PATH``; the set-up steps of a fresh machine
  (``python3 -m venv``, activating it, ``pip install``) are left out.

The info string marks the exceptions: ``no-run`` for a block that cannot
run here (a fragment, a path on your machine, a seven-minute benchmark),
``file=NAME`` for a block that is a file later blocks use (written, not run).
Other languages (``text``, none) are not checked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from guard import parse_config
from tests.claude_cli import FakeAnthropic, bundled_cli, text, tool_use
from tests.fake_providers import FakeChatAPI

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
CHECKED = {"python", "toml", "json", "yaml", "sh", "bash"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
SETUP = re.compile(r"^(python3? -m venv\b|\. \S*/bin/activate\b|source \S*/bin/activate\b|pip3? install\b)")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    flags: frozenset[str]
    file: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    source = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(source):
        words = match.group(1).split()
        if not words or words[0] not in CHECKED:
            continue
        file = next((w.removeprefix("file=") for w in words[1:] if w.startswith("file=")), None)
        line = source.count("\n", 0, match.start()) + 1
        found.append(Block(str(page.relative_to(REPO)), line, words[0], frozenset(words[1:]), file, match.group(2)))
    return found


EXAMPLES = {str(p.relative_to(REPO)): b for p in PAGES if (b := blocks(p))}


def test_the_fence_convention_is_what_the_pages_use() -> None:
    unknown = {
        f"{b.where}: {flag}"
        for page in EXAMPLES.values()
        for b in page
        for flag in b.flags
        if flag != "no-run" and not flag.startswith("file=")
    }
    assert unknown == set(), "an info string word this test does not know"
    skipped = [b.where for page in EXAMPLES.values() for b in page if "no-run" in b.flags]
    ran = [b.where for page in EXAMPLES.values() for b in page if "no-run" not in b.flags]
    assert len(skipped) * 4 < len(ran), f"no-run is for the exceptions: {skipped}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "example"
    work.mkdir()
    (work / "scenarios").symlink_to(REPO / "scenarios")
    (work / "examples").symlink_to(REPO / "docs" / "examples")
    return work


def _env(extra: dict[str, str]) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    bin_dir = str(Path(sys.executable).parent)
    return {**keep, "PATH": f"{bin_dir}{os.pathsep}{keep.get('PATH', '')}", **extra}


def _run(command: list[str], cwd: Path, env: dict[str, str], block: Block) -> None:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"{block.where} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{block.where}:\n{done.stderr}"


def _run_python(block: Block, work: Path, tmp_path: Path) -> None:
    script = work / f"example_{block.line}.py"
    script.write_text(block.code)
    runs = 2 if "GuardLink(" in block.code else 1  # an agent program runs again on its session log
    for _ in range(runs):
        if "claude_agent_sdk" in block.code:
            if bundled_cli() is None:
                pytest.skip("claude-agent-sdk with its bundled CLI is not installed")
            claude = FakeAnthropic(tmp_path / f"claude-{block.line}")
            claude.script(*[[tool_use("Bash", {"command": "ls"})]] * 6, [text("Found it.")])
            try:
                _run([sys.executable, str(script)], work, _env(claude.env()), block)
            finally:
                claude.close()
            continue
        model = FakeChatAPI("openai")
        model.stubborn(12)
        try:
            _run([sys.executable, str(script)], work, _env(model.env()), block)
        finally:
            model.close()


def _run_shell(block: Block, work: Path) -> None:
    for line in block.code.splitlines():
        steps = [s.strip() for s in line.split("&&")]
        command = " && ".join(s for s in steps if s and not s.startswith("#") and not SETUP.match(s))
        if command:
            _run(["bash", "-e", "-c", command], work, _env({}), block)


@pytest.mark.parametrize(
    "page",
    # the adapters' pages run agent runtimes (and the Claude Code CLI) end to end
    [pytest.param(p, marks=pytest.mark.slow) if p.startswith("docs/adapters/") else p for p in sorted(EXAMPLES)],
)
def test_every_example_on_the_page_runs(page: str, workdir: Path, tmp_path: Path) -> None:
    for block in EXAMPLES[page]:
        if "no-run" in block.flags:
            continue
        if block.file is not None:
            (workdir / block.file).write_text(block.code)
            if block.language != "toml":
                continue
        if block.language == "python":
            _run_python(block, workdir, tmp_path)
        elif block.language == "toml":
            parse_config(tomllib.loads(block.code))
        elif block.language == "json":
            json.loads(block.code)
        elif block.language == "yaml":
            yaml.safe_load(block.code)
        else:
            _run_shell(block, workdir)
