"""A training step's per-job arithmetic in C (``_kernels.c``, built by ``make build``), when built.

:meth:`.cluster.GpuCluster._advance_steady` hands a step's per-job work to two C functions when the
library is built, up to date with its source and agrees with numpy on this machine (:func:`_agrees_with_numpy`,
at import); else numpy does it. ``cosim_dc_configure`` gathers what only changes with the running jobs,
their caps, ``n_alloc`` or the step length (speed and per-GPU power of uncapped jobs, GPU counts, classes,
stall shares, a whole step's work); ``cosim_dc_step`` takes each step's progress (remaining work, work
done, running time, and the minima it tests) and the step's sums over the running jobs. Same numbers
either way, to the bit: every value is one IEEE operation on the same operands (``_kernels.c``), and the
dot products are numpy's own BLAS ``ddot`` (:func:`_numpy_ddot`), called with the same arguments; checked
here and in ``tests/adapters/datacenter/test_dc_kernels.py``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from cosim.sdk import library_agrees, load_library

__all__ = ["KERNELS", "TrainStep", "numpy_progress", "numpy_sums"]

# the indices of _kernels.c's argument and io arrays (its enums)
(A_N, A_RUN, A_REMAINING, A_WORK_DONE, A_RAN, A_FULL, A_FLOOR, A_ACTIVE, A_SPEED, A_P_GPU, A_G, A_PRIO, A_STALL,
 A_CKPT, A_TMP, A_ONES, A_CAPS, A_DDOT, A_SPEED_UNC, A_POWER_UNC, A_P_UNC, A_RATE, A_N_ALLOC, A_JOB_PRIO,
 A_STALL_MEAN, A_CKPT_MEAN, A_SCHED_SPEED, A_COUNT) = range(28)
(IO_DT, IO_SURE, IO_WHOLE, IO_BOUND, IO_LEFT, IO_SUMS, IO_MADE, IO_BUSY, IO_GPU_DOT, IO_SLOW, IO_WORK) = range(11)
IO_WORK_CLASS, IO_CLASS_W = 11, 14
IO_STALL, IO_CKPT, IO_TDP, IO_IDLE, IO_GIVEN, IO_CAPPED, IO_NAN_STALL, IO_COUNT = range(17, 25)
#: Scratch rows (by position in the running jobs), in the order of their A_* entries.
ROWS = ("run", "full", "floor", "active", "speed", "p_gpu", "g", "prio", "stall", "ckpt", "tmp", "ones", "caps")
_ROW_ARGS = (A_RUN, A_FULL, A_FLOOR, A_ACTIVE, A_SPEED, A_P_GPU, A_G, A_PRIO, A_STALL, A_CKPT, A_TMP, A_ONES, A_CAPS)
N_CLASSES = 3  # (training.CLASSES; _kernels.c's N_CLASSES)


def _numpy_ddot() -> int | None:
    """The address of the BLAS ``ddot`` numpy's ``@`` of two float64 vectors calls (its wheel's OpenBLAS,
    64-bit integers), or None when not found (another numpy build: numpy does the sums)."""
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(libs.glob("libscipy_openblas64*.so*")):
        try:
            lib = ctypes.CDLL(str(path))
            return ctypes.cast(lib.scipy_cblas_ddot64_, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
    return None


def _load(lib_path: Path = Path(__file__).with_name("_kernels.so")):
    """The library, or None: not built from its source as it is now, not loadable (:func:`cosim.sdk.load_library`),
    numpy's ``ddot`` not found, or not numpy's numbers."""
    lib = load_library(lib_path, keep_gil=True)  # (short calls that never call into Python)
    ddot = _numpy_ddot()
    if lib is None or ddot is None:  # (another numpy build: no OpenBLAS of its wheel to call)
        return library_agrees(lib, False, "no numpy ddot")
    for name in ("cosim_dc_configure", "cosim_dc_step"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        getattr(lib, name).restype = None
    lib.ddot = ddot
    return library_agrees(lib, _agrees_with_numpy(lib))


def numpy_progress(run, remaining, work_done, ran, full, floor, dt_s: float, sure: bool, between=None):
    """One step's progress of running jobs ``run`` (a whole step's work ``full``, ``floor = max(full, 1e-12)``),
    in numpy: what ``cosim_dc_step`` does first. Writes ``remaining``, ``work_done`` and ``ran`` (by job);
    ``between(ran_s, work_s)`` is called before ``ran`` is written (failures' checkpoints read it). Returns
    ``(whole, least sure-steps bound or None, least work left or None, active or None)``."""
    rem = remaining[run]
    bound = None
    if sure:
        whole = True
    else:
        ratio = rem / floor
        whole = bool(ratio.min() >= 1.0)  # every job runs the whole step: active is 1 for all
        if whole:
            bound = float((np.floor((rem - floor - 1e-6) / (full + rem * 2.0 ** -52)) - 2.0).min())
    if whole:  # (x * 1.0 is x exactly: the work is the whole step's, the time dt_s)
        work_s, ran_s, active = full, np.full(len(run), dt_s * 1.0), None
    else:
        active = np.minimum(1.0, ratio)
        work_s, ran_s = full * active, dt_s * active
    left_s = rem - work_s
    remaining[run] = left_s
    work_done[run] += work_s
    if between is not None:
        between(ran_s, work_s)
    ran[run] += ran_s
    return whole, bound, None if sure else float(left_s.min()), active


def numpy_sums(g, p_gpu, speed, prio, stall, active) -> tuple:
    """A step's sums over the running jobs with shares ``active`` of the step (``None``: all 1, the sums
    without the products with it), in numpy: what ``cosim_dc_step`` does second. ``(busy GPUs, GPU power
    dot, slowdown GPUs, working GPUs, working GPUs per class, GPU power per class, (straggler stall,
    checkpoint) GPUs)``. [-, W, -, -, -, W, -]"""
    if active is None:
        busy_gpus, gpu_dot = float(g @ np.ones(len(g))), float(g @ p_gpu)
        slow_dot, work_dot = float(g @ (1.0 - speed)), float(g @ speed)
        work_by_class = np.bincount(prio, weights=g * speed, minlength=N_CLASSES)
        by_class_w = np.bincount(prio, weights=g * p_gpu, minlength=N_CLASSES)
        stall_gpus = tuple(float(g @ s) for s in stall)
    else:
        busy_gpus, gpu_dot = float(g @ active), float(g @ (p_gpu * active))
        slow_dot, work_dot = float(g @ ((1.0 - speed) * active)), float(g @ (speed * active))
        work_by_class = np.bincount(prio, weights=g * speed * active, minlength=N_CLASSES)
        by_class_w = np.bincount(prio, weights=g * p_gpu * active, minlength=N_CLASSES)
        stall_gpus = tuple(float(g @ (active * s)) for s in stall)
    return busy_gpus, gpu_dot, slow_dot, work_dot, work_by_class, by_class_w, stall_gpus


class TrainStep:
    """The C functions' arguments for one cluster's jobs, packed once: the addresses of the per-job arrays
    (:data:`JOB_ARRAYS` of the cluster), numpy's ``ddot``, and a scratch buffer of :data:`ROWS` the
    running jobs of a configuration are gathered into (read-only outside).

    Dropped on a copy (``copy.deepcopy``, pickle: a gym snapshot): the addresses are the original's,
    so the copy packs its own when it next steps.
    """

    __slots__ = ("arrays", "scratch", "rows", "args", "args_address", "io", "io_address", "active", "lib")

    def __init__(self, lib, arrays: tuple, tdp_w: float, idle_w: float):
        n = len(arrays[0])
        self.lib, self.arrays = lib, arrays
        self.scratch = np.zeros((len(ROWS), n))
        self.rows = dict(zip(ROWS, self.scratch))
        self.args = np.zeros(A_COUNT, np.int64)
        for arg, row in zip(_ROW_ARGS, self.scratch):
            self.args[arg] = row.ctypes.data
        for arg, array in zip(range(A_REMAINING, A_RAN + 1), arrays[:3]):
            self.args[arg] = array.ctypes.data
        for arg, array in zip(range(A_SPEED_UNC, A_COUNT), arrays[3:]):
            self.args[arg] = array.ctypes.data
        self.args[A_DDOT] = lib.ddot
        self.args_address = self.args.ctypes.data
        self.io = np.zeros(IO_COUNT)
        self.io[IO_TDP], self.io[IO_IDLE] = tdp_w, idle_w
        self.io_address = self.io.ctypes.data
        self.active = self.scratch[3, :0]

    @staticmethod
    def fits(arrays: tuple) -> bool:
        """The arrays are what the C functions read: C-contiguous, one value per job, float64 but for
        ``n_alloc`` and the classes (int64); (remaining, work done, running time, uncapped speed and power
        ratios, uncapped power, rate, n_alloc, classes, stall and checkpoint shares, speed)."""
        n = len(arrays[0])
        return all(a.flags.c_contiguous and a.ndim == 1 and len(a) == n
                   and a.dtype == (np.int64 if k in (7, 8) else np.float64) for k, a in enumerate(arrays))

    def configure(self, run: np.ndarray, caps: np.ndarray, dt_s: float, gpu_power, mean_stall) -> None:
        """Gather running jobs ``run`` under ``caps`` for steps of ``dt_s``; ``gpu_power(run, caps)`` gives
        the speed and power of capped jobs, ``mean_stall(run)`` fills the stall shares of jobs never run."""
        n = len(run)
        rows, io = self.rows, self.io
        rows["run"][:n].view(np.int64)[:] = run
        rows["caps"][:n] = caps
        self.args[A_N] = n
        io[IO_DT], io[IO_GIVEN] = dt_s, 0.0
        self.lib.cosim_dc_configure(self.args_address, self.io_address)
        if io[IO_CAPPED] != 0.0:  # numpy interpolates the cap curves
            rows["speed"][:n], rows["p_gpu"][:n] = gpu_power(run, caps)
            io[IO_GIVEN] = 1.0
            self.lib.cosim_dc_configure(self.args_address, self.io_address)
        if io[IO_NAN_STALL] != 0.0:  # a job's first run: its shares are filled, then gathered
            mean_stall(run)
            io[IO_GIVEN] = 1.0
            self.lib.cosim_dc_configure(self.args_address, self.io_address)
        self.active = rows["active"][:n]

    def step(self, dt_s: float, sure: bool, sums: int) -> tuple[bool, float, float, bool]:
        """One step of the configured jobs: ``(whole, least sure-steps bound, least work left, sums made)``
        (see ``_kernels.c``; ``sums``: 0 none, 1 unless whole, 2 always); their active shares are in
        :attr:`active` when not whole, the sums in :meth:`sums`."""
        io = self.io
        io[IO_DT], io[IO_SURE], io[IO_SUMS] = dt_s, 1.0 if sure else 0.0, sums
        self.lib.cosim_dc_step(self.args_address, self.io_address)
        whole, bound, left, _, made = io[IO_WHOLE:IO_MADE + 1].tolist()
        return whole != 0.0, bound, left, made != 0.0

    def sums(self) -> tuple:
        """The last step's sums, as :func:`numpy_sums` gives them."""
        v = self.io[IO_BUSY:IO_CKPT + 1].tolist()
        return (v[0], v[1], v[2], v[3], np.array(v[4:7]), np.array(v[7:10]), (v[10], v[11]))

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()


