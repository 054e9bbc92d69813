"""The running jobs' progress in C (adapters/datacenter/_kernels.c, ``make build``) gives numpy's numbers, to the bit.

Two clusters from the same params and seed take the same knob sequence, one with the C function and
one with numpy's expressions (the kernel switched off); every output and every per-job array must
agree bit for bit. A copy of a cluster taken mid-run (a gym snapshot) packs its own addresses: it
steps as the original does and leaves the original's arrays alone. The load-time check refuses a
function that does not give numpy's numbers.
"""

from __future__ import annotations

import copy
import ctypes

import numpy as np
import pytest
from c_part_marks import needs_c_part

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter import cluster as cluster_module
from cosim.adapters.datacenter import kernels
from cosim.adapters.datacenter.sim import knobs_from

pytestmark = needs_c_part(kernels.KERNELS is not None, "adapters/datacenter/_kernels.so")

PARAMS = {
    "node": "DGX-H100", "n_gpus": 256,
    "training": {"n_jobs": 120, "sizes_gpus": [1, 8, 16, 32], "size_weights": [0.3, 0.4, 0.2, 0.1],
                 "duration_median_h": 0.7, "flexible_frac": 0.5, "elastic_frac": 0.2, "warmup_h": 1.0},
    "inference": [{"name": "chat", "model": "llama-3.1-8b", "replicas": 4, "rate_req_s": 20.0}],
}


def _knobs(k: int):
    """Held knobs with changes: caps, a limit and pauses change which jobs run and at what speed."""
    phase = k % 37
    values = {}
    if phase % 7 < 3:
        values["p_cap_low_w"] = 400.0
    if phase % 11 < 5:
        values["pause_flexible_frac"] = (phase // 11) / 3
    if phase % 13 < 3:
        values["p_limit_mw"] = 0.2
    return knobs_from(values, ["chat"])


def _bits(value):
    return np.asarray(value, float).view(np.uint64).tolist() if isinstance(value, float) else value


def _state(cluster):
    s = cluster.sched
    return [a.view(np.uint64).tolist() for a in (s.remaining_s, s.work_done_s, cluster.ran_s)] + [s.state.tolist()]


def _cluster(steps: int, dt_s: float):
    return build_cluster(ClusterParams.model_validate(PARAMS), np.random.default_rng(7), steps * dt_s)


@pytest.mark.parametrize("steps_s", [[60.0], [300.0], [60.0] * 5 + [300.0] * 2])
def test_the_kernel_gives_numpys_numbers(steps_s, monkeypatch):
    with_c = _cluster(300, max(steps_s))
    monkeypatch.setattr(cluster_module, "KERNELS", None)
    with_numpy = _cluster(300, max(steps_s))
    monkeypatch.undo()
    time_s, used = 0.0, 0
    for k in range(300):
        dt_s = steps_s[k % len(steps_s)]
        knobs = _knobs(k)
        got = with_c.step(time_s, dt_s, knobs)
        used += bool(with_c._progress)
        monkeypatch.setattr(cluster_module, "KERNELS", None)
        expected = with_numpy.step(time_s, dt_s, knobs)
        monkeypatch.undo()
        assert {k: _bits(v) for k, v in got.items()} == {k: _bits(v) for k, v in expected.items()}, (k, time_s)
        assert _state(with_c) == _state(with_numpy), (k, time_s)
        time_s += dt_s
    assert used > 250  # (the C function did the steps)
    assert with_numpy._progress is None
    assert (with_c.sched.state == cluster_module.DONE).sum() > 20  # jobs finished mid-step, in both


def test_a_copy_packs_its_own_addresses():
    original = _cluster(200, 60.0)
    for k in range(40):
        original.step(k * 60.0, 60.0, _knobs(k))
    assert original._progress
    twin = copy.deepcopy(original)
    assert twin._progress is None  # (dropped: its addresses were the original's)
    before = _state(original)
    for k in range(40, 80):
        twin.step(k * 60.0, 60.0, _knobs(k))
    assert _state(original) == before  # the copy wrote into its own arrays only
    for k in range(40, 80):
        original.step(k * 60.0, 60.0, _knobs(k))
    assert _state(twin) == _state(original)


def test_a_copy_in_a_steady_stretch_steps_as_the_original():
    """A copy taken while the running jobs and knobs stay as they were (what the C part gathered is kept)
    gathers them into its own buffers before its first step: the same steps and outputs as the original's."""
    # long jobs, all submitted in the warm-up: none starts or ends in these steps
    params = {**PARAMS, "training": {**PARAMS["training"], "n_jobs": 10, "duration_median_h": 500.0, "span_s": 60.0}}
    original = build_cluster(ClusterParams.model_validate(params), np.random.default_rng(7), 40 * 300.0)
    held = knobs_from({}, ["chat"])
    for k in range(20):
        original.step(k * 300.0, 300.0, held)
    states = original.sched.state.copy()
    twin = copy.deepcopy(original)
    for k in range(20, 40):
        got, expected = twin.step(k * 300.0, 300.0, held), original.step(k * 300.0, 300.0, held)
        assert {k: _bits(v) for k, v in got.items()} == {k: _bits(v) for k, v in expected.items()}, k
        assert _state(twin) == _state(original), k
    assert (original.sched.state == states).all() and (states == cluster_module.RUNNING).sum() > 3


class _Wrong:
    """A stand-in library whose step rounds one value differently (adds where numpy subtracts)."""

    def __init__(self):
        self.real = kernels.KERNELS
        self.ddot = self.real.ddot
        self.cosim_dc_configure = self.real.cosim_dc_configure

    def cosim_dc_step(self, args_address, io_address):
        self.real.cosim_dc_step(args_address, io_address)
        args = np.ctypeslib.as_array((ctypes.c_int64 * kernels.A_COUNT).from_address(args_address))
        if args[kernels.A_N] > 0:
            run = np.ctypeslib.as_array((ctypes.c_int64 * 1).from_address(int(args[kernels.A_RUN])))
            work_done = np.ctypeslib.as_array((ctypes.c_double * (int(run[0]) + 1)).from_address(
                int(args[kernels.A_WORK_DONE])))
            work_done[run[0]] = np.nextafter(work_done[run[0]], np.inf)


_DDOT = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                         ctypes.c_int64)


