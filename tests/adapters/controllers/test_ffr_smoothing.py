"""Fast frequency response and power smoothing controllers, and the swing screening KPI.

FFR timing: ERCOT's FFR responds within 15 cycles (0.25 s at 60 Hz) and holds 15 minutes
(NPRR 863). Swing band energy: a sinusoid of amplitude A has an rms of A/sqrt(2), all of it at
its frequency (Parseval), so the 0.1-2 Hz band holds a 0.5 Hz swing and not a 5 Hz one.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.adapters.controllers.ffr import Ffr, FfrParams
from cosim.adapters.controllers.smoothing import Smoother, SmootherParams
from cosim.kpis.swing import band_rms, swing_kpis

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def _ffr(**kw) -> Ffr:
    return Ffr(FfrParams.model_validate(kw))


def test_trigger_ramps_in_within_a_quarter_second_holds_and_rearms():
    ffr = _ffr(battery_mw=30.0, dc_mw=20.0, hold_s=5.0)
    f = lambda t: 59.8 if 1.0 <= t < 8.0 else 60.0  # noqa: E731
    rows = [ffr.step(k * 0.05, f(k * 0.05), 200.0) for k in range(300)]
    at = {round(k * 0.05, 2): r for k, r in enumerate(rows)}
    assert at[0.95]["p_ffr_mw"] == 0.0 and at[1.0]["p_ffr_mw"] == 0.0  # the trigger's own sample
    assert at[1.1]["p_ffr_mw"] == pytest.approx(20.0) and at[1.1]["p_set_mw"] == pytest.approx(-20.0)
    assert at[1.25]["p_ffr_mw"] == pytest.approx(50.0)  # full within 0.25 s
    assert at[1.25]["p_set_mw"] == -30.0 and at[1.25]["p_limit_mw"] == pytest.approx(180.0)  # battery first
    assert at[5.95]["event_active"] and not at[6.0]["event_active"]  # held 5 s, released
    assert at[7.5]["p_ffr_mw"] == 0.0  # still low, but not re-armed until the frequency recovers
    assert at[8.0]["p_limit_mw"] == 1e6


def test_droop_is_proportional_beyond_the_deadband():
    ffr = _ffr(mode="droop", battery_mw=10.0, deadband_hz=0.05, droop_full_hz=0.5)
    assert ffr.step(0.0, 59.96, 0.0)["p_ffr_mw"] == 0.0
    assert ffr.step(0.1, 59.70, 0.0)["p_ffr_mw"] == pytest.approx(10.0 * 0.25 / 0.5)
    assert ffr.step(0.2, 59.0, 0.0)["p_ffr_mw"] == pytest.approx(10.0)
    assert _ffr(enabled=False, battery_mw=10.0).step(0.0, 59.0, 0.0)["p_ffr_mw"] == 0.0


def test_smoother_is_an_exact_first_order_low_pass():
    sm = Smoother(SmootherParams(tau_s=2.0, p_max_mw=100.0))
    sm.step(0.1, 10.0)
    ys = [sm.step(0.1, 20.0)["p_target_mw"] for _ in range(40)]
    assert ys[-1] == pytest.approx(20.0 - 10.0 * math.exp(-2.0), rel=1e-12)  # 40 steps of 0.1 s = 2 tau
    capped = Smoother(SmootherParams(tau_s=2.0, p_max_mw=1.0))
    capped.step(0.1, 10.0)
    assert capped.step(0.1, 20.0)["p_set_mw"] == -1.0


@pytest.mark.parametrize("f_hz, inside", [(0.5, True), (1.5, True), (5.0, False)])
def test_band_rms_of_a_sinusoid(f_hz, inside):
    dt = 0.05
    t = np.arange(0, 256, dt)
    p = 100.0 + 3.0 * np.sin(2 * math.pi * f_hz * t)
    rms, peak = band_rms(p, dt)
    if inside:
        assert rms == pytest.approx(3.0 / math.sqrt(2), rel=0.02) and peak == pytest.approx(f_hz, abs=0.02)
    else:
        assert rms < 0.05
    k = swing_kpis(p, dt)
    assert k["range_1min_mw"] == pytest.approx(6.0, rel=1e-3) and k["rms_mw"] == pytest.approx(3 / math.sqrt(2), rel=1e-3)


def test_training_swing_scenario_smoothing_cuts_the_band_energy(tmp_path):
    """The shipped scenario cut to 40 s: the point of connection's 0.1-2 Hz swing is a small
    fraction of the campus's, at the iteration's ~0.5 Hz."""
    result = cosim.run(SCENARIOS / "training_swing.toml", out_dir=tmp_path,
                       overrides={"scenario.duration_s": 40, "scenario.engine": "direct"})
    assert result.ok, result.reason
    swing = result.kpis["swing"]
    assert swing["campus"]["band_peak_hz"] == pytest.approx(0.5, abs=0.1)
    assert swing["campus"]["band_rms_mw"] > 0.1
    assert swing["pcc"]["band_rms_mw"] < 0.2 * swing["campus"]["band_rms_mw"]
    assert swing["pcc"]["ramp_max_mw_s"] < 0.3 * swing["campus"]["ramp_max_mw_s"]


def test_ffr_trip_scenario_raises_the_nadir(tmp_path):
    """The shipped scenario cut to 20 s (the nadir comes ~4 s after the trip at 5 s): the same
    trip with the sites' 500 MW of FFR has a higher nadir than without, and the RoCoF right after
    the trip (before any response) is the same −ΔP f0 / 2H = −2750·60/(2·4·60000) = −0.344 Hz/s."""
    result = cosim.run(SCENARIOS / "ffr_trip.toml", out_dir=tmp_path,
                       overrides={"scenario.duration_s": 20, "scenario.engine": "direct"})
    assert result.ok, result.reason
    f = result.kpis["frequency"]
    assert f["area_ffr"]["f_nadir_hz"] > f["area_base"]["f_nadir_hz"] + 0.05
    assert f["area_base"]["rocof_max_hz_s"] == pytest.approx(2750 * 60 / (2 * 4 * 60_000), rel=1e-9)
    ts = result.timeseries()
    assert ts["ffr.p_ffr_mw"].max() == 100.0 and ts["bess.p_mw"].min() == pytest.approx(-50.0)
