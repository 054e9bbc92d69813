"""``themis``: finish-time-fair leases, simplified (after Mahajan et al., "Themis", NSDI 2020).

Themis's metric is finish-time fairness ``rho = T_sh / T_id``: a job's completion time in the
shared cluster over its time alone on a ``1/N`` share (``N`` the contention). Its mechanism
is an auction every lease: the ``1 - f`` fraction of apps with the worst ``rho`` bid for the
free GPUs, a Partial-Allocation auction maximises Nash social welfare ``prod 1/rho``, and
leftovers go to the rest. cosim's simplification (not the paper's mechanism; the values of
``f`` and the lease length are the notes' recollection of the paper, not checked):

1. every ``lease_s`` estimate each active job's ``rho`` if it runs from now on:
   ``T_sh = (now - submit) + remaining / speed`` and ``T_id = work x d / min(C / N, d)``
   (``d`` its GPUs, ``C`` the partition, ``N`` the active jobs now);
2. the auction: the ``ceil((1 - f) x jobs)`` worst ``rho`` take part; the Nash-welfare gain of
   running a job this lease, ``log((T_sh + lease) / T_sh)`` (its ``rho`` if it waits over if
   it runs), per GPU ranks them, a greedy stand-in for the Partial-Allocation auction (no
   hidden payments, no bids on placements);
3. the other jobs follow by worst ``rho``; lease rounds (:mod:`._lease`) preempt and start.

Priority classes are ignored (fairness replaces them), so ``PRIORITY_ORDER`` is off.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from cosim.adapters.datacenter.policies._base import Policy, PolicyParams
from cosim.adapters.datacenter.policies._lease import fill, lease_due, lease_round, next_lease_s
from cosim.adapters.datacenter.states import QUEUED, RUNNING


class ThemisParams(PolicyParams):
    """Attributes:
        lease_s: lease length; preemption only at lease ends (the notes recall ~10 minutes). [s]
        fairness_frac: Themis's ``f``: the share of jobs *left out* of each auction (the notes
            recall 0.8). [-]
        preempt_loss_s: work a preempted job redoes (restore from its checkpoint). [s]
    """

    lease_s: float = Field(default=600.0, gt=0)
    fairness_frac: float = Field(default=0.8, ge=0, lt=1)
    preempt_loss_s: float = Field(default=300.0, ge=0)


class Themis(Policy):
    """Finish-time-fair leases: the worst-off jobs bid, greedy Nash welfare (simplified Themis, NSDI '20)."""

    PARAMS = ThemisParams
    PRIORITY_ORDER = False
    STRICT_PARAMS = None

    def bind(self, sched) -> None:
        self.next_lease_s = -math.inf

    def wants_pass(self, sched, time_s: float) -> bool:
        return lease_due(self.next_lease_s, time_s)

    def rho(self, sched, jobs: np.ndarray, time_s: float) -> tuple[np.ndarray, np.ndarray]:
        """``(rho, T_sh)`` of ``jobs`` if they run from now on (module docstring). [-, s]"""
        n_active = max(int(np.count_nonzero((sched.state == QUEUED) | (sched.state == RUNNING))), 1)
        d = sched.jobs.n_gpus[jobs].astype(float)
        t_sh = (time_s - sched.jobs.submit_s[jobs]) + sched.remaining_s[jobs] / np.maximum(sched.speed[jobs], 1e-9)
        t_id = sched.jobs.work_s[jobs] * d / np.maximum(np.minimum(sched.n_gpus / n_active, d), 1e-9)
        return t_sh / np.maximum(t_id, 1e-9), np.maximum(t_sh, 1e-9)

    def ranked(self, sched, time_s: float) -> np.ndarray:
        """Active jobs, best first: the auction's winners by welfare gain per GPU, then the rest by worst rho."""
        jobs = np.flatnonzero((sched.state == QUEUED) | (sched.state == RUNNING))
        if len(jobs) == 0:
            return jobs
        rho, t_sh = self.rho(sched, jobs, time_s)
        by_rho = jobs[np.lexsort((jobs, -rho))]
        n_bid = math.ceil((1.0 - self.params.fairness_frac) * len(jobs))
        bidders = by_rho[:n_bid]
        pos = np.searchsorted(jobs, bidders)
        gain = np.log((t_sh[pos] + self.params.lease_s) / t_sh[pos]) / sched.jobs.n_gpus[bidders]
        return np.concatenate([bidders[np.lexsort((bidders, -gain))], by_rho[n_bid:]])

    def schedule(self, sched, time_s: float) -> list[int]:
        ranked = self.ranked(sched, time_s)
        if lease_due(self.next_lease_s, time_s):
            self.next_lease_s = next_lease_s(time_s, self.params.lease_s)
            return lease_round(self, sched, ranked, time_s, self.params.preempt_loss_s)
        return fill(self, sched, ranked, time_s)
