"""Redaction on the shared corpus: throughput, and every finding, for review.

    python benchmarks/redaction.py [--corpus ../shared/corpus] [--show] [--rounds 7]
    python benchmarks/redaction.py --source . --show   # this repository's code and docs

Every text that can leave the machine in a rescue question is collected from
the real transcripts: user messages, each call's arguments (canonical JSON,
as the question quotes them) and each result. The corpus holds no real
credentials, so every finding is a false redaction unless review says
otherwise; ``--show`` prints each with 40 characters of context (the secret
itself masked but for its first 4 characters) so they can be judged.

``--source DIR`` counts findings in the text files under DIR instead (each
file one text), leaving out what holds secrets on purpose: ``tests/``, the
rule files and the redaction page's examples; on this repository it measures
false redactions on code, where names like ``token`` and ``secret`` abound.

Throughput is the best of ``--rounds`` passes of the shipped ``Redactor``
over all texts, against the previous redactor (twelve Python ``re`` rules)
over the same texts, the two taking turns in the same run: the machine is
shared, so the ratio is the figure to compare.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from bus import ToolCall, ToolResult, UserMessage
from guard import canonical_json
from guard.importers import open_sessions
from guard.redact import REDACTED, Redactor

ROOT = Path(__file__).resolve().parents[1]

# The redactor before RE2 and the rule files (kept here as the baseline).
_OLD = "[REDACTED]"
_OLD_RULES = [
    (re.compile(p, re.DOTALL), r)
    for p, r in (
        (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", _OLD),
        (r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?=@)", rf"\g<keep>{_OLD}"),
        (r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", rf"\g<keep>{_OLD}"),
        (r"(?i)(?P<keep>\bauthorization\s*[:=]\s*(?:basic|token)\s+)\S+", rf"\g<keep>{_OLD}"),
        (r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}", _OLD),
        (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", _OLD),
        (r"\bgh[pousr]_[A-Za-z0-9]{30,}", _OLD),
        (r"\bgithub_pat_[A-Za-z0-9_]{40,}", _OLD),
        (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", _OLD),
        (r"\bAIza[0-9A-Za-z_-]{35}", _OLD),
        (r"\bglpat-[A-Za-z0-9_-]{20,}", _OLD),
        (
            r"(?i)(?P<keep>\b[\w.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|passwd|credential)[\w.-]*"
            r"[\"']?\s*[:=]\s*[\"']?)(?!\d+\b)[^\s\"',;]{4,}",
            rf"\g<keep>{_OLD}",
        ),
    )
]


def old_redact(text: str) -> str:
    for pattern, replacement in _OLD_RULES:
        text = pattern.sub(replacement, text)
    return text


def corpus_texts(corpus: Path) -> Iterator[tuple[str, str, str]]:
    """(file, place, text) for every user message, call's arguments and result."""
    for path in sorted(corpus.rglob("*")):
        if not path.is_file() or path.name == "SOURCES.md" or path.name.endswith(".meta.json"):
            continue
        label = str(path.relative_to(corpus))
        for session in open_sessions(path):
            for event in session.events():
                if isinstance(event, UserMessage):
                    yield label, "user message", event.text
                elif isinstance(event, ToolCall):
                    yield label, "tool arguments", canonical_json(event.args).decode("utf-8", "replace")
                elif isinstance(event, ToolResult):
                    yield label, "tool result", event.content


_SOURCE_SUFFIXES = {".py", ".md", ".toml", ".sh", ".yaml", ".yml", ".json", ".jsonl", ".txt"}
_ON_PURPOSE = ("tests", "secret_rules", ".venv", ".git", "redaction.md")


def source_texts(root: Path) -> Iterator[tuple[str, str, str]]:
    """(file, "file", text) for every text file under ``root`` but those
    holding secrets on purpose."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and path.suffix in _SOURCE_SUFFIXES and not set(relative.parts) & set(_ON_PURPOSE):
            yield str(relative), "file", path.read_text("utf-8", "replace")


def _best(rounds: int, work: list[str], *redactors: Callable[[str], str]) -> list[float]:
    """The best time of each redactor over ``work``, the redactors taking
    turns round by round so that load from other jobs hits them alike."""
    best = [float("inf")] * len(redactors)
    for _ in range(rounds):
        for i, redact in enumerate(redactors):
            started = time.perf_counter()
            for text in work:
                redact(text)
            best[i] = min(best[i], time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--source", type=Path, help="measure the text files under this folder instead")
    parser.add_argument("--show", action="store_true", help="print every finding with its context")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.source is not None:
        texts = list(source_texts(args.source))
    elif (args.corpus / "SOURCES.md").is_file():
        texts = list(corpus_texts(args.corpus))
    else:
        print(f"no corpus at {args.corpus} (pass --corpus)", file=sys.stderr)
        return 2
    work = [text for _, _, text in texts]
    chars = sum(len(t) for t in work)
    redactor = Redactor()

    findings: Counter[str] = Counter()
    places: Counter[str] = Counter()
    shown: list[str] = []
    for label, place, text in texts:
        data = text.encode("utf-8", "surrogatepass")
        for rule, start, end in redactor.findings(text):
            findings[rule.id] += 1
            places[place] += 1
            if args.show:
                secret = data[start:end].decode("utf-8", "replace")
                before = data[max(0, start - 40) : start].decode("utf-8", "replace")
                after = data[end : end + 40].decode("utf-8", "replace")
                masked = secret[:4] + "…" if len(secret) > 4 else secret
                shown.append(f"  {rule.id:<24} {label} ({place}): {before!r} [{masked!r}] {after!r}")
    markers = sum(redactor(t).count(REDACTED) - t.count(REDACTED) for t in work)

    new, old = _best(args.rounds, work, redactor, old_redact)
    mb = chars / 1e6
    print(f"corpus: {len(texts)} texts ({mb:.2f} M characters) from {args.source or args.corpus}")
    print(f"redaction, best of {args.rounds}: {new:.3f} s ({mb / new:.1f} M chars/s)")
    print(f"previous redactor (Python re), same texts: {old:.3f} s ({mb / old:.1f} M chars/s)")
    print(f"ratio new/previous: {new / old:.2f}x the time")
    print(f"findings on the corpus: {sum(findings.values())} ({markers} markers after merging)")
    for rule_id, count in findings.most_common():
        print(f"  {rule_id}: {count}")
    for place, count in places.most_common():
        print(f"  in {place}: {count}")
    for line in shown:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
