"""Voltage-aware throttling: the integral law by hand, then ``scenarios/voltage_aware.toml``
(a ~2 MW campus at bus 22 of IEEE 33) against the same campus uncontrolled.

The band is [0.95, 1.05] pu (ANSI C84.1 range A), judged at the campus's bus 22, the lowest
bus of its lateral (see the scenario header for why not the whole feeder). The controller
must remove most of the violation seconds the baseline has, and the test reports what that
costs: tokens not served and training GPU-hours delayed.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.voltage_aware import VoltageAwareParams, VoltageController
from cosim.kpis import grid as kpis_grid

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "voltage_aware.toml"


def test_allowance_integrates_the_voltage_error():
    p = VoltageAwareParams(margin_pu=0.003, deadband_pu=0.005, gain_down_per_pu=40.0, gain_up_per_pu=10.0)
    ctl = VoltageController(p)
    assert ctl.update(0.943) == pytest.approx(1.0 - 40.0 * 0.01)  # 0.01 pu below the 0.953 aim
    assert ctl.update(0.955) == pytest.approx(0.6)  # inside the deadband: hold
    assert ctl.update(0.968) == pytest.approx(0.6 + 10.0 * 0.01)  # 0.015 above the aim, 0.01 past the band
    assert ctl.update(0.80) == 0.0  # clipped at u_min_frac
    assert ctl.update(0.955, vm_max_pu=1.06) == pytest.approx(0.1)  # over-voltage releases the throttle
    assert ctl.update(math.nan) == pytest.approx(0.1)  # no measurement: hold


def test_knobs_map_linearly_and_baseline_holds_one():
    p = VoltageAwareParams(n_batch_min=32, n_batch_max=256, p_cap_min_w=200.0, p_cap_max_w=700.0,
                           p_limit_min_mw=1.0, p_limit_max_mw=2.0)
    ctl = VoltageController(p)
    ctl.allowance = 0.5
    knobs = ctl.knobs()
    assert (knobs["n_batch_max"], knobs["p_cap_w"], knobs["p_limit_mw"]) == (144.0, 450.0, 1.5)
    assert knobs["throttle_frac"] == 0.5
    assert math.isnan(VoltageController(VoltageAwareParams()).knobs()["p_limit_mw"])  # no limit configured
    off = VoltageController(VoltageAwareParams(enabled=False))
    assert off.update(0.90) == 1.0


def test_bad_params_are_refused():
    with pytest.raises(ValidationError, match="p_limit_max_mw"):
        VoltageAwareParams(p_limit_min_mw=1.0)
    with pytest.raises(ValidationError, match="n_batch_min"):
        VoltageAwareParams(n_batch_min=300, n_batch_max=256)


def test_controller_removes_most_violations_and_reports_the_cost(tmp_path):
    run = cosim.run(SCENARIO, out_dir=tmp_path)
    base = cosim.run(SCENARIO, out_dir=tmp_path, overrides={"entities.vctl.enabled": False})
    assert run.ok and base.ok, (run.reason, base.reason)
    ts, ts0 = run.timeseries(), base.timeseries()
    v, v0 = ts["feeder.bus_22_vm_pu"], ts0["feeder.bus_22_vm_pu"]
    k, k0 = kpis_grid.voltage_kpis(v, v, 60.0), kpis_grid.voltage_kpis(v0, v0, 60.0)
    loss = kpis_grid.throughput_loss_frac(ts["campus.tokens_per_s"], ts0["campus.tokens_per_s"])
    delay, delay0 = ts["campus.delay_gpu_h"].iloc[-1], ts0["campus.delay_gpu_h"].iloc[-1]
    print(f"bus 22: violation {k0['violation_s']:.0f} -> {k['violation_s']:.0f} s, "
          f"{k0['violation_pu_s']:.2f} -> {k['violation_pu_s']:.2f} pu*s, min {k0['vm_min_pu']:.4f} -> "
          f"{k['vm_min_pu']:.4f} pu; tokens lost {loss:.2%}; GPU-hours delayed {delay0:.0f} -> {delay:.0f}; "
          f"peak {ts0['campus.p_mw'].max():.3f} -> {ts['campus.p_mw'].max():.3f} MW")
    assert k0["violation_s"] >= 0.5 * 28_800  # the baseline is out of band most of the window
    assert k["violation_s"] <= 0.1 * k0["violation_s"]  # the controller removes most of it
    assert k["violation_pu_s"] <= 0.1 * k0["violation_pu_s"]
    assert k["vm_max_pu"] <= 1.05
    assert 0.0 <= loss < 0.05  # inference keeps its throughput; training pays ...
    assert delay > delay0  # ... in delayed GPU-hours
