"""An inference fleet's requests in C (adapters/datacenter/_inference.c, ``make build``) give Python's numbers, to the bit.

Two clusters from the same params and seed take the same knob sequence, one with its fleets' queues in C
(:class:`~cosim.adapters.datacenter.inference_kernel.KernelWaitQueue`) and one in Python
(:class:`~cosim.adapters.datacenter.prefill.WaitQueue`); every output, queue and clock must agree bit for
bit. The fleets are overloaded at times (queues of many cohorts, drops, waits spread over a step: the
quantile's search) and idle at others (no replica active), with caps, batch limits and demand changing.
A copy taken mid-run (a gym snapshot) steps as the original does and leaves the original's queue alone.
The load-time check refuses a function that does not give Python's numbers.
"""

from __future__ import annotations

import copy
import ctypes

import numpy as np
import pytest
from c_part_marks import needs_c_part

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter import inference_kernel, prefill
from cosim.adapters.datacenter.inference import Fleet, batch_curves
from cosim.adapters.datacenter.prefill import WaitQueue, prefill_tokens_per_s
from cosim.adapters.datacenter.sim import knobs_from

pytestmark = needs_c_part(inference_kernel.KERNEL is not None, "adapters/datacenter/_inference.so")

PARAMS = {
    "node": "DGX-H100", "n_gpus": 64,
    "training": {"n_jobs": 20, "duration_median_h": 0.5},
    "inference": [
        {"name": "chat", "model": "llama-3.1-70b", "replicas": 4, "rate_req_s": 60.0, "arrivals": "azure_conv",
         "max_wait_s": 60.0},
        {"name": "code", "model": "llama-3.1-8b", "replicas": 3, "rate_req_s": 80.0, "arrivals": "synthetic",
         "diurnal_amp_frac": 0.5, "max_batch": 64},
        {"name": "moon", "model": "qwen-3-30b-a3b", "replicas": 2, "rate_req_s": 30.0, "arrivals": "mooncake_conv",
         "ttft_slo_s": 0.5},
    ],
}
NAMES = ["chat", "code", "moon"]


def _knobs(k: int):
    """Held knobs with changes: overload (demand up, batch down), no replica active, caps."""
    phase = k % 43
    values = {}
    if phase % 7 < 3:
        values["p_cap_infer_w"] = 400.0
    if phase % 11 < 4:
        values["demand_chat_ratio"] = 3.0
    if phase % 13 < 3:
        values["n_batch_max"] = 8.0
    if phase % 17 < 2:
        values["replicas_code_frac"] = 0.0
    if phase % 19 < 5:
        values["replicas_frac"] = 0.5
    return knobs_from(values, NAMES)


def _bits(value):
    return np.asarray(value, float).view(np.uint64).tolist() if isinstance(value, float) else value


def _queues(cluster):
    return [([_bits(x) for c in f.fleet.waits.cohorts for x in (c.n_req, c.start_s, c.end_s)],
             _bits(f.fleet.waits.clock_s), _bits(f.fleet.queue_req)) for f in cluster.fleets]


def _cluster(steps: int, dt_s: float):
    return build_cluster(ClusterParams.model_validate(PARAMS), np.random.default_rng(9), steps * dt_s)


@pytest.mark.parametrize("dt_s", [300.0, 60.0, 1.0, 0.1])
def test_the_kernel_gives_pythons_numbers(dt_s, monkeypatch):
    with_c = _cluster(400, dt_s)
    monkeypatch.setattr(inference_kernel, "KERNEL", None)
    with_python = _cluster(400, dt_s)
    monkeypatch.undo()
    assert all(isinstance(f.fleet.waits, inference_kernel.KernelWaitQueue) for f in with_c.fleets)
    assert all(isinstance(f.fleet.waits, WaitQueue) for f in with_python.fleets)
    searched, longest = 0, 0
    real_quantile = prefill.quantile

    def counting(segments, q_frac):  # (Python's quantile: the form the C function must match)
        nonlocal searched
        searched += not all(hi <= lo for _, lo, hi in segments)
        return real_quantile(segments, q_frac)

    for k in range(400):
        knobs = _knobs(k)
        got = with_c.step(k * dt_s, dt_s, knobs)
        monkeypatch.setattr(prefill, "quantile", counting)
        expected = with_python.step(k * dt_s, dt_s, knobs)
        monkeypatch.undo()
        assert {k: _bits(v) for k, v in got.items()} == {k: _bits(v) for k, v in expected.items()}, k
        assert _queues(with_c) == _queues(with_python), k
        longest = max(longest, *(len(f.fleet.waits.cohorts) for f in with_c.fleets))
    # the run exercised what the C function does: queues of several cohorts, waits spread (the search)
    assert longest >= 2 and searched > 10
    assert max(f.fleet.waits.room for f in with_c.fleets) >= 8


