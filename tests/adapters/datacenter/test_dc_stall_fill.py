"""A job's long-run stall shares, filled ahead for every job of a size already run (GpuCluster._fill_stall),
are the numbers it would get at its own first run."""

from __future__ import annotations

import numpy as np

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.cluster import Knobs

PARAMS = {
    "node": "DGX-H100", "n_gpus": 256,
    "training": {"n_jobs": 150, "sizes_gpus": [1, 8, 16, 32, 64], "size_weights": [0.3, 0.3, 0.2, 0.1, 0.1],
                 "duration_median_h": 0.7, "warmup_h": 1.0},
}


def _cluster():
    return build_cluster(ClusterParams.model_validate(PARAMS), np.random.default_rng(3), 40 * 300.0)


def test_filled_shares_are_each_jobs_own():
    cluster = _cluster()
    for k in range(40):
        cluster.step(k * 300.0, 300.0, Knobs())
    filled = (~np.isnan(cluster._stall_mean_frac)).nonzero()[0]
    ever_ran = (~np.isnan(cluster.sched.first_start_s)).nonzero()[0]
    assert len(np.setdiff1d(filled, ever_ran)) > 0  # (filled ahead: jobs that never ran have theirs)
    assert set(ever_ran.tolist()) <= set(filled.tolist())
    fresh = _cluster()  # the same seed: each job's own share, computed for it alone
    for job in filled.tolist():
        busy = fresh.stragglers.busy_mean(fresh.jobs.n_gpus[[job]])[0]
        expected = (1.0 - fresh.ckpt_mean_frac[job]) * (1.0 - busy)
        assert np.float64(cluster._stall_mean_frac[job]).view(np.uint64) == np.float64(expected).view(np.uint64)
        assert cluster.busy_mean_frac[job] == busy


def test_a_size_never_run_stays_unfilled():
    """Nothing is drawn for a size no job has run at: its jobs stay unfilled until one of them starts."""
    params = {**PARAMS, "training": {**PARAMS["training"], "warmup_h": 0.0}}
    cluster = build_cluster(ClusterParams.model_validate(params), np.random.default_rng(3), 3600.0)
    assert np.isnan(cluster._stall_mean_frac).all() and not cluster.stragglers._busy_mean
    sizes = cluster.jobs.n_gpus
    job = int(np.flatnonzero(sizes == 16)[0])
    cluster._mean_stall(np.array([job]))
    filled = ~np.isnan(cluster._stall_mean_frac)
    assert filled.sum() > 1 and (filled == (sizes == 16)).all()  # every job of its size, and only those
    assert set(cluster.stragglers._busy_mean) == {16}


def test_unfinished_states_are_one_range():
    """GpuCluster._pause_flexible takes the queued, running and paused jobs as one range of state values."""
    from cosim.adapters.datacenter.states import PAUSED, QUEUED, RUNNING, STATE_NAMES

    unfinished = [i for i in range(len(STATE_NAMES)) if QUEUED <= i <= PAUSED]
    assert unfinished == sorted((QUEUED, RUNNING, PAUSED))
