"""Gang scheduler state for training jobs: GPUs on nodes, job states, and the mechanics of a pass.

Every job gets all its GPUs at once or none (gang). *Which* jobs start and *where* is the
policy's decision (:mod:`.policies`, chosen by ``training.policy``; the default ``easy`` is
priority FIFO with EASY backfill, ``fifo`` the same without backfill). This module holds
what every policy shares: the job states, ``owner[g]`` (the job holding GPU ``g``, -1 =
free, so a GPU can never be booked twice), the nodes the GPUs sit on (:mod:`.nodes`), and
the operations a policy may use: start a job on given GPUs, release, requeue, preempt,
resize (elastic jobs), hold (a DR pause that keeps the job's GPUs booked and idle) and unhold.

Runtime estimates are the jobs' true remaining work at their current speed (perfect
estimates); a policy that wants noisy ones draws its own (``srpt``).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from cosim.adapters.datacenter.nodes import NodePower, NodeSleep, Topology, pod_sizes
from cosim.adapters.datacenter import scheduler_kernel
from cosim.adapters.datacenter.policies import Policy, make_policy
from cosim.adapters.datacenter.scheduler_kernel import EasyPass, StateViews
from cosim.adapters.datacenter.states import (
    DONE,
    FAILED,
    FUTURE,
    PAUSED,
    QUEUED,
    REJECTED,
    RUNNING,
    STATE_NAMES,
    TRANSIENT,
)
from cosim.adapters.datacenter.training import CLASSES, Jobs

__all__ = ["DONE", "FAILED", "FUTURE", "PAUSED", "QUEUED", "REJECTED", "RUNNING", "STATE_NAMES", "Scheduler",
           "TRANSIENT"]

#: Jobs whose pods estimate the target workload of the fragmentation measure (FGD's
#: "typical pods", here a sliding window of the latest arrivals). [-]
MIX_WINDOW_JOBS = 200
LOCALITIES = ("any", "node", "rack")


class Scheduler:
    """Places the jobs of one partition of ``n_gpus`` GPUs.

    Args:
        jobs: the job table (sorted by ``submit_s``); its ``work_s`` is copied, not changed.
        n_gpus: GPUs in the partition. [-]
        policy: a policy name of :mod:`.policies` (``"easy"``, ``"fifo"``, ...) or a policy object.
        policy_params: the named policy's params (validated by it).
        topology: nodes and racks; default 8-GPU nodes, 4 per rack.
        locality: ``any`` (GPUs anywhere), ``node`` (a job that fits a node gets one node,
            larger jobs whole nodes), ``rack`` (as ``node``, and a multi-node job that fits a
            rack stays in one rack).
        sleep: idle-node low-power state, or ``None`` (nodes always awake).
        rng: seeded generator for policies that draw (noisy runtimes); never drawn from here.
        node_power: per-node power numbers for power-aware policies (default: DGX H100, no sleep).
    """

    def __init__(self, jobs: Jobs, n_gpus: int, policy: str | Policy = "easy", *, policy_params: dict | None = None,
                 topology: Topology | None = None, locality: str = "any", sleep: NodeSleep | None = None,
                 rng: np.random.Generator | None = None, node_power: NodePower | None = None):
        if locality not in LOCALITIES:
            raise ValueError(f"locality = {locality!r}: choose one of {', '.join(LOCALITIES)}")
        self.jobs = jobs
        self.n_gpus = int(n_gpus)
        self.topology = topology or Topology(self.n_gpus, 8)
        self.locality, self.sleep = locality, sleep
        self.node_power = node_power or NodePower()
        n = len(jobs)
        self.state = np.full(n, FUTURE, np.int8)
        self.remaining_s = np.asarray(jobs.work_s, float).copy()
        self.speed = np.ones(n)  # current speed (cap), for expected end times
        self.first_start_s = np.full(n, np.nan)
        self.admit_s = np.full(n, np.nan)  # the step at which the job was first seen (submission rounded up)
        self.end_s = np.full(n, np.nan)
        self.n_alloc = np.asarray(jobs.n_gpus, np.int64).copy()  # GPUs held (elastic jobs: may differ)
        self.rate_frac = np.ones(n)  # progress per second relative to the requested GPU count
        self.ready_s = np.full(n, -np.inf)  # no progress before (waking nodes)
        self.extra_work_s = np.zeros(n)  # restore, preemption and rescale costs added to the work
        # work done when a job last restarted from where it stood (a preemption or a resize charges
        # its own cost and keeps the progress): a later failure falls back no further than this
        self.restart_work_s = np.zeros(n)
        self.work_done_s = np.zeros(n)  # work done so far (the cluster adds each step's progress)
        self.held = np.zeros(n, bool)  # paused on its own GPUs (hold): they stay booked, idle
        # counts writes of n_alloc (start; a job moved in): a reader caching sums over
        # n_alloc[running] keys on it, since a resize changes n_alloc but leaves the state as it was
        self.alloc_version = 0
        # finish-time fairness: the running integral of the number of active jobs since time 0,
        # read when each job is admitted and when it ends (O(1) a step, not a pass over all jobs)
        self.active_integral_s = 0.0
        self.c_admit_s = np.full(n, np.nan)
        self.c_end_s = np.full(n, np.nan)
        self.n_active = 0
        self._ended: list[tuple[np.ndarray, np.ndarray]] = []
        self.owner = np.full(self.n_gpus, -1, np.int64)
        self.n_free = self.n_gpus
        self.next_arrival = 0
        self.dirty = True  # something changed since the last pass
        # caches of the free GPUs (ascending) and of the free GPUs per node, kept up to date by
        # start and release instead of scanning every GPU per placement (None: recompute)
        self._free_gpus: np.ndarray | None = None
        self._offered: tuple[np.ndarray, np.ndarray] | None = None  # (lowest_free's last answer, the list it is of)
        self._easy_pass: EasyPass | bool | None = None  # the pass in C (False: not covered; None: not made yet)
        self._state_views: StateViews | bool | None = None  # the views in C (as _easy_pass)
        self._free_node: np.ndarray | None = None
        self._mix: tuple[int, np.ndarray, np.ndarray] | None = None
        # per-state views (running jobs, jobs per state and class, GPUs waiting), recomputed only
        # when the state array's bytes change: most steps change no job's state, and any writer
        # (also one outside this class) is seen, since the key is the array's content
        self._views_key: bytes | None = None
        self._counts_key: bytes | None = None
        self._waiting_key: bytes | None = None
        self._running = np.empty(0, np.int64)
        self._by_class = np.zeros((len(STATE_NAMES), len(CLASSES)), np.int64)
        self._by_state = np.zeros(len(STATE_NAMES), np.int64)
        self._waiting_gpus = 0
        self._lists: tuple[list[int], list[list[int]]] = ([], [])
        # the submission time the wait and completion-time statistics count from: the table's, but a
        # job moved in from another site (.moves) keeps its own (its slot's table entry stays before 0)
        self.stat_submit_s = np.asarray(jobs.submit_s, float).copy()
        # the job's wait was counted at another site (moved in after it had started there)
        self.waited_elsewhere = np.zeros(n, bool)
        # sums over jobs submitted at or after time 0 (not during a warm-up)
        self.wait_sum_s, self.n_started = 0.0, 0
        self.jct_sum_s, self.n_finished = 0.0, 0
        self.policy = policy if isinstance(policy, Policy) else make_policy(policy, policy_params or {}, rng)
        self.policy.bind(self)

    # -- events --------------------------------------------------------------------------
    def admit(self, time_s: float) -> None:
        """Queue every job submitted up to ``time_s``; jobs larger than the partition are rejected."""
        first = self.next_arrival
        submit_s = self.jobs.submit_s
        if first >= len(submit_s) or submit_s[first] > time_s:
            return  # the next job comes later (most steps): the search below would find none
        last = int(np.searchsorted(submit_s, time_s, side="right"))
        if last > first:
            new = slice(first, last)
            too_big = self.jobs.n_gpus[new] > self.n_gpus
            self.state[new] = np.where(too_big, REJECTED, QUEUED)
            self.admit_s[new] = time_s
            self.c_admit_s[new] = self.active_integral_s
            self.n_active += int(np.count_nonzero(~too_big))
            self.next_arrival = last
            self.dirty = True

    def start(self, job: int, time_s: float, gpus: np.ndarray | None = None) -> None:
        """Give ``job`` the GPUs ``gpus`` (default: the first free ones; the caller checked they are free)."""
        if gpus is None:
            need = int(self.jobs.n_gpus[job])
            gpus = self.lowest_free(need)
            if gpus is None:
                raise RuntimeError(f"job {job} needs {need} GPUs, {len(self.free_gpus())} free")
        offered = self._offered
        if offered is not None and gpus is offered[0] and self._free_gpus is offered[1]:
            # the lowest free GPUs as lowest_free() handed them out, from the free list as it still is: free
            # (the list is kept up to date by every write of owner); the list goes on after them
            self._free_gpus = offered[1][len(gpus):]
            self._offered = None
            self.owner[gpus] = job
            if self._free_node is not None:
                self._node_took(gpus)
        else:
            if (self.owner[gpus] >= 0).any():
                raise RuntimeError(f"job {job}: GPUs {gpus[self.owner[gpus] >= 0].tolist()} are held by other jobs")
            self.owner[gpus] = job
            self._took(gpus)
        self.n_free -= len(gpus)
        self.n_alloc[job] = len(gpus)
        self.alloc_version += 1
        self.state[job] = RUNNING
        if self.sleep is not None:
            self.ready_s[job] = self.sleep.wake(self.topology.node_of_gpu[gpus], time_s)
        if math.isnan(self.first_start_s[job]):
            self.first_start_s[job] = time_s
            if self.stat_submit_s[job] >= 0:
                self.wait_sum_s += time_s - self.stat_submit_s[job]
                self.n_started += 1

    def start_elsewhere(self, job: int, time_s: float, state: int) -> None:
        """``job`` leaves the queue to run off the partition (``state``, e.g. transient); no GPU is booked."""
        self.state[job] = state
        if np.isnan(self.first_start_s[job]):
            self.first_start_s[job] = time_s
            if self.stat_submit_s[job] >= 0:
                self.wait_sum_s += time_s - self.stat_submit_s[job]
                self.n_started += 1

    def release(self, jobs: np.ndarray, new_state: int, time_s: float | np.ndarray | None = None) -> None:
        """Free the GPUs of running ``jobs`` and move them to ``new_state`` (done, failed, paused or queued)."""
        if len(jobs) == 0:
            return
        # a per-job lookup, not np.isin(owner, jobs), which sorts every GPU; a free GPU's
        # owner -1 reads the spare last entry, never set
        releasing = np.zeros(len(self.jobs) + 1, bool)
        releasing[jobs] = True
        held = releasing[self.owner].nonzero()[0]
        self.owner[held] = -1
        self.n_free += len(held)
        self._freed(held)
        self.state[jobs] = new_state
        if new_state == DONE:
            self.end_s[jobs] = time_s
            self.n_active -= len(jobs)
            end_s = self.end_s[jobs]  # (a copy: nothing writes it)
            self._ended.append((np.asarray(jobs), end_s))
            submit_s = self.stat_submit_s[jobs]
            counted = submit_s >= 0
            # (np.add.reduce is np.sum's own reduction, called without its Python wrapper)
            self.jct_sum_s += float(np.add.reduce((end_s - submit_s)[counted]))
            self.n_finished += int(np.count_nonzero(counted))
        elif new_state == FAILED:  # out of the system; not a completion (no JCT, no fairness)
            self.end_s[jobs] = time_s
            self.n_active -= len(jobs)
            self._ended.append((np.asarray(jobs), np.asarray(self.end_s[jobs])))  # active up to the end
        self.dirty = True

    def requeue(self, jobs: np.ndarray, extra_work_s: float = 0.0) -> None:
        """Paused ``jobs`` back into the queue, with a restore cost added to their work."""
        if len(jobs):
            self.state[jobs] = QUEUED
            self.remaining_s[jobs] += extra_work_s
            self.extra_work_s[jobs] += extra_work_s
            self.dirty = True

    def preempt(self, jobs: np.ndarray, time_s: float, loss_s: float) -> None:
        """Take running ``jobs`` off their GPUs back into the queue; each redoes ``loss_s`` of work."""
        jobs = np.asarray(jobs, np.int64)
        if len(jobs):
            self.release(jobs, QUEUED, time_s)
            self.remaining_s[jobs] += loss_s
            self.extra_work_s[jobs] += loss_s
            self.restart_work_s[jobs] = self.work_done_s[jobs]

    def hold(self, jobs: np.ndarray) -> None:
        """Pause running ``jobs`` on their GPUs: nothing is freed, so no queued job gets them.

        The GPUs stay booked (``owner``) and idle until :meth:`unhold`.
        """
        jobs = np.asarray(jobs, np.int64)
        if len(jobs):
            self.state[jobs] = PAUSED
            self.held[jobs] = True

    def unhold(self, jobs: np.ndarray, extra_work_s: float = 0.0) -> None:
        """Held ``jobs`` run again on the GPUs they kept, with a restore cost added to their work."""
        jobs = np.asarray(jobs, np.int64)
        if len(jobs):
            self.state[jobs] = RUNNING
            self.held[jobs] = False
            self.remaining_s[jobs] += extra_work_s
            self.extra_work_s[jobs] += extra_work_s
            self.dirty = True

    def place_as_if_free(self, job: int, place) -> np.ndarray | None:
        """``place()`` with running ``job``'s own GPUs counted free (to resize it); nothing changes."""
        own = np.flatnonzero(self.owner == job)
        self.owner[own] = -1
        self.n_free += len(own)
        self._free_gpus = self._free_node = None
        try:
            return place()
        finally:
            self.owner[own] = job
            self.n_free -= len(own)
            self._free_gpus = self._free_node = None

    def resize(self, job: int, gpus: np.ndarray, time_s: float, rate_frac: float, cost_s: float) -> None:
        """Move running ``job`` onto ``gpus`` (its own or free ones) at a new progress rate."""
        self.release(np.array([job]), QUEUED, time_s)
        self.start(job, time_s, gpus)
        self.rate_frac[job] = rate_frac
        self.remaining_s[job] += cost_s
        self.extra_work_s[job] += cost_s
        self.restart_work_s[job] = self.work_done_s[job]

    def account(self, dt_s: float, time_s: float) -> None:
        """Integrate the number of active jobs over the step ``[time_s, time_s + dt_s)`` (finish-time fairness).

        Jobs that ended in the step count for the step, up to their end.
        """
        if not self._ended:  # no job ended in the step (most steps)
            self.active_integral_s += (float(self.n_active) if time_s >= 0 else 0.0) * dt_s
            return
        n_ended = sum(len(jobs) for jobs, _ in self._ended)
        n_step = float(self.n_active + n_ended) if time_s >= 0 else 0.0
        for jobs, end_s in self._ended:
            self.c_end_s[jobs] = self.active_integral_s + n_step * np.clip(end_s - time_s, 0.0, dt_s)
        self._ended.clear()
        self.active_integral_s += n_step * dt_s

    def mean_contention(self, jobs: np.ndarray) -> np.ndarray:
        """Mean number of active jobs over each finished job's life (>= 1). [-]"""
        life_s = self.end_s[jobs] - self.admit_s[jobs]
        return np.maximum((self.c_end_s[jobs] - self.c_admit_s[jobs]) / np.maximum(life_s, 1e-9), 1.0)

    # -- the scheduling pass ---------------------------------------------------------------
    def queue_order(self) -> np.ndarray:
        """Queued jobs by priority class, then submission time, then id."""
        queued = (self.state == QUEUED).nonzero()[0]
        return queued[np.lexsort((queued, self.jobs.submit_s[queued], self.jobs.prio[queued]))]

    def schedule(self, time_s: float) -> list[int]:
        """Run the policy's pass when something changed (or the policy asks). Returns started jobs."""
        if not self.dirty and not self.policy.wants_pass(self, time_s):
            return []
        self.dirty = False
        fast = self._pass_c()
        if fast is not None:
            started = fast.run(self, time_s)
            if started is not None:
                return started
        return self.policy.schedule(self, time_s)

    def _pass_c(self) -> EasyPass | None:
        """The default pass in C (:mod:`.scheduler_kernel`) for this scheduler, or None: not built, switched off,
        or a pass it does not cover (another policy's, node locality, node sleep)."""
        if not scheduler_kernel.C_PASS or scheduler_kernel.LIB is None:
            return None
        kept = self._easy_pass
        if kept is None or (kept and not kept.current(self)):  # (None: not made yet, or dropped by a copy)
            fits = type(self) is Scheduler and EasyPass.fits(self)  # (a subclass's start or release may do more)
            kept = self._easy_pass = EasyPass(scheduler_kernel.LIB, self) if fits else False
        return kept or None

    def reservation(self, need: int, time_s: float) -> tuple[float, int]:
        """Shadow time for a head needing ``need`` GPUs, and the GPUs spare at that time."""
        running = (self.state == RUNNING).nonzero()[0]
        ends = time_s + self.remaining_s[running] / np.maximum(self.speed[running], 1e-9)
        order = np.argsort(ends, kind="stable")
        freed = self.n_free + np.cumsum(self.n_alloc[running][order])
        k = int(np.searchsorted(freed, need))
        if k >= len(order):  # cannot happen for jobs that fit the partition; be safe
            return np.inf, 0
        return float(ends[order][k]), int(freed[k] - need)

    # -- views ---------------------------------------------------------------------------------
    def forget_views(self) -> None:
        """Drop the per-state views: a writer changed ``jobs.prio`` or ``jobs.n_gpus`` (a job moved in),
        which the state array's bytes, the views' key, do not show."""
        self._views_key = self._counts_key = self._waiting_key = None
        self.alloc_version += 1

    def _views(self) -> None:
        """Recompute the running jobs if any job's state changed since they were last made.

        The running jobs, the counts per state and class, and the GPUs waiting each have their own
        key (the state bytes when made): a step that changes states after reading one of them (jobs
        ending in the training step) recounts only those read after the change.
        """
        key = self.state.tobytes()
        if key == self._views_key:
            return
        if self._views_c(key):
            return
        running = (self.state == RUNNING).nonzero()[0]
        running.flags.writeable = False  # shared by every caller until the next change
        self._running = running
        self._views_key = key

    def _counts(self) -> None:
        """Recount the jobs per state and class if any job's state changed since they were last counted."""
        key = self.state.tobytes()
        if key == self._counts_key:
            return
        if self._views_c(key):
            return
        n_classes = len(CLASSES)
        by_class = np.bincount(self.state * n_classes + self.jobs.prio,
                               minlength=len(STATE_NAMES) * n_classes).reshape(len(STATE_NAMES), n_classes)
        rows = by_class.tolist()
        by_state = [sum(row) for row in rows]  # (Python ints: exact, as numpy's int64 sum)
        self._by_class, self._by_state = by_class, np.array(by_state, np.int64)
        self._lists = (by_state, rows)
        self._counts_key = key
        # the GPUs the queued and paused jobs request, from the same state (waiting_gpus): GPUs per state in one
        # pass, summed as float64 (integers far below 2**53: exact) and made an int again
        gpus = np.bincount(self.state, weights=self.jobs.n_gpus, minlength=len(STATE_NAMES))
        self._waiting_gpus, self._waiting_key = int(gpus[QUEUED] + gpus[PAUSED]), key

    def _views_c(self, key: bytes) -> bool:
        """Every per-state view from ``key``'s state in one C pass (:class:`.scheduler_kernel.StateViews`): the running
        jobs, the counts and the waiting GPUs, the same values as the Python forms; False when not built, switched
        off, or a state or class the table does not hold (the Python forms then do what they do: their bincount counts
        a class past the last in the next state's first column, and raises past the table's end)."""
        if not scheduler_kernel.C_PASS or scheduler_kernel.LIB is None:
            return False
        kept = self._state_views
        if kept is None or (kept and not kept.current(self)):  # (None: not made yet, or dropped by a copy)
            kept = self._state_views = (StateViews(scheduler_kernel.LIB, self, len(STATE_NAMES), len(CLASSES))
                                        if StateViews.fits(self) else False)
        made = kept.make() if kept else None
        if made is None:
            return False
        self._running, self._by_class, self._by_state, self._lists, self._waiting_gpus = made
        self._views_key = self._counts_key = self._waiting_key = key
        return True

    def state_key(self) -> bytes:
        """The state array's bytes as of now (the views' key). [-]"""
        self._views()
        return self._views_key

    def running(self) -> np.ndarray:
        """The running jobs, ascending (cached and read-only: do not modify). [job ids]"""
        self._views()
        return self._running

    def count(self, state: int) -> int:
        self._counts()
        return int(self._by_state[state])

    def count_by_class(self) -> np.ndarray:
        """Jobs per state (rows, :data:`STATE_NAMES`) and priority class (columns; cached, do not modify). [-]"""
        self._counts()
        return self._by_class

    def count_by_state(self) -> np.ndarray:
        """Jobs per state of :data:`STATE_NAMES` (cached, do not modify). [-]"""
        self._counts()
        return self._by_state

    def count_lists(self) -> tuple[list[int], list[list[int]]]:
        """:meth:`count_by_state` and :meth:`count_by_class` as Python ints (cached, do not modify). [-]"""
        self._counts()
        return self._lists

    def waiting_gpus(self) -> int:
        """GPUs requested by the queued and paused jobs. [-]"""
        if self.state.tobytes() != self._waiting_key:
            self._counts()  # (made with the counts per state and class, from the same state)
        return self._waiting_gpus

    def free_gpus(self) -> np.ndarray:
        """The free GPUs, ascending (cached; do not modify). [GPU ids]"""
        if self._free_gpus is None:
            free = (self.owner < 0).nonzero()[0]
            free.flags.writeable = False  # (and so each slice lowest_free hands out)
            self._free_gpus = free
        return self._free_gpus

    def lowest_free(self, need: int) -> np.ndarray | None:
        """The ``need`` lowest-numbered free GPUs (a read-only view of the free list), or None when fewer are free.

        Starting a job on exactly this array while the free list is the one it came from skips
        :meth:`start`'s check that the GPUs are free (they are: the list is every free GPU) and its
        comparison with the list's head. [GPU ids]"""
        free = self.free_gpus()
        if len(free) < need:
            return None
        gpus = free[:need]
        self._offered = (gpus, free)
        return gpus

    def free_per_node(self) -> np.ndarray:
        """Free GPUs on each node (cached; do not modify). [-]"""
        if self._free_node is None:
            self._free_node = self.topology.free_per_node(self.owner)
        return self._free_node

    def _took(self, gpus: np.ndarray) -> None:
        """Update the free caches after ``gpus`` were booked.

        A start that takes the lowest free GPUs (first fit under ``any``, the default) keeps
        the rest of the list, so a pass lists the free GPUs once, not once per started job;
        any other start drops the list. The per-node counts are updated, not recounted.
        """
        cached = self._free_gpus
        n = len(gpus)
        if cached is not None and n <= len(cached) and bool((cached[:n] == gpus).all()):  # (np.array_equal)
            self._free_gpus = cached[n:]
        else:
            self._free_gpus = None
        if self._free_node is not None:
            self._node_took(gpus)

    def _node_took(self, gpus: np.ndarray) -> None:
        self._free_node = self._free_node - np.bincount(self.topology.node_of_gpu[gpus], minlength=self.topology.n_nodes)

    def _freed(self, gpus: np.ndarray) -> None:
        """Update the free caches after ``gpus`` were released (the list is rebuilt when next needed)."""
        self._free_gpus = None
        if self._free_node is not None:
            self._free_node = self._free_node + np.bincount(self.topology.node_of_gpu[gpus],
                                                            minlength=self.topology.n_nodes)

    def pod_mix(self) -> tuple[np.ndarray, np.ndarray]:
        """``(pod sizes, probabilities)`` of the latest :data:`MIX_WINDOW_JOBS` arrivals (FGD's target workload)."""
        if self._mix is None or self._mix[0] != self.next_arrival:
            first = max(self.next_arrival - MIX_WINDOW_JOBS, 0)
            gpn = self.topology.gpus_per_node
            counts = Counter(p for n in self.jobs.n_gpus[first:self.next_arrival].tolist() for p in pod_sizes(n, gpn))
            sizes = np.array(sorted(counts), float)
            probs = np.array([counts[s] for s in sorted(counts)], float)
            self._mix = (self.next_arrival, sizes, probs / probs.sum() if len(probs) else probs)
        return self._mix[1], self._mix[2]

    def wait_mean_s(self) -> float:
        """Mean queueing wait of the jobs started so far (submitted at or after 0). [s]"""
        return self.wait_sum_s / self.n_started if self.n_started else 0.0

    def jct_mean_s(self) -> float:
        """Mean completion time, submission to end, of the jobs done so far. [s]"""
        return self.jct_sum_s / self.n_finished if self.n_finished else 0.0
