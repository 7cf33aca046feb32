"""The results table, as aligned text, Markdown or JSON lines."""

from __future__ import annotations

import msgspec

from guard.bench._measure import Row

__all__ = ["json_lines", "markdown", "text"]


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
