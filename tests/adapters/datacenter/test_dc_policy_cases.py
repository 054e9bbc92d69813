"""Each scheduling policy against a small case worked by hand (the numbers are in each docstring).

Layout in every case: 8-GPU nodes, GPU g on node g // 8.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.adapters.datacenter.goodput import GoodputModel, allowed_sizes
from cosim.adapters.datacenter.nodes import NodePower, NodeSleep, SleepParams, Topology, frag_gpus, node_frag_gpus
from cosim.adapters.datacenter.policies.pwr import pwr_score
from cosim.adapters.datacenter.scheduler import DONE, QUEUED, RUNNING, Scheduler
from cosim.adapters.datacenter.training import Jobs
from scheduling_sim import random_jobs, simulate


def jobs(sizes, works, submits=None, prios=None, elastic=None) -> Jobs:
    n = len(sizes)
    return Jobs(np.asarray(submits if submits is not None else np.zeros(n), float), np.asarray(sizes, np.int64),
                np.asarray(works, float), np.asarray(prios if prios is not None else np.ones(n), np.int64),
                np.zeros(n, bool), np.full(n, 0.5), elastic=None if elastic is None else np.asarray(elastic, bool))


def nodes_of(s: Scheduler, job: int) -> list[int]:
    return sorted(set((np.flatnonzero(s.owner == job) // 8).tolist()))


def preset(policy, table: Jobs, n_gpus: int, placed: dict[int, list[int]], **kw) -> Scheduler:
    """A scheduler with every job admitted and the jobs of ``placed`` started on the given GPUs."""
    s = Scheduler(table, n_gpus, policy, topology=Topology(n_gpus, 8, kw.pop("nodes_per_rack", 4)), **kw)
    s.admit(0.0)
    for job, gpus in placed.items():
        s.start(job, 0.0, np.asarray(gpus))
    return s


# -- the fragmentation measure -------------------------------------------------------------------------
def test_fgd_measure_by_hand():
    """Free GPUs [6, 3, 0] against pods {2: 1/4, 3: 1/4, 4: 1/4, 5: 1/4}: node 0 (6 free) hosts every
    class, F = 0; node 1 (3 free) cannot host 4 or 5, F = 3 x 1/2 = 1.5; node 2 has nothing free."""
    sizes, probs = np.array([2, 3, 4, 5]), np.full(4, 0.25)
    np.testing.assert_allclose(node_frag_gpus(np.array([6, 3, 0]), sizes, probs), [0.0, 1.5, 0.0])
    assert frag_gpus(np.array([6, 3, 0]), sizes, probs) == 1.5


# -- fifo / easy ---------------------------------------------------------------------------------------
def test_fifo_head_blocks_a_job_that_would_fit():
    """8 GPUs: A (6) runs; the head B (4) does not fit; C (2) would, but FIFO does not look past B."""
    s = preset("fifo", jobs([6, 4, 2], [100, 100, 100]), 8, {})
    assert s.schedule(0.0) == [0]
    assert s.state.tolist() == [RUNNING, QUEUED, QUEUED]


def test_first_fit_with_node_locality():
    """Nodes with 5 and 8 free: a 6-GPU job skips node 0 (5 free) for node 1 under locality 'node';
    under 'any' it takes the lowest free GPUs, 3..8, across both."""
    table = jobs([3, 6], [100, 100])
    s = preset("easy", table, 16, {0: [0, 1, 2]}, locality="node")
    s.schedule(0.0)
    assert nodes_of(s, 1) == [1]
    s = preset("easy", table, 16, {0: [0, 1, 2]})
    s.schedule(0.0)
    assert np.flatnonzero(s.owner == 1).tolist() == [3, 4, 5, 6, 7, 8]


def test_rack_locality_keeps_a_two_node_job_in_one_rack():
    """4 nodes, 2 per rack; nodes 0 and 3 half used. A 16-GPU job needs two empty nodes in one rack:
    racks are {0, 1} and {2, 3}, neither has two empty nodes, so it waits under 'rack'; under
    'node' it takes nodes 1 and 2."""
    table = jobs([4, 4, 16], [100, 100, 100])
    placed = {0: [0, 1, 2, 3], 1: [24, 25, 26, 27]}
    s = preset("easy", table, 32, placed, locality="rack", nodes_per_rack=2)
    s.schedule(0.0)
    assert s.state[2] == QUEUED
    s = preset("easy", table, 32, placed, locality="node", nodes_per_rack=2)
    s.schedule(0.0)
    assert nodes_of(s, 2) == [1, 2]


# -- fgd -----------------------------------------------------------------------------------------------
def test_fgd_chooses_the_node_where_fragmentation_grows_least():
    """Jobs of 2, 5, 3, 4 GPUs admitted (pods 2, 5, 3, 4, each 1/4). Job 0 holds GPUs 0-1 (node 0: 6
    free), job 1 GPUs 8-12 (node 1: 3 free). Job 2 (3 GPUs): on node 0, 6 -> 3 free, F 0 -> 1.5
    (3 free cannot host 4 or 5); on node 1, 3 -> 0, F 1.5 -> 0. FGD takes node 1; first fit node 0."""
    table = jobs([2, 5, 3, 4], [100] * 4)
    s = preset("fgd", table, 16, {0: [0, 1], 1: [8, 9, 10, 11, 12]})
    s.schedule(0.0)
    assert np.flatnonzero(s.owner == 2).tolist() == [13, 14, 15]
    s = preset("easy", table, 16, {0: [0, 1], 1: [8, 9, 10, 11, 12]})
    s.schedule(0.0)
    assert np.flatnonzero(s.owner == 2).tolist() == [2, 3, 4]


# -- pwr -----------------------------------------------------------------------------------------------
def test_pwr_score_by_hand():
    """H100 DGX numbers (GPU idle 80 W, node idle 1,400 W), sleeping nodes at 60 W. Node 0 empty,
    node 1 with 2 busy GPUs; a 2-GPU pod whose GPUs draw w. Node 0: 60 W -> 1,400 + 2 (w + 400) +
    6 x 80; node 1 adds 2 (w + 400) - 2 x 80. Node 1 is cheaper by 1,400 + 480 - 60 + 160 = 1,980 W.
    Without sleep an empty node already draws its idle power: both add 2 (w + 400) - 160."""
    table = jobs([2, 2], [100, 100])
    s = preset("pwr", table, 16, {0: [8, 9]})
    score = pwr_score(s, NodePower(p_sleep_w=60.0), 300.0)(np.array([8, 6]), 2)
    assert score[1] - score[0] == pytest.approx(1980.0)
    flat = pwr_score(s, NodePower(), 300.0)(np.array([8, 6]), 2)
    assert flat[0] == pytest.approx(flat[1]) == pytest.approx(-(2 * (300.0 + 400.0) - 160.0))


def test_pwr_fills_a_busy_node_when_nodes_sleep():
    """Same state, a 2-GPU job: with sleep on PWR (weight 1) puts it on node 1 beside the running job;
    first fit takes node 0."""
    table = jobs([2, 2], [100, 100])
    topo = Topology(16, 8)
    sleep = NodeSleep(topo, SleepParams(p_sleep_w=60.0))
    s = Scheduler(table, 16, "pwr", policy_params={"pwr_weight_frac": 1.0}, topology=topo, sleep=sleep,
                  node_power=NodePower(p_sleep_w=60.0))
    s.admit(0.0)
    s.start(0, 0.0, np.array([8, 9]))
    s.schedule(0.0)
    assert nodes_of(s, 1) == [1]
    s = preset("easy", table, 16, {0: [8, 9]})
    s.schedule(0.0)
    assert nodes_of(s, 1) == [0]


# -- compass_abs ---------------------------------------------------------------------------------------
def test_compass_abs_bounds_the_partly_used_nodes():
    """4 nodes, anchor_max_frac 0.25 -> at most 1 partly used node. Node 0 holds job 0 (3 GPUs).
    Job 1 (2 GPUs) goes to that anchor (best fit, 3 left); job 2 (6 GPUs) fits no anchor and may not
    open a second one: it waits though 24 GPUs are free; job 3 (8 GPUs) takes an empty node. After
    wait_max_s job 2 may open an anchor beyond the bound."""
    table = jobs([3, 2, 6, 8], [5000] * 4)
    params = {"anchor_max_frac": 0.25, "wait_max_s": 600.0}
    s = preset("compass_abs", table, 32, {0: [0, 1, 2]}, policy_params=params)
    s.schedule(0.0)
    assert nodes_of(s, 1) == [0] and s.state[2] == QUEUED and nodes_of(s, 3) == [1]
    s.dirty = True
    s.schedule(600.0)
    assert s.state[2] == RUNNING and nodes_of(s, 2) == [2]


# -- themis --------------------------------------------------------------------------------------------
def test_themis_preempts_for_the_worst_finish_time_fairness():
    """One 8-GPU node. L (8 GPUs, 10,000 s) starts at 0; S (8 GPUs, 600 s) arrives at 100. At the lease
    end t = 600 with N = 2 active jobs (fair share 4 GPUs, so T_id = 2 x work): rho_L = (600 + 9,400) /
    20,000 = 0.5, rho_S = (500 + 600) / 1,200 = 0.92. S bids (f = 0.8: ceil(0.2 x 2) = 1 bidder, the
    worst rho) and wins; L is preempted and redoes 300 s: S runs 600-1,200, L ends at 1,200 + 9,700."""
    s = Scheduler(jobs([8, 8], [10_000, 600], submits=[0, 100]), 8, "themis", topology=Topology(8, 8))
    simulate(s, dt=100.0, steps=200)
    assert s.first_start_s.tolist() == [0.0, 600.0]
    assert s.extra_work_s.tolist() == [300.0, 0.0]
    assert s.end_s.tolist() == [10_900.0, 1_200.0]
    easy = Scheduler(jobs([8, 8], [10_000, 600], submits=[0, 100]), 8, "easy", topology=Topology(8, 8))
    simulate(easy, dt=100.0, steps=200)
    assert easy.first_start_s[1] == 10_000.0


# -- srpt ----------------------------------------------------------------------------------------------
def test_srpt_exact_predictions_run_shortest_first():
    """One node, three 8-GPU jobs of 300, 100, 200 s at t = 0: exact predictions start 1, 2, 0."""
    s = Scheduler(jobs([8, 8, 8], [300, 100, 200]), 8, "srpt", policy_params={"runtime_noise_sigma_frac": 0.0},
                  topology=Topology(8, 8))
    simulate(s, dt=50.0, steps=100)
    assert s.first_start_s.tolist() == [300.0, 0.0, 100.0]


def test_srpt_reestimates_a_used_up_prediction():
    """A prediction of 100 s for a job that has done 150 s becomes 2 x 150 = 300 s, 150 s left."""
    s = Scheduler(jobs([8], [1000]), 8, "srpt", topology=Topology(8, 8))
    s.policy.estimate_s[:] = 100.0
    s.work_done_s[0] = 150.0
    assert s.policy.predicted_remaining_s(s, np.array([0])).tolist() == [150.0]


def test_srpt_lease_preempts_the_longer_job():
    """L (1,000 s) runs from 0; S (100 s) arrives at 50; lease 200 s: S takes the node at 200, L redoes 300 s."""
    s = Scheduler(jobs([8, 8], [1000, 100], submits=[0, 50]), 8, "srpt", topology=Topology(8, 8),
                  policy_params={"runtime_noise_sigma_frac": 0.0, "lease_s": 200.0})
    simulate(s, dt=50.0, steps=100)
    assert s.first_start_s.tolist() == [0.0, 200.0] and s.extra_work_s[0] == 300.0
    assert s.end_s[1] == 300.0


# -- elastic -------------------------------------------------------------------------------------------
def test_goodput_numbers_by_hand():
    """Defaults: T_comp = 0.1 + 0.004 x 32 = 0.228 s. 8 GPUs in a node: T_net = 0.02 + 0.004 x 6 = 0.044 s,
    T_step = (0.228^1.5 + 0.044^1.5)^(2/3) = 0.2407 s. 16 GPUs on two nodes: T_net = 0.1 + 0.01 x 14 =
    0.24 s, T_step = 0.3715 s, efficiency (4000 + 256) / (4000 + 512) = 0.9433: speedup 512 / 0.3715 x
    0.9433 / (256 / 0.2407) = 1.22. 4 GPUs: T_net 0.028 s, T_step 0.2345 s, efficiency 4256 / 4128: 0.53."""
    m = GoodputModel()
    assert m.step_s(8, 8) == pytest.approx(0.2407, abs=1e-4)
    assert m.step_s(16, 8) == pytest.approx(0.3715, abs=1e-4)
    assert m.speedup(16, 8, 8) == pytest.approx(1.22, abs=0.005)
    assert m.speedup(4, 8, 8) == pytest.approx(0.53, abs=0.005)
    assert allowed_sizes(8, 0.25, 2.0, 64) == [2, 4, 8, 16]


def test_elastic_grows_into_free_gpus_and_shrinks_for_a_waiting_job():
    """16 GPUs. Elastic E (8 requested) starts at 0 and, nothing waiting, doubles to 16 (rate 1.22). Rigid
    R (8) arrives at 100: E was resized at 0 and may not be again before 600, so R waits; at 600 E
    halves back to 8 and R starts."""
    table = jobs([8, 8], [100_000, 1000], submits=[0, 100], elastic=[True, False])
    s = Scheduler(table, 16, "elastic", topology=Topology(16, 8))
    simulate(s, dt=100.0, steps=8)
    assert s.first_start_s[1] == 600.0
    assert s.n_alloc[0] == 8 and s.rate_frac[0] == 1.0
    assert s.extra_work_s[0] == 120.0  # two resizes of 60 s
    # 600 s at 16 GPUs, then 200 s at 8 (the 120 s of rescale cost go on the remaining work)
    assert math.isclose(s.work_done_s[0], 600 * GoodputModel().speedup(16, 8, 8) + 200.0)


def test_rigid_jobs_are_not_resized():
    s = Scheduler(jobs([8], [1000], elastic=[False]), 16, "elastic", topology=Topology(16, 8))
    simulate(s, dt=100.0, steps=3)
    assert s.n_alloc[0] == 8 and s.rate_frac[0] == 1.0 and s.state[0] in (RUNNING, DONE)


def test_pwr_places_as_fgd_when_nodes_do_not_sleep():
    """pwr.py's docstring: with sleep off every feasible node adds the same power, so PWR's term is
    flat and pwr's whole schedule is fgd's (the same GPUs for every job at every time)."""
    schedules = []
    for policy in ("pwr", "fgd"):
        s = Scheduler(random_jobs(7, n=60), 32, policy, topology=Topology(32, 8), locality="node")
        owners = []
        simulate(s, on_pass=lambda s, q, started: owners.append(s.owner.copy()))
        schedules.append(np.array(owners))
    np.testing.assert_array_equal(schedules[0], schedules[1])
