"""Score loop-detection configs on labelled stretches of real and scripted sessions.

    python -m benchmarks.detection.run                 # the table, every config
    python -m benchmarks.detection.run --detail recommended   # per-stretch verdicts

Labels (data, in this folder):

- ``corpus.toml``: stretches of the shared transcript corpus
  (``../shared/corpus`` from the repository root, never copied here),
  named by file, session and call range;
- ``scenarios.toml``: the synthetic sessions under ``scenarios/`` (made by
  ``build.py``);
- ``repo_scenarios.toml``: the repository's own ``scenarios/``.

Each labelled log is replayed (as ``repeat-tool-guard replay`` does;
transcripts are imported first, as ``audit`` does) through each config.
A stretch is *caught* when any action falls on one of its calls. *Wasted
calls* are the loop's calls that ran after its first round (``period``
calls, 1 for a plain repeat) up to the first action: a reminder's own call
ran, a denied call did not. Advisories and denials or halts on legit
stretches are counted per action; ``unclear`` stretches are reported but
not scored.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec
import structlog

from bus import ToolCall, ToolResult, read_log
from guard.config import RECOMMENDED, Config, RemindConfig, RescueConfig, TurnsConfig
from guard.importers import open_sessions
from guard.importers import write_log as write_session_log
from guard.verdicts import Verdict, replay_log

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = ROOT / ".." / "shared" / "corpus"
DENYING = frozenset({"deny", "rescue", "escalation-failed", "halt"})
_NO_ASK = "/dev/null/repeat-tool-guard-benchmark-never-asks"
_OFF = RemindConfig(enabled=False)

CONFIGS: dict[str, Config] = {
    "no config": Config(),
    "remind": Config(remind=RemindConfig()),
    "turns": Config(remind=_OFF, turns=TurnsConfig()),
    "rescue": Config(remind=_OFF, rescue=RescueConfig(ask_command=_NO_ASK)),
    "all three": Config(turns=TurnsConfig(), rescue=RescueConfig(ask_command=_NO_ASK)),
    "recommended": RECOMMENDED,
}
"""The configs scored, by the name the table shows."""


class Stretch(msgspec.Struct, frozen=True, kw_only=True):
    """One labelled stretch: calls ``first``..``last`` of a log (1-based,
    every call of the log counted, as ``replay`` numbers them). ``only``,
    when given, lists the stretch's own calls (others in the range are
    unrelated work); ``period`` is how many of them make the first round."""

    def members(self, agents: dict[int, str | None]) -> list[int]:
        """The stretch's own call numbers."""
        if self.only:
            return list(self.only)
        first, last = self.calls
        return [n for n in range(first, last + 1) if self.agent is None or agents.get(n) == self.agent]

    source: str
    file: str
    calls: tuple[int, int]
    label: str
    kind: str
    reason: str
    period: int = 1
    only: tuple[int, ...] = ()
    session: str | None = None
    agent: str | None = None
    origin: str = ""

    @property
    def name(self) -> str:
        session = f" [{self.session}]" if self.session else ""
        return f"{self.file}{session} calls {self.calls[0]}-{self.calls[1]}"


class _Labels(msgspec.Struct, frozen=True):
    stretch: list[Stretch] = msgspec.field(default_factory=list)


def load_labels(corpus: Path = CORPUS) -> tuple[list[Stretch], list[str]]:
    """Every labelled stretch, and a note for each label file skipped."""
    stretches: list[Stretch] = []
    notes: list[str] = []
    for name, source in (("scenarios.toml", "scenario"), ("repo_scenarios.toml", "repo"), ("corpus.toml", "corpus")):
        if source == "corpus" and not corpus.is_dir():
            notes.append(f"corpus labels skipped: no corpus at {corpus}")
            continue
        data = tomllib.loads((HERE / name).read_text(encoding="utf-8"))
        for item in data.get("stretch", []):
            stretches.append(msgspec.convert({"source": source, **item}, Stretch))
    for stretch in stretches:
        if stretch.label not in ("loop", "legit", "unclear"):
            raise ValueError(f"{stretch.name}: label must be loop, legit or unclear, not {stretch.label!r}")
    return stretches, notes


