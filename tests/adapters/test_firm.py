"""Firm generation: ramp, minimum-load, start and xenon constraints under adversarial setpoints."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.adapters.firm import (LAMBDA_I_PER_S, LAMBDA_XE_PER_S, NATURAL_GAS_KG_CO2_PER_GJ, FirmSim, GasTurbine,
                          GasTurbineParams, Smr, SmrParams, xenon_equilibrium, xenon_step)

adversarial = st.lists(
    st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from([0.0, 1e9, -1e9, 77.0, 38.5, 38.4, 0.1])),
    min_size=1, max_size=120)
steps_s = st.sampled_from([1, 10, 60, 300, 900])


@settings(max_examples=200, deadline=None)
@given(adversarial, steps_s)
def test_smr_ramp_minimum_and_xenon_hold_under_any_setpoints(seq, dt_s):
    """Always within [p_min, p_max]; |Δp| ≤ ramp·Δt; whenever xenon starts a step above
    1 + margin of its rated equilibrium, the rise in that step is ≤ the xenon ramp·Δt."""
    smr = Smr(SmrParams(p_max_mw=77.0, xe_margin_frac=0.02))
    ramp = 0.05 * 77.0 * dt_s / 60
    xe_ramp = 0.005 * 77.0 * dt_s / 60
    for p_set in seq:
        before, restricted = smr.p_mw, smr.xe_rel_frac > 1.02
        p = smr.step(p_set, dt_s)
        assert 38.5 - 1e-9 <= p <= 77.0 + 1e-9
        assert -ramp - 1e-9 <= p - before <= ramp + 1e-9
        if restricted:
            assert p - before <= xe_ramp + 1e-9
        assert smr.xe_rel_frac > 0


def test_smr_daily_load_follow_deep_dip_is_xenon_limited_shallow_is_not():
    """100 % → 50 % at 5 %/min takes 10 min; xenon then rises past 1.2 × its rated equilibrium
    and a return to 100 % at hour 6 starts at 0.5 %/min; the rising flux burns xenon out below
    the margin after ~75 min, and the rest goes at 5 %/min: 78 min instead of 10. After
    100 → 70 % xenon peaks near 1.15, below the margin, and the return takes the normal 6 min."""
    deep = Smr(SmrParams(p_max_mw=100.0))
    down = [deep.step(50.0, 60) for _ in range(6 * 60)]
    assert down[9] == pytest.approx(50.0) and down[8] > 50.0
    assert deep.xe_rel_frac > 1.2 and deep.ramp_up_max_frac_per_min() == 0.005
    up = [deep.step(100.0, 60) for _ in range(100)]
    assert up[:3] == pytest.approx([50.5, 51.0, 51.5])
    minutes = up.index(100.0) + 1
    assert 60 < minutes < 100
    assert up[minutes - 2] - up[minutes - 3] == pytest.approx(5.0)  # unrestricted again at the end
    shallow = Smr(SmrParams(p_max_mw=100.0))
    peak = 0.0
    for _ in range(12 * 60):
        shallow.step(70.0, 60)
        peak = max(peak, shallow.xe_rel_frac)
    assert 1.1 < peak < 1.2
    assert [shallow.step(100.0, 60) for _ in range(6)][-1] == pytest.approx(100.0)


def test_xenon_after_shutdown_matches_the_analytic_solution():
    """After a shutdown from rated-power equilibrium, I(t) = I0·e^(−λI t) and
    X(t) = X0·e^(−λX t) + λI·I0/(λX − λI)·(e^(−λI t) − e^(−λX t)) (Lamarsh & Baratta §7.5);
    the peak is where dX/dt = 0. Stepping at 60 s reproduces both."""
    burn = 2.65e-18 * 3e13
    i0, x0 = xenon_equilibrium(1.0, burn)
    li, lx = LAMBDA_I_PER_S, LAMBDA_XE_PER_S

    def analytic(t):
        return x0 * math.exp(-lx * t) + li * i0 / (lx - li) * (math.exp(-li * t) - math.exp(-lx * t))

    i, x = i0, x0
    for minute in range(1, 24 * 60 + 1):
        i, x = xenon_step(i, x, 0.0, 60.0, burn)
        if minute % 120 == 0:
            assert x == pytest.approx(analytic(minute * 60.0), rel=1e-9)
            assert i == pytest.approx(i0 * math.exp(-li * minute * 60.0), rel=1e-9)
    lo, hi = 3600.0, 20 * 3600.0  # dX/dt = λI·I(t) − λX·X(t) = 0, by bisection
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if li * i0 * math.exp(-li * mid) - lx * analytic(mid) > 0 else (lo, mid)
    t_peak_h = lo / 3600
    assert 7 < t_peak_h < 12  # peak xenon some 8–11 h after a shutdown, depending on flux
    stepped = [xenon_step(i0, x0, 0.0, k * 360.0, burn)[1] for k in range(1, 201)]
    assert (stepped.index(max(stepped)) + 1) / 10 == pytest.approx(t_peak_h, abs=0.1)


def test_xenon_equilibrium_is_steady():
    burn = 2.65e-18 * 3e13
    for power in (0.5, 0.8, 1.0):
        i, x = xenon_equilibrium(power, burn)
        assert xenon_step(i, x, power, 3600.0, burn) == pytest.approx((i, x), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(adversarial, steps_s)
def test_gas_turbine_limits_under_any_setpoints(seq, dt_s):
    """Output is 0 or within [p_min, p_max]; between two on-steps |Δp| ≤ ramp·Δt; it leaves 0 only to
    p_min after the start time, and reaches 0 only from p_min."""
    gt = GasTurbine(GasTurbineParams(p_max_mw=2.0, start_time_s=600))
    ramp = 0.1 * 2.0 * dt_s / 60
    off_s = 0.0
    for p_set in seq:
        before = gt.p_mw
        p = gt.step(p_set, dt_s)
        assert p == 0.0 or 0.8 - 1e-12 <= p <= 2.0 + 1e-12
        if before > 0 and p > 0:
            assert abs(p - before) <= ramp + 1e-9
        if before == 0 and p > 0:
            assert p == pytest.approx(0.8) and off_s >= 600  # the whole start lies before this step
        if before > 0 and p == 0:
            assert before == pytest.approx(0.8)
        off_s = off_s + dt_s if p == 0 and before == 0 else 0.0
        assert gt.fuel_mw(p) >= 0 and (p == 0) == (gt.fuel_mw(p) == 0)


def test_gas_turbine_fuel_and_co2_by_hand():
    """2 MW at 10 GJ/MWh = 20 GJ/h = 5.556 MW of fuel; CO2 = 5.556 MJ/s × 50.29 kg/GJ = 0.2794 kg/s
    (= 1.006 t/h, i.e. 503 kg/MWh, typical of a simple-cycle gas turbine)."""
    gt = GasTurbine(GasTurbineParams(p_max_mw=2.0))
    assert NATURAL_GAS_KG_CO2_PER_GJ == pytest.approx(50.29, abs=0.01)
    assert gt.fuel_mw(2.0) == pytest.approx(20 / 3.6)
    assert gt.fuel_mw(0.8) == pytest.approx(13.0 * 0.8 / 3.6)
    assert gt.co2_kg_s(2.0) == pytest.approx(20 / 3.6 * 50.29 / 1000, rel=1e-3)
    assert gt.co2_kg_s(2.0) * 3600 / 2.0 == pytest.approx(503, abs=1)


def test_params_refuse_an_impossible_start():
    with pytest.raises(ValueError, match="p_init_mw = 0.5 must be 0 or within"):
        GasTurbineParams(p_max_mw=2.0, p_init_mw=0.5)
    with pytest.raises(ValueError, match=r"within \[38.5, 77.0\]"):
        SmrParams(p_max_mw=77.0, p_init_mw=10.0)
    with pytest.raises(ValueError, match="finite"):
        Smr(SmrParams(p_max_mw=77.0)).step(math.inf, 60)


def test_adapter_keeps_last_target_and_reports_shortfall():
    sim = FirmSim()
    sim.init("firm", time_resolution=1.0, start_utc="2024-07-15T00:00:00Z", step_s=60, duration_s=3600, seed=0)
    sim.create(1, "Smr", eid="smr", p_max_mw=77.0)
    sim.step(0, {"smr": {"p_set_mw": {"ctl": 0.0}}}, 3600)
    out = sim.get_data({"smr": ["p_mw", "p_shortfall_mw", "xe_rel_frac"]})["smr"]
    assert out["p_mw"] == pytest.approx(77.0 - 3.85) and out["p_shortfall_mw"] == pytest.approx(-(77.0 - 3.85))
    sim.step(60, {}, 3600)  # no new setpoint: keeps ramping toward the last one
    assert sim.get_data({"smr": ["p_mw"]})["smr"]["p_mw"] == pytest.approx(77.0 - 7.7)


def test_a_released_setpoint_sends_the_unit_back_to_its_initial_target():
    """A unit keeps its last target without a setpoint; a held one released (``Session.set(...,
    None)``) is not the scenario's, so the unit goes back to the target it started with."""
    sim = FirmSim()
    sim.init("firm", time_resolution=1.0, start_utc="2024-07-15T00:00:00Z", step_s=60, duration_s=3600, seed=0)
    sim.create(1, "GasTurbine", eid="gt", p_max_mw=2.0, p_init_mw=1.5)
    sim.step(0, {"gt": {"p_set_mw": {"session": 0.9}}}, 3600)
    assert sim.units["gt"].target_mw == 0.9
    sim.release("gt", "p_set_mw")
    sim.step(60, {}, 3600)
    assert sim.units["gt"].target_mw == 1.5 and sim.get_data({"gt": ["p_shortfall_mw"]})["gt"]["p_shortfall_mw"] >= 0
