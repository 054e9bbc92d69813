"""Transient burst capacity (:mod:`cosim.adapters.datacenter.transient`, after CloudCoaster): off by default,
short jobs only, within capacity, billed exactly, off the facility's meter, revocations seeded.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.cluster import GpuCluster
from cosim.adapters.datacenter.hardware import gpu_spec, node_spec
from cosim.adapters.datacenter.scheduler import DONE, QUEUED, RUNNING, TRANSIENT
from cosim.adapters.datacenter.training import Jobs
from cosim.adapters.datacenter.transient import TransientSetup

DT = 60.0


def hand(transient: TransientSetup | None) -> GpuCluster:
    """8 GPUs on site, busy for 10 h with job 0; jobs 1-3 (1 GPU, 30 min each) and 4 (1 GPU, 2 h) queue at 0."""
    node = node_spec("DGX-H100")
    jobs = Jobs(np.zeros(5), np.array([8, 1, 1, 1, 1]), np.array([36_000.0, 1800.0, 1800.0, 1800.0, 7200.0]),
                np.ones(5, np.int64), np.zeros(5, bool), np.array([0.7, 0.5, 0.5, 0.5, 0.5]))
    return GpuCluster(node, gpu_spec(node.gpu), 8, jobs, [], stragglers=False, rng=np.random.default_rng(0),
                      transient=transient, report_scheduling=True)


def test_short_jobs_burst_after_their_wait_run_off_site_and_are_billed_exactly():
    """Burst at 300 s (the wait), running from 420 s (120 s provisioning), done at 420 + 1,800 =
    2,220 s; billed 3 GPUs × 1,920 s = 1.6 GPU-h at 2 USD. The 2-h job is not short and waits.
    The facility's own power is that of the run without burst capacity, step for step."""
    setup = TransientSetup(n_gpus_max=4, short_max_h=1.0, wait_before_s=300.0, provision_s=120.0,
                           price_usd_per_gpu_h=2.0)
    c, base = hand(setup), hand(None)
    outs, base_outs = [], []
    for k in range(60):
        outs.append(c.step(k * DT, DT))
        base_outs.append(base.step(k * DT, DT))
        if k == 5:
            assert c.sched.state.tolist() == [RUNNING, TRANSIENT, TRANSIENT, TRANSIENT, QUEUED]
            assert outs[-1]["n_gpus_transient"] == 3
    assert c.sched.state.tolist() == [RUNNING, DONE, DONE, DONE, QUEUED]
    np.testing.assert_allclose(c.sched.end_s[1:4], 2220.0)
    np.testing.assert_allclose(c.sched.first_start_s[1:4], 300.0)
    assert outs[-1]["transient_gpu_h"] == pytest.approx(3 * 1920.0 / 3600.0)
    assert outs[-1]["transient_cost_usd"] == pytest.approx(2.0 * 3 * 1920.0 / 3600.0)
    assert outs[-1]["wait_short_mean_h"] == pytest.approx(300.0 / 3600.0)
    assert [o["p_mw"] for o in outs] == [o["p_mw"] for o in base_outs]
    running = [o["p_transient_mw"] for o in outs[8:36]]  # all three computing
    p_gpu_w = c.p_unc_w[1] + c.node.other_full_w / c.node.gpus_per_node
    np.testing.assert_allclose(running, 3 * p_gpu_w / 1e6, rtol=1e-12)
    assert outs[-1]["p_transient_mw"] == 0.0 and outs[-1]["n_gpus_transient"] == 0


def test_capacity_bounds_the_burst():
    c = hand(TransientSetup(n_gpus_max=2, short_max_h=1.0))
    for k in range(10):
        out = c.step(k * DT, DT)
        assert out["n_gpus_transient"] <= 2
    assert sorted(c.sched.state.tolist()) == sorted([RUNNING, TRANSIENT, TRANSIENT, QUEUED, QUEUED])


BASE = {
    "node": "DGX-H100", "n_gpus": 64,
    "training": {"n_jobs": 80, "sizes_gpus": [1, 8, 16], "size_weights": [0.5, 0.3, 0.2],
                 "duration_median_h": 1.0, "duration_max_h": 6.0, "span_s": 4 * 3600.0},
}


def run(seed=1, steps=120, dt=120.0, **transient):
    params = ClusterParams.model_validate({**BASE, "transient": transient})
    cluster = build_cluster(params, np.random.default_rng(seed), 86400.0, report_scheduling=True)
    return cluster, pd.DataFrame([cluster.step(k * dt, dt) for k in range(steps)])


def test_off_by_default_and_revocations_conserve_work_and_follow_the_seed():
    _, default = run()
    _, off = run(n_gpus_max=0, revoke_rate_per_h=5.0)
    pd.testing.assert_frame_equal(default, off)
    assert (default["n_gpus_transient"] == 0).all()
    c, a = run(n_gpus_max=24, short_max_h=1.5, revoke_rate_per_h=2.0)
    _, b = run(n_gpus_max=24, short_max_h=1.5, revoke_rate_per_h=2.0)
    pd.testing.assert_frame_equal(a, b)
    assert a["n_transient_revoked"].iloc[-1] > 0 and (a["n_gpus_transient"] <= 24).all()
    assert a["wait_short_mean_h"].iloc[-1] < default["wait_short_mean_h"].iloc[-1]
    sched = c.sched
    done = sched.state == DONE
    np.testing.assert_allclose(sched.work_done_s[done], c.jobs.work_s[done] + sched.extra_work_s[done], rtol=1e-9)
    # only short jobs ever left the site (no pauses here, so remaining work <= work), and a
    # job off-site holds no GPU on site
    ran_off = np.array(sorted(c.transient.burst_jobs))
    assert len(ran_off) >= 10 and (c.jobs.work_s[ran_off] <= 1.5 * 3600.0).all()
    assert (c.jobs.work_s > 1.5 * 3600.0).any()
    assert not np.isin(sched.owner, np.flatnonzero(sched.state == TRANSIENT)).any()
