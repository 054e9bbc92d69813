"""Per-fleet batch control of the OFO (adapters/controllers/ofo/, ``fleets``): OpenG2G's
OFOBatchSizeController step (GPU-to-Grid, Liang et al., arXiv:2602.05116, Eqs. 7, 8, 18) on a
given sensitivity, checked by hand: the sign of each term, the feasible-size rounding, the
latency dual, and that without fleets the allowance controller's outputs are unchanged.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.adapters.controllers.ofo import FleetBatch, FleetControl, OFOController, OFOParams

ROWS = ["bus_671_a_vm_pu", "bus_671_b_vm_pu"]


def params(**extra) -> OFOParams:
    fleets = [{"name": "small", "model": "llama-3.1-8b", "n_replicas": 100, "itl_deadline_ms": 80.0},
              {"name": "big", "model": "llama-3.1-405b-fp8", "n_replicas": 10, "itl_deadline_ms": 120.0}]
    return OFOParams(network="ieee13", dc_bus="671", margin_pu=0.0, dual_decay_pu=0.0, dual_step_per_pu=1.0,
                     fleets=fleets, **extra)


def controller(**extra) -> OFOController:
    ctl = OFOController(params(**extra))
    ctl.set_sensitivity(ROWS, np.array([[-0.03], [-0.01]]))  # pu per unit allowance (p_flex_mw = 0.3 MW)
    ctl.dc_col = np.array([-0.1, -1 / 30])                   # pu per MW: more power, lower voltage
    return ctl


def test_undervoltage_lowers_every_batch_overvoltage_raises_it():
    low, high = controller(throughput_weight_frac=0.0, switch_weight_frac=0.0), controller(
        throughput_weight_frac=0.0, switch_weight_frac=0.0)
    for _ in range(5):
        low.update(0, {ROWS[0]: 0.94, ROWS[1]: 0.94})
        high.update(0, {ROWS[0]: 1.06, ROWS[1]: 1.06})
    assert all(f.x < math.log2(128) for f in low.fleets)
    assert all(f.x > math.log2(128) for f in high.fleets)
    assert low.u == 1.0 and high.u == 1.0  # the allowance is not the knob with fleets


def test_one_step_by_hand():
    """x <- x - rho_x (-w_T w r'/r_max + k_v eta (J/1000) w P'/1000 + mu ITL' + w_s (x - x_prev))."""
    ctl = controller()
    fleet = ctl.fleets[1]
    x0 = fleet.x
    dP = (fleet.power_w(x0 + 1e-3) - fleet.power_w(x0 - 1e-3)) / 2e-3
    dr = (fleet.tokens_per_s(x0 + 1e-3) - fleet.tokens_per_s(x0 - 1e-3)) / 2e-3
    ctl.update(0, {ROWS[0]: 0.94, ROWS[1]: 0.96})
    eta = -(0.95 - 0.94)                                    # lambda on row 0 only (row 1 in band)
    grad = -1e-3 * 10 * dr / fleet.r_max + 1e6 * eta * -0.1 / 1000 * 10 * dP / 1000
    assert grad > 0                                         # under-voltage: the batch goes down
    assert fleet.x == pytest.approx(x0 - 0.1 * grad, rel=1e-9)
    assert fleet.batch in fleet.sizes


def test_sizes_above_the_measured_curve_become_its_maximum_and_rounding_is_nearest():
    fleet = FleetBatch(FleetControl(name="q", model="qwen-3-30b-a3b", n_replicas=1, itl_deadline_ms=60.0))
    top = math.floor(fleet.curves.b_max)
    assert fleet.sizes.max() == top and fleet.batch == top      # 128 -> the 1-GPU curve's 88
    assert fleet._nearest(math.log2(40)) == 32 and fleet._nearest(math.log2(50)) == 64


def test_latency_dual_grows_only_over_the_deadline():
    fleet = FleetBatch(FleetControl(name="s", model="llama-3.1-8b", n_replicas=1, itl_deadline_ms=5.0))
    p = params()
    fleet.step(p, 0.0, 1.0)
    assert fleet.mu == pytest.approx(fleet.itl_s(math.log2(128)) - 0.005)
    relaxed = FleetBatch(FleetControl(name="s", model="llama-3.1-8b", n_replicas=1, itl_deadline_ms=500.0))
    relaxed.step(p, 0.0, 1.0)
    assert relaxed.mu == 0.0


def test_without_fleets_the_outputs_are_the_allowance_controllers():
    ctl = OFOController(OFOParams(network="ieee13", dc_bus="671"))
    ctl.set_sensitivity(ROWS, np.array([[-0.03], [-0.01]]))
    ctl.update(0, {ROWS[0]: 0.90, ROWS[1]: 0.96})
    out = ctl.outputs()
    assert not [k for k in out if k.startswith(("itl_", "n_itl"))] and ctl.u < 1.0
