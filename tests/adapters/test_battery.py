"""Battery: energy bookkeeping and limits (property-based with hypothesis), modes, adapter."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.adapters.battery import Battery, BatteryParams, BatterySim

BASE = dict(e_capacity_mwh=4.0, p_charge_max_mw=1.0, p_discharge_max_mw=2.0,
            eta_charge_frac=0.95, eta_discharge_frac=0.92, soc_min_frac=0.1, soc_max_frac=0.9, soc_init_frac=0.5)

setpoints = st.lists(st.floats(min_value=-50, max_value=50, allow_nan=False), min_size=1, max_size=60)
steps_s = st.sampled_from([1, 60, 300, 900, 3600])


@settings(max_examples=200, deadline=None)
@given(setpoints, steps_s, st.floats(0, 0.01), st.floats(0, 1e-3))
def test_energy_in_times_efficiency_is_energy_stored_and_bounds_hold(seq, dt_s, self_discharge, fade):
    """Every step: stored change = p·η_c·Δt (charging) or p/η_d·Δt (discharging) − self-discharge;
    SoC stays in its window; |p| within the power ratings; shortfall = setpoint − power."""
    battery = Battery(BatteryParams(**BASE, self_discharge_frac_per_h=self_discharge, fade_per_cycle_frac=fade))
    dt_h = dt_s / 3600
    for p_set in seq:
        e_before = battery.e_mwh
        r = battery.step(p_set, dt_s)
        cell = r.p_mw * 0.95 * dt_h if r.p_mw >= 0 else r.p_mw / 0.92 * dt_h
        excess = max(e_before - r.e_self_discharge_mwh + cell - battery.e_max_mwh, 0.0)  # fade recalibration
        assert battery.e_mwh == pytest.approx(e_before - r.e_self_discharge_mwh + cell - excess, abs=1e-9)
        assert battery.p.soc_min_frac - 1e-12 <= battery.soc_frac <= battery.p.soc_max_frac + 1e-12
        assert -2.0 - 1e-12 <= r.p_mw <= 1.0 + 1e-12
        assert r.p_shortfall_mw == pytest.approx(p_set - r.p_mw)
        assert r.e_self_discharge_mwh >= 0 and r.e_conversion_loss_mwh >= -1e-15


@settings(max_examples=100, deadline=None)
@given(setpoints, steps_s)
def test_grid_side_energy_balance(seq, dt_s):
    """Charged − discharged (grid side) = change of stored energy + losses, over the whole run."""
    battery = Battery(BatteryParams(**BASE, self_discharge_frac_per_h=0.001))
    e0 = battery.e_mwh
    for p_set in seq:
        battery.step(p_set, dt_s)
    assert battery.e_charged_mwh - battery.e_discharged_mwh == pytest.approx(
        battery.e_mwh - e0 + battery.e_loss_mwh, abs=1e-9)


def test_full_charge_hand_example():
    """4 MWh, SoC 10 % -> 90 % = 3.2 MWh stored at η_c 0.95 takes 3.2/0.95 = 3.368 MWh from the grid:
    3 h at 1 MW, then 0.368 MW for the fourth hour, then nothing (shortfall 1 MW)."""
    battery = Battery(BatteryParams(**{**BASE, "soc_init_frac": 0.1}))
    powers = [battery.step(5.0, 3600).p_mw for _ in range(5)]
    assert powers[:3] == [1.0, 1.0, 1.0]
    assert powers[3] == pytest.approx(3.2 / 0.95 - 3.0)
    assert powers[4] == pytest.approx(0.0, abs=1e-12)
    assert battery.soc_frac == pytest.approx(0.9)
    assert battery.e_charged_mwh == pytest.approx(3.2 / 0.95)


def test_round_trip_efficiency_and_cycles():
    """Charge 10 %→90 % then discharge back: the grid gets η_c·η_d of what it gave; one 0.8 cycle."""
    battery = Battery(BatteryParams(**{**BASE, "soc_init_frac": 0.1}))
    for _ in range(240):
        battery.step(1.0, 60)
    for _ in range(240):
        battery.step(-2.0, 60)
    assert battery.soc_frac == pytest.approx(0.1)
    assert battery.e_discharged_mwh / battery.e_charged_mwh == pytest.approx(0.95 * 0.92)
    assert battery.n_cycles == pytest.approx(0.8)


def test_self_discharge_rate():
    """1 %/h for 24 h with no power: e·(1 − 0.01)^24 (above the floor)."""
    battery = Battery(BatteryParams(**{**BASE, "soc_init_frac": 0.9, "soc_min_frac": 0.0},
                                    self_discharge_frac_per_h=0.01))
    for _ in range(24 * 60):
        battery.step(0.0, 60)
    assert battery.e_mwh == pytest.approx(3.6 * 0.99 ** 24, rel=1e-9)


def test_capacity_fade_with_cycles():
    battery = Battery(BatteryParams(**{**BASE, "soc_init_frac": 0.1}, fade_per_cycle_frac=0.01 / 2))
    for _ in range(10):
        for _ in range(4):
            battery.step(1.0, 3600)
        for _ in range(4):
            battery.step(-2.0, 3600)
    assert battery.e_capacity_mwh == pytest.approx(4.0 * (1 - 0.005 * battery.n_cycles))
    assert battery.e_capacity_mwh < 4.0


def test_net_load_target_mode_stores_surplus_and_covers_load():
    battery = Battery(BatteryParams(**BASE, mode="net_load_target"))
    assert battery.setpoint_mw({"p_load_mw": 3.0, "p_gen_mw": 3.5}) == pytest.approx(0.5)   # store surplus
    assert battery.setpoint_mw({"p_load_mw": 3.0, "p_gen_mw": 1.0}) == pytest.approx(-2.0)  # cover the rest
    shaving = Battery(BatteryParams(**BASE, mode="net_load_target", p_import_target_mw=2.5))
    assert shaving.setpoint_mw({"p_load_mw": 3.0}) == pytest.approx(-0.5)
    assert shaving.setpoint_mw({"p_load_mw": 2.0}) == pytest.approx(0.0)  # no grid charging by default
    grid = Battery(BatteryParams(**BASE, mode="net_load_target", p_import_target_mw=2.5, charge_from_grid=True))
    assert grid.setpoint_mw({"p_load_mw": 2.0}) == pytest.approx(0.5)


def test_invalid_params_and_inputs_are_refused():
    with pytest.raises(ValueError, match="soc_init_frac"):
        BatteryParams(**{**BASE, "soc_init_frac": 0.95})
    with pytest.raises(ValueError, match="soc_min_frac"):
        BatteryParams(**{**BASE, "soc_min_frac": 0.9, "soc_max_frac": 0.5, "soc_init_frac": 0.6})
    with pytest.raises(ValueError, match="finite"):
        Battery(BatteryParams(**BASE)).step(math.nan, 60)


def test_adapter_follows_setpoint_and_reports_shortfall():
    sim = BatterySim()
    sim.init("b", time_resolution=1.0, start_utc="2024-07-15T00:00:00Z", step_s=3600, duration_s=7200, seed=0)
    sim.create(1, "Battery", eid="bess", **BASE)
    sim.step(0, {"bess": {"p_set_mw": {"ctl": 3.0}}}, 7200)
    out = sim.get_data({"bess": ["p_mw", "p_shortfall_mw", "soc_frac"]})["bess"]
    assert out["p_mw"] == 1.0 and out["p_shortfall_mw"] == 2.0
    assert out["soc_frac"] == pytest.approx(0.5 + 0.95 / 4)
