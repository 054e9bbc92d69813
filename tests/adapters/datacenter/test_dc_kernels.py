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


class _Wrong:
    """A stand-in library whose function rounds one value differently (adds where numpy subtracts)."""

    def __init__(self):
        self.real = kernels.KERNELS

    def cosim_dc_progress(self, args_address, io_address):
        self.real.cosim_dc_progress(args_address, io_address)
        args = np.ctypeslib.as_array((ctypes.c_int64 * 8).from_address(args_address))
        if args[0] > 0:
            run = np.ctypeslib.as_array((ctypes.c_int64 * 1).from_address(int(args[1])))
            work_done = np.ctypeslib.as_array((ctypes.c_double * (int(run[0]) + 1)).from_address(
                int(args[3])))
            work_done[run[0]] = np.nextafter(work_done[run[0]], np.inf)


def test_the_load_check_refuses_other_numbers():
    assert kernels._agrees_with_numpy(kernels.KERNELS)
    assert not kernels._agrees_with_numpy(_Wrong())
