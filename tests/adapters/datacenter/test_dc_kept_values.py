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
