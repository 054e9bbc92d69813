"""OFO's flexible-training pause (adapters/controllers/ofo/, "Flexible-training pause"): the
pause control on a one-bus toy plant and on the analytic two-bus feeder, its GPU-hour cost and
output, the bounds, and the params' checks.

The iteration is Dall'Anese & Simonetto's regularised primal-dual ("Optimal power flow pursuit",
IEEE Trans. Smart Grid 9(2):942-952, 2018) with OpenG2G's per-bus-phase voltage duals
(arXiv:2602.05116, Eqs. 5-6); the pause's cost is GPU-hours deferred, cost · x_f · n_gpus · Δt / 3600.
The two-bus column is LinDistFlow's (Baran & Wu 1989): ∂v/∂P = -R/Z_base per MW, so pausing
p_pause_mw raises v by p_pause_mw · (R + tanφ X) / Z_base.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

import cosim
from cosim import kpis
from cosim.adapters.controllers.ofo import (
    OUTPUTS,
    PAUSE_OUTPUTS,
    FeederSensitivity,
    OFOController,
    OFOParams,
    OFOSim,
    OFOSimParams,
)
from cosim.roles import RunRoles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ofo import KV_LL, R_OHM, X_OHM, two_bus  # noqa: E402,F401  (two_bus: the fixture)

ROW = "bus_x_a_vm_pu"
#: the toy plant: v = V0 + K_PU · x_f (pausing every flexible job lifts the bus by K_PU)
V0, K_PU = 0.94, 0.02


def pause_params(**kw) -> OFOParams:
    base = dict(dc_bus="x", dc_control=False, margin_pu=0.0, p_pause_mw=0.5, n_gpus_pause=1000)
    return OFOParams(**{**base, **kw})


def run_toy(params: OFOParams, steps: int = 200, dt_s: float = 1.0) -> tuple[OFOController, list[float]]:
    """The pause against the toy plant, measured each step; returns the controller and x_f per step."""
    ctl = OFOController(params)
    ctl.set_sensitivity([ROW], np.array([[-0.01, K_PU]]))  # columns: the allowance u, the pause x_f
    xs = []
    for t in range(steps):
        ctl.update(t, {ROW: V0 + K_PU * ctl.x_f}, dt_s=dt_s)
        assert 0.0 <= ctl.x_f <= params.pause_max_frac  # the projection onto [0, pausable]
        xs.append(ctl.x_f)
    return ctl, xs


def test_low_voltage_pauses_and_the_first_step_is_hand_computed():
    """Step 1 at v = 0.94 (0.01 below the band): λ = ρ_v · 0.01 = 20, gradient = cost · n · Δt / 3600 -
    K · λ = 1000/3600 - 0.4, so x_f = ρ_x · (0.4 - 0.2778) = 0.012222; the pause then lifts the
    bus into the band (v >= 0.95 needs x_f >= 0.5) and the duals settle with the voltage at the band."""
    params = pause_params()
    ctl = OFOController(params)
    ctl.set_sensitivity([ROW], np.array([[-0.01, K_PU]]))
    ctl.update(0, {ROW: V0})
    assert ctl.lam[0] == pytest.approx(2000.0 * 0.01)
    assert ctl.x_f == pytest.approx(0.1 * (K_PU * 20.0 - 1000.0 / 3600.0), rel=1e-12)
    assert ctl.u == 1.0  # dc_control off: the allowance holds at rest
    ctl, xs = run_toy(params)
    assert xs[-1] == pytest.approx(0.5, abs=0.01)  # just enough to reach 0.95 pu
    out = ctl.outputs()
    assert out["pause_flexible_frac"] == xs[-1]
    assert out["p_paused_mw"] == pytest.approx(0.5 * xs[-1]) and out["n_gpus_paused"] == pytest.approx(1000 * xs[-1])


def test_in_band_nothing_is_paused_and_a_deep_violation_pauses_up_to_the_bound():
    in_band = OFOController(pause_params())
    in_band.set_sensitivity([ROW], np.array([[-0.01, K_PU]]))
    for t in range(50):
        in_band.update(t, {ROW: 0.99})
    assert in_band.x_f == 0.0 and in_band.paused_gpu_h == 0.0
    params = pause_params(pause_max_frac=0.3, cost_pause_per_gpu_h=0.0)  # 0.94 + 0.02·0.3 stays below band
    ctl, xs = run_toy(params)
    assert max(xs) == 0.3 and xs[-1] == 0.3


def test_a_higher_gpu_hour_cost_pauses_less():
    """With a dual decay that prices the violation finitely (ε_d = 1e-3 pu), the iteration's
    fixed point is hand-computable: λ = (0.95 - v) / ε_d and c' + ε x_f = K λ with c' = cost · n ·
    Δt / 3600 give x_f* = (K · 0.01 / ε_d - c') / (ε + K² / ε_d) = (0.2 - c') / 1.4. A dearer
    GPU-hour pauses strictly less (final x_f and GPU-hours over the run) and leaves more violation."""
    finals, gpu_h, below = [], [], []
    for cost in (0.0, 0.2, 0.4, 0.6):
        params = pause_params(cost_pause_per_gpu_h=cost, dual_decay_pu=1e-3, dual_step_per_pu=500.0)
        ctl, xs = run_toy(params, steps=400)
        assert xs[-1] == pytest.approx((0.2 - cost * 1000 / 3600) / 1.4, rel=1e-6)
        finals.append(xs[-1])
        gpu_h.append(ctl.paused_gpu_h)
        below.append(sum(max(0.95 - (V0 + K_PU * x), 0.0) for x in xs))
    assert all(a > b for a, b in zip(finals, finals[1:]))
    assert all(a > b for a, b in zip(gpu_h, gpu_h[1:]))
    assert all(a < b for a, b in zip(below, below[1:]))


def test_gpu_hours_are_paused_gpus_times_the_step():
    """paused_gpu_h = Σ_steps x_f · n_gpus_pause · Δt / 3600, here at 5 s steps (hand sum of the
    per-step commands); the enabled = false baseline pauses nothing and counts nothing."""
    params = pause_params(n_gpus_pause=640)
    ctl, xs = run_toy(params, steps=40, dt_s=5.0)
    assert ctl.paused_gpu_h == pytest.approx(sum(x * 640 * 5.0 / 3600.0 for x in xs), rel=1e-12)
    assert ctl.outputs()["paused_gpu_h"] == ctl.paused_gpu_h > 0
    off, xs_off = run_toy(pause_params(enabled=False), steps=10)
    assert xs_off == [0.0] * 10 and off.paused_gpu_h == 0.0
    held, xs_held = run_toy(pause_params(pause_control=False), steps=10)
    assert xs_held == [0.0] * 10 and held.outputs()["paused_gpu_h"] == 0.0


def test_pause_column_is_the_datacenters_negated_on_the_two_bus_feeder(two_bus):
    """On the two-bus feeder the pause's column of J is -p_pause_mw times the datacenter's
    (R + tanφ X) / Z_base per MW at tanφ = 0.25: pausing lifts the bus; without the pause the
    controls are the allowance alone (nothing of the earlier J changes)."""
    params = OFOParams(network=str(two_bus), dc_bus="b2", p_flex_mw=0.3, p_pause_mw=0.4, n_gpus_pause=512)
    ctl = OFOController(params, FeederSensitivity(params))
    measured = {f"bus_b2_{ph}_vm_pu": 0.99 for ph in "abc"}
    ctl.update(0, measured, {"p_dc_mw": 0.2, "q_dc_mvar": 0.05})
    per_mw = (R_OHM + 0.25 * X_OHM) / KV_LL**2
    np.testing.assert_allclose(ctl.jac[:, 1], 0.4 * per_mw, rtol=0.02)
    np.testing.assert_allclose(ctl.jac[:, 1], -ctl.jac[:, 0] * 0.4 / 0.3, rtol=1e-12)
    plain = OFOController(OFOParams(network=str(two_bus), dc_bus="b2", p_flex_mw=0.3),
                          FeederSensitivity(OFOParams(network=str(two_bus), dc_bus="b2")))
    plain.update(0, measured, {"p_dc_mw": 0.2, "q_dc_mvar": 0.05})
    assert plain.jac.shape == (3, 1) and "pause_flexible_frac" not in plain.outputs()
    np.testing.assert_array_equal(plain.jac[:, 0], ctl.jac[:, 0])


def test_pause_with_a_battery_keeps_the_battery_cost_off_the_pause():
    """Controls [u, x_p, x_q, x_f]: the battery's quadratic cost is on x_p, x_q only, the GPU-hour
    cost on x_f only (a zero voltage price: x_f stays 0, the battery at rest)."""
    params = pause_params(bat_bus="y", p_bat_max_mw=0.2, s_bat_max_mva=0.25)
    ctl = OFOController(params)
    ctl.set_sensitivity([ROW], np.array([[-0.01, -0.05, -0.08, K_PU]]))
    assert ctl.controls().shape == (4,)
    ctl.update(0, {ROW: 1.0})
    assert ctl.x_f == 0.0 and ctl.x_p == 0.0 and ctl.x_q == 0.0
    for t in range(1, 30):
        ctl.update(t, {ROW: 0.90})
    assert ctl.x_f > 0 and ctl.x_q < 0  # both lift the bus


@pytest.mark.parametrize(("kw", "key"), [
    ({"cost_pause_per_gpu_h": -1.0}, "cost_pause_per_gpu_h"),
    ({"p_pause_mw": -0.1}, "p_pause_mw"),
    ({"n_gpus_pause": -5}, "n_gpus_pause"),
    ({"pause_max_frac": 1.5}, "pause_max_frac"),
    ({"n_gpus_pause": 0}, "n_gpus_pause"),          # p_pause_mw without its GPUs
    ({"p_pause_mw": 0.0}, "p_pause_mw"),            # GPUs without the power
])
def test_bad_pause_params_name_the_key(kw, key):
    with pytest.raises(ValidationError, match=key):
        pause_params(**kw)


def test_the_sim_declares_the_pause_outputs_and_checks_the_entities():
    assert not set(PAUSE_OUTPUTS) & set(OFOSim.meta_for(OFOSimParams())["models"]["OFO"]["attrs"])
    attrs = OFOSim.meta_for(OFOSimParams(pause=True))["models"]["OFO"]["attrs"]
    assert set(PAUSE_OUTPUTS) <= set(attrs) and set(OUTPUTS) <= set(attrs)
    on = pause_params().model_copy(update={"dc_bus": "671"})  # a bus of the feeder (the toy "x" is refused here)
    assert OFOSim.check_entity("OFO", on, None, OFOSimParams(pause=True)) == []
    problems = OFOSim.check_entity("OFO", on, None, OFOSimParams())
    assert len(problems) == 1 and "pause" in problems[0] and "p_pause_mw" in problems[0]
    assert OFOSim.check_entity("OFO", OFOParams(dc_bus="x"), None, OFOSimParams(pause=True))


def test_kpi_block_by_hand():
    """Three 1-s steps of commands 0, 0.5, 1 on 360 GPUs: 0 + 180 + 360 GPUs · 1 s = 0.15 GPU-h (the
    controller's running sum, recorded); mean 0.5, max 1. A run without the pause has no block."""
    index = pd.date_range("2024-07-15", periods=3, freq="1s", tz="UTC")
    ts = pd.DataFrame({"ofo.pause_flexible_frac": [0.0, 0.5, 1.0], "ofo.p_paused_mw": [0.0, 0.1, 0.2],
                       "ofo.n_gpus_paused": [0.0, 180.0, 360.0], "ofo.paused_gpu_h": [0.0, 0.05, 0.15],
                       "ofo.allowance_frac": [1.0, 1.0, 1.0]}, index=index)
    out = kpis.compute(ts, 1, RunRoles({"ofo": "controller"}), links={})
    entry = out["ofo_pause"]["ofo"]
    assert entry["paused_gpu_h"] == pytest.approx(0.15) and entry["pause_mean_frac"] == pytest.approx(0.5)
    assert entry["pause_max_frac"] == 1.0 and entry["p_paused_mean_mw"] == pytest.approx(0.1)
    assert entry["n_gpus_paused_mean"] == pytest.approx(180.0)
    assert "ofo_pause" not in kpis.compute(ts.drop(columns=["ofo.paused_gpu_h"]), 1, RunRoles({"ofo": "controller"}),
                                           links={})


SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "ieee13_ofo_pause.toml"


def test_ieee13_ofo_pause_scenario_pauses_jobs_and_counts_gpu_hours(tmp_path):
    """First 2 min of scenarios/ieee13_ofo_pause.toml (campus knobs only, phase c low and phase b
    high: the band cannot be met), with and without the pause: with it the Cluster holds flexible
    jobs paused and the allowance is throttled less (inference keeps more of its batch); the
    recorded paused_gpu_h is the running sum of n_gpus_paused · 1 s / 3600 (the recorder samples each
    step's outputs, which include that step's command), and the KPI block quotes its last value."""
    runs = {}
    for name, overrides in {"pause": {}, "nopause": {"entities.ofo.pause_control": False}}.items():
        result = cosim.run(SCENARIO, out_dir=tmp_path / name,
                           overrides={"scenario.duration_s": 120, "scenario.engine": "direct", **overrides})
        assert result.ok, (name, result.reason)
        runs[name] = result
    ts = runs["pause"].timeseries()
    assert ts["ofo.pause_flexible_frac"].between(0.0, 1.0).all() and ts["ofo.pause_flexible_frac"].iloc[-1] > 0.5
    assert ts["campus.n_jobs_paused"].iloc[-1] > 0
    np.testing.assert_allclose(ts["ofo.paused_gpu_h"].to_numpy(), np.cumsum(ts["ofo.n_gpus_paused"].to_numpy()) / 3600,
                               rtol=1e-9)
    # the KPI against the commands and the scenario's n_gpus_pause (not the column it is the last value of):
    # GPU-hours = n_gpus_pause x sum of the per-step commands x 1 s / 3600
    n_gpus_pause = tomllib.loads(SCENARIO.read_text())["entities"]["ofo"]["n_gpus_pause"]
    assert runs["pause"].kpis["ofo_pause"]["ofo"]["paused_gpu_h"] == pytest.approx(
        n_gpus_pause * ts["ofo.pause_flexible_frac"].sum() * 1.0 / 3600.0, rel=1e-9)
    off = runs["nopause"].timeseries()
    assert (off["ofo.pause_flexible_frac"] == 0).all() and off["campus.n_jobs_paused"].iloc[-1] == 0
    assert ts["ofo.allowance_frac"].iloc[-30:].mean() > off["ofo.allowance_frac"].iloc[-30:].mean() + 0.1
