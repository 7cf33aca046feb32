"""Pathological inputs for every kind of pattern, before and after RE2.

    python benchmarks/patterns.py [--skip-before]

Each case runs the pattern the guard used before (Python ``re``, which
backtracks) once, and what it uses now (RE2 through ``guard.patterns`` and
``guard.redact``) best of 5, on the same input in the same run. The "before"
cases take about a minute in all; ``--skip-before`` leaves them out.

Cases:
* a 62 KB command of repeated ``sed `` through the default ``mutating_commands``
  (the old ``sed -i`` pattern was quadratic);
* 16 KB of ``a-a-…`` through the redactor (the old ``key = value`` rule was
  quadratic);
* a user pattern ``(a+)+$`` in a pattern setting (exponential under ``re``);
* a tool-name glob with many ``*`` (the old glob became a ``.*`` regex).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from redaction import old_redact

from guard.patterns import Glob, RegexSet
from guard.policies.progress import DEFAULT_MUTATING_COMMANDS, ProgressRule
from guard.redact import Redactor

_OLD_SED = re.compile(r"\bsed\b[^|;&]*\s-[a-zA-Z]*i")


def _old_glob(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def _time(work: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-before", action="store_true", help="only time the current patterns")
    args = parser.parse_args(argv)

    sed = "sed " * 15_500
    dashes = "a-" * 8_000
    nested_short = "a" * 24 + "!"
    nested_long = "a" * 131_072 + "!"
    many_stars = "*a" * 4 + "*b"
    glob_name = "a" * 120
    rule = ProgressRule((), DEFAULT_MUTATING_COMMANDS)
    redactor = Redactor()
    redactor("warm up: compile the rules this input needs " + dashes[:100])
    user = RegexSet([r"(a+)+$"], setting="turns.exempt_commands")
    glob = Glob(many_stars)

    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            f"mutating_commands on {len(sed) // 1000} KB of 'sed '",
            lambda: _OLD_SED.search(sed),
            lambda: rule.kind("bash", sed),
        ),
        (f"redactor on {len(dashes) // 1000} KB of 'a-a-…'", lambda: old_redact(dashes), lambda: redactor(dashes)),
        (
            "user pattern (a+)+$: re on 25 chars / RE2 on 128 KB",
            lambda: re.search(r"(a+)+$", nested_short),
            lambda: user.search(nested_long),
        ),
        (
            f"glob {many_stars!r} on {len(glob_name)} chars",
            lambda: _old_glob(many_stars).fullmatch(glob_name),
            lambda: glob.matches(glob_name),
        ),
    ]
    print(f"python {sys.version.split()[0]}; before: one run; after: best of 5")
    for name, before, after in cases:
        now = _time(after, 5)
        if args.skip_before:
            print(f"{name}: after {now * 1e6:.1f} µs")
            continue
        then = _time(before, 1)
        print(f"{name}: before {then * 1e3:,.1f} ms, after {now * 1e6:.1f} µs ({then / now:,.0f}x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
