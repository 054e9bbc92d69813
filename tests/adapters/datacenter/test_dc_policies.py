"""Invariants every scheduling policy keeps, parametrized over the policy registry (a new file in
adapters/datacenter/policies/ is tested here with no edit): no GPU booked twice, gangs all or
nothing (and on as few nodes as the locality asks), no job starting before its submission, work
conserved (each finished job did exactly its work plus the restore costs it was charged), every
job finished or rejected, priority order where the policy promises it, determinism under a seed.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cosim.adapters.datacenter import ClusterParams, cluster_problems
from cosim.adapters.datacenter.nodes import NodeSleep, SleepParams, Topology
from cosim.adapters.datacenter.policies import available, make_policy, param_problems, policy_class
from cosim.adapters.datacenter.policies._lease import desired
from cosim.adapters.datacenter.scheduler import DONE, QUEUED, REJECTED, Scheduler
from cosim.adapters.datacenter.training import Jobs
from scheduling_sim import GPN, random_jobs, simulate

POLICIES = sorted(available())


def make(policy: str, jobs: Jobs, n_gpus: int = 32, locality: str = "any", sleep: bool = False, params=None,
         seed: int = 0) -> Scheduler:
    topo = Topology(n_gpus, GPN, nodes_per_rack=2)
    sleeper = NodeSleep(topo, SleepParams(wake_s=120.0, idle_before_sleep_s=200.0)) if sleep else None
    return Scheduler(jobs, n_gpus, policy, policy_params=params or {}, topology=topo, locality=locality,
                     sleep=sleeper, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("locality", ["any", "node", "rack"])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_policy_invariants(policy, locality, seed):
    s = make(policy, random_jobs(seed), locality=locality, sleep=seed == 2)
    simulate(s, pause_every=7 if seed == 1 else 0)
    too_big = s.jobs.n_gpus > s.n_gpus
    assert (s.state[too_big] == REJECTED).all()
    assert (s.state[~too_big] == DONE).all(), f"unfinished: {np.flatnonzero(s.state[~too_big] != DONE)}"
    done = s.state == DONE
    # work conserved: progress made equals the work plus every restore/preemption/rescale cost charged
    np.testing.assert_allclose(s.work_done_s[done], s.jobs.work_s[done] + s.extra_work_s[done], rtol=1e-9)
    assert (s.end_s[done] >= s.first_start_s[done] + 0.0).all()


def priority_violation(s: Scheduler, started: list[int]) -> bool:
    """A job started in this pass whose class is below that of a job still waiting."""
    waiting = np.flatnonzero(s.state == QUEUED)
    return bool(started) and len(waiting) > 0 and int(s.jobs.prio[started].max()) > int(s.jobs.prio[waiting].min())


@pytest.mark.parametrize("policy", [p for p in POLICIES if policy_class(p).STRICT_PARAMS is not None])
@pytest.mark.parametrize("locality", ["any", "node"])
def test_priority_order_where_promised(policy, locality):
    """Under its strict params a policy starts, in every pass, only jobs of a class at least as high
    as every job still waiting (a prefix of its priority-first ranking)."""
    cls = policy_class(policy)
    assert cls.PRIORITY_ORDER
    violations = []

    def on_pass(s, queued_before, started):
        if priority_violation(s, started):
            violations.append(started)

    s = make(policy, random_jobs(3, n=50), locality=locality, params=cls.STRICT_PARAMS)
    simulate(s, on_pass=on_pass)
    assert not violations, violations[:3]


def test_priority_check_can_fail():
    """The check sees a violation: EASY's backfill (not strict) starts a low-class job past a waiting normal one."""
    jobs = Jobs(np.zeros(3), np.array([6, 8, 2]), np.array([100.0, 100.0, 50.0]), np.array([0, 1, 2]),
                np.zeros(3, bool), np.full(3, 0.5))
    s = make("easy", jobs, n_gpus=8)
    s.admit(0.0)
    started = s.schedule(0.0)
    assert started == [0, 2] and s.state[1] == QUEUED
    assert priority_violation(s, started)


@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_schedule(policy):
    runs = []
    for _ in range(2):
        s = make(policy, random_jobs(5), locality="node", seed=9)
        simulate(s)
        runs.append((s.first_start_s.copy(), s.end_s.copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_srpt_draws_from_its_seed():
    a = make("srpt", random_jobs(5), seed=1).policy.estimate_s
    b = make("srpt", random_jobs(5), seed=1).policy.estimate_s
    c = make("srpt", random_jobs(5), seed=2).policy.estimate_s
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("policy", POLICIES)
def test_params_carry_units_and_unknown_ones_are_named(policy):
    from cosim.units import has_unit_suffix

    cls = policy_class(policy)
    for name, field in cls.PARAMS.model_fields.items():
        if field.annotation in (int, float):
            assert has_unit_suffix(name), f"{policy}.{name} has no unit suffix"
    problems = param_problems(policy, {"no_such_param_s": 1.0})
    assert len(problems) == 1 and "no_such_param_s" in problems[0] and policy in problems[0]
    assert make_policy(policy, {}).name == policy


def test_unknown_policy_names_the_known_ones():
    problems = param_problems("nope", {})
    assert problems == [f"training.policy = 'nope': unknown policy; known: {', '.join(POLICIES)}"]
    with pytest.raises(ValueError, match="unknown policy"):
        Scheduler(random_jobs(1), 32, "nope")


@pytest.mark.parametrize("training, nodes, said", [
    ({"policy": "easy", "elastic_frac": 0.5}, {}, "elastic_frac = 0.5 has no effect under training.policy = 'easy'"),
    ({"policy": "pwr"}, {}, 'policy = "pwr" without nodes.sleep = true places as "fgd"'),
    ({"policy": "elastic", "elastic_frac": 0.5}, {}, None),
    ({"policy": "pwr"}, {"sleep": True}, None),
])
def test_params_a_policy_ignores_are_said(training, nodes, said):
    """A param the chosen policy does not read is a validation warning (the run still goes: a policy
    sweep keeps one job set), never silent; where it is read, nothing is said."""
    params = ClusterParams.model_validate({"n_gpus": 64, "training": {"source": "synthetic", "n_jobs": 10, **training},
                                           "nodes": nodes})
    warnings = [p for p in cluster_problems(params, 3600) if p.startswith("warning: ")]
    if said is None:
        assert warnings == []
    else:
        assert any(said in w for w in warnings), warnings


def test_a_lease_round_wants_no_more_jobs_than_fit_beside_the_held_gpus():
    """16 GPUs, 8 of them held by a paused job (hold_paused_gpus): of two ranked 8-GPU jobs only the
    first is wanted (it used to want both, and preempt_for then preempted running jobs for a job that
    cannot start while the hold lasts); with the hold released both are."""
    sched = SimpleNamespace(n_gpus=16, jobs=SimpleNamespace(n_gpus=np.array([8, 8, 8])),
                            n_alloc=np.array([8, 8, 8]), held=np.array([False, False, True]))
    assert desired(sched, np.array([0, 1])).tolist() == [0]
    sched.held[:] = False
    assert desired(sched, np.array([0, 1])).tolist() == [0, 1]
