"""The scheduler's loop in miniature, with the invariant checks the policy tests share."""

from __future__ import annotations

import math

import numpy as np

from cosim.adapters.datacenter.scheduler import DONE, PAUSED, QUEUED, REJECTED, RUNNING, Scheduler
from cosim.adapters.datacenter.training import Jobs

GPN = 8


def random_jobs(seed: int, n: int = 40, n_gpus: int = 32) -> Jobs:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 4, 8, 12, 16, 24, 40], n, p=[.2, .15, .1, .15, .15, .05, .1, .05, .05])
    submit = np.sort(rng.uniform(0, 3000, n))
    works = rng.uniform(50, 1500, n)
    prio = rng.integers(0, 3, n)
    return Jobs(submit, sizes.astype(np.int64), works, prio.astype(np.int64), rng.random(n) < 0.3,
                np.full(n, 0.5), elastic=rng.random(n) < 0.5)


def check_state(s: Scheduler) -> None:
    held = np.bincount(s.owner[s.owner >= 0], minlength=len(s.jobs))
    running = s.state == RUNNING
    kept = (s.state == PAUSED) & s.held  # paused on its own GPUs (a DR hold)
    assert not (s.held & (s.state != PAUSED)).any()
    # gang: a running (or held) job holds exactly the GPUs it was given; nothing else holds any
    np.testing.assert_array_equal(held[running | kept], s.n_alloc[running | kept])
    assert held[~(running | kept)].sum() == 0
    assert s.n_free == int((s.owner < 0).sum()) >= 0
    rigid = running & ~(s.jobs.elastic if s.jobs.elastic is not None else np.zeros(len(s.jobs), bool))
    if s.policy.name != "elastic":
        rigid = running
    np.testing.assert_array_equal(s.n_alloc[rigid], s.jobs.n_gpus[rigid])
    assert (s.first_start_s[~np.isnan(s.first_start_s)] >= s.jobs.submit_s[~np.isnan(s.first_start_s)]).all()
    # the free-GPU caches start and release keep (instead of a scan per placement) match a recount
    np.testing.assert_array_equal(s.free_gpus(), np.flatnonzero(s.owner < 0))
    np.testing.assert_array_equal(s.free_per_node(), s.topology.free_per_node(s.owner))


def check_locality(s: Scheduler) -> None:
    topo = s.topology
    for job in s.running().tolist():
        nodes = np.unique(topo.node_of_gpu[s.owner == job])
        n = int(s.n_alloc[job])
        if s.locality in ("node", "rack"):
            assert len(nodes) == math.ceil(n / GPN), f"job {job} ({n} GPUs) on nodes {nodes.tolist()}"
        if s.locality == "rack" and 1 < len(nodes) and n <= topo.nodes_per_rack * GPN:
            assert len(np.unique(nodes // topo.nodes_per_rack)) == 1, f"job {job} spans racks {nodes.tolist()}"


def simulate(s: Scheduler, dt: float = 20.0, steps: int = 3000, pause_every: int = 0, on_pass=None) -> None:
    """The cluster's loop in miniature: admit, pass, progress at each job's rate (none before ready), finish."""
    for k in range(steps):
        t = k * dt
        s.admit(t)
        if pause_every and k % pause_every == 1 and t < 2000:  # a DR pause and restore, as the cluster does
            flex = s.running()[s.jobs.flexible[s.running()]]
            if (k // pause_every) % 2:  # every other pause holds the job's GPUs (hold_paused_gpus)
                s.hold(flex[:1])
            else:
                s.release(flex[:1], PAUSED, t)
            back = np.flatnonzero(s.state == PAUSED)[:1]
            kept = s.held[back]
            s.unhold(back[kept], 30.0)
            s.requeue(back[~kept], 30.0)
        queued_before = np.flatnonzero(s.state == QUEUED)
        started = s.schedule(t)
        if on_pass is not None:
            on_pass(s, queued_before, started)
        check_state(s)
        check_locality(s)
        if s.sleep is not None:
            s.sleep.update(t, s.free_per_node())
        run = s.running()
        ready = np.clip((t + dt - s.ready_s[run]) / dt, 0.0, 1.0)
        work = np.minimum(s.remaining_s[run], dt * s.rate_frac[run] * ready)
        s.remaining_s[run] -= work
        s.work_done_s[run] += work
        s.release(run[s.remaining_s[run] <= 1e-9], DONE, t + dt)
        s.account(dt, t)
        if s.next_arrival == len(s.jobs) and np.isin(s.state, (DONE, REJECTED)).all():
            return
