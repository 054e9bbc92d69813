"""Time to first token: prefill rate, FIFO waits by hand, and the attainment outputs of the cluster."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.inference import Fleet, batch_curves, trace_input_tokens
from cosim.adapters.datacenter.prefill import (
    PREFILL_EFFICIENCY_FRAC,
    WaitQueue,
    prefill_tokens_per_s,
    quantile,
    share_within,
)


def test_prefill_efficiency_reproduces_the_published_ttft():
    """NVIDIA (Technical Blog 2024, GH200 NVL32): Llama 3.1 70B, 32,768 input tokens, TTFT 472 ms on
    32 Hopper GPUs. FLOP = tokens x (2 x 70.6e9 + 4 x 80 layers x 8,192 x 16,384 causal attention)."""
    flop = 32_768 * (2 * 70.6e9 + 4 * 80 * 8192 * 16_384)
    assert flop / 0.472 / 32 / 989.4e12 == pytest.approx(PREFILL_EFFICIENCY_FRAC, abs=0.01)
    # 4 x H100 replica of Llama 3.1 70B: 4 x 0.40 x 989.4e12 / (2 x 70.6e9) = 11,211 prompt tokens/s
    assert prefill_tokens_per_s("llama-3.1-70b", "H100-SXM", 4) == pytest.approx(11_211.3, rel=1e-4)
    with pytest.raises(ValueError, match="known models"):
        prefill_tokens_per_s("gpt-5", "H100-SXM", 1)


def test_fifo_waits_by_hand():
    """10 s steps. Step 1: 100 arrive uniformly over [0, 10), 50 are served at 5/s, first come
    first: the 50 that arrived in [0, 5) are served over [0, 10): waits uniform on [0, 5] s.
    Step 2: no arrivals, the other 50 (arrived in [5, 10)) are served over [10, 20): waits
    uniform on [5, 10] s. With a 7 s deadline and 0.1 s prefill, (6.9 - 5) / 5 = 38 % meet it."""
    queue = WaitQueue()
    first = queue.step(10.0, 100.0, 50.0, 50.0)
    assert first == [(50.0, 0.0, 5.0)] and quantile(first, 0.99) == pytest.approx(4.95)
    second = queue.step(10.0, 0.0, 50.0, 0.0)
    assert second == [(50.0, 5.0, 10.0)]
    assert share_within(second, 7.0 - 0.1) == pytest.approx(0.38 * 50)
    assert quantile(second, 0.99) + 0.1 == pytest.approx(10.05)
    assert not queue.cohorts


def test_dropped_requests_are_the_newest():
    """100 arrive over [0, 10), 20 served, 30 kept (50 dropped): the kept arrived over [2, 5) s;
    served next step at 3/s over [10, 20): waits from 10 - 2 = 8 s to 20 - 5 = 15 s."""
    queue = WaitQueue()
    queue.step(10.0, 100.0, 20.0, 30.0)
    assert sum(c.n_req for c in queue.cohorts) == pytest.approx(30.0)
    (n, lo, hi), = queue.step(10.0, 0.0, 30.0, 0.0)
    assert (n, lo, hi) == pytest.approx((30.0, 8.0, 15.0))


def _fleet(**kw):
    curves = batch_curves("llama-3.1-70b", "H100-SXM")
    args = {"replicas": 10, "max_batch": 256, "output_tokens": 211.0, "idle_w": 80.0, "tdp_w": 700.0, "input_tokens": 1000.0,
                "prefill_tok_s": prefill_tokens_per_s("llama-3.1-70b", "H100-SXM", 4)}
    args.update(kw)
    return Fleet(curves, **args)


def test_light_load_ttft_is_the_prefill_time():
    """No queue: TTFT = 1,000 prompt tokens / 11,211 tokens/s = 89.2 ms for every request."""
    res = _fleet().step(60.0, 5.0)
    assert res.ttft_p99_ms == pytest.approx(1e3 * 1000 / 11_211.3, rel=1e-4)
    assert res.ttft_good_req == pytest.approx(res.served_req) == pytest.approx(res.good_req)
    late = _fleet(ttft_slo_s=0.08).step(60.0, 5.0)  # deadline below the prefill time
    assert late.ttft_good_req == 0 and late.good_req == 0 and late.itl_good_req == late.served_req


def test_overload_builds_waits_and_the_queue_is_conserved():
    fleet = _fleet(max_wait_s=30.0)
    p99 = []
    for _ in range(5):
        res = fleet.step(60.0, 2000.0)
        p99.append(res.ttft_p99_ms)
        assert sum(c.n_req for c in fleet.waits.cohorts) == pytest.approx(fleet.queue_req, rel=1e-9)
    assert p99[-1] > 2000.0 and res.ttft_good_req < res.served_req
    assert p99[-1] <= 1e3 * (30.0 + 60.0) + 100.0  # kept requests wait at most max_wait_s beyond a step


def _campus(**fleet):
    params = ClusterParams.model_validate({
        "node": "DGX-H100", "n_gpus": 16, "training": {"n_jobs": 0},
        "inference": [{"name": "chat", "model": "llama-3.1-70b", "replicas": 4, "rate_req_s": 2.0, **fleet}]})
    return build_cluster(params, np.random.default_rng(0), 3600.0)


@pytest.mark.parametrize("fleet, ttft, itl", [({}, 1.0, 1.0), ({"ttft_slo_s": 0.05}, 0.0, 1.0),
                                              ({"itl_slo_ms": 1.0}, 1.0, 0.0)])
def test_slo_attainment_needs_both_deadlines(fleet, ttft, itl):
    """Azure conversation prompts (1,154.7 tokens on average) take 103.0 ms to prefill: a 50 ms
    TTFT deadline is always missed, a 1 ms ITL deadline too; the SLO needs both."""
    out = _campus(**fleet).step(0.0, 60.0)
    assert out["ttft_attainment_frac"] == ttft and out["itl_attainment_frac"] == itl
    assert out["slo_attainment_frac"] == min(ttft, itl)
    assert trace_input_tokens("azure_conv") == pytest.approx(1154.7, abs=0.05)
    assert out["ttft_p99_ms"] == pytest.approx(1e3 * 1154.7 / 11_211.3, rel=1e-4)
