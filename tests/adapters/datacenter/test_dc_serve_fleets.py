"""A cluster's inference fleets stepped in one C call (``cosim_dc_serve_fleets`` in adapters/datacenter/_inference.c,
:class:`~cosim.adapters.datacenter.inference_kernel.ServeFleets`) give the Python form's numbers, to the bit.

Two clusters from the same params and seed take the same knobs, each held for a few steps as a simulator holds
its inputs; one steps its fleets through the C function where it covers them, the other through
``GpuCluster._serve_python``. Every output, queue, clock and ``queue_req`` must agree bit for bit, at step
lengths from 0.1 s to 5 min, through a warm-up (its quiet steps), overloads (queues that grow their arrays, waits
spread over a step, the quantile left to Python), demand, batch and replica knobs, synthetic (seeded) and trace
arrivals, and the knobs it does not cover (a power cap, a fleet with no replica active), which the Python form
steps. The logarithm and the exponential are numpy's own loops, read from the ufunc objects: the reader refuses
loops whose numbers are not numpy's.
"""

from __future__ import annotations

import copy
import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

import cosim
from c_part_marks import needs_c_part

from cosim.adapters.datacenter import ClusterParams, build_cluster, cluster as cluster_module
from cosim.adapters.datacenter import inference_kernel
from cosim.adapters.datacenter.sim import knobs_from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_dc_serve_kernel as serve_kernel  # noqa: E402  (the queue test's fleets)

pytestmark = needs_c_part(inference_kernel.KERNEL is not None and inference_kernel.numpy_loops() is not None,
                          "adapters/datacenter/_inference.so")

#: the queue test's fleets (an overloaded trace fleet, a synthetic one with a diurnal swing, a tight TTFT deadline),
#: with a warm-up: its quiet steps go through the C function too
PARAMS = {**serve_kernel.PARAMS, "training": {**serve_kernel.PARAMS["training"], "warmup_h": 1.0}}
NAMES = serve_kernel.NAMES


def _knob_values(phase: int) -> dict[str, float]:
    """Overload (demand up, batch down), replicas off, caps (which the C function leaves to Python)."""
    values = {}
    if phase % 7 == 3:
        values["p_cap_infer_w"] = 400.0
    if phase % 11 < 4:
        values["demand_chat_ratio"] = 3.0 + phase % 3
    if phase % 13 < 3:
        values["n_batch_max"] = 8.0
    if phase % 17 == 2:
        values["replicas_code_frac"] = 0.0
    if phase % 19 < 5:
        values["replicas_frac"] = 0.5
    return values