def _bits_equal(x, y) -> bool:
    x, y = np.asarray(x, float), np.asarray(y, float)
    return x.shape == y.shape and np.array_equal(x.view(np.uint64), y.view(np.uint64))


def _agrees_with_numpy(lib) -> bool:
    """Both functions against numpy (:func:`numpy_progress`, :func:`numpy_sums` and the gathers of
    ``GpuCluster``) on random jobs, whole and partial steps, capped and not, with zeros, tiny and huge
    values and NaN among them, bit for bit; False (numpy does the work) when one does not agree. Run once
    per process, at import."""
    rng = np.random.default_rng(4321)
    for case in range(60):
        n_jobs = int(rng.integers(1, 40)) if case % 6 else int(rng.integers(40, 400))
        n = n_jobs * 2
        run = np.sort(rng.choice(n, n_jobs, replace=False)).astype(np.int64)
        remaining = rng.uniform(0.0, 4e4, n) * 10.0 ** rng.integers(-3, 3, n)
        tdp, idle = 700.0, 70.0
        arrays = (remaining, rng.uniform(0, 1e5, n), rng.uniform(0, 1e5, n),
                  rng.uniform(0.5, 1.0, n) * (rng.random(n) < 0.95), rng.uniform(0.0, 1.0, n),
                  rng.uniform(60.0, 800.0, n), rng.uniform(0.2, 1.0, n), rng.integers(1, 64, n),
                  rng.integers(0, N_CLASSES, n), rng.uniform(0.0, 0.3, n), rng.uniform(0.0, 0.1, n), np.ones(n))
        if case % 3 == 0:  # whole steps (every job has more than a step left)
            remaining[run] = 600.0 * rng.uniform(1.0, 1e4, n_jobs) + rng.uniform(0.0, 1.0, n_jobs)
        if case % 10 == 9:
            remaining[run[int(rng.integers(n_jobs))]] = np.nan
        capped = case % 4 == 1
        caps = np.full(n_jobs, tdp)
        if capped:  # (one cap below TDP at least)
            caps[rng.random(n_jobs) < 0.5] = caps[0] = 400.0
        dt_s = float(rng.choice([0.5, 60.0, 300.0, 7.3]))
        # numpy: GpuCluster._gpu_w's uncapped power (capped: rows given), the gathers, progress and sums
        speed_unc, power_unc, p_unc, rate, n_alloc, prio, stall_mean, ckpt_mean = arrays[3:11]
        if capped:
            speed, p_gpu = rng.uniform(0.3, 1.0, n_jobs), rng.uniform(idle, tdp, n_jobs)
        else:
            speed, p_gpu = speed_unc[run], np.maximum(np.minimum(p_unc[run] * power_unc[run], caps), idle)
        full = speed * rate[run] * dt_s
        floor = np.maximum(full, 1e-12)
        g, stall = n_alloc[run].astype(float), (stall_mean[run], ckpt_mean[run])
        for sure in (False, True):
            expect = [a.copy() for a in arrays[:3]]
            whole, bound, left, active = numpy_progress(run, *expect, full, floor, dt_s, sure)
            sums = numpy_sums(g, p_gpu, speed, prio[run], stall, active)
            got = [a.copy() for a in arrays]
            k = TrainStep(lib, tuple(got), tdp, idle)
            k.configure(run, caps, dt_s, lambda r, c: (speed, p_gpu), lambda r: None)
            c_whole, c_bound, c_left, made = k.step(dt_s, sure, 2)
            rows = k.rows
            if not (made and _bits_equal(got[-1][run], speed) and _bits_equal(rows["p_gpu"][:n_jobs], p_gpu)
                    and _bits_equal(rows["full"][:n_jobs], full) and _bits_equal(rows["floor"][:n_jobs], floor)):
                return False
            if not all(_bits_equal(x, y) for x, y in zip(expect, got[:3])):
                return False
            if c_whole != whole or (bound is not None and not _bits_equal(c_bound, bound)):
                return False
            if (left is not None and not _bits_equal(c_left, left)) or (
                    active is not None and not _bits_equal(active, k.active)):
                return False
            if not all(_bits_equal(x, y) for x, y in zip(sums[:6], k.sums()[:6])) or \
                    not _bits_equal(sums[6], k.sums()[6]):
                return False
    return True


KERNELS = _load()
