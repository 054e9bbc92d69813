"""GpuCluster: energy balance, cap monotonicity, facility limit, pausing, determinism, bad requests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.adapters.datacenter import ClusterParams, build_cluster, cluster_problems
from cosim.adapters.datacenter.cluster import OUTPUTS, Knobs
from cosim.adapters.datacenter.scheduler import DONE, RUNNING

BASE = {
    "node": "DGX-H100", "n_gpus": 256,
    "training": {"n_jobs": 80, "sizes_gpus": [1, 8, 32, 64], "size_weights": [0.4, 0.4, 0.15, 0.05],
                 "duration_median_h": 3.0},
    "inference": [{"name": "chat", "model": "llama-3.1-70b", "replicas": 8, "rate_req_s": 60.0}],
}


def make(seed=1, duration_s=86400.0, **over):
    params = ClusterParams.model_validate({**BASE, **over})
    return build_cluster(params, np.random.default_rng(seed), duration_s)


def run(cluster, steps, knobs=None, dt=60.0):
    knobs = knobs if callable(knobs) else (lambda k, fixed=knobs or Knobs(): fixed)
    return pd.DataFrame([cluster.step(k * dt, dt, knobs(k)) for k in range(steps)])


@pytest.mark.parametrize("node, knobs", [
    ("DGX-H100", Knobs()),
    ("HGX-B200-DLC", Knobs(p_cap_w=600.0)),
    ("DGX-H100", Knobs(p_limit_mw=0.5, pause_flexible_frac=0.5)),
])
def test_energy_balance_heat_out_equals_power_in(node, knobs):
    inference = [{**BASE["inference"][0], "node": "HGX-B200-DLC" if "B200" in node else None}]
    out = run(make(node=node, inference=inference), 600, knobs)
    assert list(out.columns) == list(OUTPUTS)
    np.testing.assert_allclose(out["q_heat_air_mw"] + out["q_heat_liquid_mw"], out["p_mw"], rtol=1e-12)
    np.testing.assert_allclose(out["q_heat_mw"], out["p_mw"], rtol=1e-12)
    np.testing.assert_allclose(out["p_it_mw"] + out["p_loss_mw"], out["p_mw"], rtol=1e-12)
    np.testing.assert_allclose(out["p_train_mw"] + out["p_infer_mw"], out["p_it_mw"], rtol=1e-12)
    assert (out["q_heat_liquid_mw"] > 0).all() == ("DLC" in node)
    assert (out["p_loss_mw"] > 0).all() and (out["gpu_util_frac"].between(0, 1)).all()


def test_lower_cap_lowers_power_and_lengthens_jobs():
    """Same jobs, all submitted at once: each lower cap draws less and finishes later (Zeus curves)."""
    power, finish = [], []
    for cap in (700.0, 500.0, 350.0, 250.0):
        cluster = make(training={**BASE["training"], "span_s": 1.0, "n_jobs": 20, "sizes_gpus": [8],
                                 "size_weights": [1.0], "duration_median_h": 1.0, "duration_max_h": 4.0},
                       inference=[])
        out = run(cluster, 24 * 60, Knobs(p_cap_w=cap))
        power.append(out["p_mw"].iloc[:60].mean())
        assert (cluster.sched.state == DONE).all()
        finish.append(np.mean(cluster.sched.end_s))
    assert np.all(np.diff(power) < 0)
    assert np.all(np.diff(finish) > 0)


def test_facility_limit_is_met_by_throttling_low_priority_first():
    free = run(make(), 720)
    limit_mw = float(np.percentile(free["p_mw"], 50))
    limited = run(make(), 720, Knobs(p_limit_mw=limit_mw))
    feasible = limited["p_limit_excess_mw"] == 0
    assert feasible.mean() > 0.9
    assert (limited["p_mw"][feasible] <= limit_mw * (1 + 1e-9)).all()
    assert limited["p_mw"].max() < free["p_mw"].max()
    busy = free["p_mw"] > limit_mw
    low_cut = 1 - limited["p_train_low_mw"][busy].sum() / free["p_train_low_mw"][busy].sum()
    high_cut = 1 - limited["p_train_high_mw"][busy].sum() / max(free["p_train_high_mw"][busy].sum(), 1e-12)
    assert low_cut > high_cut
    assert limited["tokens_per_s"].sum() == pytest.approx(free["tokens_per_s"].sum())  # inference untouched


def test_pause_flexible_holds_flexible_jobs_and_costs_restore_time():
    cluster, base = make(), make()
    flexible = cluster.jobs.flexible
    rows, base_rows, flexible_running = [], [], []
    for k in range(24 * 60):
        knobs = Knobs(pause_flexible_frac=1.0) if 120 <= k < 240 else Knobs()
        rows.append(cluster.step(k * 60.0, 60.0, knobs))
        base_rows.append(base.step(k * 60.0, 60.0, Knobs()))
        flexible_running.append(int(np.count_nonzero(flexible & (cluster.sched.state == RUNNING))))
    out, ref = pd.DataFrame(rows), pd.DataFrame(base_rows)
    assert max(flexible_running[120:240]) == 0 and max(flexible_running[:120]) > 0
    assert (out["n_jobs_paused"].iloc[120:240] > 0).all() and (out["n_jobs_paused"].iloc[241:] == 0).all()
    assert out["p_mw"].iloc[120:240].mean() < ref["p_mw"].iloc[120:240].mean()
    assert out["delay_gpu_h"].iloc[-1] > ref["delay_gpu_h"].iloc[-1]  # checkpoint loss + restore + wait


def test_same_seed_same_run_other_seed_other_run():
    a, b, c = run(make(seed=3), 300), run(make(seed=3), 300), run(make(seed=4), 300)
    pd.testing.assert_frame_equal(a, b)
    assert not a["p_mw"].equals(c["p_mw"])


def test_knob_out_of_range_is_an_error_not_a_clip():
    cluster = make()
    with pytest.raises(ValueError, match=r"p_cap_w = 150 W is outside the H100-SXM's settable .* \[200, 700\]"):
        cluster.step(0, 60, Knobs(p_cap_w=150.0))
    with pytest.raises(ValueError, match="pause_flexible_frac = 1.5 is outside"):
        cluster.step(0, 60, Knobs(pause_flexible_frac=1.5))


def test_impossible_requests_are_reported(tmp_path):
    params = ClusterParams.model_validate({**BASE, "n_gpus": 16})
    assert any("job sizes [32, 64] GPUs exceed the cluster's n_gpus = 16" in p for p in cluster_problems(params, 3600))
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_s,runtime_s,num_gpus\n0,60,8\n10,60,64\n20,oops,8\n")
    params = ClusterParams.model_validate({**BASE, "training": {"source": "file", "file": str(trace)}})
    assert cluster_problems(params, 3600) == [
        "training: jobs.csv: row 3 (line 4), column 'runtime_s': 'oops' is not a number"]
    trace.write_text("submit_s,runtime_s,num_gpus\n0,60,8\n10,60,512\n")
    problems = cluster_problems(params, 3600)
    assert problems and "1 trace jobs need more GPUs than the cluster's n_gpus = 256 (largest 512)" in problems[0]
    params = ClusterParams.model_validate({**BASE, "node": "DGX-A100"})
    assert "no ML.ENERGY inference data for A100-80GB-SXM" in cluster_problems(params, 3600)[0]


def test_second_steps_show_the_iteration_swing_and_keep_its_mean():
    """At 1 s steps synchronous training swings between compute and communication phases; over
    whole iterations the mean equals the 1-minute average."""
    steady = {**BASE["training"], "span_s": 1.0, "n_jobs": 1, "sizes_gpus": [256], "size_weights": [1.0],
              "duration_sigma_ln": 0.0}  # one large synchronous job
    coarse = run(make(inference=[], training=steady), 2)
    fine = run(make(inference=[], training=steady), 120, dt=1.0).iloc[60:]
    assert fine["p_train_mw"].max() > fine["p_train_mw"].min() * 1.02
    assert fine["p_train_mw"].mean() == pytest.approx(coarse["p_train_mw"].iloc[1], rel=0.02)


def test_inference_knobs_trade_power_for_service():
    base = run(make(), 120)
    half = run(make(), 120, Knobs(replicas_frac=0.5))
    capped = run(make(), 120, Knobs(p_cap_infer_w=300.0))
    small = run(make(), 120, Knobs(n_batch_max=16))
    for cut in (half, capped):
        assert cut["p_infer_mw"].mean() < base["p_infer_mw"].mean()
    assert capped["itl_p99_ms"].mean() > base["itl_p99_ms"].mean()
    assert small["n_requests_queued"].sum() + small["n_requests_dropped"].sum() > 0
    assert small["slo_attainment_frac"].mean() < base["slo_attainment_frac"].mean()
    pd.testing.assert_series_equal(half["p_train_mw"], base["p_train_mw"])  # training untouched


@settings(max_examples=15, deadline=None)
@given(cap=st.one_of(st.none(), st.floats(200, 700)), limit=st.one_of(st.none(), st.floats(0.1, 3.0)),
       pause=st.one_of(st.none(), st.floats(0, 1)), replicas=st.one_of(st.none(), st.floats(0, 1)))
def test_energy_balance_and_limit_hold_for_any_knobs(cap, limit, pause, replicas):
    knobs = Knobs(p_cap_w=cap, p_limit_mw=limit, pause_flexible_frac=pause, replicas_frac=replicas)
    out = run(make(duration_s=7200.0, training={**BASE["training"], "span_s": 3600.0}), 40, knobs)
    np.testing.assert_allclose(out["q_heat_air_mw"] + out["q_heat_liquid_mw"], out["p_mw"], rtol=1e-12)
    if limit is not None:  # met, or the shortfall is reported
        assert (out["p_mw"] <= limit + out["p_limit_excess_mw"] + 1e-9).all()
    assert (out["n_jobs_running"] + out["n_jobs_queued"] + out["n_jobs_paused"] + out["n_jobs_done"]
            + out["n_jobs_rejected"] <= 80).all()
