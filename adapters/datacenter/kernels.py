"""The running jobs' progress of a step in C (``_kernels.c``, built by ``make build``), when built.

:meth:`.cluster.GpuCluster._advance_steady` hands a step's per-job arithmetic (remaining work,
work done, running time, and the minima it tests) to ``cosim_dc_progress`` when the library is
built, up to date with its source and agrees with numpy on this machine (:func:`_agrees_with_numpy`,
at import); else numpy does it. Same numbers either way, to the bit: every value is one IEEE
operation on the same operands (``_kernels.c``), checked here and in
``tests/adapters/datacenter/test_dc_kernels.py``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from cosim.sdk import library_agrees, load_library

__all__ = ["KERNELS", "Progress"]


def _load(lib_path: Path = Path(__file__).with_name("_kernels.so")):
    """The library, or None: not built from its source as it is now, not loadable (:func:`cosim.sdk.load_library`),
    or not numpy's numbers."""
    lib = load_library(lib_path)
    if lib is None:
        return None
    lib.cosim_dc_progress.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cosim_dc_progress.restype = None
    return library_agrees(lib, _agrees_with_numpy(lib))


def numpy_progress(run, remaining, work_done, ran, full, floor, dt_s: float, sure: bool):
    """What ``cosim_dc_progress`` does, in numpy (the expressions of ``_advance_steady``), for the
    load-time check and the tests: ``(whole, least sure-steps bound or None, least work left or None,
    active or None)``."""
    rem = remaining[run]
    bound = None
    if sure:
        whole = True
    else:
        ratio = rem / floor
        whole = bool(ratio.min() >= 1.0)
        if whole:
            bound = float((np.floor((rem - floor - 1e-6) / (full + rem * 2.0 ** -52)) - 2.0).min())
    if whole:
        work_s, ran_s, active = full, np.full(len(run), dt_s * 1.0), None
    else:
        active = np.minimum(1.0, ratio)
        work_s, ran_s = full * active, dt_s * active
    left_s = rem - work_s
    remaining[run] = left_s
    work_done[run] += work_s
    ran[run] += ran_s
    return whole, bound, None if sure else float(left_s.min()), active


class Progress:
    """``cosim_dc_progress``'s arguments for one cluster's jobs, packed once: the addresses of the
    remaining work, work done and running time (indexed by job), and a scratch buffer the running
    jobs of a kept set (their ids, whole-step work and its floor) are copied into, beside the
    ``active`` shares the C function writes (read-only outside).

    Dropped on a copy (``copy.deepcopy``, pickle: a gym snapshot): the addresses are the original's,
    so the copy packs its own when it next steps.
    """

    __slots__ = ("arrays", "scratch", "args", "args_address", "io", "io_address", "loaded", "active")

    def __init__(self, remaining: np.ndarray, work_done: np.ndarray, ran: np.ndarray):
        n = len(remaining)
        self.arrays = (remaining, work_done, ran)
        self.scratch = np.zeros((4, n))  # job ids (as int64), whole-step work, its floor, active shares
        base = self.scratch.ctypes.data
        self.args = np.array([0, base, *(a.ctypes.data for a in self.arrays), base + 8 * n, base + 16 * n,
                              base + 24 * n], np.int64)
        self.args_address = self.args.ctypes.data
        self.io = np.zeros(5)
        self.io_address = self.io.ctypes.data
        self.loaded = None  # the kept step (cluster's per_dt list) whose jobs are in the scratch
        self.active = self.scratch[3, :0]

    @staticmethod
    def fits(remaining: np.ndarray, work_done: np.ndarray, ran: np.ndarray) -> bool:
        """The arrays are what the C function reads: C-contiguous float64, one value per job."""
        return all(a.flags.c_contiguous and a.dtype == np.float64 and a.ndim == 1 and len(a) == len(remaining)
                   for a in (remaining, work_done, ran))

    def load(self, key: object, run: np.ndarray, full: np.ndarray, floor: np.ndarray) -> None:
        """Copy running jobs ``run`` with their whole-step work ``full`` and ``floor`` in (``key``: whose)."""
        n = len(run)
        scratch = self.scratch
        scratch[0, :n].view(np.int64)[:] = run
        scratch[1, :n] = full
        scratch[2, :n] = floor
        self.args[0] = n
        self.active = scratch[3, :n]
        self.loaded = key

    def step(self, dt_s: float, sure: bool) -> tuple[bool, float, float]:
        """One step of the loaded jobs: ``(whole, least sure-steps bound, least work left)`` (see
        ``_kernels.c``); their active shares are in :attr:`active` when not whole."""
        io = self.io
        io[0] = dt_s
        io[1] = 1.0 if sure else 0.0
        KERNELS.cosim_dc_progress(self.args_address, self.io_address)
        return io[2] != 0.0, float(io[3]), float(io[4])

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()


def _agrees_with_numpy(lib) -> bool:
    """``cosim_dc_progress`` against :func:`numpy_progress` on random jobs, whole and partial steps,
    with zeros, tiny and huge values and NaN among them, bit for bit; False (numpy does the work)
    when one does not agree. Run once per process, at import."""
    rng = np.random.default_rng(4321)
    for case in range(60):
        n_jobs = int(rng.integers(1, 40))
        run = np.sort(rng.choice(n_jobs * 2, n_jobs, replace=False)).astype(np.int64)
        remaining = rng.uniform(0.0, 4e4, n_jobs * 2) * 10.0 ** rng.integers(-3, 3, n_jobs * 2)
        full = rng.uniform(0.0, 600.0, n_jobs) * (rng.random(n_jobs) < 0.9)
        if case % 3 == 0:  # whole steps (every job has more than a step left)
            remaining[run] = full * rng.uniform(1.0, 1e4, n_jobs) + rng.uniform(0.0, 1.0, n_jobs)
        if case % 10 == 9:
            remaining[run[int(rng.integers(n_jobs))]] = np.nan
        floor = np.maximum(full, 1e-12)
        dt_s = float(rng.choice([0.5, 60.0, 300.0, 7.3]))
        work_done, ran = rng.uniform(0, 1e5, n_jobs * 2), rng.uniform(0, 1e5, n_jobs * 2)
        for sure in (False, True):
            expect = [a.copy() for a in (remaining, work_done, ran)]
            whole, bound, left, active = numpy_progress(run, *expect, full, floor, dt_s, sure)
            got = [a.copy() for a in (remaining, work_done, ran)]
            p = Progress(*got)
            p.load(None, run, full, floor)
            io = p.io
            io[0], io[1] = dt_s, float(sure)
            lib.cosim_dc_progress(p.args_address, p.io_address)
            if not all(np.array_equal(x.view(np.uint64), y.view(np.uint64)) for x, y in zip(expect, got)):
                return False
            if (io[2] != 0.0) != whole or (bound is not None and not _same(io[3], bound)):
                return False
            if left is not None and not _same(io[4], left):
                return False
            if active is not None and not np.array_equal(active.view(np.uint64), p.active.view(np.uint64)):
                return False
    return True


def _same(a: float, b: float) -> bool:
    return (a != a and b != b) or np.float64(a).view(np.uint64) == np.float64(b).view(np.uint64)


KERNELS = _load()
