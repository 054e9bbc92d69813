"""The default scheduling pass and the pause knob in C (``_scheduler.c``, built by ``make build``), when built.

:meth:`.scheduler.Scheduler.schedule` hands a pass to ``cosim_dc_easy_pass`` when the policy's pass is
:class:`.policies.Policy`'s own (``easy``, ``fifo``: priority FIFO, EASY backfill or none, first fit), the
GPUs may go anywhere (locality ``any``), nodes never sleep and the scheduler is :class:`~.scheduler.Scheduler`
itself (:meth:`EasyPass.fits`); else, or without the library, the Python pass runs. The same jobs start on the
same GPUs with the same bookkeeping (``_scheduler.c`` says how), checked against the Python pass in
``tests/adapters/datacenter/test_dc_scheduler_c.py``. :class:`StateViews` makes the scheduler's per-state views
(running jobs, jobs per state and class, waiting GPUs) in one pass. :class:`PauseKnob` does the same for a cluster's
``pause_flexible_frac`` (:meth:`.cluster.GpuCluster._pause_flexible`: which flexible jobs pause or resume, and
what :meth:`~.cluster.GpuCluster._pause` and :meth:`~.cluster.GpuCluster._resume` write). :data:`C_PASS` switches
all three off (to compare).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from cosim.adapters.datacenter.policies import Policy
from cosim.sdk import load_library

__all__ = ["C_PASS", "EasyPass", "LIB", "PauseKnob", "StateViews"]

# the indices of _scheduler.c's argument and io arrays (its enums)
(P_N_JOBS, P_N_GPUS, P_STATE, P_OWNER, P_N_ALLOC, P_JOB_GPUS, P_PRIO, P_SUBMIT, P_STAT_SUBMIT, P_REMAINING, P_SPEED,
 P_FIRST_START, P_ORDER, P_RUN, P_POS, P_TMP, P_ENDS, P_STARTED, P_COUNT) = range(19)
IO_TIME, IO_N_FREE, IO_BACKFILL, IO_N_BEHIND, IO_WAIT_SUM, IO_N_STARTED, IO_N_FIRST, IO_COUNT = range(8)
(K_N_JOBS, K_N_GPUS, K_STATE, K_PAUSED_BY, K_FLEXIBLE, K_PRIO, K_FIRST_START, K_REMAINING, K_EXTRA_WORK, K_CKPT_WORK,
 K_WORK_DONE, K_HELD, K_OWNER, K_RELEASING, K_LIST, K_TMP, K_COUNT) = range(17)
KIO_FRAC, KIO_RESTORE, KIO_LOSS, KIO_HOLD, KIO_BRANCH, KIO_CHANGED, KIO_FREED, KIO_COUNT = range(8)
V_N_JOBS, V_N_STATES, V_N_CLASSES, V_STATE, V_PRIO, V_JOB_GPUS, V_RUN, V_COUNT = range(8)
V_N_RUNNING, V_OK, V_WAITING, V_TABLE = range(4)

#: the policy methods a pass in C stands for: a policy that overrides any of them has its pass in Python
_PASS_METHODS = ("schedule", "queue_order", "try_start", "place", "end_estimate_s", "_backfill")

#: Step the default pass and the pause knob in C when they fit (:meth:`EasyPass.fits`, :meth:`PauseKnob.fits`); False:
#: always Python (set it to compare).
C_PASS = True


def _load(lib_path: Path = Path(__file__).with_name("_scheduler.so")):
    """The library, or None (not built from its source as it is now, or not loadable: :func:`cosim.sdk.load_library`)."""
    lib = load_library(lib_path, keep_gil=True)  # (a short call that never calls into Python)
    if lib is not None:
        for name in ("cosim_dc_easy_pass", "cosim_dc_pause_flexible", "cosim_dc_views"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            getattr(lib, name).restype = None
    return lib


LIB = _load()


class EasyPass:
    """The C function's arguments for one scheduler, packed once: the addresses of its per-job and per-GPU
    arrays and of scratch rows. Dropped on a copy (``copy.deepcopy``, pickle: a gym snapshot), whose arrays
    live elsewhere: the copy packs its own at its next pass."""

    __slots__ = ("args", "args_address", "io", "io_address", "started", "scratch", "arrays", "lib", "policy_type")

    def __init__(self, lib, sched) -> None:
        n = len(sched.state)
        jobs = sched.jobs
        self.lib, self.policy_type = lib, type(sched.policy)
        self.arrays = (sched.state, sched.owner, sched.n_alloc, jobs.n_gpus, jobs.prio, jobs.submit_s,
                       sched.stat_submit_s, sched.remaining_s, sched.speed, sched.first_start_s)
        self.scratch = np.zeros((5, max(n, 1)), np.int64)  # order, run, pos, tmp, started
        ends = np.zeros(max(n, 1))
        self.args = np.zeros(P_COUNT, np.int64)
        self.args[P_N_JOBS], self.args[P_N_GPUS] = n, len(sched.owner)
        for arg, array in zip(range(P_STATE, P_FIRST_START + 1), self.arrays):
            self.args[arg] = array.ctypes.data
        for arg, row in zip((P_ORDER, P_RUN, P_POS, P_TMP, P_STARTED), self.scratch):
            self.args[arg] = row.ctypes.data
        self.args[P_ENDS] = ends.ctypes.data
        self.arrays += (ends,)  # (kept alive with the pack)
        self.started = self.scratch[4]
        self.args_address = self.args.ctypes.data
        self.io = np.zeros(IO_COUNT)
        self.io_address = self.io.ctypes.data

    @staticmethod
    def fits(sched) -> bool:
        """The pass is the default one (the policy's pass methods are :class:`.Policy`'s), placement anywhere,
        no node sleep, and the arrays are what the C function reads (C-contiguous, one value per job or GPU;
        int8 states, int64 GPUs, owners and classes, float64 times). (The scheduler asks only for itself, not for
        a subclass, whose start or release may do more.)"""
        policy = type(sched.policy)
        if sched.locality != "any" or sched.sleep is not None \
                or any(getattr(policy, m) is not getattr(Policy, m) for m in _PASS_METHODS):
            return False
        n, jobs = len(sched.state), sched.jobs
        kinds = ((sched.state, np.int8, n), (sched.owner, np.int64, sched.n_gpus), (sched.n_alloc, np.int64, n),
                 (jobs.n_gpus, np.int64, n), (jobs.prio, np.int64, n), (jobs.submit_s, np.float64, n),
                 (sched.stat_submit_s, np.float64, n), (sched.remaining_s, np.float64, n),
                 (sched.speed, np.float64, n), (sched.first_start_s, np.float64, n))
        return all(isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and len(a) == size
                   and a.flags.c_contiguous and a.flags.writeable for a, dtype, size in kinds)

    def current(self, sched) -> bool:
        """The packed arrays are still the scheduler's (none was replaced since), and its policy of the same class."""
        jobs = sched.jobs
        arrays = self.arrays
        return (type(sched.policy) is self.policy_type and arrays[0] is sched.state and arrays[1] is sched.owner
                and arrays[2] is sched.n_alloc
                and arrays[3] is jobs.n_gpus and arrays[4] is jobs.prio and arrays[5] is jobs.submit_s
                and arrays[6] is sched.stat_submit_s and arrays[7] is sched.remaining_s and arrays[8] is sched.speed
                and arrays[9] is sched.first_start_s)

    def run(self, sched, time_s: float) -> list[int] | None:
        """One pass at ``time_s``: the jobs started, in start order, the scheduler's counts and caches updated as
        :meth:`~.scheduler.Scheduler.start` updates them; None (nothing done: the Python pass runs) for a
        negative ``n_backfill_jobs()``, whose slice Python reads from the end."""
        io, policy = self.io, sched.policy
        backfill = policy.backfill()
        n_behind = policy.n_backfill_jobs() if backfill else 0
        if n_behind < 0:
            return None
        io[IO_TIME], io[IO_N_FREE], io[IO_WAIT_SUM] = time_s, sched.n_free, sched.wait_sum_s
        io[IO_BACKFILL], io[IO_N_BEHIND] = 1.0 if backfill else 0.0, n_behind
        self.lib.cosim_dc_easy_pass(self.args_address, self.io_address)
        n_free, _, _, wait_sum_s, n_started, n_first = io[IO_N_FREE:IO_N_FIRST + 1].tolist()
        if n_free < 0:
            raise RuntimeError(f"the scheduler counts {sched.n_free} free GPUs, fewer are free in its owner table "
                               "(a bug: please report it)")
        n_started = int(n_started)
        if n_started:
            sched.n_free = int(n_free)
            sched.alloc_version += n_started
            sched.wait_sum_s = wait_sum_s
            sched.n_started += int(n_first)
            sched._free_gpus = sched._free_node = sched._offered = None  # (made again from owner when next read)
        return self.started[:n_started].tolist()

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()


