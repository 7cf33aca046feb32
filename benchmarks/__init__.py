"""The project's benchmarks: ``python -m benchmarks`` (see docs/performance.md).

Sections: bus dispatch against a bare await loop and peer buses, the full
path of a tool call (bus, each policy, session log) against its floor, log
writing against raw writes, replay against msgspec decoding alone, loop
detection against other loop guards, memory per idle agent, the Claude Code
command hook against a bare interpreter start, and audit at scale. Peers are
optional (``pip install --group bench``). This folder is not part of the
installed package: the library and its command line never import it.
"""

from benchmarks._measure import Row
from benchmarks.settings import SECTIONS, Settings

__all__ = ["SECTIONS", "Row", "Settings"]
