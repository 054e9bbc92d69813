"""Sub-second time, end to end: ``[scenario] tick_s`` on both engines.

::

    tick_s = 1.0, step_s = 1  ──┐
                                ├─ same time series, same kpis.json (mosaik and direct)
    tick_s = 0.1, step_s = 1  ──┘
    tick_s = 0.1, step_s = 0.1 ── the datacenter's compute/communication swing shows; the
                                  recorder's index is 100 ms apart; energies integrate 0.1 s

The golden study (datacenter, FMU cooling, PV, battery, grid, signals) is cut to one minute at
1 s steps for the first check; ``tests/scenarios/datacenter_short.toml`` runs 20 s at 0.1 s for
the second.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cosim

HERE = Path(__file__).resolve().parents[1] / "scenarios"
GOLDEN = HERE / "golden_short.toml"
DATACENTER = HERE / "datacenter_short.toml"


def _run(path: Path, out: Path, **overrides):
    result = cosim.run(path, out_dir=out, overrides={f"scenario.{k}": v for k, v in overrides.items()})
    assert result.ok, result.reason
    return result


@pytest.mark.parametrize("engine", ["mosaik", "direct"])
def test_whole_second_steps_give_the_same_run_at_a_tenth_of_a_second_tick(engine, tmp_path):
    """Only the unit of mosaik's clock changes: every value, every time stamp, every KPI is equal."""
    runs = [_run(GOLDEN, tmp_path / str(tick), duration_s=60, step_s=1, tick_s=tick, engine=engine)
            for tick in (1.0, 0.1)]
    a, b = (r.timeseries() for r in runs)
    assert len(a) == 60 and a.index.equals(b.index)
    different = [c for c in a.columns if not a[c].equals(b[c])]
    assert not different, f"columns that differ between tick_s = 1 and 0.1: {different[:10]}"
    assert runs[0].kpis == runs[1].kpis
    assert runs[1].metadata["tick_s"] == 0.1


def test_a_tenth_of_a_second_run_shows_the_training_swing_on_both_engines(tmp_path):
    """At 0.1 s steps each ~2 s synchronous iteration shows as a compute (high) and a
    communication (low) phase: the facility power swings by tens of kW within seconds, which
    1 s averages smooth (cosim.adapters.datacenter.cluster, ``swing_frac`` = 0.3)."""
    fine = {e: _run(DATACENTER, tmp_path / e, duration_s=20, step_s=0.1, tick_s=0.1, engine=e)
            for e in ("mosaik", "direct")}
    a, b = (fine[e].timeseries() for e in ("mosaik", "direct"))
    assert a.index.equals(b.index) and all(a[c].equals(b[c]) for c in a.columns)
    assert fine["mosaik"].kpis == fine["direct"].kpis
    assert len(a) == 200
    assert (a.index[1:] - a.index[:-1] == pd.Timedelta(milliseconds=100)).all(), "the index keeps 100 ms"
    p_fine = a["campus.p_mw"].to_numpy()
    coarse = _run(DATACENTER, tmp_path / "coarse", duration_s=20, step_s=1).timeseries()["campus.p_mw"].to_numpy()
    means = p_fine.reshape(20, 10).mean(axis=1)
    # each 1 s step keeps the jobs' mean power: the 1 s means of the 0.1 s run are the 1 s run
    assert np.allclose(means, coarse, rtol=1e-5, atol=0.0)
    # ... and inside each second the phases move the facility power by tens of kW, which a
    # 1 s step cannot show
    within_mw = np.max(np.abs(p_fine - np.repeat(means, 10)))
    assert within_mw > 0.02, f"no visible swing inside the seconds: {within_mw * 1000:.1f} kW"
    # energies integrate the real 0.1 s step: the same energy as 200 rows of p * 0.1 s
    kpis = fine["direct"].kpis
    assert kpis["entities"]["campus"]["energy_mwh"] == pytest.approx(p_fine.sum() * 0.1 / 3600.0, rel=1e-6)
    assert kpis["duration_h"] == pytest.approx(20 / 3600.0, abs=1e-9)


@pytest.mark.parametrize("overrides, expect", [
    ({"tick_s": 0.3}, "tick_s"),
    ({"tick_s": 0.1, "step_s": 0.25}, "not a whole number of ticks"),
    ({"step_s": 0.5}, "not a whole number of ticks"),
])
def test_steps_that_are_no_whole_number_of_ticks_are_refused(overrides, expect):
    with pytest.raises(cosim.ScenarioError, match=expect):
        cosim.load_scenario(DATACENTER, {f"scenario.{k}": v for k, v in overrides.items()})
