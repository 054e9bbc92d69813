"""``elastic``: ONES-style resizing of elastic jobs, progress from Pollux's goodput curve.

ONES (Bian, Li, Wang, You, "Online Evolutionary Batch Size Orchestration for Scheduling Deep
Learning Workloads in GPU Clusters", arXiv 2108.03645) adapts each job's batch size, and
with it the GPUs it runs on, by an online evolutionary search. Its operators and throughput
model were not available, so cosim uses a greedy stand-in over the same decision (each
elastic job's GPU count, the per-GPU batch kept, so the global batch scales with it) and
Pollux's goodput model for the progress rate (:mod:`..goodput`, parameters *assumed*):

1. the queue in priority-FIFO order: a rigid job starts on its requested GPUs; an elastic
   job on the largest allowed count up to its request that can be placed now;
2. when the head cannot start, running elastic jobs above their minimum shrink (halve),
   the least goodput lost per freed GPU first, until the head fits or none can shrink;
3. EASY backfill behind the head at requested sizes (``backfill``);
4. with nothing waiting, free GPUs go to running elastic jobs (double), the most goodput
   gained per added GPU first.

Every resize costs ``rescale_cost_s`` of work (checkpoint and restart on the new GPUs), and
a job is resized at most once per ``rescale_interval_s``. Which jobs are elastic comes from
the trace's ``elastic`` column or ``training.elastic_frac``.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from cosim.adapters.datacenter.goodput import GoodputModel, allowed_sizes
from cosim.adapters.datacenter.policies._base import Policy, PolicyParams
from cosim.adapters.datacenter.policies._lease import next_lease_s
from cosim.adapters.datacenter.states import QUEUED, RUNNING


class ElasticParams(PolicyParams):
    """Attributes:
        gpus_min_frac: smallest GPU count of an elastic job, as a share of its request. [-]
        gpus_max_ratio: largest GPU count, as a multiple of its request. [-]
        rescale_cost_s: work redone after a resize (checkpoint, restart). [s]
        rescale_interval_s: a job is resized at most once per this time; also the period of
            growth passes. [s]
        backfill: EASY backfill behind the head.
    """

    gpus_min_frac: float = Field(default=0.25, gt=0, le=1)
    gpus_max_ratio: float = Field(default=2.0, ge=1)
    rescale_cost_s: float = Field(default=60.0, ge=0)
    rescale_interval_s: float = Field(default=600.0, gt=0)
    backfill: bool = True


class Elastic(Policy):
    """ONES-style elastic GPU counts (greedy), progress from Pollux's goodput model."""

    PARAMS = ElasticParams
    STRICT_PARAMS = {"backfill": False}
    MODEL = GoodputModel()

    def bind(self, sched) -> None:
        n = len(sched.jobs)
        self.elastic = np.zeros(n, bool) if sched.jobs.elastic is None else np.asarray(sched.jobs.elastic, bool)
        self.last_resize_s = np.full(n, -np.inf)
        self.next_grow_s = -np.inf
        self._sizes: dict[int, list[int]] = {}

    def job_replaced(self, sched, job: int) -> None:
        self.elastic[job] = sched.jobs.elastic is not None and bool(sched.jobs.elastic[job])
        self.last_resize_s[job] = -np.inf

    def backfill(self) -> bool:
        return self.params.backfill

    def sizes(self, sched, job: int) -> list[int]:
        """The GPU counts ``job`` may run on (its request only when rigid). [-]"""
        request = int(sched.jobs.n_gpus[job])
        if not self.elastic[job]:
            return [request]
        if request not in self._sizes:
            self._sizes[request] = allowed_sizes(request, self.params.gpus_min_frac, self.params.gpus_max_ratio,
                                                 sched.n_gpus)
        return self._sizes[request]

    def rate(self, sched, job: int, n_gpus: int) -> float:
        return self.MODEL.speedup(n_gpus, int(sched.jobs.n_gpus[job]), sched.topology.gpus_per_node)

    def wants_pass(self, sched, time_s: float) -> bool:
        return time_s >= self.next_grow_s

    # -- the pass ----------------------------------------------------------------------------------
    def try_start(self, sched, job: int, time_s: float, need: int | None = None) -> bool:
        if need is not None or not self.elastic[job]:
            return super().try_start(sched, job, time_s, need)
        request = int(sched.jobs.n_gpus[job])
        for size in reversed([s for s in self.sizes(sched, job) if s <= request]):
            if super().try_start(sched, job, time_s, size):
                sched.rate_frac[job] = self.rate(sched, job, size)
                return True
        return False

    def schedule(self, sched, time_s: float) -> list[int]:
        self.next_grow_s = next_lease_s(time_s, self.params.rescale_interval_s)  # a fixed grid of passes
        order = self.queue_order(sched, time_s)
        started: list[int] = []
        i = 0
        while i < len(order):
            job = int(order[i])
            if not self.try_start(sched, job, time_s) and not (self._shrink_for(sched, job, time_s)
                                                                and self.try_start(sched, job, time_s)):
                break
            started.append(job)
            i += 1
        if i < len(order) and self.backfill():
            started += self._backfill(sched, order, i, time_s)
        if not (sched.state == QUEUED).any():
            self._grow(sched, time_s)
        return started

    # -- resizing ----------------------------------------------------------------------------------
    def _resizable(self, sched, time_s: float) -> np.ndarray:
        run = sched.running()
        return run[self.elastic[run] & (time_s - self.last_resize_s[run] >= self.params.rescale_interval_s)]

    def _resize(self, sched, job: int, size: int, time_s: float) -> bool:
        """Move ``job`` onto ``size`` GPUs (placed anew, its own GPUs counted free); False if they cannot be placed."""
        gpus = sched.place_as_if_free(job, lambda: self.place(sched, job, size, time_s)
                                      if size <= sched.n_free + sched.n_alloc[job] else None)
        if gpus is None:
            return False
        sched.resize(job, gpus, time_s, self.rate(sched, job, size), self.params.rescale_cost_s)
        self.last_resize_s[job] = time_s
        return True

    def _shrink_for(self, sched, head: int, time_s: float) -> bool:
        """Halve running elastic jobs, cheapest goodput loss per freed GPU first, until ``head`` fits."""
        need = min(self.sizes(sched, head))
        movable = self._resizable(sched, time_s)
        spare = sum(int(sched.n_alloc[j]) - min(self.sizes(sched, j)) for j in movable.tolist())
        if sched.n_free + spare < need:  # shrinking everything would not make room: leave them
            return False
        shrunk = False
        while sched.n_free < need:
            best, best_loss, best_size = None, np.inf, 0
            for job in self._resizable(sched, time_s).tolist():
                now = int(sched.n_alloc[job])
                smaller = [s for s in self.sizes(sched, job) if s < now]
                if not smaller:
                    continue
                size = smaller[-1]
                loss = (sched.rate_frac[job] - self.rate(sched, job, size)) * sched.jobs.n_gpus[job] / (now - size)
                if loss < best_loss:
                    best, best_loss, best_size = job, loss, size
            if best is None or not self._resize(sched, best, best_size, time_s):
                break
            shrunk = True
        return shrunk

    def _grow(self, sched, time_s: float) -> None:
        """Double running elastic jobs into free GPUs, most goodput gained per added GPU first."""
        while sched.n_free > 0:
            best, best_gain, best_size = None, 0.0, 0
            for job in self._resizable(sched, time_s).tolist():
                now = int(sched.n_alloc[job])
                larger = [s for s in self.sizes(sched, job) if now < s <= now + sched.n_free]
                if not larger:
                    continue
                size = larger[0]
                gain = (self.rate(sched, job, size) - sched.rate_frac[job]) * sched.jobs.n_gpus[job] / (size - now)
                if gain > best_gain:
                    best, best_gain, best_size = job, gain, size
            if best is None or not self._resize(sched, best, best_size, time_s):
                return
