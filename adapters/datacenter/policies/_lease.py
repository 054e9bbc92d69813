"""Lease rounds shared by preemptive policies (``themis``, ``srpt`` with ``lease_s > 0``).

At the end of each lease (every ``lease_s``) the policy ranks the active jobs (queued and
running, not paused) best first; the ranking's prefix that fits the partition's GPU count is
the *desired* set. Running jobs outside it are preempted, worst first, only as far as the
desired jobs that wait need their GPUs (each redoes ``preempt_loss_s`` of work: its restore
from a checkpoint); then the desired jobs start in rank order where they can be placed, and
what is left is filled work-conservingly in rank order. Between leases a pass only fills
free GPUs (no preemption).
"""

from __future__ import annotations

import math

import numpy as np

from cosim.adapters.datacenter.states import QUEUED, RUNNING


def lease_due(next_lease_s: float, time_s: float) -> bool:
    return time_s >= next_lease_s


def next_lease_s(time_s: float, lease_s: float) -> float:
    """The first lease end after ``time_s``. [s]"""
    return (math.floor(time_s / lease_s) + 1) * lease_s


def desired(sched, ranked: np.ndarray) -> np.ndarray:
    """The prefix-greedy set of ``ranked`` jobs whose requested GPUs fit the partition, less the GPUs
    paused jobs hold (``hold_paused_gpus``: booked, so no ranked job can have them while the hold lasts)."""
    need = sched.jobs.n_gpus[ranked]
    capacity = sched.n_gpus - int(sched.n_alloc[sched.held].sum())
    keep, used = [], 0
    for job, n in zip(ranked.tolist(), need.tolist()):
        if used + n <= capacity:
            keep.append(job)
            used += n
    return np.array(keep, np.int64)


def preempt_for(sched, ranked: np.ndarray, want: np.ndarray, time_s: float, loss_s: float) -> None:
    """Preempt running jobs outside ``want``, lowest-ranked first, until the waiting wanted jobs' GPUs are free."""
    waiting = want[sched.state[want] == QUEUED]
    short = int(sched.jobs.n_gpus[waiting].sum()) - sched.n_free
    if short <= 0:
        return
    running = ranked[(sched.state[ranked] == RUNNING) & ~np.isin(ranked, want)][::-1]
    freed = np.cumsum(sched.n_alloc[running])
    n = min(int(np.searchsorted(freed, short)) + 1, len(running))
    sched.preempt(running[:n], time_s, loss_s)


def fill(policy, sched, ranked: np.ndarray, time_s: float) -> list[int]:
    """Start the queued jobs of ``ranked`` in order wherever they can be placed (work-conserving)."""
    started = []
    for job in ranked[sched.state[ranked] == QUEUED].tolist():
        if sched.n_free == 0:
            break
        if policy.try_start(sched, job, time_s):
            started.append(job)
    return started


def lease_round(policy, sched, ranked: np.ndarray, time_s: float, loss_s: float) -> list[int]:
    """One lease end: preempt for the desired set, start it, fill the rest (module docstring)."""
    want = desired(sched, ranked)
    preempt_for(sched, ranked, want, time_s, loss_s)
    started = fill(policy, sched, want, time_s)
    return started + fill(policy, sched, ranked, time_s)
