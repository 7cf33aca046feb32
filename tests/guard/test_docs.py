"""The docs say what the code does: the remind example runs as printed, every
scenario and every config key is documented."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import structlog

from guard import RemindConfig, RescueConfig, TurnsConfig
from tests.guard.importers._transcripts import corpus_file

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture
def _restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def _printed_by_page_example(page: str) -> tuple[str, str]:
    """What a page's ``python`` example prints when run, and what the page says it prints."""
    text = (DOCS / page).read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", text, re.DOTALL)
    assert match is not None
    code, printed = match.groups()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/{page}", "exec"), {"__name__": "__main__"})
    return out.getvalue(), printed


@pytest.mark.usefixtures("_restore_structlog")
@pytest.mark.parametrize("page", ["policies/remind.md", "policies/custom.md"])
def test_page_example_prints_what_the_page_says(page: str) -> None:
    ran, printed = _printed_by_page_example(page)
    assert ran == printed


def test_every_remind_scenario_is_listed_on_the_policy_page() -> None:
    page = (DOCS / "policies" / "remind.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`([a-z_]+)`", page.split("## Scenarios")[1].split("##")[0]))
    on_disk = {p.stem for p in (ROOT / "scenarios" / "remind").glob("*.jsonl") if ".expected" not in p.name}
    assert on_disk <= listed


@pytest.mark.parametrize(
    ("section", "struct"), [("remind", RemindConfig), ("turns", TurnsConfig), ("rescue", RescueConfig)]
)
def test_every_config_key_is_in_its_sections_table(section: str, struct: type[msgspec.Struct]) -> None:
    page = (DOCS / "config.md").read_text(encoding="utf-8")
    body = page.split(f"\n## `{section}`\n")[1].split("\n## ")[0]
    documented = re.findall(r"^\| `([a-z_]+)` \|", body, re.MULTILINE)
    assert documented == list(struct.__struct_fields__)


@pytest.mark.anyio
async def test_the_bookkeeping_exclude_on_the_remind_page_keeps_every_runtimes_todo_tool_transparent(
    tmp_path: Path, anyio_backend: str
) -> None:
    import tomllib

    from bus import ContextMessage
    from bus.testing import Capture
    from guard import parse_config
    from tests.scenarios._script import Script

    page = (DOCS / "policies" / "remind.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", page, re.DOTALL) if "TodoWrite" in b]
    s = Script(tmp_path / "s.jsonl", parse_config(tomllib.loads(block)))
    capture = Capture().attach(s.bus)
    for todo in ("TodoWrite", "update_plan", "write_todos", "todo_write"):
        await s.call("main", "grep", {"pattern": "x"})
        await s.call("main", todo, {"todos": []})
    s.close()
    assert [m.source.summary for m in capture.of(ContextMessage)] == ["grep × 3"]


@pytest.mark.parametrize(
    ("transcript", "tool"),
    [("claude-code/claude-code-pomodoro-timer.jsonl", "TodoWrite"), ("codex/codex-pomodor-timer.jsonl", "update_plan")],
)
def test_the_bookkeeping_tool_names_are_the_runtimes_own(transcript: str, tool: str) -> None:
    assert f'"{tool}"' in corpus_file(transcript).read_text(encoding="utf-8")
