"""Nodes in the cluster: the sleep knob changes power only when on, waking delays jobs, the
scheduling outputs (idle power, fragmentation, fairness, sheddable power) by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster
from cosim.adapters.datacenter.cluster import OUTPUTS
from cosim.adapters.datacenter.nodes import NodeSleep, SleepParams, Topology
from cosim.adapters.datacenter.observe import SCHEDULING_OUTPUTS, finish_time_fairness

BASE = {"node": "DGX-H100", "n_gpus": 64,
        "training": {"n_jobs": 30, "sizes_gpus": [1, 4, 8, 16], "size_weights": [0.4, 0.3, 0.2, 0.1],
                     "duration_median_h": 1.0, "span_s": 6 * 3600.0}}


def run(over=None, steps=12 * 60, seed=4, report=True):
    params = ClusterParams.model_validate({**BASE, **(over or {})})
    cluster = build_cluster(params, np.random.default_rng(seed), steps * 60.0, report_scheduling=report)
    return cluster, pd.DataFrame([cluster.step(k * 60.0, 60.0) for k in range(steps)])


def test_locality_and_policy_leave_power_alone_without_sleep():
    """Without the sleep knob the node power model is linear in busy GPUs, so where jobs land does not
    change power: first fit on nodes, FGD and PWR run the same jobs at the same times in this light
    load and draw the same power as the default, to round-off."""
    _, base = run()
    for over in ({"training": {**BASE["training"], "locality": "node"}},
                 {"training": {**BASE["training"], "policy": "fgd"}},
                 {"training": {**BASE["training"], "policy": "pwr", "locality": "node"}}):
        _, other = run(over)
        np.testing.assert_allclose(other["p_mw"], base["p_mw"], rtol=1e-12)


def test_scheduling_outputs_only_when_asked():
    _, plain = run(report=False)
    assert list(plain.columns) == list(OUTPUTS)
    _, full = run()
    assert list(full.columns) == [*OUTPUTS, *SCHEDULING_OUTPUTS]
    np.testing.assert_array_equal(full[list(OUTPUTS)].to_numpy(), plain.to_numpy())


def test_sleep_saves_idle_power_and_costs_wake_time():
    """Sleeping empty nodes draw less; a job landing on a sleeping node waits wake_s (JCT grows)."""
    awake_c, awake = run()
    sleep_c, sleep = run({"nodes": {"sleep": True, "wake_s": 600.0, "idle_before_sleep_s": 300.0}})
    assert sleep["p_mw"].mean() < awake["p_mw"].mean() - 0.003
    assert (sleep["n_nodes_asleep"] > 0).any() and (awake["n_nodes_asleep"] == 0).all()
    assert sleep["jct_mean_h"].iloc[-1] > awake["jct_mean_h"].iloc[-1]
    # the same work gets done, later
    assert sleep_c.sched.count(5) == awake_c.sched.count(5) == 0


def test_idle_cluster_by_hand():
    """64 H100 GPUs (8 DGX nodes), no jobs: idle capacity draws 64 x (80 + 1,400 / 8) W = 16.32 kW;
    with sleep after 10 min every node draws 60 W: 0.48 kW; nothing to shed, no fragmentation."""
    idle_training = {**BASE["training"], "n_jobs": 0}
    _, out = run({"training": idle_training}, steps=30)
    assert out["p_train_idle_mw"].iloc[-1] == pytest.approx(64 * (80 + 1400 / 8) / 1e6)
    assert (out["n_gpus_idle"] == 64).all() and (out["n_gpus_frag"] == 0).all() and (out["p_shed_mw"] == 0).all()
    _, out = run({"training": idle_training, "nodes": {"sleep": True}}, steps=30)
    assert out["n_nodes_asleep"].iloc[-1] == 8
    assert out["p_train_idle_mw"].iloc[-1] == pytest.approx(8 * 60 / 1e6)
    # IT power: the partition's sleeping nodes only (no inference fleet)
    assert out["p_it_mw"].iloc[-1] == pytest.approx(8 * 60 / 1e6)


def test_spare_nodes_stay_awake():
    topo = Topology(32, 8)
    sleep = NodeSleep(topo, SleepParams(idle_before_sleep_s=0.0, n_awake_spare=1))
    free = np.array([8, 8, 8, 2])
    sleep.update(0.0, free)
    assert sleep.asleep.tolist() == [False, True, True, False]
    assert sleep.wake(np.array([1, 3]), 100.0) == 100.0 + SleepParams().wake_s
    assert sleep.asleep.tolist() == [False, False, True, False]


def test_finish_time_fairness_by_hand():
    """A 32-GPU job alone for 1 h (work 1 h) on 64 GPUs with 4 active jobs: fair share 16 GPUs, so
    T_id = 1 h x 32 / 16 = 2 h and rho = 3 h / 2 h = 1.5 for a JCT of 3 h; an 8-GPU job (share 16 >= 8:
    T_id = its work) finishing in twice its work has rho 2."""
    rho = finish_time_fairness(np.array([3 * 3600.0, 7200.0]), np.array([3600.0, 3600.0]), np.array([32, 8]),
                               np.array([4.0, 4.0]), 64)
    np.testing.assert_allclose(rho, [1.5, 2.0])


def test_shed_capacity_is_what_caps_and_pauses_free():
    """Capping to the lowest limit sheds less than pausing the flexible jobs and capping the rest,
    and both stay below the cluster's draw above idle."""
    _, out = run({"training": {**BASE["training"], "flexible_frac": 1.0, "class_fracs": [0.0, 1.0, 0.0]}})
    busy = out[out["n_jobs_running"] > 0]
    assert (busy["p_shed_cap_mw"] > 0).all()
    assert (busy["p_shed_mw"] >= busy["p_shed_cap_mw"] - 1e-12).all()
    assert (busy["p_shed_mw"] < busy["p_mw"]).all()
