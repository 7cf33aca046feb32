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

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture
def _restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("_restore_structlog")
def test_remind_example_prints_what_the_page_says() -> None:
    page = (DOCS / "policies" / "remind.md").read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", page, re.DOTALL)
    assert match is not None
    code, printed = match.groups()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/policies/remind.md", "exec"), {"__name__": "__main__"})
    assert out.getvalue() == printed


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
