"""Replaying a session log through a fresh guard, as verdicts."""

from __future__ import annotations

import bisect
import functools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import msgspec
from msgspec.structs import force_setattr

from bus import AgentStatus, AnyEvent, ContextMessage, Event, ReadReport, Replay, ToolCall, ToolResult, UserMessage
from guard.actions import DENYING, Action
from guard.config import Config
from guard.guard import Guard
from guard.policy import AnyPolicy
from guard.sessions.restore import regenerated, replaying

__all__ = [
    "Difference",
    "OutputKind",
    "RecordedOutputError",
    "ReplayOutcome",
    "Verdict",
    "replay_events",
    "replay_log",
]


class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One guard action placed in its log: ``seq`` is the triggering event's
    seq in the log, ``call_number`` the 1-based ordinal of the triggering call
    among all the log's tool calls, every agent counted. ``shadow`` is true
    for an action of a policy in shadow mode (recorded, not delivered), and
    left out of the JSON line otherwise."""

    seq: int
    call_number: int
    agent: str | None
    policy: str
    action: str
    tool: str
    count: int
    text: str
    shadow: bool = False

    def json_line(self) -> str:
        """This verdict as ``replay --json`` prints it: one JSON object, the
        fields in the order above, formatted as DESIGN.md shows them."""
        import json

        return json.dumps(msgspec.to_builtins(self), ensure_ascii=False)


OutputKind = Literal["context message", "denial", "halt request"]


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """A guard action the log recorded that the replay did not make the same
    way, or the reverse. ``what`` is the kind of output; ``recorded`` and
    ``regenerated`` are each side's fields as one JSON object, ``None`` on
    the side that lacks it; ``seq`` is the recorded event's seq, or, for an
    action the log lacks, the seq of the event the replay made it on."""

    what: OutputKind
    seq: int
    recorded: str | None
    regenerated: str | None

    @property
    def kind(self) -> Literal["missing", "extra", "changed"]:
        """``missing`` from the log, ``extra`` in it, or ``changed``."""
        if self.recorded is None:
            return "missing"
        return "extra" if self.regenerated is None else "changed"


class _Output(msgspec.Struct, frozen=True):
    """One guard output; ``key`` is its fields as (name, value) pairs, which
    compare as they are and become JSON text only in a difference."""

    what: OutputKind
    seq: int
    key: tuple[tuple[str, object], ...]


def _text(key: tuple[tuple[str, object], ...]) -> str:
    import json  # here, as difflib below: the command hook imports this module and never compares

    return json.dumps(dict(key), ensure_ascii=False)


def _message(event: ContextMessage | AgentStatus, seq: int) -> _Output:
    agent = event.agent.id if event.agent else None
    if isinstance(event, ContextMessage):
        source = event.source
        key = (
            ("agent", agent),
            ("call_id", event.call_id),
            ("plugin", source.plugin),
            ("form", source.form),
            ("summary", source.summary),
            ("text", event.text),
        )
        return _Output("context message", seq, key)
    return _Output("halt request", seq, (("agent", agent), ("reason", event.reason)))


def _denial(seq: int, agent: str | None, call_id: str, by: str | None, text: str, advice: str | None) -> _Output:
    key: tuple[tuple[str, object], ...] = (("agent", agent), ("call_id", call_id), ("by", by), ("text", text))
    if advice is not None:
        key += (("advice", advice),)
    return _Output("denial", seq, key)


def _compare(recorded: list[_Output], fresh: list[_Output]) -> list[Difference]:
    """Align the two sequences (so one missing action is one difference, not
    a shifted tail) and report what differs."""
    a = [o.key for o in recorded]
    b = [o.key for o in fresh]
    if a == b:
        return []
    import difflib  # only when something differs: most replays match

    # each side of a difference on its own, paired with the other side where the alignment paired them
    halves: list[tuple[Difference, Difference | None]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old, new = recorded[i1:i2], fresh[j1:j2]
        if op == "equal":
            # the same outputs in the same order, each made where it was recorded or moved far from it
            for was, now in zip(old, new, strict=True):
                if abs(was.seq - now.seq) > _MOVED:
                    halves += [(_recorded_only(was), None), (_made_only(now), None)]
            continue
        paired = 0
        while paired < len(old) and paired < len(new) and old[paired].what == new[paired].what:
            halves.append((_recorded_only(old[paired]), _made_only(new[paired])))
            paired += 1
        halves += [(_recorded_only(o), None) for o in old[paired:]]
        halves += [(_made_only(o), None) for o in new[paired:]]
    kept = {id(d) for d in _unmoved([d for pair in halves for d in pair if d is not None])}
    differences: list[Difference] = []
    for one, other in halves:
        if other is not None and id(one) in kept and id(other) in kept:  # neither side was made elsewhere
            differences.append(msgspec.structs.replace(one, regenerated=other.regenerated))
            continue
        differences += [d for d in (one, other) if d is not None and id(d) in kept]
    return sorted(differences, key=lambda d: d.seq)


def _recorded_only(output: _Output) -> Difference:
    return Difference(what=output.what, seq=output.seq, recorded=_text(output.key), regenerated=None)


def _made_only(output: _Output) -> Difference:
    return Difference(what=output.what, seq=output.seq, recorded=None, regenerated=_text(output.key))


_MOVED = 32
"""How far apart (in events) the same output may be recorded and regenerated
and still be one output (see ``_unmoved``)."""


def _unmoved(differences: list[Difference]) -> list[Difference]:
    """``differences`` without an output recorded in one place and made, the
    same, a few events away: while the guard awaited a subscriber of its
    own reminder (or an escalation), the agent's other tasks went on
    publishing, so the log holds their events before the guard's output,
    where a replay, which applies one event at a time, makes it at once."""
    extra: dict[tuple[str, str | None], list[Difference]] = {}
    for made in differences:
        if made.recorded is None:
            extra.setdefault((made.what, made.regenerated), []).append(made)
    if not extra:
        return differences
    for made_alike in extra.values():
        made_alike.sort(key=lambda d: d.seq)
    moved: set[int] = set()
    for missing in differences:
        if missing.regenerated is not None:
            continue
        same = extra.get((missing.what, missing.recorded))
        if same is None:
            continue
        # the same output made nearby: only those within _MOVED events are looked at
        at = bisect.bisect_left(same, missing.seq - _MOVED, key=lambda d: d.seq)
        while at < len(same) and same[at].seq <= missing.seq + _MOVED:
            made = same[at]
            if id(made) not in moved:
                moved.update((id(made), id(missing)))
                break
            at += 1
    return [d for d in differences if id(d) not in moved]


class ReplayOutcome:
    """What a replay found: the verdicts in order, the reader's report, the
    guard outputs the log recorded (``checked``, by kind), and the
    differences between those and the regenerated ones (compared when
    first asked for: most replays never ask).

    ``unanswered`` counts the calls the replay denies that the log holds no
    result for: the runtime's call was cancelled while the guard decided it
    (an escalation outlived the runtime's timeout), or the session was cut
    off. The log holds no outcome for them, so they are not compared, as an
    allowed call without a result is not."""

    def __init__(
        self,
        verdicts: list[Verdict],
        report: ReadReport,
        compare: Callable[[], list[Difference]],
        checked: Counter[str],
        unanswered: int,
        counted: Counter[str],
    ) -> None:
        self.verdicts = verdicts
        self.report = report
        self.checked = checked
        self.unanswered = unanswered
        self._compare = compare
        self._counted = counted

    @functools.cached_property
    def differences(self) -> list[Difference]:
        differences = self._compare()
        self._compare = list  # what it compared is let go
        return differences

    def counts(self) -> Counter[str]:
        """The verdicts by action, kept or not."""
        return Counter(self._counted)


async def replay_log(
    path: str | os.PathLike[str],
    config: Config | None = None,
    *,
    on_verdict: Callable[[Verdict], None] | None = None,
    policies: Sequence[AnyPolicy] | None = None,
    live_asks: bool = False,
    then: Callable[[AnyEvent], None] | None = None,
    keep: bool = True,
) -> ReplayOutcome:
    """Feed the log at ``path`` through a fresh bus and guard (with the
    policies ``config`` enables, or exactly ``policies``). ``config`` is used
    as given: the environment's overrides are for live guards, so a replay
    depends on nothing but the log and the config.

    The log is applied as every restore applies one
    (``guard.sessions.restore``): escalations are answered from the log, so
    a replay never runs the ask command, spends nothing and agrees with
    what was recorded, unless ``live_asks`` is true; the guard's own
    recorded context messages and halt requests (``Guard.owns``) are
    withheld and regenerated, and the calls its policies denied are
    replayed as recorded.
    Every one of those (denials with their text and advice) is compared with
    what the replay makes, in order: ``differences`` lists what is missing
    from the log, extra in it, or changed.

    ``then``, when given, sees each event read from the log once the
    replay applied it (withheld ones included), after the verdicts it
    triggered were reported to ``on_verdict``: what a caller measures of the
    log it measures in the same pass.

    With ``keep`` false the outcome holds nothing per action (its
    ``verdicts`` and ``differences`` are empty; ``counts`` still counts
    them): a caller that takes each verdict from ``on_verdict`` and never
    compares replays a session of any number of denials in flat memory.
    """
    replayer = _Replayer(path, config, policies, on_verdict, keep)
    with replaying(replayer.guard, path, answered=not live_asks):
        report = await replayer.replay.run(then=then)
    return replayer.outcome(report)


class RecordedOutputError(ValueError):
    """``replay_events`` met the guard's own recorded output (a reminder,
    a denial, a halt request of one of its policies) in a stream that has
    no record beside it: only a replay of the stream's log can answer from
    that output (``rescue``'s recorded advice) and compare it."""


async def replay_events(
    events: Iterable[AnyEvent],
    config: Config | None = None,
    *,
    on_verdict: Callable[[Verdict], None] | None = None,
    policies: Sequence[AnyPolicy] | None = None,
    then: Callable[[AnyEvent], None] | None = None,
    keep: bool = True,
) -> ReplayOutcome:
    """``replay_log`` for a stream of events that was never written down
    (an importer's, as ``audit`` replays a transcript): the same bus, guard
    and verdicts, without encoding the events as a log and decoding them
    back. The events are numbered ``seq`` 1, 2, ... as a log written from
    them would be, and applied as they come, each read once.

    A stream is read once, so the policies' ``replaying`` seam sees an
    empty history: that is the replay of the stream's log only while the
    stream holds none of the guard's own output, which is all a policy
    answers from. At the first event that is (``Guard.owns``),
    ``RecordedOutputError`` is raised; write the stream as a log and use
    ``replay_log``.
    """
    replayer = _Replayer(None, config, policies, on_verdict, keep)
    checked = replayer.checked
    apply = replayer.replay.apply
    with replaying(replayer.guard, ()):
        for seq, event in enumerate(events, 1):
            force_setattr(event, "seq", seq)
            await apply(event)
            if checked:
                raise RecordedOutputError(f"event {seq} is the guard's own recorded output")
            if then is not None:
                then(event)
    return replayer.outcome(replayer.replay.report)


class _Replayer:
    """One replay (of the log at ``path``, or fed events) and the guard on
    its bus, with what it compares: the guard outputs the record holds
    (``recorded``, counted by kind in ``checked``) and the ones the replay
    makes (``fresh``), and the verdicts in order (counted by action in
    ``counted``). Without ``keep`` only the counts are kept."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        config: Config | None,
        policies: Sequence[AnyPolicy] | None,
        on_verdict: Callable[[Verdict], None] | None,
        keep: bool = True,
    ) -> None:
        self.keep = keep
        self.verdicts: list[Verdict] = []
        self.counted: Counter[str] = Counter()
        self.checked: Counter[str] = Counter()
        self.recorded: list[_Output] = []
        self.fresh: list[_Output] = []
        self._denials: dict[tuple[str | None, str], tuple[int, str, Action]] = {}
        self._recorded_denials: dict[tuple[str | None, str], tuple[object, ...]] = {}
        self.unanswered = 0
        self._on_verdict = on_verdict
        self.guard = guard = Guard(config, on_action=self._on_action, policies=policies)
        self._plugins = {policy.name: policy.plugin for policy in guard.policies}
        self.replay = replay = Replay(path, withhold=self._withhold, on_restart=self._restart)
        guard.attach(replay.bus)
        replay.bus.record(self._capture)

    def _on_action(self, action: Action, trigger: Event) -> None:
        replay = self.replay
        verdict = Verdict(seq=replay.seq, call_number=replay.call_number, **action.reported())
        self.counted[verdict.action] += 1
        if self.keep:
            self.verdicts.append(verdict)
        if action.action in DENYING and isinstance(trigger, ToolCall) and not action.shadow:
            # The first denial decides the call, as on a live bus.
            self._denials.setdefault((action.agent, action.call_id), (replay.seq, self._plugins[action.policy], action))
        if self._on_verdict is not None:
            self._on_verdict(verdict)

    def _restart(self) -> None:
        """A new run of the log: its guard started afresh, and its call ids
        may repeat the earlier run's."""
        self.guard.reset()
        self._recorded_denials.clear()
        self._unanswered()

    def _unanswered(self) -> None:
        """Count the calls the replay denied whose result never came."""
        self.unanswered += len(self._denials)
        self._denials.clear()

    # Both run on every event of the log: the common kinds leave first.
    def _withhold(self, event: AnyEvent) -> bool:
        kind = type(event)
        if kind is ToolCall:
            if self._recorded_denials or self._denials:
                key = (event.agent.id if event.agent else None, event.call_id)  # type: ignore[union-attr]
                # a call again under the id: its denial is new, whatever it holds,
                # and a denied call before it under that id was never answered
                self._recorded_denials.pop(key, None)
                if self._denials.pop(key, None) is not None:
                    self.unanswered += 1
            return False
        if kind is UserMessage:
            return False
        guard = self.guard
        if kind is ToolResult:
            assert isinstance(event, ToolResult)
            if event.denied_by is not None and guard.owns(event):  # replayed, so the policies see it
                agent = event.agent.id if event.agent else None
                delivery = event.delivery()
                if self._recorded_denials.get((agent, event.call_id)) == delivery:
                    return False  # the same denial delivered again: the guard passes it over
                self._recorded_denials[(agent, event.call_id)] = delivery
                advice = event.advice if isinstance(event.advice, str) else None
                self._record(_denial(event.seq, agent, event.call_id, event.denied_by, event.content, advice))
            return False
        if not (regenerated(guard, event) or (kind is AgentStatus and guard.owns(event))):
            # A halt request naming nobody is compared as the guard's too:
            # logs may record the guard's halts without naming the plugin.
            return False
        assert isinstance(event, ContextMessage | AgentStatus)
        self._record(_message(event, event.seq))
        return True

    def _record(self, output: _Output) -> None:
        self.checked[output.what] += 1
        if self.keep:
            self.recorded.append(output)

    def _capture(self, event: Event) -> None:
        kind = type(event)
        seq = self.replay.seq
        if kind is ToolResult:
            if not self._denials:
                return
            assert isinstance(event, ToolResult)
            agent = event.agent.id if event.agent else None
            denied = self._denials.pop((agent, event.call_id), None)
            if denied is not None and self.keep:
                _, plugin, action = denied
                advice = action.advice if isinstance(event.advice, str) else None
                self.fresh.append(_denial(seq, agent, event.call_id, plugin, action.text, advice))
        elif (kind is ContextMessage or kind is AgentStatus) and self.keep and self.guard.owns(event):
            assert isinstance(event, ContextMessage | AgentStatus)
            self.fresh.append(_message(event, seq))

    def outcome(self, report: ReadReport) -> ReplayOutcome:
        self._unanswered()
        compare = functools.partial(_compare, self.recorded, self.fresh) if self.keep else list
        return ReplayOutcome(self.verdicts, report, compare, self.checked, self.unanswered, self.counted)
