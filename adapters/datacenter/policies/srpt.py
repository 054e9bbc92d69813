"""``srpt``: shortest predicted remaining time first, with noisy runtime predictions (seeded).

Prediction-assisted SRPT in the spirit of A-SRPT (Luo et al., "Prediction-Assisted Online
Distributed Deep Learning Workload Scheduling in GPU Clusters", arXiv 2501.05563, 2025:
predicted iteration counts from a random forest, preemptive SRPT on a single-machine
relaxation guiding the cluster schedule). Here the predictor is noise around the truth:
each job's runtime estimate is ``work x exp(sigma Z)``, ``Z`` standard normal from the
policy's seeded stream (``runtime_noise_sigma_frac = 0`` is a perfect predictor). A job whose
estimate is used up before it ends is re-estimated at twice the work it has done (so an
under-estimated long job does not keep top priority for ever; naive SRPT on estimates can
be arbitrarily bad, Scully, Grosof & Mitzenmacher, ITCS 2022).

The queue is ordered by priority class, then predicted remaining time; EASY backfill uses
the predictions for the backfilled jobs' ends. With ``lease_s > 0`` it is preemptive at
lease ends (:mod:`._lease`): running jobs with longer predicted remaining times make room
for shorter waiting ones of the same or a higher class.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from cosim.adapters.datacenter.policies._base import Policy, PolicyParams
from cosim.adapters.datacenter.policies._lease import lease_due, lease_round, next_lease_s
from cosim.adapters.datacenter.states import QUEUED, RUNNING


class SrptParams(PolicyParams):
    """Attributes:
        runtime_noise_sigma_frac: sigma of ln(estimate / true runtime), about the relative error when small (0 = exact). [-]
        backfill: EASY backfill behind the head.
        lease_s: preempt at lease ends of this length; 0 = never preempt. [s]
        preempt_loss_s: work a preempted job redoes (restore from its checkpoint). [s]
    """

    runtime_noise_sigma_frac: float = Field(default=0.5, ge=0)
    backfill: bool = True
    lease_s: float = Field(default=0.0, ge=0)
    preempt_loss_s: float = Field(default=300.0, ge=0)


class Srpt(Policy):
    """Shortest predicted remaining time first, noisy seeded predictions (A-SRPT-style)."""

    PARAMS = SrptParams
    STRICT_PARAMS = {"backfill": False}

    def bind(self, sched) -> None:
        rng = self.rng if self.rng is not None else np.random.default_rng(0)
        self._noise = rng.standard_normal(len(sched.jobs))
        self.estimate_s = np.asarray(sched.jobs.work_s, float) * np.exp(self.params.runtime_noise_sigma_frac * self._noise)
        self.next_lease_s = -math.inf

    def job_replaced(self, sched, job: int) -> None:
        """A job moved into ``job``'s row: its estimate from its work (the row's draw), not the placeholder's 0."""
        self.estimate_s[job] = float(sched.jobs.work_s[job]) * math.exp(self.params.runtime_noise_sigma_frac
                                                                        * self._noise[job])

    def predicted_remaining_s(self, sched, jobs: np.ndarray) -> np.ndarray:
        """Predicted work left (re-estimated at twice the work done once the estimate is used up). [s]"""
        done = sched.work_done_s[jobs]
        used_up = done >= self.estimate_s[jobs]
        self.estimate_s[jobs[used_up]] = 2.0 * np.maximum(done[used_up], 1.0)
        return self.estimate_s[jobs] - done

    def backfill(self) -> bool:
        return self.params.backfill

    def wants_pass(self, sched, time_s: float) -> bool:
        return self.params.lease_s > 0 and lease_due(self.next_lease_s, time_s)

    def queue_order(self, sched, time_s: float) -> np.ndarray:
        queued = np.flatnonzero(sched.state == QUEUED)
        return queued[np.lexsort((queued, self.predicted_remaining_s(sched, queued), sched.jobs.prio[queued]))]

    def end_estimate_s(self, sched, jobs: np.ndarray, time_s: float) -> np.ndarray:
        return time_s + self.predicted_remaining_s(sched, jobs) / np.maximum(sched.speed[jobs], 1e-9)

    def schedule(self, sched, time_s: float) -> list[int]:
        if self.params.lease_s > 0 and lease_due(self.next_lease_s, time_s):
            self.next_lease_s = next_lease_s(time_s, self.params.lease_s)
            active = np.flatnonzero((sched.state == QUEUED) | (sched.state == RUNNING))
            ranked = active[np.lexsort((active, self.predicted_remaining_s(sched, active), sched.jobs.prio[active]))]
            return lease_round(self, sched, ranked, time_s, self.params.preempt_loss_s)
        return super().schedule(sched, time_s)
