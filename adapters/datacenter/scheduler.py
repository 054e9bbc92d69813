"""Gang scheduler for training jobs: priority-ordered FIFO with EASY backfill, pausable jobs.

Every job gets all its GPUs at once or none (gang). The queue is ordered by priority class,
then submission time. The first job that does not fit is the *head*: it gets a reservation at
the earliest time enough GPUs free up (the *shadow time*, from the running jobs' expected
ends), and later jobs may start now only if they fit in the free GPUs and either end before
the shadow time or use only GPUs the head will not need (EASY backfill: Lifka, "The ANL/IBM SP
scheduling system", JSSPP 1995; Mu'alem & Feitelson, IEEE TPDS 12(6), 2001). Runtime
estimates are the jobs' true remaining work at their current speed (perfect estimates).

State lives in arrays; ``owner[g]`` is the job holding GPU ``g`` (-1 = free), so a GPU can
never be booked twice.
"""

from __future__ import annotations

import numpy as np

from cosim.adapters.datacenter.training import Jobs

FUTURE, QUEUED, RUNNING, PAUSED, DONE, REJECTED = range(6)
STATE_NAMES = ("future", "queued", "running", "paused", "done", "rejected")


class Scheduler:
    """Places the jobs of one partition of ``n_gpus`` GPUs.

    Args:
        jobs: the job table (sorted by ``submit_s``); its ``work_s`` is copied, not changed.
        n_gpus: GPUs in the partition. [-]
        policy: ``"easy"`` (FIFO + EASY backfill) or ``"fifo"`` (strict order).
        backfill_depth: how many queued jobs behind the head a pass looks at. [-]
    """

    def __init__(self, jobs: Jobs, n_gpus: int, policy: str = "easy", backfill_depth: int = 200):
        if policy not in ("easy", "fifo"):
            raise ValueError(f"policy = {policy!r}: choose 'easy' or 'fifo'")
        self.jobs = jobs
        self.n_gpus = int(n_gpus)
        self.policy = policy
        self.backfill_depth = backfill_depth
        n = len(jobs)
        self.state = np.full(n, FUTURE, np.int8)
        self.remaining_s = np.asarray(jobs.work_s, float).copy()
        self.speed = np.ones(n)  # current speed (cap), for expected end times
        self.first_start_s = np.full(n, np.nan)
        self.end_s = np.full(n, np.nan)
        self.owner = np.full(self.n_gpus, -1, np.int64)
        self.n_free = self.n_gpus
        self.next_arrival = 0
        self.dirty = True  # something changed since the last pass
        # sums over jobs submitted at or after time 0 (not during a warm-up)
        self.wait_sum_s, self.n_started = 0.0, 0
        self.jct_sum_s, self.n_finished = 0.0, 0

    # -- events --------------------------------------------------------------------------
    def admit(self, time_s: float) -> None:
        """Queue every job submitted up to ``time_s``; jobs larger than the partition are rejected."""
        first = self.next_arrival
        last = int(np.searchsorted(self.jobs.submit_s, time_s, side="right"))
        if last > first:
            new = slice(first, last)
            too_big = self.jobs.n_gpus[new] > self.n_gpus
            self.state[new] = np.where(too_big, REJECTED, QUEUED)
            self.next_arrival = last
            self.dirty = True

    def start(self, job: int, time_s: float) -> None:
        """Give ``job`` all its GPUs (the caller checked they are free)."""
        self._start(job, time_s, np.flatnonzero(self.owner < 0))

    def _start(self, job: int, time_s: float, free_gpus: np.ndarray) -> int:
        """:meth:`start` taking the lowest of ``free_gpus`` (the free GPUs, ascending); returns how many."""
        need = int(self.jobs.n_gpus[job])
        free = free_gpus[:need]
        if len(free) < need:
            raise RuntimeError(f"job {job} needs {need} GPUs, {len(free)} free")
        self.owner[free] = job
        self.n_free -= need
        self.state[job] = RUNNING
        if np.isnan(self.first_start_s[job]):
            self.first_start_s[job] = time_s
            if self.jobs.submit_s[job] >= 0:
                self.wait_sum_s += time_s - self.jobs.submit_s[job]
                self.n_started += 1
        return need

    def release(self, jobs: np.ndarray, new_state: int, time_s: float | np.ndarray | None = None) -> None:
        """Free the GPUs of running ``jobs`` and move them to ``new_state`` (done or paused)."""
        if len(jobs) == 0:
            return
        # a per-job lookup, not np.isin(owner, jobs), which sorts every GPU; a free GPU's
        # owner -1 reads the spare last entry, never set
        releasing = np.zeros(len(self.jobs) + 1, bool)
        releasing[jobs] = True
        held = np.flatnonzero(releasing[self.owner])
        self.owner[held] = -1
        self.n_free += len(held)
        self.state[jobs] = new_state
        if new_state == DONE:
            self.end_s[jobs] = time_s
            counted = self.jobs.submit_s[jobs] >= 0
            self.jct_sum_s += float(np.sum((self.end_s[jobs] - self.jobs.submit_s[jobs])[counted]))
            self.n_finished += int(counted.sum())
        self.dirty = True

    def requeue(self, jobs: np.ndarray, extra_work_s: float = 0.0) -> None:
        """Paused ``jobs`` back into the queue, with a restore cost added to their work."""
        if len(jobs):
            self.state[jobs] = QUEUED
            self.remaining_s[jobs] += extra_work_s
            self.dirty = True

    # -- the scheduling pass ---------------------------------------------------------------
    def queue_order(self) -> np.ndarray:
        """Queued jobs by priority class, then submission time, then id."""
        queued = np.flatnonzero(self.state == QUEUED)
        return queued[np.lexsort((queued, self.jobs.submit_s[queued], self.jobs.prio[queued]))]

    def schedule(self, time_s: float) -> list[int]:
        """Start what fits, in order; backfill around the head's reservation. Returns started jobs."""
        if not self.dirty:
            return []
        self.dirty = False
        order = self.queue_order()
        started: list[int] = []
        n_gpus = self.jobs.n_gpus
        free_gpus = None  # listed at the pass's first start (_start_lowest)
        i = 0
        while i < len(order) and n_gpus[order[i]] <= self.n_free:
            free_gpus = self._start_lowest(int(order[i]), time_s, free_gpus)
            started.append(int(order[i]))
            i += 1
        if i >= len(order) or self.policy == "fifo":
            return started
        shadow_s, extra = self._reservation(int(n_gpus[order[i]]), time_s)
        behind = order[i + 1: i + 1 + self.backfill_depth]
        behind = behind[n_gpus[behind] <= self.n_free]  # free GPUs only shrink during the pass
        ends_s = time_s + self.remaining_s[behind] / np.maximum(self.speed[behind], 1e-9)
        for job, need, end_s in zip(behind.tolist(), n_gpus[behind].tolist(), ends_s.tolist()):
            if need > self.n_free:
                continue
            ends_in_time = end_s <= shadow_s
            if ends_in_time or need <= extra:
                free_gpus = self._start_lowest(job, time_s, free_gpus)
                started.append(job)
                if not ends_in_time:
                    extra -= need
            if self.n_free == 0:
                break
        return started

    def _start_lowest(self, job: int, time_s: float, free_gpus: np.ndarray | None) -> np.ndarray:
        """:meth:`start` within a pass: the free GPUs are listed once (on the pass's first
        start), each start takes the lowest of them as ``start`` would, and the rest is
        returned; one scan of every GPU per pass instead of one per started job."""
        if free_gpus is None:
            free_gpus = np.flatnonzero(self.owner < 0)
        return free_gpus[self._start(job, time_s, free_gpus):]

    def _reservation(self, need: int, time_s: float) -> tuple[float, int]:
        """Shadow time for a head needing ``need`` GPUs, and the GPUs spare at that time."""
        running = np.flatnonzero(self.state == RUNNING)
        ends = time_s + self.remaining_s[running] / np.maximum(self.speed[running], 1e-9)
        order = np.argsort(ends, kind="stable")
        freed = self.n_free + np.cumsum(self.jobs.n_gpus[running][order])
        k = int(np.searchsorted(freed, need))
        if k >= len(order):  # cannot happen for jobs that fit the partition; be safe
            return np.inf, 0
        return float(ends[order][k]), int(freed[k] - need)

    # -- views ---------------------------------------------------------------------------------
    def running(self) -> np.ndarray:
        return np.flatnonzero(self.state == RUNNING)

    def count(self, state: int) -> int:
        return int(np.count_nonzero(self.state == state))

    def wait_mean_s(self) -> float:
        """Mean queueing wait of the jobs started so far (submitted at or after 0). [s]"""
        return self.wait_sum_s / self.n_started if self.n_started else 0.0

    def jct_mean_s(self) -> float:
        """Mean completion time, submission to end, of the jobs done so far. [s]"""
        return self.jct_sum_s / self.n_finished if self.n_finished else 0.0
