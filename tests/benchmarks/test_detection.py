"""The detection benchmark's thresholds for the ``recommended`` preset.

``benchmarks/detection`` scores every config on labelled stretches of the
synthetic sessions, the repository's scenarios and the real transcripts
of ``tests/data/transcripts``; ``docs/policies/recommended.md`` has the table. This test
re-runs it and holds the preset to what it promises.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks.detection.run import CONFIGS, load_labels, score, table
from guard import Config

pytestmark = pytest.mark.anyio


async def test_recommended_meets_its_promises(anyio_backend: str) -> None:
    scores, _, notes = await score({"recommended": CONFIGS["recommended"]})
    (recommended,) = scores
    assert notes == []
    assert recommended.legit_denials == 0, table(scores)
    assert recommended.legit_advisories <= 2, table(scores)
    assert recommended.caught >= 0.95 * recommended.loops, table(scores)
    assert max(recommended.wasted) <= 3, table(scores)
    assert statistics.median(recommended.wasted) <= 1, table(scores)


async def test_the_default_config_misses_what_the_preset_catches(anyio_backend: str) -> None:
    """The benchmark can fail: ``remind`` alone (the default) misses cycles,
    failure streaks and cosmetic-argument loops."""
    scores, _, _ = await score({"no config": Config()})
    (default,) = scores
    assert default.caught < 0.95 * default.loops


def test_every_label_names_its_reason() -> None:
    stretches, _ = load_labels()
    assert stretches
    for stretch in stretches:
        assert stretch.reason.strip(), stretch.name
        assert stretch.calls[0] <= stretch.calls[1], stretch.name
        assert all(stretch.calls[0] <= n <= stretch.calls[1] for n in stretch.only), stretch.name
    kinds = {s.kind for s in stretches if s.source == "scenario"}
    assert {"poll", "paging", "retry", "re-read", "error streak", "failed edits", "cosmetic args"} <= kinds
    assert {"interjection", "identical writes", "cycle"} <= kinds
