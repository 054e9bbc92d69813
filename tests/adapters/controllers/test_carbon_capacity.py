"""Carbon-aware capacity curves: the day-ahead policies on hand-computed days, the FlexLoad
plant, and scenarios/carbon_aware.toml end to end for vcc, explorer and no control.

Invariants (issue #6): the day's flexible total is kept, carbon falls against no control;
VCC's exact minimum is never above Carbon Explorer's simpler rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.adapters.controllers.carbon_capacity import (
    FlexLoad, FlexLoadParams, explorer_limits, flat_limits, plan, vcc_limits,
)

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "carbon_aware.toml"


def test_vcc_fills_the_cleanest_hours_first():
    ci = [100.0, 300.0, 200.0, 400.0]
    assert vcc_limits(ci, 3.0, 1.5) == pytest.approx([1.5, 0.0, 1.5, 0.0])
    assert vcc_limits(ci, 3.0, 1.0) == pytest.approx([1.0, 1.0, 1.0, 0.0])
    # a floor in every hour, the rest cleanest first
    assert vcc_limits(ci, 3.0, 1.5, p_flex_min_mw=0.25) == pytest.approx([1.5, 0.25, 1.0, 0.25])


def test_explorer_spreads_evenly_below_the_median():
    ci = [100.0, 150.0, 290.0, 300.0]  # median 220: hours 0 and 1 are the clean ones
    assert explorer_limits(ci, 2.0, 2.0) == pytest.approx([1.0, 1.0, 0.0, 0.0])
    assert vcc_limits(ci, 2.0, 2.0) == pytest.approx([2.0, 0.0, 0.0, 0.0])
    # what does not fit under the clean hours' room goes to the cleanest of the rest
    assert explorer_limits(ci, 3.0, [1.0, 1.0, 2.0, 2.0]) == pytest.approx([1.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("seed", range(5))
def test_daily_total_kept_and_carbon_ordered(seed):
    rng = np.random.default_rng(seed)
    ci = rng.uniform(50, 500, 24)
    room = rng.uniform(0.5, 2.0, 24)
    e = 0.6 * room.sum()
    limits = {p: plan(p, ci, e, room) for p in ("vcc", "explorer", "none")}
    for policy, x in limits.items():
        assert x.sum() == pytest.approx(e)
        if policy != "none":
            assert np.all(x <= room + 1e-9) and np.all(x >= -1e-12)
    carbon = {p: float(ci @ x) for p, x in limits.items()}
    assert carbon["vcc"] <= carbon["explorer"] + 1e-9
    assert carbon["explorer"] < carbon["none"]


def test_refuses_work_that_does_not_fit():
    with pytest.raises(ValueError, match="does not fit under the headroom"):
        vcc_limits(np.ones(24), 30.0, 1.0)
    with pytest.raises(ValueError, match="p_flex_min_mw"):
        vcc_limits(np.ones(24), 2.0, 1.0, p_flex_min_mw=0.5)
    assert flat_limits(12.0) == pytest.approx(np.full(24, 0.5))


def test_flexload_serves_the_day_under_its_limits():
    load = FlexLoad(FlexLoadParams(e_day_mwh=6.0))
    served = [load.step(k * 900, 900.0, 2.0 if k < 8 else None)["p_mw"] for k in range(96)]
    assert served[:3] == pytest.approx([2.0, 2.0, 2.0])  # 2 MW while the backlog lasts: 3 h = 6 MWh
    assert sum(served) * 0.25 == pytest.approx(6.0) and min(served) >= 0.0
    assert load.backlog_mwh == pytest.approx(0.0)


def test_scenario_keeps_the_daily_total_and_lowers_carbon(tmp_path):
    carbon, served = {}, {}
    for policy in ("vcc", "explorer", "none"):
        result = cosim.run(SCENARIO, out_dir=tmp_path / policy, overrides={"entities.vcc.policy": policy})
        assert result.ok, result.reason
        ts = result.timeseries()
        dt_h = 300 / 3600
        site = ts["batch.p_mw"] + ts["campus.p_mw"]
        carbon[policy] = float((site * ts["grid_ci.ci_g_kwh"]).sum() * dt_h / 1000.0)
        per_day = ts["batch.p_mw"].groupby(ts.index.date).sum() * dt_h
        served[policy] = per_day.to_numpy()
    for policy, days in served.items():
        assert days == pytest.approx([12.0, 12.0], abs=1e-6), policy
    assert carbon["vcc"] < carbon["explorer"] < carbon["none"]
    assert carbon["vcc"] < 0.85 * carbon["none"]
