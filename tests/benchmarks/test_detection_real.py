"""The real-transcript benchmark: ``recommended`` on the held-out half.

``benchmarks/detection/real.py`` scores labelled stretches of real public
transcripts (logs under ``../shared/corpus/real``, fetched data kept out of the
repository); ``docs/policies/recommended.md`` has the table. The held-out half
is the published figure: this test re-runs it and records what ``recommended``
reaches there.
"""

from __future__ import annotations

import pytest

from benchmarks.detection.real import (
    EXTERNAL,
    HALVES,
    LABELS,
    PROMISE,
    data_folder,
    external_folder,
    half_of,
    load_real,
    score_half,
    split,
    table,
)
from benchmarks.detection.run import CONFIGS, Score, score_stretches

pytestmark = pytest.mark.anyio

_DATA = data_folder()
# The real transcripts are public data the repository does not carry: these
# tests are left out of the default run (the `real_data` marker) and skip
# where the data is absent.
_needs_data = pytest.mark.skipif(not _DATA.is_dir(), reason=f"real transcripts absent at {_DATA} (see real/DATA.md)")
_EXTERNAL = external_folder()
_needs_external = pytest.mark.skipif(
    _EXTERNAL is None or not _EXTERNAL.is_dir(),
    reason="no checkout of multi-swe-bench/experiments ($REPEAT_TOOL_GUARD_EXTERNAL_DATA; see real/DATA.md)",
)


async def _external_held_out() -> Score:
    stretches = split(load_real(EXTERNAL, "external"))["held-out"]
    (recommended,) = await score_stretches(stretches, {"recommended": CONFIGS["recommended"]}, external=_EXTERNAL)
    return recommended


@pytest.mark.real_data
@_needs_data
async def test_recommended_advises_on_at_most_2_percent_of_held_out_legit_stretches(anyio_backend: str) -> None:
    (recommended,) = await score_half("held-out")
    assert recommended.legits >= 150, table([("held-out", recommended)])
    assert recommended.legit_stretches_advised <= PROMISE.legit_advised_share * recommended.legits, table(
        [("held-out", recommended)]
    )


@pytest.mark.real_data
@_needs_data
async def test_recommended_meets_its_promises_on_held_out_real_transcripts(anyio_backend: str) -> None:
    (recommended,) = await score_half("held-out")
    assert PROMISE.misses(recommended) == [], table([("held-out", recommended)])


def test_every_real_stretch_is_labelled_with_its_reason_and_source() -> None:
    stretches = load_real()
    assert stretches
    for stretch in stretches:
        assert stretch.reason.strip(), stretch.name
        assert stretch.origin.count(":") >= 1, stretch.name
        assert stretch.calls[0] <= stretch.calls[1], stretch.name
        assert all(stretch.calls[0] <= n <= stretch.calls[1] for n in stretch.only), stretch.name
    assert LABELS.with_name("DATA.md").read_text(encoding="utf-8").count("| MIT") >= 1


def test_a_session_never_straddles_the_halves() -> None:
    halves = split(load_real())
    assert set(halves) == set(HALVES)
    origins = {half: {s.origin for s in stretches} for half, stretches in halves.items()}
    assert not origins["tune"] & origins["held-out"]
    assert all(half_of(o) == "tune" for o in origins["tune"])
    assert min(len(s) for s in halves.values()) > 0.3 * sum(len(s) for s in halves.values())


@pytest.mark.real_data
@_needs_external
async def test_recommended_denies_no_legit_work_on_held_out_external_transcripts(anyio_backend: str) -> None:
    recommended = await _external_held_out()
    assert recommended.legit_stretches_denied == 0, table([("held-out", recommended)])
    assert recommended.loops >= 25


@pytest.mark.real_data
@_needs_external
@pytest.mark.xfail(
    strict=False,
    reason="on held-out multi-swe-bench transcripts recommended catches all 28 loops but advises on 2 of 40 "
    "legit stretches (5.0 %, above 2 %); see docs/policies/recommended.md",
)
async def test_recommended_meets_its_promises_on_held_out_external_transcripts(anyio_backend: str) -> None:
    recommended = await _external_held_out()
    assert PROMISE.misses(recommended) == [], table([("held-out", recommended)])


def test_external_labels_name_their_source_and_reason() -> None:
    stretches = load_real(EXTERNAL, "external")
    assert sum(1 for s in stretches if s.label == "loop") >= 30
    for stretch in stretches:
        assert stretch.reason.strip(), stretch.name
        assert stretch.origin.startswith("multi-swe-bench/experiments:"), stretch.name
        assert stretch.session, stretch.name
        assert stretch.period <= len(stretch.members({})), stretch.name
