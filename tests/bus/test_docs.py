"""The Python examples in docs/bus.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "bus.md"
_EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_bus_doc_has_examples() -> None:
    assert len(_EXAMPLES) >= 3


@pytest.mark.parametrize("source", _EXAMPLES, ids=[f"example-{i}" for i in range(1, len(_EXAMPLES) + 1)])
def test_bus_doc_example_runs(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(source, str(DOC), "exec"), {"__name__": "__doc_example__"})
