"""DR-held GPUs: a job paused by a DR knob or the facility limit keeps its GPUs idle, so the cut holds.

Hand-built case: 16 GPUs on two DGX H100 nodes. Job A (8 GPUs, flexible) and job B (8 GPUs)
run; job C (8 GPUs) waits in the queue. Pausing A frees 8 GPUs: with ``hold_paused_gpus``
they stay booked and idle, so the training power drops by exactly A's share (its 8 GPUs from
their working power to idle, plus the node's busy-GPU share of non-GPU power,
``GpuCluster._saving_w``); without it C takes them, as cosim did before, and the cut is lost.
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim.adapters.datacenter.cluster import GpuCluster, Knobs
from cosim.adapters.datacenter.hardware import gpu_spec, node_spec
from cosim.adapters.datacenter.scheduler import PAUSED, QUEUED, RUNNING
from cosim.adapters.datacenter.training import Jobs

A, B, C = 0, 1, 2
DT = 60.0


def cluster(hold: bool, report: bool = False) -> GpuCluster:
    node = node_spec("DGX-H100")
    jobs = Jobs(submit_s=np.zeros(3), n_gpus=np.array([8, 8, 8]), work_s=np.full(3, 36_000.0),
                prio=np.array([1, 1, 1]), flexible=np.array([True, False, False]),
                power_frac=np.array([0.8, 0.6, 0.7]))
    return GpuCluster(node, gpu_spec(node.gpu), 16, jobs, [], stragglers=False,
                      rng=np.random.default_rng(3), hold_paused_gpus=hold, report_scheduling=report)


def steps(c: GpuCluster, first: int, last: int, knobs: Knobs | None = None) -> list[dict]:
    return [c.step(k * DT, DT, knobs) for k in range(first, last)]


def test_a_paused_jobs_gpus_stay_idle_and_power_drops_by_its_power():
    c = cluster(hold=True)
    before = steps(c, 0, 5)[-1]
    assert c.sched.state.tolist() == [RUNNING, RUNNING, QUEUED]
    gpus_a = np.flatnonzero(c.sched.owner == A)
    p_gpu_a = float(c._gpu_w(np.array([A]), np.array([c.gpu.tdp_w]))[0])
    share_w = float(c._saving_w(np.array([8]), np.array([p_gpu_a]))[0])
    for out in steps(c, 5, 20, Knobs(pause_flexible_frac=1.0)):
        assert c.sched.state.tolist() == [PAUSED, RUNNING, QUEUED]  # C never gets A's GPUs
        np.testing.assert_array_equal(np.flatnonzero(c.sched.owner == A), gpus_a)
        assert c.sched.n_free == 0
        assert out["p_train_mw"] == pytest.approx(before["p_train_mw"] - share_w / 1e6, rel=1e-12)
        assert out["gpu_util_frac"] == pytest.approx(0.5)
    # after the event A resumes on the GPUs it kept, charged the checkpoint loss and the restore
    done_a = c.sched.work_done_s[A]
    steps(c, 20, 21)
    assert c.sched.state.tolist() == [RUNNING, RUNNING, QUEUED]
    np.testing.assert_array_equal(np.flatnonzero(c.sched.owner == A), gpus_a)
    assert c.sched.work_done_s[A] > done_a
    assert c.sched.extra_work_s[A] == c.restore_s
    assert c.sched.remaining_s[A] == pytest.approx(36_000.0 - c.sched.work_done_s[A] + c.checkpoint_loss_s
                                                   + c.restore_s)


def test_without_hold_the_queue_backfills_and_the_cut_is_lost():
    """The old behaviour, kept under ``hold_paused_gpus = false``: this is what the hold fixes."""
    c = cluster(hold=False)
    before = steps(c, 0, 5)[-1]
    out = steps(c, 5, 10, Knobs(pause_flexible_frac=1.0))[-1]
    assert c.sched.state.tolist() == [PAUSED, RUNNING, RUNNING]
    assert out["p_train_mw"] > before["p_train_mw"] - 1e-3  # C (0.7) draws about what A (0.8) did


@pytest.mark.parametrize("hold", [True, False])
def test_under_a_facility_limit_held_gpus_keep_the_queue_out(hold):
    """A limit 5 kW above the draw with A paused. Held: pausing A meets it, C waits, B runs
    uncapped. Without: C starts on A's GPUs next step and the limit is met by capping B and C."""
    probe = cluster(hold=True)
    steps(probe, 0, 5)
    limit_mw = steps(probe, 5, 6, Knobs(pause_flexible_frac=1.0))[-1]["p_mw"] + 0.005
    c = cluster(hold=hold)
    steps(c, 0, 5)
    outs = steps(c, 5, 30, Knobs(p_limit_mw=limit_mw))
    assert max(o["p_mw"] - limit_mw for o in outs) <= 1e-12
    assert c.sched.state[A] == PAUSED
    if hold:
        assert c.sched.state[C] == QUEUED
        assert outs[-1]["slowdown_gpu_h"] == 0.0
        assert outs[-1]["p_mw"] == pytest.approx(limit_mw - 0.005, rel=1e-12)
    else:
        assert c.sched.state[C] == RUNNING
        assert outs[-1]["slowdown_gpu_h"] > 0.0


def test_held_is_opt_in_so_earlier_results_stay():
    """Off by default: on, the published ``dr_event`` and ``emerald_london`` checks fail
    (more queueing delay; coarser tracking), see the README's "DR-held GPUs"."""
    from cosim.adapters.datacenter import TrainingParams

    assert TrainingParams().hold_paused_gpus is False
    assert TrainingParams(hold_paused_gpus=True).hold_paused_gpus is True


def test_held_gpus_are_idle_capacity_in_the_scheduling_outputs():
    """A's 8 held GPUs are idle (utilisation 0.5) though no queued job may take them: ``n_gpus_idle``
    (placeable) stays 0, ``n_gpus_held`` is 8, and ``p_train_idle_mw`` is their idle draw — each GPU's
    idle power plus its share of the node's idle non-GPU power (it read 0 before)."""
    c = cluster(hold=True, report=True)
    steps(c, 0, 5)
    out = steps(c, 5, 6, Knobs(pause_flexible_frac=1.0))[-1]
    per_gpu_w = c.gpu.idle_w + c.node.other_idle_w / c.node.gpus_per_node
    assert out["gpu_util_frac"] == pytest.approx(0.5)
    assert out["n_gpus_idle"] == 0.0 and out["n_gpus_held"] == 8.0
    assert out["p_train_idle_mw"] == pytest.approx(8 * per_gpu_w / 1e6, rel=1e-12)
