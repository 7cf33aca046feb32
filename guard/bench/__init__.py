"""The benchmark behind ``repeat-tool-guard bench``.

Sections: bus dispatch against a bare await loop and peer buses, the full
path of a tool call (bus, each policy, session log), log writing against raw
writes, replay against msgspec decoding alone, loop detection against other
loop guards, and memory per idle agent. Peers are optional
(``pip install 'repeat-tool-guard[bench]'``). See ``docs/performance.md``.
"""

from guard.bench._measure import Row
from guard.bench.settings import SECTIONS, Settings

# ``guard.bench.runner`` (``run``, ``machine``) is left to be imported where it
# is used: the command line registers ``bench`` on every start, including
# every Claude Code hook invocation, and must not pay for the sections.
__all__ = ["SECTIONS", "Row", "Settings"]
