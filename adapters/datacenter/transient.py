"""Transient (revocable) burst capacity for short training jobs, after CloudCoaster.

CloudCoaster (Ogden & Guo, arXiv 1907.02162, 2019) is a hybrid scheduler. It keeps short and
long jobs in separate partitions and grows the short-job partition with cheap transient
(spot-like, revocable) cloud servers when arrivals burst. The authors report that it cuts the
short jobs' mean queueing delay 4.8× against a statically provisioned hybrid scheduler, leaves
long jobs unchanged, and needs a >29.5 % smaller short-partition budget (abstract).

cosim's version is deliberately small:

* A queued job *bursts* when all of these hold:
  - it is *short*: remaining work at full speed ≤ ``short_max_h``, the scheduler's perfect
    estimate;
  - it has waited ``wait_before_s`` in the on-site queue (the on-site pass had its chance
    first);
  - its GPUs fit into ``n_gpus_max`` transient GPUs that are not in use.
  Jobs burst in the on-site queue order, one by one, while they fit.
* A burst job (state ``TRANSIENT``) runs off-site at full speed (no caps, no limit, no DR: it
  is not on this facility's meter), once its instances are up, ``provision_s`` after the
  request. It holds no on-site GPU.
* Revocation: each transient job is revoked at ``revoke_rate_per_h`` per hour (a Poisson
  process, seeded, a stream of its own). A revoked job loses the work it did off-site (no
  checkpoint to durable storage is modelled) and goes back to the on-site queue, where it
  may burst again.
* Reported, not on the facility's ``p_mw``:
  - off-site power: per GPU, the job's uncapped GPU power plus its node's full non-GPU power
    per GPU; idle power while provisioning;
  - billed GPU-hours, from request to finish or revocation;
  - cost at ``price_usd_per_gpu_h``.

Every number is an **assumption** (no default from CloudCoaster): ``provision_s`` 120 s
(instance start), the price, and no revocations by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.adapters.datacenter.states import DONE, QUEUED, TRANSIENT


@dataclass(frozen=True)
class TransientSetup:
    """Attributes:
        n_gpus_max: transient GPUs that may be in use at once (0: off). [-]
        short_max_h: jobs with at most this remaining work may burst. [h]
        wait_before_s: on-site queueing time before a short job bursts. [s]
        provision_s: from the burst to the job's instances running. [s]
        revoke_rate_per_h: revocations per transient job and hour. [1/h]
        price_usd_per_gpu_h: price of a transient GPU-hour. [USD/GPU-h]
    """

    n_gpus_max: int
    short_max_h: float = 1.0
    wait_before_s: float = 300.0
    provision_s: float = 120.0
    revoke_rate_per_h: float = 0.0
    price_usd_per_gpu_h: float = 1.0


class TransientPool:
    """The transient GPUs in use, the jobs on them, and what they cost.

    Args:
        setup: the pool's numbers.
        rng: the revocations' own seeded stream (one uniform per transient job per step).
    """

    def __init__(self, setup: TransientSetup, rng: np.random.Generator):
        self.setup, self.rng = setup, rng
        self.n_gpus_used = 0
        self.placed_s: dict[int, float] = {}  # job -> burst time
        self.work_here_s: dict[int, float] = {}  # job -> work done off-site since the burst
        self.gpu_h = 0.0  # billed transient GPU-hours
        self.n_bursts = 0
        self.n_revoked = 0
        self.burst_jobs: set[int] = set()  # every job that ever ran here

    def reset_counters(self) -> None:
        self.gpu_h, self.n_bursts, self.n_revoked = 0.0, 0, 0

    @property
    def cost_usd(self) -> float:
        return self.gpu_h * self.setup.price_usd_per_gpu_h

    def offload(self, sched, time_s: float) -> list[int]:
        """Move the short jobs that waited long enough, in queue order, onto transient GPUs."""
        s = self.setup
        queued = sched.queue_order()
        if len(queued) == 0 or self.n_gpus_used >= s.n_gpus_max:
            return []
        jobs = sched.jobs
        short = sched.remaining_s[queued] <= s.short_max_h * 3600.0
        waited = time_s - jobs.submit_s[queued] >= s.wait_before_s
        moved = []
        for job in queued[short & waited].tolist():
            need = int(jobs.n_gpus[job])
            if self.n_gpus_used + need > s.n_gpus_max:
                continue
            self.n_gpus_used += need
            sched.start_elsewhere(job, time_s, TRANSIENT)
            self.placed_s[job] = time_s
            self.work_here_s[job] = 0.0
            self.n_bursts += 1
            self.burst_jobs.add(job)
            moved.append(job)
        return moved

    def advance(self, sched, p_run_w: np.ndarray, p_idle_w: float, time_s: float, dt_s: float) -> float:
        """Progress, finish and revoke the transient jobs over a step; their mean off-site power. [W]

        Args:
            sched: the scheduler.
            p_run_w: per job, the power of one of its GPUs running, non-GPU share included. [W]
            p_idle_w: the same for an idle (provisioning) GPU. [W]
            time_s, dt_s: the step. [s]
        """
        jobs = np.array(sorted(self.placed_s), np.int64)
        if len(jobs) == 0:
            return 0.0
        n = sched.jobs.n_gpus[jobs].astype(float)
        ready_s = np.array([self.placed_s[j] for j in jobs.tolist()]) + self.setup.provision_s
        up = np.clip((time_s + dt_s - ready_s) / dt_s, 0.0, 1.0)  # share of the step running
        rem = sched.remaining_s[jobs]
        work = np.minimum(rem, up * dt_s)
        busy = np.where(work > 0, work / dt_s, 0.0)  # share of the step computing
        sched.remaining_s[jobs] = rem - work
        sched.work_done_s[jobs] += work
        for j, w in zip(jobs.tolist(), work.tolist()):
            self.work_here_s[j] += w
        finished = sched.remaining_s[jobs] <= 1e-6
        # billed from the burst: the whole step, or up to the end for a job finishing in it
        since = np.clip(time_s + dt_s - np.array([self.placed_s[j] for j in jobs.tolist()]), 0.0, dt_s)
        end_in_step = (dt_s - up * dt_s) + work  # provisioning part of the step + computing time
        held_s = np.where(finished, np.minimum(since, end_in_step), since)
        self.gpu_h += float(n @ held_s) / 3600.0
        power_w = float(n @ (busy * p_run_w[jobs] + (held_s / dt_s - busy) * p_idle_w))
        ends = time_s + np.where(finished, end_in_step, dt_s)
        sched.release(jobs[finished], DONE, ends[finished])
        revoked = np.zeros(len(jobs), bool)
        if self.setup.revoke_rate_per_h > 0:
            p = -np.expm1(-self.setup.revoke_rate_per_h * held_s / 3600.0)
            revoked = (self.rng.random(len(jobs)) < p) & ~finished
        for job in jobs[revoked].tolist():
            lost = self.work_here_s[job]
            sched.remaining_s[job] += lost
            sched.extra_work_s[job] += lost
            sched.state[job] = QUEUED
            self.n_revoked += 1
        if revoked.any():
            sched.dirty = True
        for job in jobs[finished | revoked].tolist():
            self.n_gpus_used -= int(sched.jobs.n_gpus[job])
            del self.placed_s[job], self.work_here_s[job]
        return power_w