def test_a_long_queue_grows_the_room_and_gives_pythons_numbers():
    """At 0.1 s steps with 120 s of waiting allowed a queue holds hundreds of cohorts: the array grows."""
    curves = batch_curves("llama-3.1-70b", "H100-SXM")
    args = {"replicas": 2, "max_batch": 256, "output_tokens": 211.0, "idle_w": 80.0, "tdp_w": 700.0,
            "input_tokens": 1000.0, "prefill_tok_s": prefill_tokens_per_s("llama-3.1-70b", "H100-SXM", 4)}
    fleets = [Fleet(curves, **args) for _ in range(2)]
    fleets[1].waits = WaitQueue()
    assert isinstance(fleets[0].waits, inference_kernel.KernelWaitQueue)
    for k in range(2000):
        rate = 40.0 if (k // 300) % 2 == 0 else 1.0
        a, b = (f.step(0.1, rate, max_batch=64 if k % 500 < 250 else None) for f in fleets)
        assert [_bits(x) for x in vars(a).values()] == [_bits(x) for x in vars(b).values()], k
    assert fleets[0].waits.room >= 64  # (grown three times from 8)


def test_a_copy_finds_its_own_address():
    original = _cluster(200, 60.0)
    for k in range(40):
        original.step(k * 60.0, 60.0, _knobs(k))
    twin = copy.deepcopy(original)
    assert all(f.fleet.waits.address != t.fleet.waits.address for f, t in zip(original.fleets, twin.fleets))
    before = _queues(original)
    outputs = [twin.step(k * 60.0, 60.0, _knobs(k)) for k in range(40, 80)]
    assert _queues(original) == before  # the copy wrote into its own array only
    again = [original.step(k * 60.0, 60.0, _knobs(k)) for k in range(40, 80)]
    assert [{k: _bits(v) for k, v in o.items()} for o in outputs] == [{k: _bits(v) for k, v in o.items()} for o in again]


class _Wrong:
    """A stand-in library whose function gives one value a last bit more than Python's."""

    def __init__(self):
        self.real = inference_kernel.KERNEL

    def cosim_dc_serve(self, address):
        self.real.cosim_dc_serve(address)
        io = np.ctypeslib.as_array((ctypes.c_double * 24).from_address(address))
        io[18] = np.nextafter(io[18], np.inf)  # the requests kept


def test_the_load_check_refuses_other_numbers():
    assert inference_kernel._agrees_with_python(inference_kernel.KERNEL)
    assert not inference_kernel._agrees_with_python(_Wrong())


def test_a_queue_pickled_where_c_runs_goes_on_in_python_where_it_does_not(monkeypatch):
    """A snapshot pickled in a process that uses the library and loaded in one that does not (not built,
    stale, refused): the queue comes back as prefill's Python queue with the same clock and cohorts, and
    both go on to the same numbers; where the library is used, a copy stays in C (control)."""
    import pickle
    steps = [(60.0, 900.0 + 100.0 * i, 500.0, 300.0 + 40.0 * (i % 3), 120.0, 30.0, False) for i in range(8)]
    queue = inference_kernel.KernelWaitQueue(inference_kernel.KERNEL)
    for args in steps[:4]:
        queue.serve(*args)
    assert queue.count > 0  # a queue has formed: there are cohorts to carry over
    blob = pickle.dumps(queue)
    assert isinstance(pickle.loads(blob), inference_kernel.KernelWaitQueue)
    monkeypatch.setattr(inference_kernel, "KERNEL", None)
    python = pickle.loads(blob)
    assert isinstance(python, WaitQueue)
    assert python.clock_s == queue.clock_s and [(c.n_req, c.start_s, c.end_s) for c in python.cohorts] == \
        [(c.n_req, c.start_s, c.end_s) for c in queue.cohorts]
    for args in steps[4:]:
        assert python.serve(*args) == queue.serve(*args)
