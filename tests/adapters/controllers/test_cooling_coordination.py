"""Cooling-compute coordination: the schedule and the capping law by hand, then
``scenarios/precooling.toml`` end to end against its no-control baselines.

* Pre-cooling must move chiller electricity out of the 17-21 UTC peak (into the charging
  hours before it), with the tank doing the work (its charge rises before the peak and
  falls during it).
* Thermal-aware capping must keep the rack inlet at or below the 27 °C ASHRAE TC 9.9 class
  A1 recommended limit (*Thermal Guidelines for Data Processing Environments*, 5th ed.) in
  a chiller trip where the uncapped hall passes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.cooling_coordination import (
    IDLE, PEAK, PRECOOL, CoolingCoordinationParams, CoolingCoordinator, mode_at,
)
from cosim.kpis.grid import energy_in_window_mwh

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "precooling.toml"
NO_CONTROL = {"entities.coord.precool": False, "entities.coord.thermal_capping": False}
CHILLER_TRIP = {"entities.coord.precool": False, "entities.plant.n_chillers": 1,
                "entities.plant.q_chiller_ref_mw": 0.5, "entities.plant.t_chw_supply_setpoint_c": 18.0,
                "entities.hall.recirculation_frac": 0.15}
T_INLET_LIMIT_C = 27.0


# -- the rules by hand ------------------------------------------------------------------------
def test_mode_follows_the_schedule_and_wraps_midnight():
    windows = [(17.0, 21.0)]
    assert [mode_at(h, windows, 4.0) for h in (12.0, 13.0, 16.99, 17.0, 20.99, 21.0)] == \
        [IDLE, PRECOOL, PRECOOL, PEAK, PEAK, IDLE]
    assert mode_at(23.0, [(1.0, 3.0)], 3.0) == PRECOOL  # 22:00-01:00 crosses midnight
    assert mode_at(2.0, [(22.0, 4.0)], 2.0) == PEAK


def test_dr_events_drive_the_mode_too():
    coord = CoolingCoordinator(CoolingCoordinationParams(peak_windows_h_utc=[], precool_h=3.0))
    assert coord.step(9.0, 1.0, 22.0)["n_mode"] == IDLE
    assert coord.step(9.0, 1.0, 22.0, event_active=False, dr_notice_s=2 * 3600.0)["n_mode"] == PRECOOL
    assert coord.step(9.0, 1.0, 22.0, event_active=False, dr_notice_s=5 * 3600.0)["n_mode"] == IDLE
    assert coord.step(9.0, 1.0, 22.0, event_active=True, dr_notice_s=0.0)["n_mode"] == PEAK
    scheduled = CoolingCoordinator(CoolingCoordinationParams(peak_windows_h_utc=[(17.0, 21.0)], precool_h=3.0))
    assert scheduled.step(15.0, 1.0, 22.0, event_active=True)["n_mode"] == PEAK  # a peak wins
    off = CoolingCoordinator(CoolingCoordinationParams(precool=False))
    assert off.step(18.0, 1.0, 22.0, event_active=True)["q_charge_cmd_mw"] == 0.0


def test_tank_commands_and_setpoints():
    coord = CoolingCoordinator(CoolingCoordinationParams(q_charge_mw=1.0, q_discharge_max_mw=1.5))
    pre = coord.step(14.0, q_coil_mw=1.8, t_inlet_c=22.0)
    assert (pre["q_charge_cmd_mw"], pre["t_air_supply_setpoint_c"], pre["n_mode"]) == (1.0, 20.0, PRECOOL)
    peak = coord.step(18.0, q_coil_mw=1.8, t_inlet_c=22.0)
    assert (peak["q_charge_cmd_mw"], peak["t_air_supply_setpoint_c"]) == (-1.5, 24.0)  # discharge capped at 1.5
    idle = coord.step(9.0, q_coil_mw=1.8, t_inlet_c=22.0)
    assert (idle["q_charge_cmd_mw"], idle["t_air_supply_setpoint_c"]) == (0.0, 22.0)


def test_capping_allowance_falls_when_hot_and_recovers_with_hysteresis():
    p = CoolingCoordinationParams(gain_per_k=0.1, release_per_step=0.02, margin_k=1.0, hysteresis_k=1.0,
                                  p_cap_min_w=200.0, p_cap_max_w=700.0, p_limit_min_mw=1.0, p_limit_max_mw=2.0)
    coord = CoolingCoordinator(p)
    out = coord.step(9.0, 1.0, 28.0)  # 2 K above the 26 °C threshold: 1 - 0.1 * 2
    assert out["allowance_frac"] == pytest.approx(0.8)
    assert out["p_cap_w"] == pytest.approx(600.0) and out["p_limit_mw"] == pytest.approx(1.8)
    assert coord.step(9.0, 1.0, 25.5)["allowance_frac"] == pytest.approx(0.8)  # inside the band: hold
    assert coord.step(9.0, 1.0, 24.5)["allowance_frac"] == pytest.approx(0.82)  # > 1 K below: release
    hot_peak = CoolingCoordinator(p)
    assert hot_peak.step(18.0, 1.0, 27.5)["t_air_supply_setpoint_c"] == 22.0  # no float-up while capping


def test_bad_params_are_refused():
    with pytest.raises(ValidationError, match="p_limit_min_mw"):
        CoolingCoordinationParams(p_limit_min_mw=1.0)
    with pytest.raises(ValidationError, match="peak window"):
        CoolingCoordinationParams(peak_windows_h_utc=[(5.0, 5.0)])


# -- the scenario -------------------------------------------------------------------------------
def _run(tmp_path, overrides):
    result = cosim.run(SCENARIO, out_dir=tmp_path, overrides=overrides)
    assert result.ok, result.reason
    return result.timeseries()


def test_precooling_moves_chiller_power_out_of_the_peak(tmp_path):
    run, base = _run(tmp_path, {}), _run(tmp_path, NO_CONTROL)
    peak_run = energy_in_window_mwh(run["plant.p_cooling_mw"], 17.0, 21.0, 60.0)
    peak_base = energy_in_window_mwh(base["plant.p_cooling_mw"], 17.0, 21.0, 60.0)
    pre_run = energy_in_window_mwh(run["plant.p_cooling_mw"], 12.0, 17.0, 60.0)
    pre_base = energy_in_window_mwh(base["plant.p_cooling_mw"], 12.0, 17.0, 60.0)
    print(f"chiller plant MWh, peak 17-21: {peak_base:.3f} -> {peak_run:.3f}; "
          f"charging 12-17: {pre_base:.3f} -> {pre_run:.3f}")
    assert peak_run < 0.3 * peak_base  # most of the peak's cooling electricity is gone ...
    assert pre_run > pre_base + 0.5 * (peak_base - peak_run)  # ... because it moved earlier
    soc = run["tank.soc_frac"]
    assert soc.at_time("17:00").iloc[0] > soc.iloc[0] + 0.3  # charged before the peak
    assert soc.iloc[-1] < soc.at_time("17:00").iloc[0] - 0.3  # spent during it
    assert (run["plant.q_unmet_mw"] < 1e-6).all()  # charging never starves the hall
    assert run["hall.t_rack_inlet_c"].max() <= T_INLET_LIMIT_C


def test_thermal_capping_keeps_the_rack_inlet_under_its_limit(tmp_path):
    run = _run(tmp_path, CHILLER_TRIP)
    base = _run(tmp_path, {**CHILLER_TRIP, "entities.coord.thermal_capping": False})
    over_s = float((base["hall.t_rack_inlet_c"] > T_INLET_LIMIT_C).sum() * 60)
    print(f"rack inlet max {base['hall.t_rack_inlet_c'].max():.2f} -> {run['hall.t_rack_inlet_c'].max():.2f} °C; "
          f"baseline above 27 °C for {over_s / 3600:.1f} h; mean IT {base['campus.p_mw'].mean():.3f} -> "
          f"{run['campus.p_mw'].mean():.3f} MW; GPU-hours delayed {base['campus.delay_gpu_h'].iloc[-1]:.0f} -> "
          f"{run['campus.delay_gpu_h'].iloc[-1]:.0f}")
    assert over_s >= 3600  # the baseline breaks the limit for at least an hour
    assert run["hall.t_rack_inlet_c"].max() <= T_INLET_LIMIT_C
    assert run["campus.delay_gpu_h"].iloc[-1] > base["campus.delay_gpu_h"].iloc[-1]  # and it costs compute
