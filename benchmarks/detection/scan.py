"""Find repetitive stretches in a folder of real transcripts, for labelling.

    python -m benchmarks.detection scan TRANSCRIPTS OUT.jsonl [--logs DIR]

Every transcript under ``TRANSCRIPTS`` is imported (as ``audit`` does), and
each session is read call by call. A *candidate* is a call made again with
the same arguments (same tool, same canonical arguments, the cosmetic fields
``loops`` ignores left out), or a run of failures of one tool. For each the
scan records what a labeller needs: the call numbers, whether the recorded
results stayed the same, whether something that writes ran in between,
whether the user spoke in between, and what ``recommended`` did on those
calls. It suggests a label by the rules of ``docs/policies/recommended.md``;
the label in ``real.toml`` is the labeller's.

Nothing here is scored: ``real.py`` scores the labelled stretches.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from bus import ToolCall, ToolResult, UserMessage, read_log
from guard.audit import FileError, find_transcripts
from guard.config import RECOMMENDED
from guard.importers import open_sessions, write_log
from guard.verdicts import replay_log

_COSMETIC = frozenset({"description", "task_progress", "__intent", "_i", "thought", "reasoning", "security_risk"})
_WRITES_SHELL = re.compile(
    r"sed -i|perl -i|(?<![0-9&])>>?\s*(?!&|/dev/null)[\w./~$'\"-]|\btee\b|\bpatch\b|"
    r"git (apply|checkout|stash|reset|am)|pip install|apt(-get)? (install|remove)|"
    r"\brm\b|\bmv\b|\bcp\b|<<|open\([^)]*['\"][wa]['\"]|\.write\(|apply_patch|npm install|make\b"
)
_WRITES_TOOL = re.compile(r"edit|write|replace|create|patch|insert|multiedit", re.IGNORECASE)


@dataclass
class Call:
    number: int
    agent: str | None
    tool: str
    key: str
    text: str
    content: str
    is_error: bool
    user_before: bool = False


@dataclass
class Candidate:
    source: str
    file: str
    session: str
    kind: str
    tool: str
    call: str
    members: list[int]
    same_results: bool
    loose_same: bool
    writes_between: bool
    user_between: bool
    errors: int
    actions: list[str] = field(default_factory=list)
    suggestion: str = ""


def _canonical(args: Any) -> Any:
    if isinstance(args, dict):
        return {k: _canonical(v) for k, v in sorted(args.items()) if k not in _COSMETIC}
    if isinstance(args, list):
        return [_canonical(v) for v in args]
    return args


def _call_text(tool: str, args: Any) -> str:
    if isinstance(args, dict) and set(args) <= {"command", "cmd", "timeout", "is_input"} and "command" in args:
        return str(args["command"])
    return f"{tool} {json.dumps(_canonical(args), sort_keys=True)}"


def _writes(call: Call) -> bool:
    if _WRITES_TOOL.search(call.tool) and "view" not in call.text[:80]:
        return True
    return bool(_WRITES_SHELL.search(call.text))


def _loose(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "#", text.strip())


def calls_of(path: Path) -> list[Call]:
    """The calls of a session log, numbered as ``replay`` numbers them."""
    calls: list[Call] = []
    by_id: dict[tuple[str | None, str], Call] = {}
    user = False
    for event in read_log(path):
        agent = event.agent.id if event.agent else None
        if type(event) is UserMessage:
            user = True
        elif type(event) is ToolCall:
            key = json.dumps([agent, event.tool, _canonical(event.args)], sort_keys=True, default=str)
            call = Call(len(calls) + 1, agent, event.tool, key, _call_text(event.tool, event.args), "", False, user)
            user = False
            calls.append(call)
            by_id[(agent, event.call_id)] = call
        elif type(event) is ToolResult:
            found = by_id.pop((agent, event.call_id), None)
            if found is None:
                key = json.dumps([agent, event.tool, _canonical(event.args)], sort_keys=True, default=str)
                found = Call(
                    len(calls) + 1, agent, event.tool, key, _call_text(event.tool, event.args), "", False, user
                )
                user = False
                calls.append(found)
            found.content = event.content
            found.is_error = event.is_error
    return calls


def _repeats(calls: list[Call]) -> Iterator[list[Call]]:
    groups: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        groups[call.key].append(call)
    for members in groups.values():
        if len(members) >= 2:
            yield members


def _failure_runs(calls: list[Call]) -> Iterator[list[Call]]:
    """Runs of three or more failures of one tool with no success of it between."""
    runs: dict[tuple[str | None, str], list[Call]] = {}
    for call in calls:
        head = (call.agent, call.tool)
        if call.is_error:
            runs.setdefault(head, []).append(call)
            continue
        run = runs.pop(head, None)
        if run and len(run) >= 3 and len({c.key for c in run}) > 1:
            yield run
    for run in runs.values():
        if len(run) >= 3 and len({c.key for c in run}) > 1:
            yield run


def _suggest(c: Candidate) -> str:
    n = len(c.members)
    if c.kind == "failures":
        return "loop?" if c.same_results else "legit?"
    if c.user_between:
        return "legit? (user spoke)"
    if not c.same_results:
        return "legit"
    if n >= 3 and not c.writes_between:
        return "loop"
    if n >= 3:
        return "unclear/loop? (writes between)"
    return "unclear"


def _candidate(source: str, file: str, session: str, kind: str, members: list[Call], between: list[Call]) -> Candidate:
    contents = [m.content.strip() for m in members]
    loose = [_loose(m.content) for m in members]
    if kind == "failures":
        firsts = [m.content.strip().splitlines()[0] if m.content.strip() else "" for m in members]
        same = len(set(firsts)) == 1
        loose_same = len({_loose(f) for f in firsts}) == 1
    else:
        same = len(set(contents)) == 1
        loose_same = len(set(loose)) == 1
    cand = Candidate(
        source=source,
        file=file,
        session=session,
        kind=kind,
        tool=members[0].tool,
        call=members[0].text[:200],
        members=[m.number for m in members],
        same_results=same,
        loose_same=loose_same,
        writes_between=any(_writes(b) for b in between),
        user_between=any(m.user_before for m in members[1:]) or any(b.user_before for b in between),
        errors=sum(1 for m in members if m.is_error),
    )
    cand.suggestion = _suggest(cand)
    return cand


async def scan_session(source: str, file: str, session: str, log: Path) -> tuple[int, list[Candidate]]:
    calls = calls_of(log)
    outcome = await replay_log(log, RECOMMENDED)
    acts: dict[int, list[str]] = defaultdict(list)
    for v in outcome.verdicts:
        acts[v.call_number].append(f"{v.call_number}:{v.action}")
    found: list[Candidate] = []
    groups = [("repeat", g) for g in _repeats(calls)] + [("failures", g) for g in _failure_runs(calls)]
    for kind, members in groups:
        first, last = members[0].number, members[-1].number
        own = {m.number for m in members}
        between = [c for c in calls[first - 1 : last] if c.number not in own]
        cand = _candidate(source, file, session, kind, members, between)
        cand.actions = [a for m in members for a in acts.get(m.number, [])]
        found.append(cand)
    return len(calls), found


async def scan(root: Path, out: Path, logs: Path, source: str) -> dict[str, int]:
    """Scan every transcript under ``root`` into ``out``, keeping the imported
    logs under ``logs / source``. The files are the ones ``audit`` walks
    (``find_transcripts``), so each session is scanned once, as ``audit``
    reports it: a subagent with its session, an OpenHands V1 conversation
    from its first event file. A folder the walk cannot list counts as failed."""
    totals = {"files": 0, "sessions": 0, "calls": 0, "candidates": 0, "failed": 0}
    unlisted: list[FileError] = []
    files = [path for path, _ in find_transcripts([root], unlisted)]
    totals["failed"] += len(unlisted)
    with out.open("a", encoding="utf-8") as sink:
        for path in files:
            totals["files"] += 1
            try:
                sessions = list(open_sessions(path))
            except Exception:
                totals["failed"] += 1
                continue
            for s in sessions:
                rel = path.name if path == root else str(path.relative_to(root))
                target = logs / source / rel / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', s.session)}.jsonl"
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    try:
                        write_log(s, target)
                    except Exception:
                        totals["failed"] += 1
                        continue
                n, found = await scan_session(source, rel, s.session, target)
                totals["sessions"] += 1
                totals["calls"] += n
                totals["candidates"] += len(found)
                for cand in found:
                    sink.write(json.dumps(asdict(cand)) + "\n")
    return totals


def main(argv: list[str] | None = None) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.detection scan", description=__doc__.splitlines()[0])
    parser.add_argument("transcripts", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", default="", help="a name for where the transcripts came from")
    parser.add_argument("--logs", type=Path, default=None, help="keep the imported session logs here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rtg-scan-") as tmp:
        logs = args.logs or Path(tmp)
        totals = anyio.run(scan, args.transcripts, args.out, logs, args.source or args.transcripts.name)
    print(json.dumps(totals), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
