"""Failure injection (:mod:`cosim.adapters.datacenter.failures`): off by default, seeded, work lost since the last checkpoint.

The failure probability of a gang of n GPUs over t hours is 1 - exp(-rate·n·t) (independent
GPU failures at a constant rate, any one interrupting the gang); a failed job falls back to
its last checkpoint, so it loses at most the work it did.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.cluster import GpuCluster
from cosim.adapters.datacenter.failures import LLAMA3_RATE_PER_GPU_H, FailureModel
from cosim.adapters.datacenter.hardware import gpu_spec, node_spec
from cosim.adapters.datacenter.scheduler import DONE, FAILED, QUEUED, RUNNING
from cosim.adapters.datacenter.training import Jobs

BASE = {
    "node": "DGX-H100", "n_gpus": 128,
    "training": {"n_jobs": 60, "sizes_gpus": [1, 8, 32], "size_weights": [0.4, 0.4, 0.2],
                 "duration_median_h": 2.0, "duration_max_h": 8.0, "span_s": 6 * 3600.0},
}


def run(seed=1, steps=288, dt=300.0, **training):
    params = ClusterParams.model_validate({**BASE, "training": {**BASE["training"], **training}})
    cluster = build_cluster(params, np.random.default_rng(seed), 86400.0, report_scheduling=True)
    return cluster, pd.DataFrame([cluster.step(k * dt, dt) for k in range(steps)])


def test_zero_rate_changes_nothing_and_a_rate_does():
    _, default = run()
    _, zero = run(failure_rate_per_gpu_h=0.0, failure_end_frac=0.5)
    pd.testing.assert_frame_equal(default, zero)
    assert default["n_job_failures"].iloc[-1] == 0 and default["lost_gpu_h"].iloc[-1] == 0.0
    _, failing = run(failure_rate_per_gpu_h=1e-2)
    assert failing["n_job_failures"].iloc[-1] > 0
    assert not failing["p_mw"].equals(default["p_mw"])


def test_lost_work_is_at_most_the_work_done_and_work_is_conserved():
    cluster, out = run(failure_rate_per_gpu_h=1e-2, failure_end_frac=0.2)
    sched = cluster.sched
    assert out["n_job_failures"].iloc[-1] >= 10 and out["n_jobs_failed"].iloc[-1] >= 1
    assert (cluster.lost_s <= sched.work_done_s + 1e-9).all()
    assert cluster.lost_gpu_h == pytest.approx(float(sched.n_alloc @ cluster.lost_s) / 3600.0)
    assert out["lost_gpu_h"].iloc[-1] == pytest.approx(cluster.lost_gpu_h)
    assert 0 < cluster.lost_gpu_h < float(sched.n_alloc @ sched.work_done_s) / 3600.0
    done = sched.state == DONE
    # every second of progress is the job's work or a cost charged to it (restores, lost work)
    np.testing.assert_allclose(sched.work_done_s[done], cluster.jobs.work_s[done] + sched.extra_work_s[done],
                               rtol=1e-9)
    failed = sched.state == FAILED
    assert (cluster.sched.owner[np.isin(cluster.sched.owner, np.flatnonzero(failed))] < 0).all()
    assert int(failed.sum()) == out["n_jobs_failed"].iloc[-1]


def test_same_seed_same_failures_other_seed_other_failures():
    _, a = run(seed=4, failure_rate_per_gpu_h=1e-2)
    _, b = run(seed=4, failure_rate_per_gpu_h=1e-2)
    pd.testing.assert_frame_equal(a, b)
    _, c = run(seed=5, failure_rate_per_gpu_h=1e-2)
    assert not a["n_job_failures"].equals(c["n_job_failures"])


def test_failure_probability_grows_with_gang_size_and_time():
    """Frequency of failures of 200,000 draws vs 1 - exp(-rate·n·t), within 5 standard errors."""
    model = FailureModel(1e-3, 0.0, np.random.default_rng(0))
    for n, t_h in [(8, 1.0), (64, 1.0), (8, 8.0)]:
        failed, _ = model.draw(np.full(200_000, n), np.full(200_000, t_h))
        p = -np.expm1(-1e-3 * n * t_h)
        assert abs(failed.mean() - p) < 5 * np.sqrt(p * (1 - p) / 200_000)
    assert LLAMA3_RATE_PER_GPU_H == pytest.approx(1.97e-5, rel=0.01)  # 419 / (16,384 · 54 · 24)


class _FailAt:
    """A failure model that fails every running job at one step (for hand-worked cases)."""

    enabled = True

    def __init__(self, step: int, end: bool):
        self.step, self.end, self.calls = step, end, 0

    def draw(self, n_gpus, busy_h):
        self.calls += 1
        hit = self.calls == self.step
        return np.full(len(n_gpus), hit), np.full(len(n_gpus), hit and self.end)


def one_job(end: bool) -> GpuCluster:
    node = node_spec("DGX-H100")
    jobs = Jobs(np.zeros(1), np.array([8]), np.array([7200.0]), np.array([1]), np.array([False]), np.array([0.7]))
    c = GpuCluster(node, gpu_spec(node.gpu), 8, jobs, [], stragglers=False, checkpoint_interval_s=1800.0,
                   checkpoint_duration_s=0.0, checkpoint_stagger=False, rng=np.random.default_rng(0))
    c.failures = _FailAt(40, end)
    return c


def test_a_failure_after_2400_s_loses_the_600_s_since_the_checkpoint_at_1800_s():
    """Uncapped, at 60-s steps, the job does 60 s of work a step: 2,400 s done at the failure,
    its last checkpoint at 1,800 s of running time, so 600 s lost; it restarts from there with
    the 300-s restore, and ends at 7,200 + 600 + 300 = 8,100 s of progress."""
    c = one_job(end=False)
    for k in range(40):
        c.step(k * 60.0, 60.0)
    assert c.sched.state[0] == QUEUED and c.sched.n_free == 8
    assert c.lost_s[0] == pytest.approx(600.0)
    assert c.lost_gpu_h == pytest.approx(8 * 600.0 / 3600.0)
    assert c.sched.remaining_s[0] == pytest.approx(7200.0 - 2400.0 + 600.0 + c.restore_s)
    k = 40
    while c.sched.state[0] != DONE:
        c.step(k * 60.0, 60.0)
        k += 1
    assert c.sched.work_done_s[0] == pytest.approx(7200.0 + 600.0 + c.restore_s)
    assert c.sched.end_s[0] == pytest.approx((40 + 1 + (7200.0 - 1800.0 + c.restore_s) / 60.0) * 60.0 - 60.0)


def test_a_failure_after_a_preemption_loses_only_the_work_since_the_restart():
    """Preempted at 2,100 s of work (a lease loss of 120 s charged, progress kept), restarted the
    next step, failed at 2,400 s: it loses the 300 s since the restart, not the 600 s since its
    checkpoint at 1,800 s (those 300 s were charged once already by the preemption)."""
    c = one_job(end=False)
    for k in range(35):
        c.step(k * 60.0, 60.0)
    assert c.sched.work_done_s[0] == pytest.approx(2100.0)
    c.sched.preempt(np.array([0]), 35 * 60.0, 120.0)
    for k in range(35, 40):
        c.step(k * 60.0, 60.0)
    assert c.sched.work_done_s[0] == pytest.approx(2400.0) and c.sched.state[0] == QUEUED
    assert c.lost_s[0] == pytest.approx(300.0)
    assert c.sched.remaining_s[0] == pytest.approx(7200.0 + 120.0 - 2400.0 + 300.0 + c.restore_s)


def test_a_failure_that_ends_the_job_frees_its_gpus():
    c = one_job(end=True)
    outs = [c.step(k * 60.0, 60.0) for k in range(45)]
    assert c.sched.state[0] == FAILED and c.sched.n_free == 8
    assert outs[-1]["n_jobs_running"] == 0 and outs[-1]["n_jobs_done"] == 0
    assert outs[-1]["p_train_mw"] < outs[0]["p_train_mw"]
    assert c.sched.jct_mean_s() == 0.0  # a failed job is not a completion