class PauseKnob:
    """The C function's arguments for one cluster's pause knob, packed once (its jobs' and GPUs' arrays and scratch);
    dropped on a copy as :class:`EasyPass` is."""

    __slots__ = ("args", "args_address", "io", "io_address", "arrays", "lib")

    def __init__(self, lib, cluster) -> None:
        sched, jobs = cluster.sched, cluster.jobs
        n = len(sched.state)
        self.lib = lib
        self.arrays = (sched.state, cluster.paused_by, jobs.flexible, jobs.prio, sched.first_start_s,
                       sched.remaining_s, sched.extra_work_s, cluster.ckpt_work_s, sched.work_done_s, sched.held,
                       sched.owner)
        releasing, scratch = np.zeros(n + 1, np.uint8), np.zeros((2, max(n, 1)), np.int64)
        self.args = np.zeros(K_COUNT, np.int64)
        self.args[K_N_JOBS], self.args[K_N_GPUS] = n, len(sched.owner)
        for arg, array in zip(range(K_STATE, K_OWNER + 1), self.arrays):
            self.args[arg] = array.ctypes.data
        self.args[K_RELEASING], self.args[K_LIST], self.args[K_TMP] = (releasing.ctypes.data, scratch[0].ctypes.data,
                                                                        scratch[1].ctypes.data)
        self.arrays += (releasing, scratch)  # (kept alive with the pack)
        self.args_address = self.args.ctypes.data
        self.io = np.zeros(KIO_COUNT)
        self.io_address = self.io.ctypes.data

    @staticmethod
    def fits(cluster) -> bool:
        """The arrays are what the C function reads: C-contiguous and writeable, one value per job or GPU; int8
        states and pause reasons, bool flexible and held flags, int64 classes and owners, float64 times."""
        sched, jobs = cluster.sched, cluster.jobs
        n = len(sched.state)
        kinds = ((sched.state, np.int8, n), (cluster.paused_by, np.int8, n), (jobs.flexible, np.bool_, n),
                 (jobs.prio, np.int64, n), (sched.first_start_s, np.float64, n), (sched.remaining_s, np.float64, n),
                 (sched.extra_work_s, np.float64, n), (cluster.ckpt_work_s, np.float64, n),
                 (sched.work_done_s, np.float64, n), (sched.held, np.bool_, n), (sched.owner, np.int64, sched.n_gpus))
        return all(isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and len(a) == size
                   and a.flags.c_contiguous and a.flags.writeable for a, dtype, size in kinds)

    def current(self, cluster) -> bool:
        """The packed arrays are still the cluster's (none was replaced since)."""
        sched, jobs, a = cluster.sched, cluster.jobs, self.arrays
        return (a[0] is sched.state and a[1] is cluster.paused_by and a[2] is jobs.flexible and a[3] is jobs.prio
                and a[4] is sched.first_start_s and a[5] is sched.remaining_s and a[6] is sched.extra_work_s
                and a[7] is cluster.ckpt_work_s and a[8] is sched.work_done_s and a[9] is sched.held
                and a[10] is sched.owner)

    def run(self, cluster, frac: float) -> None:
        """Pause or resume the cluster's flexible jobs toward ``frac`` of them paused by the knob (see ``_scheduler.c``);
        the scheduler's free count, caches and pass flag updated as :meth:`~.scheduler.Scheduler.release`,
        ``hold``, ``unhold`` and ``requeue`` update them."""
        io = self.io
        io[KIO_FRAC], io[KIO_RESTORE], io[KIO_LOSS] = frac, cluster.restore_s, cluster.checkpoint_loss_s
        io[KIO_HOLD] = 1.0 if cluster.hold_paused_gpus else 0.0
        self.lib.cosim_dc_pause_flexible(self.args_address, self.io_address)
        branch, _, freed = io[KIO_BRANCH:KIO_FREED + 1].tolist()
        if branch:  # (a pause marks the pass due even when no job was left to pause, as _pause does)
            sched = cluster.sched
            sched.dirty = True
            if freed:
                sched.n_free += int(freed)
                sched._free_gpus = sched._free_node = sched._offered = None  # (made again from owner when next read)

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()