@_DDOT
def _plain_dot(n, x, incx, y, incy):
    """A dot product summed in order, one rounding per product and per sum (not numpy's BLAS)."""
    xs = np.ctypeslib.as_array((ctypes.c_double * n).from_address(x)) if n else []
    ys = np.ctypeslib.as_array((ctypes.c_double * n).from_address(y)) if n else []
    total = 0.0
    for a, b in zip(xs, ys):
        total += float(a) * float(b)
    return total


class _OtherDot:
    """The real functions with a dot product of another summation order than numpy's."""

    def __init__(self):
        self.real = kernels.KERNELS
        self.ddot = ctypes.cast(_plain_dot, ctypes.c_void_p).value
        self.cosim_dc_configure, self.cosim_dc_step = self.real.cosim_dc_configure, self.real.cosim_dc_step


def test_the_load_check_refuses_other_numbers():
    assert kernels._agrees_with_numpy(kernels.KERNELS)
    assert not kernels._agrees_with_numpy(_Wrong())
    assert not kernels._agrees_with_numpy(_OtherDot())  # the sums need numpy's own ddot, not any dot


def test_the_sums_are_numpys():
    """cosim_dc_step's sums against numpy_sums on a running set of 300 jobs, partial and whole steps."""
    rng = np.random.default_rng(5)
    n = 300
    run = np.arange(n, dtype=np.int64)
    arrays = (rng.uniform(1.0, 2e3, n), np.zeros(n), np.zeros(n), rng.uniform(0.5, 1.0, n), rng.uniform(0.5, 1.0, n),
              rng.uniform(100.0, 700.0, n), np.ones(n), rng.integers(1, 64, n), rng.integers(0, 3, n),
              rng.uniform(0.0, 0.3, n), np.full(n, 0.03), np.ones(n))
    step = kernels.TrainStep(kernels.KERNELS, arrays, 700.0, 70.0)
    step.configure(run, np.full(n, 700.0), 300.0, None, None)
    speed, p_gpu = arrays[3].copy(), np.maximum(np.minimum(arrays[5] * arrays[4], 700.0), 70.0)
    stall = (arrays[9], arrays[10])
    for _ in range(3):
        whole, _, _, made = step.step(300.0, False, 2)
        assert made
        expected = kernels.numpy_sums(arrays[7].astype(float), p_gpu, speed, arrays[8], stall,
                                      None if whole else step.active)
        got = step.sums()
        assert [_bits(float(v)) for v in expected[:4]] == [_bits(v) for v in got[:4]]
        assert expected[4].tobytes() == got[4].tobytes() and expected[5].tobytes() == got[5].tobytes()
        assert [_bits(v) for v in expected[6]] == [_bits(v) for v in got[6]]
