"""Each adapter page's example builds a config enabling the policy the page
recommends for that runtime, and the hand-written Claude Code settings match
what ``repeat-tool-guard hook-settings`` prints. (``test_examples`` runs the
examples themselves.)"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from guard import Config, parse_config
from guard.adapters.claude_hooks import HOOK_EVENTS, hook_settings

PAGES = Path(__file__).resolve().parents[2] / "docs" / "adapters"

RECOMMENDED = {  # page: (the runtime's module, the policy the page recommends)
    "pydantic_ai": ("pydantic_ai", "turns"),
    "openai_agents": ("agents", "turns"),
    "langchain": ("langchain", "turns"),
    "google_adk": ("google.adk", "turns"),
    "mcp": ("mcp", "rescue"),
    "claude_agent_sdk": ("claude_agent_sdk", "rescue"),
}


def _blocks(page: str, language: str) -> list[str]:
    text = (PAGES / f"{page}.md").read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def test_every_adapter_page_is_checked() -> None:
    assert {p.stem for p in PAGES.glob("*.md")} == set(RECOMMENDED)


@pytest.mark.parametrize("page", RECOMMENDED)
def test_example_enables_the_policy_its_page_recommends(page: str) -> None:
    module, policy = RECOMMENDED[page]
    pytest.importorskip(module, reason=f"{module} is not installed")
    code = _blocks(page, "python(?: file=guard_proxy.py)?")[0]
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, f"docs/adapters/{page}.md", "exec", flags=flags)
    namespace: dict[str, Any] = {}
    imports: list[ast.stmt] = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=imports, type_ignores=[]), page, "exec"), namespace)
    (call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Config"
    ]
    config = eval(ast.unparse(call), namespace)
    assert isinstance(config, Config)
    assert getattr(config, policy).enabled


def test_claude_code_settings_register_every_hook_event_and_the_toml_enables_rescue() -> None:
    (settings,) = _blocks("claude_agent_sdk", "json")
    hooks = json.loads(settings)["hooks"]
    command = ["/home/me/.local/bin/repeat-tool-guard", "hook", "--config", "/home/me/guard.toml"]
    printed = hook_settings(command)["hooks"]
    assert tuple(hooks) == tuple(printed) == HOOK_EVENTS
    for event, matchers in hooks.items():
        assert [m.get("matcher") for m in matchers] == [m.get("matcher") for m in printed[event]], event
        assert {h["command"] for m in matchers for h in m["hooks"]} == {" ".join(command)}
    (toml,) = _blocks("claude_agent_sdk", "toml file=guard.toml")
    assert parse_config(tomllib.loads(toml)).rescue.enabled
