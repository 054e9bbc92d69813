"""Power smoothing (adapters/datacenter/smoothing.py): GPU power floor, ramp limiter, rack storage.

Invariants, each able to fail: a floor lifts every busy GPU to floor x TDP and costs exactly the energy
it adds (progress unchanged); a higher floor never leaves more swing in the 0.2-3 Hz band; a ramp limiter
keeps the ramps within its limit and costs work, more the tighter it is; the rack store keeps its charge
in [0, 1], balances energy (grid = load + losses + change of store) and lowers the peak and the band rms.
The knobs' shape follows NVIDIA's GB200 power smoothing (floor of 20-90 % of TDP, ramp rates, ramp-down
hysteresis) and GB300 NVL72's rack energy storage ("up to 30 % lower peak grid demand", a vendor claim).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cosim.adapters.datacenter import ClusterParams, DatacenterSim, DatacenterSimParams, build_cluster
from cosim.adapters.datacenter.cluster import OUTPUTS
from cosim.adapters.datacenter.smoothing import SMOOTHING_OUTPUTS, PowerFloor, RackStorage, RampLimiter
from cosim.kpis.swing import band_rms
from cosim.sdk import ScenarioContext

DT_S = 0.1
TRAINING_BAND_HZ = (0.2, 3.0)
#: one synchronous job on every GPU (no stragglers, no checkpoints): the swing is the compute/communication one
ONE_JOB = {"node": "DGX-H100", "n_gpus": 256, "stragglers": "none",
           "training": {"n_jobs": 1, "span_s": 1.0, "sizes_gpus": [256], "size_weights": [1.0],
                        "duration_median_h": 10.0, "duration_sigma_ln": 0.0, "checkpoint_duration_s": 0.0}}
TDP_W = 700.0  # H100-SXM
#: the seed draws the job's power: 552 W per GPU, so its swing runs ~436-602 W (compute 1.09x, communication 0.79x)
SEED = 6


def _run(smoothing: dict | None = None, n: int = 600, report: bool = True, **over) -> pd.DataFrame:
    params = ClusterParams.model_validate({**ONE_JOB, **over, **({"smoothing": smoothing} if smoothing else {})})
    cluster = build_cluster(params, np.random.default_rng(SEED), 3600.0, report_smoothing=report)
    return pd.DataFrame([cluster.step(k * DT_S, DT_S) for k in range(n)])


# -- the plain models --------------------------------------------------------------------------------
@pytest.mark.parametrize("frac", [0.1, 0.95])
def test_a_floor_outside_gb200s_range_is_refused(frac):
    with pytest.raises(ValueError, match="20-90 % of TDP"):
        PowerFloor(frac, TDP_W)
    with pytest.raises(ValidationError, match="power_floor_frac"):
        ClusterParams.model_validate({**ONE_JOB, "smoothing": {"power_floor_frac": frac}})


def test_the_limiter_ramps_at_its_rate_and_holds_before_falling():
    limiter = RampLimiter(ramp_up_mw_s=1.0, hold_s=0.5)
    out = [limiter.step(d, DT_S) for d in [0.0] + [10.0] * 20 + [0.0] * 30]
    np.testing.assert_allclose(np.diff(out[:21]), 0.1)  # 1 MW/s at 0.1 s steps
    assert out[21:26] == [out[20]] * 5 and out[20] == pytest.approx(2.0)  # held for 0.5 s after the demand fell
    assert out[26] == pytest.approx(1.9) and out[-1] == 0.0  # then down at 1 MW/s


@settings(max_examples=40, deadline=None)
@given(demand=st.lists(st.floats(0, 100), min_size=2, max_size=60), up=st.floats(0.5, 50), down=st.floats(0.5, 50),
       hold=st.floats(0, 1))
def test_the_limiter_never_ramps_faster_than_allowed(demand, up, down, hold):
    limiter = RampLimiter(up, down, hold)
    out = np.array([limiter.step(d, DT_S) for d in demand])
    ramp = np.diff(out) / DT_S
    assert (ramp <= up * (1 + 1e-9) + 1e-9).all() and (ramp >= -down * (1 + 1e-9) - 1e-9).all()


def _sine(n: int = 1200, mean_mw: float = 10.0, amp_mw: float = 3.0, hz: float = 0.5) -> np.ndarray:
    return mean_mw + amp_mw * np.sin(2 * math.pi * hz * np.arange(n) * DT_S)


@settings(max_examples=30, deadline=None)
@given(e_max_mj=st.floats(0.05, 20), tau_s=st.floats(0.1, 5), eff=st.floats(0.5, 1.0), soc=st.floats(0, 1),
       seed=st.integers(0, 99))
def test_the_store_balances_energy_and_keeps_its_charge_in_range(e_max_mj, tau_s, eff, soc, seed):
    """Small stores saturate: the caps must keep 0 <= soc <= 1 and the books must still balance."""
    store = RackStorage(e_max_mj, tau_s, eff, soc)
    load = np.clip(_sine() + np.random.default_rng(seed).normal(0, 2, 1200), 0, None)
    e0 = store.soc_frac * e_max_mj
    rows = []
    for p in load:
        rows.append(store.step(p, DT_S))
        assert 0.0 <= store.soc_frac <= 1.0
    grid, into, loss = np.array(rows).T
    assert (loss >= -1e-15).all()
    np.testing.assert_allclose(grid, load + into, rtol=1e-12)
    # grid energy = load energy + losses + change of the store [MJ]
    assert grid.sum() * DT_S == pytest.approx(load.sum() * DT_S + loss.sum() * DT_S + store.soc_frac * e_max_mj - e0,
                                              rel=1e-9, abs=1e-9)


def test_the_store_lowers_the_peak_and_the_band_swing():
    load = _sine()
    store = RackStorage(e_max_mj=10.0, tau_s=1.0, round_trip_frac=0.95)
    grid = np.array([store.step(p, DT_S)[0] for p in load])
    assert grid[100:].max() < load.max() - 1.0  # a 3 MW swing, its peak more than 1 MW lower
    assert band_rms(grid[100:], DT_S, TRAINING_BAND_HZ)[0] < 0.5 * band_rms(load[100:], DT_S, TRAINING_BAND_HZ)[0]
    assert grid.mean() == pytest.approx(load.mean(), rel=0.01)  # it moves energy, it does not make it


def test_a_lossless_store_loses_nothing_and_a_lossy_one_does():
    for eff, lossless in ((1.0, True), (0.9, False)):
        store = RackStorage(10.0, 1.0, eff)
        losses = [store.step(p, DT_S)[2] for p in _sine(300)]
        assert (max(losses) == 0.0) == lossless


# -- in the cluster -----------------------------------------------------------------------------------
def test_off_is_the_cluster_without_the_knob():
    plain = _run(report=False)
    assert list(plain.columns) == list(OUTPUTS)
    pd.testing.assert_frame_equal(plain, _run({"power_floor_frac": 0.0, "rack_storage_per_gpu_j": 0.0}, report=False))
    reported = _run(report=True)  # all off but reported: the same numbers, plus zero costs and no store
    pd.testing.assert_frame_equal(reported[list(OUTPUTS)], plain)
    assert (reported[["p_floor_mw", "e_floor_mwh", "ramp_lost_gpu_h", "p_rack_store_mw"]] == 0).all().all()
    assert reported["rack_soc_frac"].isna().all()


def test_the_floor_lifts_every_busy_gpu_and_costs_exactly_what_it_adds():
    off = _run()
    below = _run({"power_floor_frac": 0.5})  # 350 W, under the swing's trough: nothing to lift
    assert (below["p_floor_mw"] == 0).all() and below["e_floor_mwh"].iloc[-1] == 0
    pd.testing.assert_series_equal(below["p_mw"], off["p_mw"])
    for frac in (0.7, 0.8):
        on = _run({"power_floor_frac": frac})
        busy = on["n_jobs_running"] == 1  # the job on every GPU: p_gpu_mw is then the busy GPUs' alone
        assert busy.mean() > 0.95  # (it starts within the first second)
        assert (on["p_gpu_mw"][busy] * 1e6 / 256 >= frac * TDP_W * (1 - 1e-12)).all()
        assert (on["p_gpu_mw"][busy] * 1e6 / 256).min() < frac * TDP_W + 1.0  # the trough sits on the floor
        assert (on["p_floor_mw"] >= 0).all() and on["p_floor_mw"].max() > 0
        np.testing.assert_allclose(on["p_gpu_mw"] - off["p_gpu_mw"], on["p_floor_mw"], atol=1e-12)
        lift_mwh = float((on["p_mw"] - off["p_mw"]).sum() * DT_S / 3600)
        assert on["e_floor_mwh"].iloc[-1] == pytest.approx(float(on["p_floor_mw"].sum() * DT_S / 3600), rel=1e-9)
        assert lift_mwh >= on["e_floor_mwh"].iloc[-1] > 0  # the facility pays the lift plus its delivery losses
        pd.testing.assert_series_equal(on["work_gpu_h"], off["work_gpu_h"])  # energy only: no work lost
        assert (on["ramp_lost_gpu_h"] == 0).all()


def test_a_higher_floor_never_leaves_more_swing_in_the_training_band():
    swing = [band_rms(_run({"power_floor_frac": f} if f else None)["p_mw"].to_numpy()[100:], DT_S, TRAINING_BAND_HZ)[0]
             for f in (0.0, 0.5, 0.65, 0.7, 0.75, 0.8, 0.9)]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(swing, swing[1:])), swing
    assert swing[3] < 0.8 * swing[0] and swing[-1] < 1e-3 * swing[0], swing  # 0.9 x TDP is above the peak: flat


def test_the_limiter_keeps_the_ramps_and_costs_work_the_tighter_the_more():
    free = _run()
    free_ramp = free["p_gpu_mw"].diff().abs().iloc[100:].max() / DT_S  # the swing's, not the job's start
    lost = []
    for limit in (0.5 * free_ramp, 0.2 * free_ramp):
        out = _run({"ramp_up_mw_s": limit})
        ramp = out["p_gpu_mw"].diff().abs().iloc[1:] / DT_S
        assert ramp.max() <= limit * (1 + 1e-9)
        assert band_rms(out["p_mw"].to_numpy()[100:], DT_S, TRAINING_BAND_HZ)[0] < \
            band_rms(free["p_mw"].to_numpy()[100:], DT_S, TRAINING_BAND_HZ)[0]
        lost.append(out["ramp_lost_gpu_h"].iloc[-1])
        assert out["ramp_lost_gpu_h"].is_monotonic_increasing
    assert 0 < lost[0] < lost[1]
    assert (free["ramp_lost_gpu_h"] == 0).all()


def test_rack_storage_balances_energy_lowers_peak_and_band_swing():
    """The job's start from idle empties the store (0.2 MW over a 1 s lag is more than its 0.128 MJ); its
    pull back to half charge refills it in tens of seconds, so peak and swing are compared after 30 s."""
    off = _run(n=1200)
    on = _run({"rack_storage_per_gpu_j": 500.0, "rack_tau_s": 1.0}, n=1200)
    e_max_mj = 500.0 * 256 / 1e6
    assert on["rack_soc_frac"].between(0, 1).all()
    # servers alone are as without the store: the racks' draw is theirs plus what goes into the store
    np.testing.assert_allclose(on["p_it_mw"] - on["p_rack_store_mw"], off["p_it_mw"], rtol=1e-12)
    stored_mj = float(((on["p_rack_store_mw"] - on["p_rack_loss_mw"]) * DT_S).sum())
    assert stored_mj == pytest.approx((on["rack_soc_frac"].iloc[-1] - 0.5) * e_max_mj, abs=1e-9)
    assert (on["p_rack_loss_mw"] >= 0).all() and on["p_rack_loss_mw"].sum() > 0
    # heat out = everything drawn less what the store kept
    np.testing.assert_allclose(on["q_heat_mw"], on["p_mw"] - on["p_rack_store_mw"] + on["p_rack_loss_mw"], rtol=1e-12)
    np.testing.assert_allclose(on["p_it_mw"] + on["p_loss_mw"], on["p_mw"], rtol=1e-12)
    assert on["p_mw"].iloc[300:].max() < off["p_mw"].iloc[300:].max()
    assert on["p_mw"].iloc[300:].min() > off["p_mw"].iloc[300:].min()
    assert band_rms(on["p_mw"].to_numpy()[300:], DT_S, TRAINING_BAND_HZ)[0] < \
        0.5 * band_rms(off["p_mw"].to_numpy()[300:], DT_S, TRAINING_BAND_HZ)[0]


# -- the adapter ----------------------------------------------------------------------------------------
def test_the_sim_reports_the_smoothing_outputs_only_when_asked():
    plain = DatacenterSim.meta_for(DatacenterSimParams())["models"]["Cluster"]["outputs"]
    asked = DatacenterSim.meta_for(DatacenterSimParams(smoothing_outputs=True))["models"]["Cluster"]["outputs"]
    assert not set(SMOOTHING_OUTPUTS) & set(plain) and set(SMOOTHING_OUTPUTS) <= set(asked)


def test_validation_says_what_a_smoothing_study_should_know():
    from datetime import datetime, timezone
    params = ClusterParams.model_validate({**ONE_JOB, "smoothing": {"power_floor_frac": 0.5}})
    coarse = ScenarioContext(datetime(2024, 1, 1, tzinfo=timezone.utc), 3600, 60, 0, 1.0)
    said = DatacenterSim.check_entity("Cluster", params, coarse, DatacenterSimParams())
    assert any("step_s = 60 s" in s and "averaged out" in s for s in said)
    assert any("smoothing_outputs = true" in s for s in said)
    fine = ScenarioContext(datetime(2024, 1, 1, tzinfo=timezone.utc), 60, 0.1, 0, 0.1)
    assert DatacenterSim.check_entity("Cluster", params, fine, DatacenterSimParams(smoothing_outputs=True)) == []


SCENARIO = """
[scenario]
name = "smoothing_spec"
start = 2024-07-15T00:00:00Z
duration_s = 60
step_s = 0.1
tick_s = 0.1
engine = "direct"
seed = 3

