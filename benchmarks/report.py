"""The results table, as aligned text, Markdown or JSON lines."""

from __future__ import annotations

import statistics

import msgspec

from benchmarks._measure import Row

__all__ = ["combine", "json_lines", "markdown", "text"]


def combine(runs: list[list[Row]]) -> list[Row]:
    """One row per case: the median over runs of its value, its microseconds
    and its ratio (each ratio was taken within its own run), the notes of the
    run with the median value, and how many runs met the target. A single
    run is returned as it is."""
    if len(runs) == 1:
        return runs[0]
    cases: dict[tuple[str, str], list[Row]] = {}
    for rows in runs:
        for row in rows:
            cases.setdefault((row.section, row.name), []).append(row)
    combined = []
    for same in cases.values():
        first = sorted(same, key=lambda row: row.rate)[len(same) // 2]  # its notes are the median run's
        micros = [r.micros for r in same if r.micros is not None]
        ratios = [r.ratio for r in same if r.ratio is not None]
        met = [r.met for r in same if r.met is not None]
        combined.append(
            msgspec.structs.replace(
                first,
                rate=statistics.median(r.rate for r in same),
                micros=statistics.median(micros) if micros else None,
                ratio=statistics.median(ratios) if ratios else None,
                target=f"{first.target}, met in {sum(met)} of {len(same)} runs" if met else first.target,
                met=sum(met) * 2 > len(same) if met else None,
            )
        )
    return combined


def _number(row: Row) -> str:
    if row.rate == 0.0 and row.unit.endswith("/s"):
        return "-"
    if row.unit == "bytes":
        return f"{row.rate:,.0f} B"
    return f"{row.rate:,.0f}"


def _cells(row: Row) -> list[str]:
    micros = f"{row.micros:.3f}" if row.micros is not None else ""
    ratio = f"{row.ratio:.3f}x" if row.ratio is not None else ""
    met = "" if row.met is None else ("met" if row.met else "MISSED")
    target = f"{row.target} ({met})" if row.target else ""
    return [row.name, _number(row), row.unit, micros, ratio, row.extra, target]


_HEAD = ["case", "value", "unit", "us each", "vs baseline", "notes", "target"]


def text(rows: list[Row], machine: dict[str, str]) -> str:
    """Aligned columns, one block per section, for a terminal."""
    out = [", ".join(f"{k} {v}" for k, v in machine.items()), ""]
    for section, block in _sections(rows):
        cells = [_HEAD, *(_cells(row) for row in block)]
        widths = [max(len(line[i]) for line in cells) for i in range(len(_HEAD))]
        out.append(f"== {section} (baseline: {block[0].baseline or '-'})")
        out.extend("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in cells)
        out.append("")
    return "\n".join(out)


def markdown(rows: list[Row], machine: dict[str, str]) -> str:
    """One Markdown table per section, for docs/performance.md."""
    out = ["| machine | |", "|---|---|", *(f"| {k} | {v} |" for k, v in machine.items()), ""]
    for section, block in _sections(rows):
        out.append(f"**{section}** (baseline: {block[0].baseline or '-'})")
        out.append("")
        out.append("| " + " | ".join(_HEAD) + " |")
        out.append("|" + "---|" * len(_HEAD))
        out.extend("| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(row)) + " |" for row in block)
        out.append("")
    return "\n".join(out)


def json_lines(rows: list[Row], machine: dict[str, str]) -> str:
    """The machine, then one JSON object per row."""
    return "\n".join(msgspec.json.encode(item).decode() for item in [machine, *rows]) + "\n"


def _sections(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.section, []).append(row)
    return list(grouped.items())