@dataclass
class _Log:
    path: Path
    agents: dict[int, str | None] = field(default_factory=dict)


def _call_agents(path: Path) -> dict[int, str | None]:
    """Call number -> agent id, numbered as ``Replay`` numbers calls."""
    numbers: dict[int, str | None] = {}
    open_calls: set[tuple[str | None, str]] = set()
    for event in read_log(path):
        agent = event.agent.id if event.agent else None
        if type(event) is ToolCall:
            numbers[len(numbers) + 1] = agent
            open_calls.add((agent, event.call_id))
        elif type(event) is ToolResult and (agent, event.call_id) not in open_calls:
            numbers[len(numbers) + 1] = agent
        elif type(event) is ToolResult:
            open_calls.discard((agent, event.call_id))
    return numbers


def _logs(
    stretches: Iterable[Stretch], tmp: Path, corpus: Path, real: Path | None = None
) -> dict[tuple[str, str, str | None], _Log]:
    logs: dict[tuple[str, str, str | None], _Log] = {}
    for stretch in stretches:
        key = (stretch.source, stretch.file, stretch.session)
        if key in logs:
            continue
        if stretch.source == "scenario":
            path = HERE / "scenarios" / stretch.file
        elif stretch.source == "repo":
            path = ROOT / "scenarios" / stretch.file
        elif stretch.source == "real" and real is not None:
            path = real / stretch.file
        else:
            sessions = [
                s
                for s in open_sessions(corpus / stretch.file)
                if stretch.session is None or s.session == stretch.session
            ]
            if len(sessions) != 1:
                raise ValueError(f"{stretch.name}: {len(sessions)} sessions match (name one with session = ...)")
            path = tmp / f"{len(logs)}.jsonl"
            write_session_log(sessions[0], path)
        logs[key] = _Log(path, _call_agents(path))
    return logs


@dataclass
class StretchResult:
    stretch: Stretch
    actions: list[Verdict]
    wasted: int | None


@dataclass
class Score:
    """One config's score over every labelled stretch."""

    config: str
    results: list[StretchResult]
    elsewhere: int

    def _of(self, label: str) -> list[StretchResult]:
        return [r for r in self.results if r.stretch.label == label]

    @property
    def loops(self) -> int:
        return len(self._of("loop"))

    @property
    def caught(self) -> int:
        return sum(1 for r in self._of("loop") if r.actions)

    @property
    def wasted(self) -> list[int]:
        return [r.wasted for r in self._of("loop") if r.wasted is not None]

    @property
    def legit_advisories(self) -> int:
        return sum(1 for r in self._of("legit") for v in r.actions if v.action not in DENYING)

    @property
    def legit_denials(self) -> int:
        return sum(1 for r in self._of("legit") for v in r.actions if v.action in DENYING)

    @property
    def legits(self) -> int:
        return len(self._of("legit"))

    @property
    def legit_stretches_advised(self) -> int:
        """Legit stretches with an advisory and no denial or halt."""
        return sum(1 for r in self._of("legit") if r.actions and all(v.action not in DENYING for v in r.actions))

    @property
    def legit_stretches_denied(self) -> int:
        """Legit stretches with a denial or halt."""
        return sum(1 for r in self._of("legit") if any(v.action in DENYING for v in r.actions))

    @property
    def unclear_denials(self) -> int:
        return sum(1 for r in self._of("unclear") for v in r.actions if v.action in DENYING)


def _wasted(stretch: Stretch, actions: list[Verdict], agents: dict[int, str | None]) -> int | None:
    if not actions:
        return None
    first = actions[0]
    end = first.call_number if first.action not in DENYING else first.call_number - 1
    return sum(1 for n in stretch.members(agents)[stretch.period :] if n <= end)


