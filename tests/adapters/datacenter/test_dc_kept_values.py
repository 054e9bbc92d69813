"""What the cluster keeps between steps (running jobs' sums, scheduling outputs, the flexible pool, the
adapter's checked knobs) gives the numbers of working everything out afresh, to the bit.

Two clusters from the same params and seed take the same knob sequence; the second forgets every kept
value before each step. Knobs change often (caps, limit, pauses, replicas, batch), jobs are elastic, fail,
hold their GPUs when paused and burst off-site, so the kept values are invalidated in every way they can be.
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.cluster import GpuCluster, _sure_steps
from cosim.adapters.datacenter.sim import knobs_from

PARAMS = {
    "node": "DGX-H100", "n_gpus": 256,
    "training": {"n_jobs": 90, "sizes_gpus": [1, 8, 16, 32], "size_weights": [0.3, 0.4, 0.2, 0.1],
                 "duration_median_h": 1.0, "flexible_frac": 0.5, "hold_paused_gpus": True,
                 "failure_rate_per_gpu_h": 0.003, "failure_end_frac": 0.2, "elastic_frac": 0.3,
                 "policy": "elastic", "warmup_h": 2.0},
    "transient": {"n_gpus_max": 32},
    "inference": [{"name": "chat", "model": "llama-3.1-70b", "replicas": 8, "rate_req_s": 60.0,
                   "arrivals": "azure_conv"}],
}


def _knobs(k: int):
    """A knob sequence that holds some values for a few steps and changes others every step."""
    phase = k % 41
    values = {}
    if phase % 7 < 3:
        values["p_limit_mw"] = 0.25 + 0.02 * (phase % 5)
    if phase % 11 < 6:
        values["pause_flexible_frac"] = (phase // 11) / 3
    if phase % 13 < 4:
        values["p_cap_low_w"] = 450.0
    if phase % 17 < 5:
        values["replicas_frac"] = 0.75
    if phase % 19 < 3:
        values["n_batch_max_chat"] = 32.0
    return knobs_from(values, ["chat"])


def _forget(cluster) -> None:
    cluster._steady = None
    cluster.observed.clear()
    cluster._flexible_pool = None
    cluster._training_out = cluster._idle = None


@pytest.mark.parametrize("steps_s", [[60.0], [300.0], [60.0] * 4 + [120.0] * 3])
def test_kept_values_give_the_numbers_worked_out_afresh(steps_s):
    params = ClusterParams.model_validate(PARAMS)
    kept, fresh = (build_cluster(params, np.random.default_rng(4), 400 * max(steps_s), report_scheduling=True)
                   for _ in range(2))
    time_s = 0.0
    for k in range(400):
        dt_s = steps_s[k % len(steps_s)]  # the last case: the step length changes while the jobs stay
        _forget(fresh)
        a = kept.step(time_s, dt_s, _knobs(k))
        b = fresh.step(time_s, dt_s, _knobs(k))
        time_s += dt_s
        assert list(a) == list(b)
        assert [repr(v) for v in a.values()] == [repr(v) for v in b.values()], k
    # the run exercised what invalidates the kept values
    assert kept.n_job_failures > 0 and kept.sched.n_finished > 0 and kept.sched.alloc_version > 0


def test_the_steps_vouched_whole_are_whole_and_finish_no_job():
    """After a whole step, _sure_steps(rem, full, floor) steps follow in which the tests it lets the
    cluster skip would pass: each job's remaining work, less its whole step's work once a step
    (rounded as the cluster does), stays at least the floor before the step (a whole step) and above
    1e-6 s after it (no job finishes). The bound is also not far below the truth (at most 3 steps
    plus the rounding slack)."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        full = rng.choice([rng.uniform(0.0, 600.0, n), np.full(n, 60.0), rng.uniform(0, 1e-9, n)])
        floor = np.maximum(full, 1e-12)
        rem = floor * rng.uniform(1.0, rng.choice([1.5, 30.0, 3000.0]), n) + rng.choice([0.0, 1e-7, 1e6])
        sure = _sure_steps(rem, full, floor)
        left = rem - full  # the vouching step itself
        for _ in range(min(sure, 20_000)):
            assert (left / floor).min() >= 1.0
            left = left - full
            assert left.min() > 1e-6
        if sure < 1e6 and (full > 1e-3).all():
            truth = 0
            while (left / floor).min() >= 1.0 and (left - full).min() > 1e-6 and truth < 10:
                left, truth = left - full, truth + 1
            assert truth <= 3 + 1e-9 * rem.max() / full.min() + 1


def test_a_warm_up_without_outputs_leaves_the_cluster_as_one_with_them(monkeypatch):
    """The warm-up's steps make no outputs; the cluster they leave steps on exactly as one whose
    warm-up made every output (each step's side effects kept)."""
    params = ClusterParams.model_validate(PARAMS)
    lean = build_cluster(params, np.random.default_rng(5), 24_000.0)
    step = GpuCluster.step
    monkeypatch.setattr(GpuCluster, "step", lambda self, *args, report=True, **kw: step(self, *args, report=True, **kw))
    full = build_cluster(params, np.random.default_rng(5), 24_000.0)
    monkeypatch.undo()
    for k in range(100):
        a, b = lean.step(60.0 * k, 60.0, _knobs(k)), full.step(60.0 * k, 60.0, _knobs(k))
        assert [repr(v) for v in a.values()] == [repr(v) for v in b.values()], k
