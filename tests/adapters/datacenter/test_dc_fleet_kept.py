"""What an inference fleet keeps between steps (the knobs' batch limit, active replicas and throughput table;
the cluster's per-fleet GPU counts and idle power) gives the numbers of working everything out afresh, to the bit.

Two clusters from the same params and seed take the same knob sequence; the second forgets every kept
value before each step. The knobs change the batch limit, the share of replicas active (to none), the
caps and the demand, each held for a few steps and changed at others, and one fleet's replicas change
between steps, so the kept values are invalidated in every way they can be.
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.inference import batch_curves
from cosim.adapters.datacenter.sim import knobs_from

PARAMS = {
    "node": "DGX-H100", "n_gpus": 64,
    "training": {"n_jobs": 20, "duration_median_h": 0.5},
    "inference": [
        {"name": "chat", "model": "llama-3.1-70b", "replicas": 6, "rate_req_s": 40.0, "arrivals": "azure_conv"},
        {"name": "code", "model": "llama-3.1-8b", "replicas": 3, "rate_req_s": 50.0, "arrivals": "synthetic",
         "max_batch": 64},
    ],
}
NAMES = ["chat", "code"]


def _knobs(k: int):
    phase = (k // 4) % 47  # (each held four steps)
    values = {}
    if phase % 5 < 2:
        values["n_batch_max"] = 16.0 + phase % 3
    if phase % 7 < 3:
        values["n_batch_max_code"] = 8.0
    if phase % 11 < 4:
        values["replicas_frac"] = 0.5 if phase % 2 else 0.0
    if phase % 13 < 3:
        values["replicas_chat_frac"] = 0.75
    if phase % 17 < 4:
        values["p_cap_infer_w"] = 350.0
    if phase % 19 < 5:
        values["demand_code_ratio"] = 2.5
    return knobs_from(values, NAMES)


def _forget(cluster) -> None:
    cluster.__dict__.pop("_serve_kept", None)
    for setup in cluster.fleets:
        setup.fleet._settings = setup.fleet._table_for = None


def _bits(value):
    return np.asarray(value, float).view(np.uint64).tolist() if isinstance(value, float) else value


@pytest.mark.parametrize("dt_s", [60.0, 300.0])
def test_kept_settings_give_the_numbers_worked_out_afresh(dt_s):
    params = ClusterParams.model_validate(PARAMS)
    kept, fresh = (build_cluster(params, np.random.default_rng(2), 300 * dt_s) for _ in range(2))
    hits = 0
    for k in range(300):
        if k % 60 == 59:  # a fleet's replicas change (no knob does it; the kept values must notice)
            for cluster in (kept, fresh):
                cluster.fleets[0].fleet.replicas = 6 - (k // 60) % 3
        settings = kept.fleets[0].fleet._settings
        _forget(fresh)
        a = kept.step(k * dt_s, dt_s, _knobs(k))
        b = fresh.step(k * dt_s, dt_s, _knobs(k))
        hits += kept.fleets[0].fleet._settings is settings
        assert list(a) == list(b)
        assert [_bits(v) for v in a.values()] == [_bits(v) for v in b.values()], k
    assert 100 < hits < 290  # (kept often, and renewed often)


def test_the_throughput_alone_is_at_batchs():
    """tokens_at and at_batch share one implementation; at_batch without the median ITL gives the others'
    numbers."""
    curves = batch_curves("llama-3.1-70b", "H100-SXM")
    for b in [0.0, 0.3, curves.b_min, 7.5, 64.0, curves.b_max, 2 * curves.b_max]:
        full = curves.at_batch(b, 80.0)
        lean = curves.at_batch(b, 80.0, median=False)
        assert _bits(curves.tokens_at(b)) == _bits(full[1])
        assert [_bits(x) for i, x in enumerate(lean) if i != 2] == [_bits(x) for i, x in enumerate(full) if i != 2]
        assert np.isnan(lean[2]) and not np.isnan(full[2])