async def score(
    configs: dict[str, Config] | None = None, *, corpus: Path = CORPUS
) -> tuple[list[Score], list[Stretch], list[str]]:
    """Score every config in ``configs`` (default ``CONFIGS``)."""
    stretches, notes = load_labels(corpus)
    return await score_stretches(stretches, configs, corpus=corpus), stretches, notes


async def score_stretches(
    stretches: list[Stretch],
    configs: dict[str, Config] | None = None,
    *,
    corpus: Path = CORPUS,
    real: Path | None = None,
) -> list[Score]:
    """Score every config in ``configs`` (default ``CONFIGS``) on ``stretches``;
    ``real`` is the folder the ``real`` stretches' logs are read from."""
    configs = CONFIGS if configs is None else configs
    scores: list[Score] = []
    with tempfile.TemporaryDirectory(prefix="rtg-detection-") as tmp:
        logs = _logs(stretches, Path(tmp), corpus, real)
        for name, config in configs.items():
            results: list[StretchResult] = []
            elsewhere = 0
            for key, log in logs.items():
                outcome = await replay_log(log.path, config)
                mine = [s for s in stretches if (s.source, s.file, s.session) == key]
                claimed: set[int] = set()
                for stretch in mine:
                    own = set(stretch.members(log.agents))
                    actions = [v for v in outcome.verdicts if v.call_number in own]
                    claimed.update(id(v) for v in actions)
                    wasted = _wasted(stretch, actions, log.agents) if stretch.label == "loop" else None
                    results.append(StretchResult(stretch, actions, wasted))
                elsewhere += sum(1 for v in outcome.verdicts if id(v) not in claimed)
            scores.append(Score(name, results, elsewhere))
    return scores


def table(scores: list[Score]) -> str:
    """The benchmark table, as Markdown."""
    lines = [
        "| config | loops caught | wasted calls before the first action (median / max) "
        "| advisories on legit | denials or halts on legit | denials on unclear | actions on unlabelled calls |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in scores:
        wasted = s.wasted
        spent = f"{statistics.median(wasted):g} / {max(wasted)}" if wasted else "–"
        share = f"{s.caught}/{s.loops} ({100 * s.caught / s.loops:.0f} %)" if s.loops else "0/0"
        lines.append(
            f"| {s.config} | {share} | {spent} | {s.legit_advisories} | {s.legit_denials} | {s.unclear_denials} "
            f"| {s.elsewhere} |"
        )
    return "\n".join(lines)


def detail(score: Score) -> str:
    """Per stretch: its label and what the config did there."""
    lines = ["| stretch | label | kind | actions (call: action) | wasted |", "|---|---|---|---|---|"]
    for r in score.results:
        acts = ", ".join(f"{v.call_number}: {v.policy}/{v.action}" for v in r.actions) or "–"
        wasted = "" if r.wasted is None else str(r.wasted)
        lines.append(
            f"| {r.stretch.source}: {r.stretch.name} | {r.stretch.label} | {r.stretch.kind} | {acts} | {wasted} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detail", metavar="CONFIG", choices=list(CONFIGS), help="also list every stretch")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the shared corpus (default ../shared/corpus)")
    args = parser.parse_args(argv)
    scores, stretches, notes = anyio.run(lambda: score(corpus=args.corpus))
    counts = {label: sum(1 for s in stretches if s.label == label) for label in ("loop", "legit", "unclear")}
    labels = ", ".join(f"{n} {label}" for label, n in counts.items())
    print(f"{len(stretches)} labelled stretches: {labels}")
    for note in notes:
        print(note, file=sys.stderr)
    print()
    print(table(scores))
    if args.detail:
        print()
        print(detail(next(s for s in scores if s.config == args.detail)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
