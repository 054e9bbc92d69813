"""The policy interface and the priority-FIFO pass (with optional EASY backfill) most policies share.

A :class:`Policy` decides, in :meth:`Policy.schedule`, which queued jobs start now, and in
:meth:`Policy.place`, on which GPUs. The default pass is the scheduler cosim always had:
the queue in priority class, then submission order; jobs start in order while they can be
placed; the first that cannot is the *head*, reserved at the earliest time enough GPUs free
up (the *shadow time*); with backfill, later jobs may start now if they can be placed and
either end before the shadow time or use only GPUs the head will not need (EASY backfill:
Lifka, "The ANL/IBM SP scheduling system", JSSPP 1995; Mu'alem & Feitelson, IEEE TPDS
12(6), 2001). With node locality the reservation still counts GPUs, not places (an
approximation: a head may find its reserved GPUs spread over nodes it cannot use).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from cosim.adapters.datacenter.policies._placement import place_first_fit
from cosim.sdk import Params


class PolicyParams(Params):
    """A policy's params (none by default); every field carries its unit in its name."""


class Policy:
    """Base of every policy: priority FIFO, first-fit placement; subclasses override parts.

    Class attributes:
        PARAMS: the params model (``training.policy_params``).
        PRIORITY_ORDER: the policy ranks queued jobs by priority class first.
        STRICT_PARAMS: params under which every pass starts a prefix of that ranking (no
            backfill), so no job starts while one of a higher class waits; None when the
            policy makes no priority promise. The tests hold each policy to it.
        BACKFILL: the default pass backfills (EASY).
    """

    PARAMS: ClassVar[type[PolicyParams]] = PolicyParams
    PRIORITY_ORDER: ClassVar[bool] = True
    STRICT_PARAMS: ClassVar[dict | None] = {}
    BACKFILL: ClassVar[bool] = False
    #: queued jobs behind the head a backfill pass looks at. [-]
    N_BACKFILL_JOBS: ClassVar[int] = 200

    def __init__(self, params: PolicyParams | None = None, rng: np.random.Generator | None = None):
        self.params = params if params is not None else self.PARAMS()
        self.rng = rng
        self.name = type(self).__module__.rsplit(".", 1)[-1]

    # -- hooks ---------------------------------------------------------------------------------
    def bind(self, sched) -> None:
        """Called once when the scheduler is built (draw per-job estimates here)."""

    def job_replaced(self, sched, job: int) -> None:
        """Job ``job``'s row now holds another job (one moved in from another site, :mod:`..moves`):
        refresh what :meth:`bind` kept of it."""

    def wants_pass(self, sched, time_s: float) -> bool:
        """Run a pass at ``time_s`` although nothing changed (lease ends, periodic rescaling)."""
        return False

    def backfill(self) -> bool:
        return self.BACKFILL

    def n_backfill_jobs(self) -> int:
        return self.N_BACKFILL_JOBS

    def queue_order(self, sched, time_s: float) -> np.ndarray:
        """Queued jobs in the order the pass tries them (default: priority, submission, id)."""
        return sched.queue_order()

    def end_estimate_s(self, sched, jobs: np.ndarray, time_s: float) -> np.ndarray:
        """When ``jobs`` would end if started now (default: the true remaining work). [s]"""
        return time_s + sched.remaining_s[jobs] / np.maximum(sched.speed[jobs], 1e-9)

    def place(self, sched, job: int, need: int, time_s: float) -> np.ndarray | None:
        """GPUs for ``need`` GPUs of ``job``, or None when it cannot be placed now (default: first fit)."""
        return place_first_fit(sched, need)

    # -- the pass --------------------------------------------------------------------------------
    def try_start(self, sched, job: int, time_s: float, need: int | None = None) -> bool:
        """Place and start ``job`` (with ``need`` GPUs, default its request); False if it does not fit."""
        need = int(sched.jobs.n_gpus[job]) if need is None else need
        if need > sched.n_free:
            return False
        gpus = self.place(sched, job, need, time_s)
        if gpus is None:
            return False
        sched.start(job, time_s, gpus)
        return True

    def schedule(self, sched, time_s: float) -> list[int]:
        """Start what can be placed, in queue order; backfill around the head's reservation."""
        order = self.queue_order(sched, time_s)
        started: list[int] = []
        i = 0
        while i < len(order) and self.try_start(sched, int(order[i]), time_s):
            started.append(int(order[i]))
            i += 1
        if i >= len(order) or not self.backfill():
            return started
        return started + self._backfill(sched, order, i, time_s)

    def _backfill(self, sched, order: np.ndarray, head: int, time_s: float) -> list[int]:
        n_gpus = sched.jobs.n_gpus
        behind = order[head + 1: head + 1 + self.n_backfill_jobs()]
        behind = behind[n_gpus[behind] <= sched.n_free]  # free GPUs only shrink during the pass
        if not len(behind):  # none of them fits the free GPUs (a full partition): no reservation to make
            return []
        shadow_s, extra = sched.reservation(int(n_gpus[order[head]]), time_s)
        ends_s = self.end_estimate_s(sched, behind, time_s)
        started = []
        for job, need, end_s in zip(behind.tolist(), n_gpus[behind].tolist(), ends_s.tolist()):
            if need > sched.n_free:
                continue
            ends_in_time = end_s <= shadow_s
            if (ends_in_time or need <= extra) and self.try_start(sched, job, time_s):
                started.append(job)
                if not ends_in_time:
                    extra -= need
            if sched.n_free == 0:
                break
        return started
