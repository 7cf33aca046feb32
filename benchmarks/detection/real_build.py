"""Trim labelled sessions to their stretches and write ``real/stretches.toml``.

    python -m benchmarks.detection.real_build DRAFT.jsonl DATA_DIR

``DRAFT.jsonl`` holds one labelled stretch a line, numbered in the full
imported session log: ``log`` (that log), ``file`` (its name under
``DATA_DIR``), ``origin``, ``members`` (call numbers), ``label``, ``kind``,
``reason``, ``commit``, ``licence`` and optionally ``period``. Each log is cut to one slice of events:
the header, the agent's start and first user message (the task), then
everything from ``context`` calls before its first labelled call to the
result of its last. Events are copied unchanged; call numbers in the written
labels are the trimmed log's, checked to name the same calls. The file table
of ``real/DATA.md`` (repository, path, commit, licence of each log) is
rewritten from the same lines.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

CONTEXT = 12


def _events(path: Path) -> tuple[str, list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0], [json.loads(line) for line in lines[1:] if line.strip()]


def _numbered(events: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Each event with the call number it belongs to (0 before the first call),
    counting calls and orphan results as ``replay`` does."""
    out: list[tuple[int, dict[str, Any]]] = []
    n = 0
    open_calls: set[tuple[Any, Any]] = set()
    for e in events:
        key = (e.get("agent"), e.get("call_id"))
        if e["type"] == "tool/call":
            n += 1
            open_calls.add(key)
        elif e["type"] == "tool/result" and key not in open_calls:
            n += 1
        elif e["type"] == "tool/result":
            open_calls.discard(key)
        out.append((n, e))
    return out


def _calls(events: list[dict[str, Any]]) -> dict[int, tuple[str, str]]:
    return {
        n: (e["tool"], json.dumps(e.get("args"), sort_keys=True))
        for n, e in _numbered(events)
        if e["type"] == "tool/call"
    }


def trim(log: Path, lo: int, hi: int, out: Path) -> int:
    """Write calls ``lo``..``hi`` of ``log`` (and their results) to ``out``; the offset to subtract."""
    header, events = _events(log)
    numbered = _numbered(events)
    head = [e for n, e in numbered if n == 0 and e["type"] in ("agent/status", "user/message")][:2]
    body = [e for n, e in numbered if lo <= n <= hi]
    keep = [e for e in head if e not in body] + body
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("x", encoding="utf-8") as f:
        f.write(header + "\n")
        for e in keep:
            f.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
    return lo - 1


def build(draft: Path, data: Path, labels: Path) -> int:
    items = [json.loads(line) for line in draft.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_log: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_log[item["log"]].append(item)
    stanzas: list[str] = []
    for log, group in sorted(by_log.items(), key=lambda kv: kv[1][0]["file"]):
        lo = max(1, min(min(i["members"]) for i in group) - CONTEXT)
        hi = max(max(i["members"]) for i in group)
        target = data / group[0]["file"]
        offset = trim(Path(log), lo, hi, target)
        full = _calls(_events(Path(log))[1])
        cut = _calls(_events(target)[1])
        for item in sorted(group, key=lambda i: i["members"][0]):
            members = [m - offset for m in item["members"]]
            for old, new in zip(item["members"], members, strict=True):
                if full[old] != cut.get(new):
                    raise ValueError(f"{item['file']}: call {old} is not call {new} of the trimmed log")
            stanzas.append(_stanza(item, members))
    labels.write_text(_HEADER + "\n".join(stanzas), encoding="utf-8")
    _write_sources(items, labels.with_name("DATA.md"))
    return len(stanzas)


def _write_sources(items: list[dict[str, Any]], path: Path) -> None:
    """Replace the file table of ``DATA.md`` (everything after ``## Files``)."""
    text = path.read_text(encoding="utf-8") if path.exists() else "## Files\n"
    head = text.split("## Files")[0]
    rows = {}
    for item in items:
        repo, source_path = item["origin"].split(":", 1)
        rows[item["file"]] = f"| {item['file']} | {repo} | {source_path} | {item['commit']} | {item['licence']} |"
    table = ["## Files", "", "| file (under real/) | repository | path | commit | licence |", "|---|---|---|---|---|"]
    path.write_text(head + "\n".join(table + [rows[k] for k in sorted(rows)]) + "\n", encoding="utf-8")


_HEADER = """\
# Labelled stretches of real public transcripts (logs under ../shared/corpus/real,
# fetched data never committed here; sources and licences in DATA.md).
# calls: first and last call number of the stretch in its trimmed log (1-based,
# as replay numbers them); only: the stretch's own calls when other work is
# interleaved; period: calls of the first round; origin: the transcript it came
# from (repository:path[#session]), which also fixes its half (tune or held-out).
# Labels follow docs/policies/recommended.md.

"""


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _stanza(item: dict[str, Any], members: list[int]) -> str:
    lines = ["[[stretch]]", f"file = {_quote(item['file'])}", f"calls = [{members[0]}, {members[-1]}]"]
    if members != list(range(members[0], members[-1] + 1)):
        lines.append(f"only = [{', '.join(map(str, members))}]")
    if item.get("period", 1) != 1:
        lines.append(f"period = {item['period']}")
    lines += [
        f"label = {_quote(item['label'])}",
        f"kind = {_quote(item['kind'])}",
        f"reason = {_quote(item['reason'])}",
        f"origin = {_quote(item['origin'])}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("draft", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--labels", type=Path, default=Path(__file__).parent / "real" / "stretches.toml")
    args = parser.parse_args(argv)
    print(build(args.draft, args.data, args.labels), "stretches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