def _held_knobs(n_steps: int, hold: int) -> list:
    """One knobs object per ``hold`` steps (as the adapter reuses one while its inputs stay)."""
    out = []
    for k in range(0, n_steps, hold):
        knobs = knobs_from(_knob_values(k // hold), NAMES)
        out += [knobs] * min(hold, n_steps - k)
    return out


def _bits(value):
    return np.asarray(value, float).view(np.uint64).tolist() if isinstance(value, float) else value


def _state(cluster):
    """Each fleet's queue, clock and ``queue_req``, and the inputs its last serve took (offered, arrived, the capacity
    from the throughput curve, the TTFT limit...: a last-bit change of the capacity that ``min(offered, capacity)``
    hides from the outputs shows here)."""
    return [([_bits(x) for c in f.fleet.waits.cohorts for x in (c.n_req, c.start_s, c.end_s)],
             _bits(f.fleet.waits.clock_s), _bits(f.fleet.queue_req), f.fleet.waits.count,
             [_bits(float(x)) for x in f.fleet.waits.mem[:8]]) for f in cluster.fleets]


def _cluster(steps: int, dt_s: float):
    return build_cluster(ClusterParams.model_validate(PARAMS), np.random.default_rng(9), steps * dt_s)


@pytest.mark.parametrize("dt_s", [300.0, 60.0, 1.0, 0.1])
def test_the_fleets_in_c_give_pythons_numbers(dt_s, monkeypatch):
    n = 400
    in_c = _cluster(n, dt_s)  # (its warm-up's quiet steps already through the C function)
    monkeypatch.setattr(cluster_module, "SERVE_FLEETS", False)
    in_python = _cluster(n, dt_s)
    monkeypatch.undo()
    assert _state(in_c) == _state(in_python)
    served_in_c = 0
    real_step = inference_kernel.ServeFleets.step

    def counted(plan, *args):
        nonlocal served_in_c
        served_in_c += 1
        return real_step(plan, *args)

    for k, knobs in enumerate(_held_knobs(n, hold=5)):
        with monkeypatch.context() as m:
            m.setattr(inference_kernel.ServeFleets, "step", counted)
            got = in_c.step(k * dt_s, dt_s, knobs)
        with monkeypatch.context() as m:
            m.setattr(cluster_module, "SERVE_FLEETS", False)
            expected = in_python.step(k * dt_s, dt_s, knobs)
        assert {a: _bits(v) for a, v in got.items()} == {a: _bits(v) for a, v in expected.items()}, k
        assert _state(in_c) == _state(in_python), k
    # the C function served most steps (not the capped ones, nor those with a fleet switched off)
    assert n // 2 < served_in_c < n
    assert max(f.fleet.waits.room for f in in_c.fleets) >= 8  # (queues grew while the C function served them)


class _LeavesQuantilesToPython:
    """The library, with every fleet's quantile of the waits marked as left to Python after each call (as the C
    serve marks NaN waits or many point masses): the plan's Python fix-up must give the C function's numbers."""

    def __init__(self, real):
        self.real, self.marked = real, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def cosim_dc_serve_fleets(self, mem_address, ptrs_address):
        done = self.real.cosim_dc_serve_fleets(mem_address, ptrs_address)
        ik = inference_kernel
        n = int(np.ctypeslib.as_array((ctypes.c_double * 8).from_address(mem_address))[0])
        mem = np.ctypeslib.as_array((ctypes.c_double * (ik._FLEETS + ik._FLEET * n)).from_address(mem_address))
        if done == 0 and mem[2] == 0.0:
            for k in range(n):
                mem[ik._FLEETS + ik._FLEET * k + ik._F["python_quantile"]] = 1.0
            mem[21] = n
            self.marked += 1
        return done


def test_a_quantile_left_to_python_gives_the_same_numbers(monkeypatch):
    knobs = _held_knobs(200, hold=6)
    plain, fixed = _cluster(200, 60.0), _cluster(200, 60.0)
    wrapper = _LeavesQuantilesToPython(inference_kernel.KERNEL)
    for k in range(200):
        expected = plain.step(k * 60.0, 60.0, knobs[k])
        with monkeypatch.context() as m:
            m.setattr(inference_kernel, "KERNEL", wrapper)
            got = fixed.step(k * 60.0, 60.0, knobs[k])
        assert {a: _bits(v) for a, v in got.items()} == {a: _bits(v) for a, v in expected.items()}, k
    assert wrapper.marked > 100


@pytest.mark.parametrize("model", ["llama-3.1-70b", "llama-3.1-8b", "qwen-3-30b-a3b"])
def test_batches_across_the_fitted_range_give_pythons_numbers(model, monkeypatch):
    """Demand swept over two decades, a new value every step: the running batch crosses the fitted range
    (ln and exp of a new argument each step, where numpy's loops and the C library's differ in the last bit for
    ~4 % of arguments), and each step's numbers are Python's."""
    params = {"node": "DGX-H100", "n_gpus": 8, "training": {"n_jobs": 1},
              "inference": [{"name": "chat", "model": model, "replicas": 4, "rate_req_s": 40.0,
                             "arrivals": "azure_conv"}]}
    in_c, in_python = (build_cluster(ClusterParams.model_validate(params), np.random.default_rng(4), 3e4)
                       for _ in range(2))
    rng = np.random.default_rng(11)
    itl = set()
    for k in range(300):
        knobs = knobs_from({"demand_chat_ratio": float(10 ** rng.uniform(-1.0, 1.0))}, ["chat"])
        got = in_c.step(k * 60.0, 60.0, knobs)
        with monkeypatch.context() as m:
            m.setattr(cluster_module, "SERVE_FLEETS", False)
            expected = in_python.step(k * 60.0, 60.0, knobs)
        assert {a: _bits(v) for a, v in got.items()} == {a: _bits(v) for a, v in expected.items()}, k
        assert _state(in_c) == _state(in_python), k
        assert isinstance(in_c._serve_c, inference_kernel.ServeFleets)
        itl.add(got["itl_p99_ms"])
    assert len(itl) > 40  # (a new batch, hence a new ln and exp, at many steps)


def test_the_switch_takes_effect_mid_run(monkeypatch):
    """SERVE_FLEETS switched off and on again within one cluster's run (as a benchmark does): the steps in between are
    Python's, the later ones C's again, and the numbers those of a cluster that stepped in Python throughout."""
    knobs = _held_knobs(90, hold=30)
    switched = _cluster(90, 60.0)
    monkeypatch.setattr(cluster_module, "SERVE_FLEETS", False)
    reference = _cluster(90, 60.0)
    monkeypatch.undo()
    served = []
    real_step = inference_kernel.ServeFleets.step

    def counted(plan, *args):
        served.append(args[0])
        return real_step(plan, *args)

    monkeypatch.setattr(inference_kernel.ServeFleets, "step", counted)
    for k in range(90):
        with monkeypatch.context() as m:
            if 20 <= k < 50:
                m.setattr(cluster_module, "SERVE_FLEETS", False)
            got = switched.step(k * 60.0, 60.0, knobs[k])
        with monkeypatch.context() as m:
            m.setattr(cluster_module, "SERVE_FLEETS", False)
            expected = reference.step(k * 60.0, 60.0, knobs[k])
        assert {a: _bits(v) for a, v in got.items()} == {a: _bits(v) for a, v in expected.items()}, k
    stepped = {round(t / 60.0) for t in served}
    assert not stepped & set(range(20, 50)) and set(range(50, 60)) <= stepped


def test_a_copy_makes_its_own_plan_and_leaves_the_original_alone():
    knobs = _held_knobs(120, hold=8)
    original = _cluster(120, 60.0)
    for k in range(40):
        original.step(k * 60.0, 60.0, knobs[k])
    assert isinstance(original._serve_c, inference_kernel.ServeFleets)
    twin = copy.deepcopy(original)
    assert twin._serve_c is None  # (the plan holds the original's arrays' addresses)
    before = _state(original)
    outputs = [twin.step(k * 60.0, 60.0, knobs[k]) for k in range(40, 80)]
    assert _state(original) == before
    again = [original.step(k * 60.0, 60.0, knobs[k]) for k in range(40, 80)]
    assert [{a: _bits(v) for a, v in o.items()} for o in outputs] == [{a: _bits(v) for a, v in o.items()} for o in again]


def test_numpy_loops_are_read_from_the_ufuncs_and_checked():
    """The loops read are numpy's (a Python float through them gives np.exp's and np.log's numbers); a loop whose
    numbers are not the ufunc's, or a ufunc without a float64 loop, is refused."""
    values = inference_kernel._check_values(np.random.default_rng(3))
    exp = inference_kernel.numpy_loop(np.exp, values["exp"])
    assert exp is not None and inference_kernel.numpy_loop(np.log, values["log"]) is not None
    assert inference_kernel.numpy_loop(np.isnat, [1.0]) is None  # (no 'd->d' loop)
    calls = []

    def differs_once(a, b):
        calls.append(a)
        return len(calls) != 7

    with pytest.MonkeyPatch.context() as m:
        m.setattr(inference_kernel, "_same", differs_once)
        assert inference_kernel.numpy_loop(np.exp, values["exp"]) is None


def test_a_run_says_whether_its_fleets_stepped_in_c(write_scenario, tmp_path):
    """metadata.json's accelerations say that numpy's loops were read (the fleets' step in C), with numpy's version."""
    scenario = write_scenario("""
[scenario]
name = "fleet"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 300
seed = 1
engine = "direct"

[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 64
training = { n_jobs = 4, sizes_gpus = [8], size_weights = [1.0] }
inference = [{ name = "chat", model = "llama-3.1-70b", replicas = 2, rate_req_s = 10.0 }]
""")
    said = cosim.run(scenario, out_dir=tmp_path / "runs").folder.metadata()["accelerations"]["numpy_ufunc_loops"]
    assert said["on"] is True and said["detail"].startswith(f"numpy {np.__version__}: ") and "_inference.c" in said["detail"]
