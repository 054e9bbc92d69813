"""Fleet DR allocation (Carbon Responder): efficient vs fair splits, on hand-made curves and on
curves from the datacenter package's physics (Zeus cap curves, ML.ENERGY batch fits).

Invariants: both splits give exactly the MW asked when the fleet can; the efficient split
never loses more performance than the fair one for the same MW (Zhang et al. 2023, the
point of Carbon Responder's efficient policy); the fair split equalises relative loss.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.adapters.controllers.fleet_dr import (
    Curve, FleetDrSim, efficient_split, fair_split, inference_curve, training_curve,
)

START = {"start_utc": "2024-07-16T00:00:00+00:00", "step_s": 60, "duration_s": 3600, "seed": 1}


def linear(name, loss_per_mw, weight=1.0):
    """1 MW of power; performance falls by ``loss_per_mw`` per MW given."""
    return Curve(name, np.array([0.0, 1.0]), np.array([1.0 - loss_per_mw, 1.0]), np.array([0.0, 1.0]), weight)


def test_hand_computed_two_linear_workloads():
    a, b = linear("a", 1.0), linear("b", 0.5)
    eff, fair = efficient_split([a, b], 0.5), fair_split([a, b], 0.5)
    # efficient: all 0.5 MW from b (half the loss per MW): loss_b = 0.25, fleet 0.125
    assert eff.r_mw == pytest.approx([0.0, 0.5], abs=1e-9)
    assert eff.fleet_loss_frac == pytest.approx(0.125)
    # fair: r_a = l, r_b = 2 l, 3 l = 0.5 -> l = 1/6 each
    assert fair.r_mw == pytest.approx([1 / 6, 1 / 3])
    assert fair.loss_frac == pytest.approx([1 / 6, 1 / 6])
    assert fair.fleet_loss_frac == pytest.approx(1 / 6)


def test_asking_more_than_the_fleet_has_reports_the_shortfall():
    curves = [linear("a", 1.0), linear("b", 0.5)]
    for split in (efficient_split(curves, 2.5), fair_split(curves, 2.5)):
        assert split.r_mw == pytest.approx([1.0, 1.0])
        assert split.shortfall_mw == pytest.approx(0.5)


def physics_fleet(frac_a=0.7, frac_b=0.3):
    return [training_curve("big", "H100-SXM", 1024, frac_a), training_curve("small", "H100-SXM", 512, frac_b),
            inference_curve("chat", "llama-3.1-70b", "H100-SXM", 16, 128.0),
            inference_curve("code", "llama-3.1-8b", "H100-SXM", 32, 256.0)]


def test_curves_from_the_datacenter_physics():
    train = training_curve("t", "H100-SXM", 1000, 0.6)
    assert train.perf_frac[-1] == pytest.approx(1.0)
    assert np.all(np.diff(train.p_mw) >= 0)
    # at the 200 W floor 1000 GPUs draw 0.2 MW; uncapped 80 + 0.6 * 620 = 452 W each
    assert train.p_mw[0] == pytest.approx(0.2)
    assert train.p_mw[-1] == pytest.approx(0.452, rel=0.02)
    chat = inference_curve("c", "llama-3.1-8b", "H100-SXM", 10, 128.0)
    assert chat.perf_frac[-1] == 1.0 and chat.knob[-1] == pytest.approx(128.0)
    assert chat.r_max_mw > 0


@pytest.mark.parametrize("r_mw", [0.02, 0.1, 0.2, 0.3, 0.35])
def test_efficient_loses_no_more_than_fair_for_the_same_mw(r_mw):
    curves = physics_fleet()
    eff, fair = efficient_split(curves, r_mw), fair_split(curves, r_mw)
    assert eff.r_mw.sum() == pytest.approx(r_mw, abs=1e-6)
    assert fair.r_mw.sum() == pytest.approx(r_mw, abs=1e-6)
    assert eff.fleet_loss_frac <= fair.fleet_loss_frac + 1e-12
    assert eff.shortfall_mw == fair.shortfall_mw == 0.0
    if r_mw in (0.1, 0.2):  # where the curves differ most, the efficient split is clearly better
        assert eff.fleet_loss_frac < 0.95 * fair.fleet_loss_frac
    # fair: every workload not at its floor has the same relative loss
    free = fair.r_mw < np.array([c.r_max_mw for c in curves]) - 1e-9
    assert np.ptp(fair.loss_frac[free]) < 1e-6


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.floats(0.0, 1.0))
def test_efficient_never_worse_than_fair(frac_a, frac_b, share):
    curves = [training_curve("a", "H100-SXM", 256, frac_a), training_curve("b", "H100-SXM", 128, frac_b),
              inference_curve("c", "llama-3.1-8b", "H100-SXM", 8, 64.0)]
    r_mw = share * sum(c.r_max_mw for c in curves)
    eff, fair = efficient_split(curves, r_mw, n_grid=100), fair_split(curves, r_mw)
    assert eff.fleet_loss_frac <= fair.fleet_loss_frac + 1e-12
    assert eff.r_mw.sum() == pytest.approx(r_mw, abs=1e-6)


def test_adapter_writes_setpoints_for_each_workload():
    sim = FleetDrSim()
    sim.init("fleet", **START, workloads=[
        {"name": "train", "kind": "training", "n_gpus": 1024, "power_frac": 0.7},
        {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "replicas": 32, "batch": 256.0}])
    sim.create(1, "Allocator", eid="alloc", policy="efficient")
    sim.step(0, {"alloc": {"dr_reduction_mw": {"dr": 0.1}}}, 3600)
    out = sim.out["alloc"]
    assert out["r_train_mw"] + out["r_chat_mw"] == pytest.approx(0.1, abs=1e-6)
    assert 200.0 <= out["p_cap_train_w"] <= 700.0 and 1.0 <= out["n_batch_max_chat"] <= 256.0
    assert out["loss_efficient_frac"] <= out["loss_fair_frac"]
    sim.step(60, {}, 3600)  # no request: nothing given, nothing lost
    assert sim.out["alloc"]["dr_allocated_mw"] == 0.0 and sim.out["alloc"]["loss_efficient_frac"] == 0.0
    assert sim.out["alloc"]["p_cap_train_w"] == pytest.approx(700.0)
