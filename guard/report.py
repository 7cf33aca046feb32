"""Presenting an audit: a table for the terminal and a self-contained HTML page.

The HTML page needs nothing but itself: styles are inline, there is no
script, font or image to fetch, so it opens the same offline, in a mail
attachment or years later.
"""

from __future__ import annotations

import html
import os
import sys
from collections.abc import Sequence

from guard._text import one_line
from guard.audit import (
    LOOP_SHARE_ANCHOR,
    MAST_STEP_REPETITION,
    MAST_TRACES,
    AuditReport,
    AuditTotals,
    FileError,
    Loop,
    LoopRate,
    PolicyAction,
    SessionAudit,
    Timeline,
)

__all__ = ["TIMELINE_LIMIT", "human_bytes", "human_count", "render_html", "render_table"]

TIMELINE_LIMIT = 4000
"""Calls drawn per session; a longer session's timeline says how many it left out."""

_SHAPES = ("circle", "square", "diamond", "triangle")


def human_bytes(size: int) -> str:
    """``512 B``, ``3.4 KB``, ``1.2 MB`` (powers of 1024)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _labels(sessions: Sequence[SessionAudit]) -> list[str]:
    """Session labels without the directory the files' all share; a
    session of a fleet (``redis://host:port/db#id``) keeps its whole label."""
    labels = [s.label for s in sessions]
    parents = [os.path.dirname(label) for label in labels if "://" not in label]
    common = os.path.commonpath(parents) if parents and len({p.startswith("/") for p in parents}) == 1 else ""
    if len(common) <= 1:
        return labels
    return [label if "://" in label else label[len(common) :].lstrip("/") for label in labels]


def _first(action: PolicyAction | None) -> str:
    return f"{action.mark}@{action.call_number}" if action is not None else "—"


def _saved(calls: dict[str, int], tokens: dict[str, int]) -> str:
    """Each policy's saving, as ``remind 3 calls (~1.2k tokens)``."""
    return ", ".join(f"{p} {n} calls (~{human_count(tokens.get(p, 0))} tokens)" for p, n in calls.items())


def human_count(n: int) -> str:
    """A count for people: ``950``, ``12.3k``, ``4.1M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def render_table(report: AuditReport) -> str:
    """The audit as text: totals, one row per session, the loops, the errors."""
    t = report.totals
    lines = [
        f"audited {t.sessions} sessions in {t.files} files: {t.calls} tool calls, {t.loops} loops, "
        f"{t.wasted_calls} calls wasted (~{human_count(t.wasted_tokens)} tokens; {human_bytes(t.wasted_bytes)} of "
        f"{human_bytes(t.output_bytes)} tool output) in {report.seconds:.2f} s",
        "policies: " + (", ".join(f"{p} (acted in {t.sessions_acted_on[p]})" for p in report.policies) or "none"),
        f"sessions with a loop: {t.sessions_with_loops} of {t.sessions} ({t.loop_share:.1f} %); "
        f"published anchor: {LOOP_SHARE_ANCHOR}",
        "would have saved: " + (_saved(t.saved_calls, t.saved_tokens) or "nothing"),
        "(tokens are estimated: bytes of the calls' arguments and output / 4)",
    ]
    if t.not_transcripts:
        lines.append(f"{t.not_transcripts} files found were not transcripts and were left out")
    if t.skipped:
        lines.append(
            f"skipped on import: {sum(t.skipped.values())} in {t.sessions_with_skips} of {t.sessions} sessions "
            f"({_reasons(t.skipped)})"
        )
    labels = _labels(report.sessions)
    header = ["session", "format", "agents", "calls", "run", "loops", "wasted", "tokens", "output", *report.policies]
    rows = [
        [
            label if len(label) <= 48 else "…" + label[-47:],
            s.format,
            str(s.agents),
            str(s.calls),
            str(s.longest_run),
            str(len(s.loops)),
            str(s.wasted_calls),
            f"~{human_count(s.wasted_tokens)}",
            human_bytes(s.output_bytes),
            *(_first(s.first_actions.get(p)) for p in report.policies),
        ]
        for label, s in zip(labels, report.sessions, strict=True)
    ]
    if rows:
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        numeric = {2, 3, 4, 5, 6, 7, 8}
        lines.append("")
        for row in [header, *rows]:
            cells = [
                c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  ".join(cells).rstrip())
    loops = [(label, loop) for label, s in zip(labels, report.sessions, strict=True) for loop in s.loops]
    if loops:
        lines += ["", "loops:"]
        for label, loop in loops:
            firsts = ", ".join(f"{p} {a.mark}@{a.call_number}" for p, a in loop.first_actions.items()) or "no policy"
            lines.append(
                f"  {label}  [{loop.agent}] {loop.tool} ×{loop.occurrences} (run {loop.longest_run}): "
                f"{firsts}; wasted {loop.wasted_calls} calls, ~{human_count(loop.wasted_tokens)} tokens, "
                f"{human_bytes(loop.wasted_bytes)}"
            )
            lines.append(f"      {loop.signature}")
            lines.append(f"      would have saved: {_saved(loop.saved_calls, loop.saved_tokens) or 'nothing'}")
    lines += _rates_table(t.by_model, t.by_tool)
    lines += _skips_table(labels, report.sessions)
    if report.errors:
        lines += ["", f"could not read {len(report.errors)} files:"]
        lines += [_listed(e) for e in report.errors]
    if report.not_transcripts:
        lines += ["", f"left out {len(report.not_transcripts)} files that are not transcripts:"]
        lines += [_listed(e) for e in report.not_transcripts]
    return "\n".join(lines) + "\n"


_PROBLEMS_SHOWN = 3  # per session; --json has them all


def _reasons(skipped: dict[str, int]) -> str:
    """Counts by reason, as ``bad-record 1, invalid-json 3``."""
    return ", ".join(f"{reason} {n}" for reason, n in sorted(skipped.items()))


def _problems(s: SessionAudit) -> tuple[list[str], int]:
    """The session's first problems, each on one line and cut, and how many
    more there are."""
    shown = [one_line(problem, 300) for problem in s.problems[:_PROBLEMS_SHOWN]]
    return shown, len(s.problems) - len(shown)


def _skipping(labels: list[str], sessions: Sequence[SessionAudit]) -> list[tuple[str, SessionAudit]]:
    """The sessions whose import skipped something, each with its label."""
    return [(label, s) for label, s in zip(labels, sessions, strict=True) if s.skipped]


def _skips_table(labels: list[str], sessions: Sequence[SessionAudit]) -> list[str]:
    """Each session whose import skipped something, with its counts and
    where, for the terminal; nothing when no session skipped anything."""
    skipping = _skipping(labels, sessions)
    if not skipping:
        return []
    lines = ["", "skipped on import, by session:"]
    for label, s in skipping:
        lines.append(f"  {label}: {_reasons(s.skipped)}")
        shown, more = _problems(s)
        lines += [f"      {problem}" for problem in shown]
        if more:
            lines.append(f"      … {more} more (see --json)")
    return lines


def _listed(error: FileError) -> str:
    """A file's entry in the table's lists, on one line whatever its name
    or reason holds (``one_line``, uncut): a newline in a file name would
    start a line that reads as another entry."""
    return f"  {one_line(error.path, sys.maxsize)}: {one_line(error.reason, sys.maxsize)}"


def _anchor() -> str:
    return f"MAST: {MAST_STEP_REPETITION:.1%} of {MAST_TRACES:,} multi-agent traces"


def _rate_row(rate: LoopRate) -> str:
    return (
        f"{rate.looped}/{rate.sessions} sessions looped ({rate.share:.1%}), "
        f"{rate.wasted_calls} calls wasted (~{human_count(rate.wasted_tokens)} tokens)"
    )


def _rates_table(by_model: list[LoopRate], by_tool: list[LoopRate]) -> list[str]:
    """Loop rate per model and the tools that wasted the most calls, for the terminal."""
    lines: list[str] = []
    if by_model:
        lines += ["", f"loop rate by model (a loop some policy stepped in on; {_anchor()}):"]
        lines += [f"  {rate.name}: {_rate_row(rate)}" for rate in by_model]
    if by_tool:
        lines += ["", "top tools by wasted calls (sessions using the tool that looped on it):"]
        lines += [f"  {rate.name}: {_rate_row(rate)}" for rate in by_tool]
    return lines


def _rates_html(by_model: list[LoopRate], by_tool: list[LoopRate]) -> str:
    if not by_model and not by_tool:
        return ""
    out = ["<div class=policies>"]
    for title, rates, note in (
        ("loop rate by model", by_model, _anchor()),
        ("top tools by wasted calls", by_tool, "sessions using the tool that looped on it"),
    ):
        if not rates:
            continue
        rows = "".join(
            f"<div class=stats><b>{_e(r.name)}</b> · {r.looped}/{r.sessions} sessions ({r.share:.1%}) · "
            f"{r.wasted_calls:,} calls wasted (~{human_count(r.wasted_tokens)} tokens)</div>"
            for r in rates
        )
        out.append(
            f"<div class='card policy'><div class=lbl>{_e(title)}</div>{rows}<div class=stats>{_e(note)}</div></div>"
        )
    out.append("</div>")
    return "".join(out)


_PALETTE = (
    "#2f7de1",
    "#11a39a",
    "#43a047",
    "#e2731b",
    "#d6448f",
    "#0d8bbd",
    "#8a9a1b",
    "#b5651d",
    "#546e7a",
    "#00897b",
)
"""Signature colors, chosen apart from the marker colors (amber, red,
violet, black) so a repeated call never reads as a policy action."""


def _color(index: int) -> str:
    """The color of the ``index``-th repeated signature; past the palette the
    same hues come back lighter, then darker."""
    base = _PALETTE[index % len(_PALETTE)]
    shade = (index // len(_PALETTE)) % 3
    return base if shade == 0 else f"color-mix(in srgb, {base} 62%, {'white' if shade == 1 else 'black'})"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


_CSS = """
:root{--bg:#f4f5f9;--card:#fff;--ink:#1b2030;--muted:#667089;--line:#e3e6ee;--single:#d3d8e3;
--remind:#e69b00;--deny:#d92d20;--escalate:#7a3ff2;--halt:#111827}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1220px;margin:0 auto;padding:32px 28px 64px}
h1{font-size:26px;margin:0 0 4px;letter-spacing:-.01em}
h2{font-size:15px;margin:0;font-weight:650;word-break:break-all}
.sub{color:var(--muted);margin:0 0 22px}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:14px;margin-bottom:14px}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:14px 16px;
box-shadow:0 1px 2px rgba(20,30,60,.04)}
.big{font-size:26px;font-weight:700;letter-spacing:-.02em}
.lbl{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.06em}
.policies{display:flex;gap:14px;flex-wrap:wrap;margin-bottom:14px}
.policy{flex:1;min-width:220px}
.policy b{font-size:16px}
.legend{display:flex;gap:18px;flex-wrap:wrap;align-items:center;color:var(--muted);font-size:12.5px;margin:18px 0 10px}
.legend span{display:inline-flex;align-items:center;gap:6px}
.session{background:var(--card);border:1px solid var(--line);border-radius:14px;margin:16px 0;overflow:hidden;
box-shadow:0 1px 2px rgba(20,30,60,.04)}
.shead{padding:14px 18px;border-bottom:1px solid var(--line);display:flex;gap:14px;align-items:baseline;flex-wrap:wrap}
.badge{font-size:11.5px;padding:2px 8px;border-radius:99px;background:#eef1f7;color:#3a4460;white-space:nowrap}
.badge.hot{background:#fde8e6;color:#a3251a}
.badge.skip{background:#fff3d6;color:#7a5200}
.stats{color:var(--muted);font-size:12.5px}
.sbody{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr)}
.timeline{padding:14px 18px 16px;border-right:1px solid var(--line)}
.agent{display:grid;grid-template-columns:130px 1fr;gap:10px;align-items:start;margin:4px 0 10px}
.who{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;color:var(--muted);padding-top:10px;overflow:hidden;
text-overflow:ellipsis;white-space:nowrap}
.cells{display:flex;flex-wrap:wrap;gap:14px 3px;padding-top:10px}
.c{position:relative;width:11px;height:20px;border-radius:3px;background:var(--single)}
.c.err{background-image:repeating-linear-gradient(135deg,rgba(0,0,0,.38) 0 2px,transparent 2px 5px)}
.c i{position:absolute;left:1px;width:9px;height:9px;border:1.5px solid #fff}
.c i.m0{top:-11px}.c i.m1{top:-20px}.c i.m2{top:-29px}.c i.m3{top:-38px}
.circle{border-radius:50%}.square{border-radius:1px}.diamond{transform:rotate(45deg) scale(.85)}
.triangle{clip-path:polygon(50% 0,100% 100%,0 100%);border:0!important}
.mini{display:inline-block;width:8px;height:8px;margin-right:5px;vertical-align:0}
.white{background:#fff}
.remind{background:var(--remind)}.deny{background:var(--deny)}.escalate{background:var(--escalate)}.halt{background:var(--halt)}
.key{display:inline-block;width:11px;height:11px}
.loops{padding:12px 16px}
.loops h3{margin:2px 0 8px;font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.06em}
.loop{display:grid;grid-template-columns:12px 1fr;gap:10px;padding:9px 0;border-top:1px solid var(--line)}
.loop:first-of-type{border-top:0}
.sw{width:12px;height:12px;border-radius:3px;margin-top:3px}
.sig{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;color:#3a4460;word-break:break-all;
max-height:3.1em;overflow:hidden}
.chips{display:flex;gap:6px;flex-wrap:wrap;margin-top:5px}
.chip{font-size:11.5px;border-radius:6px;padding:1px 7px;color:#fff}
.waste{font-size:12px;color:var(--muted);margin-top:4px}
.none{color:var(--muted);font-size:13px;padding:4px 0}
.errors li{margin:4px 0;word-break:break-all}
.more{color:var(--muted);font-size:12px;margin-top:6px}
@media (max-width:900px){.cards{grid-template-columns:repeat(2,1fr)}.sbody{grid-template-columns:1fr}
.timeline{border-right:0;border-bottom:1px solid var(--line)}}
"""


def render_html(report: AuditReport, timelines: Sequence[Timeline]) -> str:
    """The audit as one self-contained HTML page: totals, each policy's
    reach, then per session a timeline of its calls (one row per agent,
    colored by signature, marked where a policy would act) beside its loops.
    ``timelines`` pairs with ``report.sessions``."""
    t = report.totals
    shapes = {policy: _SHAPES[i % len(_SHAPES)] for i, policy in enumerate(report.policies)}
    labels = _labels(report.sessions)
    out = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width,initial-scale=1'>",
        "<title>repeat-tool-guard audit</title><style>",
        _CSS,
        "</style></head><body><main>",
        "<h1>Where your agents looped</h1>",
        f"<p class=sub>repeat-tool-guard audit of {t.sessions} sessions in {t.files} files "
        f"· policies side by side: {_e(', '.join(report.policies) or 'none')}</p>",
        "<div class=cards>",
        _card("sessions", str(t.sessions)),
        _card("tool calls", f"{t.calls:,}"),
        _card("loops found", str(t.loops)),
        _card(
            "sessions with a loop",
            f"{t.loop_share:.1f} %",
            f"{t.sessions_with_loops} of {t.sessions}; {LOOP_SHARE_ANCHOR}",
        ),
        _card("calls wasted", f"{t.wasted_calls:,}"),
        _card(
            "tokens wasted",
            f"~{human_count(t.wasted_tokens)}",
            f"estimated: (argument + output bytes) / 4; {human_bytes(t.wasted_bytes)} of "
            f"{human_bytes(t.output_bytes)} output",
        ),
        "</div><div class=policies>",
    ]
    for policy in report.policies:
        counts = ", ".join(f"{n} {k.split(':', 1)[1]}" for k, n in t.actions.items() if k.startswith(f"{policy}:"))
        out.append(
            f"<div class='card policy'><div class=lbl>policy</div>"
            f"{_shape(shapes[policy], 'halt')} <b>{_e(policy)}</b> would have acted in "
            f"<b>{t.sessions_acted_on.get(policy, 0)}</b> "
            f"of {t.sessions} sessions<div class=stats>{_e(counts or 'no actions')}</div>"
            f"<div class=stats>would have saved {t.saved_calls.get(policy, 0):,} calls "
            f"(~{human_count(t.saved_tokens.get(policy, 0))} tokens)</div></div>"
        )
    out.append("</div>")
    out.append(_rates_html(t.by_model, t.by_tool))
    out.append(_skips_html(labels, report.sessions, t))
    if report.errors or report.not_transcripts:
        out.append("<div class='card errors'><div class=lbl>not audited</div><ul>")
        out += [f"<li><b>{_e(e.path)}</b>: {_e(e.reason)}</li>" for e in [*report.errors, *report.not_transcripts]]
        out.append("</ul></div>")
    out.append(
        "<div class=legend><span><i class=key style='background:var(--single);border-radius:3px'></i>"
        "a call made once</span><span><i class=key style='background:#2f7de1;border-radius:3px'>"
        "</i><i class=key style='background:#11a39a;border-radius:3px'></i>a repeated call, one color per "
        "signature</span><span><i class=key "
        "style='background:var(--single) repeating-linear-gradient(135deg,rgba(0,0,0,.38) 0 2px,transparent 2px 5px);"
        "border-radius:3px'></i>the call failed</span>"
    )
    for mark in ("remind", "deny", "escalate", "halt"):
        out.append(f"<span>{_shape('square', mark)}{mark}</span>")
    out += [f"<span>{_shape(shape, 'halt')}{_e(policy)}</span>" for policy, shape in shapes.items()]
    out.append("</div>")
    order = sorted(
        range(len(report.sessions)),
        key=lambda i: (-report.sessions[i].wasted_calls, -len(report.sessions[i].loops), i),
    )
    for i in order:
        out.append(_session(report.sessions[i], labels[i], timelines[i], report.policies, shapes))
    out.append("</main></body></html>\n")
    return "".join(out)


def _skips_html(labels: list[str], sessions: Sequence[SessionAudit], t: AuditTotals) -> str:
    """The sessions whose import skipped something, with their counts and
    where; nothing when no session skipped anything."""
    skipping = _skipping(labels, sessions)
    if not skipping:
        return ""
    out = [
        f"<div class='card errors'><div class=lbl>skipped on import</div><div class=stats>"
        f"{sum(t.skipped.values()):,} in {t.sessions_with_skips} of {t.sessions} sessions</div><ul>"
    ]
    for label, s in skipping:
        shown, more = _problems(s)
        where = "".join(f"<br><span class=stats>{_e(problem)}</span>" for problem in shown)
        where += f"<br><span class=stats>… {more} more (see --json)</span>" if more else ""
        out.append(f"<li><b>{_e(label)}</b>: {_e(_reasons(s.skipped))}{where}</li>")
    out.append("</ul></div>")
    return "".join(out)


def _card(label: str, value: str, note: str = "") -> str:
    extra = f"<div class=stats>{_e(note)}</div>" if note else ""
    return f"<div class=card><div class=lbl>{_e(label)}</div><div class=big>{_e(value)}</div>{extra}</div>"


def _shape(shape: str, mark: str, css: str = "key") -> str:
    return f"<i class='{css} {shape} {mark}'></i>"


def _session(s: SessionAudit, label: str, timeline: Timeline, policies: list[str], shapes: dict[str, str]) -> str:
    firsts = "".join(
        f"<span class='badge hot'>{_e(p)}: {_e(a.mark)} at call {a.call_number}</span>"
        if a is not None
        else f"<span class=badge>{_e(p)}: silent</span>"
        for p, a in s.first_actions.items()
    )
    if s.wasted_calls:
        firsts += (
            f"<span class='badge hot'>{s.wasted_calls} calls wasted, ~{human_count(s.wasted_tokens)} tokens</span>"
        )
    if s.skipped:
        where = _e("\n".join(s.problems))
        firsts += f"<span class='badge skip' title='{where}'>skipped on import: {_e(_reasons(s.skipped))}</span>"
    span = _duration(s.end - s.start) if s.start > 0 else ""
    out = [
        "<section class=session><div class=shead>",
        f"<h2>{_e(label)}</h2><span class=badge>{_e(s.format)}</span>",
        f"<span class=stats>{s.calls} calls · {s.agents} agent{'s' if s.agents != 1 else ''} · longest identical run "
        f"{s.longest_run} · {human_bytes(s.output_bytes)} output{span}</span>{firsts}</div>",
        "<div class=sbody><div class=timeline>",
        _timeline(timeline, shapes),
        "</div><div class=loops><h3>loops</h3>",
    ]
    if not s.loops:
        out.append("<div class=none>No call was repeated back to back, and no policy stepped in.</div>")
    for loop in s.loops:
        out.append(_loop(loop, timeline, shapes))
    out.append("</div></div></section>")
    return "".join(out)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f" · {seconds:.0f} s"
    if seconds < 5400:
        return f" · {seconds / 60:.0f} min"
    return f" · {seconds / 3600:.1f} h"


def _timeline(timeline: Timeline, shapes: dict[str, str]) -> str:
    marks: dict[int, list[tuple[str, str, str]]] = {}
    for index, policy, mark, text in timeline.marks:
        marks.setdefault(index, []).append((policy, mark, text))
    rows: dict[int, list[str]] = {i: [] for i in range(len(timeline.agents))}
    for number, (row, sig, error, size) in enumerate(timeline.calls[:TIMELINE_LIMIT]):
        _, tool, preview = timeline.signatures[sig] if sig >= 0 else ("", "", "")
        style = f" style='background-color:{_color(sig)}'" if sig >= 0 else ""
        tip = f"call {number + 1}" + (f" · {tool} {preview}" if sig >= 0 else "") + f" · {human_bytes(size)}"
        tip += " · error" if error else ""
        inner = []
        for level, (policy, mark, text) in enumerate(marks.get(number, [])[:4]):
            tip += f"\n{policy}: {mark} — {text[:200]}"
            inner.append(f"<i class='m{level} {shapes.get(policy, 'circle')} {mark}'></i>")
        css = "c err" if error else "c"
        rows[row].append(f"<div class='{css}'{style} title='{_e(tip)}'>{''.join(inner)}</div>")
    out = []
    for index, agent in enumerate(timeline.agents):
        if not rows[index]:
            continue
        parent = timeline.parents.get(agent)
        name = f"↳ {agent}" if parent else agent
        title = f"{agent} (subagent of {parent})" if parent else agent
        out.append(
            f"<div class=agent><div class=who title='{_e(title)}'>{_e(name)}</div>"
            f"<div class=cells>{''.join(rows[index])}</div></div>"
        )
    if len(timeline.calls) > TIMELINE_LIMIT:
        out.append(f"<div class=more>{len(timeline.calls) - TIMELINE_LIMIT} more calls not drawn</div>")
    return "".join(out) or "<div class=none>No tool calls.</div>"


def _loop(loop: Loop, timeline: Timeline, shapes: dict[str, str]) -> str:
    key = (loop.agent, loop.tool, loop.signature)
    index = next((i for i, signature in enumerate(timeline.signatures) if signature == key), -1)
    swatch = _color(index) if index >= 0 else "var(--single)"
    chips = (
        "".join(
            f"<span class='chip {a.mark}'>{_shape(shapes.get(p, 'circle'), 'white', 'mini')}{_e(p)}: {_e(a.mark)} "
            f"at call {a.call_number}</span>"
            for p, a in loop.first_actions.items()
        )
        or "<span class=stats>no policy stepped in</span>"
    )
    return (
        f"<div class=loop><div class=sw style='background:{swatch}'></div><div>"
        f"<b>{_e(loop.tool)}</b> ×{loop.occurrences} <span class=stats>· longest run {loop.longest_run} · "
        f"agent {_e(loop.agent)}</span><div class=sig>{_e(loop.signature)}</div><div class=chips>{chips}</div>"
        f"<div class=waste>wasted: {loop.wasted_calls} calls, ~{human_count(loop.wasted_tokens)} tokens, "
        f"{human_bytes(loop.wasted_bytes)} of output</div>"
        f"<div class=stats>would have saved: {_e(_saved(loop.saved_calls, loop.saved_tokens) or 'nothing')}</div>"
        "</div></div>"
    )