[sims.dc]
adapter = "datacenter"
smoothing_outputs = true

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 256
stragglers = "none"
smoothing = { power_floor_frac = %s, rack_storage_per_gpu_j = %s }

[entities.campus.training]
n_jobs = 1
span_s = 1.0
sizes_gpus = [256]
size_weights = [1.0]
duration_median_h = 10.0
duration_sigma_ln = 0.0
checkpoint_duration_s = 0.0

[kpis.swing]
spec = { band_hz = [0.2, 3.0], max_band_share_frac = 0.2, max_ramp_mw_s = 10.0 }
"""


def test_a_run_records_the_knobs_costs_and_the_spec_judges_the_swing(tmp_path):
    """End to end through the scenario, the direct engine and the KPIs: the knobs' outputs are recorded, and
    the smoothed campus has less swing in the spec band than the plain one."""
    import cosim

    results = {}
    for name, floor, store in (("plain", 0.0, 0.0), ("smooth", 0.8, 500.0)):
        path = tmp_path / f"{name}.toml"
        path.write_text(SCENARIO % (floor, store), encoding="utf-8")
        results[name] = result = cosim.run(path, out_dir=tmp_path / "runs")
        assert result.ok, result.reason
        ts = result.timeseries()
        assert {f"campus.{a}" for a in SMOOTHING_OUTPUTS} <= set(ts.columns)
        assert "swing_spec" in result.kpis and "spec_band_ok" in result.kpis["swing"]["campus"]
    plain, smooth = (results[k].kpis["swing"]["campus"] for k in ("plain", "smooth"))
    assert results["smooth"].timeseries()["campus.e_floor_mwh"].iloc[-1] > 0
    assert smooth["band_rms_mw"] < 0.5 * plain["band_rms_mw"]