class StateViews:
    """The C function's arguments for one scheduler's per-state views (``Scheduler._views`` and ``_counts`` in one
    pass over the jobs), packed once; dropped on a copy as :class:`EasyPass` is."""

    __slots__ = ("args", "args_address", "out", "out_address", "run", "arrays", "lib", "n_states", "n_classes")

    def __init__(self, lib, sched, n_states: int, n_classes: int) -> None:
        n = len(sched.state)
        self.lib, self.n_states, self.n_classes = lib, n_states, n_classes
        self.arrays = (sched.state, sched.jobs.prio, sched.jobs.n_gpus)
        self.run = np.zeros(max(n, 1), np.int64)
        self.out = np.zeros(V_TABLE + n_states * n_classes + n_states, np.int64)
        self.args = np.zeros(V_COUNT, np.int64)
        self.args[V_N_JOBS], self.args[V_N_STATES], self.args[V_N_CLASSES] = n, n_states, n_classes
        for arg, array in zip((V_STATE, V_PRIO, V_JOB_GPUS, V_RUN), self.arrays + (self.run,)):
            self.args[arg] = array.ctypes.data
        self.args_address, self.out_address = self.args.ctypes.data, self.out.ctypes.data

    @staticmethod
    def fits(sched) -> bool:
        """int8 states, int64 classes and GPU counts, C-contiguous, one per job."""
        n, jobs = len(sched.state), sched.jobs
        return all(isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and len(a) == n and a.flags.c_contiguous
                   for a, dtype in ((sched.state, np.int8), (jobs.prio, np.int64), (jobs.n_gpus, np.int64)))

    def current(self, sched) -> bool:
        """The packed arrays are still the scheduler's."""
        a = self.arrays
        return a[0] is sched.state and a[1] is sched.jobs.prio and a[2] is sched.jobs.n_gpus

    def make(self) -> tuple | None:
        """``(running jobs, jobs per state and class, per state, their lists (per state, rows), waiting GPUs)`` as the
        Python forms make them (new objects each time: callers keep the last ones), or None for a state or class
        outside the table (left to the Python forms, which give what they give)."""
        self.lib.cosim_dc_views(self.args_address, self.out_address)
        out = self.out
        n_run, ok, waiting = out[:V_TABLE].tolist()
        if not ok:
            return None
        n_table = self.n_states * self.n_classes
        running = self.run[:n_run].copy()
        running.flags.writeable = False
        table = out[V_TABLE:V_TABLE + n_table]
        by_class = table.reshape(self.n_states, self.n_classes).copy()
        flat, by_state = table.tolist(), out[V_TABLE + n_table:].tolist()
        k = self.n_classes
        rows = [flat[i:i + k] for i in range(0, n_table, k)]
        return running, by_class, np.array(by_state, np.int64), (by_state, rows), waiting

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()
